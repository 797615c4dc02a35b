"""Vision-language models: image tokens in the prompt, the processor's largest image, vLLM's encoder cache."""

from __future__ import annotations

import json

import pytest

from advisor import load_config
from advisor.memory import estimate_memory, resolve_model
from advisor.memory._models import image_tokens_of_processor

GIB = 1024**3
VL = [
    "actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-7B-Instruct", "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.rollout.name=vllm", "data.max_prompt_length=1024", "data.max_response_length=2048",
    "data.train_batch_size=512", "actor_rollout_ref.actor.ppo_mini_batch_size=512",
    "actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32", "actor_rollout_ref.actor.entropy_coeff=0.01",
]


def _cfg(*overrides: str):
    return load_config(None, verl_version="0.9.1", overrides=[*VL, *overrides])


def test_the_largest_image_of_a_qwen_vl_processor():
    # Qwen2.5-VL's preprocessor_config.json: max_pixels 12845056, patch 14, merge 2 -> 12845056 / 28^2
    assert image_tokens_of_processor({"max_pixels": 12845056, "patch_size": 14, "merge_size": 2}) == 16384
    # Qwen3-VL's fast processor writes the bound as size.longest_edge (patch 16): 16777216 / 32^2
    assert image_tokens_of_processor({"size": {"longest_edge": 16777216}, "patch_size": 16, "merge_size": 2}) == 16384
    assert image_tokens_of_processor({"patch_size": 14}) == 0
    assert resolve_model(model="Qwen/Qwen2.5-VL-7B-Instruct").max_image_tokens == 16384
    assert resolve_model(model="Qwen/Qwen3-VL-8B-Instruct").max_image_tokens == 16384


def test_a_local_checkpoints_processor_config_sets_the_largest_image(tmp_path):
    config = {"model_type": "qwen2_5_vl", "hidden_size": 3584, "num_hidden_layers": 28, "intermediate_size": 18944,
              "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
              "max_position_embeddings": 128000, "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"max_pixels": 1003520, "min_pixels": 3136, "patch_size": 14, "merge_size": 2}))
    assert resolve_model(model_config=tmp_path).max_image_tokens == 1003520 // 28**2 == 1280


def test_vllm_keeps_the_encoder_cache_of_a_vlm_inside_its_pool():
    # vllm/v1/core/encoder_cache_manager.py compute_mm_encoder_budget: max(encoder_cache_size = max_num_batched_tokens
    # 8192, 16384 tokens of the largest image) encoder outputs of the 3584-wide language model, bf16
    gen = estimate_memory(_cfg("data.train_files=/data/gsm8k/train.parquet"), gpu="H100",
                          image_tokens=300).stage("generate")
    encoder = sum(g for _c, label, g in gen.details if "encoder cache" in label)
    assert encoder == pytest.approx(16384 * 3584 * 2 / GIB, rel=1e-6)
    text = estimate_memory(load_config(None, verl_version="0.9.1", overrides=[
        *VL, "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "data.train_files=/data/gsm8k/train.parquet"]),
        gpu="H100").stage("generate")
    assert not any("encoder cache" in label for _c, label, _g in text.details)


def test_a_vlm_without_its_image_tokens_is_unknown_where_they_decide_and_judged_when_given():
    # verl counts a prompt's expanded image tokens against max_prompt_length (utils/dataset/rl_dataset.py:206-244
    # @ 0.9.1), so the worst case is 32 x (1024 + 2048) tokens per micro batch, the text-only floor 32 x (103 + 270)
    # on gsm8k. Logits of the update at 6 B per logit (0.9.1 engine, entropy on): 32 x 3072 x 152064 x 6 B = 83.5
    # GiB at max length (over the card), 10.1 GiB at the floor.
    assert 32 * 3072 * 152064 * 6 / GIB > 81559 / 1024
    c = _cfg("data.train_files=/data/gsm8k/train.parquet")
    upd = estimate_memory(c, gpu="H100").stage("actor_update")
    assert upd.risk == "unknown" and "--image-tokens" in upd.missing
    # 300 image tokens per prompt: 32 x (403 + 270) = 21,536 tokens; the verdict is judged on them
    given = estimate_memory(c, gpu="H100", image_tokens=300).stage("actor_update")
    assert given.risk in ("ok", "tight") and given.missing is None
    assert any(f"{32 * 673:,} tokens per micro batch" in label for _c, label, _g in given.details)
