"""The inference engines verl colocates with training, as data: how each sizes its pool and what it adds.

One :class:`Engine` row per ``actor_rollout_ref.rollout.name``; the estimator asks the row, never the
name. :func:`engine_pool` sizes the engine's memory on one GPU during the generate phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.verl import at_least

from . import _hybrid
from ._constants import GIB, MemoryConstants
from ._models import (
    ModelSpec,
    expert_params,
    kv_bytes_per_token,
    kv_page_1_token,
    lora_params,
    token_mlp_width,
    total_params,
)

if TYPE_CHECKING:  # the workload reads the engine table, so only its type is needed here
    from ._workload import Workload

# How the engine's pool follows gpu_memory_utilization (verl passes it as each engine's own fraction):
# total_share  - vLLM: gpu_memory_utilization x total memory, weights + profile activations + KV inside
#                (vLLM gpu_worker.determine_available_memory)
# static_share - SGLang: mem_fraction_static x total minus what is already on the GPU when the server starts
#                (sglang model_runner.py profile_max_num_token: rest_memory = available_gpu_memory -
#                total_gpu_memory * (1 - mem_fraction_static))
# free_share   - TensorRT-LLM: the KV cache takes that fraction of the memory free after its weights
#                (free_gpu_memory_fraction)
# none         - HF generate: no pool, no KV cache pre-allocated
POOL_RULES = ("total_share", "static_share", "free_share", "none")


@dataclass(frozen=True)
class Engine:
    """What the memory model needs to know about one inference engine."""

    name: str
    pool: str  # one of POOL_RULES
    non_torch: bool = False  # the engine counts its own non-torch allocations inside the pool (vLLM)
    cuda_graphs: bool = False  # captures CUDA graphs outside the pool unless enforce_eager
    refuses_weights_over_pool: bool = False  # cannot start when its weights exceed the pool
    startup_free_check: bool = False  # vLLM >= 0.9.1: gpu_memory_utilization x total must be free at start-up
    # verl versions [from, to) whose weight sync wakes the KV cache together with the weights, while the
    # actor's state is on the GPU; a config key that stages the wake-up instead
    kv_with_weights: tuple[str, str] | None = None
    staged_wake_up_key: str | None = None
    encoder_cache: bool = False  # keeps a vision-language model's encoder outputs in its pool (vLLM V1)
    # from this verl version, a LoRA served as an adapter puts the engine to a sleep that keeps its base weights
    adapter_sleep_keeps_weights_from: str | None = None
    # shards a MoE model's routed experts over rollout TP x DP (with or without expert parallelism), the rest
    # over TP alone: vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make and
    # flatten_tp_across_dp_and_pcp @ vllm 002d6073 (verl passes rollout.data_parallel_size to vLLM and sets
    # enable_expert_parallel from rollout.expert_parallel_size: vllm_async_server.py:361-379 @ verl 1dda039b)
    experts_across_dp: bool = False

    @property
    def has_pool(self) -> bool:
        return self.pool != "none"

    def keeps_weights_asleep(self, version: str, lora_adapter: bool) -> bool:
        """Whether the engine's weights stay on the GPU while it sleeps through training."""
        start = self.adapter_sleep_keeps_weights_from
        return bool(start and lora_adapter and at_least(version, start))

    def restores_kv_with_weights(self, version: str, staged: bool) -> bool:
        """Whether this verl version's weight sync wakes the KV cache with the weights."""
        if self.kv_with_weights is None or staged:
            return False
        low, high = self.kv_with_weights  # an unknown version is the newest: past the range, as verl's fix is
        return at_least(version, low) and not at_least(version, high)


ENGINES: dict[str, Engine] = {
    # vllm v1/worker/gpu_worker.py (init_device start-up check, vllm#20305); CUDA graphs: VllmConfig capture sizes;
    # wake_up(tags) from vLLM PR #15500 (0.8.3)
    # verl <= 0.3 pins vllm <= 0.8.2, whose wake_up() takes no tags (tags: vLLM PR #15500, 0.8.3)
    "vllm": Engine("vllm", "total_share", non_torch=True, cuda_graphs=True, refuses_weights_over_pool=True,
                   startup_free_check=True, kv_with_weights=("0", "0.4"), encoder_cache=True,
                   experts_across_dp=True),
    # verl 0.4-0.6's sharding manager calls resume_memory_occupation() without tags unless
    # rollout.multi_stage_wake_up (sharding_manager/fsdp_sglang.py:103-107 @ 0.4.1, 186-191 @ 0.5.0,
    # 157-161 @ 0.6.1; default false in each rollout config); 0.7+ resumes the weights alone
    # verl >= 0.8 serves an unmerged LoRA to SGLang as an adapter and releases only the KV cache while training
    # (sleep_level 1: engine_workers.py:716-717 @ 0.8.0 after the first sync; sglang_rollout.py:202-206,291-304
    # and engine_workers.py:773-777,790-792 @ 0.9.1); vLLM's level-1 sleep still unmaps the weights
    "sglang": Engine("sglang", "static_share", cuda_graphs=True, refuses_weights_over_pool=True,
                     kv_with_weights=("0.4", "0.7"),
                     staged_wake_up_key="actor_rollout_ref.rollout.multi_stage_wake_up",
                     adapter_sleep_keeps_weights_from="0.8.0.dev"),
    # verl 0.4's name for SGLang's async server (verl/workers/rollout/sglang_rollout): the same engine
    "sglang_async": Engine("sglang_async", "static_share", cuda_graphs=True, refuses_weights_over_pool=True,
                           kv_with_weights=("0.4", "0.7"),
                           staged_wake_up_key="actor_rollout_ref.rollout.multi_stage_wake_up"),
    "trtllm": Engine("trtllm", "free_share"),
    "hf": Engine("hf", "none"),
}


