"""Bounded-memory reading: which metrics' values to keep, and the growable columns the streaming readers fill.

A 1,000,000-step verl log holds ~150 metrics a step; ``advisor suggest`` reads ~50 of them. The readers stream
the file and keep, for each metric asked for, one float64 column (NaN where a record lacks it), so memory is
about that of the final frame. Every other metric is still listed (its name, whether it ever held a finite value)
so the frame's metadata (names, all-NaN columns, the version hint) is the same as a full read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from advisor.wildcard import matches

from ._aliases import rename
from ._nan import LOGGED_NAN
from ._records import Records

if TYPE_CHECKING:
    import numpy as np

_HINT_FACTOR = 8  # a uniform log still grows a few times at most (x8 each), to about its size
_GROWTH = 1.5
_MIN_CAPACITY = 1024


class ColumnFilter:
    """Whether a logged metric's values are kept: its name or its current name (``rename``) is one of
    ``patterns``, a name or a ``*`` glob as the playbook writes them (``val-core/*``)."""

    def __init__(self, patterns: Collection[str]) -> None:
        self._exact = frozenset(p for p in patterns if "*" not in p)
        self._globs = tuple(p for p in patterns if p not in self._exact)
        self._cache: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        kept = self._cache.get(name)
        if kept is None:
            renamed = rename(name)
            kept = self._cache[name] = any(self._matches(n) for n in (name, renamed.new if renamed else name))
        return kept

    def _matches(self, name: str) -> bool:
        return name in self._exact or any(matches(name, g) for g in self._globs)


Keep = Callable[[str], bool]


class ColumnStore:
    """Step records as they stream in: one NaN-filled float64 column per kept metric, steps and line numbers beside
    them; metrics not kept are listed with whether they held a finite value.

    The columns are rows of one buffer (column ``j`` is ``buffer[j]``, contiguous), so the frame's values are a
    view of it (``buffer[:k, :n].T``): no copy of the whole frame at the end. ``expected_rows`` (called when the
    buffer is full, with the rows it must hold now) estimates the final count, so a big file's buffer is sized
    about once.
    """

    def __init__(self, keep: Keep | None = None, expected_rows: Callable[[int], int] | None = None) -> None:
        import numpy as np

        self.keep = keep
        self.expected_rows = expected_rows
        self._n = 0
        self._buffer = np.empty((0, 0))
        self._steps = np.empty(0, dtype=np.int64)
        self._lines = np.empty(0, dtype=np.int64)
        self._index: dict[str, int] = {}  # kept metric -> its row of the buffer
        self.logged: dict[str, None] = {}  # every numeric metric name, in first-logged order
        self.unread: dict[str, bool] = {}  # metrics not kept -> whether one of their values was finite

    def __len__(self) -> int:
        return self._n

    def _resize(self, rows: int, columns: int) -> None:
        """Room for at least ``rows`` records and ``columns`` kept metrics (copies what is there). Buffer rows not
        yet given to a metric stay unwritten, so the memory they take is never touched."""
        import numpy as np

        cap_columns, cap_rows = self._buffer.shape
        if rows > cap_rows:
            hint = self.expected_rows(rows) if self.expected_rows else 0
            # at most _HINT_FACTOR x the rows seen: the file's size may be a NUL run (logrotate) or other output,
            # not records, and buffer rows given to metrics are written (NaN), so their memory is taken
            hint = min(hint, _HINT_FACTOR * rows + _MIN_CAPACITY)
            rows = max(rows, _MIN_CAPACITY, hint if hint >= rows else int(cap_rows * _GROWTH))
            self._steps = _grown(self._steps, rows, 0)
            self._lines = _grown(self._lines, rows, 0)
            columns = max(columns, cap_columns)
        else:
            rows = cap_rows
            columns = max(columns, 16, int(cap_columns * _GROWTH)) if columns > cap_columns else cap_columns
        if (columns, rows) == self._buffer.shape:
            return
        buffer = np.empty((columns, rows))
        used = len(self._index)
        buffer[:used, :] = np.nan
        buffer[: min(used, cap_columns), : self._n] = self._buffer[:used, : self._n]
        self._buffer = buffer

    def _column(self, name: str) -> int | None:
        """The buffer row of ``name`` (made on first sight), or None when it is not kept."""
        import numpy as np

        col = self._index.get(name)
        if col is None and name not in self.unread:
            self.logged.setdefault(name)
            if self.keep is None or self.keep(name):
                col = self._index[name] = len(self._index)
                if col >= self._buffer.shape[0]:
                    self._resize(self._n, col + 1)
                else:
                    self._buffer[col] = np.nan
            else:
                self.unread[name] = False
        return col

    def start(self, step: int, line: int) -> None:
        """Open a record; following ``add`` calls fill it."""
        if self._n == self._buffer.shape[1]:
            self._resize(self._n + 1, len(self._index))
        self._steps[self._n] = step
        self._lines[self._n] = line
        self._n += 1

    def add(self, name: str, value: float) -> None:
        """A value of the open record (a repeated name: the last value wins; a NaN is a logged NaN)."""
        if value != value:
            value = LOGGED_NAN
        col = self._index.get(name)
        if col is None:
            col = self._column(name)
            if col is None:
                if not self.unread[name] and value - value == 0.0:  # finite: inf - inf and nan - nan are nan
                    self.unread[name] = True
                return
        self._buffer[col, self._n - 1] = value

    def add_texts(self, keys: tuple[str, ...], texts: tuple[str, ...]) -> None:
        """Values of the open record as number texts (a console line's items)."""
        index, buffer, row, unread = self._index, self._buffer, self._n - 1, self.unread
        for key, text in zip(keys, texts, strict=True):
            col = index.get(key)
            if col is not None:
                value = float(text)
                buffer[col, row] = value if value == value else LOGGED_NAN  # `nan` printed: a logged NaN
            elif not unread.get(key, False):  # a new metric, or one not kept whose values were all NaN so far
                self.add(key, float(text))
                buffer = self._buffer  # a new column may have grown it

    def append(self, records: Records) -> None:
        """Every record of ``records`` (a block a reader parsed), after those already stored."""
        import numpy as np

        n = len(records)
        for name in records.all_names:
            self.logged.setdefault(name)
        for name, finite in records.unread.items():
            self.unread[name] = self.unread.get(name, False) or finite
        if not n:
            return
        start = self._n
        cols = [self._column(name) for name in records.names]
        self._resize(start + n, len(self._index))
        self._steps[start : start + n] = records.steps
        self._lines[start : start + n] = records.lines(np.arange(n))
        for j, col in enumerate(cols):
            if col is not None:
                self._buffer[col, start : start + n] = records.values[:, j]
        self._n += n

    def build(self) -> Records:
        """The records: values are a view of the buffer (each metric contiguous), steps and lines trimmed."""
        n = self._n
        names = list(self._index)
        values = self._buffer[: len(names), :n].T
        steps = self._steps[:n]
        lines = self._lines[:n]
        logged = list(self.logged)
        return Records(steps, names, values, line_of=lambda idx: lines[idx], unread=dict(self.unread),
                       logged=logged if self.unread else None)


def _grown(array: np.ndarray, capacity: int, fill: float) -> np.ndarray:
    import numpy as np

    grown = np.full(capacity, fill, dtype=array.dtype)
    grown[: len(array)] = array
    return grown


def project(records: Records, keep: Keep | None) -> Records:
    """``records`` with only the kept metrics' values (for readers that do not stream: TensorBoard, W&B CSV)."""
    import numpy as np

    if keep is None:
        return records
    kept = [j for j, name in enumerate(records.names) if keep(name)]
    if len(kept) == len(records.names):
        return records
    unread = dict(records.unread)
    for j, name in enumerate(records.names):
        if j not in kept:
            unread[name] = unread.get(name, False) or bool(np.isfinite(records.values[:, j]).any())
    return Records(records.steps, [records.names[j] for j in kept], np.asfortranarray(records.values[:, kept]),
                   line_of=records.line_of, unread=unread, logged=list(records.all_names))
