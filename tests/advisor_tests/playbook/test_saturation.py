"""Saturation is not a stall (issue 35): judged on verl runs their authors published (bench/published_runs/, sources
in SOURCE.md there).

A published GRPO run whose training score sits flat at 0.97 of a 0/1 reward has "not improved since mid-run" by
the stall test's arithmetic, and is a reference result (docs/algo/baseline.md:42): its score is saturated. The same
run with its score moved to the lower part of the reward's range (the curve scaled by 0.4, every other metric as
logged) is a real stall and must still be flagged.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from advisor.load import load_config_from_log
from advisor.metrics import load_metrics
from advisor.playbook import suggest_run
from advisor.playbook._harm import SATURATED, Saturated, Stalled, stalled
from advisor.playbook._signals import Signals

RUNS = Path(__file__).resolve().parents[3] / "bench" / "published_runs"
SATURATED_RUNS = ["amd_grpo_run_deepseek7b_llm.log.gz", "gpg_qwen2-7b_math_megatron.log.gz",
                  "dstack_qwen2.5-7b-ppo-2x8gpu.log.gz"]


def _unpacked(name: str, tmp_path: Path) -> Path:
    log = tmp_path / name.removesuffix(".gz")
    with gzip.open(RUNS / name, "rb") as src, log.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return log


def _frame(name: str, tmp_path: Path):
    return load_metrics(_unpacked(name, tmp_path)).data


@pytest.mark.parametrize("name", [n for n in SATURATED_RUNS if (RUNS / n).exists()])
def test_a_published_saturated_run_is_saturated_not_stalled(name: str, tmp_path: Path) -> None:
    frame = _frame(name, tmp_path)
    signals = Signals(frame)
    score = signals["critic/score/mean"]
    low, high = float(np.nanmin(frame["critic/score/min"])), float(np.nanmax(frame["critic/score/max"]))
    assert (score.level - low) / (high - low) >= SATURATED  # the formula, from the log's own columns
    assert stalled(score, Stalled(since=0.5)).holds  # flat by the stall arithmetic alone ...
    assert not Stalled(since=0.5).harm(score, signals).holds  # ... but saturated, so no stall
    assert Saturated().holds(signals, "critic/score/mean")[0]


def test_the_same_run_with_its_score_low_in_its_range_is_still_a_stall(tmp_path: Path) -> None:
    frame = _frame("amd_grpo_run_deepseek7b_llm.log.gz", tmp_path).copy()
    frame["critic/score/mean"] = frame["critic/score/mean"] * 0.4  # 0.97 -> 0.39: the same flat curve, mid-range
    signals = Signals(frame)
    assert not Saturated().holds(signals, "critic/score/mean")[0]
    result = Stalled(since=0.5).harm(signals["critic/score/mean"], signals)
    assert result.holds and "has stalled" in result.text


def test_suggest_proposes_nothing_on_a_saturated_published_grpo_run(tmp_path: Path) -> None:
    log = _unpacked("amd_grpo_run_deepseek7b_llm.log.gz", tmp_path)
    result = suggest_run(load_config_from_log(log), log)  # the config the log printed, as `advisor suggest LOG`
    assert not result.changes
    assert all(not d.harmful for d in result.learning if d.rule.id in ("AD006", "AD007", "AD008", "CF006"))
