"""The sweep's schedule over plain trial snapshots, without Optuna (issue 28): what runs next, stale-trial
recovery, re-queueing in planned order, the race and the progress total.

The expected orders are the rules ``sweeps/_schedule.py`` and ``runner``'s docstring state (the value that went
furthest, then scored best, first on a later seed; TPE's baseline first, then its explored values, then the best
one with the baseline on the other seeds, the one that trailed on the first seed first), on hand-built trials.
This file imports nothing from Optuna; the last test checks the schedule does not either.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sweeps._objective import Objective
from sweeps._plan import Plan, SweepSpec
from sweeps._result import TrialRecord
from sweeps._schedule import (
    Point,
    Trial,
    behind,
    is_duplicate,
    next_step,
    orphaned,
    race,
    requeued,
    total_trials,
)
from sweeps._space import Param

KEY = "actor_rollout_ref.actor.optim.lr"
BASE, LOW, HIGH = 1e-6, 2e-6, 4e-6
SEEDS = [7, 8, 9]
_STATE = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed", "RUNNING": "running", "WAITING": "waiting"}


def _plan(*, grid: bool = True, every_seed: bool = False, race_on: bool = True, n_explore: int = 2) -> Plan:
    param = Param.grid(KEY, [LOW, HIGH]) if grid else Param.range(KEY, 1e-7, 1e-4, log=True)
    spec = SweepSpec(params=[param], objective=Objective("critic/score/mean", "maximize"), steps=10, seeds=3,
                     every_seed=every_seed, race=race_on, warmup_steps=3)
    return Plan(cfg=None, spec=spec, baseline={KEY: BASE}, seeds=SEEDS, seed_keys=["sandbox.seed"],  # type: ignore[arg-type]
                template=None, grid_values=[BASE, LOW, HIGH] if grid else [],  # type: ignore[arg-type]
                distributions={}, n_explore=n_explore, fingerprint={})


def _trial(number: int, value: float, seed: int, state: str = "COMPLETE", *, objective: float | None = None,
           steps: int | None = 10, role: str | None = None, planned: int | None = None, ignored: bool = False,
           **extra: Any) -> Trial:
    curve = {s: float(objective) for s in range(1, (steps or 0) + 1)} if objective is not None else {}
    record = TrialRecord(number, {KEY: value}, seed, role or "candidate",
                         "interrupted" if ignored else _STATE[state], objective=objective if curve else None,
                         steps=max(curve) if curve else None, curve=curve)
    return Trial(number, state, {KEY: value}, seed, role, number if planned is None else planned, ignored, record,
                 last_step=max(curve) if curve else None, **extra)


def _first_seed_done() -> list[Trial]:
    """Seed 7: the baseline pruned at step 3, LOW complete at 0.5, HIGH complete at 0.8."""
    return [_trial(0, BASE, 7, "PRUNED", objective=0.1, steps=3), _trial(1, LOW, 7, objective=0.5),
            _trial(2, HIGH, 7, objective=0.8)]


# -- what to run next ------------------------------------------------------------------------------------------


def test_a_grid_asks_the_sampler_until_every_value_ran_on_the_first_seed() -> None:
    step = next_step(_plan(every_seed=True), _first_seed_done()[:2], None)
    assert step.ask and step.enqueue == ()


def test_a_waiting_trial_is_asked_for_before_anything_is_queued() -> None:
    step = next_step(_plan(every_seed=True), [*_first_seed_done(), _trial(3, HIGH, 8, "WAITING")], None)
    assert step.ask and step.enqueue == ()


def test_a_later_seed_runs_the_value_that_went_furthest_then_scored_best_first() -> None:
    plan, trials = _plan(every_seed=True), _first_seed_done()
    order = []
    for number in range(3, 6):
        step = next_step(plan, trials, None)
        (point,) = step.enqueue
        assert step.ask and point.seed == 8
        order.append(point.values[KEY])
        trials.append(_trial(number, point.values[KEY], 8, "RUNNING", objective=0.2, steps=1, role=point.role))
    assert order == [HIGH, LOW, BASE]  # both candidates ran 10 steps, HIGH scored higher; the baseline was pruned
    assert [t.role for t in trials[3:]] == ["candidate", "candidate", "baseline"]


def test_an_interrupted_trial_does_not_cover_its_point() -> None:
    trials = [*_first_seed_done(), _trial(3, HIGH, 8, "FAIL", ignored=True)]
    (point,) = next_step(_plan(every_seed=True), trials, None).enqueue
    assert (point.values, point.seed) == ({KEY: HIGH}, 8)


def test_a_grid_run_on_every_seed_is_done() -> None:
    trials = [_trial(3 * i + j, v, seed, objective=0.5) for i, seed in enumerate(SEEDS)
              for j, v in enumerate([BASE, LOW, HIGH])]
    step = next_step(_plan(every_seed=True), trials, None)
    assert not step.ask and step.enqueue == ()


def test_tpe_runs_the_baseline_first_then_asks_for_its_explored_values() -> None:
    plan = _plan(grid=False, n_explore=2)
    (point,) = next_step(plan, [], None).enqueue
    assert point == Point({KEY: BASE}, 7, "baseline")
    baseline = _trial(0, BASE, 7, objective=0.4, role="baseline")
    step = next_step(plan, [baseline, _trial(1, 3e-6, 7, objective=0.6, role="explore")], None)
    assert step.ask and step.enqueue == ()  # one explored value of two
    running = _trial(2, 5e-6, 7, "RUNNING", objective=0.6, steps=4, role="explore")
    assert not next_step(plan, [baseline, _trial(1, 3e-6, 7, objective=0.6, role="explore"), running], None).ask


def test_tpe_confirms_its_best_feasible_value_with_the_baseline_trailing_one_first() -> None:
    plan = _plan(grid=False, n_explore=2)
    trials = [_trial(0, BASE, 7, objective=0.4, role="baseline"), _trial(1, 3e-6, 7, objective=0.6, role="explore"),
              _trial(2, 5e-6, 7, objective=0.9, role="explore")]
    step = next_step(plan, trials, None)
    assert step.candidate == {KEY: 5e-6}  # stored by the driver: chosen once
    assert step.ask and [(p.values[KEY], p.seed, p.role) for p in step.enqueue] == [(BASE, 8, "baseline"),
                                                                                    (5e-6, 8, "confirm")]
    # once stored, the candidate is not chosen again, even if a better value shows up
    again = next_step(plan, [*trials, _trial(3, 6e-6, 7, objective=1.0, role="explore")], {KEY: 5e-6})
    assert again.candidate is None and {p.values[KEY] for p in again.enqueue} == {BASE, 5e-6}


# -- recovery ---------------------------------------------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_running_trial_whose_driver_died_is_orphaned_and_one_this_driver_runs_is_not() -> None:
    dead = {"host": socket.gethostname(), "pid": _dead_pid(), "start_ticks": None}
    alive = {"host": socket.gethostname(), "pid": os.getpid(), "start_ticks": None}
    trials = [_trial(0, BASE, 7, "RUNNING", driver=dead), _trial(1, LOW, 7, "RUNNING", driver=dead),
              _trial(2, HIGH, 7, "RUNNING", driver=alive), _trial(3, HIGH, 8, "WAITING", driver=dead)]
    lost = orphaned(trials, {1}, stale_after_s=60.0, other_drivers=[])
    assert [t.number for t in lost] == [0]


def test_a_trial_that_names_no_driver_is_orphaned_once_it_is_stale(tmp_path: Path) -> None:
    me = [{"host": socket.gethostname(), "pid": os.getpid(), "start_ticks": None}]  # another driver still runs here
    trials = [_trial(0, BASE, 7, "RUNNING", started_at=1000.0), _trial(1, LOW, 7, "RUNNING", started_at=1050.0)]
    lost = orphaned(trials, set(), stale_after_s=60.0, other_drivers=me, now=1100.0)
    assert [t.number for t in lost] == [0]  # started 100 s ago; the other 50 s ago


def test_a_requeued_copy_keeps_its_planned_place_and_the_waiting_trials_after_it_go_behind() -> None:
    plan = _plan()
    interrupted = _trial(4, LOW, 8, "RUNNING", role="candidate", planned=2)
    copy = requeued(plan, interrupted)
    assert copy == Point({KEY: LOW}, 8, "candidate", {"requeued_from": 4, "planned": 2})
    waiting = [_trial(5, HIGH, 8, "WAITING", role="candidate", planned=6),
               _trial(6, BASE, 8, "WAITING", role="baseline", planned=3),
               _trial(7, BASE, 9, "WAITING", role="baseline", planned=1), _trial(8, HIGH, 9, "RUNNING", planned=9)]
    assert [t.number for t in behind(waiting, 2)] == [6, 5]  # planned 3, then 6; not planned before, nor running


def test_a_grid_point_asked_twice_is_a_duplicate_unless_the_other_is_only_waiting() -> None:
    trials = [_trial(0, BASE, 7), _trial(1, LOW, 8, "WAITING")]
    assert is_duplicate(trials, 5, {KEY: BASE}, 7)
    assert not is_duplicate(trials, 0, {KEY: BASE}, 7)  # itself
    assert not is_duplicate(trials, 5, {KEY: LOW}, 8)
    assert not is_duplicate(trials, 5, {KEY: BASE}, 8)


# -- the race and the progress total ---------------------------------------------------------------------------


def test_the_race_stops_a_trial_once_every_other_value_on_its_seed_was_pruned_or_failed() -> None:
    plan = _plan(every_seed=True)
    others = [_trial(4, LOW, 8, "PRUNED", objective=0.1, steps=5), _trial(5, BASE, 8, "FAIL", steps=None)]
    judge = race(plan, 3, {KEY: HIGH}, 8, others, None)
    assert judge(4) is None  # behind the step the last other value reached (5)
    assert judge(6) == "it outran every other value on seed 8 (pruned or failed by step 5)"
    assert judge(10) is None  # the last step: it ends on its own
    assert race(plan, 3, {KEY: HIGH}, 7, others, None)(6) is None  # the first seed runs as the pruner leaves it
    assert race(_plan(every_seed=True, race_on=False), 3, {KEY: HIGH}, 8, others, None)(6) is None
    still = [*others[:1], _trial(5, BASE, 8, "RUNNING", objective=0.1, steps=2)]
    assert race(plan, 3, {KEY: HIGH}, 8, still, None)(6) is None


@pytest.mark.parametrize("every_seed, trials, expected", [
    (True, [], 9),  # 3 values x 3 seeds
    (False, [], 3 + 2 * (1 + 1)),  # staged: the first seed, then at least one candidate and the baseline per seed
    (False, [_trial(3, HIGH, 8, "RUNNING"), _trial(4, LOW, 8, "RUNNING"), _trial(5, LOW, 9, "RUNNING")],
     3 + 2 * (1 + 2)),  # two candidates begun on later seeds
])
def test_the_progress_total(every_seed: bool, trials: list[Trial], expected: int) -> None:
    assert total_trials(_plan(every_seed=every_seed), trials) == expected


def test_the_schedule_imports_no_optuna() -> None:
    code = ("import sys; import sweeps._schedule; "
            "assert 'optuna' not in sys.modules, sorted(m for m in sys.modules if m.startswith('optuna'))")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_only_the_adapter_reaches_into_private_names() -> None:
    """Optuna's private API (``study._storage``, ``FrozenTrial._trial_id``) is called from one module: any
    ``x._name`` other than ``self``'s or ``cls``'s elsewhere in sweeps/ is a new private call to move there."""
    import ast

    root = Path(__file__).resolve().parents[2] / "sweeps"
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "_optuna_adapter.py" or path.parent.name == "sandbox":
            continue  # the adapter; the CPU sandbox trainer (no Optuna there)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []
