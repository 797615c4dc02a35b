"""What a sweep varies: one config key with listed values or a numeric range, and its Optuna distribution.

A :class:`Param` is either a grid (``--values 1e-5,1e-4``) or a range (``--range 1e-6:1e-4:log``). The
baseline, the config's current value, is always part of the sweep: a grid gets it added when it is not
listed; a range keeps its bounds (the search never wanders towards a faulty baseline) and the baseline
trials are enqueued with their value fixed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from advisor.errors import SweepError


@dataclass(frozen=True)
class Param:
    """One swept config key.

    Example::

        Param.grid("actor_rollout_ref.actor.optim.lr", [1e-5, 1e-4])
        Param.range("actor_rollout_ref.actor.optim.lr", 1e-6, 1e-4, log=True)

    Args:
        key: the dotted verl key, as in a Hydra override.
        values: the listed values of a grid (at least one); None for a range.
        low, high: the bounds of a range (``low < high``; both ints make an integer range).
        log: sample the range on a log scale (both bounds must be > 0).
    """

    key: str
    values: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False

    def __post_init__(self) -> None:
        if (self.values is None) == (self.low is None or self.high is None):
            raise SweepError(f"--param {self.key}: give either listed values or a LOW:HIGH range")
        if self.values is not None:
            if not self.values:
                raise SweepError(f"--param {self.key}: --values lists no value")
            for v in self.values:
                if v is not None and not isinstance(v, (bool, int, float, str)):
                    raise SweepError(f"--param {self.key}: value {v!r} is a {type(v).__name__}; "
                                     "a swept value must be a number, a string, true/false or null")
            return
        assert self.low is not None and self.high is not None
        if not self.low < self.high:
            raise SweepError(f"--param {self.key}: range {self.low}:{self.high} is empty; LOW must be below HIGH")
        if self.log and self.low <= 0:
            raise SweepError(f"--param {self.key}: a log range needs LOW > 0, got {self.low}")

    @classmethod
    def grid(cls, key: str, values: Sequence[Any]) -> Param:
        return cls(key, values=tuple(values))

    @classmethod
    def range(cls, key: str, low: float, high: float, *, log: bool = False) -> Param:
        return cls(key, low=low, high=high, log=log)

    @property
    def is_grid(self) -> bool:
        return self.values is not None

    @property
    def is_int_range(self) -> bool:
        return not self.is_grid and isinstance(self.low, int) and isinstance(self.high, int)

    def grid_values(self, baseline: Any) -> list[Any]:
        """The listed values with the baseline first (added when not listed); duplicates dropped."""
        assert self.values is not None
        out: list[Any] = [baseline]
        for v in self.values:
            if not any(same_value(v, o) for o in out):
                out.append(v)
        return out

    def distribution(self, baseline: Any) -> Any:
        """The Optuna distribution TPE samples from (a categorical one includes the baseline)."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        if self.is_grid:
            return CategoricalDistribution(self.grid_values(baseline))
        if self.is_int_range:
            return IntDistribution(int(self.low), int(self.high), log=self.log)  # type: ignore[arg-type]
        return FloatDistribution(float(self.low), float(self.high), log=self.log)  # type: ignore[arg-type]

    def describe(self) -> str:
        if self.is_grid:
            return f"{self.key} in {{{', '.join(format_value(v) for v in self.values or ())}}}"
        return f"{self.key} in [{format_value(self.low)}, {format_value(self.high)}]{' (log)' if self.log else ''}"

    def to_dict(self) -> dict[str, Any]:
        if self.is_grid:
            return {"key": self.key, "values": list(self.values or ())}
        return {"key": self.key, "low": self.low, "high": self.high, "log": self.log}


def same_value(a: Any, b: Any) -> bool:
    """Equal as config values: 1e-3 == 0.001, 1 == 1.0, but True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    return bool(a == b)


def same_point(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same values of the same keys (each compared with :func:`same_value`)."""
    return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "null" if value is None else str(value)


def _scalar(text: str, key: str) -> Any:
    from advisor.errors import ConfigError
    from advisor.verl import parse_override

    try:
        return parse_override(f"{key}={text.strip()}").value
    except ConfigError as err:
        raise SweepError(f"--param {key}: value '{text}' is not a Hydra value ({err.message})") from err


def parse_param(key: str, *, values: str | None = None, range_: str | None = None) -> Param:
    """A :class:`Param` from the CLI's ``--values v1,v2,...`` or ``--range LOW:HIGH[:log]`` text.

    Raises:
        SweepError: both or neither of values/range given, or a value that does not parse.
    """
    if (values is None) == (range_ is None):
        raise SweepError(f"--param {key} needs exactly one of --values v1,v2,... or --range LOW:HIGH[:log]")
    if values is not None:
        items = [v for v in values.split(",")]
        if any(not v.strip() for v in items):
            raise SweepError(f"--param {key}: --values '{values}' has an empty item")
        return Param.grid(key, [_scalar(v, key) for v in items])
    assert range_ is not None
    parts = range_.split(":")
    log = len(parts) == 3 and parts[2].strip().lower() == "log"
    if len(parts) not in (2, 3) or (len(parts) == 3 and not log):
        raise SweepError(f"--param {key}: --range '{range_}' is not LOW:HIGH or LOW:HIGH:log")
    low, high = (_scalar(p, key) for p in parts[:2])
    for bound in (low, high):
        if isinstance(bound, bool) or not isinstance(bound, (int, float)):
            raise SweepError(f"--param {key}: --range bound {bound!r} is not a number")
    return Param.range(key, low, high, log=log)
