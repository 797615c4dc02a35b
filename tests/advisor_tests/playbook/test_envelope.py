"""The healthy envelope of published verl runs (issue 35): regenerated from the logs, and a run's place in it.

knowledge/published_envelope.yaml is data written by scripts/published_envelope.py from bench/published_runs/; the
committed file must be what the script writes from the logs committed beside it. A level's percentile is the share
of published runs whose median at the same progress is below it (ties half), computed here from the file's per-run
medians, not through the code under test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from advisor.playbook._envelope import in_words, place, progress_of

REPO = Path(__file__).resolve().parents[3]
ENVELOPE = yaml.safe_load((REPO / "knowledge" / "published_envelope.yaml").read_text())


def test_the_committed_envelope_is_what_the_script_writes_from_the_published_logs() -> None:
    proc = subprocess.run([sys.executable, "scripts/published_envelope.py", "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_every_published_log_is_in_the_envelope() -> None:
    logs = sorted(p.name for p in (REPO / "bench" / "published_runs").glob("*.log.gz"))
    assert sorted(ENVELOPE["runs"]) == logs and ENVELOPE["runs_total"] == len(logs)


@pytest.mark.parametrize(("decile", "level"), [(9, 0.5), (9, 0.95), (4, 0.8)])
def test_a_levels_percentile_is_its_share_of_published_medians(decile: int, level: float) -> None:
    medians = np.array([r["metrics"]["critic/score/mean"]["median"][decile] for r in ENVELOPE["runs"].values()
                        if "critic/score/mean" in r["metrics"]])
    expected = 100 * ((medians < level).sum() + 0.5 * (medians == level).sum()) / medians.size
    found = place("critic/score/mean", level, (decile + 0.5) / 10)
    assert found is not None and found.percentile == pytest.approx(expected) and found.runs == medians.size


def test_progress_is_known_only_with_a_planned_total() -> None:
    assert progress_of(50, 200) == pytest.approx(0.25)
    assert progress_of(50, None) is None


@pytest.mark.parametrize("n", [1, 5])
def test_a_run_is_compared_with_the_published_runs_on_its_side_of_rollout_n(n: int) -> None:
    assert "n" in ENVELOPE["by"]  # the published runs split on it: >= 3 runs each side
    side = [r for r in ENVELOPE["runs"].values() if (r["config"]["n"] > 1) == (n > 1)]
    found = place("critic/score/mean", 0.9, 0.95, {"n": n})
    assert found is not None and found.runs == len(side)


@pytest.mark.parametrize(("n", "words"), [(1, "one"), (8, "eight"), (25, "twenty-five"), (40, "forty")])
def test_run_counts_are_written_in_words(n: int, words: str) -> None:
    assert in_words(n) == words
