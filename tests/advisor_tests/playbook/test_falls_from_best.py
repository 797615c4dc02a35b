"""``falls_from_best`` (VA002): a sparsely logged metric's recent values against the best it logged before them.

Validation is logged every trainer.test_freq steps, so a window of steps holds one or two of its values: the test
reads the logged values themselves, a fifth of them at a time (1 to 5). Expected values are the arithmetic of that
definition on the series below, and the published verl runs (bench/published_runs/, SOURCE.md there) are runs their
authors report as good: their validation never falls a tenth below its best.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor.metrics import load_metrics
from advisor.playbook._conditions import FallsFromBest
from advisor.playbook._signals import Signals

VAL = "val-core/openai/gsm8k/reward/mean@1"
RUNS = Path(__file__).resolve().parents[3] / "bench" / "published_runs"


def _sparse(values: list[float], every: int) -> Signals:
    """A run that logs the score each step and validation every ``every`` steps (NaN between, as verl's logs)."""
    steps = np.arange(1, every * len(values) + 1)
    val = np.full(steps.size, np.nan)
    val[every - 1::every] = values
    return Signals(pd.DataFrame({VAL: val, "critic/score/mean": 0.5}, index=steps))


@pytest.mark.parametrize(("first", "second", "falls"), [(0.76, 0.66, True), (0.76, 0.70, False), (0.5, 0.6, False)])
def test_two_validations_compare_one_to_one(first: float, second: float, falls: bool) -> None:
    signals = _sparse([first, second], every=6)
    s = signals[VAL]
    assert (s.smoothing, s.best, s.recent) == (1, first, second)
    held, strength = FallsFromBest(factor=0.9).holds(signals, VAL)
    assert held is falls and strength == pytest.approx((first - second) / first)


def test_forty_validations_take_medians_of_five() -> None:
    flat = [0.70] * 40
    one_dip = [*flat[:-1], 0.40]  # the last validation alone low: the median of the last five is 0.70
    five_low = [*flat[:-5], *[0.60] * 5]
    assert _sparse(one_dip, 5)[VAL].smoothing == 5
    assert not FallsFromBest(0.9).holds(_sparse(one_dip, 5), VAL)[0]
    assert _sparse(five_low, 5)[VAL].recent == 0.60 and _sparse(five_low, 5)[VAL].best == 0.70
    assert FallsFromBest(0.9).holds(_sparse(five_low, 5), VAL)[0]  # 0.60 <= 0.9 x 0.70 = 0.63


def test_one_validation_has_nothing_to_fall_from() -> None:
    assert not FallsFromBest(0.9).holds(_sparse([0.5], 10), VAL)[0]


@pytest.mark.parametrize("name", sorted(p.name for p in RUNS.glob("*.log.gz")))
def test_no_published_run_falls_a_tenth_below_its_best_validation(name: str, tmp_path: Path) -> None:
    log = tmp_path / name.removesuffix(".gz")
    with gzip.open(RUNS / name, "rb") as src, log.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    frame = load_metrics(log).data
    columns = [c for c in frame.columns if c.startswith("val-core/")]
    if not columns:
        pytest.skip(f"{name} logs no val-core metric")
    signals = Signals(frame.assign(**{"val-core/*": frame[columns].mean(axis=1)}))
    s = signals["val-core/*"]
    assert not FallsFromBest(0.9).holds(signals, "val-core/*")[0], (s.best, s.recent)


def test_a_fall_within_the_runs_own_noise_is_not_a_fall() -> None:
    # a validation on a few dozen prompts: 0.20 and 0.30 alternate (each change 0.10), then five values at 0.20 and
    # 0.25: median 0.25 <= 0.9 x the best median 0.30 (alternating windows of five have medians 0.2 and 0.3), but
    # the fall (0.05) is within twice the series' step noise (median |change| 0.10): quiet
    noisy = [0.20, 0.30] * 10 + [0.25, 0.20, 0.25, 0.20, 0.25]
    signals = _sparse(noisy, 5)
    s = signals[VAL]
    assert s.step_noise == pytest.approx(0.10) and s.best == pytest.approx(0.30) and s.recent == pytest.approx(0.25)
    assert not FallsFromBest(0.9).holds(signals, VAL)[0]
    # the same run collapsing to 0.05: a fall of 0.25 > 2 x 0.10
    collapsed = [*noisy[:-5], *[0.05] * 5]
    assert FallsFromBest(0.9).holds(_sparse(collapsed, 5), VAL)[0]
    # a smooth decline moves a little each time (step noise 0.01) and falls by far more: it holds
    smooth = [0.60 + 0.01 * i for i in range(11)] + [0.70 - 0.01 * i for i in range(1, 16)]
    assert FallsFromBest(0.9).holds(_sparse(smooth, 5), VAL)[0]
