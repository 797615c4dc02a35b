"""Shared test fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Tests start the interpreter in other directories (trial directories, tmp_path). Under a relative PATH entry
# (PATH=.venv/bin:$PATH) sys.executable is a relative path that only the repository root resolves.
sys.executable = os.path.abspath(sys.executable)
# The suite checks against the verl versions in knowledge/, whatever verl the machine has installed
# (subprocesses inherit this too); tests of the installed-verl path lift it themselves.
os.environ["ADVISOR_IGNORE_INSTALLED_VERL"] = "1"
# The sandbox's unset sandbox.policy means the language model; the suite's figures and speed are the log-linear
# policy's (tests of the language model pass +sandbox.policy=lm). Subprocesses inherit it too.
os.environ["SANDBOX_POLICY"] = "loglinear"
REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# verl's example launch scripts, copied verbatim (see SOURCE.md there).
VERL_SCRIPTS = FIXTURES / "verl_scripts"
# The team's full verl reference copy (config YAMLs of every version). CI has only this repository,
# so tests that need it skip when it is absent.
VERL_REFERENCE = Path(os.environ.get("VERL_REFERENCE", REPO.parent / "shared" / "verl-reference"))


@pytest.fixture
def verl_reference() -> Path:
    if not VERL_REFERENCE.is_dir():
        pytest.skip(f"verl reference copy not found at {VERL_REFERENCE}")
    return VERL_REFERENCE
