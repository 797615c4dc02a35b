"""Hybrid decoders (Gated DeltaNet, Mamba-2): the engine's cache per sequence against vLLM's own arithmetic.

Expected numbers are worked by hand from vLLM 0.11.0's code (the formulas are quoted beside each), not from
the code under test: mamba_utils.py:166-186 (gated_delta_net_state_shape), :115-140 (mamba2_state_shape),
:74-80 (states in the model dtype), models/config.py:314-394 (HybridAttentionMambaModelConfig: the attention
block is raised to 16 x cdiv(state page, 16 x one token's page) and each state page padded to it).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from advisor import load_config
from advisor.memory import estimate_memory, resolve_model
from advisor.memory._hybrid import attention_layers, state_bytes_per_sequence
from advisor.memory._models import kv_bytes_per_token, spec_from_hf_config
from advisor.memory._pool import sequence_cache


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_qwen35_moe_vllm_cache_per_sequence_by_hand():
    spec = resolve_model(model="Qwen/Qwen3.5-35B-A3B")
    # config.json: 40 layers, full_attention_interval 4 -> 10 full-attention, 30 Gated DeltaNet layers
    conv_dim = 128 * 16 * 2 + 128 * 32  # head_k_dim x num_k_heads x 2 + head_v_dim x num_v_heads = 8192
    state = ((4 - 1) * conv_dim + 32 * 128 * 128) * 2  # conv (kernel-1, conv_dim) + (v_heads, dk, dv), bf16
    token_page = 2 * 2 * 256 * 2  # FullAttentionSpec(block_size=1): K and V x 2 kv heads x 256 x bf16
    block = 16 * _cdiv(state, 16 * token_page)
    assert (state, token_page, block) == (1_097_728, 2048, 544)
    cache = sequence_cache(SimpleNamespace(tp=1, engine="vllm"), spec)
    assert cache.kv_per_token == 10 * token_page
    assert cache.state == 30 * block * token_page  # each state page padded to one attention page
    assert cache.block_tokens == block
    # one 4096-token sequence: its tokens in whole 544-token blocks, plus the 30 padded state pages
    assert cache.bytes_for(4096) == _cdiv(4096, block) * block * 10 * token_page + 30 * block * token_page


def test_gated_deltanet_state_matches_an_independent_count():
    # a Rust engine's test of the same model (public code-search index file 55053118975) asserts the recurrent
    # state of one sequence as 30 * (8192 * 3 + 32 * 128 * 128) elements, x 2 bytes in fp16
    spec = resolve_model(model="Qwen3.5-35B-A3B")
    assert state_bytes_per_sequence(spec, 1, 2) == 30 * (8192 * 3 + 32 * 128 * 128) * 2


@pytest.mark.parametrize("tp", [1, 2])
def test_nemotron_h_mamba2_cache_by_hand(tp):
    spec = resolve_model(model="nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert attention_layers(spec) == 6  # "*" blocks of hybrid_override_pattern; 23 "M" blocks keep a state
    inner = 64 * 64  # nemotron_h.py:492: intermediate_size = mamba_num_heads x mamba_head_dim
    conv = (4 - 1) * (inner + 2 * 8 * 128) // tp  # n_groups 8 divides tp: no extra groups
    ssm = 64 // tp * 64 * 128
    state = (conv + ssm) * 2
    token_page = 2 * (2 if tp == 1 else 1) * 128 * 2  # 2 kv heads split over tp
    block = 16 * _cdiv(state, 16 * token_page)
    cache = sequence_cache(SimpleNamespace(tp=tp, engine="vllm"), spec)
    assert cache.kv_per_token == 6 * token_page
    assert cache.state == 23 * block * token_page
    assert state_bytes_per_sequence(spec, tp, 2) == 23 * state  # SGLang and others: the raw state


def test_kv_per_token_counts_only_full_attention_layers():
    spec = resolve_model(model="Qwen3.5-27B")  # 64 layers, 16 of them full attention; 4 kv heads of 256
    assert kv_bytes_per_token(spec, 2) == 16 * 2 * 4 * 256 * 2


def test_a_qwen35_config_json_reads_as_the_catalog_entry():
    text = {"model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40,
            "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 248320,
            "max_position_embeddings": 262144, "tie_word_embeddings": False, "num_experts": 256,
            "num_experts_per_tok": 8, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"], "full_attention_interval": 4,
            "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "attn_output_gate": True,
            "mtp_num_hidden_layers": 1}
    text["layer_types"] = text["layer_types"] * 10
    spec = spec_from_hf_config({"model_type": "qwen3_5_moe", "text_config": text})
    catalog = resolve_model(model="Qwen3.5-35B-A3B")
    assert spec.params == catalog.params
    assert state_bytes_per_sequence(spec, 1, 2) == state_bytes_per_sequence(catalog, 1, 2)


def test_layer_types_that_are_not_an_interleave_are_refused():
    from advisor import ConfigError

    config = {"model_type": "qwen3_next", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
              "vocab_size": 10, "layer_types": ["full_attention", "linear_attention", "linear_attention",
                                                "linear_attention"], "linear_num_value_heads": 2}
    with pytest.raises(ConfigError, match="layer_types"):
        spec_from_hf_config(config)


def test_mtp_layers_count_only_when_verl_trains_them():
    base = ["actor_rollout_ref.model.path=XiaomiMiMo/MiMo-7B-RL"]
    off = resolve_model(load_config(None, overrides=base, verl_version="0.9.1"))
    on = resolve_model(load_config(None, overrides=[*base, "actor_rollout_ref.model.mtp.enable=True"],
                                   verl_version="0.9.1"))
    h, inter, heads, kv, d = 4096, 11008, 32, 8, 128  # MiMo-7B config.json; one MTP layer
    layer = h * heads * d * 2 + 2 * h * kv * d + (heads + 2 * kv) * d + 3 * h * inter + 2 * h  # attn + bias, MLP, norms
    mtp = 3 * h + 2 * h * h + layer  # two input norms + final norm, the 2h -> h projection, one decoder layer
    assert on.params - off.params == mtp


def test_separate_rollout_gpus_hold_no_training_state():
    # hybrid_engine=False (fully async): the rollouter has GPUs of its own (fully_async_trainer.py:76)
    base = ["actor_rollout_ref.model.path=Qwen/Qwen3-8B", "data.train_batch_size=64",
            "actor_rollout_ref.actor.ppo_mini_batch_size=16", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2", "trainer.n_gpus_per_node=8"]
    together = estimate_memory(load_config(None, overrides=base, verl_version="0.9.1"), gpu="H100")
    apart = estimate_memory(load_config(None, overrides=[*base, "actor_rollout_ref.hybrid_engine=False"],
                                        verl_version="0.9.1"), gpu="H100")
    assert any("actor" in label for _, label, _ in together.stage("generate").details)
    assert not any("actor" in label for _, label, _ in apart.stage("generate").details)
    assert apart.stage("generate").peak_gib < together.stage("generate").peak_gib


def test_a_nemotron_h_config_json_reads_as_the_catalog_entry():
    # the config.json fields of NVIDIA-Nemotron-3-Nano-30B-A3B (knowledge/models.yaml `checked`)
    config = {"model_type": "nemotron_h", "hidden_size": 2688, "intermediate_size": 1856, "num_hidden_layers": 52,
              "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 131072,
              "max_position_embeddings": 262144, "tie_word_embeddings": False,
              "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
              "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
              "n_routed_experts": 128, "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
              "moe_shared_expert_intermediate_size": 3712, "n_shared_experts": 1}
    spec = spec_from_hf_config(config)
    catalog = resolve_model(model="Nemotron-3-Nano-30B-A3B")
    assert spec.params == catalog.params
    # the technical report's 31.6B total (2% tolerance as for every published count)
    assert spec.params / 1e9 == pytest.approx(31.6, rel=0.02)


def test_a_pattern_that_does_not_match_the_layer_count_is_refused():
    from advisor import ConfigError

    config = {"model_type": "nemotron_h", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
              "vocab_size": 10, "hybrid_override_pattern": "M*"}
    with pytest.raises(ConfigError, match="hybrid_override_pattern has 2 blocks"):
        spec_from_hf_config(config)
