"""The race: once every other value on a seed was pruned, the trial left there is stopped (state ``stopped``), and
the verdict stays the one the sweep reaches without the race."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from test_sweep_runner import LR, REPO, SANDBOX, SCORE, _advisor, _script, _slow_sandbox  # noqa: E402

from sweeps import Objective, Param, SweepSpec, TrialRecord, decide, run_sweep  # noqa: E402
from sweeps._liveness import pid_alive  # noqa: E402
from sweeps._race import SeedTrial, won_seed  # noqa: E402

A, B, C = {"lr": 1e-3}, {"lr": 1e-5}, {"lr": 3e-5}
PLANNED = [A, B, C]


@pytest.mark.parametrize(
    ("others", "step", "won"),
    [
        pytest.param([SeedTrial(A, "pruned", 3), SeedTrial(C, "failed", 1)], 5, True, id="all-others-out:won"),
        pytest.param([SeedTrial(A, "pruned", 3), SeedTrial(C, "pruned", 7)], 5, False, id="behind-their-steps"),
        pytest.param([SeedTrial(A, "pruned", 3), SeedTrial(C, "running", 5)], 5, False, id="another-still-runs"),
        pytest.param([SeedTrial(A, "pruned", 3), SeedTrial(C, "complete", 30)], 30, False, id="another-ran-to-the-end"),
        pytest.param([SeedTrial(A, "pruned", 3), SeedTrial(C, "waiting", None)], 5, False, id="another-re-queued"),
        pytest.param([SeedTrial(A, "pruned", 3)], 5, False, id="another-not-started"),
        pytest.param([SeedTrial(A, "pruned", 1), SeedTrial(C, "pruned", 1)], 2, False, id="inside-the-warm-up"),
    ],
)
def test_a_trial_wins_its_seed_only_when_every_other_value_there_is_out(others: list[SeedTrial], step: int,
                                                                        won: bool) -> None:
    why = won_seed(B, 43, step, others, PLANNED, warmup_steps=3)
    assert (why is not None) == won
    if won:
        assert why == "it outran every other value on seed 43 (pruned or failed by step 3)"


def test_no_race_where_the_values_of_a_seed_are_not_known() -> None:
    assert won_seed(B, 42, 5, [SeedTrial(A, "pruned", 3), SeedTrial(C, "pruned", 3)], None, 3) is None


def _record(n: int, lr: float, seed: int, state: str, steps: int, score: float) -> TrialRecord:
    curve = {s: score * s / steps for s in range(1, steps + 1)}
    return TrialRecord(n, {"lr": lr}, seed, "baseline" if lr == 1e-3 else "candidate", state, curve[steps], steps,
                       feasible=True, curve=curve)


def test_a_stopped_trial_counts_its_planned_steps_when_candidates_are_ranked() -> None:
    # 1e-5 won seeds 43 and 44 at step 4 (stopped) and ran all 10 steps on seed 42; 3e-5 was pruned at step 7
    # on every seed: it ran more steps (21 against 18) but led no seed
    trials = [_record(0, 1e-3, 42, "pruned", 3, 0.01), _record(1, 1e-5, 42, "complete", 10, 0.9),
              _record(2, 3e-5, 42, "pruned", 7, 0.9)]
    for i, seed in enumerate((43, 44)):
        trials += [_record(3 + 3 * i, 1e-3, seed, "pruned", 3, 0.01), _record(4 + 3 * i, 1e-5, seed, "stopped", 4, 0.9),
                   _record(5 + 3 * i, 3e-5, seed, "pruned", 7, 0.9)]
    v = decide(trials, {"lr": 1e-3}, Objective("score"), steps=10)
    assert {c.status for c in v.comparisons} == {"better"}
    assert v.candidate == {"lr": 1e-5}
    best = v.best
    assert best is not None and best.steps == 18  # the steps it ran, in the JSON
    assert [p.step for p in best.pairs] == [3, 3, 3]  # stopped or complete, each pair at the baseline's last step
    assert decide(trials, {"lr": 1e-3}, Objective("score")).candidate == {"lr": 3e-5}  # by the steps run alone


def test_a_clear_cut_fault_stops_early_with_the_same_verdict_and_resumes_without_rerunning(tmp_path: Path) -> None:
    # every trial at once (a cluster with a slot for each): on each seed the baseline collapses and is pruned
    # while 1e-5 runs; on the first seed 1e-5 still runs all its steps, on the others the race stops it
    script = _script(tmp_path, f"{LR}=1e-3")
    trainer = _slow_sandbox(tmp_path, pause_s=0.05, slow_down=(LR, 1e-5, 6, 0.15))  # the race needs the fix running
    spec = SweepSpec([Param.grid(LR, [1e-5])], Objective(SCORE), steps=16, seeds=3)
    result = run_sweep(script, spec, command=trainer, out=tmp_path / "race", parallel=6)

    proc = _advisor("sweep", str(script), "--param", LR, "--values", "1e-5", "--steps", "16", "--objective", SCORE,
                    "--parallel", "6", "--no-race", "--out", str(tmp_path / "no-race"), "--command",
                    shlex.join(trainer), "-f", "json")
    assert proc.returncode == 0, proc.stderr
    no_race = json.loads(proc.stdout)
    assert no_race["race"] is False and no_race["verdict"]["race"]["enabled"] is False
    assert "stopped" not in {t["state"] for t in no_race["trials"]}

    # the same verdict, fewer steps
    assert result.verdict.decision == no_race["verdict"]["decision"] == "fix confirmed"
    assert result.verdict.candidate == no_race["verdict"]["candidate"] == {LR: 1e-5}
    assert result.trial_steps < no_race["trial_steps"]
    assert {t.state for t in result.trials if t.values[LR] == 1e-3} == {"pruned"}
    fix = {t.seed: t for t in result.trials if t.values[LR] == 1e-5}
    assert fix[42].state == "complete" and fix[42].steps == 16
    stopped = [fix[43], fix[44]]
    assert all(t.state == "stopped" and (t.steps or 99) < 16 for t in stopped), [(t.state, t.steps) for t in stopped]
    assert all((t.reason or "").startswith(f"stopped at step {t.steps} by the race: it outran every other value on "
                                           f"seed {t.seed}") for t in stopped)
    for t in stopped:  # its process was stopped, before it wrote all its steps
        handle = json.loads((Path(t.dir or "") / "lease.json").read_text())["handle"]
        assert not pid_alive(handle["pid"], handle["start_ticks"])
        assert (Path(t.dir or "") / "metrics.jsonl").read_text().count("\n") < 16
        assert json.loads((Path(t.dir or "") / "result.json").read_text())["state"] == "stopped"
    race = result.to_dict()["verdict"]["race"]
    assert race["enabled"] is True
    assert [(s["seed"], s["step"]) for s in race["stopped"]] == [(t.seed, t.steps) for t in stopped]
    assert race["steps_not_run"] == sum(16 - (t.steps or 0) for t in stopped)
    assert race["summary"].startswith("the race stopped 2 trial(s) early (seed 43 at step")

    again = run_sweep(script, spec, command=trainer, out=tmp_path / "race", parallel=6)
    assert again.resumed
    assert [(t.number, t.state, t.steps) for t in again.trials] == [(t.number, t.state, t.steps) for t in result.trials]
    assert again.verdict.to_dict() == result.verdict.to_dict()


def test_one_trial_at_a_time_the_race_stops_the_fix_where_the_baseline_was_pruned(tmp_path: Path) -> None:
    # --parallel 1: on a later seed the collapsing baseline runs first, measured against the fix's first-seed curve
    # (the fix waits behind it); once it is pruned the fix runs only as far, instead of all its steps
    script = _script(tmp_path, f"{LR}=1e-3")
    spec = SweepSpec([Param.grid(LR, [1e-5])], Objective(SCORE), steps=16, seeds=3)
    result = run_sweep(script, spec, command=SANDBOX, out=tmp_path / "out", parallel=1)

    assert result.verdict.decision == "fix confirmed" and result.verdict.candidate == {LR: 1e-5}
    trials = {(t.values[LR], t.seed): t for t in result.trials}
    assert trials[(1e-5, 42)].state == "complete" and trials[(1e-5, 42)].steps == 16
    for seed in (43, 44):
        baseline, fix = trials[(1e-3, seed)], trials[(1e-5, seed)]
        assert baseline.number < fix.number  # the baseline, behind on the first seed, ran first
        assert baseline.state == "pruned" and fix.state == "stopped"
        assert fix.steps == max(baseline.steps or 0, spec.warmup) < 16


def _running_baseline_with_its_fix_waiting(out: Path, seed: int) -> bool:
    """The sweep's storage shows ``seed``'s baseline running (a few steps in) with the fix queued behind it."""
    journal = out / "study.journal"
    if not journal.exists():
        return False
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    names = optuna.study.get_all_study_names(storage)
    if not names:
        return False
    trials = optuna.load_study(study_name=names[0], storage=storage).trials
    on_seed = [t for t in trials if t.user_attrs.get("seed") == seed and not t.user_attrs.get("interrupted")]
    running = [t for t in on_seed if t.state.name == "RUNNING" and t.user_attrs.get("role") == "baseline"]
    waiting = [t for t in on_seed if t.state.name == "WAITING"]
    if not (running and waiting and "dir" in running[0].user_attrs):
        return False
    metrics = Path(running[0].user_attrs["dir"]) / "metrics.jsonl"
    return metrics.exists() and metrics.read_text().count("\n") >= 2


def test_a_resumed_sweep_keeps_the_pair_order_so_the_race_still_stops_the_fix(tmp_path: Path) -> None:
    # --parallel 1, stopped while seed 43's baseline runs and the fix waits behind it. Optuna hands out waiting
    # trials by number, so the re-queued baseline would run after the fix: the fix would run all 16 steps (nothing
    # pruned on its seed yet) and the race could not act. Resumed, the baseline runs first again.
    out = tmp_path / "out"
    args = ["sweep", str(_script(tmp_path, f"{LR}=1e-3")), "--param", LR, "--values", "1e-5", "--steps", "16",
            "--objective", SCORE, "--seeds", "3", "--parallel", "1", "--out", str(out),
            "--command", shlex.join(_slow_sandbox(tmp_path, pause_s=0.05)), "-f", "json"]
    err = tmp_path / "driver.stderr"  # read back if the driver ends on its own: its last lines say why
    with err.open("w") as err_file:
        driver = subprocess.Popen([sys.executable, "-m", "advisor", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                                  stderr=err_file, env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and driver.poll() is None and \
            not _running_baseline_with_its_fix_waiting(out, 43):
        time.sleep(0.05)
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=60) == 130, ("the sweep ended before seed 43's pair was under way: "
                                            + " | ".join(err.read_text().splitlines()[-3:]))

    proc = _advisor(*args)
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)
    assert data["resumed"] is True
    counted = {(t["values"][LR], t["seed"]): t for t in data["trials"] if t["state"] != "interrupted"}
    assert len(counted) == 6
    warmup = data["warmup_steps"]
    for seed in (43, 44):
        baseline, fix = counted[(1e-3, seed)], counted[(1e-5, seed)]
        assert baseline["number"] < fix["number"]  # the baseline, behind on the first seed, ran first
        assert baseline["state"] == "pruned" and fix["state"] == "stopped"
        assert fix["steps"] == max(baseline["steps"], warmup) < 16
    # the race's arithmetic: the first seed's pair, then on each later seed the baseline to where it was pruned
    # and the fix as far (at least the warm-up); an interrupted trial's steps are counted where it ran
    expected = counted[(1e-5, 42)]["steps"] + counted[(1e-3, 42)]["steps"] + sum(
        counted[(1e-3, s)]["steps"] + max(counted[(1e-3, s)]["steps"], warmup) for s in (43, 44))
    assert sum(t["steps"] for t in counted.values()) == expected
    assert counted[(1e-5, 42)]["steps"] == 16
    interrupted = [t for t in data["trials"] if t["state"] == "interrupted"]
    assert interrupted and all("re-queued" in t["reason"] for t in interrupted)


# 256 prompts a step (less noise than the small setup): 1e-5 and 3e-5 both leave the collapsing 1e-3 behind at
# once; 3e-5 leads 1e-5 for the first dozen steps, never by the pruner's pace
LARGER = ["data.train_batch_size=256", "actor_rollout_ref.actor.ppo_mini_batch_size=64", "data.max_response_length=32",
          "trainer.val_before_train=false", "trainer.logger=[console]", "+sandbox.deterministic_timing=true"]


def test_a_close_race_is_not_stopped_even_when_the_decision_is_clear(tmp_path: Path) -> None:
    # every value on every seed (a staged grid runs only the first seed's leader on the others)
    (tmp_path / "run.sh").write_text(f"python3 -m verl.trainer.main_ppo {' '.join(LARGER)} {LR}=1e-3\n")
    spec = SweepSpec([Param.grid(LR, [1e-5, 3e-5])], Objective(SCORE), steps=12, seeds=3, every_seed=True)
    result = run_sweep(tmp_path / "run.sh", spec, command=_slow_sandbox(tmp_path, pause_s=0.05),
                       out=tmp_path / "out", parallel=9)
    assert {t.state for t in result.trials if t.values[LR] == 1e-3} == {"pruned"}
    assert {t.state for t in result.trials if t.values[LR] != 1e-3} == {"complete"}
    assert result.verdict.decision == "fix confirmed"
    assert result.verdict.race == {"enabled": True, "summary": "the race stopped no trial", "steps_not_run": 0,
                                   "stopped": []}


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
