"""The seed-paired pruner: a trial stops when it is behind the pace of another value on its seed (that value's
first-seed curve standing in while it is queued on the seed but not there yet)."""

from __future__ import annotations

from typing import Any

import pytest

optuna = pytest.importorskip("optuna")

from sweeps._pruner import seed_paired_pruner  # noqa: E402

DIST = {"lr": optuna.distributions.FloatDistribution(1e-7, 1.0, log=True)}
# the reference: another value on seed 0, finished; at step 2 it had 0.3
REFERENCE = {1: 0.1, 2: 0.3, 3: 0.5, 4: 0.6, 5: 0.7, 6: 0.8}


def _study(direction: str = "maximize", warmup: int = 2, pace: float = 0.5) -> Any:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction=direction, pruner=seed_paired_pruner(warmup, first_seed=0, pace=pace))


def _finished(study: Any, lr: float, seed: int, curve: dict[int, float]) -> None:
    study.add_trial(optuna.trial.create_trial(params={"lr": lr}, distributions=DIST, value=curve[max(curve)],
                                              intermediate_values=curve, user_attrs={"seed": seed}))


def _running(study: Any, lr: float, seed: int, curve: dict[int, float]) -> Any:
    study.enqueue_trial({"lr": lr}, user_attrs={"seed": seed})
    trial = study.ask(DIST)
    for step, value in curve.items():
        trial.report(value, step)
    return trial


@pytest.mark.parametrize(
    ("curve", "prune"),
    [
        pytest.param({1: 0.1, 2: 0.15, 3: 0.2, 4: 0.25}, True, id="behind-the-pace:prune"),
        pytest.param({1: 0.1, 2: 0.2, 3: 0.3, 4: 0.35}, False, id="slow-starter:keep"),
        pytest.param({1: 0.1, 2: 0.05, 3: 0.0, 4: 0.0}, True, id="diverging:prune"),
        pytest.param({1: 0.1, 2: 0.3, 3: 0.5, 4: 0.3}, False, id="tie-at-pace-step:keep"),
        pytest.param({1: 0.0}, False, id="before-warmup:keep"),
    ],
)
def test_prune_only_behind_the_pace_of_the_same_seed(curve: dict[int, float], prune: bool) -> None:
    study = _study()
    _finished(study, 1e-5, 0, REFERENCE)
    assert _running(study, 1e-3, 0, curve).should_prune() is prune


def test_other_seeds_are_never_a_reference() -> None:
    study = _study()
    _finished(study, 1e-5, 1, REFERENCE)
    assert _running(study, 1e-3, 0, {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0}).should_prune() is False


COLLAPSE = {1: 0.1, 2: 0.05, 3: 0.0, 4: 0.0}


def test_a_value_queued_on_the_seed_stands_in_with_its_first_seed_curve() -> None:
    # one trial at a time: 1e-5 waits on seed 1 behind the collapsing 1e-3; its seed-0 curve is the reference
    study = _study()
    _finished(study, 1e-5, 0, REFERENCE)
    trial = _running(study, 1e-3, 1, COLLAPSE)
    study.enqueue_trial({"lr": 1e-5}, user_attrs={"seed": 1})
    assert trial.should_prune() is True


def test_no_stand_in_for_a_value_not_planned_on_the_seed() -> None:
    study = _study()
    _finished(study, 1e-5, 0, REFERENCE)
    study.enqueue_trial({"lr": 1e-4}, user_attrs={"seed": 1})  # another value is queued there, never run on seed 0
    assert _running(study, 1e-3, 1, COLLAPSE).should_prune() is False


@pytest.mark.parametrize(
    ("on_seed", "state", "prune"),
    [
        pytest.param({1: 0.02, 2: 0.0}, "running", False, id="its-own-curve-there:keep"),
        pytest.param({1: 0.02}, "running", True, id="not-there-yet:first-seed-stands-in"),
        pytest.param({1: 0.5}, "pruned", False, id="stopped-before-that-step:no-reference"),
        pytest.param({1: 0.02, 3: 0.0}, "running", False, id="past-that-step-not-logged-there:no-reference"),
    ],
)
def test_the_value_on_the_seed_is_the_reference_once_it_has_the_step(on_seed: dict[int, float], state: str,
                                                                      prune: bool) -> None:
    # seed 0 would prune 1e-3 (0.3 at step 2); on seed 1, 1e-5 counts as it is there when it has reached step 2
    study = _study()
    _finished(study, 1e-5, 0, REFERENCE)
    if state == "running":
        _running(study, 1e-5, 1, on_seed)
    else:
        study.add_trial(optuna.trial.create_trial(params={"lr": 1e-5}, distributions=DIST, intermediate_values=on_seed,
                                                  user_attrs={"seed": 1}, state=optuna.trial.TrialState.PRUNED))
    assert _running(study, 1e-3, 1, COLLAPSE).should_prune() is prune


def test_a_running_trial_is_a_reference_too() -> None:
    study = _study()
    _running(study, 1e-5, 0, {1: 0.1, 2: 0.3})
    assert _running(study, 1e-3, 0, {1: 0.1, 2: 0.1, 3: 0.1, 4: 0.1}).should_prune() is True


def test_minimized_objective_prunes_the_larger_value() -> None:
    study = _study("minimize")
    _finished(study, 1e-5, 0, {s: 1.0 - v for s, v in REFERENCE.items()})
    assert _running(study, 1e-3, 0, {1: 0.9, 2: 0.9, 3: 0.9, 4: 0.9}).should_prune() is True
    assert _running(study, 1e-4, 0, {1: 0.9, 2: 0.8, 3: 0.7, 4: 0.6}).should_prune() is False


def test_pace_one_is_a_race_at_equal_steps() -> None:
    study = _study(pace=1.0)
    _finished(study, 1e-5, 0, REFERENCE)
    assert _running(study, 1e-3, 0, {1: 0.1, 2: 0.2, 3: 0.3, 4: 0.35}).should_prune() is True


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="warmup_steps must be at least 0"):
        seed_paired_pruner(-1, 0)
    with pytest.raises(ValueError, match="pace must be in"):
        seed_paired_pruner(1, 0, pace=0.0)
