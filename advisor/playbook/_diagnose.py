"""Rules x (config, signals) -> diagnoses. The named condition tests live here.

Each test is a small function registered by name; rule files may only use these names, with the arguments
``_rule_schema`` declares for the name (``cond.params``, its defaults filled in at load). Tests read
:class:`~advisor.playbook._signals.MetricSignal` numbers computed over the recent window.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from advisor.findings import Change
from advisor.load import VerlConfig
from advisor.operators import compare
from advisor.verl import in_range, read_key

from . import _derived, _harm
from . import _rule_schema as schema
from ._rule_schema import ConfigOp
from ._schema import PERFORMANCE_TREES, Condition, ConfigCondition, Fix, Harm, Rule
from ._signals import MetricSignal, RunFacts, Signals

TestFn = Callable[[Signals, Condition], tuple[bool, float]]  # (holds, strength >= 0)
MIN_STEPS_FOR_FRACTION = 5
TESTS: dict[str, TestFn] = {}


def test(name: str) -> Callable[[TestFn], TestFn]:
    if name not in schema.TEST_ARGS:  # a test's arguments are declared before it is implemented
        raise ValueError(f"test {name!r} has no argument declaration in advisor/playbook/_rule_schema.py")

    def register(fn: TestFn) -> TestFn:
        TESTS[name] = fn
        return fn

    return register


def _sig(signals: Signals, cond: Condition) -> MetricSignal:
    assert cond.metric is not None
    return signals[cond.metric]


def _margin(value: float, threshold: float) -> float:
    """How far past a threshold, relative to it (0 at the threshold)."""
    if not math.isfinite(value):
        return 0.0
    return abs(value - threshold) / max(abs(threshold), 1e-12)


@test("present")
def _present(signals: Signals, cond: Condition) -> tuple[bool, float]:
    return signals.has(cond.metric or ""), 0.0


@test("absent")
def _absent(signals: Signals, cond: Condition) -> tuple[bool, float]:
    return not signals.has(cond.metric or ""), 0.0


@test("above")
def _above(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """The window's median is above `value` (or, with `fraction`, that share of steps is)."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.Above)
    value = args.value
    if args.fraction is not None:  # "on most steps" needs several steps to mean anything
        if s.values.size < MIN_STEPS_FOR_FRACTION:
            return False, 0.0
        frac = s.fraction_above(value)
        return bool(frac >= args.fraction), frac
    return bool(s.level > value), _margin(s.level, value)


