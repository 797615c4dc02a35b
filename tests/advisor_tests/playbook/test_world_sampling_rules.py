"""The sampling and group rules fitted on the intervention-labelled world's train split (issue 35, item 4), end to end.

Expected values come from verl or a formula, not from the code: verl's default temperature is 1.0
(verl/trainer/config/rollout/rollout.yaml:17 @0.7.1), verl's examples sample 5 responses per prompt
(examples/grpo_trainer/run_qwen3_8b_fsdp.sh), a fix expression doubles the run's own value, and verl trains the
policy at the rollout temperature (dp_actor.py:368 @0.7.1), so the step on the sampled policy is lr / temperature.
The score series are world train records (bench/world/FITS.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor import load_config
from advisor.playbook import suggest

N = "actor_rollout_ref.rollout.n"
T = "actor_rollout_ref.rollout.temperature"
LR = "actor_rollout_ref.actor.optim.lr"
BASE = ["actor_rollout_ref.rollout.name=vllm"]
# world 86 (rloo, n=6, temperature 0.384, lr 1.24e-6): the score climbed to 0.90 and fell back
W86 = [0.510, 0.750, 0.615, 0.823, 0.896, 0.573, 0.562, 0.521, 0.552, 0.573, 0.781, 0.667]
# world 198 (grpo, n=2): the score stalled around 0.47
W198 = [0.453, 0.594, 0.297, 0.469, 0.531, 0.641, 0.438, 0.594, 0.484, 0.375, 0.453, 0.344]
# world 158 (grpo, n=1): the score climbed 0.56 -> 0.75
W158 = [0.562, 0.562, 0.562, 0.562, 0.500, 0.562, 0.625, 0.625, 0.688, 0.688, 0.625, 0.750]


def frame(score: list[float], **constant: float) -> pd.DataFrame:
    steps = len(score)
    columns = {"critic/score/mean": score, "critic/score/max": [1.0] * steps, "critic/score/min": [0.0] * steps,
               **{name: [value] * steps for name, value in constant.items()}}
    return pd.DataFrame(columns, index=pd.Index(np.arange(1, steps + 1), name="step"))


def changes(result) -> list[tuple[str, object]]:
    return [(c.key, c.new) for c in result.changes]


def diagnosis(result, rule_id: str):
    return next((d for d in result.diagnoses if d.rule.id == rule_id), None)


def rloo(temperature: float, lr: float) -> list[str]:
    return [*BASE, "algorithm.adv_estimator=rloo", f"{N}=6", f"{T}={temperature}", f"{LR}={lr}"]


# --- AD012: a cold temperature and the step it makes of the lr ---------------------------------------------------


def test_a_cold_stalled_run_goes_back_to_verls_temperature() -> None:
    result = suggest(load_config(None, rloo(0.384, 1.24e-6)), frame(W86, **{"actor/lr": 1.24e-6}))
    assert result.decided_by is not None and result.decided_by.id == "AD012"
    assert changes(result) == [(T, 1.0)]
    # the summary carries the run's own arithmetic: 1.24e-6 / 0.384
    assert f"{1.24e-6 / 0.384:.3g}" in result.decided_by.summary
    assert result.decided_by.harm_held


def test_the_step_reads_the_logged_lr_before_the_config() -> None:
    # a warm-up holds the logged lr at a tenth of the config's: 1.24e-7 / 0.384 is under the bound
    result = suggest(load_config(None, rloo(0.384, 1.24e-6)), frame(W86, **{"actor/lr": 1.24e-7}))
    assert diagnosis(result, "AD012") is None


@pytest.mark.parametrize(("temperature", "lr"), [(0.384, 1.0e-6), (0.6, 1.24e-6), (0.0, 1.24e-6)])
def test_below_the_bound_or_above_half_the_default_it_stays_quiet(temperature: float, lr: float) -> None:
    # 1e-6 / 0.384 = 2.6e-6 is under 3e-6; at 0.6 the temperature is not under half verl's 1.0; temperature 0 is
    # greedy decoding, which verl does not divide by
    result = suggest(load_config(None, rloo(temperature, lr)), frame(W86, **{"actor/lr": lr}))
    assert diagnosis(result, "AD012") is None


def test_a_climbing_score_is_a_trend_only() -> None:
    climbing = list(np.linspace(0.5, 0.8, 12))
    result = suggest(load_config(None, rloo(0.384, 1.24e-6)), frame(climbing, **{"actor/lr": 1.24e-6}))
    found = diagnosis(result, "AD012")
    assert found is not None and not found.harmful
    assert not result.changes


# --- AD011: half the groups flat, at any score and temperature ----------------------------------------------------


def grpo(n: int) -> list[str]:
    return [*BASE, "algorithm.adv_estimator=grpo", f"{N}={n}", f"{T}=0.86"]


def test_two_responses_per_prompt_with_a_stalled_score_go_to_five() -> None:
    result = suggest(load_config(None, grpo(2)), frame(W198))
    assert result.decided_by is not None and result.decided_by.id == "AD011"
    assert changes(result) == [(N, 5)]
    # p^2 + (1-p)^2 at the window median score
    p = float(np.median(W198))
    assert f"{p**2 + (1 - p) ** 2:.0%}" in result.decided_by.summary


def test_five_responses_at_a_low_stalled_score_are_doubled() -> None:
    # about 0.1^5 + 0.9^5 = 0.59 of the groups are flat, the score drifting down; n is already verl's 5, so the fix
    # doubles it
    score = list(np.linspace(0.12, 0.08, 12))
    result = suggest(load_config(None, grpo(5)), frame(score))
    found = diagnosis(result, "AD011")
    assert found is not None and found.harmful
    assert (N, 10) in [(c.key, c.new) for _, fix in found.fixes for c in fix]


def test_six_responses_at_the_same_score_stay_quiet() -> None:
    # 0.47^6 + 0.53^6 = 0.03 of the groups are flat
    assert diagnosis(suggest(load_config(None, grpo(6)), frame(W198)), "AD011") is None


# --- AD002: one response per prompt -------------------------------------------------------------------------------


def test_one_response_per_prompt_with_a_climbing_score_changes_nothing() -> None:
    result = suggest(load_config(None, grpo(1)), frame(W158, **{"critic/advantages/mean": 0.3}))
    found = diagnosis(result, "AD002")
    assert found is not None and not found.harmful
    assert not result.changes


def test_one_response_per_prompt_with_a_flat_score_goes_to_five() -> None:
    flat = list(np.linspace(0.52, 0.48, 12))
    result = suggest(load_config(None, grpo(1)), frame(flat, **{"critic/advantages/mean": 0.3}))
    assert result.decided_by is not None and result.decided_by.id == "AD002"
    assert changes(result) == [(N, 5)]
