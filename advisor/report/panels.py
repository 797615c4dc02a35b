"""Which panels and charts a report holds, and from which metrics: data, no plotting.

Five panels (issue 7): training progress, policy update, critic quality (PPO with a critic only),
performance, and response/prompt length. A chart is drawn when at least one of its metrics holds a
finite value; otherwise its panel carries a one-line note saying which metric was not logged and,
from the metric catalog, when verl logs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from advisor.metrics import Catalog, HealthyRange
from advisor.wildcard import matching

from .downsample import MAX_POINTS, downsample, minmax_indices
from .spec import Band, Chart, Series

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ChartDef:
    metrics: tuple[str, ...]  # names, or globs such as val-core/*
    title: str = ""
    kind: str = "line"
    total: str | None = None  # stacked charts: the metric their stages add up to


@dataclass(frozen=True)
class PanelDef:
    id: str
    title: str
    charts: tuple[ChartDef, ...]
    needs_critic: bool = False


# timing_s/* stages inside timing_s/step (verl/trainer/ppo/ray_trainer.py:1388-1619): everything but the
# total itself and what the catalog places outside the step (profiling 1365/1657, validation 1627,
# checkpoints 1650). Deeper names (timing_s/agent_loop/...) break generation down and would count it twice.
STAGE_PATTERN = re.compile(r"^timing_s/([^/]+)$")
NOT_A_STAGE = frozenset({"step", "testing", "save_checkpoint", "start_profile", "stop_profile"})

PANELS: tuple[PanelDef, ...] = (
    PanelDef("training", "Training progress", (
        ChartDef(("critic/score/mean",)),
        ChartDef(("critic/rewards/mean",)),
        ChartDef(("val-core/*",), "validation (val-core/*)"),
    )),
    PanelDef("policy", "Policy update", (
        ChartDef(("actor/pg_loss",)),
        ChartDef(("actor/pg_clipfrac",)),
        ChartDef(("actor/ppo_kl",)),
        ChartDef(("actor/entropy",)),
        ChartDef(("actor/kl_loss",)),
    )),
    PanelDef("critic", "Critic quality", (
        ChartDef(("critic/vf_loss",)),
        ChartDef(("critic/vf_explained_var",)),
        ChartDef(("critic/values/mean", "critic/returns/mean"), "values vs returns"),
    ), needs_critic=True),
    PanelDef("performance", "Performance", (
        ChartDef(("perf/throughput",)),
        ChartDef(("perf/mfu/actor",)),
        ChartDef(("timing_s/*",), "time per stage (timing_s/*, stacked)", kind="stacked", total="timing_s/step"),
        ChartDef(("perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb"), "peak GPU memory (GiB)"),
    )),
    PanelDef("lengths", "Response and prompt length", (
        ChartDef(("response_length/mean", "response_length/max", "response_length/min"), "response length (tokens)"),
        ChartDef(("response_length/clip_ratio",)),
        ChartDef(("prompt_length/mean", "prompt_length/max", "prompt_length/min"), "prompt length (tokens)"),
        ChartDef(("prompt_length/clip_ratio",)),
    )),
)

# where a diagnosis' card goes: the panel of its playbook tree (advisor/playbook/_rule_loader.py TREES)
TREE_PANEL = {
    "numerics": "policy", "reward": "training", "response_length": "lengths", "kl": "policy",
    "advantage": "training", "critic": "critic", "clipfrac": "policy", "entropy": "policy",
    "validation": "training", "memory": "performance", "throughput": "performance",
}


def chart_id(name: str) -> str:
    """An HTML anchor for a chart: ``actor/ppo_kl`` -> ``chart-actor-ppo_kl``."""
    return "chart-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")


def _finite(frame: pd.DataFrame, column: str) -> bool:
    return bool(np.isfinite(frame[column].to_numpy(dtype=float)).any())


def columns(frame: pd.DataFrame, names: tuple[str, ...]) -> list[str]:
    """The frame's columns for each name or glob, in order, that hold a finite value."""
    out: list[str] = []
    for name in names:
        if "*" in name:
            hits = matching((str(c) for c in frame.columns), name)
        else:
            hits = [name] if name in frame.columns else []
        out.extend(c for c in hits if c not in out and _finite(frame, c))
    return out


