"""``advisor watch``: the file follower, the bounded frame, the alert hysteresis, the actions, the CLI.

Runs with a known fault come from the CPU sandbox (sweeps/sandbox/, sweeps/sandbox/faults.py), written live or
whole, so the onset step is known; the expected diagnoses are the playbook's rules for the injected
failure (knowledge/rules/reward/RW004-reward-collapse.yaml: the score fell from its early level to 0;
knowledge/rules/numerics/NU002-reward-nonfinite.yaml: a NaN reward).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from advisor import load_config
from advisor.playbook._rule_loader import Condition
from advisor.watch import EXIT_ALERT, AlertState, FileTail, LiveFrame, WatchOptions, open_source, watch

REPO = Path(__file__).resolve().parents[3]
CONFIG = ["data.max_response_length=32", "actor_rollout_ref.rollout.name=vllm",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
          "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8", "data.filter_overlong_prompts=true",
          "trainer.test_freq=10", "trainer.val_before_train=false", "algorithm.adv_estimator=grpo",
          "actor_rollout_ref.rollout.n=5", "data.train_batch_size=128",
          "actor_rollout_ref.actor.ppo_mini_batch_size=32", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
          "actor_rollout_ref.actor.use_kl_loss=true", "trainer.total_training_steps=40"]
ONSET = 20
NO_PERF = ["--skip-tree", "throughput", "--skip-tree", "memory"]


def _script(directory: Path) -> Path:
    path = directory / "run.sh"
    path.write_text("#!/usr/bin/env bash\npython3 -m verl.trainer.main_ppo \\\n    "
                    + " \\\n    ".join(shlex.quote(a) for a in CONFIG) + " \"$@\"\n")
    return path


def _sandbox_log(path: Path, *extra: str) -> Path:
    from sweeps.sandbox import jsonl_line, run

    records = run([*CONFIG, "+sandbox.seed=5", *extra])
    path.write_text("".join(jsonl_line(data, step) + "\n" for step, data in records))
    return path


@pytest.fixture(scope="module")
def reward_fault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose reward parser breaks at step ONSET (every score 0 from there)."""
    directory = tmp_path_factory.mktemp("reward")
    return _sandbox_log(directory / "run.jsonl", "+sandbox.fault=reward", f"+sandbox.fault_step={ONSET}")


def _watch_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "advisor", "watch", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout)


# --- the file follower ----------------------------------------------------------------------------------------


def test_tail_reads_only_appended_lines_and_keeps_a_cut_last_line(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"one\ntw")
    tail = FileTail(path)
    assert tail.poll() == [b"one"]
    assert tail.partial == b"tw"  # still being written
    assert tail.poll() == []
    with path.open("ab") as fp:
        fp.write(b"o\nthree\n")
    assert tail.poll() == [b"two", b"three"]
    assert tail.bytes_read == len(b"one\ntwo\nthree\n")


def test_tail_waits_for_a_file_that_does_not_exist_yet(tmp_path: Path) -> None:
    path = tmp_path / "later.jsonl"
    tail = FileTail(path)
    assert tail.poll() == [] and tail.poll() == []
    path.write_bytes(b"a\nb\n")
    assert tail.poll() == [b"a", b"b"]


def test_tail_survives_truncation(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"1\n2\n3\n")
    tail = FileTail(path)
    assert tail.poll() == [b"1", b"2", b"3"]
    path.write_bytes(b"x\n")  # verl's FileLogger opens with "w": a restarted run starts the file over
    assert tail.poll() == [b"x"]
    assert tail.truncations == 1


def test_tail_survives_rotation_reading_the_old_file_to_its_end(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"1\n")
    tail = FileTail(path)
    assert tail.poll() == [b"1"]
    with path.open("ab") as fp:
        fp.write(b"2\n")  # written after the last poll, just before the rotation
    path.rename(tmp_path / "log.1")
    assert tail.poll() == [b"2"]  # the old file is finished even while its successor is missing
    path.write_bytes(b"3\n4\n")
    assert tail.poll() == [b"3", b"4"]
    assert tail.rotations == 0  # the old file was closed when it disappeared: the new one is a fresh open
    with path.open("ab") as fp:
        fp.write(b"5\n")
    os.replace(path, tmp_path / "log.2")
    path.write_bytes(b"6\n")
    assert tail.poll() == [b"5", b"6"]  # replaced between two polls: old file's rest, then the new file
    assert tail.rotations == 1


