"""The actor's mean learning rate under verl's warm-up (advisor.playbook._derived) and CF009, which reads it.

verl ramps the rate by step / num_warmup_steps until that step (get_constant_schedule_with_warmup,
verl/utils/torch_functional.py:778-781 @0.7.1), with num_warmup_steps = lr_warmup_steps when positive, else
int(lr_warmup_steps_ratio x total steps) (verl/workers/fsdp_workers.py:652-660 @0.7.1). Over T steps with a warm-up of
W >= T steps the rate therefore averages lr x (0 + 1 + ... + (T - 1)) / (W T) = lr x (T - 1) / 2W: the expected numbers
below come from that sum, not from the code.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor import load_config
from advisor.playbook import suggest
from advisor.playbook._derived import mean_warmup_factor, warmup_steps

A = "actor_rollout_ref.actor."
# world train seed 137 (bench/world/FITS.md): GRPO, one epoch, lr 5.98e-7, a 33-step warm-up in a 12-step run
RUN = ["actor_rollout_ref.rollout.name=vllm", "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=8",
       "data.train_batch_size=16", f"{A}ppo_mini_batch_size=16", f"{A}optim.lr=5.98e-7",
       "trainer.total_training_steps=12"]
STEPS = 12


@pytest.mark.parametrize(("warmup", "total", "expected"), [
    (33, 12, 11 / 66),  # (T - 1) / 2W
    (12, 12, 11 / 24),  # a warm-up exactly as long as the run never reaches the rate either
    (4, 12, (0 + 1 + 2 + 3) / 4 / 12 + 8 / 12),  # 4 ramp steps, then 8 at the full rate
    (0, 12, 1.0),  # no warm-up
])
def test_the_mean_warmup_factor_is_verls_ramp_averaged(warmup: int, total: int, expected: float) -> None:
    assert mean_warmup_factor(warmup, total) == pytest.approx(expected)


def test_the_warmup_steps_come_from_the_ratio_when_lr_warmup_steps_is_not_positive() -> None:
    cfg = load_config(None, [*RUN, f"{A}optim.lr_warmup_steps=-1", f"{A}optim.lr_warmup_steps_ratio=0.5"])
    assert warmup_steps(cfg, 12) == 6  # int(0.5 x 12)
    cfg = load_config(None, [*RUN, f"{A}optim.lr_warmup_steps=33", f"{A}optim.lr_warmup_steps_ratio=0.5"])
    assert warmup_steps(cfg, 12) == 33  # lr_warmup_steps wins when positive


def frame(lr: list[float]) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    score = 0.5 + rng.normal(0, 0.05, STEPS)
    return pd.DataFrame({"actor/lr": lr, "critic/score/mean": score, "critic/score/max": 1.0, "critic/score/min": 0.0},
                        index=pd.Index(np.arange(1, STEPS + 1), name="step"))


def ramp(lr: float, warmup: int) -> list[float]:
    """actor/lr as verl 0.7's legacy worker logs it: the rate of step k, lr x (k - 1) / W."""
    return [lr * min(1.0, k / warmup) for k in range(STEPS)]


def _cf009(result):
    return next((d for d in result.diagnoses if d.rule.id == "CF009"), None)


def test_a_warmup_longer_than_the_run_at_a_low_rate_goes_back_to_verls_none() -> None:
    cfg = load_config(None, [*RUN, f"{A}optim.lr_warmup_steps=33"])
    result = suggest(cfg, frame(ramp(5.98e-7, 33)))
    named = _cf009(result)
    assert named is not None and result.decided_by is not None and result.decided_by.id == "CF009"
    # verl's default, no warm-up (optim/fsdp.yaml:24 @0.7.1), and nothing else
    assert list(result.overrides) == [f"{A}optim.lr_warmup_steps=-1"]
    # the arithmetic, with the run's numbers: 5.98e-7 x 11 / 66
    assert f"x 0.167 = {5.98e-7 * 11 / 66:.3g}" in named.summary


def test_a_warmup_from_the_ratio_goes_back_by_the_ratio() -> None:
    cfg = load_config(None, [*RUN, f"{A}optim.lr_warmup_steps_ratio=3.0"])  # 36 warm-up steps
    result = suggest(cfg, frame(ramp(5.98e-7, 36)))
    assert _cf009(result) is not None
    # lr_warmup_steps is verl's -1 here: the ratio is the key in effect (fsdp_workers.py:652-660 @0.7.1)
    assert list(result.overrides) == [f"{A}optim.lr_warmup_steps_ratio=0.0"]


@pytest.mark.parametrize("extra", [
    [f"{A}optim.lr=1.89e-6", f"{A}optim.lr_warmup_steps=47"],  # world train 68: mean rate 2.2e-7, healthy
    [f"{A}optim.lr_warmup_steps=33", f"{A}ppo_epochs=2"],  # two epochs: each step applies the rate twice
    [f"{A}optim.lr_warmup_steps=4"],  # a warm-up that ends early in the run
])
def test_cf009_stays_quiet_where_the_rate_the_updates_use_is_not_low(extra: list[str]) -> None:
    cfg = load_config(None, [*RUN, *extra])
    lr, warmup = float(cfg.get(f"{A}optim.lr")), int(cfg.get(f"{A}optim.lr_warmup_steps"))
    result = suggest(cfg, frame(ramp(lr, warmup)))
    assert not any(d.rule.id == "CF009" for d in result.diagnoses)


def test_without_a_stated_total_of_steps_cf009_cannot_say_and_stays_quiet() -> None:
    cfg = load_config(None, [c for c in RUN if not c.startswith("trainer.total_training_steps")]
                      + [f"{A}optim.lr_warmup_steps=33"])
    result = suggest(cfg, frame(ramp(5.98e-7, 33)))
    assert not any(d.rule.id == "CF009" for d in result.diagnoses)


def test_a_warmup_that_outlasts_the_run_explains_updates_too_small() -> None:
    # world train 802 / 813 (bench/world/FITS.md): a climbing warm-up and CF006's reading (pg_clipfrac under 0.001, a
    # stalled score, advantages with signal): the warm-up is why the updates are small, so CF009 decides (as CF008
    # does for a constant rate far too low) and its diff is verl's no-warm-up default
    cfg = load_config(None, [*RUN, f"{A}optim.lr_warmup_steps=33", f"{A}ppo_mini_batch_size=8"])  # two mini-batches
    run = frame(ramp(5.98e-7, 33)).assign(**{"actor/pg_clipfrac": 0.0002, "critic/advantages/max": 1.5})
    result = suggest(cfg, run)
    ids = [d.rule.id for d in result.diagnoses]
    assert "CF006" in ids and "CF009" in ids
    assert result.decided_by is not None and result.decided_by.id == "CF009"
    assert list(result.overrides) == [f"{A}optim.lr_warmup_steps=-1"]
