"""Read a running trial's metrics as they are written: verl's ``file`` logger JSONL or its console lines.

Both readers are incremental: each :meth:`MetricsTail.poll` reads only the bytes appended since the last
one and keeps a partial last line for the next call. A file that shrinks was truncated (verl's
``FileLogger`` opens its file with ``"wb"``, so a restarted run starts it over) and is read again from
the start.

Formats (``../shared/research/verl-internals.md`` §5.2, §5.3):

- ``jsonl``: ``{"step": N, "data": {"metric": value, ...}}`` per line; NaN and infinity are ``null``.
- ``console``: ``step:N - key:value - key:value ...``, possibly behind a Ray prefix
  ``(TaskRunner pid=123)`` and ANSI colours; values are ``pprint`` reprs such as ``np.float64(0.12)``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from advisor.metrics import LineSplitter
from advisor.wildcard import wildcard

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RAY_PREFIX = re.compile(r"^\([^)]*\)\s*")
_STEP = re.compile(r"^step:(\d{1,18})\s*-\s*")  # 19 digits and more: past int64, no real step
_NUMPY_WRAP = re.compile(r"^np\.\w+\((.*)\)$")
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


MAX_LINE = 1 << 20  # bytes of one metrics line; verl's longest (every metric of a step) is a few KiB
_MAX_NAMES = 10_000  # metric names remembered for "did you mean" (verl logs a few hundred)
_READ = 8 << 20  # bytes read per poll: a trial that writes gigabytes at once is read in bounded pieces


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
    """One verl console line -> (step, metrics); None when the line is not a metrics line."""
    text = _RAY_PREFIX.sub("", _ANSI.sub("", line).strip())
    m = _STEP.match(text)
    if not m:
        return None
    data: dict[str, float | None] = {}
    for item in text[m.end():].split(" - "):
        key, sep, raw = item.rpartition(":")
        if not sep or not key.strip():
            continue
        raw = raw.strip()
        wrapped = _NUMPY_WRAP.match(raw)
        if wrapped:
            raw = wrapped.group(1)
        if raw in ("True", "False"):
            data[key.strip()] = 1.0 if raw == "True" else 0.0
            continue
        if raw.lower() in ("nan", "inf", "-inf", "+inf"):
            data[key.strip()] = None
            continue
        number = _NUMBER.match(raw)
        if number:
            data[key.strip()] = float(number.group(0))
    return int(m.group(1)), data


def parse_jsonl_line(line: str) -> tuple[int, dict[str, float | None]] | None:
    """One ``file``-logger line -> (step, metrics); None for a line that is not a record."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # garbage, a 4,300-digit integer, a line of 1,000 '['
        return None
    if not isinstance(record, dict) or not isinstance(record.get("step"), int) or \
            not isinstance(record.get("data"), dict):
        return None
    return record["step"], {str(k): _number(v) for k, v in record["data"].items()}


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
        self._lines = LineSplitter(MAX_LINE)
        self.tracked = set(metrics)
        self.patterns = {m: wildcard(m) for m in self.tracked if "*" in m}
        self.series: dict[str, dict[int, float | None]] = {m: {} for m in self.tracked}
        self.seen: set[str] = set()
        self.last_step: int | None = None
        self._offset = 0

    def _reset(self) -> None:
        self.series = {m: {} for m in self.tracked}
        self.last_step = None
        self._offset = 0
        self._lines.reset()

    def poll(self) -> bool:
        """Read what was appended (in pieces of at most 8 MiB); True when a new record arrived."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return False
        if size < self._offset:
            self._reset()
        changed = False
        with self.path.open("rb") as fp:
            fp.seek(self._offset)
            while self._offset < size:
                chunk = fp.read(min(size - self._offset, _READ))
                if not chunk:
                    break
                self._offset += len(chunk)
                changed = self._take(chunk) or changed
        return changed

    @property
    def skipped(self) -> int:
        """Records ignored: an over-long line, or a step below 0, past max_step or going back."""
        return self._lines.dropped + self._bad_steps

    def _take(self, chunk: bytes) -> bool:
        lines = self._lines.feed(chunk)
        parse = parse_jsonl_line if self.fmt == "jsonl" else parse_console_line
        changed = False
        for raw in lines:
            record = parse(raw.decode("utf-8", errors="replace"))
            if record is None:
                continue
            step, data = record
            if step < 0 or (self.max_step is not None and step > self.max_step) or \
                    (self.last_step is not None and step < self.last_step):
                # step 99999999999999999999 of a 10-step trial is not a step it ran; a step going back without
                # the file starting over (verl's FileLogger truncates it on a restart) rewrites a judged one
                self._bad_steps += 1
                continue
            if len(self.seen) < _MAX_NAMES:
                self.seen.update(data)
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

    def values(self, metric: str, up_to_step: int | None = None) -> list[float | None]:
        """The metric's logged values in step order (step 0, verl's pre-training validation, excluded)."""
        points = self.series.get(metric, {})
        return [points[s] for s in sorted(points) if s >= 1 and (up_to_step is None or s <= up_to_step)]

    def steps(self, metric: str) -> list[int]:
        return sorted(s for s in self.series.get(metric, {}) if s >= 1)
