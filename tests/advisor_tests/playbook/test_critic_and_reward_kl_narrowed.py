"""CR001 and KL002 narrowed to the runs where their cause is there (issue 35: the corpus bench's healthy PPO runs).

CR001 (a critic that is not learning) fires on a critic whose explained variance never left its first step's value
and stays quiet on one that rose from it and levelled off (how much of Var(returns) any critic can explain is the
reward's: verl's vf_explained_var = 1 - Var(returns - values) / Var(returns), metric_utils.py:184 @ v0.7.1). Its fix
puts the critic lr back to verl's default, 1e-5 (verl/trainer/config/critic/critic.yaml:19 @ v0.7.1).

KL002's stall (the score flat over the second half) counts only where the in-reward penalty is above the highest step
healthy published verl runs logged at the same progress: the expected top is read here from
knowledge/published_envelope.yaml itself, not from the code under test.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from advisor import load_config
from advisor.datafiles import knowledge_dir
from advisor.playbook import suggest

STEPS = 50
PPO = ["actor_rollout_ref.rollout.name=vllm", "algorithm.adv_estimator=gae", "data.train_batch_size=256",
       "actor_rollout_ref.actor.ppo_mini_batch_size=64", f"trainer.total_training_steps={STEPS}"]
REWARD_KL = [*PPO, "algorithm.use_kl_in_reward=true"]
# the score climbs over the first half and is flat over the second (a stall, at 0.72 of a 0..1 reward: not saturated)
SCORE = np.concatenate([np.linspace(0.4, 0.72, STEPS // 2), np.full(STEPS - STEPS // 2, 0.72)])


def frame(**series: np.ndarray | float) -> pd.DataFrame:
    noise = np.random.default_rng(0).normal(0, 0.005, STEPS)
    out = {"critic/score/mean": SCORE + noise, "critic/score/max": np.ones(STEPS), "critic/score/min": np.zeros(STEPS)}
    out.update({name: np.full(STEPS, float(v)) if np.isscalar(v) else np.asarray(v, dtype=float)
                for name, v in series.items()})
    return pd.DataFrame(out, index=pd.Index(np.arange(1, STEPS + 1), name="step"))


def fired(result, rule_id: str) -> bool:
    return any(d.rule.id == rule_id and d.harmful for d in result.diagnoses)


def keys(result) -> list[str]:
    return [c.key for c in result.changes]


# --- CR001 ----------------------------------------------------------------------------------------------------------

def test_a_critic_that_learned_and_levelled_off_low_is_left_alone() -> None:
    # 0 before any update (the first logged step), 0.2 by step 5 and there to the end: it learned, then the returns'
    # predictable share was explained; raising its lr cannot raise that
    ev = np.concatenate([np.linspace(0.0, 0.2, 5), 0.2 + np.random.default_rng(1).normal(0, 0.02, STEPS - 5)])
    result = suggest(load_config(None, PPO), frame(**{"critic/vf_explained_var": ev}))
    assert not fired(result, "CR001")
    assert "critic.optim.lr" not in keys(result)


def test_a_critic_that_never_left_its_first_value_is_not_learning() -> None:
    result = suggest(load_config(None, [*PPO, "critic.optim.lr=1e-8"]),
                     frame(**{"critic/vf_explained_var": 0.001}))
    assert result.decided_by is not None and result.decided_by.id == "CR001"
    assert [(c.key, c.new) for c in result.changes] == [("critic.optim.lr", pytest.approx(1e-5))]


@pytest.mark.parametrize(("peak", "fires"), [(0.009, True), (0.011, False)])
def test_the_rise_that_counts_as_learned_is_one_hundredth_of_the_returns_variance(peak: float, fires: bool) -> None:
    # a plateau at `peak` from step 10 on: its 9-step rolling median is `peak` exactly, the first value 0
    ev = np.concatenate([np.linspace(0.0, peak, 10), np.full(STEPS - 10, peak)])
    result = suggest(load_config(None, [*PPO, "critic.optim.lr=1e-8"]), frame(**{"critic/vf_explained_var": ev}))
    assert fired(result, "CR001") is fires


# --- KL002 ----------------------------------------------------------------------------------------------------------

def _published_top_in_the_last_tenth() -> float:
    """The highest step any published run with one response per prompt (a critic's PPO) logged in its last tenth."""
    envelope = yaml.safe_load((knowledge_dir() / "published_envelope.yaml").read_text())
    top = 0.0
    for run in envelope["runs"].values():
        entry = (run.get("metrics") or {}).get("actor/reward_kl_penalty")
        if entry and run["config"].get("n") == 1 and entry["max"][-1] is not None:
            top = max(top, float(entry["max"][-1]))
    assert top > 0
    return top


def _rising_to(level: float) -> np.ndarray:
    # from a tenth of `level` to `level` over the run: a rise past KL002's factor 3, still climbing at the end
    return np.linspace(level / 10, level, STEPS)


def test_a_rising_penalty_healthy_published_runs_also_reach_does_not_explain_a_stall() -> None:
    level = 0.5 * _published_top_in_the_last_tenth()
    result = suggest(load_config(None, REWARD_KL), frame(**{"actor/reward_kl_penalty": _rising_to(level)}))
    assert not fired(result, "KL002")
    assert not result.changes


def test_the_same_stall_beside_a_penalty_past_every_published_run_is_the_drift() -> None:
    level = 2.0 * _published_top_in_the_last_tenth()  # past the top, under beyond_published's 3x
    result = suggest(load_config(None, REWARD_KL), frame(**{"actor/reward_kl_penalty": _rising_to(level)}))
    assert result.decided_by is not None and result.decided_by.id == "KL002"
    assert "stalled" in result.decided_by.harm_held
