"""From a run's config and metrics to the report's data (advisor.report.spec).

One way: ``suggest_run`` (diagnoses, diff) and ``check`` (batch layers, memory) -> panels and cards.
The healthy bands come from the metric catalog, threshold lines from the conditions of the rules that
fired; nothing here is a number of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.codes import MEMORY_NOT_ESTIMATED
from advisor.load import VerlConfig
from advisor.metrics import Catalog, load_catalog
from advisor.playbook import Condition, Diagnosis
from advisor.wildcard import matches

from .downsample import MAX_POINTS
from .panels import PANELS, TREE_PANEL, build_chart, evidence_chart, missing_note, source_of
from .spec import Card, Chart, EvidenceRow, Line, Panel, Report

if TYPE_CHECKING:
    import pandas as pd

    from advisor.checks import CheckReport
    from advisor.findings import Change
    from advisor.memory import GpuSpec
    from advisor.playbook import RunFacts, Suggestion

# condition tests whose `value` is a level on the metric's own axis (advisor/playbook/_conditions.py)
_LEVEL_TESTS = {"above": ">", "below": "<", "max_above": "max >", "at_most": "all <=", "at_least": "all >="}


def build_report(cfg: VerlConfig, metrics_path: str | Path, *, window: int | None = None, gpu: str | None = None,
                 gpu_memory_gib: float | None = None, model_config: str | None = None,
                 max_points: int = MAX_POINTS) -> Report:
    """Diagnose the run (as ``advisor suggest``), check the config (as ``advisor check``) and lay out the report."""
    from advisor.checks import check
    from advisor.memory import resolve_gpu
    from advisor.playbook import suggest_run

    gpu_spec = resolve_gpu(gpu, memory_gib=gpu_memory_gib) if (gpu or gpu_memory_gib) else None
    capacity = gpu_spec.memory_gib if gpu_spec else None
    suggestion = suggest_run(cfg, metrics_path, window=window, gpu_memory_gib=capacity, every_column=True)
    checked = check(cfg, model_config=model_config, gpu=gpu, gpu_memory_gib=gpu_memory_gib)
    return assemble(suggestion, checked, metrics_path=str(metrics_path), gpu=gpu_spec, model_config=model_config,
                    max_points=max_points)


def assemble(suggestion: Suggestion, checked: CheckReport, *, metrics_path: str, gpu: GpuSpec | None = None,
             model_config: str | None = None, max_points: int = MAX_POINTS) -> Report:
    """Lay out a Suggestion and a CheckReport (both already computed) as a Report."""
    catalog = load_catalog()
    frame = suggestion.metrics.data if suggestion.metrics is not None else None
    if frame is None:
        raise ValueError("the Suggestion holds no metrics frame; build it with suggest_run")
    cfg, facts = suggestion.config, suggestion.facts
    capacity = gpu.memory_gib if gpu is not None else None
    panels = _panels(frame, catalog, facts, max_points)
    by_id = {p.id: p for p in panels}
    cards = [_card(d, suggestion) for d in suggestion.diagnoses]
    for d, card in zip(suggestion.diagnoses, cards, strict=True):
        panel = by_id[TREE_PANEL.get(d.rule.tree, "policy")]
        card.panel = (panel if panel.hidden is None else by_id["policy"]).id
        by_id[card.panel].cards.append(card)
        _link_evidence(card, frame, catalog, by_id[card.panel], panels, max_points)
        _threshold_lines(d, panels, capacity)
    _capacity_line(by_id["performance"], gpu)
    window = suggestion.window
    steps = frame.index
    report = Report(
        title=f"advisor report: {cfg.get('trainer.experiment_name') or Path(metrics_path).name}",
        config_path=cfg.path or "(verl defaults)", metrics_path=metrics_path, verl_version=cfg.version,
        mode=_mode(facts), window=(window.first_step, window.last_step, window.size),
        steps=(int(steps[0]), int(steps[-1]), len(steps)) if len(steps) else (0, 0, 0),
        verdict=suggestion.verdict, decided_by=suggestion.decided_by.id if suggestion.decided_by else None,
        overrides=list(suggestion.overrides),
        alternatives=[[c.override() for c in alt] for alt in suggestion.alternatives],
        notes=[*suggestion.warnings, *suggestion.notes], panels=panels, cards=cards,
        batch_words=list(checked.batch.words),
        gpu=(gpu.name, gpu.memory_gib) if gpu is not None else None, frame=frame,
    )
    _memory(report, checked, cfg, model_config, gpu)
    from advisor.diff import edit_for

    edit = edit_for(cfg, suggestion.changes)
    if edit is not None and edit.changed:
        report.edit = (edit.path, edit.diff())
    return report


def _mode(facts: RunFacts) -> str:
    mode = {"ppo": "PPO with a critic", "grpo": f"{facts.estimator} (group estimator, no critic)"}.get(
        facts.mode, facts.estimator)
    kl = {"reward": "KL in the reward", "loss": "KL in the loss", "both": "KL in reward and loss",
          "none": "no KL"}[facts.kl_placement]
    return f"{mode}, {kl}"


def _panels(frame: pd.DataFrame, catalog: Catalog, facts: RunFacts, max_points: int) -> list[Panel]:
    panels = []
    for spec in PANELS:
        panel = Panel(spec.id, spec.title)
        if spec.needs_critic and not facts.critic:
            panel.hidden = (f"no critic in this run (adv_estimator={facts.estimator}): verl trains a value model "
                            "only for GAE or with critic.enable=true")
        else:
            for chart_spec in spec.charts:
                chart = build_chart(frame, catalog, chart_spec, max_points)
                if chart is None:
                    panel.notes.append(missing_note(catalog, chart_spec))
                else:
                    panel.charts.append(chart)
        panels.append(panel)
    return panels


def _shows(chart: Chart, metric: str) -> bool:
    names = chart.metrics + ([chart.total.name] if chart.total is not None else [])
    return any(matches(n, metric) for n in names) if "*" in metric else metric in names


def find_chart(panels: list[Panel], metric: str) -> Chart | None:
    for panel in panels:
        if panel.hidden is None:
            for chart in panel.charts:
                if _shows(chart, metric):
                    return chart
    return None


def _link_evidence(card: Card, frame: pd.DataFrame, catalog: Catalog, home: Panel, panels: list[Panel],
                   max_points: int) -> None:
    """Point each evidence row at its chart, drawing one in the card's panel when no panel has it."""
    for row in card.evidence:
        chart = find_chart(panels, row.metric)
        if chart is None:
            chart = evidence_chart(frame, catalog, row.metric, max_points)
            if chart is None:
                continue
            chart.title = f"{row.metric} (evidence)"
            home.charts.append(chart)
        row.chart = chart.id
        if card.id not in chart.diagnoses:
            chart.diagnoses.append(card.id)


