"""Rules x (config, signals) -> diagnoses.

A condition holds when its test's record (``_conditions``, built at load with its defaults filled in) says so;
a rule fires when all its conditions hold, and proposes its fixes when its harm holds too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from advisor.findings import Change, Severity
from advisor.load import VerlConfig
from advisor.operators import compare
from advisor.verl import in_range, read_key

from . import _derived, _envelope, _harm
from ._message import render_message
from ._rule_loader import PERFORMANCE_TREES, Condition, ConfigCondition, Fix, Harm, Rule, fix_expression
from ._rule_schema import ConfigOp
from ._signals import RunFacts, Signals
from ._words import group_words

# ---------------------------------------------------------------------------------------------------------


@dataclass
class Evidence:
    metric: str
    value: float
    healthy: str
    early: float = math.nan
    steps: tuple[int, int] = (0, 0)
    envelope: _envelope.Place | None = None  # where the value sits among published verl runs

    def to_dict(self) -> dict[str, Any]:
        out = {"metric": self.metric, "value": _finite(self.value), "early": _finite(self.early),
               "healthy": self.healthy, "steps": list(self.steps)}
        if self.envelope is not None:
            out["published_percentile"] = round(self.envelope.percentile, 1)
            out["published_runs"] = self.envelope.runs
            out["published_where"] = self.envelope.where
        return out


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass
class Diagnosis:
    rule: Rule
    summary: str
    evidence: list[Evidence]
    strength: float
    fixes: list[tuple[Fix, tuple[Change, ...]]] = field(default_factory=list)  # applicable, concrete
    harmful: bool = True  # False: the rule's harm did not hold; a trend only, shown as info
    harm_detail: str = ""  # the stall, distance beyond published runs or projection that made it harm
    harm_held: str = ""  # which of the rule's harm groups held, in words (the detail, or its conditions)
    envelope_text: str = ""  # where the primary metric sits among published runs (shown once per run's report)
    escalated: bool = False  # far beyond its band for most of the window: a warning rule reported as an error

    @property
    def id(self) -> str:
        return self.rule.id

    @property
    def severity(self) -> Severity:
        if not self.harmful:
            return Severity.INFO
        return Severity.ERROR if self.escalated and self.rule.severity == Severity.WARNING else self.rule.severity

    @property
    def performance(self) -> bool:
        """A speed or memory diagnosis (never displaces a learning one)."""
        return self.rule.tree in PERFORMANCE_TREES

    def to_dict(self, metric_sources: dict[str, str]) -> dict[str, Any]:
        return {
            "id": self.rule.id, "name": self.rule.name, "area": self.rule.tree, "severity": self.severity,
            "kind": "performance" if self.performance else "learning",
            "summary": self.summary, "rationale": self.rule.rationale,
            "harm": ({"text": self.rule.harm.text, "holds": self.harmful,
                      **({"detail": self.harm_detail} if self.harm_detail else {}),
                      **({"held": self.harm_held} if self.harmful and self.harm_held else {})}
                     if self.rule.harm else None),
            "evidence": [e.to_dict() for e in self.evidence],
            "checks": list(self.rule.checks),
            "sources": list(self.rule.sources) + sorted({metric_sources[e.metric] for e in self.evidence
                                                         if e.metric in metric_sources}),
        }


def _holds(cond: Condition, signals: Signals) -> tuple[bool, float]:
    if cond.test == "any":
        best = (False, 0.0)
        for group in cond.any_of:
            results = [_holds(c, signals) for c in group]
            if all(ok for ok, _ in results):
                score = sum(s for _, s in results)
                best = max(best, (True, score), key=lambda t: t[1]) if best[0] else (True, score)
        return best
    if cond.metric is None or cond.params is None:  # the loader gives every test a metric and its record
        raise ValueError(f"condition {cond.test!r} has no metric or no arguments")
    if cond.test not in ("present", "absent") and not signals.has(cond.metric):
        return cond.negate, 0.0
    ok, score = cond.params.holds(signals, cond.metric)
    return (not ok, 0.0) if cond.negate else (ok, score)


def config_holds(cond: ConfigCondition, cfg: VerlConfig) -> bool:
    value = cfg.get(read_key(cond.key, cfg.version))  # the key this verl version reads
    target = cond.value
    try:
        if cond.op is ConfigOp.IN:
            return value in target
        if cond.op is ConfigOp.NOT_IN:
            return value not in target
        return compare(cond.op, value, target)
    except TypeError:
        return False


def _version_ok(spec: str | None, version: str) -> bool:
    return in_range(version, spec)


def applies(rule: Rule, cfg: VerlConfig, facts: RunFacts) -> bool:
    if facts.mode not in rule.modes or facts.kl_placement not in rule.kl:
        return False
    if not _version_ok(rule.verl, cfg.version):
        return False
    if not all(config_holds(c, cfg) for c in rule.config):
        return False
    return facts_hold(rule.facts, facts)


def facts_hold(wanted: dict[str, Any], facts: RunFacts) -> bool:
    """A rule's or a fix's facts: each name is a RunFacts field (the loader holds them to the Fact set)."""
    return all(getattr(facts, name) == value for name, value in wanted.items())


def _band(rule: Rule, metric: str) -> str:
    band = rule.healthy.get(metric)
    if not band:
        return ""
    low, high = band.get("low"), band.get("high")
    if low is not None and high is not None:
        return f"{low:g}..{high:g}"
    if low is not None:
        return f">= {low:g}"
    if high is not None:
        return f"<= {high:g}"
    return str(band.get("text", ""))


def _derived_texts(rule: Rule, signals: Signals) -> list[str]:
    """The arithmetic of every config-derived quantity the rule reads (conditions, harm, fix preconditions)."""
    conds = [*rule.conditions, *(c for g in (rule.harm.any_of if rule.harm else ()) for c in g),
             *(c for f in rule.fixes for c in f.when)]
    kinds = dict.fromkeys(c.params for c in conds if isinstance(c.params, _derived.DERIVED_KINDS))
    # two thresholds on one quantity (a condition and a harm) print its arithmetic once
    return list(dict.fromkeys(q.text for kind in kinds if (q := kind.quantity(signals)) is not None))


def concrete_changes(fix: Fix, cfg: VerlConfig) -> tuple[Change, ...] | None:
    """Turn a fix's expressions into Changes against this config (None if it cannot apply)."""
    changes = []
    for written, expr in fix.set.items():
        key = read_key(written, cfg.version)  # a key verl no longer reads would change nothing
        current = cfg.get(key)
        new: Any = expr
        if isinstance(expr, str) and "{current}" in expr:
            if not isinstance(current, (int, float)) or isinstance(current, bool):
                return None
            parsed = fix_expression(expr)
            if parsed is None:  # the loader lets no other braced value through
                raise ValueError(f"{fix.reason or written}: {expr!r} is not a fix expression")
            op, factor = parsed
            new = current * factor if op == "*" else current / factor
            if isinstance(current, int) and float(new).is_integer():
                new = int(new)
            elif isinstance(new, float):
                new = float(f"{new:.3g}")
        if new == current:
            return None
        changes.append(Change(key, current, new, fix.reason, add=not cfg.has(key)))
    return tuple(changes)


