"""Fixtures for the metrics readers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the verl_logs helper module

from verl_logs import METRICS_FIXTURES  # noqa: E402


@pytest.fixture
def fixtures() -> Path:
    return METRICS_FIXTURES
