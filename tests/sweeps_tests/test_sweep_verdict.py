"""The verdict rule: paired by seed at the last common step, bootstrap interval, three outcomes."""

from __future__ import annotations

import pytest

from sweeps import Constraint, Objective, TrialRecord, bootstrap_ci, decide

LR = "lr"
BASE = {LR: 1e-3}
MAX = Objective("score", "maximize")


def _trial(n: int, lr: float, seed: int, finals: float | list[float], *, state: str = "complete", steps: int = 10,
           constraints: dict[str, float | None] | None = None, feasible: bool | None = True,
           reason: str | None = None) -> TrialRecord:
    curve = {s: (finals if isinstance(finals, float) else finals[s - 1]) for s in range(1, steps + 1)}
    if state == "failed":
        curve = {}
    return TrialRecord(n, {LR: lr}, seed, "baseline" if lr == 1e-3 else "candidate", state,
                       objective=curve[max(curve)] if curve else None, steps=max(curve) if curve else None,
                       constraints=constraints or {}, feasible=feasible if state != "failed" else None,
                       reason=reason, curve=curve)


def _grid(base: list[float], cand: list[float], cand_lr: float = 1e-5) -> list[TrialRecord]:
    out = []
    for i, (b, c) in enumerate(zip(base, cand, strict=True)):
        out += [_trial(2 * i, 1e-3, 40 + i, b), _trial(2 * i + 1, cand_lr, 40 + i, c)]
    return out


def test_bootstrap_interval_is_deterministic_and_brackets_the_mean() -> None:
    diffs = [0.1, 0.3, 0.2, 0.25, 0.15]
    lo, hi = bootstrap_ci(diffs, 0.95)
    assert (lo, hi) == bootstrap_ci(diffs, 0.95)
    assert lo < 0.2 < hi and lo >= 0.1 and hi <= 0.3
    # with three seeds the lower end is the smallest difference: confirmed only when all three win
    assert bootstrap_ci([0.1, 0.5, 0.9], 0.95)[0] == pytest.approx(0.1)


def test_fix_confirmed_when_the_candidate_wins_on_every_seed() -> None:
    v = decide(_grid([0.1, 0.2, 0.15], [0.6, 0.7, 0.65]), BASE, MAX)
    assert v.decision == "fix confirmed" and v.candidate == {LR: 1e-5}
    assert v.best is not None and v.best.mean_difference == pytest.approx(0.5)
    assert v.best.ci is not None and v.best.ci[0] > 0


def test_keep_baseline_when_the_candidate_loses_on_every_seed() -> None:
    v = decide(_grid([0.6, 0.7, 0.65], [0.1, 0.2, 0.15]), BASE, MAX)
    assert v.decision == "keep baseline" and v.candidate is None


def test_insufficient_evidence_when_the_interval_contains_zero() -> None:
    v = decide(_grid([0.5, 0.5, 0.5], [0.6, 0.4, 0.55]), BASE, MAX)
    assert v.decision == "insufficient evidence"
    assert v.comparisons[0].status == "unclear"


def test_minimized_objective_flips_the_sign() -> None:
    v = decide(_grid([0.6, 0.7, 0.65], [0.1, 0.2, 0.15]), BASE, Objective("loss", "minimize"))
    assert v.decision == "fix confirmed"
    assert v.best is not None and v.best.mean_difference == pytest.approx(0.5)


def test_too_few_paired_seeds_is_insufficient_even_when_every_pair_wins() -> None:
    v = decide(_grid([0.1, 0.2], [0.9, 0.9]), BASE, MAX)
    assert v.decision == "insufficient evidence" and "2 paired seed(s)" in v.reason
    assert decide(_grid([0.1, 0.2], [0.9, 0.9]), BASE, MAX, min_pairs=2).decision == "fix confirmed"


def test_pairs_compare_at_the_last_step_both_reached() -> None:
    rising = [s / 10 for s in range(1, 11)]  # 0.1 .. 1.0
    trials = []
    for i in range(3):
        trials.append(_trial(2 * i, 1e-3, 40 + i, [0.5] * 10, state="pruned", steps=4))
        trials.append(_trial(2 * i + 1, 1e-5, 40 + i, rising))
    v = decide(trials, BASE, MAX)
    # at step 4 the candidate (0.4) is still behind the pruned baseline (0.5): not its final 1.0
    assert v.best is None and v.decision == "keep baseline"
    assert [p.step for p in v.comparisons[0].pairs] == [4, 4, 4]
    assert v.comparisons[0].pairs[0].candidate == pytest.approx(0.4)


