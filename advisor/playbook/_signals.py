"""Signals: what a metric did over the recent window of a run, and facts about the config.

Everything a rule reads is computed here once: the window's level (median), its robust trend
(Theil-Sen slope), spikes against a rolling median, the fraction of steps outside a band, the change
against the early run, and where NaN/inf first appeared. Rules only compare these numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.facts import GROUP_ESTIMATORS, BatchPlan, batch_plan, clip_bounds, kl_in_reward, uses_critic
from advisor.load import VerlConfig
from advisor.metrics import as_table, is_logged_nan
from advisor.wildcard import matching

from ._median import median

if TYPE_CHECKING:
    import pandas as pd

    from advisor.metrics import MetricFrame, StepTable

DEFAULT_WINDOW_STEPS = 20
DEFAULT_WINDOW_FRACTION = 0.25
EARLY_FRACTION = 0.1
SPIKE_MAD_FACTOR = 6.0  # a point this many MADs above the rolling median is a spike
_THEIL_SEN_MAX_POINTS = 200


@dataclass(frozen=True)
class Window:
    first_step: int
    last_step: int
    size: int


def choose_window(steps: np.ndarray, window: int | None = None) -> Window:
    """The recent window: ``window`` steps if given, else the larger of 20 steps and 25% of the run."""
    n = len(steps)
    if n == 0:
        return Window(0, 0, 0)
    size = window if window else max(DEFAULT_WINDOW_STEPS, math.ceil(DEFAULT_WINDOW_FRACTION * n))
    size = max(1, min(size, n))
    return Window(int(steps[n - size]), int(steps[-1]), size)


def theil_sen_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Median of pairwise slopes: a trend that a few spikes do not move."""
    if len(x) < 3:
        return 0.0
    if len(x) > _THEIL_SEN_MAX_POINTS:
        idx = np.linspace(0, len(x) - 1, _THEIL_SEN_MAX_POINTS).astype(int)
        x, y = x[idx], y[idx]
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    ok = dx != 0
    return float(median((y[j] - y[i])[ok] / dx[ok])) if ok.any() else 0.0


