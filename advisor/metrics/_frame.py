"""The result of reading a run's metrics: one wide frame indexed by step, plus how it was read."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from ._table import StepTable

MetricsFormat = Literal["jsonl", "console", "tensorboard", "wandb-csv", "wandb-jsonl", "flat-jsonl"]
FORMATS: tuple[MetricsFormat, ...] = ("jsonl", "console", "tensorboard", "wandb-csv", "wandb-jsonl", "flat-jsonl")
_MAX_EXAMPLES = 20


@dataclass(frozen=True)
class VersionHint:
    """The verl versions whose metric names and log format match what was read.

    ``lower`` is inclusive and ``upper`` exclusive (``>=0.4.1,<0.6.0``); either may be None.
    ``consistent`` is False when two pieces of evidence contradict each other (a log mixing versions).
    """

    lower: str | None
    upper: str | None
    consistent: bool
    evidence: tuple[str, ...]

    @property
    def spec(self) -> str:
        parts = []
        if self.lower:
            parts.append(f">={self.lower}")
        if self.upper:
            parts.append(f"<{self.upper}")
        return ",".join(parts) or "any"

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "lower": self.lower,
            "upper": self.upper,
            "consistent": self.consistent,
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True)
class Restart:
    """Steps went back: the run was restarted (or files were concatenated) at this point."""

    line: int
    """line (console, JSONL), row (CSV) or event number (TensorBoard) where the step went back, 1-based"""
    from_step: int
    """the last step before the restart"""
    to_step: int
    """the first step after it"""
    rows_replaced: int
    """rows of earlier segments set aside: those with a step after ``to_step`` (a resume re-ran them), every one
    (a relaunch: another run), or the segment's own rows (validation only)"""
    kind: str = "resume"
    """``resume``: the run went on from a checkpoint (steps after ``to_step`` replaced); ``relaunch``: a new run
    from the first step (every earlier row is another run's, set aside); ``validation-only``: a relaunch that
    logged only validation (verl's ``val_before_train`` row) and trained no step: its rows are set aside"""
    earlier_first_step: int | None = None
    """a relaunch: the first step of the run it set aside"""

    def to_dict(self) -> dict[str, int | str | None]:
        return {
            "line": self.line,
            "from_step": self.from_step,
            "to_step": self.to_step,
            "rows_replaced": self.rows_replaced,
            "kind": self.kind,
            "earlier_first_step": self.earlier_first_step,
        }

    def describe(self) -> str:
        """The segment set aside, in words (one clause)."""
        if self.kind == "relaunch":
            return (f"an earlier run (steps {self.earlier_first_step}-{self.from_step}, before line {self.line}) "
                    f"set aside: a relaunch starts over at step {self.to_step}")
        if self.kind == "validation-only":
            return (f"a relaunch's validation-only row (step {self.to_step}, line {self.line}) set aside: it trained "
                    "no step")
        return (f"resumed at step {self.to_step} after step {self.from_step} (line {self.line}); "
                f"{self.rows_replaced} re-run rows replaced")


@dataclass(frozen=True)
class MetricFrame:
    """A run's metrics: ``data`` is a DataFrame indexed by step, one float64 column per metric.

    The index (``step``) is int64, sorted and unique; a missing or null value is NaN. Rows are every
    step verl logged, validation-only rows (step 0 ``val-core/...``) included. Column names are the
    current verl names (see ``aliases``); the metadata says how the file was read. ``table`` holds the
    same values as numpy arrays; ``data`` is built from it on first use (pandas is imported only then).
    """

    table: StepTable
    format: MetricsFormat
    path: str
    lines_read: int
    """candidate records looked at: non-blank JSONL lines, console step lines, CSV data rows, scalar events"""
    records: int
    """step records parsed, before restarts and duplicate steps were resolved"""
    lines_skipped: int
    """lines that looked like records but could not be used (garbage, cut, no step)"""
    skip_reasons: Mapping[str, int]
    skipped_examples: tuple[tuple[int | None, str], ...]
    """the first few skipped lines as (line number or None when unknown, reason)"""
    other_lines: int
    """what is expected and not a record: a console log's other output, non-scalar TensorBoard events"""
    restarts: tuple[Restart, ...]
    aliases: Mapping[str, str]
    """logged name -> current name, for every column that was renamed"""
    scaled: Mapping[str, float]
    """current name -> factor its logged values were multiplied by (``actor/lr(1e-4)``)"""
    version_hint: VersionHint | None
    all_nan_columns: tuple[str, ...]
    """metrics with no finite value in the whole run"""
    dropped_columns: tuple[str, ...]
    """fields that held no numbers (strings, tables, histograms) and were left out"""
    normalizations: tuple[str, ...] = ()
    """semantic changes applied after reading (see ``normalize_loss_sums``), one sentence each"""
    warnings: tuple[str, ...] = ()
    logged_metrics: tuple[str, ...] = ()
    """every metric the run logged, first-logged order, when ``load_metrics(columns=...)`` kept the values of
    some only; empty when every metric is in ``table``"""

    @cached_property
    def data(self) -> pd.DataFrame:
        return self.table.to_pandas()

    @property
    def metrics(self) -> list[str]:
        return list(self.table.names)

    @property
    def all_metrics(self) -> list[str]:
        """Every metric the run logged (current names), whether or not its values were kept."""
        return list(self.logged_metrics) if self.logged_metrics else list(self.table.names)

    @property
    def steps(self) -> np.ndarray:
        return self.table.steps

    @property
    def all_nan(self) -> bool:
        """True when the frame holds rows but not one finite value (the reader returns it, flagged)."""
        return len(self.all_nan_columns) == len(self.all_metrics)

    def __contains__(self, metric: object) -> bool:
        return metric in self.table

    def __getitem__(self, metric: str) -> pd.Series:
        return self.data[metric]

    def to_dict(self) -> dict[str, Any]:
        """The metadata as plain JSON types (no values; those are in ``data``)."""
        steps = self.table.steps
        return {
            "format": self.format,
            "path": self.path,
            "steps": len(steps),
            "first_step": int(steps[0]) if len(steps) else None,
            "last_step": int(steps[-1]) if len(steps) else None,
            "metrics": len(self.all_metrics),
            "lines_read": self.lines_read,
            "records": self.records,
            "lines_skipped": self.lines_skipped,
            "skip_reasons": dict(self.skip_reasons),
            "skipped_examples": [{"line": line, "reason": reason} for line, reason in self.skipped_examples],
            "other_lines": self.other_lines,
            "restarts": [r.to_dict() for r in self.restarts],
            "aliases": dict(self.aliases),
            "scaled": dict(self.scaled),
            "version_hint": self.version_hint.to_dict() if self.version_hint else None,
            "all_nan": self.all_nan,
            "all_nan_columns": list(self.all_nan_columns),
            "dropped_columns": list(self.dropped_columns),
            "normalizations": list(self.normalizations),
            "warnings": list(self.warnings),
        }


@dataclass
class ReadLog:
    """What a reader saw, filled in while it reads."""

    lines_read: int = 0
    records: int = 0
    other_lines: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: list[tuple[int | None, str]] = field(default_factory=list)
    features: set[str] = field(default_factory=set)
    """format markers seen (keys of format_markers in knowledge/metric_aliases.yaml)"""
    dropped_columns: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)

    def skip(self, line: int | None, reason: str, count: int = 1) -> None:
        self.skipped[reason] += count
        if len(self.examples) < _MAX_EXAMPLES:
            self.examples.append((line, reason))

    @property
    def lines_skipped(self) -> int:
        return sum(self.skipped.values())
