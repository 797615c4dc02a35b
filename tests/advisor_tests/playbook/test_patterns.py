"""The pattern corpus (bench/patterns): every row of the guides' tables is a case (or says why it has no run), every
case cites its source and its ground truth, and the bench prints exactly its two lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "bench" / "patterns"))

from render import load, render  # noqa: E402

DATA = load()


def test_every_row_of_the_guides_tables_is_rendered_or_says_why_not() -> None:
    rows = {r["id"] for r in yaml.safe_load((REPO / "knowledge/rules/seed_coverage.yaml").read_text())["rows"]}
    covered = {c["row"] for c in DATA["cases"]} | set(DATA.get("not_rendered") or {})
    assert rows - covered == set()
    assert covered - rows == set()  # no case claims a row the guides do not have


def test_every_case_cites_a_source_and_a_ground_truth_in_several_modes() -> None:
    modes = set()
    for case in DATA["cases"]:
        assert case.get("source"), case["id"]
        assert set(case["expect"]) <= {"accept", "inspect"} and len(case["expect"]) == 1, case["id"]
        assert set(case["modes"]) <= set(DATA["modes"]), case["id"]
        modes.update(case["modes"])
    assert {"grpo-loss", "grpo-none", "ppo-reward", "ppo-none"} <= modes  # both estimators, every KL placement


def test_a_rendering_is_verls_metric_set_with_sparse_validation() -> None:
    case = next(c for c in DATA["cases"] if c["id"] == "kl-spike-loss")
    overrides, frame = render(case, "grpo-loss", 1, DATA)
    assert "trainer.total_training_steps=300" in overrides and len(frame) == 80
    kl = frame["actor/kl_loss"].to_numpy()
    assert kl[-1] / kl[0] > 500  # ~1000x over the run, as the case says, noise aside
    val = frame["val-core/openai/gsm8k/reward/mean@1"].to_numpy()
    assert np.isfinite(val).sum() == 8  # every 10th step (trainer.test_freq=10)
    assert np.array_equal(frame["critic/rewards/mean"].to_numpy(), frame["critic/score/mean"].to_numpy())


def test_the_bench_prints_exactly_its_two_lines() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "bench_patterns.py"), "--only", "grpo-n2-low-score",
                           "published-shape", "--seeds", "1"], capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-2] == "patterns: key right 2/2"
    assert lines[-1] == "patterns: healthy no change 4/4"
