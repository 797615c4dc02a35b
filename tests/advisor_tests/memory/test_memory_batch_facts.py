"""The memory model takes the batch layers from advisor.facts' BatchPlan, and says what it assumes for one the
batch facts call unknown (a train_batch_size of null: the plan has no prompts per step)."""

from __future__ import annotations

from memory_validation import GRPO_7B

from advisor import load_config
from advisor.facts import batch_plan
from advisor.memory import estimate_memory
from advisor.memory._constants import constants
from advisor.memory._models import resolve_model
from advisor.memory._read import read_workload


def _cfg(*overrides: str):
    return load_config(None, verl_version="0.8.0", overrides=[*GRPO_7B, *overrides])


def test_the_workload_batch_is_the_plans() -> None:
    cfg = _cfg("data.train_batch_size=96", "actor_rollout_ref.rollout.n=5",
               "actor_rollout_ref.actor.ppo_mini_batch_size=24")
    plan = batch_plan(cfg)
    work = read_workload(cfg, resolve_model(cfg), constants())
    assert (work.batch.train_batch, work.batch.n, work.batch.mini_batch) == (96, 5, 24)
    assert (plan.prompts_per_step, plan.n, plan.actor.mini_batch_prompts) == (96, 5, 24)
    assert not any("assumed" in note and "train_batch_size" in note for note in work.notes)


def test_an_unknown_train_batch_size_is_named_as_assumed() -> None:
    cfg = _cfg("data.train_batch_size=null")
    assert batch_plan(cfg).prompts_per_step is None  # the batch facts: unknown
    estimate = estimate_memory(cfg, gpu="H100")
    said = [a for a in estimate.assumptions if "data.train_batch_size" in a]
    assert said and "assumed 1024" in said[0]  # verl's default (trainer/config/ppo_trainer.yaml: 1024)
