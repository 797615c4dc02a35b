"""The performance-only knobs the memory fix may turn, and the values it tries for each.

The table is data: knowledge/memory_knobs.yaml (which knob, when it applies, which workload field it
edits and which config keys make the same edit, with verl's sources). This module loads it once,
checks it, and turns each entry into :class:`Candidate` values for one config.

A :class:`Candidate` edits the :class:`~._workload.Workload` (for the fast estimate) and carries the
config :class:`~advisor.Change` objects that make the same edit in the user's config.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from dataclasses import field as _field
from functools import cache
from typing import TYPE_CHECKING, Any

from advisor.datafiles import load_knowledge
from advisor.findings import Change

from ._workload import EDITABLE_PATHS, FIELD_PATHS, Workload

if TYPE_CHECKING:
    from advisor.load import VerlConfig

_FILE = "memory_knobs.yaml"
_TOKEN_FRACTIONS = (0.75, 0.5, 0.375, 0.25)  # of the current token budget
_GMU_FLOOR, _GMU_CEILING, _GMU_STEP = 0.1, 0.9, 0.05  # a cost unit is one 0.05 step


@dataclass(frozen=True)
class Candidate:
    """One knob set to one value: the workload edit, the config changes and its cost rank."""

    knob: str
    cost: float
    edit: dict[str, Any]
    changes: tuple[Change, ...]

    def apply(self, work: Workload) -> Workload:
        return work.edit(self.edit)


@dataclass(frozen=True)
class KnobRule:
    """One row of knowledge/memory_knobs.yaml."""

    knob: str
    kind: str
    key: str | tuple[str, ...]  # several: the key of each verl version, the first the config has wins
    reason: str
    when: dict[str, Any] = _field(default_factory=dict)
    field: str | None = None
    current: tuple[str, ...] = ()
    divides: str | None = None
    dp: str | None = None
    global_key: str | None = None
    set: dict[str, Any] = _field(default_factory=dict)
    value: Any = None
    down: tuple[float, ...] = ()
    up: tuple[float, ...] = ()
    reason_up: str | None = None
    floor: int = 1
    limit: int | None = None

    @property
    def edits(self) -> str:
        """The Workload field path this knob edits (every kind but a switch names one in memory_knobs.yaml)."""
        if self.field is None:
            raise ValueError(f"memory knob {self.knob!r} ({self.kind}) names no 'field'")
        return self.field

    def config_key(self, cfg: VerlConfig) -> str:
        if isinstance(self.key, str):
            return self.key
        return next((k for k in self.key if cfg.has(k)), self.key[0])

    def applies(self, work: Workload) -> bool:
        return all(_matches(work.value(name), want) for name, want in self.when.items())


def _matches(actual: Any, want: Any) -> bool:
    if isinstance(want, list):
        return actual in want
    if isinstance(want, dict):
        return bool(actual > want["above"])
    return bool(actual == want)


_RULE_FIELDS = {f.name for f in fields(KnobRule)}


def _problem(rule: dict[str, Any], kinds: dict[str, Callable[..., Any]]) -> str | None:
    unknown = set(rule) - _RULE_FIELDS
    if unknown:
        return f"unknown field(s) {', '.join(sorted(unknown))}"
    for name in ("knob", "kind", "key", "reason"):
        if name not in rule:
            return f"missing '{name}'"
    if rule["kind"] not in kinds:
        return f"unknown kind '{rule['kind']}' (one of {', '.join(sorted(kinds))})"
    named = [*(rule.get("when") or {}), *(rule.get("set") or {}), *(rule.get("current") or ()),
             *(n for n in (rule.get("field"), rule.get("divides"), rule.get("dp")) if n)]
    bad = [n for n in named if n not in FIELD_PATHS]
    if bad:
        return f"unknown workload field(s) {', '.join(bad)}"
    edited = [*(rule.get("set") or {}), *([rule["field"]] if rule.get("field") else [])]
    derived = [n for n in edited if n not in EDITABLE_PATHS]
    return f"cannot edit derived workload value(s) {', '.join(derived)}" if derived else None


@cache
def knob_rules() -> tuple[KnobRule, ...]:
    """The knob table, checked: a malformed row is a programming error in a shipped file, named here."""
    data = load_knowledge(_FILE)
    out = []
    for i, row in enumerate(data["knobs"]):
        problem = _problem(row, _KINDS)
        if problem:
            raise ValueError(f"knowledge/{_FILE}: knob #{i + 1} ({row.get('knob', '?')}): {problem}")
        row = dict(row)
        for name in ("current", "down", "up"):
            row[name] = tuple(row.get(name) or ())
        if isinstance(row["key"], list):
            row["key"] = tuple(row["key"])
        out.append(KnobRule(**row))
    return tuple(out)


def _change(cfg: VerlConfig, key: str, new: Any, reason: str) -> Change:
    old = cfg.get(key)
    return Change(key, old, new, reason, add=not cfg.has(key))


def _halvings(value: int, floor: int = 1) -> list[int]:
    out = []
    v = value // 2
    while v >= floor:
        out.append(v)
        v //= 2
    if out and out[-1] != floor and floor < value:
        out.append(floor)
    return out


def _divisors_below(n: int, below: int) -> list[int]:
    return sorted((d for d in range(1, min(n, below - 1) + 1) if n % d == 0), reverse=True)


def _step_cost(base: float, old: float, new: float) -> float:
    """Cost grows with how far a size shrinks (one unit per halving)."""
    return base * max(1.0, math.log2(max(old, 1e-9) / max(new, 1e-9)))


def _current(rule: KnobRule, work: Workload) -> Any:
    for name in rule.current:
        value = work.value(name)
        if value is not None:
            return value
    return None


def _micro_batch(rule: KnobRule, cfg: VerlConfig, work: Workload, base: float, limit: int) -> Iterator[Candidate]:
    current = _current(rule, work)
    if current is None or current <= 1:
        return
    values = _divisors_below(work.value(rule.divides), current) if rule.divides else _halvings(current)
    key = rule.config_key(cfg)
    use_global = cfg.get(key) is None and rule.global_key and cfg.get(rule.global_key) is not None
    dp = work.value(rule.dp) if rule.dp else 1
    for value in values[:limit]:
        if use_global and rule.global_key:  # (use_global implies a global_key; said again for the checker)
            changes = (_change(cfg, rule.global_key, value * dp, rule.reason),)
        else:
            changes = (_change(cfg, key, value, rule.reason),)
        yield Candidate(rule.knob, _step_cost(base, current, value), {rule.edits: value}, changes)


def _token_budget(rule: KnobRule, cfg: VerlConfig, work: Workload, base: float, limit: int) -> Iterator[Candidate]:
    current = work.value(rule.edits)
    floor = -(-work.max_seq_tokens // work.topology.sp)  # one whole sequence per Ulysses rank
    for fraction in _TOKEN_FRACTIONS:
        value = max(int(current * fraction), floor)
        if value >= current:
            continue
        yield Candidate(rule.knob, _step_cost(base, current, value), {rule.edits: value},
                        (_change(cfg, rule.config_key(cfg), value, rule.reason),))
        if value == floor:
            break


def _switch(rule: KnobRule, cfg: VerlConfig, work: Workload, base: float, limit: int) -> Iterator[Candidate]:
    yield Candidate(rule.knob, base, dict(rule.set), (_change(cfg, rule.config_key(cfg), rule.value, rule.reason),))


def _gmu(rule: KnobRule, cfg: VerlConfig, work: Workload, base: float, limit: int) -> Iterator[Candidate]:
    for sign, deltas, reason in ((-1, rule.down, rule.reason), (1, rule.up, rule.reason_up or rule.reason)):
        for delta in deltas:
            value = round(work.rollout.gmu + sign * delta, 2)
            if _GMU_FLOOR <= value <= _GMU_CEILING:
                yield Candidate(rule.knob, base * delta / _GMU_STEP, {rule.edits: value},
                                (_change(cfg, rule.config_key(cfg), value, reason),))


def _rollout_tp(rule: KnobRule, cfg: VerlConfig, work: Workload, base: float, limit: int) -> Iterator[Candidate]:
    tp = work.rollout.tp * 2
    while tp <= work.topology.gpus_per_node and work.topology.n_gpus % (tp * work.rollout.dp) == 0:
        yield Candidate(rule.knob, base * (tp // work.rollout.tp) / 2, {rule.edits: tp},
                        (_change(cfg, rule.config_key(cfg), tp, rule.reason),))
        tp *= 2


def _halving_values(rule: KnobRule, cfg: VerlConfig, work: Workload, base: float, limit: int) -> Iterator[Candidate]:
    current = work.value(rule.edits)
    for value in _halvings(current, rule.floor)[:rule.limit]:
        yield Candidate(rule.knob, _step_cost(base, current, value), {rule.edits: value},
                        (_change(cfg, rule.config_key(cfg), value, rule.reason),))


def _max_model_len(rule: KnobRule, cfg: VerlConfig, work: Workload, base: float, limit: int) -> Iterator[Candidate]:
    if work.rollout.max_model_len is None or work.rollout.max_model_len > work.max_seq_tokens:
        yield Candidate(rule.knob, base, {rule.edits: work.max_seq_tokens},
                        (_change(cfg, rule.config_key(cfg), work.max_seq_tokens, rule.reason),))


_KINDS: dict[str, Callable[..., Iterator[Candidate]]] = {
    "micro_batch": _micro_batch, "token_budget": _token_budget, "switch": _switch, "gmu": _gmu,
    "rollout_tp": _rollout_tp, "halvings": _halving_values, "max_model_len": _max_model_len,
}


def candidates(cfg: VerlConfig, work: Workload, costs: dict[str, float], *, limit: int = 6) -> list[Candidate]:
    """Every single-knob change worth estimating for this config, in the table's order."""
    out: list[Candidate] = []
    for rule in knob_rules():
        if rule.applies(work):
            out += _KINDS[rule.kind](rule, cfg, work, costs[rule.knob], limit)
    return out
