"""advisor report: the page for every bundled example, checked against its inputs.

Expectations come from the inputs, not from the page: which metrics the JSONL logs (read here with
json), the metric catalog's healthy ranges, ``suggest_run``'s diagnoses and diff, ``explain``'s batch
sentences and the memory model's phases.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import math
from functools import cache
from html import unescape
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _report_html import Node, parse

from advisor import load_config
from advisor.facts._batch import batch_plan, explain
from advisor.metrics._catalog import load_catalog
from advisor.playbook._suggest import suggest_run
from advisor.report import build_report
from advisor.report.html import render_html

pytest.importorskip("plotly")

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
RUNS = sorted(p.parent.name for p in EXAMPLES.glob("*/metrics.jsonl"))
GPU = "H100-80GB"

# the panels and metrics issue 7 asks for; "timing_s/gen" stands for the stacked stage chart
ISSUE_PANELS = {
    "training": ("critic/score/mean", "critic/rewards/mean", "val-core/*"),
    "policy": ("actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/entropy", "actor/kl_loss"),
    "critic": ("critic/vf_loss", "critic/vf_explained_var", "critic/values/mean"),
    "performance": ("perf/throughput", "perf/mfu/actor", "timing_s/gen", "perf/max_memory_allocated_gb"),
    "lengths": ("response_length/mean", "response_length/clip_ratio", "prompt_length/mean", "prompt_length/clip_ratio"),
}


def array(value: Any) -> list[float]:
    """A trace's x or y: a list, or plotly's base64 typed array ({"dtype": "f8", "bdata": ...})."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"])).tolist()
    return list(value)


def logged(path: Path) -> set[str]:
    """Metric names with at least one finite number in a verl file-logger JSONL."""
    names = set()
    for line in path.read_text().splitlines():
        if line.strip():
            for key, value in json.loads(line)["data"].items():
                if isinstance(value, (int, float)) and math.isfinite(value):
                    names.add(key)
    return names


class Page:
    def __init__(self, html: str) -> None:
        self.html = html
        self.dom = parse(html)
        self.figures = json.loads(self.dom.by_id("report-figures").text)

    def panel(self, pid: str) -> Node:
        return self.dom.find_all("section", data_panel=pid)[0]

    def charts(self, node: Node | None = None) -> list[Node]:
        return (node or self.dom).find_all("div", cls="chart-box")

    def figure(self, box: Node) -> dict[str, Any]:
        return self.figures[int(box.find_all("div", cls="plot")[0].attrs["data-fig"])]


@cache
def rendered(name: str, gpu: str | None = GPU) -> tuple[Any, Any, Page]:
    cfg = load_config(EXAMPLES / name / "run.sh")
    metrics = EXAMPLES / name / "metrics.jsonl"
    report = build_report(cfg, metrics, gpu=gpu)
    return cfg, report, Page(render_html(report))


def expected_suggestion(name: str) -> Any:
    from advisor.memory import resolve_gpu

    cfg = load_config(EXAMPLES / name / "run.sh")
    return suggest_run(cfg, EXAMPLES / name / "metrics.jsonl", gpu_memory_gib=resolve_gpu(GPU).memory_gib)


def _shows(box: Node, metric: str) -> bool:
    return any(fnmatch.fnmatchcase(m, metric) for m in box.attrs["data-metrics"].split())


@pytest.mark.parametrize("name", RUNS)
def test_every_panel_whose_metrics_exist_is_drawn_and_the_others_carry_a_note(name: str) -> None:
    cfg, _, page = rendered(name)
    have = logged(EXAMPLES / name / "metrics.jsonl")
    critic = cfg.get("algorithm.adv_estimator") == "gae" or bool(cfg.get("critic.enable"))
    for pid, metrics in ISSUE_PANELS.items():
        section = page.panel(pid)
        if pid == "critic" and not critic:
            assert not page.charts(section)
            assert "no critic" in section.find_all("p", cls="hidden-note")[0].text
            continue
        notes = [li.text for li in section.find_all("li", cls="note")]
        for metric in metrics:
            present = any(fnmatch.fnmatchcase(m, metric) for m in have)
            boxes = [b for b in page.charts(section) if _shows(b, metric)]
            if present:
                assert boxes, f"{name}: no chart for {metric} in {pid}"
            else:
                assert not boxes and any(metric.split("*")[0] in n and "not logged" in n for n in notes)


