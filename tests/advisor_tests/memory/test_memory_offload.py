"""Each FSDP offload flag moves exactly the terms verl 0.9.1 moves, phase by phase.

verl 0.9.1's engine workers switch state with the engine's mode context (verl/workers/engine/base.py:314-336):
eval mode (log-prob and value forwards) loads the parameters of a param-offloaded model and never the
optimizer (:320-321); train mode (the update) loads the parameters, their gradients and an offloaded optimizer
for the whole update (:322-328, around every mini batch: engine_workers.py:281-283); leaving either puts them
back on the CPU (:334-336). Rollout: the actor shard is loaded for the weight sync and offloaded before the
KV cache comes back (engine_workers.py:785-823). The reference is built forward-only, CPU-offloaded whatever
its flags (engine/fsdp/transformer_impl.py:432-435 FSDP1 CPUOffload, 459-463 FSDP2 CPUOffloadPolicy); FSDP2's
offload_policy keeps the actor's or critic's shard, gradients and optimizer step on the CPU (459-463).

Expected sizes are written out here: fp32 shards of Qwen2.5-7B over 8 GPUs.
"""

from __future__ import annotations

import pytest

from advisor import load_config
from advisor.memory import estimate_memory

GIB = 1024**3
ACTOR_PARAMS = 7_615_616_512  # Qwen2.5-7B (knowledge/models.yaml)
CRITIC_PARAMS = ACTOR_PARAMS - 152064 * 3584  # the value head replaces the untied lm_head
ACTOR_SHARD = 4 * ACTOR_PARAMS / 8 / GIB  # fp32 (fsdp_config.model_dtype default) over the 8-GPU world
CRITIC_SHARD = 4 * CRITIC_PARAMS / 8 / GIB
BASE = [
    "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "algorithm.adv_estimator=gae",
    "critic.model.path=Qwen/Qwen2.5-7B-Instruct", "data.train_files=/data/gsm8k/train.parquet",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4", "critic.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
]
PHASES = ("generate", "weight_sync", "old_log_prob", "ref_log_prob", "critic_values", "critic_update", "actor_update")


def _estimate(*overrides: str):
    return estimate_memory(load_config(None, verl_version="0.9.1", overrides=[*BASE, *overrides]), gpu="H100")


def _part(stage, prefix: str) -> float:
    return sum(gib for _cat, label, gib in stage.details if label.startswith(prefix))


def _actor_params(stage) -> float:
    return _part(stage, "actor parameters") + _part(stage, "actor shard reloaded")


def _where(estimate, measure) -> set[str]:
    return {s.stage for s in estimate.stages if measure(s) > 0}


def test_without_offload_the_actor_and_critic_state_stays_on_the_gpu_in_every_phase():
    est = _estimate()
    for stage in est.stages:
        assert _actor_params(stage) == pytest.approx(ACTOR_SHARD, rel=0.01), stage.stage
        assert _part(stage, "critic parameters") == pytest.approx(CRITIC_SHARD, rel=0.01), stage.stage
        assert _part(stage, "actor Adam") == pytest.approx(2 * ACTOR_SHARD, rel=0.01), stage.stage
        assert _part(stage, "critic Adam") == pytest.approx(2 * CRITIC_SHARD, rel=0.01), stage.stage


def test_actor_param_offload_loads_the_shard_for_the_sync_the_forwards_and_the_update_only():
    est = _estimate("actor_rollout_ref.actor.fsdp_config.param_offload=True")
    # the reference is its own model (no LoRA): the actor stays on the CPU for its forward
    assert _where(est, _actor_params) == {"weight_sync", "old_log_prob", "actor_update"}
    for name in ("weight_sync", "old_log_prob", "actor_update"):
        assert _actor_params(est.stage(name)) == pytest.approx(ACTOR_SHARD, rel=0.01)
    # the optimizer is not moved by this flag; the gradients exist only in the update
    assert _where(est, lambda s: _part(s, "actor Adam")) == set(PHASES)
    assert _where(est, lambda s: _part(s, "actor gradients")) == {"actor_update"}


def test_actor_optimizer_offload_keeps_adam_on_the_cpu_except_for_the_whole_update():
    est = _estimate("actor_rollout_ref.actor.fsdp_config.optimizer_offload=True")
    assert _where(est, lambda s: _part(s, "actor Adam")) == {"actor_update"}
    assert _part(est.stage("actor_update"), "actor Adam") == pytest.approx(2 * ACTOR_SHARD, rel=0.01)
    assert _where(est, _actor_params) == set(PHASES)


def test_fsdp2_offload_policy_keeps_the_actor_shard_gradients_and_adam_on_the_cpu_in_every_phase():
    est = _estimate("actor_rollout_ref.actor.strategy=fsdp2", "actor_rollout_ref.actor.fsdp_config.offload_policy=True")
    assert _where(est, lambda s: _actor_params(s) + _part(s, "actor Adam") + _part(s, "actor gradients")) == set()
    # what is on the GPU is the unit being computed
    assert _part(est.stage("actor_update"), "gathered FSDP units") > 0
    host = {label for label, _gib in est.host.details}
    assert {"actor parameters offloaded", "actor Adam states offloaded",
            "actor gradients (FSDP2 offload_policy)"} <= host


def test_critic_param_offload_loads_the_critic_for_its_own_phases_only():
    # verl >= 0.8 names the critic's FSDP flags critic.fsdp.* (trainer/config/critic/dp_critic.yaml)
    est = _estimate("critic.fsdp.param_offload=True")
    assert _where(est, lambda s: _part(s, "critic parameters")) == {"critic_values", "critic_update"}
    assert _part(est.stage("critic_update"), "critic parameters") == pytest.approx(CRITIC_SHARD, rel=0.01)


def test_critic_optimizer_offload_keeps_its_adam_on_the_cpu_except_for_its_update():
    est = _estimate("critic.fsdp.optimizer_offload=True")
    assert _where(est, lambda s: _part(s, "critic Adam")) == {"critic_update"}
    assert _part(est.stage("critic_update"), "critic Adam") == pytest.approx(2 * CRITIC_SHARD, rel=0.01)


def test_the_reference_is_cpu_offloaded_whatever_its_flag_says():
    plain, flagged = _estimate(), _estimate("actor_rollout_ref.ref.fsdp_config.param_offload=True")
    for a, b in zip(plain.stages, flagged.stages, strict=True):
        assert a.peak_gib == pytest.approx(b.peak_gib), a.stage
    ref = plain.stage("ref_log_prob")
    # only the unit being computed, in bf16: the root (embedding + lm_head + norm) and two decoder layers
    root = 2 * (2 * 152064 * 3584 + 3584)
    layer = 2 * (3584 * 3584 * 2 + 2 * 3584 * 512 + 3 * 3584 * 18944 + 2 * 3584 + 3584 + 2 * 512)
    assert _part(ref, "reference model units gathered from CPU") == pytest.approx((root + 2 * layer) / GIB, rel=0.02)
    assert _part(ref, "reference model (") == 0.0
