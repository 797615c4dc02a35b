"""The inference engines verl colocates with training, as data: how each sizes its pool and what it adds.

One :class:`Engine` row per ``actor_rollout_ref.rollout.name``; the estimator asks the row, never the
name. :mod:`._pool` sizes the engine's memory on one GPU from its row.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.verl import at_least

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
