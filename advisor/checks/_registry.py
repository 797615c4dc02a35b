"""The check registry: each check is a function of the config that yields issues.

A check mirrors one rule. ``source`` names the verl file:line it mirrors (rules verl enforces, at
config time, at worker start-up or in the first step) or the doc / reasoning behind a rule verl
never checks. A check proposes candidate fixes (one or two keys each, tried in order); the runner
keeps the first candidate that clears the issue without causing a new error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from advisor.facts import BatchPlan, mistyped_keys
from advisor.findings import Severity
from advisor.load import VerlConfig
from advisor.verl import in_range, validate_range

from ._thresholds import CheckThresholds, check_thresholds


@dataclass
class Issue:
    """One violation found by a check."""

    message: str
    keys: tuple[str, ...]
    fixes: list[dict[str, Any]] = field(default_factory=list)  # candidate {key: new value}, in order
    reason: str = ""  # why the fix helps, one line
    severity: Severity | None = None  # overrides the check's default
    source: str | None = None  # overrides the check's source (e.g. the V1 trainer's code path)


@dataclass
class CheckContext:
    """What a check reads: the config, its batch layers, the model's architecture and the thresholds."""

    cfg: VerlConfig
    plan: BatchPlan
    model: Any | None = None  # architecture facts when the model is known (num_attention_heads, ...)
    thresholds: CheckThresholds = field(default_factory=check_thresholds)  # knowledge/check_thresholds.yaml

    def get(self, key: str, default: Any = None) -> Any:
        """The key's value; ``default`` for a value of the wrong type (text where verl takes a number, from a shell
        variable the script leaves undefined, or an integer past a float's range): the loader reports it
        (L008 wrong-type), and a check comparing it with a number has nothing to say."""
        if key in self._mistyped:
            return default
        return self.cfg.get(key, default)

    def mistyped(self, key: str) -> bool:
        """Whether ``key``'s value is of a type verl rejects (its check is unknown, not 'unset')."""
        return key in self._mistyped

    @property
    def _mistyped(self) -> frozenset[str]:
        cached = self.__dict__.get("_mistyped_keys")
        if cached is None:
            cached = mistyped_keys(self.cfg)
            self.__dict__["_mistyped_keys"] = cached
        return cached

    @property
    def validated(self) -> bool:
        """Whether verl's validate_config runs on this config (a recipe's own TaskRunner may never call it, and
        then the rules only that function enforces do not apply)."""
        return self.cfg.entry is None or self.cfg.entry.validate_config is not False


CheckFn = Callable[[CheckContext], Iterable[Issue]]


@dataclass(frozen=True)
class Check:
    """One registered check: its id, name, severity, verl source, function and one-line summary."""

    id: str
    name: str
    severity: Severity
    source: str
    fn: CheckFn
    summary: str
    verl: str | None = None  # the verl versions whose code has this rule (``>=0.6,<0.9``); None: all
    sources: tuple[tuple[str, str], ...] = ()  # (version range, source) where a later verl moved the rule
    # a silent trap of a default the user did not set: reported, but never a reason to withhold another fix
    # (a larger n that sends more responses per replica than verl 0.9's max_num_seqs default is still right)
    trap: bool = False

    def applies_to(self, version: str) -> bool:
        return in_range(version, self.verl)

    def source_for(self, version: str) -> str:
        """The verl file:line of this rule in the version checked."""
        return next((src for spec, src in self.sources if in_range(version, spec)), self.source)


CHECKS: list[Check] = []


def check(id: str, name: str, severity: Severity, source: str, *, verl: str | None = None,
          sources: dict[str, str] | None = None, trap: bool = False) -> Callable[[CheckFn], CheckFn]:
    """Register a check function under a stable id (the first docstring line is its summary).

    ``verl`` limits the check to the versions whose code has the rule; ``sources`` maps a version range to
    the file:line of the rule there, where a later verl moved it (``source`` is the rest).
    """
    if verl is not None:
        validate_range(verl)
    for spec in sources or {}:
        validate_range(spec)

    level = Severity(severity)  # a closed set: a typo fails at import

    def wrap(fn: CheckFn) -> CheckFn:
        if any(c.id == id for c in CHECKS):
            raise ValueError(f"duplicate check id {id}")
        summary = (fn.__doc__ or name).strip().splitlines()[0]
        CHECKS.append(Check(id, name, level, source, fn, summary, verl, tuple((sources or {}).items()), trap))
        return fn

    return wrap


def divisors_near(n: int, target: int) -> Iterator[int]:
    """Divisors of n ordered by distance from target (smaller first on ties)."""
    if n <= 0 or n > 10**12:  # no proposal for a size no GPU holds (and bounded work for one of 4,000 digits)
        return
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    divs = set(small) | {n // d for d in small}
    yield from sorted(divs, key=lambda d: (abs(d - target), d))


def multiples_near(step: int, target: int, limit: int = 4) -> list[int]:
    """Positive multiples of step nearest to target (the smaller one first on a tie)."""
    if step <= 0:
        return []
    below = (target // step) * step
    out = {m for m in (below - step, below, below + step, below + 2 * step) if m > 0}
    return sorted(out, key=lambda m: (abs(m - target), m))[:limit]
