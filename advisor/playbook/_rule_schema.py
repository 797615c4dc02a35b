"""What a rule file may say: the closed sets of values (enums).

The loader (``_rule_loader``) reads each such field through its enum, so an unknown value (``safety: maybe``)
fails at load with "did you mean", never later during a diagnosis. The condition tests and their arguments are
the records of ``_conditions``.
"""

from __future__ import annotations

from advisor.typed import StrEnum


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
    """What ``applies_to.facts`` and a fix's ``when_facts`` may name (derived from the config by
    ``_signals.run_facts``)."""

    ON_POLICY = "on_policy"
    CRITIC = "critic"
    ESTIMATOR = "estimator"
    CLIP_HIGHER = "clip_higher"


class Direction(StrEnum):
    """Which way ``accelerating`` projects a metric."""

    UP = "up"
    DOWN = "down"