def stage_columns(frame: pd.DataFrame) -> list[str]:
    cols = columns(frame, ("timing_s/*",))
    return [c for c in cols if (m := STAGE_PATTERN.match(c)) and m.group(1) not in NOT_A_STAGE]


def catalog_band(catalog: Catalog, metrics: list[str]) -> Band | None:
    """The catalog's healthy range when every metric of the chart has the same general one (none with a scope)."""
    ranges = {(h.low, h.high, h.source) if (h := _healthy(catalog, m)) and not h.scope else None for m in metrics}
    if len(ranges) != 1 or None in ranges:
        return None
    low, high, source = next(iter(ranges))  # type: ignore[misc]
    return Band(low, high, source)


def _healthy(catalog: Catalog, metric: str) -> HealthyRange | None:
    info = catalog.lookup(metric)
    return info.healthy if info else None


def source_of(catalog: Catalog, metric: str) -> str:
    info = catalog.lookup(metric)
    return info.source if info else "not in the metric catalog"


def missing_note(catalog: Catalog, chart: ChartDef) -> str:
    """One line: which metric is absent and when verl logs it."""
    name = chart.metrics[0]
    info = catalog.lookup(name)
    why = f"verl logs it when {info.when}" if info and info.when else "not in this run's metrics"
    return f"{name} not logged: {why}"


def _series(frame: pd.DataFrame, column: str, max_points: int) -> Series:
    values = frame[column].to_numpy(dtype=float)
    steps = np.asarray(frame.index, dtype=np.int64)
    s, v = downsample(steps, values, max_points)
    return Series(column, s, v, int(np.isfinite(values).sum()))


def _stacked(frame: pd.DataFrame, stages: list[str], total: str | None,
             max_points: int) -> tuple[list[Series], Series | None]:
    """Stages on shared steps, so they stack; the steps kept are the min/max of the step total."""
    block = frame[stages].to_numpy(dtype=float)
    rows = np.isfinite(block).any(axis=1)
    steps = np.asarray(frame.index, dtype=np.int64)[rows]
    block = np.nan_to_num(block[rows], nan=0.0, posinf=0.0, neginf=0.0)
    key = block.sum(axis=1)
    total_series = None
    if total and total in frame.columns:
        t = frame[total].to_numpy(dtype=float)[rows]
        key = np.where(np.isfinite(t), t, key)  # downsample by the total so its spikes survive
    keep = minmax_indices(key, max_points)
    series = [Series(name, steps[keep], block[keep, i], int(rows.sum())) for i, name in enumerate(stages)]
    if total and total in frame.columns and _finite(frame, total):
        total_series = _series(frame, total, max_points)
    return series, total_series


def build_chart(frame: pd.DataFrame, catalog: Catalog, spec: ChartDef, max_points: int = MAX_POINTS) -> Chart | None:
    """The chart for ``spec`` from a step-indexed frame, or None when none of its metrics was logged."""
    if spec.kind == "stacked":
        stages = stage_columns(frame)
        if not stages:
            return None
        series, total = _stacked(frame, stages, spec.total, max_points)
        chart = Chart(chart_id(spec.title or spec.metrics[0]), spec.title, "stacked", series, total=total)
    else:
        cols = columns(frame, spec.metrics)
        if not cols:
            return None
        title = spec.title or cols[0]
        chart = Chart(chart_id(spec.metrics[0] if len(spec.metrics) == 1 else title), title, "line",
                      [_series(frame, c, max_points) for c in cols])
        chart.band = catalog_band(catalog, cols)
    chart.sources = {s.name: source_of(catalog, s.name) for s in chart.series}
    if chart.total is not None:
        chart.sources[chart.total.name] = source_of(catalog, chart.total.name)
    return chart


def evidence_chart(frame: pd.DataFrame, catalog: Catalog, metric: str, max_points: int = MAX_POINTS) -> Chart | None:
    """A chart for a diagnosis' evidence metric that no panel draws (grad norms, advantages, ...)."""
    return build_chart(frame, catalog, ChartDef((metric,)), max_points)
