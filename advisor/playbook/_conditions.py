"""The condition tests a rule file may name (``rises``, ``above``, ...): each declared once, as its argument record.

A record (a ``NamedTuple``: immutable, and 8x cheaper to define than a frozen dataclass, which counts at start-up)
states the test's arguments (a field without a default is required; an optional one's default is stated here once)
and its ``holds(signals, metric) -> (holds, strength >= 0)``. :data:`TESTS` (name -> record) is the whole
vocabulary: the loader (``_rule_loader``) builds the record from a condition's keys, so a misspelt argument
(``facter``), a missing one (``above`` without ``value``) or an unknown name fails at load with "did you mean",
and ``_diagnose`` calls the record's ``holds``. The harm kinds live beside their wording in ``_harm``, the
config-derived quantities beside their arithmetic in ``_derived``; both are records of the same shape, listed here.
Tests read :class:`~advisor.playbook._signals.MetricSignal` numbers computed over the recent window.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Protocol

import numpy as np

from advisor.operators import compare
from advisor.typed import build

from ._derived import DERIVED_TESTS
from ._harm import HARM_TESTS
from ._rule_schema import Compare
from ._signals import Signals

MIN_STEPS_FOR_FRACTION = 5
NOISE_MIN_VALUES = 5  # logged values from which a series' own step-to-step noise is measured (four changes)


class ConditionTest(Protocol):
    """What every record of :data:`TESTS` has (a NamedTuple's ``_asdict`` and the test itself)."""

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]: ...

    def _asdict(self) -> dict[str, Any]: ...


def _margin(value: float, threshold: float) -> float:
    """How far past a threshold, relative to it (0 at the threshold)."""
    if not math.isfinite(value):
        return 0.0
    return abs(value - threshold) / max(abs(threshold), 1e-12)


class Present(NamedTuple):
    """The metric has a finite value."""

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        return signals.has(metric), 0.0


class Absent(NamedTuple):
    """The metric has no finite value."""

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        return not signals.has(metric), 0.0


class Above(NamedTuple):
    """The window median is above ``value`` (or, with ``fraction``, that share of steps is; needs 5 steps)."""

    value: float
    fraction: float | None = None

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        if self.fraction is not None:  # "on most steps" needs several steps to mean anything
            if s.values.size < MIN_STEPS_FOR_FRACTION:
                return False, 0.0
            frac = s.fraction_above(self.value)
            return bool(frac >= self.fraction), frac
        return bool(s.level > self.value), _margin(s.level, self.value)


class Below(NamedTuple):
    """The window median is below ``value`` (or, with ``fraction``, that share of steps is; needs 5 steps)."""

    value: float
    fraction: float | None = None

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        if self.fraction is not None:
            if s.values.size < MIN_STEPS_FOR_FRACTION:
                return False, 0.0
            frac = float((s.values < self.value).mean())
            return bool(frac >= self.fraction), frac
        return bool(s.level < self.value), _margin(s.level, self.value)


class AtMost(NamedTuple):
    """Every value of the window is <= ``value``."""

    value: float

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        return bool(s.values.size and s.max <= self.value), 1.0


class AtLeast(NamedTuple):
    """Every value of the window is >= ``value``."""

    value: float

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        return bool(s.values.size and s.min >= self.value), 1.0


class MaxAbove(NamedTuple):
    """Some value of the window is above ``value``."""

    value: float

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        return bool(s.max > self.value), _margin(s.max, self.value)


class Outside(NamedTuple):
    """At least ``fraction`` of the window lies outside [low, high]."""

    low: float | None = None
    high: float | None = None
    fraction: float = 0.5

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        frac = signals[metric].fraction_outside(self.low, self.high)
        return bool(frac >= self.fraction), frac if math.isfinite(frac) else 0.0


class Rises(NamedTuple):
    """The window median is >= ``factor`` x the early median (above ``min_level``, not trending down)."""

    factor: float = 2.0
    min_level: float = 0.0

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        early, late = s.early_level, s.level
        if not (math.isfinite(early) and math.isfinite(late)):
            return False, 0.0
        ok = late > self.min_level and (late >= self.factor * early if early > 0 else late > early) and s.slope >= 0
        return bool(ok), (late / early if early > 0 else 1.0)