def _conditions(conds: tuple[Condition, ...]) -> Iterator[Condition]:
    for cond in conds:
        yield cond
        for group in cond.any_of:
            yield from _conditions(group)


def _threshold_lines(d: Diagnosis, panels: list[Panel], capacity: float | None) -> None:
    """The levels the rule's conditions compare the metric with, drawn on the metric's own chart."""
    harm = tuple(c for group in d.rule.harm.any_of for c in group) if d.rule.harm else ()
    for cond in _conditions(d.rule.conditions + harm):
        if cond.metric is None:
            continue
        chart = find_chart(panels, cond.metric)
        if chart is None:
            continue
        lines: list[Line] = []
        if cond.test in _LEVEL_TESTS and "value" in cond.args:
            lines.append(Line(float(cond.args["value"]), f"{d.id}: {_LEVEL_TESTS[cond.test]} {cond.args['value']:g}",
                              "threshold"))
        elif cond.test == "outside":
            lines += [Line(float(cond.args[k]), f"{d.id}: {k} {cond.args[k]:g}", "threshold")
                      for k in ("low", "high") if cond.args.get(k) is not None]
        elif cond.test == "gpu_fraction_above" and capacity:
            value = float(cond.args["value"])
            lines.append(Line(value * capacity, f"{d.id}: > {value:.0%} of the GPU", "threshold"))
        for line in lines:
            if line not in chart.lines:
                chart.lines.append(line)


