"""The verdict of a sweep: is the candidate value better than the baseline, beyond seed noise?

Design: each (value, seed) pair run is a trial, and the baseline runs on the same seeds as each candidate,
so the comparison is *paired* by seed (same data order and initialisation for both; the seed noise
cancels in the difference). For each seed where both trials produced an objective, the difference is

    d_seed = sign * (candidate(t) - baseline(t)),   t = the last step both reached,

with ``sign`` = +1 for a maximised objective and -1 for a minimised one, so d > 0 means the candidate is
better. A pruned trial stopped early: the pair is compared at its last step, with the objective both
trials had then (the tail mean of their steps so far), never a finished run against an unfinished one.

The confidence interval of the mean of d over seeds is a percentile bootstrap (10 000 resamples of the
seeds, a fixed seed, so the same trials always give the same verdict). With several candidates the level
is Bonferroni-corrected (each interval at 1 - 0.05/m), since the best of m is picked.

- ``fix confirmed``: a candidate that ran on at least ``min_pairs`` paired seeds, never failed, met every
  constraint on every seed, and whose interval lies above 0. Of several (a staged grid stops at the first),
  the one whose trials ran the most steps (the pruner keeps the value that leads its seed; a trial the race
  stopped counts all its planned steps, since it led its seed), then the best mean objective.
- ``keep baseline``: every candidate is worse (interval below 0), failed (crash, OOM), or broke a
  constraint.
- ``insufficient evidence``: anything else: an interval that contains 0, too few paired seeds, a
  constraint metric that was never logged, or no baseline objective at all.

With 3 seeds the bootstrap interval's lower end is the smallest of the three differences, so a fix is
confirmed only when it wins on every seed (at any level above 1 - 2/27: the resample of the smallest
difference three times has probability 1/27).

A trial the race stopped (state ``stopped``, ``_race``) is read like a pruned one: compared at the last step
both trials of a pair reached. The race only stops a trial once every pair it takes part in has its step
fixed, so this rule reads the same pairs with or without the race.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._objective import Constraint, Objective
from ._result import TrialRecord
from ._space import format_value, same_point

LEVEL = 0.95
MIN_PAIRS = 3
N_BOOTSTRAP = 10_000
BOOTSTRAP_SEED = 0

FIX_CONFIRMED = "fix confirmed"
KEEP_BASELINE = "keep baseline"
INSUFFICIENT = "insufficient evidence"


def bootstrap_ci(diffs: Sequence[float], level: float, n_boot: int = N_BOOTSTRAP, seed: int = BOOTSTRAP_SEED
                 ) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``diffs`` (deterministic for a given seed)."""
    d = np.asarray(diffs, dtype=float)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    alpha = 1.0 - level
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


@dataclass
class Pair:
    seed: int | None
    step: int
    candidate: float
    baseline: float
    difference: float

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "step": self.step, "candidate": self.candidate, "baseline": self.baseline,
                "difference": self.difference}


@dataclass
class Comparison:
    """One candidate value against the baseline."""

    values: dict[str, Any]
    status: str  # "better" | "worse" | "unclear" | "failed" (crashed or diverged) | "infeasible"
    reason: str
    pairs: list[Pair] = field(default_factory=list)
    mean_difference: float | None = None
    ci: tuple[float, float] | None = None
    level: float = LEVEL
    steps: int = 0  # training steps its trials ran, all seeds together
    ranked_steps: int = 0  # the same, with all the planned steps for a trial the race stopped (ranking only)
    objective: float | None = None  # mean over seeds of its objective at the last step each trial reached

    def to_dict(self) -> dict[str, Any]:
        return {"values": self.values, "status": self.status, "reason": self.reason,
                "mean_difference": self.mean_difference, "ci": list(self.ci) if self.ci else None,
                "level": self.level, "steps": self.steps, "objective": self.objective,
                "pairs": [p.to_dict() for p in self.pairs]}


