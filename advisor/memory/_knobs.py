"""The performance-only knobs the memory fix may turn, and the values it tries for each.

Only knobs verl documents as not changing the algorithm (docs/algo/ppo.md: "*micro_batch_size* ...
should not change algorithmic/convergence behavior"; docs/perf/perf_tuning.rst) are listed. Never
data lengths, train/mini batch sizes, rollout.n or learning rates.

A :class:`Candidate` edits the :class:`~._workload.Workload` (for the fast estimate) and carries the
config :class:`~advisor.Change` objects that make the same edit in the user's config.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from advisor.findings import Change

from ._workload import Workload

_A = "actor_rollout_ref.actor."
_R = "actor_rollout_ref.rollout."
_REF = "actor_rollout_ref.ref."
_M = "actor_rollout_ref.model."


@dataclass(frozen=True)
class Candidate:
    """One knob set to one value: the workload edit, the config changes and its cost rank."""

    knob: str
    cost: float
    edit: dict[str, Any]
    changes: tuple[Change, ...]

    def apply(self, work: Workload) -> Workload:
        return replace(work, **self.edit)


def _change(cfg: Any, key: str, new: Any, reason: str) -> Change:
    old = cfg.get(key)
    return Change(key, old, new, reason, add=not cfg.has(key))


def _halvings(value: int, floor: int = 1) -> list[int]:
    out = []
    v = value // 2
    while v >= floor:
        out.append(v)
        v //= 2
    if out and out[-1] != floor and floor < value:
        out.append(floor)
    return out


def _divisors_below(n: int, below: int) -> list[int]:
    return sorted((d for d in range(1, min(n, below - 1) + 1) if n % d == 0), reverse=True)


def _step_cost(base: float, old: float, new: float) -> float:
    """Cost grows with how far a size shrinks (one unit per halving)."""
    import math

    return base * max(1.0, math.log2(max(old, 1e-9) / max(new, 1e-9)))


def _micro_candidates(cfg: Any, work: Workload, costs: dict[str, float], *, knob: str, per_gpu_key: str,
                      global_key: str, current: int | None, limit: int, field: str, divides: int | None,
                      dp: int, reason: str) -> Iterator[Candidate]:
    if current is None or current <= 1:
        return
    values = _divisors_below(divides, current) if divides else _halvings(current)
    use_global = cfg.get(per_gpu_key) is None and cfg.get(global_key) is not None
    for value in values[:limit]:
        if use_global:
            changes = (_change(cfg, global_key, value * dp, reason),)
        else:
            changes = (_change(cfg, per_gpu_key, value, reason),)
        yield Candidate(knob, _step_cost(costs[knob], current, value), {field: value}, changes)


def _budget_candidates(cfg: Any, work: Workload, costs: dict[str, float], *, knob: str, key: str,
                       current: int, floor: int, field: str, reason: str) -> Iterator[Candidate]:
    for fraction in (0.75, 0.5, 0.375, 0.25):
        value = int(current * fraction)
        if value < floor:
            value = floor
        if value >= current:
            continue
        yield Candidate(knob, _step_cost(costs[knob], current, value), {field: value},
                        (_change(cfg, key, value, reason),))
        if value == floor:
            break


def candidates(cfg: Any, work: Workload, costs: dict[str, float], *, limit: int = 6) -> list[Candidate]:
    """Every single-knob change worth estimating for this config."""
    out: list[Candidate] = []
    fsdp = work.backend == "fsdp"
    min_tokens = -(-work.max_seq_tokens // work.sp)

    # --- training micro batches / token budgets
    if work.dynamic:
        out += _budget_candidates(cfg, work, costs, knob="token_budget", key=_A + "ppo_max_token_len_per_gpu",
                                  current=work.max_token_len, floor=min_tokens, field="max_token_len",
                                  reason="fewer tokens per actor micro batch (same mini batch, more accumulation)")
    else:
        out += _micro_candidates(cfg, work, costs, knob="micro_batch", per_gpu_key=_A + "ppo_micro_batch_size_per_gpu",
                                 global_key=_A + "ppo_micro_batch_size", current=work.micro_per_gpu or work.mini_per_dp,
                                 limit=limit, field="micro_per_gpu", divides=work.mini_per_dp, dp=work.dp,
                                 reason="smaller actor micro batch (same mini batch, more gradient accumulation)")
    if work.logprob_dynamic:
        out += _budget_candidates(cfg, work, costs, knob="log_prob_token_budget",
                                  key=_R + "log_prob_max_token_len_per_gpu", current=work.logprob_max_token_len,
                                  floor=min_tokens, field="logprob_max_token_len",
                                  reason="fewer tokens per old-log-prob micro batch")
    else:
        out += _micro_candidates(cfg, work, costs, knob="log_prob_micro_batch",
                                 per_gpu_key=_R + "log_prob_micro_batch_size_per_gpu",
                                 global_key=_R + "log_prob_micro_batch_size",
                                 current=work.logprob_micro, limit=limit, field="logprob_micro", divides=None,
                                 dp=work.dp, reason="smaller old-log-prob micro batch")
    if work.ref_used:
        if work.ref_dynamic:
            out += _budget_candidates(cfg, work, costs, knob="log_prob_token_budget",
                                      key=_REF + "log_prob_max_token_len_per_gpu", current=work.ref_max_token_len,
                                      floor=min_tokens, field="ref_max_token_len",
                                      reason="fewer tokens per reference log-prob micro batch")
        else:
            out += _micro_candidates(cfg, work, costs, knob="log_prob_micro_batch",
                                     per_gpu_key=_REF + "log_prob_micro_batch_size_per_gpu",
                                     global_key=_REF + "log_prob_micro_batch_size", current=work.ref_micro,
                                     limit=limit, field="ref_micro", divides=None, dp=work.dp,
                                     reason="smaller reference log-prob micro batch")
    if work.critic_used:
        critic_dp = max(1, work.n_gpus // work.critic_sp)
        if work.critic_dynamic:
            out += _budget_candidates(cfg, work, costs, knob="token_budget", key="critic.ppo_max_token_len_per_gpu",
                                      current=work.critic_max_token_len, floor=min_tokens,
                                      field="critic_max_token_len", reason="fewer tokens per critic micro batch")
        else:
            critic_mini = max(1, work.mini_batch * work.n // critic_dp)
            out += _micro_candidates(cfg, work, costs, knob="micro_batch",
                                     per_gpu_key="critic.ppo_micro_batch_size_per_gpu",
                                     global_key="critic.ppo_micro_batch_size", current=work.critic_micro,
                                     limit=limit, field="critic_micro", divides=critic_mini, dp=critic_dp,
                                     reason="smaller critic micro batch")

    # --- recomputation and logits
    if not work.grad_ckpt and fsdp:
        out.append(Candidate("gradient_checkpointing", costs["gradient_checkpointing"], {"grad_ckpt": True},
                             (_change(cfg, _M + "enable_gradient_checkpointing", True,
                                      "recompute activations in backward instead of storing them"),)))
    if work.critic_used and not work.critic_grad_ckpt and fsdp:
        out.append(Candidate("gradient_checkpointing", costs["gradient_checkpointing"], {"critic_grad_ckpt": True},
                             (_change(cfg, "critic.model.enable_gradient_checkpointing", True,
                                      "recompute critic activations in backward"),)))
    if fsdp and work.grad_ckpt and not work.activation_offload:
        out.append(Candidate("activation_offload", costs["activation_offload"], {"activation_offload": True},
                             (_change(cfg, _M + "enable_activation_offload", True,
                                      "keep checkpointed activations in CPU memory"),)))
    if fsdp and not work.entropy_chunking and not work.torch_compile:
        out.append(Candidate("entropy_chunking", costs["entropy_chunking"], {"entropy_chunking": True},
                             (_change(cfg, _A + "entropy_from_logits_with_chunking", True,
                                      "compute entropy in 2048-row chunks"),)))
    if fsdp and work.entropy_in_update and not work.entropy_checkpointing:
        out.append(Candidate("entropy_checkpointing", costs["entropy_checkpointing"], {"entropy_checkpointing": True},
                             (_change(cfg, _A + "entropy_checkpointing", True,
                                      "recompute entropy in backward instead of keeping its intermediates"),)))
    if fsdp and work.strategy == "fsdp":
        out.append(Candidate("fsdp2", costs["fsdp2"], {"strategy": "fsdp2"},
                             (_change(cfg, _A + "strategy", "fsdp2",
                                      "FSDP2: about 7% less memory (perf_tuning.rst)"),)))

    # --- offload
    if fsdp:
        if not work.actor_param_offload and not work.actor_offload_policy:
            out.append(Candidate("param_offload", costs["param_offload"], {"actor_param_offload": True},
                                 (_change(cfg, _A + "fsdp_config.param_offload", True,
                                          "keep actor parameters in CPU memory outside their use"),)))
        if not work.actor_optimizer_offload and not work.actor_offload_policy:
            out.append(Candidate("optimizer_offload", costs["optimizer_offload"], {"actor_optimizer_offload": True},
                                 (_change(cfg, _A + "fsdp_config.optimizer_offload", True,
                                          "keep Adam states in CPU memory outside the update"),)))
        if work.critic_used and not work.critic_param_offload:
            out.append(Candidate("param_offload", costs["param_offload"], {"critic_param_offload": True},
                                 (_change(cfg, "critic.model.fsdp_config.param_offload", True,
                                          "keep critic parameters in CPU memory outside their use"),)))
        if work.critic_used and not work.critic_optimizer_offload:
            out.append(Candidate("optimizer_offload", costs["optimizer_offload"], {"critic_optimizer_offload": True},
                                 (_change(cfg, "critic.model.fsdp_config.optimizer_offload", True,
                                          "keep critic Adam states in CPU memory outside its update"),)))
        if work.actor_dtype_bytes > 2:
            out.append(Candidate("model_dtype_bf16", costs["model_dtype_bf16"], {"actor_dtype_bytes": 2},
                                 (_change(cfg, _A + "fsdp_config.model_dtype", "bf16",
                                          "bf16 master weights and Adam states (halves them; changes numerics)"),)))
    else:
        mc = _A + "megatron."
        if not work.actor_param_offload:
            out.append(Candidate("param_offload", costs["param_offload"], {"actor_param_offload": True},
                                 (_change(cfg, mc + "param_offload", True,
                                          "keep Megatron parameters (and gradient buffers) in CPU memory"),)))
        if not work.actor_optimizer_offload:
            out.append(Candidate("optimizer_offload", costs["optimizer_offload"], {"actor_optimizer_offload": True},
                                 (_change(cfg, mc + "optimizer_offload", True,
                                          "keep optimizer states in CPU memory"),)))
        if not work.actor_grad_offload:
            out.append(Candidate("optimizer_offload", costs["optimizer_offload"], {"actor_grad_offload": True},
                                 (_change(cfg, mc + "grad_offload", True, "keep gradient buffers in CPU memory"),)))
        if work.ref_used and not work.ref_param_offload:
            out.append(Candidate("ref_offload", costs["ref_offload"], {"ref_param_offload": True},
                                 (_change(cfg, _REF + "megatron.param_offload", True,
                                          "keep the reference model in CPU memory outside its forward"),)))
        if work.critic_used and not work.critic_param_offload:
            out.append(Candidate("param_offload", costs["param_offload"], {"critic_param_offload": True},
                                 (_change(cfg, "critic.megatron.param_offload", True,
                                          "keep critic parameters in CPU memory"),)))

    # --- inference engine
    if work.engine in ("vllm", "sglang", "trtllm"):
        for delta in (0.05, 0.1, 0.15, 0.2, 0.3):
            value = round(work.gmu - delta, 2)
            if value >= 0.1:
                out.append(Candidate("gpu_memory_utilization", costs["gpu_memory_utilization"] * delta / 0.05,
                                     {"gmu": value}, (_change(cfg, _R + "gpu_memory_utilization", value,
                                                              "smaller inference-engine budget (less KV cache)"),)))
        for delta in (0.05, 0.1, 0.2):
            value = round(work.gmu + delta, 2)
            if value <= 0.9:
                out.append(Candidate("gpu_memory_utilization", costs["gpu_memory_utilization"] * delta / 0.05,
                                     {"gmu": value}, (_change(cfg, _R + "gpu_memory_utilization", value,
                                                              "larger inference-engine budget (room for KV cache)"),)))
        tp = work.rollout_tp * 2
        while tp <= work.gpus_per_node and work.n_gpus % (tp * work.rollout_dp) == 0:
            out.append(Candidate("rollout_tp", costs["rollout_tp"] * (tp // work.rollout_tp) / 2, {"rollout_tp": tp},
                                 (_change(cfg, _R + "tensor_model_parallel_size", tp,
                                          "split the inference weights over more GPUs"),)))
            tp *= 2
        if not work.free_cache_engine:
            out.append(Candidate("free_cache_engine", costs["free_cache_engine"], {"free_cache_engine": True},
                                 (_change(cfg, _R + "free_cache_engine", True,
                                          "put the engine to sleep during training (frees its weights and KV)"),)))
        if not work.enforce_eager and work.engine != "trtllm":
            out.append(Candidate("enforce_eager", costs["enforce_eager"], {"enforce_eager": True},
                                 (_change(cfg, _R + "enforce_eager", True,
                                          "no CUDA graphs (their memory stays resident through training)"),)))
        for value in _halvings(work.max_num_seqs, 16)[:3]:
            reason = "fewer concurrent sequences (smaller CUDA graphs)"
            out.append(Candidate("max_num_seqs", _step_cost(costs["max_num_seqs"], work.max_num_seqs, value),
                                 {"max_num_seqs": value}, (_change(cfg, _R + "max_num_seqs", value, reason),)))
        if work.max_model_len_settable and (work.max_model_len is None or work.max_model_len > work.max_seq_tokens):
            out.append(Candidate("max_model_len", costs["max_model_len"],
                                 {"max_model_len": work.max_seq_tokens},
                                 (_change(cfg, _R + "max_model_len", work.max_seq_tokens,
                                          "cap the engine at max_prompt_length + max_response_length, the longest "
                                          "sequence verl asks for"),)))
    return out
