"""mypy runs with the test suite, so `.ci/run` (the README's test command) enforces the type check (issue 28).

The mode is pyproject.toml's ``[tool.mypy]``: strict everywhere, less warn_return_any where NumPy or torch results
read as Any (sweeps.sandbox, the language-model modules), and the modules listed there skipped. The cache goes
under the system temp dir (the repository stays clean); a cold run takes about 8 s of CPU (measured: 15-19 s wall,
7-8 s user, on two busy cores; a warm one about 3 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_mypy_is_clean() -> None:
    pytest.importorskip("mypy")  # a test dependency ([test] extra)
    cache = Path(tempfile.gettempdir()) / f"verl-advisor-mypy-{os.getuid() if hasattr(os, 'getuid') else 0}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's code, not an installed copy
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache)], cwd=REPO, env=env,
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
