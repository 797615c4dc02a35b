"""The Optuna side of the schedule: a study's trials read as snapshots, and the private calls kept in
``sweeps/_optuna_adapter.py`` (mark a stored trial interrupted, take a waiting one), on an in-memory study."""

from __future__ import annotations

import pytest

from sweeps._objective import Objective
from sweeps._plan import Plan, SweepSpec
from sweeps._space import Param

optuna = pytest.importorskip("optuna")

from sweeps import _optuna_adapter as adapter  # noqa: E402

KEY = "actor_rollout_ref.actor.optim.lr"


@pytest.fixture()
def plan() -> Plan:
    spec = SweepSpec(params=[Param.grid(KEY, [2e-6, 4e-6])], objective=Objective("critic/score/mean"), steps=5,
                     seeds=2)
    return Plan(cfg=None, spec=spec, baseline={KEY: 1e-6}, seeds=[7, 8], seed_keys=["sandbox.seed"],  # type: ignore[arg-type]
                template=None, grid_values=[1e-6, 2e-6, 4e-6], distributions={}, n_explore=0,  # type: ignore[arg-type]
                fingerprint={})


def _study():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction="maximize")


def test_a_study_reads_as_snapshots_with_a_waiting_trials_enqueued_values(plan: Plan) -> None:
    study = _study()
    study.enqueue_trial({KEY: 4e-6}, user_attrs={"seed": 8, "role": "candidate", "planned": 1})
    study.enqueue_trial({KEY: 2e-6}, user_attrs={"seed": 8, "role": "candidate"})
    trial = study.ask(fixed_distributions={KEY: optuna.distributions.CategoricalDistribution(plan.grid_values)})
    for step in (1, 2, 3):
        trial.report(0.1 * step, step)
    running, waiting = adapter.trials(study, plan)
    assert (running.number, running.state, running.values, running.seed, running.planned) == (0, "RUNNING",
                                                                                              {KEY: 4e-6}, 8, 1)
    assert running.last_step == 3 and running.record.state == "running" and running.started_at is not None
    assert (waiting.state, waiting.values, waiting.role, waiting.planned) == ("WAITING", {KEY: 2e-6}, "candidate", 1)


def test_finished_trials_are_read_once_and_running_ones_at_every_call(plan: Plan) -> None:
    study = _study()
    distributions = {KEY: optuna.distributions.CategoricalDistribution(plan.grid_values)}
    done = study.ask(fixed_distributions=distributions)
    study.tell(done, 0.5)
    live = study.ask(fixed_distributions=distributions)
    cache: dict = {}
    first = adapter.trials(study, plan, cache)
    live.report(0.2, 1)
    second = adapter.trials(study, plan, cache)
    assert list(cache) == [0] and second[0] is first[0]
    assert first[1].last_step is None and second[1].last_step == 1


def test_a_waiting_trial_is_taken_once_and_an_interrupted_one_stops_counting(plan: Plan) -> None:
    study = _study()
    study.enqueue_trial({KEY: 2e-6}, user_attrs={"seed": 8, "role": "candidate"})
    (waiting,) = adapter.trials(study, plan)
    assert adapter.take_waiting(study, waiting)
    assert not adapter.take_waiting(study, waiting)  # already RUNNING: another driver would lose the race
    adapter.mark_interrupted(study, waiting, "re-queued behind #0")
    (stored,) = adapter.trials(study, plan)
    assert stored.state == "FAIL" and stored.ignored and stored.record.reason == "re-queued behind #0"