@dataclass
class MetricSignal:
    """What one metric did; numbers only, NaN when not computable."""

    name: str
    present: bool
    values: np.ndarray = field(repr=False, default_factory=lambda: np.array([]))  # the window's finite values
    steps: np.ndarray = field(repr=False, default_factory=lambda: np.array([]))
    all_values: np.ndarray = field(repr=False, default_factory=lambda: np.array([]))
    all_steps: np.ndarray = field(repr=False, default_factory=lambda: np.array([]))
    first_nonfinite_step: int | None = None
    nonfinite_in_window: int = 0
    nonfinite_steps: int = 0  # steps that logged it as NaN/inf, in the whole run
    recovered: bool = False  # it went NaN/inf and its last logged value is finite again (a transient)

    @cached_property
    def level(self) -> float:
        return float(median(self.values)) if self.values.size else math.nan

    @cached_property
    def mean(self) -> float:
        return float(np.mean(self.values)) if self.values.size else math.nan

    @cached_property
    def last(self) -> float:
        return float(self.values[-1]) if self.values.size else math.nan

    @cached_property
    def max(self) -> float:
        return float(np.max(self.values)) if self.values.size else math.nan

    @cached_property
    def min(self) -> float:
        return float(np.min(self.values)) if self.values.size else math.nan

    @cached_property
    def early_level(self) -> float:
        """Median of the first 10% of the run (at least 3 steps)."""
        if not self.all_values.size:
            return math.nan
        k = max(3, math.ceil(EARLY_FRACTION * len(self.all_values)))
        return float(median(self.all_values[:k]))

    def level_at(self, fraction: float) -> float:
        """Median of the steps around ``fraction`` of the run (+-5% of its steps, at least 3)."""
        n = self.all_values.size
        if not n:
            return math.nan
        centre, half = self._centre(fraction), max(1, math.ceil(0.05 * n))
        return float(median(self.all_values[max(0, centre - half): centre + half + 1]))

    def step_at(self, fraction: float) -> int:
        """The run's own step at the centre :meth:`level_at` measures around (0 for an empty series)."""
        return int(self.all_steps[self._centre(fraction)]) if self.all_steps.size else 0

    def _centre(self, fraction: float) -> int:
        return round(fraction * (self.all_values.size - 1))

    @cached_property
    def peak(self) -> float:
        """The run's highest 9-step rolling median (one noisy step is not a peak)."""
        if not self.all_values.size:
            return math.nan
        return float(np.max(rolling_median(self.all_values, 9)))

    @cached_property
    def smoothing(self) -> int:
        """How many consecutive logged values :attr:`recent` and :attr:`best` take the median of: a fifth of the
        values logged, 1 to 5. A metric logged sparsely (validation every test_freq steps) has few values: two
        validations are compared one to one, forty by medians of five."""
        return max(1, min(5, self.all_values.size // 5))

    @cached_property
    def recent(self) -> float:
        """The median of the last :attr:`smoothing` logged values."""
        if not self.all_values.size:
            return math.nan
        return float(median(self.all_values[-self.smoothing:]))

    @cached_property
    def best(self) -> float:
        """The highest median of :attr:`smoothing` consecutive logged values before the recent ones (NaN when
        nothing was logged before them)."""
        earlier = self.all_values[:-self.smoothing]
        if not earlier.size:
            return math.nan
        width = min(self.smoothing, earlier.size)
        return float(max(median(earlier[i:i + width]) for i in range(earlier.size - width + 1)))

    @cached_property
    def step_noise(self) -> float:
        """The median change between consecutive logged values: how much the metric moves from one logging to the
        next (NaN with fewer than two values)."""
        if self.all_values.size < 2:
            return math.nan
        return float(median(np.abs(np.diff(self.all_values))))

    @cached_property
    def slope(self) -> float:
        """Theil-Sen slope per step over the window."""
        return theil_sen_slope(self.steps.astype(float), self.values)

    @cached_property
    def relative_change(self) -> float:
        """Window level against the early level: (late - early) / |early|."""
        early = self.early_level
        if not math.isfinite(early) or not math.isfinite(self.level):
            return math.nan
        if early == 0:
            return math.inf if self.level > 0 else (-math.inf if self.level < 0 else 0.0)
        return (self.level - early) / abs(early)

    @cached_property
    def spikes(self) -> int:
        """Points in the window far above the run's rolling median (by robust spread)."""
        if self.all_values.size < 5:
            return 0
        values = self.all_values
        med = rolling_median(values, 9)
        spread = median(np.abs(values - med)) * 1.4826
        spread = spread if spread > 0 else max(1e-12, 1e-3 * float(median(np.abs(values))))
        spikes = (values - med) > SPIKE_MAD_FACTOR * spread
        return int(spikes[-self.values.size:].sum()) if self.values.size else 0

    def fraction_outside(self, low: float | None, high: float | None) -> float:
        if not self.values.size:
            return math.nan
        outside = np.zeros(self.values.size, dtype=bool)
        if low is not None:
            outside |= self.values < low
        if high is not None:
            outside |= self.values > high
        return float(outside.mean())

    def fraction_above(self, threshold: float) -> float:
        return float((self.values > threshold).mean()) if self.values.size else math.nan


def rolling_median(values: np.ndarray, width: int) -> np.ndarray:
    """The median of each ``width`` consecutive values, the series padded with its end values (shorter: the whole's)."""
    if values.size < width:
        return np.full(values.size, median(values))
    pad = width // 2
    padded = np.pad(values, pad, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)
    rolled: np.ndarray = median(windows, axis=1)[: values.size]
    return rolled


@dataclass
class RunFacts:
    """What the config says about the run, in the terms the playbook uses."""

    estimator: str
    mode: str  # "ppo" (GAE with a critic) | "grpo" (group estimators) | "other"
    critic: bool
    kl_placement: str  # "reward" | "loss" | "both" | "none"
    plan: BatchPlan
    on_policy: bool  # one mini-batch and one epoch: clipfrac and ppo_kl ~0 (exactly 0 on verl < 0.8's legacy actor)
    clip_higher: bool = False  # DAPO's decoupled clip: the ratio's upper bound above its lower one

    def to_dict(self) -> dict[str, Any]:
        return {"estimator": self.estimator, "critic": self.critic, "kl_placement": self.kl_placement}


def run_facts(cfg: VerlConfig) -> RunFacts:
    estimator = str(cfg.get("algorithm.adv_estimator"))
    critic = uses_critic(cfg)
    in_reward = kl_in_reward(cfg)
    in_loss = bool(cfg.get("actor_rollout_ref.actor.use_kl_loss"))
    placement = "both" if in_reward and in_loss else "reward" if in_reward else "loss" if in_loss else "none"
    mode = "ppo" if estimator == "gae" else "grpo" if estimator in GROUP_ESTIMATORS else "other"
    plan = batch_plan(cfg)
    on_policy = plan.actor.mini_batches_per_step == 1 and plan.actor.epochs == 1
    return RunFacts(estimator, mode, critic, placement, plan, on_policy, clip_higher(cfg))


def clip_higher(cfg: VerlConfig) -> bool:
    """DAPO's clip-higher: the ratio's upper clip bound above its lower one."""
    bounds = clip_bounds(cfg)
    return bounds is not None and bounds[1] > bounds[0]


class Signals:
    """Per-metric signals over one window of a metrics frame (computed on first use).

    A metric name with ``*`` (``val-core/*``) stands for the mean of every matching column, step by
    step: validation metrics are named after the data source, which a rule cannot know.
    """

    def __init__(self, metrics: StepTable | MetricFrame | pd.DataFrame, window: int | None = None, *,
                 gpu_memory_gib: float | None = None) -> None:
        """``metrics``: a StepTable, a MetricFrame or a pandas DataFrame indexed by step."""
        self.table = as_table(metrics)
        self._names = frozenset(self.table.names)
        self.window = choose_window(self.table.steps, window)
        self.gpu_memory_gib = gpu_memory_gib
        self.planned_steps: int | None = None  # trainer.total_training_steps, when the config states it
        self.derived: Any = None  # config-derived quantities (_derived.Derived), set by suggest
        self._cache: dict[str, MetricSignal] = {}

    @property
    def metrics(self) -> list[str]:
        return list(self.table.names)

    def columns(self, name: str) -> list[str]:
        if "*" not in name:
            return [name] if name in self._names else []
        return matching(self.table.names, name)

    def _series(self, name: str) -> np.ndarray | None:
        cols = self.columns(name)
        if not cols:
            return None
        if len(cols) == 1:
            return self.table.column(cols[0])
        block = self.table.block(cols)
        with np.errstate(all="ignore"):
            counts = np.isfinite(block).sum(axis=1)
            sums = np.where(np.isfinite(block), block, 0.0).sum(axis=1)
            return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)

    def has(self, name: str) -> bool:
        series = self._series(name)
        return series is not None and bool(np.isfinite(series).any())

    def __getitem__(self, name: str) -> MetricSignal:
        if name not in self._cache:
            self._cache[name] = self._compute(name)
        return self._cache[name]

    def _compute(self, name: str) -> MetricSignal:
        series = self._series(name)
        if series is None:
            return MetricSignal(name, present=False)
        steps = self.table.steps
        finite = np.isfinite(series)
        in_window = steps >= self.window.first_step
        bad = _nonfinite_steps(series)
        first_bad = int(steps[bad][0]) if bad.any() else None
        logged_rows = np.flatnonzero(finite | bad)
        recovered = first_bad is not None and bool(finite[logged_rows[-1]])
        signal = MetricSignal(name, present=bool(finite.any() or bad.any()), first_nonfinite_step=first_bad,
                              nonfinite_in_window=int((bad & in_window).sum()), nonfinite_steps=int(bad.sum()),
                              recovered=recovered)
        lo = int(np.argmax(finite))
        hi = len(finite) - int(np.argmax(finite[::-1]))
        if finite.any() and finite[lo:hi].all():
            # one unbroken run of finite values (a step-0 validation row before it): views, not copies, since
            # a million-step run keeps ~30 signals; steps are sorted, so the window is a tail
            start = max(lo, int(np.searchsorted(steps, self.window.first_step)))
            signal.values, signal.steps = series[start:hi], steps[start:hi]
            signal.all_values, signal.all_steps = series[lo:hi], steps[lo:hi]
        elif finite.any():
            signal.values, signal.steps = series[finite & in_window], steps[finite & in_window]
            signal.all_values, signal.all_steps = series[finite], steps[finite]
        return signal


def _nonfinite_steps(series: np.ndarray) -> np.ndarray:
    """Steps where the metric was logged as NaN or inf.

    A step that did not log the metric (a validation-only row, a worker's line in between, a metric logged
    every few steps) is absent, not NaN: the readers mark a logged NaN or null apart (``is_logged_nan``).
    """
    bad: np.ndarray = np.isinf(series) | is_logged_nan(series)
    return bad
