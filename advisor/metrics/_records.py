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

from advisor import limits
from advisor.verl import VALIDATION_PREFIXES

from ._frame import Restart
from ._nan import LOGGED_NAN, is_missing
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
    """Split the records into runs, keep the last; return the table indexed by step and what was set aside.

    A record whose step is lower than the one before starts a new segment. A segment that logged only validation
    (a relaunch's ``val_before_train`` row, after which it died) trained nothing: it is set aside, not a run. A
    segment that starts at or below every step before it is a relaunch, a run of its own: every earlier record is
    another run's and is set aside (the last run is judged alone). Any other is a resume from a checkpoint: it
    replaces every earlier record with a higher step than its first one (those steps were re-run). Records with
    the same step (the resumed run's validation at the checkpoint step, or one step logged in pieces) merge; the
    later value wins.
    """
    import numpy as np

    steps = records.steps
    values = records.values
    restarts: list[Restart] = []
    back = np.flatnonzero(steps[1:] < steps[:-1]) + 1
    if back.size:
        lines = records.lines(np.arange(len(steps)))
        keep = np.ones(len(steps), dtype=bool)
        training = _training_rows(records)
        bounds = [*back.tolist(), len(steps)]
        for start, end in zip(back.tolist(), bounds[1:], strict=True):
            if not training[start:end].any():  # validation only: set aside, not a run
                keep[start:end] = False
                if len(restarts) < limits.RESTARTS_NAMED:
                    restarts.append(Restart(int(lines[start]), int(steps[start - 1]), int(steps[start]),
                                            end - start, kind="validation-only"))
        steps, values, lines = steps[keep], values[keep], lines[keep]
        runs, first = _runs(steps, lines)
        restarts.extend(runs)
        kept = _last_run(steps, first)
        steps, values = steps[kept], values[kept]
    steps, values = merge_repeated_steps(steps, values)
    if values.strides[0] != values.itemsize:  # each metric contiguous (a streaming reader's buffer is already)
        values = np.asfortranarray(values)
    return StepTable(steps, tuple(records.names), values), tuple(sorted(restarts, key=lambda r: r.line))


def _training_rows(records: Records) -> np.ndarray:
    """Rows that logged anything but validation (a NaN logged counts: the step ran)."""
    import numpy as np

    train_cols = [j for j, name in enumerate(records.names) if not name.startswith(VALIDATION_PREFIXES)]
    if not train_cols:
        return np.ones(len(records), dtype=bool)
    present: np.ndarray = ~is_missing(records.values[:, train_cols])
    return np.asarray(present.any(axis=1), dtype=bool)


def _runs(steps: np.ndarray, lines: np.ndarray) -> tuple[list[Restart], int]:
    """The restarts of steps already cleared of validation-only segments (relaunches and resumes), and the row
    the last run starts at. Linear: a relaunch starts at or below every step before it (the running minimum);
    only the first ``limits.RESTARTS_NAMED`` restarts are described (and their replaced rows counted)."""
    import numpy as np

    back = np.flatnonzero(steps[1:] < steps[:-1]) + 1
    if not back.size:
        return [], 0
    lowest = np.minimum.accumulate(steps)
    relaunch = steps[back] <= lowest[back - 1]
    last_start = int(back[relaunch][-1]) if relaunch.any() else 0
    out: list[Restart] = []
    run_start = 0
    for k, start in enumerate(back[: limits.RESTARTS_NAMED].tolist()):
        to_step = int(steps[start])
        if relaunch[k]:
            out.append(Restart(int(lines[start]), int(steps[start - 1]), to_step, start - run_start,
                               kind="relaunch", earlier_first_step=int(lowest[start - 1])))
            run_start = start
        else:
            replaced = int(np.count_nonzero(steps[run_start:start] > to_step))
            out.append(Restart(int(lines[start]), int(steps[start - 1]), to_step, replaced))
    return out, last_start


def _last_run(steps: np.ndarray, first: int) -> np.ndarray:
    """Which rows the last run (from row ``first``) keeps: each resume replaces the steps it re-ran."""
    import numpy as np

    keep = np.zeros(len(steps), dtype=bool)
    sub = steps[first:]
    keep[first:] = True
    sub_back = np.flatnonzero(sub[1:] < sub[:-1]) + 1
    if sub_back.size:  # a segment replaces every earlier record with a step after its first one
        starts = np.concatenate(([0], sub_back))
        later = np.minimum.accumulate(sub[starts][::-1])[::-1]  # the lowest first step of any later segment
        later = np.append(later[1:], INT64_MAX)
        segment = np.zeros(len(sub), dtype=np.int64)
        segment[sub_back] = 1
        keep[first:] = sub <= later[np.cumsum(segment)]
    return keep


def segments_line(restarts: Sequence[Restart]) -> str:
    """The segments set aside, named in one line."""
    judged = "the last run is judged alone" if any(r.kind == "relaunch" for r in restarts) else \
        "the latest values of each step are used"
    return f"the file holds {len(restarts) + 1} segments; {judged}: " + "; ".join(r.describe() for r in restarts)
