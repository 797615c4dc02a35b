"""The inference engine's memory on one GPU: its pool while it generates, and one sequence's cache in it.

The arithmetic of the generate phase (:mod:`._phases`) on an engine's row of :mod:`._engines`; the estimate's
KV capacity (:mod:`._estimate`) asks :func:`sequence_cache` too.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _hybrid
from ._constants import GIB, MemoryConstants
from ._engines import Engine, engine_for
from ._models import (
    ModelSpec,
    expert_params,
    kv_bytes_per_token,
    kv_page_1_token,
    lora_params,
    token_mlp_width,
    total_params,
)
from ._workload import Rollout, Workload


@dataclass(frozen=True)
class EnginePool:
    """The engine's memory on one GPU while it generates."""

    engine: Engine
    params: float  # parameters the engine holds (LoRA merged in)
    weights: float  # bytes of its weights on this GPU
    profile: float  # activations of its start-up profile run
    non_torch: float
    encoder_cache: float  # a VLM's encoder outputs kept for the scheduler (inside the pool)
    kv: float  # KV cache (may be negative: the pool is too small)
    pool: float  # what it pre-allocates by design (the generate verdict is judged beside this)
    total: float  # what stays on the GPU if it is kept awake through training


def profile_bytes(rollout: Rollout, model: ModelSpec, consts: MemoryConstants) -> float:
    """Activations of the engine's profile run over max_num_batched_tokens (knowledge/memory.yaml engine)."""
    tp = rollout.tp
    # residual stream + gate and up projections
    hidden_path = rollout.max_num_batched_tokens * (model.hidden + 2 * token_mlp_width(model) / tp) * 2
    sequences = min(rollout.max_num_seqs, rollout.max_num_batched_tokens)
    sampler = sequences * model.vocab * consts.profile_sampler_bytes_per_logit
    return hidden_path + sampler


def encoder_cache_bytes(rollout: Rollout, model: ModelSpec) -> float:
    """vLLM V1's encoder cache of a vision-language model: max(encoder_cache_size, the largest item's tokens)
    encoder outputs of the language model's width in bf16. encoder_cache_size defaults to max_num_batched_tokens
    (vllm/config SchedulerConfig; compute_mm_encoder_budget in vllm/v1/core/encoder_cache_manager.py:
    encoder_cache_size = max(scheduler_config.encoder_cache_size, max_tokens_per_mm_item)); the profile run
    fills it, so it comes out of the KV cache."""
    if not (model.extra_params or model.max_image_tokens):
        return 0.0
    return max(rollout.max_num_batched_tokens, model.max_image_tokens) * model.hidden * 2


def rollout_params_per_gpu(rollout: Rollout, model: ModelSpec, engine: Engine, params: float) -> float:
    """Parameters one rollout GPU holds: all over rollout TP, except an engine that shards the routed experts
    over TP x DP (vLLM)."""
    if not (engine.experts_across_dp and rollout.dp > 1):
        return params / rollout.tp
    experts = expert_params(model)
    return (params - experts) / rollout.tp + experts / (rollout.tp * rollout.dp)


def engine_pool(work: Workload, model: ModelSpec, consts: MemoryConstants, capacity_gib: float, *,
                resident: float, at_init: float, overhead: float) -> EnginePool:
    """Size the engine's pool from gpu_memory_utilization by its pool rule.

    ``resident``: training state on the GPU while it generates; ``at_init``: what is there when the engine
    starts (SGLang's static share is taken from it); ``overhead``: the training process's context.
    """
    engine = engine_for(work.rollout.engine)
    actor = work.actor
    lora = lora_params(model, actor.lora_rank, actor.lora_targets) if actor.lora_rank > 0 else 0
    params = total_params(model) + lora
    weights = work.rollout.weight_bytes * rollout_params_per_gpu(work.rollout, model, engine, params)
    profile = profile_bytes(work.rollout, model, consts)
    cap = capacity_gib * GIB
    non_torch = consts.vllm_non_torch_gib * GIB if engine.non_torch else 0.0
    encoder = encoder_cache_bytes(work.rollout, model) if engine.encoder_cache else 0.0
    if engine.pool == "static_share":
        pool = max(weights, work.rollout.gmu * cap - at_init)
        kv = pool - weights
        total = pool + profile
    elif engine.pool == "free_share":
        kv = work.rollout.gmu * max(0.0, cap - overhead - resident - weights)
        total = weights + kv + profile
        pool = total
    elif engine.pool == "none":
        kv = pool = total = 0.0
    else:  # total_share
        pool = work.rollout.gmu * cap
        kv = pool - weights - profile - non_torch - encoder
        total = pool
    return EnginePool(engine, params, weights, profile, non_torch, encoder, kv, pool, total)


@dataclass(frozen=True)
class SequenceCache:
    """What one sequence takes in the engine's cache on one GPU: KV per token and recurrent state."""

    kv_per_token: int  # full-attention layers' K and V for one token
    state: int  # linear-attention / Mamba layers' state, once per sequence
    block_tokens: int  # the attention block a sequence's tokens are allocated in (vLLM hybrid: raised)

    def bytes_for(self, tokens: int) -> int:
        blocks = -(-tokens // self.block_tokens) if self.block_tokens > 1 else tokens
        return blocks * max(1, self.block_tokens) * self.kv_per_token + self.state

    def sequences_in(self, cache_bytes: float, tokens: int) -> float:
        one = self.bytes_for(tokens)
        return cache_bytes / one if one else 0.0


def sequence_cache(rollout: Rollout, model: ModelSpec) -> SequenceCache:
    """One sequence's cache in bf16 on one rollout TP rank.

    A hybrid model's linear-attention/Mamba layers keep a state per sequence (_hybrid). vLLM pads each state
    page to one attention page and raises the attention block to 16 x cdiv(state page, 16 x one token's
    page) tokens (vllm/model_executor/models/config.py:314-394 @ 0.11.0); other engines keep the raw state.
    """
    tp = rollout.tp
    kv = kv_bytes_per_token(model, 2, tp)
    if not _hybrid.state_layers(model)[1]:
        return SequenceCache(kv, 0, 1)
    if engine_for(rollout.engine).pool == "total_share":  # vLLM
        one_token = kv_page_1_token(model, 2, tp)
        mixer, _ = _hybrid.state_layers(model)
        raw = sum(_hybrid.state_elements(model, mixer, tp)) * 2
        return SequenceCache(kv, _hybrid.state_bytes_per_sequence(model, tp, 2, one_token),
                             _hybrid.attention_block_tokens(raw, one_token))
    return SequenceCache(kv, _hybrid.state_bytes_per_sequence(model, tp, 2), 1)
