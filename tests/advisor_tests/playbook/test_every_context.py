"""Rules in every context where their cause can occur (issue 35), end to end through suggest.

Flat groups at temperature 1 and a high score (not only cold or low), and a learning rate that is too low (not only
too high). Expected changes come from the rule files' fixes and the config (n doubled; an lr over thirty times below
the 1e-6 verl's docs start from raised to it: docs/perf/best_practices.rst:214-215 @1dda039b, the threshold fitted on
the world's train split, bench/world/FITS.md; nearer, a warning and no change).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor import load_config
from advisor.playbook import suggest

GRPO = ["actor_rollout_ref.rollout.name=vllm", "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.actor.use_kl_loss=true"]
STEPS = 100


def _frame(**series: float | np.ndarray) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    out = {k: (np.full(STEPS, v) if np.isscalar(v) else v) for k, v in series.items()}
    out["critic/score/mean"] = out["critic/score/mean"] + rng.normal(0, 0.01, STEPS)
    return pd.DataFrame(out, index=pd.Index(np.arange(1, STEPS + 1), name="step"))


def test_flat_groups_at_a_warm_temperature_and_a_high_score_double_n() -> None:
    # n=2 at score 0.8: 0.8^2 + 0.2^2 = 0.68 of the groups score alike; stalled, below saturation (0.8 < 0.9)
    cfg = load_config(None, [*GRPO, "actor_rollout_ref.rollout.n=2", "actor_rollout_ref.rollout.temperature=1.0"])
    result = suggest(cfg, _frame(**{"critic/score/mean": 0.8, "critic/score/max": 1.0, "critic/score/min": 0.0,
                                    "critic/advantages/max": 0.7, "critic/advantages/min": -0.7,
                                    "actor/entropy": 0.4}))
    assert result.decided_by is not None and result.decided_by.id == "AD008"
    assert [(c.key, c.new) for c in result.changes] == [("actor_rollout_ref.rollout.n", 4)]
    assert result.decided_by.harm_held  # the warning says which harm held


def test_the_same_groups_at_a_saturated_score_change_nothing() -> None:
    # n=5 at 0.985 (the published GPG Megatron run's last tenth): 0.985^5 = 0.93 of groups all right, saturated
    cfg = load_config(None, [*GRPO, "actor_rollout_ref.rollout.n=5"])
    result = suggest(cfg, _frame(**{"critic/score/mean": 0.985, "critic/score/max": 1.0, "critic/score/min": 0.0,
                                    "critic/advantages/max": 0.8, "critic/advantages/min": -1.8,
                                    "actor/entropy": 0.3}))
    assert not result.changes


@pytest.mark.parametrize(("lr", "expected"), [(2e-8, 1e-6), (5e-8, None), (5e-7, None)])
def test_a_learning_rate_too_low_is_raised(lr: float, expected: float | None) -> None:
    cfg = load_config(None, [*GRPO, "actor_rollout_ref.rollout.n=5", "actor_rollout_ref.actor.ppo_mini_batch_size=256",
                             "data.train_batch_size=1024", f"actor_rollout_ref.actor.optim.lr={lr}"])
    result = suggest(cfg, _frame(**{"critic/score/mean": 0.3, "critic/score/max": 1.0, "critic/score/min": 0.0,
                                    "critic/advantages/max": 0.8, "critic/advantages/min": -0.8,
                                    "actor/pg_clipfrac": 0.0002, "actor/ppo_kl": 1e-5, "actor/entropy": 0.5}))
    assert any(d.rule.id == "CF006" and d.harmful for d in result.learning)
    if expected is None:  # within thirty times of the docs' 1e-6: warned, no change (the world's train split)
        assert not result.changes
    else:  # CF008 (any policy, lr below 3e-8) names the same cause and ranks first
        assert result.decided_by is not None and result.decided_by.id in ("CF006", "CF008")
        assert [(c.key, c.new) for c in result.changes] == [("actor_rollout_ref.actor.optim.lr",
                                                             pytest.approx(expected))]
