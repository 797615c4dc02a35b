"""Harm that does not wait for the damage: a stall, a level beyond published runs, a metric still accelerating.

The condition tests a rule's ``harm`` may use (each a record of its arguments, listed in ``_conditions.TESTS``):

- ``stalled``: the score (or validation) has not improved since a point of the run and is not climbing now.
  A run does not have to get worse before a fault the debugging trees name (KL shooting up, entropy
  falling too fast) is acted on: a fault metric out of band while learning stands still is harm.
- ``beyond_published``: the level is far above the highest step healthy published verl runs logged at the same
  progress (``knowledge/published_envelope.yaml``, from bench/published_runs/: ``_envelope``), or above the
  rule's own cited ceiling for a metric those runs do not log.
- ``within_published``: the level is no higher than the highest step those runs logged at the same progress (a
  level healthy runs show); with ``not: true`` a rule lets another harm count only where the level is outside that
  envelope or no published run logs it.
- ``saturated``: the score sits near the top of its attainable range (the reward's lowest to highest value over
  the run): a flat score there is saturation, not a stall, and ``stalled`` never holds on it.
- ``accelerating``: a log-linear fit over the window (Theil-Sen on log values) gives a doubling (or halving)
  time; the harm is the projected crossing of a limit (verl's clamp of the KL estimate, a collapse level)
  within the run's remaining steps. It is a projection, and its text says so.

Each record's ``harm`` returns (holds, distance, words); ``holds`` is the condition test, and :func:`describe`
words the one that held, with the run's own numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ._envelope import ENVELOPE, Place, config_of, place, progress_of
from ._median import median
from ._rule_schema import Direction
from ._signals import MetricSignal, Signals, theil_sen_slope

# A score at 90% of its attainable range is saturated. Measured (knowledge/published_envelope.yaml): every
# published run whose training score ended above 0.9 of its 0..1 reward (amd GRPO 0.97, amd PPO 0.96, GPG 0.94,
# GPG Megatron 0.99, dstack PPO 0.95 in their last tenth) gained under 0.05 over its second half, a "stall" by the
# test below, and each is a reference result (docs/algo/baseline.md:38-42) or a working example its author
# published; the runs below it end at 0.69-0.72.
SATURATED = 0.9
# the metrics whose range is the reward's: the training score and verl's validation scores (val_reward_fn is the
# same reward manager, verl/trainer/main_ppo.py @1dda039b: load_reward_manager for reward_fn and val_reward_fn)
SCORE_RANGE = ("critic/score/min", "critic/score/max")


def score_range(signals: Signals) -> tuple[float, float] | None:
    """The lowest and highest score any response got over the run (the reward's attainable range as logged)."""
    low_name, high_name = SCORE_RANGE
    if not (signals.has(low_name) and signals.has(high_name)):
        return None
    low, high = signals[low_name].all_values, signals[high_name].all_values
    if not (low.size and high.size):
        return None
    floor, ceiling = float(np.min(low)), float(np.max(high))
    return (floor, ceiling) if math.isfinite(floor) and math.isfinite(ceiling) and ceiling > floor else None


def _scored(metric: str) -> bool:
    return metric.startswith(("critic/score/", "critic/rewards/", "val-core/", "val/")) and not metric.endswith(
        ("/max", "/min"))


def saturation(s: MetricSignal, signals: Signals, share: float = SATURATED) -> tuple[float, str] | None:
    """Where the window level sits in the reward's range (0..1) and the words, when it is at ``share`` or above."""
    found = score_range(signals) if _scored(s.name) else None
    if found is None or not math.isfinite(s.level):
        return None
    floor, ceiling = found
    position = (s.level - floor) / (ceiling - floor)
    if position < share:
        return None
    return position, (f"{s.name} is {s.level:.3g}, {position:.0%} of the way from the lowest score {floor:g} to "
                      f"the highest {ceiling:g} this run's reward gave: saturation, not a stall")


class Saturated(NamedTuple):
    """The metric (a score or validation score) sits at ``share`` or more of the reward's range over the run
    (critic/score/min..max): a flat score there has little left to gain."""

    share: float = SATURATED

    def reads(self) -> tuple[str, ...]:
        return SCORE_RANGE

    def harm(self, s: MetricSignal, signals: Signals) -> HarmResult:
        found = saturation(s, signals, self.share)
        return HarmResult(True, 1.0, found[1], 1.0) if found else NO

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        found = saturation(signals[metric], signals, self.share)
        return found is not None, found[0] if found else 0.0


@dataclass(frozen=True)
class HarmResult:
    holds: bool
    distance: float  # how far past the harm's threshold (>= 1 when it holds), for ranking and severity
    text: str = ""
    persistence: float = 0.0  # share of the window past the threshold


NO = HarmResult(False, 0.0)


class Stalled(NamedTuple):
    """The metric (a score or validation) gained at most ``min_gain`` x max(|ref|, ``scale``) since ``since`` (a
    fraction of the run; 0: its early level) and is not climbing over the window."""

    min_gain: float = 0.05
    scale: float = 0.1
    since: float = 0.0

    def reads(self) -> tuple[str, ...]:
        """The reward's range, where a saturated score is told from a stall."""
        return SCORE_RANGE

    def harm(self, s: MetricSignal, signals: Signals) -> HarmResult:
        if saturation(s, signals) is not None:
            return NO
        return stalled(s, self)

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        result = self.harm(signals[metric], signals)
        return result.holds, result.distance


class BeyondPublished(NamedTuple):
    """The window median is above ``factor`` x the highest step healthy published verl runs logged at the same
    progress (knowledge/published_envelope.yaml, ``_envelope``), or x ``high`` (the rule's cited ceiling) for a
    metric they do not log."""

    factor: float = 3.0
    high: float | None = None

    def harm(self, s: MetricSignal, signals: Signals) -> HarmResult:
        return beyond_published(s, self, signals)

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        result = self.harm(signals[metric], signals)
        return result.holds, result.distance


class WithinPublished(NamedTuple):
    """The window median is at or below ``factor`` x the highest step healthy published verl runs logged at the
    same progress (``_envelope``): a level healthy runs show. Never holds for a metric no published run logs, so
    ``not: true`` holds there (a rule then judges as before)."""

    factor: float = 1.0

    def harm(self, s: MetricSignal, signals: Signals) -> HarmResult:
        found = run_place(s, signals)
        if found is None or found.top <= 0 or not math.isfinite(s.level) or s.level > self.factor * found.top:
            return NO
        return HarmResult(True, 1.0, (f"{s.name} is {s.level:.3g}, within the highest step healthy published verl "
                                      f"runs logged {found.where} ({found.top:.3g}; {ENVELOPE})"), 1.0)

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        result = self.harm(signals[metric], signals)
        return result.holds, result.distance


class Accelerating(NamedTuple):
    """A log-linear fit over the window doubles (``up``) or halves (``down``) the metric at least ``min_doublings``
    times, and projects it across ``limit`` (verl's clamp, a collapse level) within the run's remaining steps."""

    limit: float
    direction: Direction = Direction.UP
    min_doublings: float = 1.0

    def harm(self, s: MetricSignal, signals: Signals) -> HarmResult:
        horizon, planned = remaining_steps(signals)
        return accelerating(s, self, horizon, planned)

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        result = self.harm(signals[metric], signals)
        return result.holds, result.distance


HARM_TESTS = {"stalled": Stalled, "beyond_published": BeyondPublished, "accelerating": Accelerating,
              "saturated": Saturated, "within_published": WithinPublished}
HARM_KINDS = (Stalled, BeyondPublished, Accelerating, Saturated, WithinPublished)
RANGE_KINDS = (Stalled, Saturated)  # they read the reward's range besides their metric


def stalled(s: MetricSignal, args: Stalled) -> HarmResult:
    """The stall itself (:class:`Stalled` first rules out a saturated score)."""
    if s.values.size < 3 or s.all_values.size < 5:
        return NO
    ref = s.early_level if args.since <= 0 else s.level_at(args.since)
    if not (math.isfinite(ref) and math.isfinite(s.level)):
        return NO
    scale = max(abs(ref), args.scale)
    gain = s.level - ref
    span = float(s.steps[-1] - s.steps[0]) or 1.0
    climbing = s.slope * span > args.min_gain * scale
    if gain > args.min_gain * scale or climbing:
        return NO
    since = "its early level" if args.since <= 0 else f"step {s.step_at(args.since)}"
    # distance 0: a stall has no distance from a band, so it does not outrank a diagnosis that measures one
    return HarmResult(True, 0.0, f"{s.name} has stalled since {since} ({ref:.3g} -> {s.level:.3g})", 1.0)


def run_place(s: MetricSignal, signals: Signals) -> Place | None:
    """The window level's place among the published runs at this run's progress (``_envelope``)."""
    config = config_of(signals.derived.cfg) if signals.derived is not None else None
    return place(s.name, s.level, progress_of(signals.window.last_step, signals.planned_steps), config)


def _ceiling(s: MetricSignal, args: BeyondPublished, signals: Signals) -> tuple[float, str] | None:
    found = run_place(s, signals)
    if found is not None and found.top > 0:
        return found.top, (f"the highest step healthy published verl runs logged {found.where} "
                           f"({found.top:.3g}; {ENVELOPE})")
    if args.high:
        return args.high, f"its healthy ceiling {args.high:g}"
    return None


def beyond_published(s: MetricSignal, args: BeyondPublished, signals: Signals) -> HarmResult:
    ceiling = _ceiling(s, args, signals)
    if ceiling is None or not math.isfinite(s.level) or ceiling[0] <= 0:
        return NO
    top, what = ceiling
    if s.level <= args.factor * top:
        return NO
    persistence = float((s.values > args.factor * top).mean())
    return HarmResult(True, s.level / top, f"{s.name} is {s.level:.3g}, {s.level / top:.0f}x {what}", persistence)


def doubling_steps(s: MetricSignal) -> float:
    """Steps per doubling (negative: per halving) from a log-linear Theil-Sen fit over the window; inf if flat."""
    ok = s.values > 0
    if ok.sum() < 5:
        return math.inf
    rate = theil_sen_slope(s.steps[ok].astype(float), np.log(s.values[ok]))
    return math.log(2) / rate if rate != 0 else math.inf


def accelerating(s: MetricSignal, args: Accelerating, horizon: int, planned: bool) -> HarmResult:
    per = doubling_steps(s)
    up = args.direction is Direction.UP
    if not math.isfinite(per) or (per <= 0 if up else per >= 0):
        return NO
    span = float(s.steps[-1] - s.steps[0]) or 1.0
    if span / abs(per) < args.min_doublings:
        return NO
    last = float(median(s.values[-3:]))
    if last <= 0:
        return NO
    to_cross = abs(per) * math.log2(args.limit / last) if up else abs(per) * math.log2(last / args.limit)
    if to_cross > horizon:
        return NO
    verb = "doubles" if up else "halves"
    left = "the run's remaining" if planned else "as many more steps as it has run (no total_training_steps): the next"
    when = ("it has already crossed it" if to_cross <= 0
            else f"at that rate it would cross it in ~{to_cross:.0f} steps, within {left} {horizon} steps")
    text = (f"projection: {s.name} {verb} every {abs(per):.1f} steps (log-linear fit over steps "
            f"{int(s.steps[0])}-{int(s.steps[-1])}); {when} (limit {args.limit:g})")
    return HarmResult(True, max(1.0, horizon / max(to_cross, 1.0)), text, 1.0)


def remaining_steps(signals: Signals) -> tuple[int, bool]:
    """Steps left in the run (planned total minus the last logged step: 0 for a run that reached its total), and
    whether the total was known; without it, as many more steps as the run has logged."""
    last = signals.window.last_step
    if signals.planned_steps:
        return max(signals.planned_steps - last, 0), True
    return max(last, 1), False


def describe(group: tuple[Any, ...], signals: Signals) -> tuple[str, float, float]:
    """The words, distance and persistence of the harm-kind conditions (``_rule_loader.Condition``) of one harm
    group that held."""
    texts, distance, persistence = [], 0.0, 0.0
    for cond in group:
        kind = cond.params
        if not isinstance(kind, HARM_KINDS) or cond.negate or not signals.has(cond.metric):
            continue
        result = kind.harm(signals[cond.metric], signals)
        if result.holds:
            texts.append(result.text)
            distance, persistence = max(distance, result.distance), max(persistence, result.persistence)
    return "; ".join(texts), distance, persistence