def harm_group(harm: Harm | None, signals: Signals) -> tuple[Condition, ...] | None:
    """The first harm group whose conditions all hold (() when the conditions are the harm), else None."""
    if harm is None or not harm.any_of:
        return ()
    return next((tuple(g) for g in harm.any_of if all(_holds(c, signals)[0] for c in g)), None)


ESCALATE_DISTANCE = 10.0  # an order of magnitude past the harm threshold ...
ESCALATE_PERSISTENCE = 0.8  # ... on most of the window: severity follows distance and persistence


def diagnose(rule: Rule, cfg: VerlConfig, facts: RunFacts, signals: Signals) -> Diagnosis | None:
    """Evaluate one rule; a Diagnosis when it applies and all its conditions hold."""
    if not applies(rule, cfg, facts):
        return None
    _derived.attach(signals, cfg, facts)
    strength = 0.0
    for cond in rule.conditions:
        ok, score = _holds(cond, signals)
        if not ok:
            return None
        strength += score if math.isfinite(score) else 10.0
    # the metric the rule is about: its first condition that must hold (a `not:` condition only rules a case out)
    primary_name = next((c.metric for c in rule.conditions if c.metric and not c.negate),
                        next((c.metric for c in rule.conditions if c.metric), None))
    primary = signals[primary_name] if primary_name else signals[rule.evidence[0]]
    evidence = [Evidence(m, signals[m].level, _band(rule, m), signals[m].early_level,
                         (signals.window.first_step, signals.window.last_step), _harm.run_place(signals[m], signals))
                for m in dict.fromkeys([*(c.metric for c in rule.conditions if c.metric), *rule.evidence])
                if signals.has(m)]
    group = harm_group(rule.harm, signals)
    summary = "; ".join([render_message(rule.message, primary, signals), *_derived_texts(rule, signals)])
    diagnosis = Diagnosis(rule, summary, evidence, strength, harmful=group is not None)
    if group is None:  # a trend without harm: shown, never a diff
        return diagnosis
    detail, distance, persistence = _harm.describe(group, signals)
    if detail:
        diagnosis.harm_detail = detail
        diagnosis.strength += distance
        diagnosis.escalated = distance >= ESCALATE_DISTANCE and persistence >= ESCALATE_PERSISTENCE
    if detail:
        diagnosis.summary = f"{summary}; harm: {detail}"
    # a warning says which harm held and where the run sits among published runs, so a user can judge it
    diagnosis.harm_held = detail or group_words(group)
    place = next((e.envelope for e in evidence if e.metric == primary.name and e.envelope is not None), None)
    if place is not None and place.runs >= _envelope.MIN_RUNS:  # a percentile of one or two runs says little
        diagnosis.envelope_text = place.text(primary.name, primary.level)
        diagnosis.summary += f"; envelope: {diagnosis.envelope_text}"
    for fix in rule.fixes:
        if not all(_holds(c, signals)[0] for c in fix.when):
            continue
        if not all(config_holds(c, cfg) for c in fix.when_config) or not facts_hold(fix.when_facts, facts):
            continue
        changes = concrete_changes(fix, cfg)
        if changes:
            diagnosis.fixes.append((fix, changes))
    return diagnosis