class Falls(NamedTuple):
    """The window median is <= ``factor`` x the early median (factor 0.3: fell by 70%)."""

    factor: float = 0.5

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        return _fell(s.early_level, s.level, self.factor)


def _fell(reference: float, level: float, factor: float) -> tuple[bool, float]:
    """``level`` <= ``factor`` x a positive ``reference``, and by how much of it the level fell."""
    if not (math.isfinite(reference) and math.isfinite(level)) or reference <= 0:
        return False, 0.0
    return bool(level <= factor * reference), (reference - level) / reference


class FellEarly(NamedTuple):
    """By ``by`` (a fraction of the run) the metric was already <= ``factor`` x its early level."""

    factor: float = 0.2
    by: float = 0.2

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        early, then = s.early_level, s.level_at(self.by)
        if not (math.isfinite(early) and math.isfinite(then)) or early <= 0:
            return False, 0.0
        return bool(then <= self.factor * early), (early - then) / early


def _first(signals: Signals, metric: str) -> float:
    """The run's first finite logged value of the metric (nan when none)."""
    values = signals[metric].all_values
    finite = values[np.isfinite(values)] if values.size else values
    return float(finite[0]) if finite.size else math.nan


class FallsFromFirst(NamedTuple):
    """The window median is <= ``factor`` x the run's first logged value: a collapse within the first steps, which
    leaves no early median (``falls``) to fall from."""

    factor: float = 0.5

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        first, late = _first(signals, metric), signals[metric].level
        if not (math.isfinite(first) and math.isfinite(late)) or first <= 0:
            return False, 0.0
        return bool(late <= self.factor * first), (first - late) / first


class RoseFromFirst(NamedTuple):
    """The run's peak (its highest 9-step rolling median) is more than ``by`` above its first logged value: the metric
    rose from where the run started (a critic whose explained variance did has learned, wherever it levelled off)."""

    by: float

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        first, peak = _first(signals, metric), signals[metric].peak
        if not (math.isfinite(first) and math.isfinite(peak)):
            return False, 0.0
        return bool(peak - first > self.by), _margin(peak - first, self.by)


class FirstAbove(NamedTuple):
    """The run's first logged value is above ``value`` (so before any update could have moved it)."""

    value: float

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        first = _first(signals, metric)
        return bool(math.isfinite(first) and first > self.value), _margin(first, self.value)


class FallsFromPeak(NamedTuple):
    """The window median is <= ``factor`` x the run's peak (of a 9-step rolling median): climbed, then fell."""

    factor: float = 0.8

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        return _fell(s.peak, s.level, self.factor)


class FallsFromBest(NamedTuple):
    """The metric's recent logged values (their median) are <= ``factor`` x the best it logged before them
    (MetricSignal.recent and .best): for a sparsely logged metric, such as validation every test_freq steps,
    where a window of steps holds one or two values. With ``NOISE_MIN_VALUES`` values or more the fall must also
    exceed twice the run's own step noise (the median change between consecutive values): a validation on a few
    dozen prompts swings by a tenth from one evaluation to the next without anything getting worse."""

    factor: float = 0.9

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        fell, by = _fell(s.best, s.recent, self.factor)
        if fell and s.all_values.size >= NOISE_MIN_VALUES and s.best - s.recent <= 2 * s.step_noise:
            return False, 0.0
        return fell, by


def _trend(signals: Signals, metric: str, sign: float, min_change: float, floor: float) -> tuple[bool, float]:
    s = signals[metric]
    if s.values.size < 5:
        return False, 0.0
    span = float(s.steps[-1] - s.steps[0]) or 1.0
    change = sign * s.slope * span
    scale = max(abs(s.level), floor)
    return bool(change > min_change * scale), change / scale


class Increasing(NamedTuple):
    """Theil-Sen slope x window span > ``min_change`` x max(|level|, ``scale``)."""

    min_change: float = 0.2
    scale: float = 1e-12

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        return _trend(signals, metric, 1.0, self.min_change, self.scale)


