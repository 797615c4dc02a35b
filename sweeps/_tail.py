"""Read a running trial's metrics as they are written: verl's ``file`` logger JSONL or its console lines.

Both readers are incremental: each :meth:`MetricsTail.poll` reads only the bytes appended since the last
one and keeps a partial last line for the next call. The file is followed as ``advisor watch`` follows one
(:class:`advisor.watch.FileTail`): a file that shrinks was truncated (verl's ``FileLogger`` opens its file
with ``"w"``, so a restarted run starts it over) and a file moved away and created again was rotated; either
way the new content is read from its start, and the steps read so far are forgotten (the run started over).

A value that goes non-finite after finite values (NaN or inf; ``null`` in the ``file`` logger's JSON) is a
divergence (:attr:`MetricsTail.diverged`) when the metric is one a run is judged on: the objective, a
constraint, a loss (``actor/pg_loss``, ``critic/vf_loss``, ...) or a validation metric (``val-core/*``).

Formats (``../shared/research/verl-internals.md`` §5.2, §5.3):

- ``jsonl``: ``{"step": N, "data": {"metric": value, ...}}`` per line; NaN and infinity are ``null``.
- ``console``: ``step:N - key:value - key:value ...``, possibly behind a Ray prefix
  ``(TaskRunner pid=123)`` and ANSI colours; values are ``pprint`` reprs such as ``np.float64(0.12)``. Read with
  advisor's console grammar (``advisor.metrics.parse_metrics_line``), the one ``advisor suggest`` reads a log with.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.metrics import parse_metrics_line
from advisor.watch import FileTail
from advisor.wildcard import wildcard

_MAX_NAMES = 10_000  # metric names remembered for "did you mean" (verl logs a few hundred)
_MAX_READS = 64  # FileTail reads 8 MiB at a time: at most 512 MiB per poll, so a flood cannot hold the driver
_LOSS = re.compile(r"(?:^|/)[^/]*loss[^/]*$")  # actor/pg_loss, actor/kl_loss, critic/vf_loss
_VALIDATION = ("val-core/", "val-aux/")


@dataclass(frozen=True)
class Divergence:
    """The first judged metric that went non-finite after finite values, and where."""

    step: int
    metric: str
    value: str  # "NaN", "inf", "-inf", "null" (the file logger's NaN or inf), "NaN or inf" (console)

    def describe(self) -> str:
        return f"diverged at step {self.step}: {self.metric} became {self.value} after finite values"

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "metric": self.metric, "value": self.value}


def _nonfinite(value: Any) -> str | None:
    """How a JSON value is non-finite ("null", "NaN", "inf", "-inf"), or None when it is not."""
    if value is None:
        return "null"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("inf" if value > 0 else "-inf")
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an integer of 400 digits
            return None
        return number if math.isfinite(number) else None
    return None


def parse_console_line(line: str) -> tuple[int, dict[str, float | None]] | None:
    """One verl console line -> (step, metrics), a non-finite value (``nan``, ``inf``) as None; None when the line
    is not a metrics line. Read by advisor's console grammar (``advisor.metrics.parse_metrics_line``: the one that
    ``advisor suggest`` and ``advisor watch`` read a console log with)."""
    parsed = parse_metrics_line(line, "console")
    if parsed is None:
        return None
    step, values = parsed
    return step, {key: value if math.isfinite(value) else None for key, value in values.items()}


def _jsonl_record(line: str) -> tuple[int, dict[Any, Any]] | None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # garbage, a 4,300-digit integer, a line of 1,000 '['
        return None
    if not isinstance(record, dict) or not isinstance(record.get("step"), int) or \
            not isinstance(record.get("data"), dict):
        return None
    return record["step"], record["data"]


def parse_jsonl_line(line: str) -> tuple[int, dict[str, float | None]] | None:
    """One ``file``-logger line -> (step, metrics); None for a line that is not a record."""
    record = _jsonl_record(line)
    if record is None:
        return None
    return record[0], {str(k): _number(v) for k, v in record[1].items()}


def _parse_with_nonfinite(line: str, fmt: str) -> tuple[int, dict[str, float | None], dict[str, str]] | None:
    """(step, metrics, how each non-finite metric was written) of one line."""
    if fmt == "jsonl":
        record = _jsonl_record(line)
        if record is None:
            return None
        step, raw = record
        bad = {str(k): kind for k, v in raw.items() if (kind := _nonfinite(v)) is not None}
        return step, {str(k): _number(v) for k, v in raw.items()}, bad
    parsed = parse_console_line(line)
    if parsed is None:
        return None
    step, data = parsed
    return step, data, {k: "NaN or inf" for k, v in data.items() if v is None}


class MetricsTail:
    """Follow one metrics file and keep the series of the metrics a sweep reads.

    Args:
        path: the file (it may not exist yet).
        fmt: ``"jsonl"`` or ``"console"``.
        metrics: the metric names whose values are kept (every name seen is still remembered, for
            "did you mean" messages). A name with ``*`` is a pattern (``val-core/*/mean@*``): its value at a
            step is the mean of the finite values of every metric it matches there (verl names validation
            metrics after each data source).
    """

    def __init__(self, path: Path, fmt: str, metrics: Iterable[str], max_step: int | None = None) -> None:
        if fmt not in ("jsonl", "console"):
            raise ValueError(f"unknown metrics format {fmt!r}")
        self.path = Path(path)
        self.fmt = fmt
        self.max_step = max_step  # the trial's trainer.total_training_steps: a step past it is not one it ran
        self._bad_steps = 0  # a step below 0, past max_step, or going back
        self._file = FileTail(self.path)
        self._starts = 0  # truncations + rotations seen: the steps may start over after one
        self.tracked = set(metrics)
        self.patterns = {m: wildcard(m) for m in self.tracked if "*" in m}
        self.series: dict[str, dict[int, float | None]] = {m: {} for m in self.tracked}
        self.seen: set[str] = set()
        self.last_step: int | None = None
        self.diverged: Divergence | None = None
        self._finite: set[str] = set()  # judged metrics that had a finite value
        self.last_record_at = time.monotonic()  # when the last metrics line arrived (or the tail began)

    def poll(self) -> bool:
        """Read what was appended; True when a new record arrived.

        Raises:
            MetricsError: the path is not a regular file (a FIFO, a device, a directory).
        """
        changed = False
        for _ in range(_MAX_READS):
            before = self._file.bytes_read
            lines = self._file.poll()
            starts = self._file.truncations + self._file.rotations
            if starts != self._starts:  # the file started over (a restarted verl run): so do its steps
                self._starts, self.last_step = starts, None
                self.series = {m: {} for m in self.tracked}
            changed = self._take(lines) or changed
            if self._file.bytes_read == before:
                break
        return changed

    def close(self) -> None:
        self._file.close()

    def _judged(self, metric: str) -> bool:
        """A metric whose going non-finite is a divergence: tracked (objective, constraints), a loss, validation."""
        return metric in self.tracked or metric.startswith(_VALIDATION) or _LOSS.search(metric) is not None or \
            any(p.fullmatch(metric) for p in self.patterns.values())

    @property
    def skipped(self) -> int:
        """Records ignored: an over-long line, or a step below 0, past max_step or going back."""
        return self._file.dropped_lines + self._bad_steps

    def _take(self, lines: list[bytes]) -> bool:
        changed = False
        for raw in lines:
            record = _parse_with_nonfinite(raw.decode("utf-8", errors="replace"), self.fmt)
            if record is None:
                continue
            step, data, nonfinite = record
            if step < 0 or (self.max_step is not None and step > self.max_step) or \
                    (self.last_step is not None and step < self.last_step):
                # step 99999999999999999999 of a 10-step trial is not a step it ran; a step going back without
                # the file starting over (verl's FileLogger truncates it on a restart) rewrites a judged one
                self._bad_steps += 1
                continue
            self.last_record_at = time.monotonic()
            if len(self.seen) < _MAX_NAMES:
                self.seen.update(data)
            self._watch_divergence(step, data, nonfinite)
            for metric in self.tracked.intersection(data):
                self.series[metric][step] = data[metric]
                changed = True
            for metric, pattern in self.patterns.items():
                hits = [v for k, v in data.items() if v is not None and pattern.fullmatch(k)]
                if hits:
                    self.series[metric][step] = sum(hits) / len(hits)
                    changed = True
            self.last_step = step if self.last_step is None else max(self.last_step, step)
        return changed

    def _watch_divergence(self, step: int, data: dict[str, float | None], nonfinite: dict[str, str]) -> None:
        if self.diverged is None:
            for metric, how in nonfinite.items():
                if metric in self._finite and self._judged(metric):
                    self.diverged = Divergence(step, metric, how)
                    break
        if len(self._finite) < _MAX_NAMES:
            self._finite.update(k for k, v in data.items() if v is not None and self._judged(k))

    def values(self, metric: str, up_to_step: int | None = None) -> list[float | None]:
        """The metric's logged values in step order (step 0, verl's pre-training validation, excluded)."""
        points = self.series.get(metric, {})
        return [points[s] for s in sorted(points) if s >= 1 and (up_to_step is None or s <= up_to_step)]

    def steps(self, metric: str) -> list[int]:
        return sorted(s for s in self.series.get(metric, {}) if s >= 1)