def engine_for(name: str) -> Engine:
    """The row for a rollout name; a name verl adds later (a recipe's own) is sized like vLLM's pool."""
    return ENGINES.get(name) or Engine(name, "total_share")


def pool_is_tunable(name: str) -> bool:
    """Whether gpu_memory_utilization sizes this engine's pool (a known engine with a pool)."""
    return name in ENGINES and ENGINES[name].has_pool


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


def profile_bytes(work: Workload, model: ModelSpec, consts: MemoryConstants) -> float:
    """Activations of the engine's profile run over max_num_batched_tokens (knowledge/memory.yaml engine)."""
    tp = work.rollout_tp
    # residual stream + gate and up projections
    hidden_path = work.max_num_batched_tokens * (model.hidden + 2 * token_mlp_width(model) / tp) * 2
    sampler = min(work.max_num_seqs, work.max_num_batched_tokens) * model.vocab * consts.profile_sampler_bytes_per_logit
    return hidden_path + sampler


def encoder_cache_bytes(work: Workload, model: ModelSpec) -> float:
    """vLLM V1's encoder cache of a vision-language model: max(encoder_cache_size, the largest item's tokens)
    encoder outputs of the language model's width in bf16. encoder_cache_size defaults to max_num_batched_tokens
    (vllm/config SchedulerConfig; compute_mm_encoder_budget in vllm/v1/core/encoder_cache_manager.py:
    encoder_cache_size = max(scheduler_config.encoder_cache_size, max_tokens_per_mm_item)); the profile run
    fills it, so it comes out of the KV cache."""
    if not (model.extra_params or model.max_image_tokens):
        return 0.0
    return max(work.max_num_batched_tokens, model.max_image_tokens) * model.hidden * 2


def rollout_params_per_gpu(work: Workload, model: ModelSpec, engine: Engine, params: float) -> float:
    """Parameters one rollout GPU holds: all over rollout TP, except an engine that shards the routed experts
    over TP x DP (vLLM)."""
    if not (engine.experts_across_dp and work.rollout_dp > 1):
        return params / work.rollout_tp
    experts = expert_params(model)
    return (params - experts) / work.rollout_tp + experts / (work.rollout_tp * work.rollout_dp)


def engine_pool(work: Workload, model: ModelSpec, consts: MemoryConstants, capacity_gib: float, *,
                resident: float, at_init: float, overhead: float) -> EnginePool:
    """Size the engine's pool from gpu_memory_utilization by its pool rule.

    ``resident``: training state on the GPU while it generates; ``at_init``: what is there when the engine
    starts (SGLang's static share is taken from it); ``overhead``: the training process's context.
    """
    engine = engine_for(work.engine)
    params = total_params(model) + (lora_params(model, work.lora_rank, work.lora_targets) if work.lora_rank > 0 else 0)
    weights = work.rollout_weight_bytes * rollout_params_per_gpu(work, model, engine, params)
    profile = profile_bytes(work, model, consts)
    cap = capacity_gib * GIB
    non_torch = consts.vllm_non_torch_gib * GIB if engine.non_torch else 0.0
    encoder = encoder_cache_bytes(work, model) if engine.encoder_cache else 0.0
    if engine.pool == "static_share":
        pool = max(weights, work.gmu * cap - at_init)
        kv = pool - weights
        total = pool + profile
    elif engine.pool == "free_share":
        kv = work.gmu * max(0.0, cap - overhead - resident - weights)
        total = weights + kv + profile
        pool = total
    elif engine.pool == "none":
        kv = pool = total = 0.0
    else:  # total_share
        pool = work.gmu * cap
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


def sequence_cache(work: Workload, model: ModelSpec) -> SequenceCache:
    """One sequence's cache in bf16 on one rollout TP rank.

    A hybrid model's linear-attention/Mamba layers keep a state per sequence (_hybrid). vLLM pads each state
    page to one attention page and raises the attention block to 16 x cdiv(state page, 16 x one token's
    page) tokens (vllm/model_executor/models/config.py:314-394 @ 0.11.0); other engines keep the raw state.
    """
    tp = work.rollout_tp
    kv = kv_bytes_per_token(model, 2, tp)
    if not _hybrid.state_layers(model)[1]:
        return SequenceCache(kv, 0, 1)
    if engine_for(work.engine).pool == "total_share":  # vLLM
        one_token = kv_page_1_token(model, 2, tp)
        mixer, _ = _hybrid.state_layers(model)
        raw = sum(_hybrid.state_elements(model, mixer, tp)) * 2
        return SequenceCache(kv, _hybrid.state_bytes_per_sequence(model, tp, 2, one_token),
                             _hybrid.attention_block_tokens(raw, one_token))
    return SequenceCache(kv, _hybrid.state_bytes_per_sequence(model, tp, 2), 1)
