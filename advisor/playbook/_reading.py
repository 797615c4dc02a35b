"""One rule read on one run: did its conditions and its harm hold, and where did its metrics stand?

``advisor verify`` asks this of every trial (``sweeps.verify._reproduce``): a fix can only be judged on trials that
show the problem it fixes. The reading is the one ``suggest`` makes (the same window, signals, loss scale and
condition tests), for a single rule, with the first condition that did not hold put in words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

from advisor.load import VerlConfig

from ._diagnose import _holds, applies, diagnose
from ._rule_loader import Condition, Rule
from ._signals import Signals, run_facts
from ._suggest import read_for_rules


@dataclass(frozen=True)
class RuleReading:
    """``rule`` read on one run's metrics (``read_rule``)."""

    rule_id: str
    applies: bool  # the rule's mode, KL placement, verl version and config conditions hold for the config
    fired: bool  # ... and every condition held over the window
    harmful: bool  # ... and its harm held (a diagnosis suggest would act on)
    levels: dict[str, float] = field(default_factory=dict)  # window level of each condition metric logged
    unmet: str | None = None  # the first condition that did not hold, in words (None when all held)
    steps: int = 0  # steps in the window read

    @property
    def shows(self) -> bool:
        """The run shows the problem: the rule fires and its harm holds."""
        return self.fired and self.harmful

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule_id, "applies": self.applies, "fired": self.fired, "harmful": self.harmful,
                "shows": self.shows, "unmet": self.unmet, "window_steps": self.steps,
                "levels": {k: (v if math.isfinite(v) else None) for k, v in self.levels.items()}}


def read_rule(rule: Rule, cfg: VerlConfig, metrics_path: str | PathLike[str], *, window: int | None = None,
              gpu_memory_gib: float | None = None) -> RuleReading:
    """Read ``rule`` on the metrics at ``metrics_path`` (any format ``advisor.metrics`` reads) for ``cfg``, over
    ``window`` steps (default: suggest's) with the GPU's memory where a memory rule needs it.

    Raises:
        MetricsError: the metrics cannot be read.
    """
    facts = run_facts(cfg)
    signals = Signals(read_for_rules(cfg, metrics_path, [rule], facts).table, window, gpu_memory_gib=gpu_memory_gib)
    levels = {m: signals[m].level for m in dict.fromkeys(_metrics(rule.conditions)) if signals.has(m)}
    steps = signals.window.size
    diagnosis = diagnose(rule, cfg, facts, signals)
    if diagnosis is not None:
        unmet = None if diagnosis.harmful else f"its harm ({rule.harm.text})" if rule.harm else None
        return RuleReading(rule.id, applies=True, fired=True, harmful=diagnosis.harmful, levels=levels, unmet=unmet,
                           steps=steps)
    if not applies(rule, cfg, facts):
        return RuleReading(rule.id, applies=False, fired=False, harmful=False, levels=levels,
                           unmet="the rule does not apply to this config", steps=steps)
    failed = next((c for c in rule.conditions if not _holds(c, signals)[0]), None)
    return RuleReading(rule.id, applies=True, fired=False, harmful=False, levels=levels,
                       unmet=describe_condition(failed) if failed else None, steps=steps)


def _metrics(conditions: tuple[Condition, ...]) -> list[str]:
    out: list[str] = []
    for cond in conditions:
        if cond.metric is not None:
            out.append(cond.metric)
        for group in cond.any_of:
            out.extend(_metrics(group))
    return out


def describe_condition(cond: Condition) -> str:
    """A condition in words: ``critic/advantages/max below 0.05``, ``actor/entropy falls (factor=0.7)``."""
    if cond.test == "any":
        text = " or ".join(" and ".join(describe_condition(c) for c in group) for group in cond.any_of)
    else:
        args = cond.args
        if set(args) == {"value"}:
            text = f"{cond.metric} {cond.test} {_number(args['value'])}"
        else:
            given = ", ".join(f"{k}={_number(v)}" for k, v in args.items())
            text = f"{cond.metric} {cond.test}" + (f" ({given})" if given else "")
    return f"not ({text})" if cond.negate else text


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
