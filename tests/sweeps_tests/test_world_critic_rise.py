"""bench/world/critic_rise.py: the rows CR001's rose_from_first threshold rests on (issue 35), train split only."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "world"))

import critic_rise  # noqa: E402

EV = "critic/vf_explained_var"


def record(split: str, seed: int, mode: str, ev: list[float], critic_lr: str | None = None) -> dict:
    metrics = [[step, {EV: v, "critic/score/mean": 0.5}] for step, v in enumerate(ev, 1)]
    overrides = [f"critic.optim.lr={critic_lr}"] if critic_lr else []
    return {"split": split, "seed": seed, "mode": mode, "kl": "none", "fault": None, "label": [],
            "overrides": overrides, "metrics": [metrics, metrics]}


def test_the_peak_is_the_highest_nine_step_median() -> None:
    # three steps at 0, then nine at 0.2: the last windows hold at least five 0.2s, so their median is 0.2
    assert critic_rise.rolling_median_peak(np.array([0.0] * 3 + [0.2] * 9)) == 0.2
    # one step at 0.9 among zeros is no peak: a 9-step median never sees it
    assert critic_rise.rolling_median_peak(np.array([0.0] * 6 + [0.9] + [0.0] * 5)) == 0.0
    # fewer than nine values: the median of them all
    assert critic_rise.rolling_median_peak(np.array([0.0, 0.1, 0.4])) == 0.1


def test_only_the_train_splits_critic_runs_are_read() -> None:
    records = [record("train", 7, "gae", [0.0] * 3 + [0.2] * 9, "1e-8"),
               record("test", 1_000_007, "gae", [0.0] * 12),
               record("train", 8, "grpo", [0.0] * 12)]
    out = [line for _, line in critic_rise.lines(records)]
    assert len(out) == 2 and all(line.startswith("   7/") for line in out)  # both seeds of the train GAE run
    assert "critic lr 1e-08" in out[0] and "peak-first +0.2000" in out[0]
