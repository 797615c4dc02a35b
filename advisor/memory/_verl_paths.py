"""Which code path a verl version takes where the memory differs: one function per decision, each citing it.

Every decision asks :func:`advisor.verl.at_least`, so a version the advisor does not know reads as the newest
release (its one rule).
"""

from __future__ import annotations

from advisor.verl import at_least


def sync_order(version: str) -> str:
    """What shares the GPU while an FSDP actor's weights go to the engine, by verl version.

    - verl <= 0.3: the actor's state_dict is on the GPU while the engine wakes (sharding_manager/fsdp_vllm.py),
      and vllm <= 0.8.2's wake_up() restores the KV cache too (the engine table's kv_with_weights):
      "kv_with_weights".
    - verl 0.4-0.6: the sharding manager loads a param-offloaded actor shard, wakes the weights, updates and
      only then offloads the shard and wakes the KV cache (fsdp_vllm.py:159-160,182-193 @ 0.4.1):
      "actor_with_weights".
    - verl 0.7.x: rollout_mode offloads the shard before resuming the engine's weights
      (fsdp_workers.py:755-756,797-799,830-831 @ 0.7.1): "actor_before_weights".
    - verl >= 0.8: update_weights resumes the weights, then get_per_tensor_param loads the shard, and the
      KV cache comes back after the shard is offloaded (engine_workers.py:782-822, engine/fsdp/
      transformer_impl.py:990-991 @ 0.9.1): "actor_with_weights".
    """
    if not at_least(version, "0.4"):
        return "kv_with_weights"
    if at_least(version, "0.7") and not at_least(version, "0.8.0.dev"):
        return "actor_before_weights"
    return "actor_with_weights"


def engine_max_model_len(version: str, user: int | None, max_seq_tokens: int) -> tuple[int | None, bool, str | None]:
    """The context length verl gives the inference engine, by verl version (None: max_position_embeddings).

    ``user``: rollout.max_model_len as set (None: not set). Returns (length, whether rollout.max_model_len is
    honoured, a note for the assumptions).
    - verl <= 0.6: the user's value, else prompt + response (v0.4.1 vllm_async_server.py:149, v0.5.0 :220,
      v0.6.1 vllm_rollout_spmd.py:195; the 0.6.1 async server always uses prompt + response, :155).
    - verl 0.7.x: always the model's max_position_embeddings, the user's value is overwritten
      (v0.7.0 vllm_async_server.py:198, async_sglang_server.py:86).
    - verl 0.8.0.dev (b178a3cd): the user's value, else max_position_embeddings (vllm_async_server.py:113-114,
      async_sglang_server.py:172-173, trtllm_async_server.py:73-74; verl PR #5052, 2026-01-27).
    """
    if not at_least(version, "0.7"):
        return (user or max_seq_tokens), True, None
    if not at_least(version, "0.8.0.dev"):
        note = (f"verl {version} gives the engine the model's max_position_embeddings as max_model_len"
                f"{' (rollout.max_model_len is overwritten)' if user else ''}")
        return None, False, note
    return user, True, None


def vllm_startup_check(version: str) -> bool:
    """Whether the engine may run vLLM's start-up free-memory check (vLLM 0.9.1): verl <= 0.5 pins
    vllm <= 0.8.5 (setup.py)."""
    return at_least(version, "0.6")


def legacy_workers(version: str, use_legacy_worker_impl: str) -> bool:
    """verl < 0.8 runs the legacy workers (dp_actor.py) unless trainer.use_legacy_worker_impl=disable
    (main_ppo.py:128-131 @ 0.7.1); 0.8.0 ships only the engine workers (no verl/workers/actor/)."""
    return not at_least(version, "0.8.0.dev") and use_legacy_worker_impl != "disable"


def temperature_path(version: str, temperature: float, megatron: bool) -> tuple[bool, bool]:
    """How the FSDP log-prob path divides the logits by the temperature: (in place, out-of-place copy).

    verl < 0.9.0 divides in place on a squeeze(0) view at any temperature (dp_actor.py:258-259 @ 0.7.1,
    transformer_impl.py:1111-1112 @ 0.8.0); 0.9.0 divides out of place at any temperature
    (transformer_impl.py:1352 @ 0.9.0); 0.9.1 and later skip the divide at temperature 1
    (transformer_impl.py:92-103 @ 0.9.1). A config with no version reads as the newest release, as the
    advisor's version detection does on a tie (advisor.verl.detect_version). Megatron's vocab-parallel
    path was not measured: neither term applies there.
    """
    if megatron:
        return False, False
    if not at_least(version, "0.9.0"):
        return True, False
    if not at_least(version, "0.9.1"):
        return False, True
    return False, temperature != 1.0


def vllm_sleep_keeps_host_copy(version: str, layered_summon: bool) -> bool:
    """Whether vLLM's sleep between generations copies the engine's weights to host memory (level 1).

    verl <= 0.5 sleeps at level 1 always (sharding_manager/fsdp_vllm.py:215 @ 0.4.1, :240 @ 0.5.0); verl >= 0.6
    at level 2 (weights dropped, re-sent at the next sync) for vLLM >= 0.8.5, which every verl >= 0.6 allows,
    unless rollout.layered_summon (third_party/vllm/__init__.py:33-49, vllm_rollout_spmd.py:534-538 @ 0.6.1;
    vllm_rollout.py:131-135 @ 0.7.0). Level 1 backs the weights up in pinned host tensors
    (vllm/device_allocator/cumem.py:165-194 @ 0.7.3).
    """
    return layered_summon or not at_least(version, "0.6")


def vllm_v0_swap_space(version: str) -> bool:
    """Whether vLLM may run its V0 engine, which keeps ``swap_space`` GiB of pinned CPU KV blocks per worker
    (vllm/worker/cache_engine.py:71-105 @ 0.7.3): verl <= 0.5 pins vllm <= 0.8.5 (setup.py), where V0 still runs
    (V1 is the default from vLLM 0.8 but falls back to V0 for unsupported features). V1 has no swap space."""
    return not at_least(version, "0.6")
