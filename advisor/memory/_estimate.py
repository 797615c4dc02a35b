"""Per-GPU, per-phase memory of one colocated (hybrid-engine) verl step.

The phases follow verl's step timeline (research notes verl-internals.md §8.2): generate (inference
engine awake, training state resident unless offloaded), weight_sync (actor -> engine), old_log_prob
(actor forward), ref_log_prob, critic_values, critic_update, actor_update. Generation and training are
separate peaks and are never summed; what stays resident across them (unoffloaded training state,
CUDA graphs, the engine when free_cache_engine=False) is counted in both.

All arithmetic is closed form on a :class:`~._workload.Workload`; every constant comes from
knowledge/memory.yaml through :mod:`._constants`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ._constants import GIB, MIB, MemoryConstants, constants
from ._hardware import GpuSpec, resolve_gpu
from ._models import (
    ModelSpec,
    embedding_params,
    expert_params,
    kv_bytes_per_token,
    kv_dim,
    largest_layer_params,
    lora_params,
    resolve_model,
    token_mlp_width,
    total_params,
)
from ._workload import Workload, read_workload

_BF16_BYTES = 2  # compute dtype of activations, gathered FSDP units and engine weights (fsdp_config.dtype)
_FP32_BYTES = 4  # FSDP reduce dtype, fused-kernel and sampler logits
BREAKDOWN_KEYS = ("weights", "grads", "optimizer", "activations", "logits", "kv_cache", "cuda_graphs", "overhead")
# unknown: a phase the model cannot size (a missing input); it outranks ok, never tight or oom
RISK_ORDER = {"ok": 0, "unknown": 1, "tight": 2, "oom": 3}
STAGES = ("generate", "weight_sync", "old_log_prob", "ref_log_prob", "critic_values", "critic_update",
          "actor_update")


@dataclass(frozen=True)
class StageEstimate:
    """Peak memory of one phase on one GPU."""

    stage: str
    peak_gib: float
    capacity_gib: float
    risk: str
    breakdown: dict[str, float]
    details: tuple[tuple[str, str, float], ...] = ()
    reason: str | None = None
    basis: str | None = None  # what the risk was judged on, when not the whole peak (generate: beside the pool)
    worst_gib: float | None = None  # the same phase with every sequence at max length (None: same as peak)
    lengths: str = "typical"  # which lengths the peak and risk use: typical | worst case
    missing: str | None = None  # risk unknown: the input to pass

    @property
    def fraction(self) -> float:
        if self.risk == "unknown":
            return 0.0
        return self.peak_gib / self.capacity_gib if self.capacity_gib else float("inf")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "stage": self.stage,
            "peak_gib": round(self.peak_gib, 2),
            "capacity_gib": round(self.capacity_gib, 2),
            "risk": self.risk,
            "breakdown": {k: round(v, 2) for k, v in self.breakdown.items()},
            "details": [{"part": cat, "item": label, "gib": round(gib, 3)} for cat, label, gib in self.details],
        }
        if self.reason:
            out["reason"] = self.reason
        if self.basis:
            out["basis"] = self.basis
        if self.worst_gib is not None:
            out["worst_case_gib"] = round(self.worst_gib, 2)
        out["lengths"] = self.lengths
        if self.missing:
            out["missing"] = self.missing
        return out


@dataclass(frozen=True)
class HostEstimate:
    """Host RAM per node: offloaded state plus the checkpoint load at start-up."""

    peak_gib: float
    capacity_gib: float | None
    risk: str | None
    details: tuple[tuple[str, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "peak_gib_per_node": round(self.peak_gib, 2),
            "capacity_gib": None if self.capacity_gib is None else round(self.capacity_gib, 2),
            "risk": self.risk,
            "details": [{"item": label, "gib": round(gib, 3)} for label, gib in self.details],
        }


@dataclass(frozen=True)
class MemoryEstimate:
    """The memory model's answer for one config on one GPU type."""

    gpu: GpuSpec
    model: ModelSpec
    stages: tuple[StageEstimate, ...]
    host: HostEstimate
    assumptions: tuple[str, ...] = field(default=())

    @property
    def gpu_memory_gib(self) -> float:
        return self.gpu.memory_gib

    @property
    def verdict(self) -> str:
        """The worst risk over all phases (and host RAM when its size is known)."""
        risks = [s.risk for s in self.stages]
        if self.host.risk is not None:
            risks.append(self.host.risk)
        return max(risks, key=RISK_ORDER.__getitem__) if risks else "ok"

    @property
    def peak(self) -> StageEstimate:
        return max(self.stages, key=lambda s: (RISK_ORDER[s.risk], s.fraction))

    def stage(self, name: str) -> StageEstimate:
        for s in self.stages:
            if s.stage == name:
                return s
        raise KeyError(f"no stage {name!r}; stages: {', '.join(s.stage for s in self.stages)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu_memory_gib": round(self.gpu.memory_gib, 2),
            "gpu": self.gpu.to_dict(),
            "model": self.model.to_dict(),
            "stages": [s.to_dict() for s in self.stages],
            "host": self.host.to_dict(),
            "assumptions": list(self.assumptions),
            "verdict": self.verdict,
        }

    def rows(self) -> list[dict[str, Any]]:
        """One row per phase for a text table: stage, peak, capacity, percent, risk, the largest parts."""
        rows = []
        for s in self.stages:
            top = sorted(((k, v) for k, v in s.breakdown.items() if v >= 0.05), key=lambda kv: -kv[1])[:3]
            note = s.missing or s.reason or ""
            if s.basis and not note:
                note = s.basis
            if s.worst_gib is not None and s.risk != "unknown":
                worst = f"worst case (every sequence at max length) {s.worst_gib:.1f} GiB"
                note = f"{note}; {worst}" if note else worst
            rows.append({
                "stage": s.stage,
                "peak_gib": round(s.peak_gib, 1),
                "capacity_gib": round(s.capacity_gib, 1),
                "percent": round(100 * s.fraction),
                "risk": s.risk,
                "largest": ", ".join(f"{k} {v:.1f}" for k, v in top),
                "reason": note,
            })
        return rows


