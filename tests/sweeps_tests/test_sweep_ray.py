"""Sweeps through a real local Ray head: each trial a Ray Job, its metrics read from the streamed logs, pruned
trials and those the race stops stopped with ``stop_job``.

The head runs on loopback with 2 CPUs, in its own temp dir and process group, started for this module and
stopped in teardown (tests/ray_head.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

ray = pytest.importorskip("ray")
pytest.importorskip("optuna")
pytest.importorskip("ray.job_submission")

import ray_head  # noqa: E402
from test_sweep_runner import LR, SCORE, _script, _slow_sandbox  # noqa: E402

from sweeps import Objective, Param, RayJobLauncher, SweepSpec, run_sweep  # noqa: E402

ray_address = ray_head.ray_address  # this module's local head (tests/ray_head.py)


def test_ray_jobs_find_the_lr_fault_and_stop_the_diverging_trials(tmp_path: Path, ray_address: str) -> None:
    script = _script(tmp_path, f"{LR}=1e-3")
    spec = SweepSpec([Param.grid(LR, [1e-5])], Objective(SCORE), steps=24, seeds=3)
    launcher = RayJobLauncher(ray_address, gpus_per_trial=0)
    # the pruner stops the collapsing baseline by step 5 or so; after step 6 the fix slows down, so it still runs
    # then (the race can stop only a running trial) even when Ray starts the baseline's job seconds after its own
    trainer = _slow_sandbox(tmp_path, slow_down=(LR, 1e-5, 6, 0.4))
    result = run_sweep(script, spec, command=trainer, launcher=launcher, out=tmp_path / "out", parallel=2)

    assert result.launcher == {"launcher": "ray", "address": ray_address, "gpus_per_trial": 0}
    assert result.verdict.decision == "fix confirmed" and result.verdict.candidate == {LR: 1e-5}
    fix = {t.seed: t for t in result.trials if t.values[LR] == 1e-5}
    assert fix[42].state == "complete"  # the race never stops a trial of the first seed
    assert {t.state for t in fix.values()} <= {"complete", "stopped"}
    pruned = [t for t in result.trials if t.state == "pruned"]
    assert pruned and all(t.values[LR] == 1e-3 and (t.steps or 99) < 24 for t in pruned)
    raced = [t for t in fix.values() if t.state == "stopped"]
    assert raced and all((t.steps or 99) < 24 for t in raced), [(t.state, t.steps) for t in fix.values()]

    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(ray_address)
    jobs = {j.submission_id: j for j in client.list_jobs()}
    handles = [json.loads((Path(t.dir or "") / "lease.json").read_text())["handle"] for t in result.trials]
    assert all(h["launcher"] == "ray" and h["submission_id"] in jobs for h in handles)
    stopped = {jobs[json.loads((Path(t.dir or "") / "lease.json").read_text())["handle"]["submission_id"]].status
               for t in pruned + raced}
    assert stopped <= {JobStatus.STOPPED, JobStatus.SUCCEEDED}  # a job may end on its own while being stopped
    # the metrics came from the streamed console log: the job's stdout is in the trial directory
    complete = next(t for t in result.trials if t.state == "complete")
    assert "step:24 - " in (Path(complete.dir or "") / "stdout.log").read_text()


def test_ray_trial_command_failure_is_a_failed_trial(tmp_path: Path, ray_address: str) -> None:
    script = _script(tmp_path, f"{LR}=1e-5")
    spec = SweepSpec([Param.grid(LR, [1e-4])], Objective(SCORE), steps=3, seeds=1)
    crash = [sys.executable, "-c", "import sys; sys.exit('RuntimeError: NCCL error: unhandled system error')"]
    result = run_sweep(script, spec, command=crash, launcher=RayJobLauncher(ray_address), out=tmp_path / "out",
                       parallel=2)
    assert {t.state for t in result.trials} == {"failed"}
    assert all("RuntimeError: NCCL error" in (t.reason or "") for t in result.trials)
