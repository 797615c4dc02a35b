"""ruff runs with the test suite, so `.ci/run` (the README's test command) enforces it (issue 28)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_ruff_is_clean() -> None:
    pytest.importorskip("ruff")  # a test dependency ([test] extra)
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=REPO, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
