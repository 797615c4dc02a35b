"""What ``advisor verify`` learned: the proposal against the baseline, and the third value against both.

Four answers:

- ``fix confirmed``: the proposed value beats the baseline (the sweep's paired rule, ``_verdict``), and the
  third value does not beat the proposal.
- ``a different value is better``: the third value beats the baseline, and either beats the proposal too (paired
  on the seeds both ran, at the last step both reached) or the proposal did not beat the baseline.
- ``keep baseline``: every other value is worse than the baseline, failed, or broke a constraint (one the
  baseline keeps: a constraint the baseline breaks itself is not applied, and the verdict says so).
- ``insufficient evidence``: anything else, with how many more seeds the observed spread of the paired
  differences asks for (a normal approximation: n >= (z * sd / mean)^2 at the comparison's level), or that the
  values must run more steps when a pair was compared before the last step.

The trials must show the problem to refute its fix (``with_reproduction``, ``_reproduce``): when the
baseline's trials do not show the diagnosis, ``keep baseline`` becomes ``insufficient evidence`` (values
that do no better on trials without the problem say nothing about the fix for it), and a value found better
keeps its verdict with the caveat that it was better on trials that did not show the problem.

A value whose trial was pruned on any seed (it fell behind another value there) is never the one named:
it is not confirmed, and it is not called better or beaten on steps it did not run, since every pair is
compared at the last step both of its trials reached. The verdict lists, per value, the seeds it ran and the
step each reached.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from advisor.errors import ExitCode

from .._objective import Constraint, Objective
from .._result import TrialRecord
from .._space import format_value, same_point
from .._verdict import LEVEL, MIN_PAIRS, Comparison, decide
from ._reproduce import Reproduction

FIX_CONFIRMED = "fix confirmed"
DIFFERENT_VALUE = "a different value is better"
KEEP_BASELINE = "keep baseline"
INSUFFICIENT = "insufficient evidence"
DECISIONS = (FIX_CONFIRMED, DIFFERENT_VALUE, KEEP_BASELINE, INSUFFICIENT)


@dataclass
class ValueRun:
    """Where one value got to: the step it reached on each seed it ran, and how each trial ended."""

    role: str  # baseline | proposed | third
    values: dict[str, Any]
    steps: dict[int, int | None] = field(default_factory=dict)  # seed -> last step reported
    states: dict[int, str] = field(default_factory=dict)  # seed -> complete | stopped | pruned | failed | ...

    @property
    def pruned(self) -> bool:
        return any(s in ("pruned", "failed", "diverged") for s in self.states.values())

    def describe(self) -> str:
        parts = [f"seed {seed}: step {self.steps.get(seed) or 0}" + ("" if state == "complete" else f" ({state})")
                 for seed, state in sorted(self.states.items())]
        return "; ".join(parts) or "not run"

    def to_dict(self) -> dict[str, Any]:
        seeds = [{"seed": s, "steps": self.steps.get(s), "state": st} for s, st in sorted(self.states.items())]
        return {"role": self.role, "values": self.values, "seeds": seeds}


@dataclass
class VerifyVerdict:
    decision: str
    reason: str
    value: dict[str, Any] | None  # the value the decision names (the proposal, the third value), None otherwise
    interval: tuple[float, float] | None = None  # of the named value against the baseline
    level: float = LEVEL
    versus_proposal: Comparison | None = None  # the third value against the proposal, when it was compared
    more: str | None = None  # insufficient evidence: what more would decide it
    runs: list[ValueRun] = field(default_factory=list)
    constraints_dropped: list[str] = field(default_factory=list)  # broken by the baseline itself: not applied
    reproduction: Reproduction | None = None  # the diagnosis read on the trials (None: a change the user named)

    @property
    def exit_code(self) -> int:
        return ExitCode.OK if self.decision in (FIX_CONFIRMED, DIFFERENT_VALUE) else ExitCode.FOUND

    def to_dict(self) -> dict[str, Any]:
        vp = self.versus_proposal
        return {"decision": self.decision, "reason": self.reason, "value": self.value,
                "interval": list(self.interval) if self.interval else None, "level": self.level,
                "versus_proposal": vp.to_dict() if vp else None, "more": self.more,
                "constraints_dropped": self.constraints_dropped,
                "reproduction": self.reproduction.to_dict() if self.reproduction else None,
                "values": [r.to_dict() for r in self.runs]}


def value_runs(records: Sequence[TrialRecord], roles: Sequence[tuple[str, dict[str, Any]]]) -> list[ValueRun]:
    runs = []
    for role, values in roles:
        run = ValueRun(role, dict(values))
        for r in sorted(records, key=lambda r: r.number):
            if r.state in ("interrupted", "waiting") or not same_point(r.values, values) or r.seed is None:
                continue
            run.steps[r.seed] = r.steps
            run.states[r.seed] = r.state
        runs.append(run)
    return runs


def _z(level: float) -> float:
    return statistics.NormalDist().inv_cdf(1.0 - (1.0 - level) / 2.0)


def more_evidence(comparison: Comparison | None, min_pairs: int, steps: int) -> str | None:
    """How many more seeds (at the observed spread of the paired differences) or steps would decide it."""
    if comparison is None:
        return None
    pairs = comparison.pairs
    short = [p for p in pairs if p.step < steps]
    if len(pairs) < min_pairs:
        return f"{min_pairs - len(pairs)} more paired seed(s) (a confirmation needs {min_pairs})"
    diffs = [p.difference for p in pairs]
    mean = statistics.fmean(diffs)
    sd = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
    text = None
    if mean != 0 and sd > 0:
        needed = math.ceil((_z(comparison.level) * sd / abs(mean)) ** 2)
        if needed > len(pairs):
            text = (f"about {needed - len(pairs)} more seed(s) at the observed spread (mean difference "
                    f"{mean:+.3g}, sd {sd:.3g} over {len(pairs)} seeds)")
    elif mean == 0:
        text = f"no difference at all over {len(pairs)} seeds: more seeds would not change that"
    if short:
        where = ", ".join(f"seed {p.seed} at step {p.step}" for p in short)
        text = (text + "; " if text else "") + f"or more steps: compared before step {steps} on {where}"
    return text


def judge(records: Sequence[TrialRecord], baseline: dict[str, Any], proposal: dict[str, Any],
          third: dict[str, Any] | None, objective: Objective, constraints: Sequence[Constraint], *, steps: int,
          level: float = LEVEL, min_pairs: int = MIN_PAIRS) -> VerifyVerdict:
    """The verify verdict over a sweep's trials (the rule in the module docstring)."""
    roles = [("baseline", baseline), ("proposed", proposal), *([("third", third)] if third is not None else [])]
    runs = value_runs(records, roles)
    by_role = {r.role: r for r in runs}
    # a constraint the baseline itself breaks (responses still cut at a longer limit, but far fewer) cannot judge
    # the fix: the tree's bound is where a fix should end up, not a test every step towards it must pass
    base_trials = [r for r in records if same_point(r.values, baseline) and r.state not in ("interrupted", "waiting")]
    broken = [c for c in constraints if any(c.holds(r.constraints.get(c.metric)) is False for r in base_trials)]
    constraints = [c for c in constraints if c not in broken]
    if broken:  # feasibility re-read against the constraints kept
        records = [replace(r, feasible=_feasible(r, constraints)) if r.feasible is not None else r for r in records]
    sweep = decide(records, baseline, objective, constraints, level=level, min_pairs=min_pairs, steps=steps)

    def comparison(values: dict[str, Any] | None) -> Comparison | None:
        return None if values is None else next((c for c in sweep.comparisons if same_point(c.values, values)), None)

    p, t = comparison(proposal), comparison(third)
    p_ok = p is not None and p.status == "better" and not by_role["proposed"].pruned
    t_ok = t is not None and t.status == "better" and not by_role["third"].pruned
    verdict = VerifyVerdict(INSUFFICIENT, "", None, level=sweep.level, runs=runs,
                            constraints_dropped=[c.describe() for c in broken])
    if t_ok and third is not None and t is not None:
        tp = decide(records, proposal, objective, constraints, candidates=[third], level=level,
                    min_pairs=min_pairs, steps=steps)
        verdict.versus_proposal = tp.comparisons[0] if tp.comparisons else None
        vs = verdict.versus_proposal
        if not p_ok or (vs is not None and vs.status == "better"):
            verdict.decision, verdict.value, verdict.interval = DIFFERENT_VALUE, dict(third), t.ci
            against = "" if vs is None or vs.ci is None else (
                f"; against {_describe(proposal)}: mean difference {vs.mean_difference:+.4g}, {vs.level:.1%} "
                f"interval [{vs.ci[0]:+.4g}, {vs.ci[1]:+.4g}] over {len(vs.pairs)} seeds")
            verdict.reason = f"{_describe(third)} is {t.reason}{against}"
            return verdict
    if p_ok and p is not None:
        verdict.decision, verdict.value, verdict.interval = FIX_CONFIRMED, dict(proposal), p.ci
        verdict.reason = f"{_describe(proposal)} is {p.reason}"
        return verdict
    others = [c for c in (p, t) if c is not None]
    if others and all(c.status in ("worse", "failed", "infeasible") for c in others):
        verdict.decision = KEEP_BASELINE
        verdict.reason = "; ".join(f"{_describe(c.values)}: {c.reason}" for c in others)
        return verdict
    reasons = []
    for role, c in (("proposed", p), ("third", t)):
        if c is None:
            continue
        why = c.reason
        if c.status == "better" and by_role[role].pruned:
            why += ", but it was pruned on a seed (another value led it there), so it is not named"
        reasons.append(f"{_describe(c.values)}: {why}")
    verdict.reason = "; ".join(reasons) or sweep.reason or "no value produced a result"
    verdict.more = more_evidence(p if p is not None and p.status in ("unclear", "better") else t, min_pairs, steps)
    return verdict


def with_reproduction(verdict: VerifyVerdict, reproduction: Reproduction, *, steps: int) -> VerifyVerdict:
    """The verdict once the diagnosis has been read on the trials (the rule in the module docstring)."""
    verdict.reproduction = reproduction
    if reproduction.reproduced is not False or verdict.decision != KEEP_BASELINE:
        return verdict
    first, last = reproduction.run_window
    verdict.decision = INSUFFICIENT
    verdict.reason = (f"the baseline's trials do not show {reproduction.rule_id} ({reproduction.why_not()}): that "
                      "no other value did better on them says nothing about its fix. On these trials: "
                      f"{verdict.reason}")
    verdict.more = (f"trials that show {reproduction.rule_id}: the run showed it over steps {first}-{last} and the "
                    f"trials ran {steps} (--steps), or the command that trained the run (--command)")
    return verdict


def _feasible(record: TrialRecord, constraints: Sequence[Constraint]) -> bool | None:
    holds = [c.holds(record.constraints.get(c.metric)) for c in constraints]
    return False if False in holds else (None if None in holds else True)


def _describe(values: dict[str, Any]) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={format_value(v)}" for k, v in values.items())
