"""Per-GPU, per-phase memory of one colocated (hybrid-engine) verl step.

The phases follow verl's step timeline (research notes verl-internals.md §8.2): generate (inference
engine awake, training state resident unless offloaded), weight_sync (actor -> engine), old_log_prob
(actor forward), ref_log_prob, critic_values, critic_update, actor_update. Generation and training are
separate peaks and are never summed; what stays resident across them (unoffloaded training state,
CUDA graphs, the engine when free_cache_engine=False) is counted in both.

One function per phase in :mod:`._phases`, the engines as a table in :mod:`._engines` (their pools in
:mod:`._pool`), the byte terms in :mod:`._terms`. All arithmetic is closed form on a
:class:`~._workload.Workload`; every constant comes from knowledge/memory.yaml through :mod:`._constants`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._constants import MIB, MemoryConstants, constants
from ._hardware import GpuSpec, resolve_gpu
from ._host import host_estimate
from ._models import ModelSpec, resolve_model
from ._phases import step_context, step_phases
from ._pool import EnginePool, sequence_cache
from ._read import read_workload
from ._results import BREAKDOWN_KEYS, RISK_ORDER, STAGES, HostEstimate, KvCapacity, MemoryEstimate, StageEstimate
from ._workload import Workload

if TYPE_CHECKING:
    from advisor.load import VerlConfig

__all__ = ["BREAKDOWN_KEYS", "RISK_ORDER", "STAGES", "HostEstimate", "MemoryEstimate", "StageEstimate",
           "estimate_memory", "estimate_workload"]


def estimate_workload(work: Workload, model: ModelSpec, gpu: GpuSpec,
                      host_memory_gib: float | None = None, *, with_worst_case: bool = True) -> MemoryEstimate:
    """The memory estimate for an already-resolved workload (the fix search calls this directly).

    Each phase's verdict uses the typical lengths (a known dataset, or ``sequence_tokens``); when those are
    shorter than max_prompt_length + max_response_length the same phase at max length is attached as
    ``worst_gib``. An unknown dataset is estimated at max length and labelled ``worst case``. When the real
    lengths are not known (an unknown dataset, a vision-language model's image tokens), a phase whose verdict
    differs between the shortest lengths the inputs allow and max length is ``unknown``, with what to pass:
    its risk hangs on an input we lack, and a worst-case number is not the answer.
    """
    estimate = _estimate_workload(work, model, gpu, host_memory_gib)
    packs_real_tokens = work.actor.remove_padding or work.actor.dynamic
    if not packs_real_tokens:  # every sequence padded to the maximum: the lengths do not matter
        return replace(estimate, stages=tuple(replace(s, lengths="worst case") for s in estimate.stages))
    worst = estimate
    if work.lengths.typical_tokens < work.max_seq_tokens and with_worst_case:
        worst = _estimate_workload(work.edit({"lengths.typical_tokens": float(work.max_seq_tokens)}), model, gpu,
                                   host_memory_gib)
        by_stage = {s.stage: s.peak_gib for s in worst.stages}
        estimate = replace(estimate, stages=tuple(
            replace(s, worst_gib=by_stage.get(s.stage)) if abs(by_stage.get(s.stage, s.peak_gib) - s.peak_gib) > 0.05
            else s for s in estimate.stages))
    elif work.lengths.typical_tokens >= work.max_seq_tokens:
        lengths = work.lengths
        label = "worst case" if lengths.missing and lengths.typical_floor < lengths.typical_tokens else "typical"
        estimate = replace(estimate, stages=tuple(replace(s, lengths=label) for s in estimate.stages))
    if work.lengths.missing and with_worst_case:
        estimate = _unknown_where_lengths_decide(work, model, gpu, host_memory_gib, estimate, worst)
    return estimate


def _unknown_where_lengths_decide(work: Workload, model: ModelSpec, gpu: GpuSpec, host_memory_gib: float | None,
                                  estimate: MemoryEstimate, worst: MemoryEstimate) -> MemoryEstimate:
    """Phases whose risk differs between the shortest lengths the inputs allow and max length become unknown."""
    if work.lengths.typical_floor < work.lengths.typical_tokens:
        at_floor = work.edit({"lengths.typical_tokens": work.lengths.typical_floor})
        floor = _estimate_workload(at_floor, model, gpu, host_memory_gib)
    else:
        floor = estimate
    low = {s.stage: s for s in floor.stages}
    high = {s.stage: s for s in worst.stages}
    stages = []
    for s in estimate.stages:
        a, b = low[s.stage], high[s.stage]
        if s.risk != "unknown" and a.risk != b.risk and "unknown" not in (a.risk, b.risk):
            s = replace(s, risk="unknown", missing=(
                f"cannot say: {a.risk} at the shortest lengths ({a.peak_gib:.1f} GiB), {b.risk} with every sequence "
                f"at max length ({b.peak_gib:.1f} GiB); it depends on {work.lengths.missing}"))
        stages.append(s)
    return replace(estimate, stages=tuple(stages))


def _estimate_workload(work: Workload, model: ModelSpec, gpu: GpuSpec,
                       host_memory_gib: float | None = None) -> MemoryEstimate:
    consts = constants()
    step = step_context(work, model, consts, gpu.memory_gib, gpu.name)
    phases, pool = step_phases(step)
    if work.unresolved:
        keys = ", ".join(work.unresolved)
        for phase in phases:
            phase.missing = phase.missing or f"cannot say: {keys} left as an unevaluated shell variable; pass its value"
    if work.unseen:
        what = "; ".join(work.unseen)
        for phase in phases:
            phase.missing = phase.missing or (f"cannot say: {what} is a config-group option the advisor cannot see "
                                              "(its engine, parallelism and offload decide the memory)")
    stages = tuple(p.finish(gpu.memory_gib, consts) for p in phases)
    host = host_estimate(work, model, step.sizes, step.critic_sizes, pool, host_memory_gib, consts)
    return MemoryEstimate(gpu=gpu, model=model, stages=stages, host=host,
                          assumptions=_assumptions(work, model, pool, consts), kv=_kv_capacity(work, model, pool))


def _kv_capacity(work: Workload, model: ModelSpec, pool: EnginePool) -> KvCapacity | None:
    """The cache the engine's pool leaves for sequences (the same numbers ``_assumptions`` words)."""
    if not pool.engine.has_pool:
        return None
    cache = sequence_cache(work.rollout, model)
    seqs = cache.sequences_in(max(0.0, pool.kv), work.max_seq_tokens)
    tokens = 0.0 if cache.state or not cache.kv_per_token else max(0.0, pool.kv) / cache.kv_per_token
    return KvCapacity(work.rollout.engine, tokens, seqs, work.max_seq_tokens, work.rollout.max_num_seqs)


def _assumptions(work: Workload, model: ModelSpec, pool: EnginePool, consts: MemoryConstants) -> tuple[str, ...]:
    """What the estimate took for granted, in words (lengths, the KV cache it implies, the named residual)."""
    out = [work.lengths.typical_source if work.actor.remove_padding or work.actor.dynamic else
           "use_remove_padding=False: every sequence padded to max_prompt_length + max_response_length"]
    if pool.engine.has_pool:
        cache = sequence_cache(work.rollout, model)
        seqs = cache.sequences_in(max(0.0, pool.kv), work.max_seq_tokens)
        if cache.state:  # a hybrid model: the cache holds sequences (KV per token + a state per sequence)
            mixer = "Mamba" if model.hybrid_pattern else "linear-attention"
            out.append(
                f"{work.rollout.engine} cache holds {seqs:,.1f} sequences of {work.max_seq_tokens} tokens per GPU: "
                f"{cache.kv_per_token:,} B of KV per token (full-attention layers) and "
                f"{cache.state / MIB:,.1f} MiB of {mixer} state per sequence "
                f"(max_num_seqs {work.rollout.max_num_seqs})")
        else:
            kv_tokens = max(0.0, pool.kv) / cache.kv_per_token if cache.kv_per_token else 0.0
            out.append(
                f"{work.rollout.engine} KV cache holds {kv_tokens:,.0f} tokens per GPU = "
                f"{seqs:,.1f} sequences of {work.max_seq_tokens} tokens "
                f"(max_num_seqs {work.rollout.max_num_seqs})")
    out.extend(work.notes)
    if not work.megatron and work.actor.lora_rank > 0 and work.topology.n_gpus > 1 and work.topology.sp > 1:
        low, high = consts.lora_sp_residual_gib
        out.append(
            f"not in the verdict: verl's multi-GPU LoRA trails with Ulysses SP ran out of memory {low:.0f}-{high:.0f} "
            f"GiB per GPU before this model says (knowledge/memory.yaml residuals.multi_gpu_lora_sp; no code path "
            f"found yet): leave that much room in actor_update")
    return tuple(out)


def estimate_memory(
    cfg: VerlConfig,
    *,
    model: str | ModelSpec | None = None,
    gpu: str | GpuSpec | None = None,
    gpu_memory_gib: float | None = None,
    host_memory_gib: float | None = None,
    model_config: Any = None,
    sequence_tokens: float | None = None,
    image_tokens: int | None = None,
) -> MemoryEstimate:
    """Estimate the peak memory of each phase of one verl step on one GPU.

    Args:
        cfg: a :class:`~advisor.VerlConfig` (from :func:`advisor.load_config`).
        model: a catalog name (``Qwen2.5-7B``) or a :class:`ModelSpec`; default: from the config's
            ``actor_rollout_ref.model.path``.
        gpu: a catalog name (``H100``) or a :class:`GpuSpec`; required unless ``gpu_memory_gib``.
        gpu_memory_gib: device memory in GiB (overrides the catalog's value when ``gpu`` is given).
        host_memory_gib: host RAM per node in GiB; enables the host-RAM risk.
        model_config: a Hugging Face config.json path or dict; wins over ``model``.
        sequence_tokens: real prompt + response tokens of a typical sequence of your data (used when
            remove-padding packs real tokens); default: knowledge/memory.yaml's dataset table, else
            max_prompt_length + max_response_length.
        image_tokens: a vision-language model's image tokens per prompt, added to the dataset table's
            typical prompt (verl counts them against max_prompt_length).

    Raises:
        ConfigError: unknown model or GPU, or no GPU given.
    """
    spec = resolve_model(cfg, model=model, model_config=model_config)
    device = gpu if isinstance(gpu, GpuSpec) else resolve_gpu(gpu, memory_gib=gpu_memory_gib)
    if isinstance(gpu, GpuSpec) and gpu_memory_gib is not None:
        device = GpuSpec(gpu.name, float(gpu_memory_gib), gpu.vendor, gpu.source, gpu.aliases)
    work = read_workload(cfg, spec, constants(), sequence_tokens, image_tokens)
    return estimate_workload(work, spec, device, host_memory_gib)
