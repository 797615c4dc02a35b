"""Trainers that misbehave the ways a real one does: a value that goes NaN late, a hang, a folder removed, a
metrics file truncated and rewritten, a FIFO for a metrics file, a ``setsid`` grandchild.

The trainer here is a few lines of Python, not verl: it writes verl's ``file``-logger lines (``{"step": N,
"data": {...}}``, NaN as ``null`` as verl's logger writes it) to ``$VERL_FILE_LOGGER_PATH``, one step every
20 ms, and misbehaves for the lr values named in ``MODES``. Every sweep takes a few seconds.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from sweeps import Objective, Param, SweepSpec, run_sweep  # noqa: E402
from sweeps._launchers import LocalLauncher  # noqa: E402
from sweeps._liveness import pid_alive  # noqa: E402
from sweeps._tail import MetricsTail  # noqa: E402

LR = "actor_rollout_ref.actor.optim.lr"
SCORE = "critic/score/mean"
LOSS = "actor/pg_loss"
SMALL = ["data.train_batch_size=64", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
         "data.max_response_length=32", "trainer.n_gpus_per_node=2", "trainer.val_before_train=false"]

# score: 0.2 + 0.01 * step for the baseline (lr 1e-3), 0.5 + 0.01 * step for lr 1e-5 (better on every seed
# and step, by 0.3); a seed shifts both by the same 0.001 * seed
TRAINER = """
import json, os, shutil, subprocess, sys, time
MODES = {modes!r}
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
lr = float(args["{lr}"])
steps = int(args["trainer.total_training_steps"])
seed = int(next((v for k, v in args.items() if k.endswith("seed")), 0))
mode = MODES.get(repr(lr), "healthy")
path = os.environ["VERL_FILE_LOGGER_PATH"]
base = 0.5 if lr < 1e-4 else 0.2
if mode == "setsid":  # a grandchild in its own session, as `ray start` leaves one
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    open("grandchild.pid", "w").write(str(child.pid))
if mode == "fifo":
    os.mkfifo(path)
    time.sleep(300)
fp = open(path, "w")
for step in range(1, steps + 1):
    score = base + 0.01 * step + 0.001 * seed
    data = {{"{score}": score, "{loss}": 0.1}}
    if mode == "nan_late" and step >= 4:
        data = {{"{score}": None, "{loss}": None}}  # verl's file logger writes NaN and inf as null
    fp.write(json.dumps({{"step": step, "data": data}}) + "\\n")
    fp.flush()
    if mode == "stall" and step == 2:
        time.sleep(300)  # a hung collective (NCCL) looks like this from outside
    if mode == "sigstop" and step == 2:
        os.kill(os.getpid(), 19)  # SIGSTOP
    if mode == "rmdir" and step == 2:
        shutil.rmtree(os.getcwd())
        time.sleep(300)
    if mode == "restart" and step == 5:  # truncated and written again from step 1, faster than a poll
        fp.close()
        fp = open(path, "w")
        for again in range(1, 6):
            fp.write(json.dumps({{"step": again, "data": {{"{score}": base + 0.01 * again + 0.001 * seed}}}}) + "\\n")
        fp.flush()
    time.sleep(0.02)
