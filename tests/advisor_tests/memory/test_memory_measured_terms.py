"""The harness's measured coefficients wired into the estimator, one test per term.

Each expected byte count is the measured coefficient (knowledge/memory.yaml, measured as the entries of
knowledge/memory_measured.yaml say) times the shape, written out here; never the estimator's own total.
Shape: Qwen2.5-7B (h 3584, I 18944, 4 KV heads x 128, 28 layers, vocab 152064), 8 gsm8k responses of
103 + 270 tokens per micro batch (knowledge/memory.yaml sequences), no gradient checkpointing so that the
logits are their own term.
"""

from __future__ import annotations

import pytest
from memory_validation import GRPO_7B

from advisor import load_config
from advisor.memory import estimate_memory

GIB = 1024**3
H, INTER, KV, LAYERS, VOCAB = 3584, 18944, 4 * 128, 28, 152064
TOKENS = 8 * (103 + 270)

BASE = [
    *GRPO_7B,
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.model.enable_gradient_checkpointing=False",
    "actor_rollout_ref.model.use_remove_padding=True",
]
COMPILED = "actor_rollout_ref.actor.use_torch_compile=True"


def _estimate(*overrides: str, version: str = "0.9.1"):
    return estimate_memory(load_config(None, verl_version=version, overrides=[*BASE, *overrides]), gpu="H100")


def _logits_gib(n_bytes_per_logit: float) -> float:
    return TOKENS * VOCAB * n_bytes_per_logit / GIB


@pytest.mark.parametrize(("version", "temperature", "per_logit"), [
    ("0.7.1", 1.0, 8),  # in place on a squeeze(0) view: CopySlices, 4 bf16 buffers (logits.update.0.7.1.off)
    ("0.8.0", 1.0, 8),  # the 0.8.0 engine workers too (transformer_impl.py:1111-1112 @ 0.8.0)
    ("0.9.0", 1.0, 4),  # out of place at any temperature (transformer_impl.py:1352): logits + copy
    ("0.9.1", 1.0, 2),  # skipped at temperature 1 (transformer_impl.py:92-103): in-place cross-entropy backward
    ("0.9.1", 0.7, 4),  # copied at any other temperature (logits.update.0.9.1.off.t07)
])
def test_update_logits_without_entropy_follow_the_temperature_divide(version, temperature, per_logit):
    est = _estimate(f"actor_rollout_ref.rollout.temperature={temperature}", "actor_rollout_ref.actor.entropy_coeff=0",
                    version=version)
    assert est.stage("actor_update").breakdown["logits"] == pytest.approx(_logits_gib(per_logit), rel=1e-3)


@pytest.mark.parametrize(("version", "per_logit"), [("0.7.1", 8), ("0.9.0", 2 + 2 * 2), ("0.9.1", 2 + 2 * 2)])
def test_update_logits_with_compiled_entropy(version, per_logit):
    # with entropy the in-place backward is off: logits + cross-entropy and entropy gradients (6), unless
    # verl < 0.9.0's in-place divide already holds 4 buffers (8) (logits.update.0.9.1.on, 0.7.1.on)
    est = _estimate("actor_rollout_ref.actor.entropy_coeff=0.01", COMPILED, version=version)
    assert est.stage("actor_update").breakdown["logits"] == pytest.approx(_logits_gib(per_logit), rel=1e-3)


def test_chunked_entropy_in_the_update_adds_its_saved_fp32_chunks():
    # entropy_from_logits_with_chunking in the update keeps every chunk's fp32 copy and softmax for
    # backward: 6 + 24 = 30 B per logit (logits.update.0.9.1.chunked), not the 20 of the eager entropy
    est = _estimate("actor_rollout_ref.actor.entropy_coeff=0.01", COMPILED,
                    "actor_rollout_ref.actor.entropy_from_logits_with_chunking=True")
    assert est.stage("actor_update").breakdown["logits"] == pytest.approx(_logits_gib(6 + 24), rel=1e-3)


def test_lora_changes_the_saved_bytes_per_layer_by_the_measured_terms():
    # act.lora16 / act.lora32: all-linear LoRA changes a layer's saved bytes by -4 h + 14 r per token
    full = _estimate("actor_rollout_ref.actor.entropy_coeff=0", COMPILED).stage("actor_update")
    lora = _estimate("actor_rollout_ref.actor.entropy_coeff=0", COMPILED, "actor_rollout_ref.model.lora_rank=32",
                     "actor_rollout_ref.model.target_modules=all-linear").stage("actor_update")
    full_layer = 20 * H + 4 * KV + 8 * INTER  # act.full
    assert full.breakdown["activations"] == pytest.approx(TOKENS * LAYERS * full_layer / GIB, rel=1e-3)
    expected = TOKENS * LAYERS * (full_layer - 4 * H + 14 * 32) / GIB
    assert lora.breakdown["activations"] == pytest.approx(expected, rel=1e-3)


def test_a_forward_without_grad_peaks_at_one_mlp_beside_the_hidden_stream():
    # fwd.critic_values: no saved bytes per layer; the peak is 6 I + 8 h per token (the critic has no logits)
    est = _estimate("algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-7B-Instruct",
                    "critic.ppo_micro_batch_size_per_gpu=8", "critic.forward_micro_batch_size_per_gpu=8",
                    "critic.model.use_remove_padding=True")
    values = est.stage("critic_values")
    assert values.breakdown["activations"] == pytest.approx(TOKENS * (6 * INTER + 8 * H) / GIB, rel=1e-3)


@pytest.mark.parametrize(("version", "temperature", "per_logit"), [
    ("0.7.1", 1.0, 2), ("0.9.0", 1.0, 2 + 2), ("0.9.1", 1.0, 2), ("0.9.1", 0.7, 2 + 2)])
def test_forward_logits_add_the_temperature_copy_where_verl_divides_out_of_place(version, temperature, per_logit):
    # logits.log_prob.0.9.0: the model output keeps the undivided logits beside the divided copy (4 B); in
    # place (< 0.9.0) or skipped (0.9.1 at temperature 1) there is no copy (2 B); entropy compiled: no extra
    est = _estimate(f"actor_rollout_ref.rollout.temperature={temperature}", COMPILED, version=version)
    assert est.stage("old_log_prob").breakdown["logits"] == pytest.approx(_logits_gib(per_logit), rel=1e-3)
