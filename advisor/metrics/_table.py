"""A run's metrics as plain numpy: sorted unique steps, metric names, one float64 column per metric.

This is what ``advisor suggest`` computes on. pandas is the public face (``MetricFrame.data``), but its
import alone costs ~0.25 s of CPU, half the 0.5 s budget of ``advisor suggest`` on a 1,000-step log
(bench/bench_suggest.py), so the reading and diagnosis path stays on numpy and builds the DataFrame
only when someone asks for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd



@dataclass(frozen=True)
class StepTable:
    """``values[i, j]`` is metric ``names[j]`` at ``steps[i]``; NaN: not logged; ``LOGGED_NAN``: logged as NaN/null."""

    steps: np.ndarray  # int64, sorted, unique
    names: tuple[str, ...]
    values: np.ndarray  # float64, shape (len(steps), len(names)), Fortran order: a metric is contiguous

    def __post_init__(self) -> None:
        if self.values.shape != (len(self.steps), len(self.names)):
            raise ValueError(f"values of shape {self.values.shape} for {len(self.steps)} steps and "
                             f"{len(self.names)} metrics")

    @property
    def positions(self) -> dict[str, int]:
        return {name: j for j, name in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.steps)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def column(self, name: str) -> np.ndarray:
        return self.values[:, self.names.index(name)]

    def block(self, names: Sequence[str]) -> np.ndarray:
        positions = self.positions
        return self.values[:, [positions[n] for n in names]]

    def scaled(self, factors: Mapping[str, float]) -> StepTable:
        """A copy with the named columns multiplied by their factor."""

        values = self.values.copy(order="F")
        positions = self.positions
        for name, factor in factors.items():
            values[:, positions[name]] *= factor
        return StepTable(self.steps, self.names, values)

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        index = pd.Index(self.steps, name="step", dtype="int64")
        return pd.DataFrame(self.values, index=index, columns=pd.Index(list(self.names), dtype=object), copy=False)

    @classmethod
    def from_pandas(cls, frame: pd.DataFrame) -> StepTable:
        """From a DataFrame indexed by step (sorted here; a repeated step keeps its last row)."""
        import numpy as np

        frame = frame[~frame.index.duplicated(keep="last")].sort_index()
        values = np.asfortranarray(frame.to_numpy(dtype=np.float64))
        return cls(np.asarray(frame.index, dtype=np.int64), tuple(str(c) for c in frame.columns), values)


class HasStepTable(Protocol):
    """What holds a StepTable as its ``table`` (a MetricFrame)."""

    @property
    def table(self) -> StepTable: ...


def as_table(metrics: StepTable | HasStepTable | pd.DataFrame) -> StepTable:
    """A StepTable from a StepTable, a MetricFrame (its ``table``) or a pandas DataFrame indexed by step."""
    if isinstance(metrics, StepTable):
        return metrics
    table = getattr(metrics, "table", None)
    if isinstance(table, StepTable):
        return table
    if hasattr(metrics, "index") and hasattr(metrics, "columns"):
        return StepTable.from_pandas(metrics)
    raise TypeError(f"expected metrics indexed by step, got {type(metrics).__name__}")


def merge_repeated_steps(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows with the same step (adjacent, steps non-decreasing) become one: per metric, the last logged value.

    The same as pandas' ``groupby(level=0).last()``, which skips NaN, except that a logged NaN (``_nan``) counts.
    """
    import numpy as np

    from ._nan import is_missing

    if len(steps) < 2:
        return steps, values
    new_group = np.concatenate(([True], steps[1:] != steps[:-1]))
    if new_group.all():
        return steps, values
    starts = np.flatnonzero(new_group)
    ends = np.append(starts[1:], len(steps))  # exclusive
    merged = values[ends - 1].copy()  # each group's last row; its NaNs are filled below
    groups = np.flatnonzero(ends - starts > 1)
    sizes = ends[groups] - starts[groups]
    # the rows of repeated steps only, group after group
    rows = np.repeat(starts[groups] - np.cumsum(np.concatenate(([0], sizes[:-1]))), sizes) + np.arange(sizes.sum())
    sub = values[rows]
    first = np.cumsum(np.concatenate(([0], sizes[:-1])))  # each group's first row in `sub`
    last = first + sizes - 1
    # per metric, the latest row holding a value so far; a group uses it only if it is its own row
    seen = np.maximum.accumulate(np.where(is_missing(sub), -1, np.arange(len(rows))[:, None]), axis=0)[last]
    own = seen >= first[:, None]
    merged[groups] = np.where(own, sub[np.maximum(seen, 0), np.arange(sub.shape[1])], np.nan)
    return steps[starts], np.asfortranarray(merged)