@pytest.mark.parametrize("name", RUNS)
def test_bands_are_the_catalogs_healthy_ranges(name: str) -> None:
    catalog = load_catalog()
    _, _, page = rendered(name)
    checked = 0
    for box in page.charts():
        metrics = box.attrs["data-metrics"].split()
        # a range that holds only for some model or GPU (scope) is never shaded
        ranges = {(h.low, h.high) if (h := getattr(catalog.lookup(m), "healthy", None)) and not h.scope else None
                  for m in metrics}
        band = next(iter(ranges)) if len(ranges) == 1 else None
        if band is None:
            assert "data-band-low" not in box.attrs, box.attrs["id"]
            continue
        low, high = band
        assert box.attrs["data-band-low"] == ("" if low is None else repr(low))
        assert box.attrs["data-band-high"] == ("" if high is None else repr(high))
        shapes = page.figure(box)["layout"].get("shapes", [])
        rects = [s for s in shapes if s.get("type") == "rect" and s.get("xref") == "x domain"]
        assert len(rects) <= 1
        for rect in rects:  # clipped to the plotted range, never beyond the band
            assert low is None or rect["y0"] >= low
            assert high is None or rect["y1"] <= high
        checked += 1
    kl_loss = "actor/kl_loss" in logged(EXAMPLES / name / "metrics.jsonl")  # not logged without use_kl_loss
    assert checked >= (8 if kl_loss else 7)  # score, clipfrac, ppo_kl, entropy, kl_loss, throughput, mfu, clip ratios


@pytest.mark.parametrize("name", RUNS)
def test_every_chart_shades_the_diagnosis_window(name: str) -> None:
    window = expected_suggestion(name).window
    _, report, page = rendered(name)
    assert len(page.figures) == len(page.charts()) == len(report.charts)
    for fig in page.figures:
        vrects = [s for s in fig["layout"]["shapes"] if s.get("yref") == "y domain"]
        assert any(s["x0"] <= window.first_step and s["x1"] >= window.last_step for s in vrects)
    text = unescape(page.dom.by_id("report-figures").text)
    assert text.count("diagnosis window") == len(page.figures)


@pytest.mark.parametrize("name", RUNS)
def test_each_diagnosis_is_shown_with_its_evidence_sources_and_diff(name: str) -> None:
    catalog = load_catalog()
    suggestion = expected_suggestion(name)
    _, _, page = rendered(name)
    cards = page.dom.find_all("article", cls="card")
    assert sorted(c.attrs["id"] for c in cards) == sorted(f"diag-{d.id}" for d in suggestion.diagnoses)
    validated = {tuple(suggestion.overrides), *(tuple(c.override() for c in alt) for alt in suggestion.alternatives)}
    for d in suggestion.diagnoses:
        card = page.dom.by_id(f"diag-{d.id}")
        assert card is not None and card.attrs["data-severity"] == d.severity
        text = card.text
        assert d.summary in text and d.rule.rationale in text
        links = {a.text: a.attrs["href"][1:] for a in card.find_all("a")}
        for e in d.evidence:
            assert e.metric in text
            assert catalog.lookup(e.metric).source in text
            box = page.dom.by_id(links[e.metric])  # the evidence links to the chart that draws it
            assert "chart-box" in box.classes and _shows(box, e.metric)
        # the card sits in a panel beside at least one chart of its evidence
        section = next(s for s in page.dom.find_all("section", cls="panel") if card in list(s.iter()))
        assert any(_shows(b, e.metric) for b in page.charts(section) for e in d.evidence)
        if d is suggestion.decided_by and suggestion.changes:
            diff = page.dom.by_id(f"diff-{d.id}").text
            assert all(o in diff for o in suggestion.overrides)
            assert page.dom.find_all("button", cls="copy", data_copy=f"diff-{d.id}")
        elif (pre := page.dom.by_id(f"diff-{d.id}")) is not None:  # another card shows a validated diff only
            assert tuple(pre.text.split(" \\\n")) in validated
    if suggestion.changes:
        chosen = page.dom.by_id("diff-chosen").text
        assert chosen.replace(" \\\n", "\n").split("\n") == suggestion.overrides
    else:
        assert page.dom.by_id("diff-chosen") is None


def test_threshold_lines_come_from_the_rules_that_fired() -> None:
    _, _, page = rendered("kl_spike_loss")
    box = page.dom.by_id("chart-actor-ppo_kl")
    lines = [s for s in page.figure(box)["layout"]["shapes"] if s.get("type") == "line"]
    kl001 = next(r for r in expected_suggestion("kl_spike_loss").diagnoses if r.id == "KL001").rule
    values = [c.args["value"] for g in kl001.harm.any_of for c in g  # the harm: ppo_kl far out of band
              if c.metric == "actor/ppo_kl" and "value" in c.args]
    assert values and sorted(s["y0"] for s in lines) == sorted(values)


