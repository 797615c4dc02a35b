"""`advisor sweep` a user can follow when its output is piped (`2>&1 | cat`, a CI log): the plan first, then a
flushed line as each trial starts and ends, each read while the sweep still runs (nothing held back to the end)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from test_sweep_runner import LR, REPO, SANDBOX, SCORE, _script  # noqa: E402


def test_a_piped_sweep_prints_its_plan_then_a_line_per_trial_as_they_happen(tmp_path: Path) -> None:
    script = _script(tmp_path, f"{LR}=1e-3")
    args = [sys.executable, "-m", "advisor", "sweep", str(script), "--param", LR, "--values", "1e-5", "--steps", "3",
            "--seeds", "1", "--objective", SCORE, "--no-prune", "--out", str(tmp_path / "out"),
            "--command", " ".join(SANDBOX)]
    proc = subprocess.Popen(args, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    seen: list[tuple[str, bool]] = []  # each line, and whether the sweep was still running when it arrived
    try:
        for line in proc.stdout:
            seen.append((line.rstrip("\n"), proc.poll() is None))
    finally:
        proc.wait(timeout=300)
    lines = [text for text, _ in seen]
    assert proc.returncode in (0, 1), "\n".join(lines[-30:])
    plan = next(i for i, x in enumerate(lines) if x.startswith("sweep plan: "))
    assert f"{LR} over 0.001, 1e-05 (the first, the config's, is the baseline)" in lines[plan]
    assert "at most 2 trials of 3 steps" in lines[plan]
    assert f"objective {SCORE} (maximize)" in lines[plan] and str(tmp_path / "out") in lines[plan]
    started = [i for i, x in enumerate(lines) if x.startswith("trial #") and x.endswith(": started")]
    ended = [i for i, x in enumerate(lines) if x.startswith("trial #") and "done]" in x]
    assert len(started) == len(ended) == 2 and plan < started[0] < ended[0]
    # flushed as it happened: the plan and every trial's lines arrived while the sweep was still running
    assert all(running for i, (_, running) in enumerate(seen) if i in (plan, *started, *ended))