def _capacity_line(panel: Panel, gpu: GpuSpec | None) -> None:
    memory = next((c for c in panel.charts if any(m.startswith("perf/max_memory_") for m in c.metrics)), None)
    if memory is None:
        return
    if gpu is None:
        panel.notes.append("GPU capacity not drawn on peak GPU memory: pass --gpu NAME or --gpu-memory-gib N")
        return
    memory.lines.append(Line(gpu.memory_gib, f"{gpu.name}: {gpu.memory_gib:.1f} GiB", "capacity"))


def _card(d: Diagnosis, suggestion: Suggestion) -> Card:
    catalog = load_catalog()
    evidence = [EvidenceRow(e.metric, e.value, e.early, e.healthy or _catalog_healthy(catalog, e.metric),
                            source_of(catalog, e.metric), None) for e in d.evidence]
    role, changes = _diff_for(d, suggestion)
    return Card(d.id, d.rule.name, d.severity, d.rule.tree, d.summary, d.rule.rationale, list(d.rule.checks),
                evidence, role, [c.override() for c in changes], list(changes))


def _catalog_healthy(catalog: Catalog, metric: str) -> str:
    info = catalog.lookup(metric)
    return info.healthy.describe() if info and info.healthy else ""


def _signature(changes: Sequence[Change]) -> tuple[tuple[str, str], ...]:
    return tuple((c.key, repr(c.new)) for c in changes)


def _diff_for(d: Diagnosis, suggestion: Suggestion) -> tuple[str, list[Change]]:
    """The diff a card proposes: the chosen one, else its own first fix that suggest validated.

    Roles: "decides" (this diagnosis chose the diff), "shares" (its fix is the chosen diff), "alternative"
    (a ranked alternative), "no-fix" (its remedy is outside the config, or no fix of it keeps the config valid).
    """
    if d is suggestion.decided_by:
        return ("decides", list(suggestion.changes)) if suggestion.changes else ("no-fix", [])
    validated = [list(suggestion.changes), *suggestion.alternatives]
    for _, changes in d.fixes:
        head = _signature(changes)
        for i, candidate in enumerate(validated):
            if candidate and _signature(candidate)[: len(head)] == head:
                return ("shares" if i == 0 else "alternative"), candidate
    return "no-fix", []


def _memory(report: Report, checked: CheckReport, cfg: VerlConfig, model_config: str | None,
            gpu: GpuSpec | None) -> None:
    from advisor.checks import model_facts

    estimate = checked.memory
    if estimate is not None:
        report.memory_title = (f"GPU memory per phase: {estimate.model.name} on {estimate.gpu.name} "
                               f"({estimate.gpu_memory_gib:.0f} GiB)")
        report.memory_rows = estimate.rows()
        return
    if model_facts(cfg, model_config) is None:
        path = cfg.get("actor_rollout_ref.model.path")
        report.memory_note = (f"memory table left out: the model ({path}) is not one advisor knows "
                              "(knowledge/models.yaml); pass --model-config with its config.json")
    elif gpu is None:
        report.memory_note = "memory table left out: pass --gpu NAME (e.g. H100-80GB) to predict memory per phase"
    else:
        reason = next((f.message for f in checked.findings if f.id == MEMORY_NOT_ESTIMATED.id),
                      "the memory model gave no estimate")
        report.memory_note = f"memory table left out: {reason}"
