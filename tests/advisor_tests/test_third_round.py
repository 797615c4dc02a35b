"""Reproducers of the third hostile-input campaign (issue 38): the exit path, restarts, values verl skips, bounded
work, ``--write`` and ``--max``.

Each test builds its input from a verl log shape and asserts what a user sees: the exit code, the one line on
stderr, the verdict.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]
CHECK = str(REPO / "examples" / "check" / "grpo_qwen2.5-7b_gsm8k.sh")  # a clean check: exit 0
SCRIPT = str(REPO / "examples" / "lr_too_high" / "run.sh")
METRICS = str(REPO / "examples" / "lr_too_high" / "metrics.jsonl")


def _advisor(*args: str, stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "advisor", *args], env=env, stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120)


# --- 5. the exit path --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("check", CHECK), ("suggest", SCRIPT, METRICS), ("rule", "CF001"),
                                  ("suggest", SCRIPT, METRICS, "--format", "json")])
def test_a_broken_pipe_ends_quietly_with_141(args: tuple[str, ...]) -> None:
    # the reader went away before the first write (`| head -1` after its line): every write is EPIPE
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = _advisor(*args, stdout=write_end)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (ExitCode.BROKEN_PIPE, "")


def test_a_full_disk_is_an_output_error_not_the_inputs() -> None:
    with open("/dev/full", "w") as full:
        done = _advisor("check", CHECK, stdout=full)
    assert done.returncode == ExitCode.OUTPUT_FAILED, done.stderr
    assert done.stderr.strip().splitlines() == ["advisor: cannot write the output (No space left on device)"]


def test_a_closed_stdout_is_an_output_error() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(["bash", "-c", f"'{sys.executable}' -m advisor check '{CHECK}' >&-"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == ExitCode.OUTPUT_FAILED, done.stderr
    assert done.stderr.strip().splitlines() == ["advisor: cannot write the output (standard output is closed)"]
