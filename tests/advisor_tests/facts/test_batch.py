"""The four batch layers, against verl's arithmetic (verl-internals §3; fsdp_workers.py:239-273)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from advisor import load_config
from advisor.facts._batch import batch_plan

SCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "verl_scripts" / "examples"


def test_worked_example_qwen3_8b_grpo() -> None:
    # examples/grpo_trainer/run_qwen3-8b.sh: B=1024, n=5, M=256, micro 32, 8 GPUs, P/R 512/1024
    plan = batch_plan(load_config(SCRIPTS / "grpo_trainer" / "run_qwen3-8b.sh"))
    assert plan.responses_per_step == 1024 * 5
    assert plan.responses_per_gpu == 1024 * 5 / 8
    assert plan.actor.mini_batch_responses == 256 * 5
    assert plan.actor.mini_batch_per_gpu == 256 * 5 // 8 == 160
    assert plan.actor.grad_accum_steps == 160 // 32 == 5
    assert plan.actor.optimizer_steps_per_step == 1024 // 256 == 4
    assert plan.actor.max_tokens_per_micro_batch == 32 * (512 + 1024)
    assert plan.rollout_replicas == 8 // 2  # rollout TP 2
    assert plan.critic is None  # GRPO: no critic
    assert plan.ref is not None and plan.ref.micro_batch_per_gpu == 32
    assert plan.old_log_prob.forward_passes_per_gpu == math.ceil(640 / 32)
    assert any("4 optimizer steps" in line and "5 micro-batches of 32" in line for line in plan.words)


def test_ppo_with_critic_and_dynamic_batch() -> None:
    # examples/ppo_trainer/run_qwen2-7b_seq_balance.sh: GAE, dynamic bsz, actor budget 24000, critic 98304
    plan = batch_plan(load_config(SCRIPTS / "ppo_trainer" / "run_qwen2-7b_seq_balance.sh"))
    assert plan.critic is not None and plan.critic.dynamic
    assert plan.actor.dynamic and plan.actor.max_tokens_per_micro_batch == 24000
    assert plan.critic.max_tokens_per_micro_batch == 98304
    assert plan.actor.optimizer_steps_per_step == 4096 // 512


def test_megatron_data_parallel_is_gpus_over_model_parallel() -> None:
    # run_qwen2-7b_math_gsm8k_megatron.sh: 8 GPUs, TP2 x PP2 -> DP 2; M=256, n=1 -> 128 per DP rank
    plan = batch_plan(load_config(SCRIPTS / "ppo_trainer" / "run_qwen2-7b_math_gsm8k_megatron.sh"))
    assert plan.data_parallel == 8 // (2 * 2)
    assert plan.actor.mini_batch_per_gpu == 256 * 1 // 2


@settings(max_examples=80, deadline=None)
@given(B=st.integers(1, 512), n=st.integers(1, 16), M=st.integers(1, 512), E=st.integers(1, 4),
       gpus=st.sampled_from([1, 2, 4, 8]), sp=st.sampled_from([1, 2]))
def test_optimizer_steps_follow_verl(B: int, n: int, M: int, E: int, gpus: int, sp: int) -> None:
    assume(gpus % sp == 0)
    cfg = load_config(None, [f"data.train_batch_size={B}", f"actor_rollout_ref.rollout.n={n}",
                             f"actor_rollout_ref.actor.ppo_mini_batch_size={M}",
                             f"actor_rollout_ref.actor.ppo_epochs={E}",
                             f"trainer.n_gpus_per_node={gpus}",
                             f"actor_rollout_ref.actor.ulysses_sequence_parallel_size={sp}"])
    plan = batch_plan(cfg)
    dp = gpus // sp
    mini = M * n // dp  # fsdp_workers.py:241-242, silently floored
    assert plan.actor.mini_batch_per_gpu == mini
    if mini:
        # dp_actor.py: data.split(mini') over the rank's B*n/dp responses, ppo_epochs times
        assert plan.actor.optimizer_steps_per_step == E * math.ceil(B * n / dp / mini)


@pytest.mark.parametrize("script", sorted(SCRIPTS.rglob("*.sh")), ids=lambda p: p.name)
def test_plan_words_exist_for_every_example(script: Path) -> None:
    cfg = load_config(script)
    plan = batch_plan(cfg)
    assert plan.words and plan.words[0].startswith("Each training step samples")


@pytest.mark.parametrize("version", ["0.4.1", "0.7.1", "0.8.0", "0.9.1"])
def test_gen_batch_size_is_a_batch_layer_verl_reads(version: str) -> None:
    # ray_trainer.py builds the train dataloader with data.get("gen_batch_size", train_batch_size)
    # (0.4.1 :505, 0.7.1 :348, 0.8.0 :410); 0.9 has the key in its core config (V1 fetch granularity)
    plus = "+" if version != "0.9.1" else ""
    cfg = load_config(None, ["data.train_batch_size=64", "actor_rollout_ref.rollout.n=4",
                             f"{plus}data.gen_batch_size=96"], verl_version=version)
    assert not [f for f in cfg.findings if f.id in ("L001", "L007")]
    plan = batch_plan(cfg)
    assert plan.generation_prompts == 96
    assert any("96 × n = 384 responses a generation round" in w for w in plan.words)


@pytest.mark.parametrize("key", ["actor_rollout_ref.actor.ulysses_sequence_parallel_size",
                                 "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size"])
def test_ulysses_size_is_read_from_the_engine_config_too(key: str) -> None:
    # 0.9.1 verl/workers/config/actor.py:328-329: the deprecated actor key, when > 1, is copied into fsdp_config;
    # verl main's examples set fsdp_config's directly (examples/grpo_trainer/run_qwen3_8b_fsdp.sh)
    cfg = load_config(None, [f"{key}=4", "trainer.n_gpus_per_node=8"], verl_version="0.9.1")
    plan = batch_plan(cfg)
    assert (plan.sequence_parallel, plan.data_parallel) == (4, 8 // 4)