@test("below")
def _below(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """The window's median is below `value` (or, with `fraction`, that share of steps is)."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.Below)
    value = args.value
    if args.fraction is not None:
        if s.values.size < MIN_STEPS_FOR_FRACTION:
            return False, 0.0
        frac = float((s.values < value).mean())
        return bool(frac >= args.fraction), frac
    return bool(s.level < value), _margin(s.level, value)


@test("at_most")
def _at_most(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """Every value in the window is <= `value`."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.AtMost)
    return bool(s.values.size and s.max <= args.value), 1.0


@test("at_least")
def _at_least(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """Every value in the window is >= `value`."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.AtLeast)
    return bool(s.values.size and s.min >= args.value), 1.0


@test("max_above")
def _max_above(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """Some value in the window is above `value`."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.MaxAbove)
    return bool(s.max > args.value), _margin(s.max, args.value)


@test("outside")
def _outside(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """At least `fraction` (default 0.5) of the window lies outside [low, high]."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.Outside)
    frac = s.fraction_outside(args.low, args.high)
    return bool(frac >= args.fraction), frac if math.isfinite(frac) else 0.0


@test("rises")
def _rises(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """The window's level is at least `factor` x the early run's (and the trend is not falling)."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.Rises)
    factor, floor = args.factor, args.min_level
    early, late = s.early_level, s.level
    if not (math.isfinite(early) and math.isfinite(late)):
        return False, 0.0
    ok = late > floor and (late >= factor * early if early > 0 else late > early) and s.slope >= 0
    return bool(ok), (late / early if early > 0 else 1.0)


@test("falls")
def _falls(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """The window's level is at most `factor` x the early run's (e.g. factor 0.3: fell by 70%)."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.Falls)
    factor = args.factor
    early, late = s.early_level, s.level
    if not (math.isfinite(early) and math.isfinite(late)) or early <= 0:
        return False, 0.0
    return bool(late <= factor * early), (early - late) / early


@test("fell_early")
def _fell_early(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """By `by` (a fraction of the run, default 0.2) the metric was already at most `factor` x its early level."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.FellEarly)
    factor, by = args.factor, args.by
    early, then = s.early_level, s.level_at(by)
    if not (math.isfinite(early) and math.isfinite(then)) or early <= 0:
        return False, 0.0
    return bool(then <= factor * early), (early - then) / early


@test("falls_from_peak")
def _falls_from_peak(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """The window's level is at most `factor` x the run's peak (of a 9-step rolling median): climbed, then fell."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.FallsFromPeak)
    peak, factor = s.peak, args.factor
    if not (math.isfinite(peak) and math.isfinite(s.level)) or peak <= 0:
        return False, 0.0
    return bool(s.level <= factor * peak), (peak - s.level) / peak


def _trend(signals: Signals, cond: Condition, sign: float) -> tuple[bool, float]:
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, (schema.Increasing, schema.Decreasing))
    if s.values.size < 5:
        return False, 0.0
    span = float(s.steps[-1] - s.steps[0]) or 1.0
    change = sign * s.slope * span
    scale = max(abs(s.level), args.scale)
    return bool(change > args.min_change * scale), change / scale


@test("increasing")
def _increasing(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """A robust upward trend over the window: Theil-Sen slope x window length >= `min_change` x |level|."""
    return _trend(signals, cond, 1.0)


@test("decreasing")
def _decreasing(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """A robust downward trend over the window (the mirror of `increasing`)."""
    return _trend(signals, cond, -1.0)


@test("flat")
def _flat(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """The window barely moves: max - min <= `tolerance`."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.Flat)
    return bool(s.values.size >= 3 and (s.max - s.min) <= args.tolerance), 1.0


@test("spikes")
def _spikes(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """At least `count` (default 1) points of the window jump far above the rolling median."""
    s, args = _sig(signals, cond), cond.params
    assert isinstance(args, schema.Spikes)
    return bool(s.spikes >= args.count), float(s.spikes)


@test("nonfinite")
def _nonfinite(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """The metric went NaN or inf (see signals._nonfinite_steps for how null is read)."""
    s = _sig(signals, cond)
    return s.first_nonfinite_step is not None, 10.0


@test("gpu_fraction_above")
def _gpu_fraction_above(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """The window's peak is above `value` x the GPU's memory (only when the GPU is known: --gpu)."""
    s, capacity, args = _sig(signals, cond), signals.gpu_memory_gib, cond.params
    assert isinstance(args, schema.GpuFractionAbove)
    if not capacity or not math.isfinite(s.max):
        return False, 0.0
    fraction = s.max / capacity
    return bool(fraction > args.value), fraction


@test("vs_metric")
def _vs_metric(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """Compare with another metric's level: `op` (lt, gt, ...) after `scale` x other + `offset`."""
    args = cond.params
    assert isinstance(args, schema.VsMetric)
    s, other = _sig(signals, cond), signals[args.other]
    if not (math.isfinite(s.level) and math.isfinite(other.level)):
        return False, 0.0
    target = args.scale * other.level + args.offset
    return compare(args.op, s.level, target), _margin(s.level, target)


@test("ratio_above")
def _ratio_above(signals: Signals, cond: Condition) -> tuple[bool, float]:
    """metric / other (window medians) is above `value`."""
    args = cond.params
    assert isinstance(args, schema.RatioAbove)
    s, other = _sig(signals, cond), signals[args.other]
    if not (math.isfinite(s.level) and math.isfinite(other.level)) or other.level == 0:
        return False, 0.0
    ratio = s.level / other.level
    return bool(ratio > args.value), ratio


def _harm_test(name: str) -> TestFn:
    def run(signals: Signals, cond: Condition) -> tuple[bool, float]:
        result = _harm.evaluate(name, _sig(signals, cond), cond.params, signals)
        return result.holds, result.distance

    run.__doc__ = f"{name}: see advisor/playbook/_harm.py"
    return run


for _name in sorted(_harm.HARM_TESTS):
    test(_name)(_harm_test(_name))


def _derived_test(name: str) -> TestFn:
    def run(signals: Signals, cond: Condition) -> tuple[bool, float]:
        found = _derived.quantity(name, signals)
        value = getattr(cond.params, "value", math.inf)
        if found is None or not math.isfinite(found.value):
            return False, 0.0
        return found.value > value, found.value

    run.__doc__ = f"{name}: see advisor/playbook/_derived.py"
    return run


for _name in sorted(_derived.QUANTITIES):
    test(_name)(_derived_test(_name))


# ---------------------------------------------------------------------------------------------------------


@dataclass
class Evidence:
    metric: str
    value: float
    healthy: str
    early: float = math.nan
    steps: tuple[int, int] = (0, 0)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": _finite(self.value), "early": _finite(self.early),
                "healthy": self.healthy, "steps": list(self.steps)}


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
    escalated: bool = False  # far beyond its band for most of the window: a warning rule reported as an error

    @property
    def id(self) -> str:
        return self.rule.id

    @property
    def severity(self) -> str:
        if not self.harmful:
            return "info"
        return "error" if self.escalated and self.rule.severity == "warning" else self.rule.severity

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
                      **({"detail": self.harm_detail} if self.harm_detail else {})} if self.rule.harm else None),
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
    if cond.metric is not None and cond.test not in ("present", "absent") and not signals.has(cond.metric):
        return cond.negate, 0.0
    ok, score = TESTS[cond.test](signals, cond)
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
    derived = {"on_policy": facts.on_policy, "critic": facts.critic, "estimator": facts.estimator}
    return all(derived.get(k) == v for k, v in rule.facts.items())


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


class _Fmt(dict):  # type: ignore[type-arg]
    """The fields of a message: the primary metric's (``{level}``), and any metric by name
    (``{critic/vf_explained_var.level}``), so a message prints the metric it names."""

    def __init__(self, signals: Signals, **fields: Any) -> None:
        super().__init__(**fields)
        self._signals = signals

    def __missing__(self, key: str) -> Any:
        if "/" in key and self._signals.has(key):
            return self._signals[key]
        return "?"


def _format(template: str, primary: MetricSignal, signals: Signals, cfg: VerlConfig) -> str:
    values = _Fmt(signals, metric=primary.name, value=primary.level, level=primary.level, last=primary.last,
                  early=primary.early_level, max=primary.max, min=primary.min,
                  change=primary.relative_change * 100 if math.isfinite(primary.relative_change) else math.nan,
                  first=signals.window.first_step, last_step=signals.window.last_step)
    try:
        return template.format_map(values)
    except (ValueError, TypeError, IndexError, KeyError):
        return template


def _derived_texts(rule: Rule, signals: Signals) -> list[str]:
    """The arithmetic of every config-derived quantity the rule reads (conditions, harm, fix preconditions)."""
    conds = [*rule.conditions, *(c for g in (rule.harm.any_of if rule.harm else ()) for c in g),
             *(c for f in rule.fixes for c in f.when)]
    tests = dict.fromkeys(c.test for c in conds if c.test in _derived.QUANTITIES)
    return [q.text for t in tests if (q := _derived.quantity(t, signals)) is not None]


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
            op, factor = ("*" if "*" in expr else "/"), float(expr.split("*" if "*" in expr else "/")[1])
            new = current * factor if op == "*" else current / factor
            if isinstance(current, int) and float(new).is_integer():
                new = int(new)
            elif isinstance(new, float):
                new = float(f"{new:.3g}")
        if new == current:
            return None
        changes.append(Change(key, current, new, fix.reason, add=not cfg.has(key)))
    return tuple(changes)


def harm_holds(harm: Harm | None, signals: Signals) -> bool:
    """The harm holds: no groups (the conditions are the harm) or one group of conditions all hold."""
    return harm_group(harm, signals) is not None


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
                         (signals.window.first_step, signals.window.last_step))
                for m in dict.fromkeys([*(c.metric for c in rule.conditions if c.metric), *rule.evidence])
                if signals.has(m)]
    group = harm_group(rule.harm, signals)
    summary = "; ".join([_format(rule.message, primary, signals, cfg), *_derived_texts(rule, signals)])
    diagnosis = Diagnosis(rule, summary, evidence, strength, harmful=group is not None)
    if group is None:  # a trend without harm: shown, never a diff
        return diagnosis
    detail, distance, persistence = _harm.describe(group, signals)
    if detail:
        diagnosis.harm_detail = detail
        diagnosis.summary = f"{summary}; harm: {detail}"
        diagnosis.strength += distance
        diagnosis.escalated = distance >= ESCALATE_DISTANCE and persistence >= ESCALATE_PERSISTENCE
    for fix in rule.fixes:
        if not all(_holds(c, signals)[0] for c in fix.when):
            continue
        if not all(config_holds(c, cfg) for c in fix.when_config):
            continue
        changes = concrete_changes(fix, cfg)
        if changes:
            diagnosis.fixes.append((fix, changes))
    return diagnosis
