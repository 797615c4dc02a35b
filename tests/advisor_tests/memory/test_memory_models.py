"""Model catalog: parameter counts against the publishers' numbers, shapes against formulas, lookup."""

from __future__ import annotations

import json
import re

import pytest

from advisor import ConfigError, load_config
from advisor.memory import catalog, resolve_model
from advisor.memory._models import (
    active_params,
    attention_params,
    embedding_params,
    kv_bytes_per_token,
    lookup_model,
    lora_params,
    spec_from_hf_config,
    total_params,
)

_WITH_PUBLISHED = [s for s in catalog() if s.published_params_b]


@pytest.mark.parametrize("spec", _WITH_PUBLISHED, ids=[s.name for s in _WITH_PUBLISHED])
def test_parameter_count_within_two_percent_of_published(spec):
    computed = total_params(spec) / 1e9
    assert computed == pytest.approx(spec.published_params_b, rel=0.02)


_WITH_ACTIVE = [s for s in catalog() if s.published_active_params_b]


@pytest.mark.parametrize("spec", _WITH_ACTIVE, ids=[s.name for s in _WITH_ACTIVE])
def test_active_parameter_count_matches_published_to_its_rounding(spec):
    # publishers round active counts to one or two significant digits (3.3B, 22B, "3B")
    assert active_params(spec) / 1e9 == pytest.approx(spec.published_active_params_b, rel=0.05)


def test_every_catalog_entry_names_a_source():
    for spec in catalog():
        assert spec.source.startswith("https://"), spec.name


def test_dense_parameter_count_follows_the_transformer_formula():
    # Qwen2.5-7B by hand: per layer q/o 3584x3584, k/v 3584x512 with biases, SwiGLU 3x3584x18944, 2 norms;
    # untied 152064x3584 embedding and lm_head; final norm.
    h, i, kv, layers, vocab = 3584, 18944, 512, 28, 152064
    layer = 2 * h * h + 2 * h * kv + (h + 2 * kv) + 3 * h * i + 2 * h
    expected = layers * layer + 2 * vocab * h + h
    assert total_params(resolve_model(model="Qwen2.5-7B")) == expected


def test_tied_embeddings_are_counted_once():
    spec = resolve_model(model="Qwen2.5-0.5B")
    assert spec.tie_embeddings
    assert embedding_params(spec) == 151936 * 896


def test_moe_parameters_count_every_expert_but_activate_only_top_k():
    spec = resolve_model(model="Qwen3-30B-A3B")
    per_expert = 3 * 2048 * 768
    router = 2048 * 128
    attention = attention_params(spec)
    layer = attention + 128 * per_expert + router + 2 * 2048
    assert total_params(spec) == 48 * layer + 2 * 151936 * 2048 + 2048
    active_layer = attention + 8 * per_expert + 2048 * 8 + 2 * 2048
    assert active_params(spec) == 48 * active_layer + 2 * 151936 * 2048 + 2048


@pytest.mark.parametrize(
    ("name", "layers", "kv_heads", "head_dim"),
    [("Qwen2.5-7B", 28, 4, 128), ("Llama-3.1-8B", 32, 8, 128), ("Qwen3-32B", 64, 8, 128), ("gemma-2-2b", 26, 4, 256)],
)
def test_kv_bytes_per_token_is_2_x_layers_x_kv_heads_x_head_dim_x_dtype(name, layers, kv_heads, head_dim):
    spec = resolve_model(model=name)
    assert kv_bytes_per_token(spec, 2) == 2 * layers * kv_heads * head_dim * 2
    assert kv_bytes_per_token(spec, 1) == 2 * layers * kv_heads * head_dim * 1


def test_kv_heads_split_over_tensor_parallel_and_replicate_past_their_count():
    spec = resolve_model(model="Qwen2.5-7B")  # 4 kv heads
    assert kv_bytes_per_token(spec, 2, tp=2) == 2 * 28 * 2 * 128 * 2
    assert kv_bytes_per_token(spec, 2, tp=8) == 2 * 28 * 1 * 128 * 2


def test_llama_3_8b_kv_cache_is_128_kib_per_token():
    # anchors.md 1.10: L=32, 8 KV heads, head_dim 128, bf16 -> 131,072 B
    assert kv_bytes_per_token(resolve_model(model="Meta-Llama-3-8B"), 2) == 131072


def test_mla_caches_one_latent_per_layer():
    spec = resolve_model(model="DeepSeek-V3")
    assert kv_bytes_per_token(spec, 2) == 61 * (512 + 64) * 2
    assert kv_bytes_per_token(spec, 2, tp=8) == kv_bytes_per_token(spec, 2)