@dataclass
class Verdict:
    decision: str  # FIX_CONFIRMED | KEEP_BASELINE | INSUFFICIENT
    reason: str
    baseline: dict[str, Any]
    candidate: dict[str, Any] | None = None
    comparisons: list[Comparison] = field(default_factory=list)
    level: float = LEVEL
    min_pairs: int = MIN_PAIRS
    race: dict[str, Any] | None = None  # what the race stopped, and why (set by the runner)

    @property
    def best(self) -> Comparison | None:
        if self.candidate is None:
            return None
        return next((c for c in self.comparisons if same_point(c.values, self.candidate)), None)

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "decision": self.decision,
            "reason": self.reason,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "mean_difference": best.mean_difference if best else None,
            "ci": list(best.ci) if best and best.ci else None,
            "level": self.level,
            "min_pairs": self.min_pairs,
            "rule": "paired by seed at the last common step; percentile bootstrap of the mean difference "
                    "(candidate - baseline, signed so that > 0 is better), Bonferroni over candidates; "
                    "'fix confirmed' only when the interval excludes 0 on the better side, the candidate never "
                    "failed and met every constraint on every seed",
            "race": self.race,
            "comparisons": [c.to_dict() for c in self.comparisons],
        }


def _describe(values: dict[str, Any]) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={format_value(v)}" for k, v in values.items())


def _group(records: Sequence[TrialRecord]) -> list[tuple[dict[str, Any], list[TrialRecord]]]:
    groups: list[tuple[dict[str, Any], list[TrialRecord]]] = []
    for r in records:
        for values, members in groups:
            if same_point(values, r.values):
                members.append(r)
                break
        else:
            groups.append((dict(r.values), [r]))
    return groups


def _by_seed(records: Sequence[TrialRecord]) -> dict[int | None, TrialRecord]:
    out: dict[int | None, TrialRecord] = {}
    for r in sorted(records, key=lambda r: r.number):
        if r.usable and (r.seed not in out or r.state in ("complete", "stopped")):
            out[r.seed] = r
    return out


def ranked_steps(record: TrialRecord, planned_steps: int | None) -> int:
    """The steps a trial counts when candidates are ranked: the steps it ran, or all ``planned_steps`` for a
    trial the race stopped (it led its seed; nothing was left there to prune it)."""
    if record.state == "stopped" and planned_steps is not None:
        return max(planned_steps, record.steps or 0)
    return record.steps or 0


def lead(record: TrialRecord, sign: float, planned_steps: int | None) -> tuple[int, float]:
    """How far ahead a trial is, for ordering values: its :func:`ranked_steps` (the pruner keeps the value that
    leads its seed), then its objective, signed so that larger is better."""
    return ranked_steps(record, planned_steps), sign * (record.objective or 0.0)


def common_step(a: TrialRecord, b: TrialRecord) -> int | None:
    """The last step at or before both trials' last that both reported (a validation objective is reported
    only every test_freq steps and at a trial's last step, so the shorter trial's last step may be one the
    other never reported); None when they share none."""
    if a.steps is None or b.steps is None:
        return None
    last = min(a.steps, b.steps)
    shared = [s for s in a.curve if s <= last and s in b.curve]
    return max(shared) if shared else None


