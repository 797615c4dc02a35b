"""The run's metrics so far, in bounded memory: every recent step, and a thinned, evenly spaced past.

``advisor suggest`` reads signals over the recent window and against the early run (its first 10%, its
peak, its level at a fraction of the run: advisor/playbook/_signals.py). A follower cannot keep 100,000 steps of a
few hundred metrics, so it keeps:

- the last ``dense`` steps as they were logged (the window and the rolling median around it), and
- the steps before them at a stride that doubles whenever ``capacity`` rows are held, so the past stays
  evenly spaced and "the first 10% of the rows" is still the first 10% of the run.

A step that goes back (a restarted run) drops every kept step from it on, as ``load_metrics`` keeps the
later segment; the same step logged twice (verl's validation record and the training record) merges.
"""

from __future__ import annotations

from collections import deque

import numpy as np

DEFAULT_CAPACITY = 2048  # thinned past rows; suggest on 2,048 rows takes milliseconds (bench/bench_watch.py)
DEFAULT_DENSE = 64  # >= the watch window (20) plus the 9-step rolling median's reach


class LiveFrame:
    def __init__(self, capacity: int = DEFAULT_CAPACITY, dense: int = DEFAULT_DENSE) -> None:
        self.capacity = capacity
        self.dense = dense
        self.names: list[str] = []
        self._index: dict[str, int] = {}
        self._old_steps = np.empty(capacity, dtype=np.int64)
        self._old_values = np.full((capacity, 0), np.nan)
        self._n_old = 0
        self._stride = 1
        self._tail: deque[tuple[int, int, dict[str, float]]] = deque()  # (arrival number, step, values)
        self._arrivals = 0
        self.restarts = 0

    @property
    def last_step(self) -> int | None:
        if self._tail:
            return self._tail[-1][1]
        return int(self._old_steps[self._n_old - 1]) if self._n_old else None

    @property
    def rows(self) -> int:
        return self._n_old + len(self._tail)

    def add(self, step: int, values: dict[str, float]) -> bool:
        """Keep one record; False when it merged into the last row (the same step logged again)."""
        last = self.last_step
        for name in values:  # first, so a name that arrives on a merged row (verl 0.2's step-0 validation
            if name not in self._index:  # line, then its training line of the same step) is a column too
                self._index[name] = len(self.names)
                self.names.append(name)
        if last is not None and step == last and self._tail:
            self._tail[-1][2].update(values)
            return False
        if last is not None and step < last:
            self._drop_from(step)
        self._tail.append((self._arrivals, step, dict(values)))
        self._arrivals += 1
        if len(self._tail) > self.dense:
            arrival, old_step, old_values = self._tail.popleft()
            if arrival % self._stride == 0:
                self._keep(old_step, old_values)
        return True

    def _keep(self, step: int, values: dict[str, float]) -> None:
        if self._n_old == self.capacity:  # thin the past: every other row, and keep every 2*stride-th from now
            kept = self._n_old // 2 + self._n_old % 2
            self._old_steps[:kept] = self._old_steps[: self._n_old : 2]
            self._old_values[:kept] = self._old_values[: self._n_old : 2]
            self._old_values[kept:] = np.nan
            self._n_old = kept
            self._stride *= 2
        if self._old_values.shape[1] < len(self.names):
            grown = np.full((self.capacity, len(self.names)), np.nan)
            grown[:, : self._old_values.shape[1]] = self._old_values
            self._old_values = grown
        row = self._old_values[self._n_old]
        for name, value in values.items():
            row[self._index[name]] = value
        self._old_steps[self._n_old] = step
        self._n_old += 1

    def _drop_from(self, step: int) -> None:
        self.restarts += 1
        while self._tail and self._tail[-1][1] >= step:
            self._tail.pop()
        keep = int(np.searchsorted(self._old_steps[: self._n_old], step, side="left"))
        self._old_values[keep: self._n_old] = np.nan
        self._n_old = keep

    def arrays(self) -> tuple[np.ndarray, list[str], np.ndarray]:
        """(steps, names, values) of every kept row, oldest first, as ``frame_from_rows`` takes them."""
        names = list(self.names)
        n = self.rows
        steps = np.empty(n, dtype=np.int64)
        values = np.full((n, len(names)), np.nan, order="F")
        old = self._n_old
        steps[:old] = self._old_steps[:old]
        width = self._old_values.shape[1]
        values[:old, :width] = self._old_values[:old]
        index = self._index
        for i, (_, step, row) in enumerate(self._tail, start=old):
            steps[i] = step
            for name, value in row.items():
                values[i, index[name]] = value
        return steps, names, values