def test_a_failed_candidate_keeps_the_baseline_and_names_the_reason() -> None:
    trials = _grid([0.1, 0.2, 0.15], [0.6, 0.7, 0.65])
    trials.append(_trial(9, 1e-4, 40, 0.0, state="failed", reason="torch.OutOfMemoryError: CUDA out of memory."))
    v = decide(trials, BASE, MAX)
    assert v.decision == "fix confirmed"  # the other candidate still wins
    failed = next(c for c in v.comparisons if c.values == {LR: 1e-4})
    assert failed.status == "failed" and "CUDA out of memory" in failed.reason
    only_failed = [t for t in trials if t.values[LR] != 1e-5]
    assert decide(only_failed, BASE, MAX).decision == "keep baseline"


def test_a_candidate_that_breaks_a_constraint_is_not_confirmed() -> None:
    kl = Constraint("actor/ppo_kl", "<", 0.02)
    trials = _grid([0.1, 0.2, 0.15], [0.6, 0.7, 0.65])
    trials[1] = _trial(1, 1e-5, 40, 0.6, constraints={"actor/ppo_kl": 0.05}, feasible=False)
    v = decide(trials, BASE, MAX, [kl])
    assert v.decision == "keep baseline"
    assert v.comparisons[0].status == "infeasible" and "actor/ppo_kl=0.05" in v.comparisons[0].reason


def test_a_constraint_never_logged_leaves_the_verdict_open() -> None:
    trials = [_trial(t.number, t.values[LR], t.seed or 0, t.objective or 0.0, constraints={"x": None},
                     feasible=None) for t in _grid([0.1, 0.2, 0.15], [0.6, 0.7, 0.65])]
    v = decide(trials, BASE, MAX, [Constraint("x", "<", 1.0)])
    assert v.decision == "insufficient evidence" and "never logged" in v.reason


def test_no_baseline_objective_is_insufficient_evidence() -> None:
    trials = [_trial(i, 1e-3, 40 + i, 0.0, state="failed", reason="exit code 1") for i in range(3)]
    trials += [_trial(3 + i, 1e-5, 40 + i, 0.7) for i in range(3)]
    v = decide(trials, BASE, MAX)
    assert v.decision == "insufficient evidence" and "baseline" in v.reason and "exit code 1" in v.reason


def test_interrupted_trials_do_not_count() -> None:
    trials = _grid([0.1, 0.2, 0.15], [0.6, 0.7, 0.65])
    trials.append(_trial(20, 1e-5, 40, 0.0, state="interrupted"))
    assert decide(trials, BASE, MAX).decision == "fix confirmed"


def test_bonferroni_widens_the_interval_with_more_candidates() -> None:
    trials = _grid([0.1, 0.2, 0.15, 0.1, 0.2], [0.3, 0.5, 0.2, 0.4, 0.6])
    one = decide(trials, BASE, MAX).comparisons[0]
    extra = [_trial(50 + i, 1e-6, 40 + i, 0.0) for i in range(5)]
    two = next(c for c in decide(trials + extra, BASE, MAX).comparisons if c.values == {LR: 1e-5})
    assert one.ci is not None and two.ci is not None
    assert two.level > one.level and two.ci[0] <= one.ci[0] and two.ci[1] >= one.ci[1]


def test_the_candidate_that_ran_furthest_wins_among_confirmed_ones() -> None:
    trials = _grid([0.1, 0.1, 0.1], [0.5, 0.5, 0.5])
    for i in range(3):  # pruned early but far ahead of the faulty baseline at its last step
        trials.append(_trial(30 + i, 1e-4, 40 + i, 0.9, state="pruned", steps=3))
    v = decide(trials, BASE, MAX)
    assert {c.status for c in v.comparisons} == {"better"}
    assert v.candidate == {LR: 1e-5}


def test_a_candidate_that_diverged_on_one_seed_is_never_confirmed() -> None:
    # its finite steps beat the baseline by 0.5 on every seed; on seed 42 its score went NaN at step 4
    records = _grid([0.2, 0.2, 0.2], [0.7, 0.7, 0.7])
    diverged = records[1]
    diverged.state, diverged.diverged = "diverged", {"step": 4, "metric": "score", "value": "NaN"}
    diverged.curve = {s: 0.7 for s in (1, 2, 3)}
    verdict = decide(records, BASE, MAX)
    assert verdict.decision == "keep baseline"
    assert verdict.reason == "lr=1e-05: diverged on seed 40: score became NaN at step 4"


def test_a_baseline_that_diverged_leaves_its_seed_unpaired() -> None:
    records = _grid([0.2, 0.2, 0.2], [0.7, 0.7, 0.7])
    records[0].state, records[0].diverged = "diverged", {"step": 4, "metric": "score", "value": "null"}
    verdict = decide(records, BASE, MAX)
    assert verdict.decision == "insufficient evidence"
    assert verdict.comparisons[0].reason == "2 paired seed(s) with the baseline; at least 3 are needed"
