"""The trial contract (argv, env, files) and the failure reason found in a dead trial's logs."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from sweeps._trial import TrialTemplate, failure_reason

LR = "actor_rollout_ref.actor.optim.lr"


def _template(**kwargs: object) -> TrialTemplate:
    defaults: dict[str, object] = {
        "base_argv": ["python3", "-m", "verl.trainer.main_ppo", f"{LR}=1e-3", "trainer.logger=[console,wandb]"],
        "logger": ["console", "wandb"], "experiment_name": "gsm8k", "console_metrics": False,
        "pythonpath": "/launch/dir", "existing_keys": frozenset({LR, "actor_rollout_ref.actor.data_loader_seed"}),
    }
    defaults.update(kwargs)
    return TrialTemplate(**defaults)  # type: ignore[arg-type]


def test_trial_argv_appends_values_last_as_separate_items(tmp_path: Path) -> None:
    value = "a b; rm -rf /"  # a value is one argv item, never shell text
    cmd = _template().command({LR: 1e-5, "actor_rollout_ref.actor.data_loader_seed": 43, "x.y": value},
                              steps=20, trial_dir=tmp_path / "0007", trial_number=7)
    assert cmd.argv[:5] == ["python3", "-m", "verl.trainer.main_ppo", f"{LR}=1e-3", "trainer.logger=[console,wandb]"]
    assert cmd.argv[5:] == [f"{LR}=1e-05", "actor_rollout_ref.actor.data_loader_seed=43", "++x.y='a b; rm -rf /'",
                            "trainer.total_training_steps=20", "trainer.logger=[console,wandb,file]",
                            "trainer.experiment_name=gsm8k_trial7"]
    assert cmd.cwd == (tmp_path / "0007").resolve()
    assert cmd.env["VERL_FILE_LOGGER_PATH"] == str(cmd.cwd / "metrics.jsonl") == str(cmd.metrics_path)
    assert cmd.env["PYTHONPATH"] == "/launch/dir" and cmd.env["PYTHONUNBUFFERED"] == "1"
    assert cmd.metrics_format == "jsonl" and cmd.stdout_path.name == "stdout.log"


def test_console_metrics_read_stdout_and_add_the_console_backend(tmp_path: Path) -> None:
    cmd = _template(logger=["wandb"], console_metrics=True).command({LR: 1e-5}, 5, tmp_path, 0)
    assert "trainer.logger=[wandb,console]" in cmd.argv
    assert cmd.metrics_format == "console" and cmd.metrics_path == cmd.stdout_path


def test_logger_is_not_duplicated(tmp_path: Path) -> None:
    cmd = _template(logger=["console", "file"]).command({}, 5, tmp_path, 0)
    assert "trainer.logger=[console,file]" in cmd.argv


@pytest.mark.parametrize(
    ("stderr", "code", "expected"),
    [
        pytest.param("Traceback (most recent call last):\n  File x\n"
                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
                     "(raylet) worker died\nRuntimeError: actor died\n", 1,
                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", id="oom-first"),
        pytest.param("(TaskRunner pid=7) Traceback (most recent call last):\n"
                     "(TaskRunner pid=7) ValueError: bad batch\n", 1, "ValueError: bad batch", id="ray-prefixed"),
        pytest.param("sweeps.sandbox: key 'x' is not in verl defaults\n", 2, "exit code 2", id="exit-code"),
        pytest.param("", -signal.SIGKILL, "killed by SIGKILL", id="signal"),
        pytest.param("", 137, "exit code 137 (killed by SIGKILL)", id="137"),
    ],
)
def test_failure_reason(tmp_path: Path, stderr: str, code: int, expected: str) -> None:
    (tmp_path / "stderr.log").write_text(stderr)
    (tmp_path / "stdout.log").write_text("step:1 - critic/score/mean:0.1\n")
    reason = failure_reason([tmp_path / "stderr.log", tmp_path / "stdout.log"], code)
    assert reason.startswith(expected)
