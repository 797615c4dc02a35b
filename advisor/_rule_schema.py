"""What a rule file may say: the closed sets of values (enums) and each condition test's arguments.

Each condition test (``rises``, ``above``, ...) declares its arguments as a frozen dataclass: a field without
a default is required, a field with one is optional and the default is stated here once. The loader
(``_playbook``) builds the dataclass from the file, so a misspelt argument (``facter``), a missing one
(``above`` without ``value``) or an unknown value (``safety: maybe``) fails at load with "did you mean",
never later during a diagnosis. The implementations of the tests live in ``_diagnose``.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import sys
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10
    class StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str(self.value)

        __format__ = str.__format__


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


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


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


class SchemaError(ValueError):
    """One field of a rule file is wrong: ``field`` names it, ``suggestion`` is the "did you mean"."""

    def __init__(self, field: str, message: str, suggestion: str | None = None) -> None:
        self.field, self.message, self.suggestion = field, message, suggestion
        super().__init__(f"{field}: {message}")


def did_you_mean(word: object, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


E = TypeVar("E", bound=StrEnum)


def enum_value(kind: type[E], value: Any, field: str) -> E:
    """The member of ``kind`` spelt ``value``; SchemaError listing the members and the closest one."""
    try:
        return kind(value)
    except (ValueError, TypeError):
        known = [m.value for m in kind]
        raise SchemaError(field, f"{value!r} is not one of {', '.join(known)}", did_you_mean(value, known)) from None


# -- condition tests ---------------------------------------------------------------------------------------------

TEST_ARGS: dict[str, type] = {}  # test name -> its argument dataclass
T = TypeVar("T")


def condition_test(name: str) -> Callable[[type[T]], type[T]]:
    """Declare the arguments of one condition test (the dataclass's fields, their types and defaults)."""

    def register(cls: type[T]) -> type[T]:
        TEST_ARGS[name] = dataclasses.dataclass(frozen=True)(cls)
        return TEST_ARGS[name]  # type: ignore[return-value]

    return register


@condition_test("present")
class Present:
    """The metric has a finite value."""


@condition_test("absent")
class Absent:
    """The metric has no finite value."""


@condition_test("above")
class Above:
    """The window median is above ``value`` (or, with ``fraction``, that share of steps is; needs 5 steps)."""

    value: float
    fraction: float | None = None


@condition_test("below")
class Below:
    """The window median is below ``value`` (or, with ``fraction``, that share of steps is; needs 5 steps)."""

    value: float
    fraction: float | None = None


@condition_test("at_most")
class AtMost:
    """Every value of the window is <= ``value``."""

    value: float


@condition_test("at_least")
class AtLeast:
    """Every value of the window is >= ``value``."""

    value: float


@condition_test("max_above")
class MaxAbove:
    """Some value of the window is above ``value``."""

    value: float


@condition_test("outside")
class Outside:
    """At least ``fraction`` of the window lies outside [low, high]."""

    low: float | None = None
    high: float | None = None
    fraction: float = 0.5


@condition_test("rises")
class Rises:
    """The window median is >= ``factor`` x the early median (above ``min_level``, not trending down)."""

    factor: float = 2.0
    min_level: float = 0.0


@condition_test("falls")
class Falls:
    """The window median is <= ``factor`` x the early median (factor 0.3: fell by 70%)."""

    factor: float = 0.5


@condition_test("fell_early")
class FellEarly:
    """By ``by`` (a fraction of the run) the metric was already <= ``factor`` x its early level."""

    factor: float = 0.2
    by: float = 0.2


@condition_test("falls_from_peak")
class FallsFromPeak:
    """The window median is <= ``factor`` x the run's peak (of a 9-step rolling median)."""

    factor: float = 0.8


@condition_test("increasing")
class Increasing:
    """Theil-Sen slope x window span > ``min_change`` x max(|level|, ``scale``)."""

    min_change: float = 0.2
    scale: float = 1e-12


@condition_test("decreasing")
class Decreasing:
    """The mirror of ``increasing``."""

    min_change: float = 0.2
    scale: float = 1e-12


@condition_test("flat")
class Flat:
    """max - min over the window <= ``tolerance`` (at least 3 steps)."""

    tolerance: float = 1e-9


@condition_test("spikes")
class Spikes:
    """At least ``count`` points jump far above the rolling median."""

    count: int = 1


@condition_test("nonfinite")
class Nonfinite:
    """The metric went NaN or inf."""


@condition_test("gpu_fraction_above")
class GpuFractionAbove:
    """The window's peak is above ``value`` x the GPU's memory (only when the GPU is known)."""

    value: float


@condition_test("vs_metric")
class VsMetric:
    """level ``op`` ``scale`` x other's level + ``offset``."""

    other: str
    op: Compare = Compare.LT
    scale: float = 1.0
    offset: float = 0.0


@condition_test("ratio_above")
class RatioAbove:
    """level / other's level > ``value``."""

    other: str
    value: float


def _coerce(value: Any, hint: Any, field: str) -> Any:
    """``value`` as the field's type: float (an int is fine, a bool is not), int, str, an enum, or None."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None:
        if type(None) in options:
            return None
        raise SchemaError(field, "must not be null")
    for kind in options:
        if isinstance(kind, type) and issubclass(kind, StrEnum):
            return enum_value(kind, value, field)
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind is str and isinstance(value, str) and value:
            return value
    names = {float: "a number", int: "an integer", str: "a name"}
    wanted = " or ".join(names.get(k, getattr(k, "__name__", str(k))) for k in options if k is not type(None))
    raise SchemaError(field, f"must be {wanted}, not {value!r}")


def build_args(test: str, raw: dict[str, Any], where: str) -> Any:
    """The argument object of ``test`` from a condition's other keys; SchemaError for an unknown, missing or
    mistyped one (``where`` is the condition's place in the file, e.g. ``conditions[0]``)."""
    cls = TEST_ARGS[test]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in raw:
        if name not in fields:
            allowed = ", ".join(fields) or "none"
            raise SchemaError(f"{where}.{name}", f"unknown argument for test '{test}' (its arguments: {allowed})",
                              did_you_mean(name, fields))
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields.items():
        if name not in raw:
            if f.default is dataclasses.MISSING:
                raise SchemaError(f"{where}.{name}", f"test '{test}' needs '{name}'")
            continue
        values[name] = _coerce(raw[name], hints[name], f"{where}.{name}")
    return cls(**values)


def given_args(params: Any) -> dict[str, Any]:
    """The arguments as a mapping (defaults included, unset optional ones left out)."""
    if params is None:
        return {}
    return {f.name: getattr(params, f.name) for f in dataclasses.fields(params) if getattr(params, f.name) is not None}
