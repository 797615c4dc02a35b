"""Step records as readers produce them, and their assembly into one frame indexed by step.

Every reader returns :class:`Records`: one row per logged record in file order, one float64 column
per metric name. :func:`assemble` resolves restarts (steps going back) and repeated steps into the
sorted, unique step index of a :class:`~advisor.metrics.MetricFrame`.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._frame import Restart
from ._nan import LOGGED_NAN
from ._table import StepTable, merge_repeated_steps

if TYPE_CHECKING:
    import numpy as np

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


@dataclass
class Records:
    """Logged records in file order: ``values[i, j]`` is metric ``names[j]`` at record ``i`` (NaN: absent;
    ``LOGGED_NAN``: logged as NaN/null, see ``_nan``)."""

    steps: np.ndarray  # int64, shape (n,)
    names: list[str]
    values: np.ndarray  # float64, shape (n, len(names)); Fortran order so each metric is contiguous
    line_of: Callable[[np.ndarray], np.ndarray] | None = None
    """maps record indices to 1-based line numbers; None: record i is on line i + 1"""
    unread: dict[str, bool] = field(default_factory=dict)
    """metrics logged but not kept (the reader was asked for other columns) -> whether one held a finite value"""
    logged: list[str] | None = None
    """every numeric metric name, kept or not, in first-logged order; None: ``names``"""

    @property
    def all_names(self) -> list[str]:
        return self.logged if self.logged is not None else self.names

    def __len__(self) -> int:
        return int(self.steps.shape[0])

    def lines(self, indices: np.ndarray) -> np.ndarray:
        return self.line_of(indices) if self.line_of is not None else indices + 1


class RecordBuilder:
    """Collects records one value at a time (console lines, TensorBoard events, JSON fallbacks)."""

    def __init__(self, keep: Callable[[str], bool] | None = None) -> None:
        self._keep = keep
        self._logged: dict[str, None] = {}
        self._unread: dict[str, bool] = {}
        self._steps = array("q")
        self._lines = array("q")
        self._rec = array("q")
        self._col = array("q")
        self._val = array("d")
        self._index: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._steps)

    def start(self, step: int, line: int) -> None:
        """Open a record; following ``add`` calls fill it. ``step`` must fit in int64."""
        self._steps.append(step)
        self._lines.append(line)

    def add(self, name: str, value: float) -> None:
        """A value of the open record; a NaN is a logged NaN (an absent metric is never added)."""
        if value != value:
            value = LOGGED_NAN
        col = self._index.get(name)
        if col is None:
            self._logged.setdefault(name)
            if self._keep is not None and not self._keep(name):
                self._unread[name] = self._unread.get(name, False) or value - value == 0.0  # finite
                return
            col = self._index[name] = len(self._index)
        self._rec.append(len(self._steps) - 1)
        self._col.append(col)
        self._val.append(value)

    def build(self) -> Records:
        import numpy as np

        n = len(self._steps)
        values = np.full((n, len(self._index)), np.nan, order="F")
        if len(self._val):
            # repeated (record, metric) pairs: numpy assigns in order, so the last value wins
            values[np.frombuffer(self._rec, dtype=np.int64), np.frombuffer(self._col, dtype=np.int64)] = (
                np.frombuffer(self._val, dtype=np.float64)
            )
        lines = np.frombuffer(self._lines, dtype=np.int64).copy() if n else np.zeros(0, dtype=np.int64)
        steps = np.frombuffer(self._steps, dtype=np.int64).copy() if n else np.zeros(0, dtype=np.int64)
        return Records(steps, list(self._index), values, line_of=lambda idx: lines[idx], unread=self._unread,
                       logged=list(self._logged) if self._unread else None)


def concat_records(parts: Sequence[Records]) -> Records:
    """One :class:`Records` from several read in order (the union of their metrics)."""
    import numpy as np

    unread: dict[str, bool] = {}
    for part in parts:
        for name, finite in part.unread.items():
            unread[name] = unread.get(name, False) or finite
    logged = list(dict.fromkeys(name for part in parts for name in part.all_names)) if unread else None
    parts = [p for p in parts if len(p)]
    if len(parts) == 1 and not unread:
        return parts[0]
    index: dict[str, int] = {}
    for part in parts:
        for name in part.names:
            index.setdefault(name, len(index))
    total = sum(len(p) for p in parts)
    values = np.full((total, len(index)), np.nan, order="F")
    steps = np.empty(total, dtype=np.int64)
    lines = np.empty(total, dtype=np.int64)
    row = 0
    for part in parts:
        n = len(part)
        cols = [index[name] for name in part.names]
        values[row : row + n, cols] = part.values
        steps[row : row + n] = part.steps
        lines[row : row + n] = part.lines(np.arange(n))
        row += n
    return Records(steps, list(index), values, line_of=lambda idx: lines[idx], unread=unread, logged=logged)


def assemble(records: Records) -> tuple[StepTable, tuple[Restart, ...]]:
    """Resolve restarts and repeated steps; return the table indexed by step and the restarts found.

    A record whose step is lower than the one before starts a new segment (verl restarted from a
    checkpoint, or logs were concatenated). A segment replaces every earlier record with a higher step
    than its first one: those steps were re-run. Records with the same step (the resumed run's
    validation at the checkpoint step, or one step logged in pieces) merge; the later value wins.
    """
    import numpy as np

    steps = records.steps
    values = records.values
    restarts: list[Restart] = []
    back = np.flatnonzero(steps[1:] < steps[:-1]) + 1
    if back.size:
        starts = np.concatenate(([0], back))
        firsts = steps[starts]
        # lowest first step of any *later* segment; the last segment is never cut
        later = np.minimum.accumulate(firsts[::-1])[::-1]
        later = np.append(later[1:], INT64_MAX)
        segment = np.zeros(len(steps), dtype=np.int64)
        segment[back] = 1
        segment = np.cumsum(segment)
        keep = steps <= later[segment]
        lines = records.lines(back)
        for k, start in enumerate(back):
            to_step = int(steps[start])
            replaced = int(np.count_nonzero(steps[:start] > to_step))
            restarts.append(Restart(int(lines[k]), int(steps[start - 1]), to_step, replaced))
        steps = steps[keep]
        values = values[keep]
    steps, values = merge_repeated_steps(steps, values)
    if values.strides[0] != values.itemsize:  # each metric contiguous (a streaming reader's buffer is already)
        values = np.asfortranarray(values)
    return StepTable(steps, tuple(records.names), values), tuple(restarts)