def _compare(values: dict[str, Any], trials: list[TrialRecord], baseline: dict[int | None, TrialRecord],
             objective: Objective, constraints: Sequence[Constraint], level: float, min_pairs: int,
             planned_steps: int | None = None) -> Comparison:
    diverged = [t for t in trials if t.state == "diverged"]
    if diverged:  # never a result, whatever it scored before: it cannot be confirmed nor beat the baseline
        seeds = ", ".join(str(t.seed) for t in diverged)
        first = diverged[0].diverged or {}
        what = (f"{first['metric']} became {first['value']} at step {first['step']}" if first.get("metric")
                else diverged[0].reason or "a value went non-finite")
        return Comparison(values, "failed", f"diverged on seed {seeds}: {what}", level=level)
    failed = [t for t in trials if t.state == "failed"]
    if failed:
        seeds = ", ".join(str(t.seed) for t in failed)
        return Comparison(values, "failed", f"failed on seed {seeds}: {failed[0].reason or 'no reason found'}",
                          level=level)
    usable = _by_seed(trials)
    for t in usable.values():
        if t.feasible is False:
            broken = [c for c in constraints if c.holds(t.constraints.get(c.metric)) is False]
            what = "; ".join(f"{c.metric}={format_value(t.constraints.get(c.metric))} breaks {c.describe()}"
                             for c in broken)
            return Comparison(values, "infeasible", f"seed {t.seed}: {what}", level=level)
    pairs = []
    for seed, cand in sorted(usable.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        base = baseline.get(seed)
        if base is None or cand.steps is None or base.steps is None:
            continue
        step = common_step(cand, base)
        if step is None:
            continue
        c, b = cand.objective_at(step), base.objective_at(step)
        if c is None or b is None:
            continue
        pairs.append(Pair(seed, step, c, b, objective.sign * (c - b)))
    if len(pairs) < min_pairs:
        return Comparison(values, "unclear", f"{len(pairs)} paired seed(s) with the baseline; at least "
                          f"{min_pairs} are needed", pairs=pairs, level=level)
    diffs = [p.difference for p in pairs]
    lo, hi = bootstrap_ci(diffs, level)
    mean = float(np.mean(diffs))
    unknown = [c.metric for c in constraints for t in usable.values() if c.holds(t.constraints.get(c.metric)) is None]
    if lo > 0 and unknown:
        return Comparison(values, "unclear", f"better, but constraint metric '{unknown[0]}' was never logged",
                          pairs, mean, (lo, hi), level)
    status = "better" if lo > 0 else "worse" if hi < 0 else "unclear"
    word = {"better": "better than", "worse": "worse than", "unclear": "not distinguishable from"}[status]
    objectives = [t.objective for t in usable.values() if t.objective is not None]
    return Comparison(values, status, f"{word} the baseline: mean difference {mean:+.4g}, "
                      f"{level:.1%} interval [{lo:+.4g}, {hi:+.4g}] over {len(pairs)} seeds", pairs, mean,
                      (lo, hi), level, steps=sum(t.steps or 0 for t in usable.values()),
                      ranked_steps=sum(ranked_steps(t, planned_steps) for t in usable.values()),
                      objective=float(np.mean(objectives)) if objectives else None)


def decide(records: Sequence[TrialRecord], baseline: dict[str, Any], objective: Objective,
           constraints: Sequence[Constraint] = (), *, candidates: Sequence[dict[str, Any]] | None = None,
           level: float = LEVEL, min_pairs: int = MIN_PAIRS, steps: int | None = None) -> Verdict:
    """The verdict over a sweep's trials (rule in the module docstring).

    Args:
        records: all trials of the sweep.
        baseline: the config's current value of each swept key.
        candidates: the values to compare with the baseline (default: every other value that was run).
        level: confidence level of the intervals before the Bonferroni correction.
        min_pairs: paired seeds a candidate needs before it can be confirmed (at least 2).
        steps: the steps every trial was planned to run; a trial the race stopped counts them all when
            confirmed candidates are ranked (default: the steps it ran).
    """
    if min_pairs < 2:
        raise ValueError(f"min_pairs must be at least 2 but got {min_pairs}")
    groups = _group([r for r in records if r.state not in ("interrupted", "waiting", "running")])
    base_trials = next((m for v, m in groups if same_point(v, baseline)), [])
    others = [(v, m) for v, m in groups if not same_point(v, baseline)]
    if candidates is not None:
        others = [(v, m) for v, m in others if any(same_point(v, c) for c in candidates)]
    verdict = Verdict(INSUFFICIENT, "", dict(baseline), level=level, min_pairs=min_pairs)
    base_by_seed = _by_seed(base_trials)
    if not others:
        verdict.reason = "no candidate value produced a result"
        return verdict
    if not base_by_seed:
        failed = [t for t in base_trials if t.state in ("failed", "diverged")]
        why = f": {failed[0].reason}" if failed else ""
        verdict.reason = (f"the baseline ({_describe(baseline)}) produced no objective{why}; "
                          "there is no difference to test")
        verdict.comparisons = [Comparison(v, "unclear", "no baseline to compare with", level=level) for v, _ in others]
        return verdict
    per_level = 1.0 - (1.0 - level) / len(others)
    verdict.comparisons = [_compare(v, m, base_by_seed, objective, constraints, per_level, min_pairs, steps)
                           for v, m in others]
    better = [c for c in verdict.comparisons if c.status == "better"]
    if better:
        # the candidate that went furthest (the pruner stops whatever falls behind on its seed), then the best
        # objective; without pruning every candidate ran all steps and this is the best objective
        best = max(better, key=lambda c: (c.ranked_steps, objective.sign * (c.objective or 0.0)))
        verdict.decision, verdict.candidate = FIX_CONFIRMED, best.values
        verdict.reason = f"{_describe(best.values)} is {best.reason}"
    elif all(c.status in ("worse", "failed", "infeasible") for c in verdict.comparisons):
        verdict.decision = KEEP_BASELINE
        verdict.reason = "; ".join(f"{_describe(c.values)}: {c.reason}" for c in verdict.comparisons)
    else:
        verdict.reason = "; ".join(f"{_describe(c.values)}: {c.reason}" for c in verdict.comparisons
                                   if c.status == "unclear") or "no candidate is clearly better"
    return verdict
