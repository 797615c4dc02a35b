"""Sweeps end to end on the sandbox trainer, with local subprocess trials: the verdict, pruning, a crash,
resume after ``kill -9`` of the driver, TPE, and the CLI.

Every sweep here is tiny and seeded (64 prompts a step on 2 emulated ranks, 8-40 steps); a trial takes about
one second, most of it Python start-up.
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

from advisor.errors import SweepError

optuna = pytest.importorskip("optuna")

from sweeps import Constraint, Objective, Param, SweepSpec, run_sweep  # noqa: E402
from sweeps._liveness import pid_alive  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LR = "actor_rollout_ref.actor.optim.lr"
MICRO = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"
SCORE = "critic/score/mean"
SANDBOX = [sys.executable, "-m", "sweeps.sandbox"]
# lr 1e-3 (100x the healthy 1e-5) collapses this setup within a few steps: critic/score/mean 0.2 -> 0.02,
# while 1e-5 climbs to about 0.4 by step 10 on every seed
SMALL = [
    "data.train_batch_size=64",
    "actor_rollout_ref.actor.ppo_mini_batch_size=16",
    "data.max_response_length=32",
    "trainer.n_gpus_per_node=2",
    "+sandbox.train_size=1024",
    "trainer.val_before_train=false",
    "trainer.logger=[console]",
    "+sandbox.deterministic_timing=true",
]


# The sandbox at the pace of a real run: a pause after each logged step, so the driver reads a trial's steps while
# it runs (the sandbox alone writes a whole 24-step run faster than Ray streams its first log line).
SLOW_TRAINER = """
import sys, time
from sweeps.sandbox import loggers, main
slow_down = {slow_down!r}
if slow_down is not None:  # the last override of a key is the one Hydra applies
    key, value, after_step, slow_pause_s = slow_down
    given = [a.partition("=")[2] for a in sys.argv[1:] if a.partition("=")[0] == key]
    if not (given and float(given[-1]) == value):
        slow_down = None
log = loggers.Tracking.log
def slow_log(self, data, step):
    log(self, data, step)
    time.sleep({pause_s} if slow_down is None or step <= slow_down[2] else slow_down[3])
