"""The seed-paired pruner: a trial stops when it is behind the pace of another value on its seed."""

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
