"""One source of truth for healthy ranges: the catalog's band is the one the rules judge and the report
shades; a figure that holds only for some model or GPU is never shaded; evidence never shows a firing value
inside the range it is judged against."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from advisor import load_config
from advisor.metrics._catalog import load_catalog
from advisor.playbook._rule_loader import load_playbook
from advisor.playbook._suggest import suggest_run

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
RUNS = sorted(p.parent for p in EXAMPLES.glob("*/metrics.jsonl"))
# rule bands that differ from the catalog's on purpose
JUDGED_ELSEWHERE = {
    ("RW003", "actor/grad_norm"): "judged against the config's grad_clip (1.0 by default), not a general range",
    ("CF005", "actor/grad_norm"): "judged against the config's grad_clip (1.0 by default), not a general range",
}


def test_rules_judge_the_catalogs_band() -> None:
    catalog = load_catalog()
    for rule in load_playbook():
        for metric, band in rule.healthy.items():
            info = catalog.lookup(metric)
            if info is None or info.healthy is None or (band.get("low") is None and band.get("high") is None):
                continue
            if (rule.id, metric) in JUDGED_ELSEWHERE:
                continue
            assert (band.get("low"), band.get("high")) == (info.healthy.low, info.healthy.high), \
                f"{rule.id} judges {metric} against {band}, the catalog says {info.healthy}"


def test_vf_explained_var_has_one_bound_everywhere() -> None:
    catalog = load_catalog().lookup("critic/vf_explained_var").healthy
    rules = {r.id: r.healthy["critic/vf_explained_var"] for r in load_playbook()
             if "critic/vf_explained_var" in r.healthy}
    assert set(rules) >= {"CR001", "CR002"}
    thresholds = {c.args["value"] for r in load_playbook() if r.id == "CR001" for c in r.conditions
                  if c.metric == "critic/vf_explained_var" and c.test == "below"}
    assert {catalog.low} == {b["low"] for b in rules.values()} == thresholds == {0.3}


def test_scoped_figures_are_never_shaded() -> None:
    pytest.importorskip("plotly")
    from advisor.report import build_report

    run = EXAMPLES / "generation_bound"
    built = build_report(load_config(run / "run.sh"), run / "metrics.jsonl")
    catalog = load_catalog()
    assert catalog.lookup("perf/throughput").healthy.scope  # < 50 tokens/s/GPU is slow only for a 7B model
    shaded = [c for c in built.charts if c.band is not None]
    assert shaded, "some chart keeps its band"
    for chart in built.charts:
        metrics = [s.name for s in chart.series if hasattr(s, "name")]
        scoped = [m for m in metrics if (i := catalog.lookup(m)) and i.healthy and i.healthy.scope]
        assert chart.band is None or not scoped, (chart.title, scoped)


def _inside(value: float, band: str) -> bool:
    if m := re.fullmatch(r"(-?[\d.e+-]+)\.\.(-?[\d.e+-]+)", band):
        return float(m[1]) <= value <= float(m[2])
    if m := re.fullmatch(r"(>=|<=|>|<) (-?[\d.e+-]+)", band):
        bound = float(m[2])
        return {">=": value >= bound, "<=": value <= bound, ">": value > bound, "<": value < bound}[m[1]]
    raise AssertionError(f"unreadable band {band!r}")


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_evidence_never_shows_a_firing_level_inside_its_band(run: Path) -> None:
    result = suggest_run(load_config(run / "run.sh"), run / "metrics.jsonl")
    for d in result.diagnoses:
        levels = {c.metric for c in d.rule.conditions if c.test in ("above", "below", "at_most", "at_least")}
        for e in d.evidence:
            if e.metric in levels and e.healthy and e.value == e.value:
                assert not _inside(e.value, e.healthy), f"{d.id}: {e.metric} {e.value} (healthy {e.healthy})"
