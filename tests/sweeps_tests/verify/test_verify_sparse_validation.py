"""A validation objective is reported only every trainer.test_freq steps (verl 0.9.1 ray_trainer.py:1727-1728):
its trial value averages the last half of the passes, the pruner reads where another trial stood at the
reference step, and a pair is compared at a step both trials reported."""

from __future__ import annotations

from typing import Any

import pytest

from sweeps import Objective, TrialRecord, decide, tail_mean
from sweeps._objective import tail_fraction

optuna = pytest.importorskip("optuna")

from sweeps._pruner import seed_paired_pruner  # noqa: E402

VAL = "val-core/sandbox/reward/mean@1"
PASSES = [0.2, 0.4, 0.6, 0.8, 1.0, 0.3]  # six validation passes of one trial


def test_validation_metric_averages_the_last_half_of_its_passes() -> None:
    assert tail_fraction(VAL) == 0.5 and tail_fraction("val-aux/x/acc/mean@4") == 0.5
    # last ceil(6/2) = 3 passes: (0.8 + 1.0 + 0.3) / 3
    assert tail_mean(PASSES, tail_fraction(VAL)) == pytest.approx(0.7)
    # five passes: ceil(2.5) = 3 of them, (0.6 + 0.8 + 1.0) / 3
    assert tail_mean(PASSES[:5], tail_fraction(VAL)) == pytest.approx(0.8)


def test_training_metric_keeps_the_last_fifth() -> None:
    assert tail_fraction("critic/score/mean") == 0.2
    # ceil(0.2 * 6) = 2: (1.0 + 0.3) / 2
    assert tail_mean(PASSES, tail_fraction("critic/score/mean")) == pytest.approx(0.65)


DIST = {"lr": optuna.distributions.FloatDistribution(1e-7, 1.0, log=True)}
# another value on seed 0, validated every 5 steps; at step floor(0.4 * 20) = 8 it stood at its step-5 value
REFERENCE = {5: 0.6, 10: 0.7, 15: 0.8, 20: 0.85}


def _study(sparse: bool) -> Any:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize",
                                pruner=seed_paired_pruner(2, first_seed=0, pace=0.4, sparse=sparse))
    study.add_trial(optuna.trial.create_trial(params={"lr": 1e-5}, distributions=DIST, value=0.85,
                                              intermediate_values=REFERENCE, user_attrs={"seed": 0}))
    return study


def _running(study: Any, value: float) -> Any:
    study.enqueue_trial({"lr": 1e-3}, user_attrs={"seed": 0})
    trial = study.ask(DIST)
    for step in (5, 10, 15, 20):
        trial.report(value, step)
    return trial


@pytest.mark.parametrize(("value", "prune"), [(0.5, True), (0.65, False)], ids=["behind:prune", "ahead:keep"])
def test_sparse_pruner_reads_the_last_validation_at_or_before_the_reference_step(value: float, prune: bool) -> None:
    # at step 20 the reference step is 8; the other trial's last validation by then is step 5 (0.6)
    assert _running(_study(sparse=True), value).should_prune() is prune


def test_per_step_pruner_still_needs_a_value_at_the_exact_step() -> None:
    # no report at step 8: no reference, however far behind
    assert _running(_study(sparse=False), 0.0).should_prune() is False


def _record(n: int, lr: float, seed: int, curve: dict[int, float], state: str) -> TrialRecord:
    return TrialRecord(n, {"lr": lr}, seed, "baseline" if lr == 1e-3 else "candidate", state,
                       objective=curve[max(curve)], steps=max(curve), curve=curve)


def test_pair_is_compared_at_a_step_both_reported() -> None:
    # the baseline was pruned after its step-25 validation; the candidate ran to 30 but has no value at 25
    # (e.g. a NaN pass). Comparing at 25 would set the candidate's step-20 value against the baseline's
    # step-25 one; both reported step 20, so that is where they meet.
    records = []
    for i, seed in enumerate((1, 2, 3)):
        base = {5: 0.5, 10: 0.5, 15: 0.5, 20: 0.5, 25: 0.1}
        cand = {5: 0.4, 10: 0.4, 15: 0.4, 20: 0.4 + 0.01 * i, 30: 0.9}
        records += [_record(2 * i, 1e-3, seed, base, "pruned"), _record(2 * i + 1, 1e-5, seed, cand, "complete")]
    verdict = decide(records, {"lr": 1e-3}, Objective(VAL, "maximize"))
    comparison = verdict.comparisons[0]
    assert [p.step for p in comparison.pairs] == [20, 20, 20]
    assert [p.difference for p in comparison.pairs] == pytest.approx([-0.1, -0.09, -0.08])
    assert verdict.decision != "fix confirmed"
