"""``advisor watch ray://JOB_ID``: a sandbox run submitted to a real local Ray head (loopback, tests/ray_head.py),
followed through Ray's job log stream until the job ends."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

pytest.importorskip("ray.job_submission")

import ray_head  # noqa: E402
from test_watch import CONFIG, NO_PERF, REPO, _script  # noqa: E402

ray_address = ray_head.ray_address  # this module's local head

ONSET = 6


def test_watch_follows_a_ray_job_and_alerts_at_the_nan_onset(tmp_path: Path, ray_address: str) -> None:
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(ray_address)
    argv = [sys.executable, "-m", "sweeps.sandbox", *CONFIG[:-1], "trainer.total_training_steps=12",
            "trainer.logger=[console]", "+sandbox.seed=3", "+sandbox.fault=nan_reward",
            f"+sandbox.fault_step={ONSET}", "+sandbox.step_sleep=0.3"]
    job = client.submit_job(entrypoint=f"cd {shlex.quote(str(REPO))} && exec env -u RAY_ADDRESS {shlex.join(argv)}",
                            runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    done = subprocess.run(
        [sys.executable, "-m", "advisor", "watch", str(_script(tmp_path)), f"ray://{job}", "--address", ray_address,
         "--format", "json", *NO_PERF], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "stopped after 12 steps: the source ended" in done.stderr  # every step, and the stream's end
    alerts = [json.loads(line) for line in done.stdout.splitlines()]
    assert alerts and alerts[0]["step"] >= ONSET and alerts[0]["diagnosis"]["area"] == "numerics"
    assert alerts[0]["source"] == f"ray://{job}"
    assert client.get_job_status(job) == JobStatus.SUCCEEDED


def test_watch_of_a_job_that_does_not_exist_is_one_line_exit_2(tmp_path: Path, ray_address: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "advisor", "watch", str(_script(tmp_path)), "ray://no-such-job", "--address",
         ray_address], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "ray://no-such-job" in done.stderr
