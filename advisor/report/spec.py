"""What a report shows, as plain data: panels of charts, diagnosis cards, the batch and memory tables.

Built by :mod:`advisor.report.build` from a Suggestion and a CheckReport; read by the HTML and PNG
renderers, which decide nothing. Tests check the page against these objects and their inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from advisor.findings import Change


@dataclass(frozen=True)
class Band:
    """A healthy range from the metric catalog (either bound may be open)."""

    low: float | None
    high: float | None
    source: str

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{self.low:g} to {self.high:g}"
        return f">= {self.low:g}" if self.low is not None else f"<= {self.high:g}"


@dataclass(frozen=True)
class Line:
    """A horizontal reference line: a rule's threshold, or the GPU's memory."""

    value: float
    label: str
    kind: str  # "threshold" | "capacity"


@dataclass
class Series:
    name: str
    steps: np.ndarray
    values: np.ndarray
    points: int  # finite points before downsampling


@dataclass
class Chart:
    id: str  # the HTML anchor
    title: str
    kind: str  # "line" | "stacked"
    series: list[Series]
    band: Band | None = None
    lines: list[Line] = field(default_factory=list)
    total: Series | None = None  # for stacked charts: the step total, drawn as a line over the stack
    sources: dict[str, str] = field(default_factory=dict)  # metric -> verl file:line
    diagnoses: list[str] = field(default_factory=list)  # ids of the diagnoses that cite it

    @property
    def metrics(self) -> list[str]:
        return [s.name for s in self.series]


@dataclass
class EvidenceRow:
    metric: str
    value: float
    early: float
    healthy: str
    source: str
    chart: str | None  # anchor of the chart that shows it


@dataclass
class Card:
    """One diagnosis: what fired, why it matters, what it rests on, and the diff."""

    id: str
    name: str
    severity: str
    tree: str
    summary: str
    explanation: str
    checks: list[str]
    evidence: list[EvidenceRow]
    role: str  # "decides" | "alternative" | "no-fix"
    overrides: list[str]
    changes: list[Change]  # old -> new, reason
    panel: str = ""


@dataclass
class Panel:
    id: str
    title: str
    charts: list[Chart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one line per chart left out
    hidden: str | None = None  # why the whole panel is hidden
    cards: list[Card] = field(default_factory=list)


@dataclass
class Report:
    title: str
    config_path: str
    metrics_path: str
    verl_version: str
    mode: str
    window: tuple[int, int, int]  # first step, last step, steps
    steps: tuple[int, int, int]  # first step, last step, records
    verdict: str
    decided_by: str | None
    overrides: list[str]
    alternatives: list[list[str]]
    notes: list[str]
    panels: list[Panel]
    cards: list[Card]
    batch_words: list[str]
    memory_title: str | None = None
    memory_rows: list[dict[str, Any]] | None = None
    memory_note: str | None = None
    gpu: tuple[str, float] | None = None  # name, GiB
    edit: tuple[str, str] | None = None  # (file, unified diff): the chosen diff as an edit of the user's file
    frame: pd.DataFrame | None = field(default=None, repr=False)  # the step-indexed metrics the charts were drawn from

    @property
    def charts(self) -> list[Chart]:
        return [c for p in self.panels if p.hidden is None for c in p.charts]

    @property
    def shown_panels(self) -> list[Panel]:
        return [p for p in self.panels if p.hidden is None]


def y_range(chart: Chart) -> tuple[float, float]:
    """The y-axis range: the data, reaching to the nearest edge of a healthy band it misses, and every line.

    A band far from the data is shown only up to its nearest edge so the data keeps the height of the
    chart; rule thresholds and the GPU's capacity are always in view (they are the point of the chart).
    """
    if chart.kind == "stacked":
        tops = np.sum([s.values for s in chart.series], axis=0) if chart.series else np.array([0.0])
        values = [np.array([0.0]), tops] + ([chart.total.values] if chart.total is not None else [])
    else:
        values = [s.values for s in chart.series]
    data = np.concatenate([v[np.isfinite(v)] for v in values]) if values else np.array([])
    lo, hi = (float(data.min()), float(data.max())) if data.size else (0.0, 1.0)
    band = chart.band
    if band is not None:
        if band.high is not None and lo > band.high:
            lo = band.high
        if band.low is not None and hi < band.low:
            hi = band.low
    for line in chart.lines:
        lo, hi = min(lo, line.value), max(hi, line.value)
    pad = (hi - lo) * 0.06 or max(abs(hi) * 0.1, 1e-3)
    return lo - pad, hi + pad