# ---------------------------------------------------------------------------------------------


class _Phase:
    """Accumulates one phase's parts by breakdown category."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.parts: list[tuple[str, str, float]] = []
        self.reason: str | None = None
        self.missing: str | None = None  # set: the phase cannot be sized without this input
        self.pool: float | None = None  # bytes the inference engine pre-allocates by design (generate only)
        self.thin: str | None = None  # a start-up check too close to call: at least tight

    def add(self, category: str, label: str, nbytes: float) -> None:
        if nbytes > 0:
            self.parts.append((category, label, float(nbytes)))

    def finish(self, capacity_gib: float, consts: MemoryConstants) -> StageEstimate:
        breakdown = dict.fromkeys(BREAKDOWN_KEYS, 0.0)
        for category, _label, nbytes in self.parts:
            breakdown[category] += nbytes / GIB
        peak = sum(breakdown.values())
        fraction = peak / capacity_gib
        basis = None
        if self.missing:  # a reason computed from a defaulted input is no reason
            risk = "unknown"
        elif self.reason:
            risk = "oom"
        elif self.pool is not None:
            # The engine takes its pool whole by design (gpu_memory_utilization / mem_fraction_static), so
            # the 80% rule would flag every large pool. What is estimated is the rest: it must fit in
            # the memory beside the pool, with a thin-margin band for the terms known only to a range.
            pool_gib = self.pool / GIB
            beside = peak - pool_gib
            room = capacity_gib - pool_gib
            margin = room - beside
            if margin < 0:
                risk = "oom"
            elif margin < consts.generate_thin_margin_gib:
                risk = "tight"
            else:
                risk = "ok"
            basis = (f"judged beside the engine's {pool_gib:.1f} GiB pool: {beside:.1f} GiB must fit in "
                     f"{room:.1f} GiB, margin {margin:.1f} GiB")
            if self.thin:
                risk = "tight" if risk == "ok" else risk
                basis = f"{basis}; {self.thin}, within {consts.generate_thin_margin_gib:.0f} GiB"
        elif fraction > consts.oom_above:
            risk = "oom"
        elif fraction >= consts.ok_below:
            risk = "tight"
        else:
            risk = "ok"
        details = tuple((c, label, b / GIB) for c, label, b in self.parts)
        return StageEstimate(self.stage, peak, capacity_gib, risk, breakdown, details, self.reason, basis,
                             missing=self.missing)


@dataclass(frozen=True)
class _Sizes:
    """Per-GPU byte sizes derived once from the model and the workload."""

    params: float  # actor parameters on one GPU when loaded
    grads: float
    optimizer: float  # on GPU when not offloaded
    gathered_fwd: float  # transient unsharded units during a forward
    gathered_bwd: float  # ... during forward + backward
    largest_tensor: float  # the biggest single parameter, materialised whole during weight sync
    optimizer_on_cpu: float = 0.0  # Megatron hybrid CPU optimizer share (per GPU)


def _layer_act_bytes(model: ModelSpec, consts: MemoryConstants) -> float:
    """Bytes saved for backward per token for one decoder layer (no recomputation)."""
    return (consts.act_hidden_coeff * model.hidden + consts.act_kv_coeff * kv_dim(model)
            + consts.act_mlp_coeff * token_mlp_width(model))


def _train_act_parts(model: ModelSpec, consts: MemoryConstants, *, grad_ckpt: bool, offload: bool,
                     layers: float, split: int = 1) -> tuple[float, float]:
    """Bytes per token of one training micro batch: (kept through the whole backward, one recomputed layer).

    Without checkpointing every layer's activations are kept (the second term is 0). With it, each layer
    keeps its input and one layer is recomputed at a time during the backward.
    """
    layer = _layer_act_bytes(model, consts) / split
    if grad_ckpt:
        stored = 0.0 if offload else layers * consts.checkpoint_bytes_per_hidden * model.hidden / split
        return stored, consts.recomputed_layers * layer
    return layers * layer, 0.0


def _train_act_per_token(model: ModelSpec, consts: MemoryConstants, *, grad_ckpt: bool, offload: bool,
                         layers: float, split: int = 1) -> float:
    """Bytes per token of a training micro batch without a vocab head (critic): kept + one recomputed layer."""
    return sum(_train_act_parts(model, consts, grad_ckpt=grad_ckpt, offload=offload, layers=layers, split=split))


def _fwd_act_parts(model: ModelSpec, consts: MemoryConstants, split: int = 1) -> tuple[float, float]:
    """Bytes per token of a forward without grad: (residual stream and layer output, one layer's intermediates)."""
    return 2 * _BF16_BYTES * model.hidden, consts.forward_live_layers * _layer_act_bytes(model, consts) / split


def _fwd_act_per_token(model: ModelSpec, consts: MemoryConstants, split: int = 1) -> float:
    # one layer's intermediates plus the residual stream and the layer output (bf16)
    return sum(_fwd_act_parts(model, consts, split))


def _forward_logit_bytes(work: Workload, consts: MemoryConstants, tokens: float, vocab: float,
                         entropy: bool) -> float:
    """Logits of a forward without grad (old-log-prob with entropy, ref/critic without)."""
    if work.fused_kernels:
        return min(tokens, consts.fused_chunk_rows) * vocab * _FP32_BYTES
    total = tokens * vocab * consts.logit_bytes
    if entropy and not work.torch_compile:
        rows = min(tokens, consts.entropy_chunk_rows) if work.entropy_chunking else tokens
        total += rows * vocab * consts.forward_entropy_extra_bytes(work.entropy_chunking)
    return total


def _train_logit_bytes(work: Workload, consts: MemoryConstants, tokens: float, vocab: float) -> float:
    """Logits, entropy intermediates and logit gradients of one training micro batch."""
    if work.fused_kernels:
        return min(tokens, consts.fused_chunk_rows) * vocab * _FP32_BYTES
    total = tokens * vocab * consts.logit_bytes
    if not work.entropy_in_update:
        return total  # flash-attn cross entropy writes its backward into the logits
    if work.legacy_actor:
        # dp_actor.py divides the logits by the temperature in place on a squeeze(0) view; the backward
        # then holds four bf16 [tokens x vocab] buffers (knowledge/memory.yaml logits.legacy_entropy_backward_bytes)
        total = tokens * vocab * consts.legacy_entropy_backward_bytes
    else:
        total += 2 * tokens * vocab * consts.logit_grad_bytes  # cross-entropy and entropy gradients
    if not work.torch_compile and not work.entropy_checkpointing:
        total += tokens * vocab * consts.eager_entropy_extra_bytes
    return total


def _nccl_bytes(work: Workload, consts: MemoryConstants) -> tuple[float, str]:
    """NCCL communicators this GPU's processes hold, outside torch's counters (NCCL issue #964).

    One per process group of more than one GPU: the trainer's FSDP world, its Ulysses group and the
    inference engine's TP group (issue 19 counts these on a multi-GPU FSDP run).
    """
    if work.backend == "megatron":
        # Megatron builds many groups whose NCCL communicators PyTorch creates lazily on first use; which
        # ones verl's step touches is not established, so none is counted beyond the 1.5 GiB overhead
        return 0.0, "NCCL communicators (Megatron: in the overhead)"
    groups: list[tuple[str, int]] = [("world", work.n_gpus), ("Ulysses SP", work.sp)]
    if work.engine != "hf":
        groups.append((f"{work.engine} TP", work.rollout_tp))
    live = [(name, size) for name, size in groups if size > 1]
    total = sum(consts.nccl_gib_two if size == 2 else consts.nccl_gib_more for _name, size in live) * GIB
    names = ", ".join(f"{name} {size}" for name, size in live)
    return total, f"NCCL communicators ({names})"


def _missing_micro(dynamic: bool, micro: int | None, section: str) -> str | None:
    """Why a log-prob phase cannot be sized: neither a micro batch nor dynamic batching is set.

    verl refuses such a config (verl/utils/config.py:153-154 and workers/engine_workers.py:636 @ 0.9.1:
    "Please set at least one of ..."), so the phase would be a made-up full-batch number.
    """
    if dynamic or micro is not None:
        return None
    return (f"cannot say: no log-prob micro batch; verl needs {section}.log_prob_micro_batch_size_per_gpu "
            f"(or log_prob_use_dynamic_bsz=True with log_prob_max_token_len_per_gpu)")


def _add_forward_peak(phase: _Phase, tokens: float, model: ModelSpec, consts: MemoryConstants, split: int,
                      transient: float, logit_label: str, logit_bytes: float) -> None:
    """A forward without grad: the residual stream, then one layer's intermediates or the logits, never both.

    Without autograd a layer's intermediates are freed as soon as the layer returns, so the lm_head
    (and the log-prob/entropy computed on its output) runs after the last layer's temporaries are gone.
    """
    residual, layer = _fwd_act_parts(model, consts, split)
    phase.add("activations", f"forward activations: residual stream ({tokens:,.0f} tokens per micro batch)",
              tokens * residual * transient)
    if logit_bytes >= tokens * layer:
        phase.add("logits", logit_label, logit_bytes * transient)
    else:
        phase.add("activations", "forward activations: one layer's intermediates (larger than the logits)",
                  tokens * layer * transient)


def _seq_tokens(work: Workload, remove_padding: bool) -> float:
    return work.typical_tokens if remove_padding else float(work.max_seq_tokens)


def _micro_tokens(work: Workload, *, micro: int | None, dynamic: bool, budget: int, split: int,
                  remove_padding: bool, batch_responses: int) -> float:
    """Tokens one GPU processes in one micro batch (after Ulysses/context-parallel splitting)."""
    per_seq = _seq_tokens(work, remove_padding)
    batch_tokens = batch_responses * per_seq
    if dynamic:
        # token-packed micro batches of at most budget x sp tokens (dp_actor.py:551-553);
        # one sequence always fits (verl asserts budget x sp >= prompt + response)
        group = min(max(budget * split, per_seq), batch_tokens)
    else:
        group = min(micro or batch_responses, batch_responses) * per_seq
    return group / split


def _vllm_profile_bytes(work: Workload, model: ModelSpec, consts: MemoryConstants) -> float:
    tp = work.rollout_tp
    # residual stream + gate and up projections
    hidden_path = work.max_num_batched_tokens * (model.hidden + 2 * token_mlp_width(model) / tp) * _BF16_BYTES
    sampler = min(work.max_num_seqs, work.max_num_batched_tokens) * model.vocab * consts.profile_sampler_bytes_per_logit
    return hidden_path + sampler


def _cuda_graph_bytes(work: Workload, consts: MemoryConstants) -> float:
    if work.enforce_eager or work.engine not in ("vllm", "sglang"):
        return 0.0
    # vLLM captures batch sizes up to min(2 x max_num_seqs, 512) by default (VllmConfig._set_cudagraph_sizes)
    largest = work.cudagraph_max_size or min(work.max_num_seqs * 2, consts.cuda_graph_full_capture_size)
    scale = min(1.0, largest / consts.cuda_graph_full_capture_size)
    return max(consts.cuda_graph_gib_min, consts.cuda_graph_gib_max * scale) * GIB


def _fsdp_sizes(work: Workload, model: ModelSpec, consts: MemoryConstants) -> _Sizes:
    p_all = total_params(model)
    if work.lora_rank > 0:
        trainable = lora_params(model, work.lora_rank, work.lora_targets)
        p_all += trainable
    elif work.freeze_vision:
        trainable = p_all - model.extra_params
    else:
        trainable = p_all
    shard = work.fsdp_shard
    b = work.actor_dtype_bytes
    params = b * p_all / shard
    grads = b * trainable / shard
    optimizer = consts.adam_states_per_param * b * trainable / shard
    root = (embedding_params(model) + model.hidden + model.extra_params) * _BF16_BYTES
    layer = largest_layer_params(model) * _BF16_BYTES
    gathered_fwd = root + consts.fsdp_live_layer_units * layer
    # backward also holds the unsharded gradient of the unit being reduced (fp32 reduce dtype)
    gathered_bwd = gathered_fwd + (0 if work.lora_rank > 0 else layer * _FP32_BYTES / _BF16_BYTES)
    largest_tensor = b * model.vocab * model.hidden
    return _Sizes(params, grads, optimizer, gathered_fwd, gathered_bwd, largest_tensor)


def _megatron_sizes(work: Workload, model: ModelSpec, consts: MemoryConstants, *, ref: bool = False) -> _Sizes:
    """Per-GPU shards under Megatron TP/PP/EP (worst pipeline stage: the one holding an embedding)."""
    p_all = total_params(model)
    p_exp = expert_params(model)
    emb = embedding_params(model)
    body = p_all - p_exp - emb - model.extra_params
    emb_on_stage = emb if work.pp == 1 or model.tie_embeddings else emb / 2
    dense_gpu = (body / work.pp + emb_on_stage + model.extra_params) / work.tp
    expert_gpu = p_exp / (work.pp * work.ep * work.etp)
    params_gpu = dense_gpu + expert_gpu
    weights = consts.megatron_weight_bytes * params_gpu
    if ref:
        return _Sizes(weights, 0.0, 0.0, 0.0, 0.0, 0.0)
    if work.lora_rank > 0:
        trainable_share = lora_params(model, work.lora_rank, work.lora_targets) / max(1, p_all)
    else:
        trainable_share = 1.0
    grads = consts.megatron_grad_bytes * params_gpu * trainable_share
    if work.distributed_optimizer:
        dp_dense = max(1, work.n_gpus // (work.tp * work.pp))
        dp_expert = max(1, work.n_gpus // (work.ep * work.etp * work.pp))
        opt_params = dense_gpu / dp_dense + expert_gpu / dp_expert
    else:
        opt_params = params_gpu
    optimizer = consts.megatron_optimizer_bytes * opt_params * trainable_share
    on_cpu = optimizer * work.optimizer_cpu_fraction
    largest = consts.megatron_weight_bytes * model.vocab * model.hidden  # gathered over TP for the sync
    return _Sizes(weights, grads, optimizer - on_cpu, 0.0, 0.0, largest, on_cpu)


def _critic_model(model: ModelSpec, work: Workload) -> ModelSpec:
    """The critic: the same backbone with a value head instead of the lm_head (no vocab logits)."""
    base = work.critic_model or model
    return replace(base, tie_embeddings=True)  # drops the lm_head from the count; the h x 1 head is noise


def estimate_workload(work: Workload, model: ModelSpec, gpu: GpuSpec,
                      host_memory_gib: float | None = None, *, with_worst_case: bool = True) -> MemoryEstimate:
    """The memory estimate for an already-resolved workload (the fix search calls this directly).

    Each phase's verdict uses the typical lengths (a known dataset, or ``sequence_tokens``); when those are
    shorter than max_prompt_length + max_response_length the same phase at max length is attached as
    ``worst_gib``. An unknown dataset is estimated at max length and labelled ``worst case``.
    """
    estimate = _estimate_workload(work, model, gpu, host_memory_gib)
    packs_real_tokens = work.remove_padding or work.dynamic
    if not packs_real_tokens or work.typical_tokens >= work.max_seq_tokens:
        label = "worst case" if packs_real_tokens and work.typical_source.startswith("unknown dataset") else (
            "typical" if packs_real_tokens else "worst case")
        return replace(estimate, stages=tuple(replace(s, lengths=label) for s in estimate.stages))
    if not with_worst_case:
        return estimate
    worst = _estimate_workload(replace(work, typical_tokens=float(work.max_seq_tokens)), model, gpu, host_memory_gib)
    by_stage = {s.stage: s.peak_gib for s in worst.stages}
    stages = tuple(replace(s, worst_gib=by_stage.get(s.stage)) if abs(by_stage.get(s.stage, s.peak_gib) - s.peak_gib)
                   > 0.05 else s for s in estimate.stages)
    return replace(estimate, stages=stages)


def _estimate_workload(work: Workload, model: ModelSpec, gpu: GpuSpec,
                       host_memory_gib: float | None = None) -> MemoryEstimate:
    consts = constants()
    cap = gpu.memory_gib
    megatron = work.backend == "megatron"
    sizes = _megatron_sizes(work, model, consts) if megatron else _fsdp_sizes(work, model, consts)
    transient = consts.fsdp2_transient_factor if work.strategy == "fsdp2" else 1.0
    split = work.cp if megatron else work.sp
    act_split = work.tp if megatron else 1
    vocab_split = work.tp if megatron else 1
    layers_held = float(model.layers)
    if megatron:
        layers_held = model.layers / work.pp * min(work.pp, max(1, work.mini_per_dp // max(1, work.micro_per_gpu or 1)))

    # --- what stays resident between phases
    actor_params_res = 0.0 if work.actor_param_offload or work.actor_offload_policy else sizes.params
    actor_opt_res = 0.0 if work.actor_optimizer_offload or work.actor_offload_policy else sizes.optimizer
    # Megatron's fp32 gradient buffer is only freed by param_offload (megatron_utils.py:411-443)
    actor_grad_res = (sizes.grads if megatron and not (work.actor_param_offload or work.actor_grad_offload)
                      else 0.0)
    critic = _critic_model(model, work) if work.critic_used else None
    if critic is not None:
        if megatron:
            # Colocated workers share one process and one Megatron parallel state: the actor worker,
            # created first, calls mpu.initialize_model_parallel with the actor's TP/PP/CP/EP and the
            # critic skips its own (megatron_workers.py:1003-1009 and 283-293 @ b178a3cd; roles are
            # instantiated in insertion order, actor first: ray_trainer.py:751,784 and
            # single_controller/ray/base.py:983-991). The critic's model is then cut by mpu's sizes
            # (mcore/config_converter.py:77-85; mbridge reads the same mpu state), so
            # critic.megatron.*_parallel_size is ignored and the critic has the actor's layout.
            critic_layout = replace(work, lora_rank=0, optimizer_cpu_fraction=0.0)
            c_sizes = _megatron_sizes(critic_layout, critic, consts)
        else:
            c_work_shard = work.n_gpus
            c_params_all = total_params(critic)
            cb = work.critic_dtype_bytes
            root = (embedding_params(critic) + critic.hidden) * _BF16_BYTES
            layer = largest_layer_params(critic) * _BF16_BYTES
            c_sizes = _Sizes(cb * c_params_all / c_work_shard, cb * c_params_all / c_work_shard,
                             consts.adam_states_per_param * cb * c_params_all / c_work_shard,
                             root + consts.fsdp_live_layer_units * layer,
                             root + (consts.fsdp_live_layer_units + 2) * layer, 0.0)
        critic_params_res = 0.0 if work.critic_param_offload else c_sizes.params
        critic_opt_res = 0.0 if work.critic_optimizer_offload else c_sizes.optimizer
        # Megatron's fp32 gradient buffer is only freed by param_offload (megatron_utils.py:411-443)
        critic_grad_res = (c_sizes.grads if megatron and not (work.critic_param_offload or work.critic_grad_offload)
                           else 0.0)
    else:
        c_sizes = None
        critic_params_res = critic_opt_res = critic_grad_res = 0.0
    # FSDP forces CPUOffload on the reference model (fsdp_workers.py:524-526); Megatron keeps its bf16
    # shard on the GPU unless ref.megatron.param_offload (megatron_workers.py:374,637,838-857)
    ref_res = 0.0
    if megatron and work.ref_used and not work.ref_param_offload:
        ref_res = _megatron_sizes(work, model, consts, ref=True).params
    graphs = _cuda_graph_bytes(work, consts)
    overhead = consts.train_process_gib * GIB
    nccl, nccl_label = _nccl_bytes(work, consts)

    # --- inference engine
    rollout_params = total_params(model) + (lora_params(model, work.lora_rank, work.lora_targets)
                                            if work.lora_rank > 0 else 0)
    engine_weights = work.rollout_weight_bytes * rollout_params / work.rollout_tp
    resident_train = (actor_params_res + actor_opt_res + actor_grad_res + critic_params_res + critic_opt_res
                      + critic_grad_res + ref_res)
    gen = _Phase("generate")
    kv_per_token = kv_bytes_per_token(model, 2, work.rollout_tp)
    max_len = work.max_model_len or model.max_position_embeddings
    profile = _vllm_profile_bytes(work, model, consts)
    non_torch = consts.vllm_non_torch_gib * GIB
    if work.engine == "sglang":
        # SGLang sizes its KV pool as the memory free after loading its weights minus (1 - mem_fraction_static)
        # of the total (sglang model_runner.py profile_max_num_token: rest_memory = available_gpu_memory -
        # total_gpu_memory * (1 - mem_fraction_static)): whatever the trainer already holds when the server
        # starts comes out of the static share, and the rest of the card is left to activations and graphs.
        at_init = overhead + actor_params_res + critic_params_res + actor_grad_res + critic_grad_res + ref_res
        pool = max(engine_weights, work.gmu * cap * GIB - at_init)
        kv = pool - engine_weights
        engine_total = pool + profile
    elif work.engine == "trtllm":
        free_after_weights = cap * GIB - overhead - resident_train - engine_weights
        kv = work.gmu * max(0.0, free_after_weights)
        engine_total = engine_weights + kv + profile
        pool = engine_total
    elif work.engine == "hf":
        kv = 0.0
        pool = engine_total = 0.0
    else:  # vllm: gpu_memory_utilization x total memory
        pool = work.gmu * cap * GIB
        kv = pool - engine_weights - profile - non_torch
        engine_total = pool
    if work.engine != "hf":
        gen.pool = pool
        gen.add("weights", f"{work.engine} weights ({rollout_params / 1e9:.2f}B params / rollout TP {work.rollout_tp})",
                engine_weights)
        gen.add("activations", f"{work.engine} profile-run activations (max_num_batched_tokens "
                f"{work.max_num_batched_tokens}, max_num_seqs {work.max_num_seqs})", profile)
        if work.engine == "vllm":
            gen.add("overhead", "vLLM non-torch memory", non_torch)
        gen.add("kv_cache", "KV cache (rest of the engine's budget)", max(0.0, kv))
        one_seq = kv_per_token * max_len
        if engine_weights > pool and work.engine in ("vllm", "sglang"):
            gen.reason = (f"{work.engine} cannot start: weights {engine_weights / GIB:.1f} GiB exceed the "
                          f"gpu_memory_utilization budget {pool / GIB:.1f} GiB")
        elif kv < one_seq:
            gen.reason = (f"{work.engine} cannot start: KV cache {max(0.0, kv) / GIB:.2f} GiB is smaller than one "
                          f"max_model_len={max_len} sequence ({one_seq / GIB:.2f} GiB)")
        elif work.engine == "vllm" and work.vllm_startup_check:
            # vLLM >= 0.9.1 refuses to start unless gpu_memory_utilization x total is free when its worker
            # starts (v1/worker/gpu_worker.py init_device: "Free memory on device ... on startup is less than
            # desired GPU memory utilization"; vllm#20305). verl launches the engine after every worker's
            # init_model (ray_trainer.py:872-912 @ b178a3cd), so what those left on the GPU counts: parameters
            # not offloaded at init (fsdp_workers.py init_model; megatron_workers.py:595-600,637-639), the
            # Megatron gradient buffers and the distributed optimizer's fp32 main parameters (Adam's moments
            # are created by the first optimizer step, not before).
            main = _FP32_BYTES / consts.megatron_optimizer_bytes
            at_start = overhead + actor_params_res + actor_grad_res + critic_params_res + critic_grad_res + ref_res
            if megatron:
                at_start += main * (actor_opt_res + critic_opt_res)
            free_at_start = max(0.0, cap * GIB - at_start)
            check = (f"vllm's start-up check: {free_at_start / GIB:.1f} GiB free when the engine starts "
                     f"(training state {at_start / GIB:.1f} GiB already there) for gpu_memory_utilization x "
                     f"total = {pool / GIB:.1f} GiB")
            if pool - free_at_start >= consts.generate_thin_margin_gib * GIB:
                gen.reason = check.replace("vllm's start-up check:", "vllm cannot start:")
            elif pool > free_at_start - consts.generate_thin_margin_gib * GIB:
                # short by less than the spread of the context term, or passing by less: too close to call
                gen.thin = check
    gen.add("weights", "actor parameters (not offloaded)", actor_params_res)
    gen.add("optimizer", "actor Adam states (not offloaded)", actor_opt_res)
    gen.add("grads", "Megatron gradient buffer (not offloaded)", actor_grad_res)
    gen.add("weights", "critic parameters (not offloaded)", critic_params_res)
    gen.add("optimizer", "critic Adam states (not offloaded)", critic_opt_res)
    gen.add("grads", "critic Megatron gradient buffer (not offloaded)", critic_grad_res)
    gen.add("weights", "Megatron reference model (not offloaded)", ref_res)
    gen.add("cuda_graphs", "CUDA graphs (outside gpu_memory_utilization)", graphs)
    gen.add("overhead", "training process CUDA context and allocator", overhead)
    gen.add("overhead", nccl_label, nccl)

    def common(phase: _Phase, *, actor_loaded: bool, critic_loaded: bool = False,
               ref_loaded: bool = False) -> None:
        if not ref_loaded:
            phase.add("weights", "Megatron reference model (not offloaded)", ref_res)
        if not actor_loaded:
            phase.add("weights", "actor parameters (not offloaded)", actor_params_res)
            phase.add("optimizer", "actor Adam states (not offloaded)", actor_opt_res)
            phase.add("grads", "Megatron gradient buffer (not offloaded)", actor_grad_res)
        if not critic_loaded:
            phase.add("weights", "critic parameters (not offloaded)", critic_params_res)
            phase.add("optimizer", "critic Adam states (not offloaded)", critic_opt_res)
            phase.add("grads", "critic Megatron gradient buffer (not offloaded)", critic_grad_res)
        phase.add("cuda_graphs", "CUDA graphs (stay resident)", graphs)
        phase.add("overhead", "training process CUDA context and allocator", overhead)
        phase.add("overhead", nccl_label, nccl)
        if not work.free_cache_engine and work.engine != "hf":
            phase.add("kv_cache", "inference engine kept awake (free_cache_engine=False)", engine_total)

    # --- weight sync
    sync = _Phase("weight_sync")
    if work.engine != "hf":
        sync.add("weights", f"{work.engine} weights woken for the update", engine_weights
                 if work.free_cache_engine else 0.0)
        bucket = (work.bucket_mb or 0) * MIB
        sync.add("activations", "CUDA-IPC weight bucket (checkpoint_engine.update_weights_bucket_megabytes)", bucket)
        sync.add("activations", "largest parameter gathered whole (embedding)", sizes.largest_tensor)
        # FSDP2's offload_policy stages tensor by tensor instead (engine/fsdp/transformer_impl.py:980-991 @ 0.9.1)
        if (not megatron and work.actor_param_offload and not work.actor_offload_policy
                and work.sync_order != "actor_before_weights"):
            sync.add("weights", "actor shard reloaded from CPU for the sync (param_offload)", sizes.params)
        if work.sync_order == "kv_with_weights" and work.free_cache_engine and work.engine == "vllm":
            sync.add("kv_cache", "KV cache restored with the weights (vLLM <= 0.8.2 wake_up() has no tags)",
                     max(0.0, kv))
    common(sync, actor_loaded=False)

    # --- old log-prob (actor forward, entropy computed: fsdp_workers.py:1009)
    vocab = model.vocab / vocab_split
    lp_tokens = _micro_tokens(work, micro=work.logprob_micro, dynamic=work.logprob_dynamic,
                              budget=work.logprob_max_token_len, split=split, remove_padding=work.remove_padding,
                              batch_responses=work.responses_per_dp)
    old = _Phase("old_log_prob")
    old.missing = _missing_micro(work.logprob_dynamic, work.logprob_micro, "actor_rollout_ref.rollout")
    old.add("weights", "actor parameters (loaded for the forward)", sizes.params)
    old.add("optimizer", "actor Adam states (not offloaded)", actor_opt_res)
    old.add("grads", "Megatron gradient buffer (not offloaded)", actor_grad_res)
    old.add("weights", "gathered FSDP units (bf16)", sizes.gathered_fwd * transient)
    _add_forward_peak(old, lp_tokens, model, consts, act_split, transient, "logits + entropy",
                      _forward_logit_bytes(work, consts, lp_tokens, vocab, True))
    common(old, actor_loaded=True)

    phases = [gen, sync, old]

    # --- reference policy
    if work.ref_used:
        ref = _Phase("ref_log_prob")
        ref.missing = _missing_micro(work.ref_dynamic, work.ref_micro, "actor_rollout_ref.ref")
        ref_tokens = _micro_tokens(work, micro=work.ref_micro,
                                   dynamic=work.ref_dynamic, budget=work.ref_max_token_len, split=split,
                                   remove_padding=work.remove_padding, batch_responses=work.responses_per_dp)
        if work.ref_in_actor:
            ref.add("weights", "actor parameters with LoRA disabled (the reference policy)", sizes.params)
            ref.add("optimizer", "actor Adam states (not offloaded)", actor_opt_res)
            ref.add("weights", "gathered FSDP units (bf16)", sizes.gathered_fwd * transient)
            common(ref, actor_loaded=True)
        elif megatron:
            ref_sizes = _megatron_sizes(work, model, consts, ref=True)
            ref.add("weights", "reference model (bf16 Megatron shard)", ref_sizes.params)
            common(ref, actor_loaded=False, ref_loaded=True)
        else:
            # FSDP forces CPUOffload on the reference model (fsdp_workers.py:524-526): only the unit
            # being computed is on the GPU, in the compute dtype.
            ref.add("weights", "reference model units gathered from CPU (bf16)", sizes.gathered_fwd * transient)
            common(ref, actor_loaded=False)
        _add_forward_peak(ref, ref_tokens, model, consts, act_split, transient, "logits (no entropy)",
                          _forward_logit_bytes(work, consts, ref_tokens, vocab, False))
        phases.append(ref)

    # --- critic
    if critic is not None and c_sizes is not None:
        c_split = work.cp if megatron else work.critic_sp
        c_layers = layers_held
        values = _Phase("critic_values")
        v_tokens = _micro_tokens(work, micro=work.critic_fwd_micro, dynamic=work.critic_dynamic,
                                 budget=work.critic_fwd_max_token_len, split=c_split,
                                 remove_padding=work.critic_remove_padding, batch_responses=work.responses_per_dp)
        values.add("weights", "critic parameters (loaded)", c_sizes.params)
        values.add("optimizer", "critic Adam states (not offloaded)", critic_opt_res)
        values.add("weights", "gathered FSDP units (bf16)", c_sizes.gathered_fwd * transient)
        values.add("activations", f"forward activations ({v_tokens:,.0f} tokens per micro batch)",
                   v_tokens * _fwd_act_per_token(critic, consts, act_split) * transient)
        common(values, actor_loaded=False, critic_loaded=True)
        update_c = _Phase("critic_update")
        # the critic's mini batch per data-parallel rank: FSDP dp = world / critic SP (fsdp_workers.py critic
        # normalisation); Megatron dp = mpu's data-parallel size, the actor's layout (megatron_workers.py:1046-1048)
        c_dp = work.dp if megatron else max(1, work.n_gpus // c_split)
        c_mini = max(1, work.mini_batch * work.n // c_dp)
        c_tokens = _micro_tokens(work, micro=work.critic_micro, dynamic=work.critic_dynamic,
                                 budget=work.critic_max_token_len, split=c_split,
                                 remove_padding=work.critic_remove_padding, batch_responses=c_mini)
        update_c.add("weights", "critic parameters", c_sizes.params)
        update_c.add("grads", "critic gradients", c_sizes.grads)
        update_c.add("optimizer", "critic Adam states", c_sizes.optimizer)
        update_c.add("weights", "gathered FSDP units (bf16)", c_sizes.gathered_bwd * transient)
        c_act = _train_act_per_token(critic, consts, grad_ckpt=work.critic_grad_ckpt or work.full_recompute,
                                     offload=False, layers=c_layers, split=act_split)
        update_c.add("activations", f"activations ({c_tokens:,.0f} tokens per micro batch)",
                     c_tokens * c_act * transient)
        common(update_c, actor_loaded=False, critic_loaded=True)
        phases += [values, update_c]

    # --- actor update
    upd = _Phase("actor_update")
    if not work.dynamic and work.micro_per_gpu is None:
        # verl refuses to start (workers/config/actor.py:208 @ 0.9.1): no micro batch, no estimate
        upd.missing = ("cannot say: no actor micro batch; verl needs actor_rollout_ref.actor."
                       "ppo_micro_batch_size_per_gpu (or use_dynamic_bsz=True with ppo_max_token_len_per_gpu)")
    tokens = _micro_tokens(work, micro=work.micro_per_gpu, dynamic=work.dynamic, budget=work.max_token_len,
                           split=split, remove_padding=work.remove_padding, batch_responses=work.mini_per_dp)
    upd.add("weights", "actor parameters", sizes.params)
    upd.add("grads", "actor gradients", sizes.grads)
    upd.add("optimizer", "actor Adam states (loaded for the whole update)", sizes.optimizer)
    upd.add("weights", "gathered FSDP units (bf16) and their unsharded gradient", sizes.gathered_bwd * transient)
    kept, recomputed = _train_act_parts(model, consts, grad_ckpt=work.grad_ckpt, offload=work.activation_offload,
                                        layers=layers_held, split=act_split)
    logit_bytes = _train_logit_bytes(work, consts, tokens, vocab)
    if work.grad_ckpt:
        upd.add("activations", f"activations: checkpointed layer inputs ({tokens:,.0f} tokens per micro batch)",
                tokens * kept * transient)
        # The backward starts at the loss: the logits, entropy and their gradients are freed once the
        # lm_head's backward has run, before autograd reaches the last decoder layer, and
        # torch.utils.checkpoint (non-reentrant) recomputes a layer only when its backward unpacks a
        # saved tensor (torch/utils/checkpoint.py, _checkpoint_hook / unpack_hook). The two
        # transients never coexist: the larger one is the peak.
        if logit_bytes >= tokens * recomputed:
            upd.add("logits", "logits, entropy and logit gradients (freed before any layer is recomputed)",
                    logit_bytes * transient)
        else:
            upd.add("activations", "activations: one recomputed layer (after the logit gradients are freed)",
                    tokens * recomputed * transient)
    else:
        upd.add("activations", f"activations ({tokens:,.0f} tokens per micro batch, no recomputation)",
                tokens * kept * transient)
        upd.add("logits", "logits, entropy and logit gradients", logit_bytes * transient)
    common(upd, actor_loaded=True)
    phases.append(upd)

    if work.unresolved:
        keys = ", ".join(work.unresolved)
        for phase in phases:
            phase.missing = phase.missing or f"cannot say: {keys} left as an unevaluated shell variable; pass its value"
    stages = tuple(p.finish(cap, consts) for p in phases)
    host = _host_estimate(work, model, sizes, c_sizes, engine_weights, host_memory_gib, consts)
    assumptions = [work.typical_source if work.remove_padding or work.dynamic else
                   "use_remove_padding=False: every sequence padded to max_prompt_length + max_response_length"]
    if work.engine != "hf":
        kv_tokens = max(0.0, kv) / kv_per_token if kv_per_token else 0.0
        assumptions.append(
            f"{work.engine} KV cache holds {kv_tokens:,.0f} tokens per GPU = "
            f"{kv_tokens / max(1, work.max_seq_tokens):,.1f} sequences of {work.max_seq_tokens} tokens "
            f"(max_num_seqs {work.max_num_seqs})")
    assumptions.extend(work.notes)
    if not megatron and work.lora_rank > 0 and work.n_gpus > 1 and work.sp > 1:
        low, high = consts.lora_sp_residual_gib
        assumptions.append(
            f"not in the verdict: verl's multi-GPU LoRA trails with Ulysses SP ran out of memory {low:.0f}-{high:.0f} "
            f"GiB per GPU before this model says (knowledge/memory.yaml residuals.multi_gpu_lora_sp; no code path "
            f"found yet): leave that much room in actor_update")
    return MemoryEstimate(gpu=gpu, model=model, stages=stages, host=host, assumptions=tuple(assumptions))


def _host_estimate(work: Workload, model: ModelSpec, sizes: _Sizes, c_sizes: _Sizes | None,
                   engine_weights: float, capacity_gib: float | None, consts: MemoryConstants) -> HostEstimate:
    g = work.gpus_per_node
    items: list[tuple[str, float]] = []
    if work.actor_param_offload or work.actor_offload_policy:
        items.append(("actor parameters offloaded", g * sizes.params))
    if work.actor_optimizer_offload or work.actor_offload_policy:
        items.append(("actor Adam states offloaded", g * sizes.optimizer))
    if work.actor_offload_policy:
        items.append(("actor gradients (FSDP2 offload_policy)", g * sizes.grads))
    if work.backend == "megatron":
        if work.actor_grad_offload:
            items.append(("actor gradient buffer offloaded", g * sizes.grads))
        if sizes.optimizer_on_cpu:
            items.append(("Megatron hybrid CPU optimizer share", g * sizes.optimizer_on_cpu))
    if work.ref_used and not work.ref_in_actor:
        if work.backend == "megatron":
            if work.ref_param_offload:
                items.append(("reference model offloaded", g * sizes.params))
        else:
            items.append(("reference model (FSDP CPUOffload)",
                          g * work.ref_dtype_bytes * total_params(model) / work.fsdp_shard))
    if c_sizes is not None:
        if work.critic_param_offload:
            items.append(("critic parameters offloaded", g * c_sizes.params))
        if work.critic_optimizer_offload:
            items.append(("critic Adam states offloaded", g * c_sizes.optimizer))
    steady = sum(b for _, b in items)
    # start-up: rank 0 of each node (every rank for tied embeddings) loads the whole checkpoint
    loaders = g if model.tie_embeddings else 1
    dtype = work.actor_dtype_bytes if work.backend == "fsdp" else 2
    init = loaders * dtype * total_params(model)
    details = [(label, b / GIB) for label, b in items]
    details.append((f"checkpoint load at start-up ({loaders} rank(s) x full model)", init / GIB))
    peak = max(steady, init) / GIB
    risk = None
    if capacity_gib:
        fraction = peak / capacity_gib
        risk = "oom" if fraction > consts.oom_above else "tight" if fraction >= consts.ok_below else "ok"
    return HostEstimate(peak, capacity_gib, risk, tuple(details))


def estimate_memory(
    cfg: Any,
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
