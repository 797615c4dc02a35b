"""The memory terms of one phase: activations and logits per token, shard sizes, NCCL, engine extras.

Closed-form byte counts on a :class:`~._workload.Workload` and a :class:`~._models.ModelSpec`; every
constant comes from knowledge/memory.yaml through :mod:`._constants`. :class:`Phase` collects one phase's
parts and judges them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ._constants import GIB, MemoryConstants
from ._engines import engine_for
from ._models import (
    ModelSpec,
    embedding_params,
    expert_params,
    kv_dim,
    largest_layer_params,
    lora_params,
    token_mlp_width,
    total_params,
)
from ._results import BREAKDOWN_KEYS, StageEstimate
from ._workload import Workload

BF16_BYTES = 2  # compute dtype of activations, gathered FSDP units and engine weights (fsdp_config.dtype)
FP32_BYTES = 4  # FSDP reduce dtype, fused-kernel and sampler logits


class Phase:
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
class Sizes:
    """Per-GPU byte sizes derived once from the model and the workload."""

    params: float  # actor parameters on one GPU when loaded
    grads: float
    optimizer: float  # on GPU when not offloaded
    gathered_fwd: float  # transient unsharded units during a forward
    gathered_bwd: float  # ... during forward + backward
    largest_tensor: float  # the biggest single parameter, materialised whole during weight sync
    optimizer_on_cpu: float = 0.0  # Megatron hybrid CPU optimizer share (per GPU)


def layer_act_bytes(model: ModelSpec, consts: MemoryConstants, lora_rank: int = 0) -> float:
    """Bytes saved for backward per token for one decoder layer (no recomputation).

    With LoRA (PEFT all-linear, base frozen) the measured change is lora_hidden_coeff x h + lora_rank_coeff x r
    (knowledge/memory_measured.yaml act.lora16, act.lora32).
    """
    saved = (consts.act_hidden_coeff * model.hidden + consts.act_kv_coeff * kv_dim(model)
             + consts.act_mlp_coeff * token_mlp_width(model))
    if lora_rank > 0:
        saved += consts.act_lora_hidden_coeff * model.hidden + consts.act_lora_rank_coeff * lora_rank
    return saved


def train_act_parts(model: ModelSpec, consts: MemoryConstants, *, grad_ckpt: bool, offload: bool,
                     layers: float, split: int = 1, lora_rank: int = 0) -> tuple[float, float]:
    """Bytes per token of one training micro batch: (kept through the whole backward, one recomputed layer).

    Without checkpointing every layer's activations are kept (the second term is 0). With it, each layer
    keeps its input and one layer is recomputed at a time during the backward.
    """
    layer = layer_act_bytes(model, consts, lora_rank) / split
    if grad_ckpt:
        stored = 0.0 if offload else layers * consts.checkpoint_bytes_per_hidden * model.hidden / split
        return stored, consts.recomputed_layers * layer
    return layers * layer, 0.0


def train_act_per_token(model: ModelSpec, consts: MemoryConstants, *, grad_ckpt: bool, offload: bool,
                         layers: float, split: int = 1) -> float:
    """Bytes per token of a training micro batch without a vocab head (critic): kept + one recomputed layer."""
    return sum(train_act_parts(model, consts, grad_ckpt=grad_ckpt, offload=offload, layers=layers, split=split))


def fwd_act_parts(model: ModelSpec, consts: MemoryConstants, split: int = 1) -> tuple[float, float]:
    """Bytes per token of a forward without grad: (beside the logits, beside one layer's MLP only).

    Measured (fwd.log_prob): nothing is kept per layer; the peak inside a layer is its MLP's gate, up and
    product (forward_mlp_coeff x I) beside forward_hidden_coeff x h of hidden-size tensors, of which the
    residual stream and the last layer's output (2 bf16 x h) are still live when the lm_head runs.
    """
    residual = 2 * BF16_BYTES * model.hidden
    layer = (consts.forward_mlp_coeff * token_mlp_width(model)
             + (consts.forward_hidden_coeff - 2 * BF16_BYTES) * model.hidden)
    return residual, consts.forward_live_layers * layer / split


def fwd_act_per_token(model: ModelSpec, consts: MemoryConstants, split: int = 1) -> float:
    # one layer's intermediates plus the residual stream and the layer output (bf16)
    return sum(fwd_act_parts(model, consts, split))


def forward_logit_bytes(work: Workload, consts: MemoryConstants, tokens: float, vocab: float,
                         entropy: bool) -> float:
    """Logits of a forward without grad (old-log-prob with entropy, ref/critic without)."""
    if work.actor.fused_kernels:
        return min(tokens, consts.fused_chunk_rows) * vocab * FP32_BYTES
    total = tokens * vocab * consts.logit_bytes
    if work.actor.temperature_copy:
        # verl 0.9.0 (and 0.9.1 at temperature != 1) divides out of place: the undivided logits stay in
        # the model output beside the divided copy (logits.log_prob.0.9.0)
        total += tokens * vocab * consts.temperature_copy_bytes
    if entropy and not work.actor.torch_compile:
        rows = min(tokens, consts.entropy_chunk_rows) if work.actor.entropy_chunking else tokens
        total += rows * vocab * consts.forward_entropy_extra_bytes(work.actor.entropy_chunking)
    return total


def padded_update_bytes(work: Workload, consts: MemoryConstants) -> float | None:
    """Bytes per padded logit of an update without remove padding (knowledge/memory.yaml logits.padded_*): the
    measured value at a response of half the row, its entropy part scaled up for a longer response share.

    Measured on the legacy workers' padded branch (verl < 0.8, dp_actor.py) and on verl >= 0.9.1 at temperature
    1; None elsewhere (the 0.6-0.8 engine workers, 0.9.0, a temperature copy: not measured padded, they keep the
    remove-padding path's bytes per padded logit).
    """
    if work.actor.remove_padding:
        return None
    if work.actor.legacy and work.actor.inplace_temperature:
        prefix = "legacy_"
    elif not work.actor.inplace_temperature and not work.actor.temperature_copy:  # >= 0.9.1 at temperature 1
        prefix = ""
    else:
        return None
    table = consts.padded_update_bytes
    off = table[prefix + "off"]
    if not work.actor.entropy_in_update:
        return off
    share = work.lengths.response_len / max(1, work.max_seq_tokens)
    return off + (table[prefix + "on"] - off) * max(1.0, share / table["response_share"])


def train_logit_bytes(work: Workload, consts: MemoryConstants, tokens: float, vocab: float) -> float:
    """Logits, entropy intermediates and logit gradients of one training micro batch."""
    if work.actor.fused_kernels:
        return min(tokens, consts.fused_chunk_rows) * vocab * FP32_BYTES
    logits = tokens * vocab
    padded = padded_update_bytes(work, consts)
    if padded is not None:
        return logits * padded
    if work.actor.inplace_temperature:
        # verl < 0.9.0 divides the logits by the temperature in place on a squeeze(0) view; the CopySlices
        # backward holds four bf16 [tokens x vocab] buffers, entropy on or off
        # (knowledge/memory.yaml logits.legacy_entropy_backward_bytes)
        total = logits * consts.legacy_entropy_backward_bytes
    elif not work.actor.entropy_in_update:
        # flash-attn cross entropy writes its backward into the logits; an out-of-place temperature
        # divide adds the copy (logits.update.0.9.0.off, logits.update.0.9.1.off.t07)
        total = logits * consts.logit_bytes
        if work.actor.temperature_copy:
            total += logits * consts.temperature_copy_bytes
        return total
    else:
        total = logits * (consts.logit_bytes + 2 * consts.logit_grad_bytes)  # cross-entropy and entropy grads
    if not work.actor.entropy_in_update or work.actor.entropy_checkpointing:
        return total
    if work.actor.entropy_chunking:
        # every chunk's fp32 copy and softmax stay saved for backward (logits.update.0.9.1.chunked)
        total += logits * consts.chunked_entropy_update_extra_bytes
    elif not work.actor.torch_compile:
        total += logits * consts.eager_entropy_extra_bytes
    return total


def nccl_bytes(work: Workload, consts: MemoryConstants, gpu_name: str = "") -> tuple[float, str]:
    """NCCL communicators this GPU's processes hold, outside torch's counters (NCCL issue #964).

    One per process group of more than one GPU: the trainer's FSDP world, its Ulysses group and the
    inference engine's TP group; on NVLS-capable GPUs a group above 2 GPUs adds NVLS buffers (vllm#9699).
    """
    if work.topology.backend == "megatron":
        # Megatron builds many groups whose NCCL communicators PyTorch creates lazily on first use; which
        # ones verl's step touches is not established, so none is counted beyond the 1.5 GiB overhead
        return 0.0, "NCCL communicators (Megatron: in the overhead)"
    groups: list[tuple[str, int]] = [("world", work.topology.n_gpus), ("Ulysses SP", work.topology.sp)]
    if engine_for(work.rollout.engine).has_pool:
        groups.append((f"{work.rollout.engine} TP", work.rollout.tp))
    live = [(name, size) for name, size in groups if size > 1]
    nvls = gpu_name in consts.nvls_gpus
    total = sum((consts.nccl_gib_two if size == 2 else consts.nccl_gib_more)
                + (consts.nvls_gib if nvls and size > 2 else 0.0) for _name, size in live) * GIB
    names = ", ".join(f"{name} {size}" for name, size in live)
    with_nvls = "; NVLS buffers on groups above 2 GPUs" if nvls and any(size > 2 for _n, size in live) else ""
    return total, f"NCCL communicators ({names}{with_nvls})"


def missing_micro(dynamic: bool, micro: int | None, section: str) -> str | None:
    """Why a log-prob phase cannot be sized: neither a micro batch nor dynamic batching is set.

    verl refuses such a config (verl/utils/config.py:153-154 and workers/engine_workers.py:636 @ 0.9.1:
    "Please set at least one of ..."), so the phase would be a made-up full-batch number.
    """
    if dynamic or micro is not None:
        return None
    return (f"cannot say: no log-prob micro batch; verl needs {section}.log_prob_micro_batch_size_per_gpu "
            f"(or log_prob_use_dynamic_bsz=True with log_prob_max_token_len_per_gpu)")


def add_forward_peak(phase: Phase, tokens: float, model: ModelSpec, consts: MemoryConstants, split: int,
                      transient: float, logit_label: str, logit_bytes: float) -> None:
    """A forward without grad: the residual stream, then one layer's intermediates or the logits, never both.

    Without autograd a layer's intermediates are freed as soon as the layer returns, so the lm_head
    (and the log-prob/entropy computed on its output) runs after the last layer's temporaries are gone.
    """
    residual, layer = fwd_act_parts(model, consts, split)
    phase.add("activations", f"forward activations: residual stream ({tokens:,.0f} tokens per micro batch)",
              tokens * residual * transient)
    if logit_bytes >= tokens * layer:
        phase.add("logits", logit_label, logit_bytes * transient)
    else:
        phase.add("activations", "forward activations: one layer's intermediates (larger than the logits)",
                  tokens * layer * transient)


def seq_tokens(work: Workload, remove_padding: bool) -> float:
    return work.lengths.typical_tokens if remove_padding else float(work.max_seq_tokens)


def micro_tokens(work: Workload, *, micro: int | None, dynamic: bool, budget: int, split: int,
                  remove_padding: bool, batch_responses: int) -> float:
    """Tokens one GPU processes in one micro batch (after Ulysses/context-parallel splitting)."""
    per_seq = seq_tokens(work, remove_padding)
    batch_tokens = batch_responses * per_seq
    if dynamic:
        # token-packed micro batches of at most budget x sp tokens (dp_actor.py:551-553);
        # one sequence always fits (verl asserts budget x sp >= prompt + response)
        group = min(max(budget * split, per_seq), batch_tokens)
    else:
        group = min(micro or batch_responses, batch_responses) * per_seq
    return group / split


def cuda_graph_bytes(work: Workload, consts: MemoryConstants) -> float:
    if work.rollout.enforce_eager or not engine_for(work.rollout.engine).cuda_graphs:
        return 0.0
    # vLLM captures batch sizes up to min(2 x max_num_seqs, 512) by default (VllmConfig._set_cudagraph_sizes)
    largest = work.rollout.cudagraph_max_size or min(work.rollout.max_num_seqs * 2, consts.cuda_graph_full_capture_size)
    scale = min(1.0, largest / consts.cuda_graph_full_capture_size)
    return max(consts.cuda_graph_gib_min, consts.cuda_graph_gib_max * scale) * GIB


def fsdp_sizes(work: Workload, model: ModelSpec, consts: MemoryConstants) -> Sizes:
    p_all = total_params(model)
    if work.actor.lora_rank > 0:
        trainable = lora_params(model, work.actor.lora_rank, work.actor.lora_targets)
        p_all += trainable
    elif work.actor.freeze_vision:
        trainable = p_all - model.extra_params
    else:
        trainable = p_all
    shard = work.topology.fsdp_shard
    b = work.actor.dtype_bytes
    params = b * p_all / shard
    grads = b * trainable / shard
    optimizer = consts.adam_states_per_param * b * trainable / shard
    root = (embedding_params(model) + model.hidden + model.extra_params) * BF16_BYTES
    layer = largest_layer_params(model) * BF16_BYTES
    gathered_fwd = root + consts.fsdp_live_layer_units * layer
    # backward also holds the unsharded gradient of the unit being reduced (fp32 reduce dtype)
    gathered_bwd = gathered_fwd + (0 if work.actor.lora_rank > 0 else layer * FP32_BYTES / BF16_BYTES)
    largest_tensor = b * model.vocab * model.hidden
    return Sizes(params, grads, optimizer, gathered_fwd, gathered_bwd, largest_tensor)


def megatron_sizes(work: Workload, model: ModelSpec, consts: MemoryConstants, *, ref: bool = False) -> Sizes:
    """Per-GPU shards under Megatron TP/PP/EP (worst pipeline stage: the one holding an embedding)."""
    p_all = total_params(model)
    p_exp = expert_params(model)
    emb = embedding_params(model)
    body = p_all - p_exp - emb - model.extra_params
    emb_on_stage = emb if work.topology.pp == 1 or model.tie_embeddings else emb / 2
    dense_gpu = (body / work.topology.pp + emb_on_stage + model.extra_params) / work.topology.tp
    expert_gpu = p_exp / (work.topology.pp * work.topology.ep * work.topology.etp)
    params_gpu = dense_gpu + expert_gpu
    weights = consts.megatron_weight_bytes * params_gpu
    if ref:
        return Sizes(weights, 0.0, 0.0, 0.0, 0.0, 0.0)
    if work.actor.lora_rank > 0:
        trainable_share = lora_params(model, work.actor.lora_rank, work.actor.lora_targets) / max(1, p_all)
    else:
        trainable_share = 1.0
    grads = consts.megatron_grad_bytes * params_gpu * trainable_share
    if work.actor.distributed_optimizer:
        dp_dense = max(1, work.topology.n_gpus // (work.topology.tp * work.topology.pp))
        dp_expert = max(1, work.topology.n_gpus // (work.topology.ep * work.topology.etp * work.topology.pp))
        opt_params = dense_gpu / dp_dense + expert_gpu / dp_expert
    else:
        opt_params = params_gpu
    optimizer = consts.megatron_optimizer_bytes * opt_params * trainable_share
    on_cpu = optimizer * work.actor.optimizer_cpu_fraction
    largest = consts.megatron_weight_bytes * model.vocab * model.hidden  # gathered over TP for the sync
    return Sizes(weights, grads, optimizer - on_cpu, 0.0, 0.0, largest, on_cpu)


def critic_model(model: ModelSpec, work: Workload) -> ModelSpec:
    """The critic: the same backbone with a value head instead of the lm_head (no vocab logits)."""
    base = work.critic.model or model
    return replace(base, tie_embeddings=True)  # drops the lm_head from the count; the h x 1 head is noise