class Decreasing(NamedTuple):
    """The mirror of ``increasing``."""

    min_change: float = 0.2
    scale: float = 1e-12

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        return _trend(signals, metric, -1.0, self.min_change, self.scale)


class Flat(NamedTuple):
    """max - min over the window <= ``tolerance`` (at least 3 steps)."""

    tolerance: float = 1e-9

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        return bool(s.values.size >= 3 and (s.max - s.min) <= self.tolerance), 1.0


class Spikes(NamedTuple):
    """At least ``count`` points jump far above the rolling median."""

    count: int = 1  # type: ignore[assignment]  # the rule files' name for it; shadows tuple.count, unused here

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        return bool(s.spikes >= self.count), float(s.spikes)


class Nonfinite(NamedTuple):
    """The metric went NaN or inf and stayed so: its last logged value is still non-finite (see
    signals._nonfinite_steps for how null is read). A value that is finite again after it is a transient: verl
    skips an optimizer step whose grad norm is not finite and trains on (verl/workers/actor/dp_actor.py:405-412
    @ v0.7.1), and the finite values after it show the weights took no harm; suggest names it in a note."""

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s = signals[metric]
        return s.first_nonfinite_step is not None and not s.recovered, 10.0


class GpuFractionAbove(NamedTuple):
    """The window's peak is above ``value`` x the GPU's memory (only when the GPU is known: --gpu)."""

    value: float

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s, capacity = signals[metric], signals.gpu_memory_gib
        if not capacity or not math.isfinite(s.max):
            return False, 0.0
        fraction = s.max / capacity
        return bool(fraction > self.value), fraction


class VsMetric(NamedTuple):
    """level ``op`` ``scale`` x other's level + ``offset``."""

    other: str
    op: Compare = Compare.LT
    scale: float = 1.0
    offset: float = 0.0

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s, other = signals[metric], signals[self.other]
        if not (math.isfinite(s.level) and math.isfinite(other.level)):
            return False, 0.0
        target = self.scale * other.level + self.offset
        return compare(self.op, s.level, target), _margin(s.level, target)


class RatioAbove(NamedTuple):
    """level / other's level > ``value``."""

    other: str
    value: float

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        s, other = signals[metric], signals[self.other]
        if not (math.isfinite(s.level) and math.isfinite(other.level)) or other.level == 0:
            return False, 0.0
        ratio = s.level / other.level
        return bool(ratio > self.value), ratio


# the vocabulary: test name -> its record (the harm kinds and the config-derived quantities included)
TESTS: dict[str, type[ConditionTest]] = {
    "present": Present, "absent": Absent, "above": Above, "below": Below, "at_most": AtMost,
    "at_least": AtLeast, "max_above": MaxAbove, "outside": Outside, "rises": Rises, "falls": Falls,
    "fell_early": FellEarly, "falls_from_peak": FallsFromPeak, "falls_from_best": FallsFromBest,
    "falls_from_first": FallsFromFirst,
    "rose_from_first": RoseFromFirst, "first_above": FirstAbove, "increasing": Increasing, "decreasing": Decreasing,
    "flat": Flat, "spikes": Spikes, "nonfinite": Nonfinite, "gpu_fraction_above": GpuFractionAbove,
    "vs_metric": VsMetric, "ratio_above": RatioAbove, **HARM_TESTS, **DERIVED_TESTS,
}


def build_args(test: str, raw: dict[str, Any], where: str) -> ConditionTest:
    """The record of ``test`` from a condition's other keys; SchemaError for an unknown, missing or mistyped
    argument (``where`` is the condition's place in the file, e.g. ``conditions[0]``)."""
    return build(TESTS[test], raw, where, kind="argument", owner=f"test '{test}'")


def given_args(params: ConditionTest | None) -> dict[str, Any]:
    """The arguments as a mapping (defaults included, unset optional ones left out)."""
    if params is None:
        return {}
    return {name: value for name, value in params._asdict().items() if value is not None}
