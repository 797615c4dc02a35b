"""A staged grid: every value on the first seed, then the candidates one at a time, in the first seed's order, on
the other seeds beside the baseline, until one is confirmed.

The planning is tested on an in-memory study whose trials are played by hand (the driver never launches a
process here): what the driver queues next, given what the trials did. The end-to-end cost and verdicts on the
sandbox are ``bench/bench_sweep_pruning.py``'s.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

optuna = pytest.importorskip("optuna")

from test_sweep_runner import LR, REPO, SANDBOX, SCORE, _advisor, _script, _slow_sandbox  # noqa: E402

from sweeps import Objective, Param, SweepSpec  # noqa: E402
from sweeps._launchers import LocalLauncher  # noqa: E402
from sweeps._plan import make_plan, record_of, values_of  # noqa: E402
from sweeps._verdict import FIX_CONFIRMED, INSUFFICIENT, KEEP_BASELINE, decide  # noqa: E402
from sweeps.runner import _Driver, _NoProgress, _sampler_and_pruner  # noqa: E402

BASE, A, B, C = 1e-3, 1e-5, 3e-5, 1e-4
SEEDS = (42, 43, 44)  # the script's data_loader_seed is verl's default, 42


def _driver(tmp_path: Path, every_seed: bool = False, seeds: int = 3) -> _Driver:
    spec = SweepSpec([Param.grid(LR, [A, B, C])], Objective(SCORE), steps=10, seeds=seeds, every_seed=every_seed)
    plan = make_plan(_script(tmp_path, f"{LR}={BASE}"), spec, SANDBOX, (), LocalLauncher(), None)
    assert plan.seeds == list(SEEDS[:seeds]) and plan.baseline == {LR: BASE}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler, pruner = _sampler_and_pruner(plan)
    study = optuna.create_study(direction="maximize", sampler=sampler, pruner=pruner)
    return _Driver(plan, study, LocalLauncher(), tmp_path / "out", 2, _NoProgress(), 120.0, 0.25)


def _curve(final: float, steps: int) -> dict[int, float]:
    return {s: final * s / steps for s in range(1, steps + 1)}


def _play(driver: _Driver, lr: float, seed: int, final: float, steps: int = 10, state: str = "complete") -> None:
    """Run (lr, seed) by hand: the waiting trial queued for it, or a new one; ``state`` complete, pruned or failed."""
    study = driver.study
    waiting = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))]
    if not any(values_of(t, driver.plan.keys) == {LR: lr} and t.user_attrs["seed"] == seed for t in waiting):
        study.enqueue_trial({LR: lr}, user_attrs={"seed": seed})
    assert not waiting or (values_of(waiting[0], driver.plan.keys), waiting[0].user_attrs["seed"]) == ({LR: lr}, seed)
    trial = study.ask(driver.plan.distributions)
    for step, value in _curve(final, steps).items():
        trial.report(value, step)
    tell = {"complete": dict(values=final), "pruned": dict(state=optuna.trial.TrialState.PRUNED),
            "failed": dict(state=optuna.trial.TrialState.FAIL)}[state]
    study.tell(trial, **tell)


def _queued(driver: _Driver) -> list[tuple[float, int]]:
    """What the driver queues now (asking until it has nothing more to queue)."""
    waiting: list[Any] = []
    while driver.want_more():
        now = driver.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        if len(now) == len(waiting):
            break  # it wants the sampler to propose (the first seed is not covered)
        waiting = now
    return [(values_of(t, driver.plan.keys)[LR], t.user_attrs["seed"]) for t in waiting]


def _first_seed(driver: _Driver, base: float = 0.1, a: float = 0.9, b: float = 0.8, c: float = 0.5,
                c_state: str = "pruned") -> None:
    # the baseline collapses (pruned at step 3); A and B run all the steps, A ends higher; C is pruned at step 5
    _play(driver, BASE, 42, base, steps=3 if base < 0.5 else 10, state="pruned" if base < 0.5 else "complete")
    _play(driver, A, 42, a)
    _play(driver, B, 42, b)
    _play(driver, C, 42, c, steps=5, state=c_state)


def _a_beats_the_collapsing_baseline_on(driver: _Driver, seed: int) -> None:
    # the pair queued on the seed, the baseline (behind A on the first seed) first; it is pruned at step 3, A climbs
    assert _queued(driver) == [(BASE, seed), (A, seed)]
    _play(driver, BASE, seed, 0.1, steps=3, state="pruned")
    _play(driver, A, seed, 0.9)


def _decide(driver: _Driver) -> Any:
    records = [record_of(t, driver.plan) for t in driver.study.get_trials(deepcopy=False)]
    return decide(records, driver.plan.baseline, driver.plan.spec.objective, steps=driver.plan.spec.steps)


def test_nothing_runs_on_the_other_seeds_until_the_first_seed_has_run(tmp_path: Path) -> None:
    driver = _driver(tmp_path)
    _play(driver, BASE, 42, 0.1, steps=3, state="pruned")
    _play(driver, A, 42, 0.9)
    _play(driver, B, 42, 0.8)
    driver.study.enqueue_trial({LR: C}, user_attrs={"seed": 42})
    running = driver.study.ask(driver.plan.distributions)  # C, still running on the first seed
    running.report(0.2, 1)
    assert _queued(driver) == []
    assert driver.want_more() is False


def test_the_first_seeds_leader_is_confirmed_first_and_alone(tmp_path: Path) -> None:
    driver = _driver(tmp_path)
    _first_seed(driver)
    # A led the first seed: the baseline goes first on seed 43, then A, so the pruner can measure the baseline
    # against A's first-seed curve even one trial at a time (and the race sees A planned there)
    _a_beats_the_collapsing_baseline_on(driver, 43)
    _a_beats_the_collapsing_baseline_on(driver, 44)
    # A beat the baseline on every seed: the sweep is done, B and C never ran on seeds 43 and 44
    assert _queued(driver) == []
    assert driver.want_more() is False
    verdict = _decide(driver)
    assert verdict.decision == FIX_CONFIRMED and verdict.candidate == {LR: A}
    assert driver.total_trials() == 4 + 2 * 2  # the first seed, then the baseline and A on two more seeds


def test_the_next_value_is_confirmed_when_the_leader_does_not_win_every_seed(tmp_path: Path) -> None:
    driver = _driver(tmp_path)
    _first_seed(driver)
    _a_beats_the_collapsing_baseline_on(driver, 43)
    assert _queued(driver) == [(BASE, 44), (A, 44)]
    _play(driver, BASE, 44, 0.95)
    _play(driver, A, 44, 0.1, steps=3, state="pruned")  # A loses seed 44: it cannot be confirmed
    assert _decide(driver).decision != FIX_CONFIRMED
    # B, second on the first seed, is next; the baseline already ran on both seeds
    assert _queued(driver) == [(B, 43)]
    _play(driver, B, 43, 0.8)
    assert _queued(driver) == [(B, 44)]
    _play(driver, B, 44, 0.8)
    assert _queued(driver) == [(C, 43)]  # then C (pruned on the first seed, so last)


def test_keep_baseline_still_runs_every_candidate_that_can_be_judged(tmp_path: Path) -> None:
    # the baseline leads the first seed; C failed there (it can only be 'failed' in the verdict, never run again)
    driver = _driver(tmp_path)
    _first_seed(driver, base=0.95, a=0.6, b=0.5, c_state="failed")
    order = []
    while queued := _queued(driver):
        order += queued
        for lr, seed in queued:
            _play(driver, lr, seed, 0.95 if lr == BASE else 0.1, steps=10 if lr == BASE else 3,
                  state="complete" if lr == BASE else "pruned")
    # the baseline led the first seed, so A goes first beside it; then B; C never
    assert order == [(A, 43), (BASE, 43), (A, 44), (BASE, 44), (B, 43), (B, 44)]
    verdict = _decide(driver)
    assert verdict.decision == KEEP_BASELINE
    assert {c.status for c in verdict.comparisons} == {"worse", "failed"}


def test_a_baseline_that_fails_on_the_first_seed_ends_the_sweep_there(tmp_path: Path) -> None:
    # 3 seeds and 3 pairs needed: with the baseline failed on one seed no candidate can be confirmed
    driver = _driver(tmp_path)
    _play(driver, BASE, 42, 0.0, steps=1, state="failed")
    _play(driver, A, 42, 0.9)
    _play(driver, B, 42, 0.8)
    _play(driver, C, 42, 0.5, steps=5, state="pruned")
    assert _queued(driver) == []
    assert driver.want_more() is False
    verdict = _decide(driver)
    assert verdict.decision == INSUFFICIENT and "produced no objective" in verdict.reason


def test_a_baseline_that_fails_on_a_later_seed_stops_the_confirmations(tmp_path: Path) -> None:
    driver = _driver(tmp_path)
    _first_seed(driver)
    assert _queued(driver) == [(BASE, 43), (A, 43)]
    _play(driver, BASE, 43, 0.1, steps=3, state="failed")
    _play(driver, A, 43, 0.9)
    assert _queued(driver) == []  # not A on seed 44, nor B: at most 2 paired seeds are left


@pytest.mark.parametrize(("every_seed", "seeds"), [(True, 3), (False, 2)], ids=["every-seed", "too-few-seeds"])
def test_every_seed_runs_every_value_on_every_seed(tmp_path: Path, every_seed: bool, seeds: int) -> None:
    # asked for, or with fewer seeds than a confirmation needs (3 pairs): then the curves are all a sweep gives
    driver = _driver(tmp_path, every_seed=every_seed, seeds=seeds)
    assert driver.plan.staged is False
    _first_seed(driver)
    queued = []
    while driver.want_more():
        waiting = driver.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        (lr, seed) = values_of(waiting[0], driver.plan.keys)[LR], waiting[0].user_attrs["seed"]
        queued.append((lr, seed))
        _play(driver, lr, seed, 0.5)
    # the value that went furthest (then scored best) first: A, B, C (5 steps), the baseline (3)
    assert queued[:4] == [(A, 43), (B, 43), (C, 43), (BASE, 43)]
    assert sorted(queued) == sorted((v, s) for s in SEEDS[1:seeds] for v in (A, B, C, BASE))


def test_cli_staged_by_default_and_every_seed_on_request(tmp_path: Path) -> None:
    # 1e-3 collapses; 1e-5 and 1e-4 both beat it. Staged: the first seed's leader (most steps, then the best
    # objective) and the baseline run on the other seeds; --every-seed runs every value there
    script = _script(tmp_path, f"{LR}=1e-3")
    runs = {}
    for mode in ("staged", "every"):
        proc = _advisor("sweep", str(script), "--param", LR, "--values", "1e-5,1e-4", "--steps", "8", "--objective",
                        SCORE, "--parallel", "2", "--command", shlex.join(SANDBOX), "--out", str(tmp_path / mode),
                        "-f", "json", *(["--every-seed"] if mode == "every" else []))
        assert proc.returncode == 0, proc.stderr
        runs[mode] = json.loads(proc.stdout)
    staged, every = runs["staged"], runs["every"]
    assert staged["staged"] is True and every["staged"] is False
    first = [t for t in staged["trials"] if t["seed"] == 42 and t["values"][LR] != 1e-3]
    leader = max(first, key=lambda t: (t["steps"], t["objective"]))["values"]
    assert staged["verdict"]["decision"] == every["verdict"]["decision"] == "fix confirmed"
    assert staged["verdict"]["candidate"] == leader
    for seed in (43, 44):
        assert sorted(t["values"][LR] for t in staged["trials"] if t["seed"] == seed) == sorted([1e-3, leader[LR]])
        assert sorted(t["values"][LR] for t in every["trials"] if t["seed"] == seed) == [1e-5, 1e-4, 1e-3]
    assert staged["trial_steps"] < every["trial_steps"]


def test_a_staged_sweep_killed_on_a_later_seed_resumes_where_it_was(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["sweep", str(_script(tmp_path, f"{LR}=1e-3")), "--param", LR, "--values", "1e-5,1e-4", "--steps", "30",
            "--objective", SCORE, "--parallel", "2", "--out", str(out), "--command",
            shlex.join(_slow_sandbox(tmp_path, pause_s=0.03)), "-f", "json"]
    driver = subprocess.Popen([sys.executable, "-m", "advisor", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})

    def later_seed_running() -> bool:
        for lease in out.glob("trials/*/lease.json"):
            argv = json.loads((lease.parent / "cmd.json").read_text())["argv"]
            if "actor_rollout_ref.actor.data_loader_seed=43" in argv and not (lease.parent / "result.json").exists():
                return True
        return False

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not later_seed_running():
        time.sleep(0.02)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert later_seed_running(), "the driver never reached the second seed"
    before = {int(p.parent.name): json.loads(p.read_text()) for p in out.glob("trials/*/result.json")}

    proc = _advisor(*args)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["resumed"] is True and data["verdict"]["decision"] == "fix confirmed"
    after = {t["number"]: t for t in data["trials"]}
    for number, result in before.items():  # finished trials are kept as they were
        assert after[number]["state"] == result["state"] and after[number]["steps"] == result["steps"]
    counted = [t for t in data["trials"] if t["state"] != "interrupted"]
    first = [t for t in counted if t["seed"] == 42 and t["values"][LR] != 1e-3]
    leader = max(first, key=lambda t: (t["steps"], t["objective"]))["values"][LR]
    # still staged after the resume: on the later seeds only the first seed's leader and the baseline, once each
    assert Counter((t["values"][LR], t["seed"]) for t in counted if t["seed"] != 42) == Counter(
        {(v, s): 1 for v in (leader, 1e-3) for s in (43, 44)})
    assert any(t["state"] == "interrupted" for t in data["trials"])
