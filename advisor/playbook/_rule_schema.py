"""What a rule file may say: the closed sets of values (enums) and each condition test's arguments.

Each condition test (``rises``, ``above``, ...) declares its arguments as a record (a ``NamedTuple``: immutable,
and 8x cheaper to define than a frozen dataclass, which counts at start-up): a field without a default is
required, a field with one is optional and the default is stated here once. The loader
(``_schema``) builds the dataclass from the file, so a misspelt argument (``facter``), a missing one
(``above`` without ``value``) or an unknown value (``safety: maybe``) fails at load with "did you mean",
never later during a diagnosis. The implementations of the tests live in ``_diagnose``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from advisor.typed import StrEnum, build


class Tree(StrEnum):
    """The debug trees, in the order ``advisor suggest`` investigates them: samples and rewards first, then how
    rewards are rewritten (KL), advantages (and the critic behind them), the policy update (clipfrac, ppo_kl,
    entropy), then lengths (a policy that degenerates also rambles into the length limit), and performance
    last; NaN/inf break everything, so first."""

    NUMERICS = "numerics"
    REWARD = "reward"
    KL = "kl"
    ADVANTAGE = "advantage"
    CRITIC = "critic"
    CLIPFRAC = "clipfrac"
    ENTROPY = "entropy"
    RESPONSE_LENGTH = "response_length"
    VALIDATION = "validation"
    MEMORY = "memory"
    THROUGHPUT = "throughput"


class Status(StrEnum):
    STABLE = "stable"
    PREVIEW = "preview"
    DEPRECATED = "deprecated"
    REMOVED = "removed"


class Mode(StrEnum):
    PPO = "ppo"  # GAE with a critic
    GRPO = "grpo"  # a group estimator
    OTHER = "other"


class KlPlacement(StrEnum):
    REWARD = "reward"
    LOSS = "loss"
    BOTH = "both"
    NONE = "none"


class Safety(StrEnum):
    SAFE = "safe"
    NEEDS_SWEEP = "needs-sweep"  # an algorithm knob: verify with `advisor verify`


class ConfigOp(StrEnum):
    EQ = "eq"
    NE = "ne"
    GT = "gt"
    GE = "ge"
    LT = "lt"
    LE = "le"
    IN = "in"
    NOT_IN = "not_in"


class Compare(StrEnum):
    """The orderings ``vs_metric`` may ask for (names of ``advisor.operators``)."""

    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"


class Fact(StrEnum):
    """What ``applies_to.facts`` may name (derived from the config by ``_signals.run_facts``)."""

    ON_POLICY = "on_policy"
    CRITIC = "critic"
    ESTIMATOR = "estimator"


# -- condition tests ---------------------------------------------------------------------------------------------

TEST_ARGS: dict[str, type] = {}  # test name -> its argument dataclass
T = TypeVar("T")


def condition_test(name: str) -> Callable[[type[T]], type[T]]:
    """Declare the arguments of one condition test (the record's fields, their types and defaults)."""

    def register(cls: type[T]) -> type[T]:
        TEST_ARGS[name] = cls
        return cls

    return register


@condition_test("present")
class Present(NamedTuple):
    """The metric has a finite value."""


@condition_test("absent")
class Absent(NamedTuple):
    """The metric has no finite value."""


@condition_test("above")
class Above(NamedTuple):
    """The window median is above ``value`` (or, with ``fraction``, that share of steps is; needs 5 steps)."""

    value: float
    fraction: float | None = None


@condition_test("below")
class Below(NamedTuple):
    """The window median is below ``value`` (or, with ``fraction``, that share of steps is; needs 5 steps)."""

    value: float
    fraction: float | None = None


@condition_test("at_most")
class AtMost(NamedTuple):
    """Every value of the window is <= ``value``."""

    value: float


@condition_test("at_least")
class AtLeast(NamedTuple):
    """Every value of the window is >= ``value``."""

    value: float


@condition_test("max_above")
class MaxAbove(NamedTuple):
    """Some value of the window is above ``value``."""

    value: float


@condition_test("outside")
class Outside(NamedTuple):
    """At least ``fraction`` of the window lies outside [low, high]."""

    low: float | None = None
    high: float | None = None
    fraction: float = 0.5


@condition_test("rises")
class Rises(NamedTuple):
    """The window median is >= ``factor`` x the early median (above ``min_level``, not trending down)."""

    factor: float = 2.0
    min_level: float = 0.0


@condition_test("falls")
class Falls(NamedTuple):
    """The window median is <= ``factor`` x the early median (factor 0.3: fell by 70%)."""

    factor: float = 0.5


@condition_test("fell_early")
class FellEarly(NamedTuple):
    """By ``by`` (a fraction of the run) the metric was already <= ``factor`` x its early level."""

    factor: float = 0.2
    by: float = 0.2


@condition_test("falls_from_peak")
class FallsFromPeak(NamedTuple):
    """The window median is <= ``factor`` x the run's peak (of a 9-step rolling median)."""

    factor: float = 0.8


@condition_test("increasing")
class Increasing(NamedTuple):
    """Theil-Sen slope x window span > ``min_change`` x max(|level|, ``scale``)."""

    min_change: float = 0.2
    scale: float = 1e-12


@condition_test("decreasing")
class Decreasing(NamedTuple):
    """The mirror of ``increasing``."""

    min_change: float = 0.2
    scale: float = 1e-12


@condition_test("flat")
class Flat(NamedTuple):
    """max - min over the window <= ``tolerance`` (at least 3 steps)."""

    tolerance: float = 1e-9


@condition_test("spikes")
class Spikes(NamedTuple):
    """At least ``count`` points jump far above the rolling median."""

    count: int = 1


@condition_test("nonfinite")
class Nonfinite(NamedTuple):
    """The metric went NaN or inf."""


@condition_test("gpu_fraction_above")
class GpuFractionAbove(NamedTuple):
    """The window's peak is above ``value`` x the GPU's memory (only when the GPU is known)."""

    value: float


@condition_test("vs_metric")
class VsMetric(NamedTuple):
    """level ``op`` ``scale`` x other's level + ``offset``."""

    other: str
    op: Compare = Compare.LT
    scale: float = 1.0
    offset: float = 0.0


@condition_test("ratio_above")
class RatioAbove(NamedTuple):
    """level / other's level > ``value``."""

    other: str
    value: float


def build_args(test: str, raw: dict[str, Any], where: str) -> Any:
    """The argument object of ``test`` from a condition's other keys; SchemaError for an unknown, missing or
    mistyped one (``where`` is the condition's place in the file, e.g. ``conditions[0]``)."""
    return build(TEST_ARGS[test], raw, where, kind="argument", owner=f"test '{test}'")


def given_args(params: Any) -> dict[str, Any]:
    """The arguments as a mapping (defaults included, unset optional ones left out)."""
    if params is None:
        return {}
    return {name: value for name, value in params._asdict().items() if value is not None}


# -- harm kinds (issue 24; implemented in ``_harm``) -------------------------------------------------------------


class Direction(StrEnum):
    UP = "up"
    DOWN = "down"


@condition_test("stalled")
class Stalled(NamedTuple):
    """The metric (a score or validation) gained at most ``min_gain`` x max(|ref|, ``scale``) since ``since`` (a
    fraction of the run; 0: its early level) and is not climbing over the window."""

    min_gain: float = 0.05
    scale: float = 0.1
    since: float = 0.0


@condition_test("beyond_published")
class BeyondPublished(NamedTuple):
    """The window median is above ``factor`` x the highest value healthy published verl runs show
    (knowledge/published_runs.yaml), or x ``high`` (the rule's cited ceiling) for a metric they do not log."""

    factor: float = 3.0
    high: float | None = None


@condition_test("accelerating")
class Accelerating(NamedTuple):
    """A log-linear fit over the window doubles (``up``) or halves (``down``) the metric at least ``min_doublings``
    times, and projects it across ``limit`` (verl's clamp, a collapse level) within the run's remaining steps."""

    limit: float
    direction: Direction = Direction.UP
    min_doublings: float = 1.0


# -- config-derived quantities (issue 24; implemented in ``_derived``) -------------------------------------------


@condition_test("flat_groups_above")
class FlatGroupsAbove(NamedTuple):
    """The expected share of groups whose responses all score alike, p^n + (1-p)^n with p the score mean (a 0/1
    reward) and n = rollout.n, is above ``value`` (the condition's metric: critic/score/mean)."""

    value: float


@condition_test("padding_waste_above")
class PaddingWasteAbove(NamedTuple):
    """With use_remove_padding=False, the share of the update's tokens that are padding, 1 - mean lengths / max
    lengths, is above ``value`` (the condition's metric: response_length/mean)."""

    value: float


@condition_test("generation_waves_above")
class GenerationWavesAbove(NamedTuple):
    """A step's responses per rollout replica over the sequences its KV cache runs at once (the memory model,
    only when --gpu names the GPU) is above ``value``."""

    value: float


@condition_test("kv_bound_above")
class KvBoundAbove(NamedTuple):
    """min(max_num_seqs, responses per replica) / the sequences the KV cache holds (the memory model, only with
    --gpu) is above ``value``: the cache, not the engine's cap, limits how many sequences generate at once."""

    value: float
