"""How a trial is scored: the objective metric and its direction, constraints, and the tail statistic.

A trial's value of a metric is the mean of its last 20% of logged values (at least one), so a single
noisy step decides nothing and a late collapse still counts. The same statistic, computed on the steps
seen so far, is what a running trial reports to the pruner at each step; the final objective of a
finished trial is therefore its last intermediate value.

A validation metric (``val-core/*``, ``val-aux/*``) averages the last half of its values instead. verl
validates only every ``trainer.test_freq`` steps and at the last step (``verl/trainer/ppo/ray_trainer.py``
lines 1727-1728 in verl 0.9.1), so a 30-step trial that validates every 5 steps has 6 points, of which 20%
is two (one, early on, when the pruner reads it): one validation pass, one draw of the policy's step-to-step
fluctuation, would decide the trial. The last half keeps ``ceil(n/2)`` passes, so the noise of the average
falls like ``1/sqrt(n/2)`` with the number of passes instead of staying at one pass's noise, while still
reading only the second half of training (where a fix should have taken effect).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from advisor.errors import SweepError
from advisor.operators import compare

TAIL_FRACTION = 0.2
"""share of a metric's logged values (the last ones) that its trial value averages"""
VALIDATION_TAIL_FRACTION = 0.5
"""the same share for a validation metric, logged only every trainer.test_freq steps (above)"""
_VALIDATION_PREFIXES = ("val-core/", "val-aux/")

_DIRECTIONS = {"max": "maximize", "maximize": "maximize", "min": "minimize", "minimize": "minimize"}
_CONSTRAINT = re.compile(r"^\s*(?P<metric>[^<>=\s][^<>=]*?)\s*(?P<op><=|>=|<|>)\s*(?P<bound>\S+)\s*$")


def tail_mean(values: Sequence[float | None], fraction: float = TAIL_FRACTION) -> float | None:
    """Mean of the last ``ceil(fraction * n)`` finite values (at least one); None when there are none."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return None
    k = max(1, math.ceil(fraction * len(finite)))
    tail = finite[-k:]
    return sum(tail) / len(tail)


def is_validation(metric: str) -> bool:
    """True for verl's validation metrics (``val-core/...``, ``val-aux/...``), logged every test_freq steps."""
    return metric.startswith(_VALIDATION_PREFIXES)


def tail_fraction(metric: str) -> float:
    """The share of ``metric``'s values its trial value averages: half for validation, else 20%."""
    return VALIDATION_TAIL_FRACTION if is_validation(metric) else TAIL_FRACTION


@dataclass(frozen=True)
class Objective:
    """The metric a sweep optimises, e.g. ``Objective("critic/score/mean", "maximize")``."""

    metric: str
    direction: str = "maximize"

    def __post_init__(self) -> None:
        if self.direction not in ("maximize", "minimize"):
            raise SweepError(f"objective direction must be 'maximize' or 'minimize', got '{self.direction}'")

    @property
    def sign(self) -> float:
        """+1 when larger is better, -1 when smaller is better."""
        return 1.0 if self.direction == "maximize" else -1.0

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "direction": self.direction}


@dataclass(frozen=True)
class Constraint:
    """A bound a trial's metric (its tail mean) must keep, e.g. ``Constraint("actor/ppo_kl", "<", 0.02)``."""

    metric: str
    op: str
    bound: float

    def __post_init__(self) -> None:
        if self.op not in ("<", "<=", ">", ">="):
            raise SweepError(f"constraint operator must be one of < <= > >=, got '{self.op}'")

    def holds(self, value: float | None) -> bool | None:
        """True/False; None when the metric was never logged."""
        if value is None:
            return None
        return compare(self.op, value, self.bound)

    def violation(self, value: float | None) -> float:
        """Optuna's ``constraints_func`` convention: <= 0 when the constraint holds, > 0 when it does not."""
        if value is None:
            return math.inf
        excess = value - self.bound if self.op in ("<", "<=") else self.bound - value
        if excess == 0 and self.op in ("<", ">"):
            return 1e-12  # on the bound of a strict inequality: violated, by the smallest margin
        return excess

    def describe(self) -> str:
        return f"{self.metric}{self.op}{self.bound:g}"

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "op": self.op, "bound": self.bound}


def parse_objective(text: str) -> Objective:
    """``METRIC[:max|min]`` (default max) -> :class:`Objective`.

    Raises:
        SweepError: empty metric.
    """
    metric, sep, suffix = text.strip().rpartition(":")
    if sep and suffix.strip().lower() in _DIRECTIONS:
        direction = _DIRECTIONS[suffix.strip().lower()]
    else:
        metric, direction = text.strip(), "maximize"
    if not metric.strip():
        raise SweepError(f"--objective '{text}' names no metric; use METRIC[:max|min], e.g. critic/score/mean:max")
    return Objective(metric.strip(), direction)


def parse_constraint(text: str) -> Constraint:
    """``METRIC<X``, ``METRIC<=X``, ``METRIC>X`` or ``METRIC>=X`` -> :class:`Constraint`.

    Raises:
        SweepError: the text is not of that form or X is not a number.
    """
    m = _CONSTRAINT.match(text)
    if not m:
        raise SweepError(f"--constraint '{text}' is not METRIC<X, METRIC<=X, METRIC>X or METRIC>=X")
    try:
        bound = float(m.group("bound"))
    except ValueError as err:
        raise SweepError(f"--constraint '{text}': bound '{m.group('bound')}' is not a number") from err
    if not math.isfinite(bound):
        raise SweepError(f"--constraint '{text}': the bound must be finite")
    return Constraint(m.group("metric").strip(), m.group("op"), bound)