def test_lora_parameters_are_rank_times_in_plus_out_per_targeted_projection():
    spec = resolve_model(model="Qwen2.5-7B")
    h, i, kv, r = 3584, 18944, 512, 32
    per_layer = r * ((h + h) + 2 * (h + kv) + (h + h) + 2 * (h + i) + (i + h))
    assert lora_params(spec, r, "all-linear") == 28 * per_layer
    assert lora_params(spec, r, ["q_proj", "v_proj"]) == 28 * r * ((h + h) + (h + kv))
    assert lora_params(spec, 0) == 0


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B"),
        ("$HOME/models/Qwen2.5-32B", "Qwen2.5-32B"),
        ("qwen/QWEN2.5-3B-INSTRUCT", "Qwen2.5-3B"),
        ("Qwen/Qwen2-7B-Instruct", "Qwen2-7B"),  # its own name, with the Qwen2.5-7B shapes it shares
        ("Qwen/Qwen2.5-Coder-14B-Instruct", "Qwen2.5-Coder-14B"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "DeepSeek-R1-Distill-Qwen-7B"),
        ("Qwen/Qwen3-30B-A3B-Base", "Qwen3-30B-A3B"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen3-30B-A3B-Instruct-2507"),
        ("$HOME/verl/models/DeepSeek-V3-config-verl", "DeepSeek-V3"),
        ("$HOME/models/gpt-oss-20b-bf16", "gpt-oss-20b"),
        ("openbmb/MiniCPM-o-2_6", "MiniCPM-o-2_6"),
        ("/cache/models--Qwen--Qwen2.5-1.5B-Instruct", "Qwen2.5-1.5B"),
        ("meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B"),
    ],
)
def test_lookup_tolerates_org_prefixes_case_and_suffixes(path, expected):
    assert lookup_model(path).name == expected


def test_unknown_model_asks_for_model_config():
    with pytest.raises(ConfigError, match=re.escape("pass --model-config path/to/config.json")):
        resolve_model(model="acme/SuperLM-9B")


def test_unknown_model_path_in_the_config_names_the_key():
    cfg = load_config(None, verl_version="0.8.0.dev", overrides=["actor_rollout_ref.model.path=acme/SuperLM-9B"])
    with pytest.raises(ConfigError, match=re.escape("actor_rollout_ref.model.path='acme/SuperLM-9B'")) as info:
        resolve_model(cfg)
    assert "\n" not in str(info.value)


def test_model_path_in_the_config_resolves_through_the_catalog():
    cfg = load_config(None, verl_version="0.8.0.dev", overrides=["actor_rollout_ref.model.path=Qwen/Qwen3-8B"])
    assert resolve_model(cfg).name == "Qwen3-8B"


def _qwen2_config() -> dict:
    return {
        "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
        "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True,
        "max_position_embeddings": 32768,
    }


def test_hf_config_gives_the_same_count_as_the_catalog():
    from_config = spec_from_hf_config(_qwen2_config())
    assert total_params(from_config) == total_params(resolve_model(model="Qwen2.5-0.5B"))


def test_local_config_json_under_model_path_wins_over_the_name(tmp_path):
    ckpt = tmp_path / "Qwen2.5-72B-Instruct"  # the name says 72B, the config says 0.5B
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps(_qwen2_config()))
    cfg = load_config(None, verl_version="0.8.0.dev", overrides=[f"actor_rollout_ref.model.path={ckpt}"])
    assert resolve_model(cfg).hidden == 896


def test_model_config_argument_wins_over_everything(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_qwen2_config()))
    cfg = load_config(None, verl_version="0.8.0.dev",
                      overrides=["actor_rollout_ref.model.path=Qwen/Qwen2.5-72B-Instruct"])
    assert resolve_model(cfg, model="Qwen2.5-7B", model_config=path).hidden == 896


def test_model_config_without_shapes_is_a_config_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "qwen2"}))
    with pytest.raises(ConfigError, match="model config lacks"):
        resolve_model(model_config=path)


def test_vision_language_config_reads_the_text_part():
    config = {"model_type": "qwen2_5_vl", "text_config": {**_qwen2_config(), "model_type": "qwen2_5_vl_text"}}
    assert spec_from_hf_config(config).hidden == 896


def test_moe_hf_config_counts_experts_and_shared_expert():
    config = {
        "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
        "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936, "num_experts": 60,
        "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
        "tie_word_embeddings": False,
    }
    assert total_params(spec_from_hf_config(config)) == total_params(resolve_model(model="Qwen1.5-MoE-A2.7B"))


def test_a_config_json_that_is_not_an_object_is_one_clear_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[1, 2]", encoding="utf-8")  # valid JSON, but not the object every HF config.json is
    with pytest.raises(ConfigError, match="model config is not a JSON object"):
        resolve_model(model_config=str(path))