@pytest.mark.parametrize("name", ["kl_spike_loss", "ppo_critic_not_learning"])
def test_batch_layers_and_memory_table(name: str) -> None:
    from advisor.memory import estimate_memory

    cfg, _, page = rendered(name)
    batch = [li.text for li in page.dom.by_id("batch").find_all("li")]
    assert batch == explain(batch_plan(cfg))
    rows = page.dom.by_id("memory").find_all("tr")[1:]
    assert [r.find_all("td")[0].text for r in rows] == [s.stage for s in estimate_memory(cfg, gpu=GPU).stages]
    memory = page.dom.by_id("chart-peak-GPU-memory-GiB")
    capacity = [s for s in page.figure(memory)["layout"]["shapes"] if s.get("type") == "line"]
    assert any(math.isclose(s["y0"], estimate_memory(cfg, gpu=GPU).gpu_memory_gib) for s in capacity)


def test_memory_table_left_out_with_a_note_without_gpu_or_for_an_unknown_model() -> None:
    _, _, page = rendered("kl_spike_loss", gpu=None)
    assert not page.dom.by_id("memory").find_all("table")
    assert "--gpu" in page.dom.by_id("memory").text
    assert any("GPU capacity not drawn" in li.text for li in page.panel("performance").find_all("li", cls="note"))
    cfg = load_config(EXAMPLES / "kl_spike_loss" / "run.sh", ["actor_rollout_ref.model.path=/models/our-own-llm"])
    unknown = Page(render_html(build_report(cfg, EXAMPLES / "kl_spike_loss" / "metrics.jsonl", gpu=GPU)))
    note = unknown.dom.by_id("memory").text
    assert not unknown.dom.by_id("memory").find_all("table")
    assert "/models/our-own-llm" in note and "--model-config" in note


def test_the_page_is_self_contained() -> None:
    _, _, page = rendered("lr_too_high")
    scripts = page.dom.find_all("script")
    assert scripts and all("src" not in s.attrs for s in scripts)
    assert not page.dom.find_all("link") and "<script src=" not in page.html and "<link " not in page.html
    assert "window.SvgPlot" in page.html  # the chart renderer is inlined
    # nothing of plotly.js (4.6 MB) and none of plotly's style template (~10 KB a chart) rides along
    assert "Plotly.newPlot" not in page.html and '"template"' not in page.html


def test_a_1000_step_report_stays_under_1_mb(tmp_path: Path) -> None:
    # the size a team channel or e-mail takes; bench/bench_report.py prints the figure for the full metric set.
    # 1,000 steps of lr_too_high's last training row, every value wobbling so no series is constant
    last = json.loads((EXAMPLES / "lr_too_high" / "metrics.jsonl").read_text().splitlines()[-1])["data"]
    log = tmp_path / "metrics.jsonl"
    rows = ({"step": step, "data": {k: v * (1 + 0.01 * math.sin(step)) for k, v in last.items()}}
            for step in range(1, 1001))
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    html = render_html(build_report(load_config(EXAMPLES / "lr_too_high" / "run.sh"), log))
    assert len(html.encode()) < 1_000_000


def test_missing_metrics_leave_their_chart_out_with_one_line(tmp_path: Path) -> None:
    source = EXAMPLES / "kl_spike_loss"
    dropped = ("actor/kl_loss", "val-core/", "timing_s/", "perf/mfu/")
    lines = []
    for line in (source / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["data"] = {k: v for k, v in rec["data"].items() if not k.startswith(dropped)}
        if rec["data"]:
            lines.append(json.dumps(rec))
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("\n".join(lines) + "\n")
    report = build_report(load_config(source / "run.sh"), metrics)
    page = Page(render_html(report))
    notes = [li.text for li in page.dom.find_all("li", cls="note")]
    for metric in ("actor/kl_loss", "val-core/*", "timing_s/*", "perf/mfu/actor"):
        assert sum(n.startswith(f"{metric} not logged") for n in notes) == 1, (metric, notes)
        assert not [b for b in page.charts() if _shows(b, metric)]
    assert len(page.charts()) == len(report.charts) == len(page.figures)


def test_a_100k_step_run_is_downsampled_without_hiding_a_spike(tmp_path: Path) -> None:
    n, spike_step = 100_000, 73_911
    metrics = tmp_path / "metrics.jsonl"
    with metrics.open("w") as f:
        for step in range(1, n + 1):
            kl = 0.004 + 0.0005 * math.sin(step / 50)
            f.write(json.dumps({"step": step, "data": {
                "actor/ppo_kl": 0.9 if step == spike_step else kl, "critic/score/mean": 0.5,
                "actor/entropy": 0.6 + 0.1 * math.cos(step / 300)}}) + "\n")
    cfg = load_config(EXAMPLES / "healthy_grpo" / "run.sh")
    report = build_report(cfg, metrics)
    page = Page(render_html(report))
    for fig in page.figures:
        for trace in fig["data"]:
            assert len(array(trace["x"])) == len(array(trace["y"])) <= 2000
    box = page.dom.by_id("chart-actor-ppo_kl")
    trace = page.figure(box)["data"][0]
    x, y = array(trace["x"]), array(trace["y"])
    assert max(y) == 0.9 and x[y.index(0.9)] == spike_step
