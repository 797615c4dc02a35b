"""Shared test fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# verl's own config YAMLs and example scripts, copied verbatim (see SOURCE.md there). CI runs on a
# clean checkout of this repository only, so tests that need them skip when they are absent.
VERL_REFERENCE = Path(os.environ.get("VERL_REFERENCE", REPO.parent / "shared" / "verl-reference"))


@pytest.fixture
def verl_reference() -> Path:
    if not VERL_REFERENCE.is_dir():
        pytest.skip(f"verl reference copy not found at {VERL_REFERENCE}")
    return VERL_REFERENCE