"""


def _trainer(directory: Path, **modes: str) -> list[str]:
    """The trainer, misbehaving with mode ``modes[lr]`` (keys: "1e-05", "0.001")."""
    path = directory / "trainer.py"
    path.write_text(TRAINER.format(modes={repr(float(k)): v for k, v in modes.items()}, lr=LR, score=SCORE,
                                   loss=LOSS))
    return [sys.executable, str(path)]


def _script(directory: Path, lr: str) -> Path:
    path = directory / "run.sh"
    path.write_text("#!/usr/bin/env bash\npython3 -m verl.trainer.main_ppo \\\n    "
                    + " \\\n    ".join(shlex.quote(a) for a in [*SMALL, f"{LR}={lr}"]) + ' "$@"\n')
    return path


def _sweep(tmp_path: Path, command: list[str], *, seeds: int = 3, steps: int = 10, **run: object):
    spec = SweepSpec([Param.grid(LR, [1e-5])], Objective(SCORE), steps=steps, seeds=seeds, prune=False)
    return run_sweep(_script(tmp_path, "1e-3"), spec, command=command, out=tmp_path / "out", parallel=2,
                     poll_s=0.05, launcher=LocalLauncher(stop_grace_s=1.0), **run)


def test_the_healthy_trainer_confirms_the_fix(tmp_path: Path) -> None:
    result = _sweep(tmp_path, _trainer(tmp_path))
    assert result.verdict.decision == "fix confirmed" and result.verdict.candidate == {LR: 1e-5}


def test_a_candidate_that_goes_nan_late_is_diverged_and_never_confirmed(tmp_path: Path) -> None:
    # from step 4 of 10 its score and loss are null; its finite steps (0.5 + ...) beat the baseline's by 0.3
    result = _sweep(tmp_path, _trainer(tmp_path, **{"1e-5": "nan_late"}))

    candidate = [t for t in result.trials if t.values[LR] == 1e-5 and t.state != "interrupted"]
    assert len(candidate) == 3 and {t.state for t in candidate} == {"diverged"}
    for t in candidate:
        assert t.diverged == {"step": 4, "metric": SCORE, "value": "null"} or \
            t.diverged == {"step": 4, "metric": LOSS, "value": "null"}
        assert t.objective is None and t.reason is not None and "diverged at step 4" in t.reason
    assert result.verdict.decision != "fix confirmed" and result.exit_code == 1
    assert "diverged" in result.verdict.reason and "became null" in result.verdict.reason
    baseline = [t for t in result.trials if t.values[LR] == 1e-3]
    assert {t.state for t in baseline} == {"complete"}
    assert json.loads((Path(candidate[0].dir or "") / "result.json").read_text())["state"] == "diverged"


def test_a_diverged_trial_does_not_set_the_pruners_pace(tmp_path: Path) -> None:
    # with pruning on, the healthy baseline must not be pruned against the diverged trial's frozen finite values
    spec = SweepSpec([Param.grid(LR, [1e-5])], Objective(SCORE), steps=10, seeds=1, prune=True, warmup_steps=2)
    result = run_sweep(_script(tmp_path, "1e-3"), spec, command=_trainer(tmp_path, **{"1e-5": "nan_late"}),
                       out=tmp_path / "out", poll_s=0.05)
    states = {t.values[LR]: t.state for t in result.trials}
    assert states == {1e-5: "diverged", 1e-3: "complete"}


@pytest.mark.parametrize("mode", ["stall", "sigstop"])
def test_a_stalled_trial_is_failed_within_its_timeout_and_the_sweep_goes_on(mode: str, tmp_path: Path) -> None:
    started = time.monotonic()
    result = _sweep(tmp_path, _trainer(tmp_path, **{"1e-5": mode}), seeds=1, stall_timeout_s=1.5)
    elapsed = time.monotonic() - started

    stalled = next(t for t in result.trials if t.values[LR] == 1e-5)
    assert stalled.state == "failed" and "stalled: no new metrics line for 1.5 s (after step 2)" in (stalled.reason
                                                                                                   or "")
    assert next(t for t in result.trials if t.values[LR] == 1e-3).state == "complete"
    assert elapsed < 60  # the trainer sleeps 300 s: it was stopped, not waited for


def test_a_trial_that_removes_its_folder_is_failed_not_fatal(tmp_path: Path) -> None:
    result = _sweep(tmp_path, _trainer(tmp_path, **{"1e-5": "rmdir"}), seeds=1)
    gone = next(t for t in result.trials if t.values[LR] == 1e-5)
    assert gone.state == "failed" and "removed its own folder" in (gone.reason or "")
    assert next(t for t in result.trials if t.values[LR] == 1e-3).state == "complete"


def test_a_fifo_for_a_metrics_file_fails_the_trial_without_blocking(tmp_path: Path) -> None:
    result = _sweep(tmp_path, _trainer(tmp_path, **{"1e-5": "fifo"}), seeds=1)
    fifo = next(t for t in result.trials if t.values[LR] == 1e-5)
    assert fifo.state == "failed" and "FIFO" in (fifo.reason or "")


def test_a_metrics_file_truncated_and_rewritten_between_polls_is_read_again(tmp_path: Path) -> None:
    result = _sweep(tmp_path, _trainer(tmp_path, **{"1e-5": "restart"}), seeds=1)
    restarted = next(t for t in result.trials if t.values[LR] == 1e-5)
    assert restarted.state == "complete" and restarted.steps == 10
    # the objective is the mean of the last 20% (2) of the steps of the run as it ended: 9 and 10
    seed = 42
    expected = sum(0.5 + 0.01 * s + 0.001 * seed for s in (9, 10)) / 2
    assert restarted.objective == pytest.approx(expected)


def test_a_setsid_grandchild_does_not_outlive_its_trial(tmp_path: Path) -> None:
    result = _sweep(tmp_path, _trainer(tmp_path, **{"1e-5": "setsid"}), seeds=1)
    trial = next(t for t in result.trials if t.values[LR] == 1e-5)
    pid = int((Path(trial.dir or "") / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while pid_alive(pid, None) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = pid_alive(pid, None)
    if alive:  # do not leave it behind when the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert not alive


@pytest.mark.parametrize(("line", "how"), [
    ('{"step": 3, "data": {"critic/score/mean": null}}', "null"),
    ('{"step": 3, "data": {"critic/score/mean": NaN}}', "NaN"),
    ('{"step": 3, "data": {"actor/pg_loss": Infinity}}', "inf"),
    ('{"step": 3, "data": {"val-core/gsm8k/reward/mean@1": -Infinity}}', "-inf"),
])
def test_the_tail_names_the_value_that_diverged(tmp_path: Path, line: str, how: str) -> None:
    path = tmp_path / "m.jsonl"
    finite = {"critic/score/mean": 0.5, "actor/pg_loss": 0.1, "val-core/gsm8k/reward/mean@1": 0.3}
    path.write_text("".join(json.dumps({"step": s, "data": finite}) + "\n" for s in (1, 2)) + line + "\n")
    tail = MetricsTail(path, "jsonl", [SCORE])
    tail.poll()
    assert tail.diverged is not None and (tail.diverged.step, tail.diverged.value) == (3, how)
    assert tail.diverged.metric in line


def test_a_value_never_finite_or_not_judged_is_no_divergence(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    rows = [{"critic/score/mean": None, "timing_s/gen": 1.0}, {"critic/score/mean": None, "timing_s/gen": None},
            {"critic/score/mean": "n/a"}]
    path.write_text("".join(json.dumps({"step": s, "data": d}) + "\n" for s, d in enumerate(rows, 1)))
    tail = MetricsTail(path, "jsonl", [SCORE])
    tail.poll()
    assert tail.diverged is None


def test_console_nan_after_finite_is_a_divergence(tmp_path: Path) -> None:
    path = tmp_path / "stdout.log"
    path.write_text("step:1 - critic/score/mean:np.float64(0.4)\n(TaskRunner pid=1) step:2 - critic/score/mean:nan\n")
    tail = MetricsTail(path, "console", [SCORE])
    tail.poll()
    assert tail.diverged is not None and (tail.diverged.step, tail.diverged.metric) == (2, SCORE)


def test_a_file_truncated_and_rewritten_longer_between_two_polls_is_read_from_its_start(tmp_path: Path) -> None:
    # the size alone cannot tell: the new file is longer than what was read; its first bytes differ
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"step": s, "data": {SCORE: 0.1}}) + "\n" for s in (1, 2)))
    tail = MetricsTail(path, "jsonl", [SCORE])
    tail.poll()
    with path.open("r+") as fp:  # the same file (inode), as verl's FileLogger reopening it with "w"
        fp.truncate(0)
        fp.write("".join(json.dumps({"step": s, "data": {SCORE: 0.9}}) + "\n" for s in (1, 2, 3, 4)))
    tail.poll()
    assert tail.values(SCORE) == [0.9, 0.9, 0.9, 0.9]