loggers.Tracking.log = slow_log
sys.argv = ["sweeps.sandbox", *sys.argv[1:]]
sys.exit(main())
"""


def _slow_sandbox(directory: Path, pause_s: float = 0.1,
                  slow_down: tuple[str, float, int, float] | None = None) -> list[str]:
    """The slow trainer. ``slow_down`` = (key, value, after_step, pause_s): a trial given that value pauses that
    long after each step past ``after_step``."""
    path = directory / "slow_trainer.py"
    path.write_text(SLOW_TRAINER.format(pause_s=pause_s, slow_down=slow_down))
    return [sys.executable, str(path)]


def _script(directory: Path, *extra: str) -> Path:
    path = directory / "run.sh"
    path.write_text("#!/usr/bin/env bash\nset -euo pipefail\npython3 -m verl.trainer.main_ppo \\\n    "
                    + " \\\n    ".join(shlex.quote(a) for a in [*SMALL, *extra]) + " \"$@\"\n")
    return path


def _counted(trials: list[Any]) -> list[Any]:
    return [t for t in trials if t.state != "interrupted"]


def test_sweep_finds_the_injected_lr_fault(tmp_path: Path) -> None:
    script = _script(tmp_path, f"{LR}=1e-3")
    spec = SweepSpec([Param.grid(LR, [1e-5])], Objective(SCORE), steps=10, seeds=3)
    result = run_sweep(script, spec, command=SANDBOX, out=tmp_path / "out", parallel=2)

    assert result.baseline == {LR: 1e-3}
    assert result.verdict.decision == "fix confirmed" and result.verdict.candidate == {LR: 1e-5}
    assert result.exit_code == 0
    points = Counter((t.values[LR], t.seed) for t in _counted(result.trials))
    assert points == Counter({(v, s): 1 for v in (1e-3, 1e-5) for s in (42, 43, 44)})
    best = result.verdict.best
    assert best is not None and best.ci is not None and best.ci[0] > 0.1
    # the trial contract: its own directory, the command as an argument list, logs and verl's metrics file
    trial = next(t for t in result.trials if t.state == "complete")
    trial_dir = Path(trial.dir or "")
    cmd = json.loads((trial_dir / "cmd.json").read_text())
    assert cmd["argv"][:3] == SANDBOX and cmd["argv"][-3] == "trainer.total_training_steps=10"
    assert f"actor_rollout_ref.actor.data_loader_seed={trial.seed}" in cmd["argv"]
    assert cmd["env"]["VERL_FILE_LOGGER_PATH"] == str(trial_dir / "metrics.jsonl")
    assert (trial_dir / "metrics.jsonl").read_text().count("\n") == 10
    assert "step:10 - " in (trial_dir / "stdout.log").read_text()
    assert Path(result.storage).name == "study.journal" and result.dashboard.startswith("optuna-dashboard ")


def test_pruning_stops_a_diverging_trial_early(tmp_path: Path) -> None:
    script = _script(tmp_path, f"{LR}=1e-5")
    spec = SweepSpec([Param.grid(LR, [1e-3])], Objective(SCORE), steps=16, seeds=3, warmup_steps=2)
    result = run_sweep(script, spec, command=_slow_sandbox(tmp_path, pause_s=0.05), out=tmp_path / "out")

    diverging = [t for t in result.trials if t.values[LR] == 1e-3]
    pruned = [t for t in diverging if t.state == "pruned"]
    assert len(pruned) >= 2, [(t.state, t.steps) for t in diverging]
    assert all(t.steps is not None and t.steps < 8 for t in pruned)
    assert all("pruned at step" in (t.reason or "") for t in pruned)
    # one trial at a time: on the later seeds 1e-3 runs first and is measured against the baseline's first-seed
    # curve (the baseline waits behind it there); then the race stops the baseline at the same step
    later = {(t.values[LR], t.seed): t for t in result.trials if t.seed != 42}
    assert {later[(1e-3, s)].state for s in (43, 44)} == {"pruned"}
    assert [later[(1e-5, s)].state for s in (43, 44)] == ["stopped", "stopped"]
    assert all(later[(1e-5, s)].steps == later[(1e-3, s)].steps for s in (43, 44))
    assert next(t.state for t in result.trials if t.values[LR] == 1e-5 and t.seed == 42) == "complete"
    assert result.verdict.decision == "keep baseline"
    # the pruned trial's process was stopped before it wrote all its steps
    lines = (Path(pruned[0].dir or "") / "metrics.jsonl").read_text().count("\n")
    assert lines < 16


def test_without_pruning_every_trial_runs_every_step(tmp_path: Path) -> None:
    script = _script(tmp_path, f"{LR}=1e-5")
    spec = SweepSpec([Param.grid(LR, [1e-3])], Objective(SCORE), steps=8, seeds=1, prune=False)
    result = run_sweep(script, spec, command=SANDBOX, out=tmp_path / "out", parallel=2)
    assert [(t.state, t.steps) for t in result.trials] == [("complete", 8), ("complete", 8)]
    assert result.trial_steps == 16
    assert result.verdict.decision == "insufficient evidence"  # one seed is never enough


FAKE_OOM = '''
import runpy, sys
if "{key}=64" in sys.argv:  # pretend this micro-batch does not fit in GPU memory
    print("step:1 - critic/score/mean:0.2", flush=True)
    sys.stderr.write("Traceback (most recent call last):\\n  File \\"dp_actor.py\\", line 400\\n"
                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total "
                     "capacity of 79.11 GiB of which 1.2 GiB is free.\\n")
    sys.exit(1)
sys.argv = ["sweeps.sandbox", *sys.argv[1:]]
runpy.run_module("sweeps.sandbox", run_name="__main__")
'''


def test_a_trial_that_runs_out_of_memory_fails_with_the_reason_and_the_study_goes_on(tmp_path: Path) -> None:
    (tmp_path / "trainer.py").write_text(FAKE_OOM.format(key=MICRO))
    script = _script(tmp_path, f"{LR}=1e-5", f"{MICRO}=8")
    spec = SweepSpec([Param.grid(MICRO, [64, 4])], Objective(SCORE), steps=6, seeds=1)
    result = run_sweep(script, spec, command=[sys.executable, str(tmp_path / "trainer.py")], out=tmp_path / "out",
                       parallel=2)

    by_value = {t.values[MICRO]: t for t in result.trials}
    assert by_value[64].state == "failed"
    assert by_value[64].reason == ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 "
                                   "has a total capacity of 79.11 GiB of which 1.2 GiB is free.")
    assert by_value[8].state == by_value[4].state == "complete"
    # the micro-batch never changes the update: the two runs that fit are identical
    assert by_value[8].objective == by_value[4].objective
    failed = next(c for c in result.verdict.comparisons if c.values == {MICRO: 64})
    assert failed.status == "failed" and "CUDA out of memory" in failed.reason


def test_a_typo_in_the_objective_fails_the_trial_with_a_did_you_mean(tmp_path: Path) -> None:
    script = _script(tmp_path, f"{LR}=1e-5")
    spec = SweepSpec([Param.grid(LR, [1e-4])], Objective("critic/scor/mean"), steps=3, seeds=1)
    result = run_sweep(script, spec, command=SANDBOX, out=tmp_path / "out", parallel=2)
    assert {t.state for t in result.trials} == {"failed"}
    assert (result.trials[0].reason or "").startswith(
        "objective metric 'critic/scor/mean' was never logged; did you mean 'critic/score/mean'")


def test_tpe_explores_a_range_then_confirms_the_best_value_on_the_other_seeds(tmp_path: Path) -> None:
    script = _script(tmp_path, f"{LR}=1e-3")
    spec = SweepSpec([Param.range(LR, 1e-6, 1e-4, log=True)], Objective(SCORE), steps=8, seeds=3, trials=3,
                     constraints=[Constraint("response_length/clip_ratio", "<", 0.5)])
    result = run_sweep(script, spec, command=SANDBOX, out=tmp_path / "out", parallel=2)

    roles = Counter((t.role, t.seed) for t in result.trials)
    assert roles == Counter({("baseline", 42): 1, ("explore", 42): 3, ("baseline", 43): 1, ("baseline", 44): 1,
                             ("confirm", 43): 1, ("confirm", 44): 1})
    explored = [t for t in result.trials if t.role == "explore"]
    assert all(1e-6 <= t.values[LR] <= 1e-4 for t in explored)
    candidate = result.verdict.candidate
    assert candidate is not None and result.verdict.decision == "fix confirmed"
    assert {t.values[LR] for t in result.trials if t.role == "confirm"} == {candidate[LR]}
    assert candidate[LR] in {t.values[LR] for t in explored}
    assert all(t.constraints["response_length/clip_ratio"] is not None for t in result.trials if t.state == "complete")


def test_tpe_one_trial_at_a_time_confirms_with_the_trailing_value_first(tmp_path: Path) -> None:
    # the collapsing baseline trails the first seed: on the others it runs first, is pruned against the
    # candidate's first-seed curve (the candidate waits behind it), and the race stops the candidate there
    script = _script(tmp_path, f"{LR}=1e-3")
    spec = SweepSpec([Param.range(LR, 3e-6, 3e-5, log=True)], Objective(SCORE), steps=12, seeds=3, trials=2)
    result = run_sweep(script, spec, command=SANDBOX, out=tmp_path / "out", parallel=1)

    assert result.verdict.decision == "fix confirmed"
    for seed in (43, 44):
        baseline, confirm = (next(t for t in result.trials if t.seed == seed and t.role == role)
                             for role in ("baseline", "confirm"))
        assert baseline.number < confirm.number
        assert (baseline.state, confirm.state) == ("pruned", "stopped")
        assert confirm.steps == max(baseline.steps or 0, spec.warmup) < 12


def test_a_command_given_as_a_relative_path_runs_from_where_the_sweep_started(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # each trial runs in its own directory: './train.sh' must still name the file beside the user's shell
    trainer = tmp_path / "train.sh"
    trainer.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m sweeps.sandbox \"$@\"\n")
    trainer.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    spec = SweepSpec([Param.grid(LR, [1e-4])], Objective(SCORE), steps=2, seeds=1)
    result = run_sweep(_script(tmp_path, f"{LR}=1e-5"), spec, command="./train.sh", out=tmp_path / "out")
    assert {t.state for t in result.trials} == {"complete"}
    assert result.to_dict()["command"][0] == str(trainer)


def test_a_study_of_the_same_name_for_a_different_sweep_is_refused(tmp_path: Path) -> None:
    script = _script(tmp_path, f"{LR}=1e-5")
    spec = SweepSpec([Param.grid(LR, [1e-4])], Objective(SCORE), steps=2, seeds=1)
    run_sweep(script, spec, command=SANDBOX, out=tmp_path / "out", study_name="s")
    again = run_sweep(script, spec, command=SANDBOX, out=tmp_path / "out", study_name="s")
    assert again.resumed and len(again.trials) == 2  # nothing was rerun
    other = SweepSpec([Param.grid(LR, [1e-4])], Objective(SCORE), steps=3, seeds=1)
    with pytest.raises(SweepError, match="created for a different sweep"):
        run_sweep(script, other, command=SANDBOX, out=tmp_path / "out", study_name="s")


@pytest.mark.parametrize(
    ("param", "message"),
    [
        pytest.param(Param.grid("actor_rollout_ref.actor.optim.lrr", [1e-5]),
                     "did you mean 'actor_rollout_ref.actor.optim.lr'", id="unknown-key"),
        pytest.param(Param.grid(LR, ["fast"]), "verl expects a number", id="bad-type"),
        pytest.param(Param.grid("actor_rollout_ref.actor.checkpoint.save_contents", [1]), "only numbers, strings",
                     id="list-key"),
    ],
)
def test_bad_params_fail_before_any_trial(tmp_path: Path, param: Param, message: str) -> None:
    spec = SweepSpec([param], Objective(SCORE), steps=2, seeds=1)
    with pytest.raises(SweepError, match=message):
        run_sweep(_script(tmp_path), spec, command=SANDBOX, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_misspelt_seed_key_is_refused(tmp_path: Path) -> None:
    spec = SweepSpec([Param.grid(LR, [1e-4])], Objective(SCORE), steps=2, seeds=2, seed_keys=["data.sed"])
    with pytest.raises(SweepError, match=r"--seed-key data.sed: key 'data.sed' is not in verl .*'data.seed'"):
        run_sweep(_script(tmp_path), spec, command=SANDBOX, out=tmp_path / "out")


def test_a_pinned_sandbox_seed_is_swept_first_so_every_seed_is_another_run(tmp_path: Path) -> None:
    # the sandbox's sandbox.seed wins over data_loader_seed: sweeping only verl's keys would run one seed three
    # times (and make the paired interval a single point)
    script = _script(tmp_path, f"{LR}=1e-3", "+sandbox.seed=7")
    spec = SweepSpec([Param.grid(LR, [1e-5])], Objective(SCORE), steps=3, seeds=2, prune=False)
    result = run_sweep(script, spec, command=SANDBOX, out=tmp_path / "out", parallel=2)
    assert result.spec["seeds"] == [7, 8]  # seed 0 is the config's own run
    assert result.spec["seed_keys"][0] == "sandbox.seed"
    base = {t.seed: t for t in result.trials if t.values[LR] == 1e-3}
    argv = json.loads((Path(base[8].dir or "") / "cmd.json").read_text())["argv"]
    assert "++sandbox.seed=8" in argv and "actor_rollout_ref.actor.data_loader_seed=8" in argv
    assert base[7].curve != base[8].curve


def test_a_command_that_cannot_start_is_a_setup_error(tmp_path: Path) -> None:
    spec = SweepSpec([Param.grid(LR, [1e-4])], Objective(SCORE), steps=2, seeds=1)
    with pytest.raises(SweepError, match="cannot start the trial command '/nonexistent/trainer'"):
        run_sweep(_script(tmp_path), spec, command="/nonexistent/trainer --flag", out=tmp_path / "out")


def test_a_yaml_config_needs_a_command(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("actor_rollout_ref:\n  actor:\n    optim:\n      lr: 1.0e-3\n")
    spec = SweepSpec([Param.grid(LR, [1e-5])], Objective(SCORE), steps=2, seeds=1)
    with pytest.raises(SweepError, match="pass --command"):
        run_sweep(tmp_path / "c.yaml", spec, out=tmp_path / "out")


# ---------------------------------------------------------------------------------------------------------------
# the CLI


def _advisor(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_cli_json_for_a_yaml_config_with_a_command(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "data:\n  train_batch_size: 64\n  max_response_length: 32\n"
        "actor_rollout_ref:\n  actor:\n    ppo_mini_batch_size: 16\n    optim:\n      lr: 1.0e-3\n"
        "trainer:\n  n_gpus_per_node: 2\n  val_before_train: false\n  logger: [console]\n")
    proc = _advisor("sweep", str(tmp_path / "c.yaml"), "+sandbox.train_size=1024", "--param", LR, "--values",
                    "1e-5", "--steps", "6", "--objective", f"{SCORE}:max", "--seeds", "3", "--parallel", "2",
                    "--command", f"{shlex.quote(sys.executable)} -m sweeps.sandbox", "--out", str(tmp_path / "out"),
                    "-f", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["verdict"]["decision"] == "fix confirmed"
    assert data["mode"] == "grid" and data["seeds"] == [42, 43, 44] and data["baseline"] == {LR: 1e-3}
    assert len(data["trials"]) == 6 and {"state", "seed", "objective", "steps", "values"} <= set(data["trials"][0])
    assert data["dashboard"].startswith("optuna-dashboard ")
    assert data["trial_steps"] == sum(t["steps"] for t in data["trials"]) <= 36
    cmd = json.loads((Path(data["trials"][0]["dir"]) / "cmd.json").read_text())
    # the YAML's settings, then the extra overrides, then the trial's own
    assert cmd["argv"].index("data.train_batch_size=64") < cmd["argv"].index("+sandbox.train_size=1024") < \
        cmd["argv"].index(f"{LR}=1e-05" if data["trials"][0]["values"][LR] == 1e-5 else f"{LR}=0.001")
    # no progress bar when stderr is not a terminal: the plan (stdout holds the JSON alone) and a line per trial
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("sweep plan: ") and all(x.startswith("trial #") for x in lines[1:]), lines


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--param", "actor_rollout_ref.actor.optim.lrr", "--values", "1e-5"], "did you mean",
                     id="unknown-key"),
        pytest.param(["--values", "1e-5", "--param", LR], "comes before any --param", id="values-first"),
        pytest.param(["--param", LR], "needs --values", id="no-values"),
        pytest.param(["--param", LR, "--range", "1e-4:1e-6"], "LOW must be below HIGH", id="bad-range"),
        pytest.param(["--param", LR, "--range", "1e-6:1e-4", "--every-seed"], "--every-seed applies to a grid",
                     id="every-seed-tpe"),
        pytest.param(["--param", LR, "--values", "1e-5", "--constraint", "kl"], "is not METRIC<X", id="constraint"),
    ],
)
def test_cli_setup_errors_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    proc = _advisor("sweep", str(_script(tmp_path)), *args, "--steps", "2", "--objective", SCORE,
                    "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("advisor: ") and message in lines[0], proc.stderr
    assert proc.stdout == ""


def test_resume_after_kill_9_of_the_driver_loses_no_finished_trial(tmp_path: Path) -> None:
    out = tmp_path / "out"
    trainer = shlex.join(_slow_sandbox(tmp_path, pause_s=0.03))
    args = ["sweep", str(_script(tmp_path, f"{LR}=1e-5")), "--param", LR, "--values", "1e-4,3e-5", "--steps", "40",
            "--objective", SCORE, "--seeds", "2", "--parallel", "2", "--no-prune", "--out", str(out),
            "--command", trainer, "-f", "json"]
    driver = subprocess.Popen([sys.executable, "-m", "advisor", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    running: list[tuple[int, int | None]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # one trial finished, another a few of its 40 steps in (~0.6 s left)
        finished = list(out.glob("trials/*/result.json"))
        busy = [p.parent for p in out.glob("trials/*/lease.json") if not (p.parent / "result.json").exists()
                and (p.parent / "metrics.jsonl").exists()
                and 3 < (p.parent / "metrics.jsonl").read_text().count("\n") < 20]
        if finished and busy:
            handles = [json.loads((d / "lease.json").read_text())["handle"] for d in busy]
            running = [(h["pid"], h["start_ticks"]) for h in handles]
            break
        time.sleep(0.02)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert running, "the driver never had a finished and a running trial at once"
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(out / "study.journal")))
    (name,) = optuna.study.get_all_study_names(storage)
    study = optuna.load_study(study_name=name, storage=storage)
    before = {t.number: (t.state.name, t.params, t.value) for t in study.trials if t.state.is_finished()}
    assert before and any(t.state.name == "RUNNING" for t in study.trials)
    assert any(pid_alive(pid, ticks) for pid, ticks in running)  # orphans: they outlive their driver

    proc = _advisor(*args)
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)
    assert data["resumed"] is True
    after = {t["number"]: t for t in data["trials"]}
    for number, (state, params, value) in before.items():  # finished trials are kept as they were
        assert after[number]["state"] == state.lower() and after[number]["values"] == params
        assert after[number]["objective"] == pytest.approx(value)
    counted = [t for t in data["trials"] if t["state"] != "interrupted"]
    assert Counter((t["values"][LR], t["seed"]) for t in counted) == Counter(
        {(v, s): 1 for v in (1e-5, 1e-4, 3e-5) for s in (42, 43)})
    assert all(t["state"] == "complete" for t in counted)
    interrupted = [t for t in data["trials"] if t["state"] == "interrupted"]
    assert interrupted and all("re-queued" in t["reason"] for t in interrupted)
    assert not any(pid_alive(pid, ticks) for pid, ticks in running)  # the orphaned processes were stopped


def test_sigterm_stops_the_running_trials_and_queues_them_again(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["sweep", str(_script(tmp_path, f"{LR}=1e-5")), "--param", LR, "--values", "1e-4", "--steps", "40",
            "--objective", SCORE, "--seeds", "1", "--parallel", "2", "--out", str(out),
            "--command", shlex.join(_slow_sandbox(tmp_path, pause_s=0.3))]  # 12 s a trial: still running at SIGTERM
    driver = subprocess.Popen([sys.executable, "-m", "advisor", *args], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 180  # start-up (optuna, the config, two trials) is slow on a loaded machine
    while time.monotonic() < deadline and len([p for p in out.glob("trials/*/metrics.jsonl")
                                               if p.read_text().count("\n") >= 2]) < 2:
        time.sleep(0.02)
    handles = [json.loads(p.read_text())["handle"] for p in out.glob("trials/*/lease.json")]
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=120)
    assert driver.returncode == 130, err
    *trials, last = err.strip().splitlines()  # each trial's start, flushed as it happened, then the interruption
    assert last == ("advisor: sweep interrupted; its running trials were stopped and re-queued; "
                    "rerun the same command to resume")
    assert all(x.startswith("trial #") for x in trials), trials
    assert len(handles) == 2 and not any(pid_alive(h["pid"], h["start_ticks"]) for h in handles)
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(out / "study.journal")))
    (name,) = optuna.study.get_all_study_names(storage)
    trials = optuna.load_study(study_name=name, storage=storage).trials
    assert sorted(t.state.name for t in trials) == ["FAIL", "FAIL", "WAITING", "WAITING"]
    assert all(t.user_attrs.get("interrupted") for t in trials if t.state.name == "FAIL")
