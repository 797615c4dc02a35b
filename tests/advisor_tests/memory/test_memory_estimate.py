"""Each memory term against its formula, computed here by hand (never from the estimator's own output)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_validation import GRPO_7B

from advisor import ConfigError, load_config
from advisor.memory import estimate_memory

VERL_SCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "verl_scripts"

GIB = 1024**3
H100_GIB = 81559 / 1024

# Qwen2.5-7B by hand (test_memory_models checks the same count against the published 7.61B)
H, FFN, KV, L, V = 3584, 18944, 512, 28, 152064
LAYER = 2 * H * H + 2 * H * KV + (H + 2 * KV) + 3 * H * FFN + 2 * H
P_7B = L * LAYER + 2 * V * H + H
GSM8K_TOKENS = 103 + 270  # knowledge/memory.yaml sequences: gsm8k
# verl 0.8.0 divides the logits by the temperature in place on a squeeze(0) view (transformer_impl.py:1111-1112
# @ 0.8.0): the update's backward holds four bf16 [tokens x vocab] buffers, entropy on or off
# (knowledge/memory_measured.yaml logits.update.0.8.0.on/off)
UPDATE_BYTES_PER_LOGIT = 8

BASE = list(GRPO_7B)


def cfg(*overrides: str):
    return load_config(None, verl_version="0.8.0", overrides=[*BASE, *overrides])


def part(estimate, stage: str, label_start: str) -> float:
    """GiB of the detail items of one stage whose label starts with ``label_start``."""
    return sum(gib for _cat, label, gib in estimate.stage(stage).details if label.startswith(label_start))


def test_fp32_adam_is_8_bytes_per_parameter_sharded_over_all_gpus():
    est = estimate_memory(cfg(), gpu="H100")
    assert part(est, "actor_update", "actor Adam") == pytest.approx(2 * 4 * P_7B / 8 / GIB)
    assert part(est, "actor_update", "actor parameters") == pytest.approx(4 * P_7B / 8 / GIB)
    assert part(est, "actor_update", "actor gradients") == pytest.approx(4 * P_7B / 8 / GIB)


def test_bf16_model_dtype_halves_parameters_and_adam():
    est = estimate_memory(cfg("actor_rollout_ref.actor.fsdp_config.model_dtype=bf16"), gpu="H100")
    assert part(est, "actor_update", "actor parameters") == pytest.approx(2 * P_7B / 8 / GIB)
    assert part(est, "actor_update", "actor Adam") == pytest.approx(2 * 2 * P_7B / 8 / GIB)


def test_fsdp_size_shards_over_the_group_not_the_world():
    est = estimate_memory(cfg("actor_rollout_ref.actor.fsdp_config.fsdp_size=4"), gpu="H100")
    assert part(est, "actor_update", "actor parameters") == pytest.approx(4 * P_7B / 4 / GIB)


def test_offloaded_actor_state_is_not_resident_during_generation():
    kept = estimate_memory(cfg(), gpu="H100")
    assert part(kept, "generate", "actor parameters") == pytest.approx(4 * P_7B / 8 / GIB)
    assert part(kept, "generate", "actor Adam") == pytest.approx(8 * P_7B / 8 / GIB)
    off = estimate_memory(cfg("actor_rollout_ref.actor.fsdp_config.param_offload=True",
                              "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True"), gpu="H100")
    assert part(off, "generate", "actor parameters") == 0
    assert part(off, "generate", "actor Adam") == 0
    # but the update loads both for its whole duration (fsdp_workers.py update_actor)
    assert part(off, "actor_update", "actor Adam") == pytest.approx(8 * P_7B / 8 / GIB)


def test_vllm_takes_gpu_memory_utilization_of_total_memory():
    est = estimate_memory(cfg("actor_rollout_ref.rollout.gpu_memory_utilization=0.6"), gpu="H100")
    engine = sum(gib for cat, label, gib in est.stage("generate").details
                 if label.lower().startswith("vllm") or label.startswith("KV cache"))
    assert engine == pytest.approx(0.6 * H100_GIB)
    assert part(est, "generate", "vllm weights") == pytest.approx(2 * P_7B / 2 / GIB)  # bf16 over rollout TP 2


def test_kv_capacity_is_the_budget_left_after_weights_and_profile():
    config = cfg("actor_rollout_ref.rollout.gpu_memory_utilization=0.6")
    est = estimate_memory(config, gpu="H100")
    seqs = config.get("actor_rollout_ref.rollout.max_num_seqs")  # 1024 since verl 0.8.0 (256 before)
    profile_bytes = 8192 * (H + 2 * FFN / 2) * 2 + seqs * V * 4  # max_num_batched_tokens path + fp32 sampler
    kv = 0.6 * H100_GIB - 2 * P_7B / 2 / GIB - profile_bytes / GIB - 0.16
    assert est.stage("generate").breakdown["kv_cache"] == pytest.approx(kv, rel=1e-6)


def test_engine_cannot_start_when_one_max_model_len_sequence_does_not_fit():
    # 2 x 28 x (4/2 kv heads per rank) x 128 x 2 B = 28 KiB per token; 131072 tokens = 3.5 GiB
    tiny = estimate_memory(cfg("actor_rollout_ref.rollout.gpu_memory_utilization=0.13",
                               "+actor_rollout_ref.rollout.max_model_len=131072"), gpu="H100")
    generate = tiny.stage("generate")
    assert generate.risk == "oom"
    assert "smaller than one max_model_len=131072 sequence (3.50 GiB)" in generate.reason
    fits = estimate_memory(cfg("actor_rollout_ref.rollout.gpu_memory_utilization=0.13",
                               "+actor_rollout_ref.rollout.max_model_len=1536"), gpu="H100")
    assert fits.stage("generate").reason is None


def test_weights_over_the_budget_stop_the_engine():
    est = estimate_memory(cfg("actor_rollout_ref.rollout.gpu_memory_utilization=0.1",
                              "actor_rollout_ref.rollout.tensor_model_parallel_size=1"), gpu="H100")
    assert "weights 14.2 GiB exceed the gpu_memory_utilization budget 8.0 GiB" in est.stage("generate").reason


def test_cuda_graphs_disappear_with_enforce_eager():
    assert part(estimate_memory(cfg(), gpu="H100"), "actor_update", "CUDA graphs") == pytest.approx(1.0)
    eager = estimate_memory(cfg("actor_rollout_ref.rollout.enforce_eager=True"), gpu="H100")
    assert eager.stage("actor_update").breakdown["cuda_graphs"] == 0


def test_free_cache_engine_false_keeps_the_engine_through_training():
    est = estimate_memory(cfg("actor_rollout_ref.rollout.free_cache_engine=False",
                              "actor_rollout_ref.rollout.gpu_memory_utilization=0.4"), gpu="H100")
    assert part(est, "actor_update", "inference engine kept awake") == pytest.approx(0.4 * H100_GIB)
    asleep = estimate_memory(cfg("actor_rollout_ref.rollout.gpu_memory_utilization=0.4"), gpu="H100")
    assert part(asleep, "actor_update", "inference engine kept awake") == 0


def test_update_logits_on_0_8_hold_the_in_place_divide_buffers_without_entropy():
    est = estimate_memory(cfg(), gpu="H100")
    tokens = 8 * GSM8K_TOKENS
    assert part(est, "actor_update", "logits") == pytest.approx(tokens * V * UPDATE_BYTES_PER_LOGIT / GIB)


def test_update_logits_on_0_8_are_the_same_with_entropy():
    est = estimate_memory(cfg("actor_rollout_ref.actor.entropy_coeff=0.001"), gpu="H100")
    tokens = 8 * GSM8K_TOKENS
    assert part(est, "actor_update", "logits") == pytest.approx(tokens * V * UPDATE_BYTES_PER_LOGIT / GIB)


def test_uncompiled_entropy_costs_the_measured_10_bytes_per_logit_without_grad():
    # knowledge/memory_measured.yaml logits.log_prob.0.9.1.eager: the bf16 logits (2) + fp32 softmax and the
    # fp32 logsumexp input under CUDA autocast (8). verl's docs estimate 7 (perf_tuning.rst:213-224).
    est = estimate_memory(cfg("actor_rollout_ref.actor.use_torch_compile=False"), gpu="H100")
    tokens = 8 * GSM8K_TOKENS
    assert part(est, "old_log_prob", "logits") == pytest.approx(tokens * V * 10 / GIB)


def test_gradient_checkpointing_keeps_one_hidden_state_per_layer_plus_one_layer():
    est = estimate_memory(cfg(), gpu="H100")
    tokens = 8 * GSM8K_TOKENS
    layer_bytes = 20 * H + 4 * KV + 8 * FFN  # knowledge/memory_measured.yaml act.full (tensors listed there)
    # each layer keeps its bf16 input (2 h bytes per token); the logits (2 B x V = 304 KB per token) outweigh one
    # recomputed layer (219 KB per token) and are freed before autograd reaches the last layer
    # (torch.utils.checkpoint recomputes on unpack), so the peak holds one of them, never both
    assert 2 * V > layer_bytes
    assert part(est, "actor_update", "activations") == pytest.approx(tokens * L * 2 * H / GIB)
    assert part(est, "actor_update", "logits") == pytest.approx(tokens * V * UPDATE_BYTES_PER_LOGIT / GIB)
    no_ckpt = estimate_memory(cfg("actor_rollout_ref.model.enable_gradient_checkpointing=False"), gpu="H100")
    assert part(no_ckpt, "actor_update", "activations") == pytest.approx(tokens * L * layer_bytes / GIB)
    # without recomputation every layer's activations are still held when the logit gradients exist
    assert part(no_ckpt, "actor_update", "logits") == pytest.approx(tokens * V * UPDATE_BYTES_PER_LOGIT / GIB)


def test_recomputed_layer_is_the_peak_when_it_outweighs_the_fused_logits():
    # use_fused_kernels: one 2048-row fp32 chunk of logits instead of tokens x V
    est = estimate_memory(cfg("actor_rollout_ref.model.use_fused_kernels=True",
                              "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32"), gpu="H100")
    tokens = 32 * GSM8K_TOKENS
    layer_bytes = 20 * H + 4 * KV + 8 * FFN  # knowledge/memory_measured.yaml act.full (tensors listed there)
    assert tokens * layer_bytes > 2048 * V * 4
    assert part(est, "actor_update", "logits") == 0
    assert part(est, "actor_update", "activations") == pytest.approx(tokens * (L * 2 * H + layer_bytes) / GIB)


def test_forward_holds_the_residual_stream_and_then_the_larger_of_a_layer_and_the_logits():
    est = estimate_memory(cfg(), gpu="H100")
    tokens = 8 * GSM8K_TOKENS
    # no grad: a layer's intermediates are gone before the lm_head runs
    assert part(est, "old_log_prob", "forward activations") == pytest.approx(tokens * 2 * 2 * H / GIB)
    assert part(est, "old_log_prob", "logits") == pytest.approx(tokens * V * 2 / GIB)


def test_without_remove_padding_every_sequence_is_padded_to_the_maximum():
    est = estimate_memory(cfg("actor_rollout_ref.model.use_remove_padding=False"), gpu="H100")
    assert part(est, "actor_update", "logits") == pytest.approx(8 * (512 + 1024) * V * UPDATE_BYTES_PER_LOGIT / GIB)


def test_unknown_dataset_assumes_full_length_sequences():
    est = estimate_memory(cfg("data.train_files=/data/secret/train.parquet"), gpu="H100")
    assert part(est, "actor_update", "logits") == pytest.approx(8 * 1536 * V * UPDATE_BYTES_PER_LOGIT / GIB)
    assert any("worst case" in a for a in est.assumptions)


def test_ulysses_splits_each_micro_batch_over_the_sequence_parallel_group():
    one = estimate_memory(cfg(), gpu="H100")
    two = estimate_memory(cfg("actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"), gpu="H100")
    assert part(two, "actor_update", "logits") == pytest.approx(part(one, "actor_update", "logits") / 2)


def test_dynamic_batch_packs_up_to_the_token_budget():
    est = estimate_memory(cfg("actor_rollout_ref.actor.use_dynamic_bsz=True",
                              "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096"), gpu="H100")
    assert part(est, "actor_update", "logits") == pytest.approx(4096 * V * UPDATE_BYTES_PER_LOGIT / GIB)


def test_deprecated_global_micro_batch_is_divided_by_data_parallel_size():
    est = estimate_memory(cfg("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null",
                              "actor_rollout_ref.actor.ppo_micro_batch_size=64"), gpu="H100")
    assert part(est, "actor_update", "logits") == pytest.approx(8 * GSM8K_TOKENS * V * UPDATE_BYTES_PER_LOGIT / GIB)


def test_reference_model_appears_only_with_a_kl_term():
    assert "ref_log_prob" not in [s.stage for s in estimate_memory(cfg(), gpu="H100").stages]
    est = estimate_memory(cfg("actor_rollout_ref.actor.use_kl_loss=True"), gpu="H100")
    assert "ref_log_prob" in [s.stage for s in est.stages]
    # FSDP keeps the reference model in CPU memory; only its fp32 shards are counted on the host
    assert dict(est.host.details)["reference model (FSDP CPUOffload)"] == pytest.approx(8 * 4 * P_7B / 8 / GIB)


def test_lora_trains_only_the_adapters_and_uses_the_actor_as_reference():
    r = 32
    lora = L * r * ((H + H) + 2 * (H + KV) + (H + H) + 2 * (H + FFN) + (FFN + H))
    est = estimate_memory(cfg("actor_rollout_ref.model.lora_rank=32", "actor_rollout_ref.actor.use_kl_loss=True"),
                          gpu="H100")
    assert part(est, "actor_update", "actor gradients") == pytest.approx(4 * lora / 8 / GIB)
    assert part(est, "actor_update", "actor Adam") == pytest.approx(8 * lora / 8 / GIB)
    assert part(est, "ref_log_prob", "actor parameters with LoRA disabled") > 0


def test_gae_adds_critic_phases_without_vocab_logits():
    est = estimate_memory(cfg("algorithm.adv_estimator=gae", "critic.ppo_micro_batch_size_per_gpu=8"), gpu="H100")
    stages = [s.stage for s in est.stages]
    assert {"critic_values", "critic_update"} <= set(stages)
    assert est.stage("critic_update").breakdown["logits"] == 0
    p_critic = P_7B - V * H  # the value head replaces the lm_head
    assert part(est, "critic_update", "critic Adam") == pytest.approx(8 * p_critic / 8 / GIB)


def test_megatron_shards_weights_over_tensor_and_pipeline_parallel():
    est = estimate_memory(_megatron_cfg(), gpu="H100")
    # bf16 weights 2 B and fp32 gradient buffer 4 B per parameter of the TP2 x PP2 shard holding the
    # embedding (the other pipeline stage holds the lm_head)
    body = P_7B - 2 * V * H
    shard = (body / 2 + V * H) / 2
    assert part(est, "actor_update", "actor parameters") == pytest.approx(2 * shard / GIB)
    assert part(est, "actor_update", "actor gradients") == pytest.approx(4 * shard / GIB)
    # distributed optimizer: 12 B per parameter over data parallel (8 / (2 x 2) = 2)
    assert part(est, "actor_update", "actor Adam") == pytest.approx(12 * shard / 2 / GIB)


def _megatron_cfg():
    # verl's example: Qwen2-7B, 8 GPUs, Megatron TP2 x PP2, no offload
    path = VERL_SCRIPTS / "examples/grpo_trainer/run_qwen2-7b_math_megatron.sh"
    return load_config(path, overrides=["data.train_files=/data/gsm8k/train.parquet"])


def test_risk_thresholds_are_80_and_95_percent():
    # the actor update does not depend on the GPU size (the engine's budget does), so scale the GPU
    peak = estimate_memory(cfg(), gpu="H100").stage("actor_update").peak_gib

    def risk(fraction: float) -> str:
        # the same GPU type (its NCCL NVLS buffers), resized
        return estimate_memory(cfg(), gpu="H100", gpu_memory_gib=peak / fraction).stage("actor_update").risk

    assert [risk(f) for f in (0.79, 0.81, 0.94, 0.96)] == ["ok", "tight", "tight", "oom"]
    assert estimate_memory(cfg(), gpu="H100", gpu_memory_gib=peak / 0.96).verdict == "oom"


def test_host_memory_is_checked_when_given():
    est = estimate_memory(cfg("actor_rollout_ref.actor.fsdp_config.optimizer_offload=True"), gpu="H100",
                          host_memory_gib=48)
    # 8 ranks x 8 B x P / 8 of Adam states on the host, plus the start-up checkpoint load
    assert dict(est.host.details)["actor Adam states offloaded"] == pytest.approx(8 * 8 * P_7B / 8 / GIB)
    assert est.host.risk == "oom"
    assert est.verdict == "oom"


def test_to_dict_has_the_issue_schema():
    out = estimate_memory(cfg(), gpu="H100").to_dict()
    assert {"gpu_memory_gib", "model", "stages", "verdict"} <= set(out)
    assert out["gpu_memory_gib"] == round(H100_GIB, 2)
    stage = out["stages"][0]
    assert {"stage", "peak_gib", "capacity_gib", "risk", "breakdown"} <= set(stage)
    assert set(stage["breakdown"]) == {"weights", "grads", "optimizer", "activations", "logits", "kv_cache",
                                       "cuda_graphs", "overhead"}
    assert out["verdict"] in ("ok", "tight", "oom")


def test_rows_give_one_row_per_phase():
    est = estimate_memory(cfg(), gpu="H100")
    rows = est.rows()
    assert [r["stage"] for r in rows] == [s.stage for s in est.stages]
    assert {"stage", "peak_gib", "capacity_gib", "percent", "risk", "largest"} <= set(rows[0])


def test_gpu_is_required():
    with pytest.raises(ConfigError, match="no GPU given"):
        estimate_memory(cfg())


_SLOW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SLOW
@given(micro=st.integers(min_value=1, max_value=63), response=st.integers(min_value=16, max_value=8192))
def test_estimate_never_decreases_as_micro_batch_or_sequence_grows(micro, response):
    def peaks(m: int, r: int) -> list[float]:
        est = estimate_memory(cfg(f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={m}",
                                  f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={m}",
                                  f"data.max_response_length={r}",
                                  "data.train_files=/data/unknown/train.parquet"), gpu="H100")
        return [s.peak_gib for s in est.stages]

    base = peaks(micro, response)
    for bigger in (peaks(micro + 1, response), peaks(micro, response + 512)):
        assert all(b >= a - 1e-9 for a, b in zip(base, bigger, strict=True))


def test_given_sequence_length_replaces_the_dataset_table():
    est = estimate_memory(cfg(), gpu="H100", sequence_tokens=1000)
    assert part(est, "actor_update", "logits") == pytest.approx(8 * 1000 * V * UPDATE_BYTES_PER_LOGIT / GIB)
    capped = estimate_memory(cfg(), gpu="H100", sequence_tokens=10**6)
    assert part(capped, "actor_update", "logits") == pytest.approx(8 * 1536 * V * UPDATE_BYTES_PER_LOGIT / GIB)


def test_megatron_critic_takes_the_actors_parallel_layout():
    # colocated workers share one process and one Megatron parallel state, initialised by the actor
    # (megatron_workers.py:1003-1009): critic.megatron.tensor/pipeline_model_parallel_size (default 1) are
    # ignored, so a GAE critic of the same backbone is cut TP2 x PP2 like the actor
    est = estimate_memory(load_config(VERL_SCRIPTS / "examples/grpo_trainer/run_qwen2-7b_math_megatron.sh",
                                      overrides=["data.train_files=/data/gsm8k/train.parquet",
                                                 "algorithm.adv_estimator=gae"]), gpu="H100")
    body = P_7B - 2 * V * H
    shard = (body / 2 + V * H) / 2  # the value head replaces the lm_head; stage 0 holds the embedding
    assert part(est, "critic_update", "critic parameters") == pytest.approx(2 * shard / GIB)
    assert part(est, "critic_update", "critic gradients") == pytest.approx(4 * shard / GIB)
    assert part(est, "critic_update", "critic Adam") == pytest.approx(12 * shard / 2 / GIB)


def test_vllm_refuses_to_start_without_gpu_memory_utilization_free():
    # vLLM >= 0.9.1 checks free >= gpu_memory_utilization x total at start-up; verl starts it after init_model,
    # when the Megatron actor holds bf16 weights (2 B), the fp32 gradient buffer (4 B) and the distributed
    # optimizer's fp32 main parameters (4 B / DP), and the reference its bf16 weights (2 B)
    est = estimate_memory(load_config(VERL_SCRIPTS / "examples/grpo_trainer/run_qwen2-7b_math_megatron.sh",
                                      overrides=["data.train_files=/data/gsm8k/train.parquet",
                                                 "actor_rollout_ref.rollout.gpu_memory_utilization=0.85"]),
                          gpu="H100")
    body = P_7B - 2 * V * H
    shard = (body / 2 + V * H) / 2
    at_start = 1.5 + (2 * shard + 4 * shard + 4 * shard / 2 + 2 * shard) / GIB
    reason = est.stage("generate").reason
    assert reason.startswith("vllm cannot start")
    assert f"training state {at_start:.1f} GiB" in reason
    assert est.verdict == "oom"
    fits = estimate_memory(_megatron_cfg(), gpu="H100")  # the script's own 0.6
    assert fits.stage("generate").reason is None


def test_null_max_model_len_follows_the_verl_version():
    # Qwen2.5-7B at rollout TP 2: 2 x 28 x 2 x 128 x 2 B = 28 KiB per token; max_position_embeddings 32768
    # = 0.875 GiB, more than the ~0.4 GiB of KV a 0.1 budget leaves; prompt + response (1536) = 42 MiB fits
    def reason(version: str, *extra: str):
        c = load_config(None, verl_version=version,
                        overrides=[*BASE, "actor_rollout_ref.rollout.gpu_memory_utilization=0.1",
                                   "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
                                   "actor_rollout_ref.rollout.max_num_seqs=256", *extra])
        return estimate_memory(c, gpu="H100").stage("generate").reason

    assert "max_model_len=32768" in reason("0.8.0.dev")  # null: max_position_embeddings (PR #5052)
    assert reason("0.8.0.dev", "actor_rollout_ref.rollout.max_model_len=1536") is None
    assert reason("0.6.1") is None  # null: prompt + response
    # 0.7.0 always gives the engine max_position_embeddings, whatever rollout.max_model_len says
    assert "max_model_len=32768" in reason("0.7.0", "actor_rollout_ref.rollout.max_model_len=1536")


@pytest.mark.parametrize("entropy, per_padded_logit", [
    # logits.padded.update.0.7.1.off (knowledge/memory_measured.yaml): 4 B; verl < 0.9 divides in place on the
    # base tensor in the padded branch, so no CopySlices
    ("0", 4.0),
    # logits.padded.update.0.7.1.on: 15 B at a response of half the row; its entropy part (15 - 4) is computed on
    # the response slice, here 1024 of 1536 tokens: 4 + 11 x (2/3) / (1/2)
    ("0.001", 4 + 11 * (1024 / 1536) / 0.5),
])
def test_padded_update_of_the_legacy_workers_uses_the_measured_padded_bytes(entropy, per_padded_logit):
    est = estimate_memory(load_config(None, verl_version="0.4.1", overrides=[
        *BASE, "actor_rollout_ref.model.use_remove_padding=False", f"actor_rollout_ref.actor.entropy_coeff={entropy}"]),
        gpu="H100")
    assert part(est, "actor_update", "logits") == pytest.approx(8 * (512 + 1024) * V * per_padded_logit / GIB)