def test_source_parses_records_and_the_cut_last_line_only_once_complete(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(b'{"step": 1, "data": {"critic/score/mean": 0.5}}\n{"step": 2, "da')
    source = open_source(str(path))
    assert source.poll() == [(1, {"critic/score/mean": 0.5})]
    assert source.fmt == "jsonl"
    with path.open("ab") as fp:
        fp.write(b'ta": {"critic/score/mean": null}}\n')
    ((step, values),) = source.poll()
    assert step == 2 and np.isnan(values["critic/score/mean"])  # the file logger writes NaN as null


def test_source_reads_a_console_log_among_other_output(tmp_path: Path) -> None:
    path = tmp_path / "stdout.log"
    path.write_text("Creating file logger\n(TaskRunner pid=7) step:3 - critic/score/mean:np.float64(0.25) - "
                    "actor/lr:1e-06\nTraining Progress: 3%\n")
    source = open_source(str(path))
    assert source.poll() == [(3, {"critic/score/mean": 0.25, "actor/lr": 1e-06})]
    assert source.fmt == "console"


# --- the bounded frame ----------------------------------------------------------------------------------------


def test_frame_memory_is_bounded_and_the_past_evenly_spaced() -> None:
    frame = LiveFrame(capacity=256, dense=32)
    for step in range(1, 100_001):
        frame.add(step, {"m": float(step)})
    steps, names, values = frame.arrays()
    assert names == ["m"] and np.array_equal(values[:, 0], steps.astype(float))
    assert frame.rows <= 256 + 32
    assert list(steps[-32:]) == list(range(100_000 - 31, 100_001))  # the recent steps, every one
    past = np.diff(steps[: -32])
    assert len(set(past.tolist())) == 1  # one stride over the whole past
    assert steps[0] == 1 and past[0] * frame.capacity >= 100_000 - 32 - past[0] * frame.capacity


def test_frame_merges_a_repeated_step_and_drops_re_run_steps_after_a_restart() -> None:
    frame = LiveFrame(capacity=8, dense=4)
    for step in range(1, 11):
        frame.add(step, {"a": float(step)})
    frame.add(10, {"val": 1.0})  # the same step again: its validation record
    frame.add(6, {"a": 60.0})  # restarted from step 6's checkpoint: steps 6..10 are re-run
    steps, names, values = frame.arrays()
    assert steps[-1] == 6 and values[-1, names.index("a")] == 60.0
    assert all(s < 6 for s in steps[:-1]) and frame.restarts == 1


# --- the hysteresis ---------------------------------------------------------------------------------------------


@dataclass
class _Rule:
    conditions: tuple[Condition, ...] = ()


@dataclass
class _Diag:
    id: str
    severity: str
    strength: float = 1.0
    rule: _Rule = field(default_factory=_Rule)


def test_alert_once_after_the_confirmation_span_then_only_when_worse_then_cleared() -> None:
    state = AlertState(level="warning", confirm=3)
    d = _Diag("RW004", "warning", 1.0)
    assert state.update(10, [d]) == [] and state.update(11, [d]) == []
    (alert,) = state.update(12, [d])  # found at 10, 11, 12: three steps
    assert (alert.kind, alert.step, alert.onset_step) == ("alert", 12, 10)
    assert state.update(13, [_Diag("RW004", "warning", 1.5)]) == []  # not worse enough
    (worse,) = state.update(14, [_Diag("RW004", "error", 1.5)])
    assert worse.kind == "worse" and worse.severity == "error"
    assert state.update(15, [_Diag("RW004", "error", 3.0)])[0].kind == "worse"  # strength doubled
    assert state.update(16, []) == [] and state.update(17, []) == []
    (cleared,) = state.update(18, [])
    assert cleared.kind == "cleared" and state.active == []


def test_a_flicker_shorter_than_the_span_never_alerts_and_info_never_does() -> None:
    state = AlertState(level="warning", confirm=3)
    flicker = _Diag("KL001", "warning")
    for step in range(1, 20):
        assert state.update(step, [flicker] if step % 2 else [_Diag("EN003", "info")]) == []


def test_a_nan_onset_alerts_at_once() -> None:
    rule = _Rule((Condition(test="any", any_of=((Condition(test="nonfinite", metric="actor/pg_loss"),),)),))
    (alert,) = AlertState(confirm=5).update(7, [_Diag("NU001", "error", rule=rule)])
    assert alert.kind == "alert" and alert.step == alert.onset_step == 7


# --- the loop and the CLI -----------------------------------------------------------------------------------------


def test_watch_follows_a_live_file_that_appears_late_and_alerts_after_the_onset(tmp_path: Path,
                                                                                 reward_fault: Path) -> None:
    lines = reward_fault.read_bytes().splitlines(keepends=True)
    live = tmp_path / "later" / "run.jsonl"

    def write() -> None:
        time.sleep(0.3)  # the watcher is already waiting
        live.parent.mkdir()
        with live.open("wb") as fp:
            for line in lines:
                fp.write(line[:10])  # every line arrives in two writes: the follower sees it cut
                fp.flush()
                fp.write(line[10:])
                fp.flush()
                time.sleep(0.01)

    writer = threading.Thread(target=write)
    writer.start()
    cfg = load_config(_script(tmp_path), [])
    from advisor.cli._jobs import rules_without

    options = WatchOptions(idle_stop_minutes=0.02, poll_s=0.02, rules=rules_without(("throughput", "memory")))
    with open(os.devnull, "w") as sink:
        result = watch(cfg, str(live), options, out=sink)
    writer.join()
    assert result.steps == len(lines) == 40
    alerts = [e for e in result.events if e["event"] == "alert"]
    assert alerts and all(e["step"] >= ONSET for e in alerts)
    collapse = next(e for e in alerts if e["id"] == "RW004")
    assert collapse["severity"] == "error" and collapse["diagnosis"]["evidence"][0]["metric"] == "critic/score/mean"
    assert collapse["step"] - ONSET <= 15


def test_on_alert_command_gets_the_alert_json_on_stdin(tmp_path: Path, reward_fault: Path) -> None:
    received = tmp_path / "received.jsonl"
    hook = f"{sys.executable} -c 'import sys; open(sys.argv[1], \"a\").write(sys.stdin.read() + \"\\n\")' {received}"
    done = _watch_cli(str(_script(tmp_path)), str(reward_fault), "--idle-stop", "0.01", "--format", "json",
                      "--on-alert", hook, *NO_PERF)
    assert done.returncode == 0, done.stderr
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    got = [json.loads(line) for line in received.read_text().splitlines() if line.strip()]
    assert got == printed and any(e["event"] == "alert" and e["id"] == "RW004" for e in got)
    first = next(e for e in got if e["event"] == "alert")
    assert {"diagnosis", "suggest", "onset_step", "step", "severity"} <= set(first)
    assert "stopped after 40 steps" in done.stderr


def test_exit_on_error_stops_at_the_first_error_alert_with_its_code(tmp_path: Path, reward_fault: Path) -> None:
    done = _watch_cli(str(_script(tmp_path)), str(reward_fault), "--idle-stop", "0.01", "--exit-on", "error",
                      "--format", "json", *NO_PERF)
    assert done.returncode == EXIT_ALERT == 4, done.stderr
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["event"] == "alert" and last["severity"] == "error"


def test_a_nan_reward_alerts_at_its_onset_step(tmp_path: Path) -> None:
    log = _sandbox_log(tmp_path / "nan.jsonl", "+sandbox.fault=nan_reward", f"+sandbox.fault_step={ONSET}")
    done = _watch_cli(str(_script(tmp_path)), str(log), "--idle-stop", "0.01", "--format", "json", *NO_PERF)
    alerts = [json.loads(line) for line in done.stdout.splitlines()]
    # the 40 steps arrive in one read, each judged (every step up to EVERY_STEP_UNTIL): the onset step itself
    # alerts, with no confirmation span
    assert alerts and alerts[0]["step"] == ONSET and alerts[0]["diagnosis"]["area"] == "numerics"
    assert alerts[0]["onset_step"] == alerts[0]["step"]


def test_bad_inputs_are_one_line_and_exit_2(tmp_path: Path) -> None:
    script = str(_script(tmp_path))
    done = _watch_cli(script, "ray://", "--idle-stop", "0")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "ray://" in done.stderr
    done = _watch_cli(script, str(tmp_path / "x.jsonl"), "--on-alert", "'unclosed", "--idle-stop", "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr


# --- the sandbox's faults -----------------------------------------------------------------------------------------


def test_sandbox_faults_start_at_their_step() -> None:
    from sweeps.sandbox import run

    short = [*CONFIG[:-1], "trainer.total_training_steps=6", "+sandbox.seed=1"]
    lr = dict(run([*short, "+sandbox.fault=lr", "+sandbox.fault_step=4", "+sandbox.fault_factor=10"]))
    assert [float(lr[s]["actor/lr"]) for s in (3, 4, 6)] == pytest.approx([1e-6, 1e-5, 1e-5])
    kl = dict(run([*short, "+sandbox.fault=kl", "+sandbox.fault_step=3"]))
    assert [kl[s]["actor/kl_coef"] for s in (2, 3, 6)] == pytest.approx([0.001, 0.0, 0.0])
    reward = dict(run([*short, "+sandbox.fault=reward", "+sandbox.fault_step=2"]))
    assert reward[1]["critic/score/max"] == 1.0 and all(reward[s]["critic/score/max"] == 0.0 for s in (2, 6))
    with pytest.raises(ValueError, match="sandbox injects lr, kl, reward, nan_reward"):
        run([*short, "+sandbox.fault=typo"])


# --- TensorBoard ----------------------------------------------------------------------------------------------


def test_tensorboard_run_directory_is_followed_as_event_files_grow(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    run = tmp_path / "tensorboard_log"
    run.mkdir()
    source = open_source(str(run))
    assert source.poll() == []  # no event file yet
    writer = EventFileWriter(str(run))

    def scalar(step: int, tag: str, value: float) -> None:  # one event per (step, key), as add_scalar writes
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
        writer.flush()

    scalar(1, "critic/score/mean", 0.25)
    scalar(1, "actor/entropy", 2.0)
    assert source.poll() == []  # step 1 may still get more metrics
    scalar(2, "critic/score/mean", 0.5)
    assert source.poll() == [(1, {"critic/score/mean": 0.25, "actor/entropy": 2.0})]
    writer.close()
    assert source.close() == [(2, {"critic/score/mean": 0.5})]
