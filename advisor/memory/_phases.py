"""One function per phase of a colocated verl step, each building that phase's parts on one GPU.

The phases follow verl's step timeline (research notes verl-internals.md §8.2): generate, weight_sync,
old_log_prob, ref_log_prob, critic_values, critic_update, actor_update. :class:`Step` holds what they
share: the shard sizes, what stays resident between phases, the engine's pool and the fixed overheads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._constants import GIB, MIB, MemoryConstants
from ._models import ModelSpec, embedding_params, largest_layer_params, total_params
from ._pool import EnginePool, engine_pool, sequence_cache
from ._terms import (
    BF16_BYTES,
    FP32_BYTES,
    Phase,
    Sizes,
    add_forward_peak,
    critic_model,
    cuda_graph_bytes,
    forward_logit_bytes,
    fsdp_sizes,
    fwd_act_per_token,
    megatron_sizes,
    micro_tokens,
    missing_micro,
    nccl_bytes,
    train_act_parts,
    train_act_per_token,
    train_logit_bytes,
)
from ._workload import Workload


@dataclass(frozen=True)
class Resident:
    """Training state that stays on the GPU between phases unless offloaded (bytes)."""

    actor_params: float
    actor_optimizer: float
    actor_grads: float  # Megatron's fp32 gradient buffer
    critic_params: float
    critic_optimizer: float
    critic_grads: float
    ref: float  # Megatron's bf16 reference shard

    @property
    def total(self) -> float:
        return (self.actor_params + self.actor_optimizer + self.actor_grads + self.critic_params
                + self.critic_optimizer + self.critic_grads + self.ref)

    @property
    def at_init(self) -> float:
        """On the GPU when the engine starts: parameters and gradient buffers, no Adam moments yet."""
        return self.actor_params + self.critic_params + self.actor_grads + self.critic_grads + self.ref


# the rollout's own GPUs (hybrid_engine=False): no training state beside the engine
_NOTHING_RESIDENT = Resident(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Step:
    """What every phase of one step shares."""

    work: Workload
    model: ModelSpec
    consts: MemoryConstants
    capacity_gib: float
    sizes: Sizes
    critic: ModelSpec | None
    critic_sizes: Sizes | None
    resident: Resident
    transient: float  # FSDP2's transient factor on gathered units and activations
    split: int  # sequence split of a micro batch: Ulysses SP (FSDP) or context parallel (Megatron)
    act_split: int  # activation split: Megatron TP
    vocab_split: int  # logits split: Megatron TP
    layers_held: float  # decoder layers whose activations one GPU keeps (Megatron: per pipeline stage in flight)
    graphs: float
    overhead: float
    nccl: float
    nccl_label: str

    @property
    def megatron(self) -> bool:
        return self.work.topology.backend == "megatron"

    def add_resident(self, phase: Phase, pool: EnginePool, *, actor_loaded: bool, critic_loaded: bool = False,
                     ref_loaded: bool = False) -> None:
        """What stays on the GPU in a training phase beside the state the phase itself loads."""
        r = self.resident
        if not ref_loaded:
            phase.add("weights", "Megatron reference model (not offloaded)", r.ref)
        if not actor_loaded:
            phase.add("weights", "actor parameters (not offloaded)", r.actor_params)
            phase.add("optimizer", "actor Adam states (not offloaded)", r.actor_optimizer)
            phase.add("grads", "Megatron gradient buffer (not offloaded)", r.actor_grads)
        if not critic_loaded:
            phase.add("weights", "critic parameters (not offloaded)", r.critic_params)
            phase.add("optimizer", "critic Adam states (not offloaded)", r.critic_optimizer)
            phase.add("grads", "critic Megatron gradient buffer (not offloaded)", r.critic_grads)
        phase.add("cuda_graphs", "CUDA graphs (stay resident)", self.graphs)
        phase.add("overhead", "training process CUDA context and allocator", self.overhead)
        phase.add("overhead", self.nccl_label, self.nccl)
        if not self.work.rollout.free_cache_engine and pool.engine.has_pool:
            phase.add("kv_cache", "inference engine kept awake (free_cache_engine=False)", pool.total)
        elif self.work.rollout.engine_weights_stay and phase.stage != "weight_sync":  # the sync counts them woken
            phase.add("weights", f"{self.work.rollout.engine} weights kept asleep (LoRA served as an adapter: only the "
                      f"KV cache is released)", pool.weights)


def _critic_sizes(work: Workload, critic: ModelSpec, consts: MemoryConstants) -> Sizes:
    if work.topology.backend == "megatron":
        # Colocated workers share one process and one Megatron parallel state: the actor worker, created
        # first, calls mpu.initialize_model_parallel with the actor's TP/PP/CP/EP and the critic skips its
        # own (megatron_workers.py:1003-1009 and 283-293 @ b178a3cd; roles are instantiated in insertion
        # order, actor first: ray_trainer.py:751,784 and single_controller/ray/base.py:983-991). The critic's
        # model is then cut by mpu's sizes (mcore/config_converter.py:77-85; mbridge reads the same mpu
        # state), so critic.megatron.*_parallel_size is ignored and the critic has the actor's layout.
        return megatron_sizes(work.edit({"actor.lora_rank": 0, "actor.optimizer_cpu_fraction": 0.0}), critic, consts)
    shard = work.topology.n_gpus
    params_all = total_params(critic)
    cb = work.critic.dtype_bytes
    root = (embedding_params(critic) + critic.hidden) * BF16_BYTES
    layer = largest_layer_params(critic) * BF16_BYTES
    return Sizes(cb * params_all / shard, cb * params_all / shard,
                 consts.adam_states_per_param * cb * params_all / shard,
                 root + consts.fsdp_live_layer_units * layer,
                 root + (consts.fsdp_live_layer_units + 2) * layer, 0.0)


def step_context(work: Workload, model: ModelSpec, consts: MemoryConstants, capacity_gib: float,
                 gpu_name: str = "") -> Step:
    megatron = work.topology.backend == "megatron"
    sizes = megatron_sizes(work, model, consts) if megatron else fsdp_sizes(work, model, consts)
    layers_held = float(model.layers)
    if megatron:
        in_flight = max(1, work.mini_per_dp // max(1, work.actor.micro_per_gpu or 1))
        layers_held = model.layers / work.topology.pp * min(work.topology.pp, in_flight)
    actor_params = 0.0 if work.actor.param_offload or work.actor.offload_policy else sizes.params
    actor_opt = 0.0 if work.actor.optimizer_offload or work.actor.offload_policy else sizes.optimizer
    # Megatron's fp32 gradient buffer is only freed by param_offload (megatron_utils.py:411-443)
    actor_grads = sizes.grads if megatron and not (work.actor.param_offload or work.actor.grad_offload) else 0.0
    critic = critic_model(model, work) if work.critic.used else None
    c_sizes = _critic_sizes(work, critic, consts) if critic is not None else None
    critic_params = critic_opt = critic_grads = 0.0
    if c_sizes is not None:
        critic_params = 0.0 if work.critic.param_offload or work.critic.offload_policy else c_sizes.params
        critic_opt = 0.0 if work.critic.optimizer_offload or work.critic.offload_policy else c_sizes.optimizer
        critic_grads = (c_sizes.grads if megatron and not (work.critic.param_offload or work.critic.grad_offload)
                        else 0.0)
    # FSDP forces CPUOffload on the reference model (fsdp_workers.py:524-526); Megatron keeps its bf16
    # shard on the GPU unless ref.megatron.param_offload (megatron_workers.py:374,637,838-857)
    ref = 0.0
    if megatron and work.ref.used and not work.ref.param_offload:
        ref = megatron_sizes(work, model, consts, ref=True).params
    nccl, nccl_label = nccl_bytes(work, consts, gpu_name)
    return Step(
        work=work, model=model, consts=consts, capacity_gib=capacity_gib, sizes=sizes, critic=critic,
        critic_sizes=c_sizes,
        resident=Resident(actor_params, actor_opt, actor_grads, critic_params, critic_opt, critic_grads, ref),
        transient=consts.fsdp2_transient_factor if work.topology.strategy == "fsdp2" else 1.0,
        split=work.topology.cp if megatron else work.topology.sp, act_split=work.topology.tp if megatron else 1,
        vocab_split=work.topology.tp if megatron else 1, layers_held=layers_held, graphs=cuda_graph_bytes(work, consts),
        overhead=consts.train_process_gib * GIB, nccl=nccl, nccl_label=nccl_label)


def step_pool(step: Step) -> EnginePool:
    return engine_pool(step.work, step.model, step.consts, step.capacity_gib, resident=step.resident.total,
                       at_init=step.overhead + step.resident.at_init, overhead=step.overhead)


def _on_gpu(offload_policy: bool, nbytes: float) -> float:
    """A sharded FSDP term, or 0 under FSDP2's CPUOffloadPolicy: the shard, its gradient and the optimizer step
    stay on the CPU and only the unit being computed is copied over (engine/fsdp/transformer_impl.py:451-462 @
    0.9.1; torch.distributed.fsdp CPUOffloadPolicy), which the gathered-units term counts."""
    return 0.0 if offload_policy else nbytes


# --- rollout engine + KV cache ---------------------------------------------------------------------


def generate_phase(step: Step, pool: EnginePool) -> Phase:
    """The engine awake beside the training state that stays resident; judged beside the engine's pool."""
    work = step.work
    r = step.resident if work.topology.colocated else _NOTHING_RESIDENT
    gen = Phase("generate")
    engine = pool.engine
    if engine.has_pool:
        gen.pool = pool.pool
        split = f"rollout TP {work.rollout.tp}"
        if engine.experts_across_dp and work.rollout.dp > 1 and step.model.is_moe:
            split += f"; routed experts / TP x DP {work.rollout.tp * work.rollout.dp}"
        gen.add("weights", f"{work.rollout.engine} weights ({pool.params / 1e9:.2f}B params / {split})", pool.weights)
        gen.add("activations", f"{work.rollout.engine} profile-run activations (max_num_batched_tokens "
                f"{work.rollout.max_num_batched_tokens}, max_num_seqs {work.rollout.max_num_seqs})", pool.profile)
        gen.add("overhead", "vLLM non-torch memory", pool.non_torch)
        gen.add("activations", f"{work.rollout.engine} encoder cache (vision-language model: "
                f"max(max_num_batched_tokens, largest image {step.model.max_image_tokens} tokens) x hidden, bf16)",
                pool.encoder_cache)
        gen.add("kv_cache", "KV cache (rest of the engine's budget)", max(0.0, pool.kv))
        _cannot_start(step, pool, gen)
    gen.add("weights", "actor parameters (not offloaded)", r.actor_params)
    gen.add("optimizer", "actor Adam states (not offloaded)", r.actor_optimizer)
    gen.add("grads", "Megatron gradient buffer (not offloaded)", r.actor_grads)
    gen.add("weights", "critic parameters (not offloaded)", r.critic_params)
    gen.add("optimizer", "critic Adam states (not offloaded)", r.critic_optimizer)
    gen.add("grads", "critic Megatron gradient buffer (not offloaded)", r.critic_grads)
    gen.add("weights", "Megatron reference model (not offloaded)", r.ref)
    gen.add("cuda_graphs", "CUDA graphs (outside gpu_memory_utilization)", step.graphs)
    gen.add("overhead", "training process CUDA context and allocator", step.overhead)
    gen.add("overhead", step.nccl_label, step.nccl)
    return gen


def _cannot_start(step: Step, pool: EnginePool, gen: Phase) -> None:
    """The engine's own start-up refusals: weights over the pool, no room for one sequence, too little free."""
    work, consts, model = step.work, step.consts, step.model
    engine = pool.engine
    max_len = work.rollout.max_model_len or model.max_position_embeddings
    one_seq = sequence_cache(work.rollout, model).bytes_for(max_len)
    if pool.weights > pool.pool and engine.refuses_weights_over_pool:
        gen.reason = (f"{work.rollout.engine} cannot start: weights {pool.weights / GIB:.1f} GiB exceed the "
                      f"gpu_memory_utilization budget {pool.pool / GIB:.1f} GiB")
    elif pool.kv < one_seq:
        gen.reason = (f"{work.rollout.engine} cannot start: KV cache {max(0.0, pool.kv) / GIB:.2f} GiB is smaller "
                      f"than one max_model_len={max_len} sequence ({one_seq / GIB:.2f} GiB"
                      f"{' with its recurrent state' if sequence_cache(work.rollout, model).state else ''})")
    elif engine.startup_free_check and work.rollout.vllm_startup_check:
        # vLLM >= 0.9.1 refuses to start unless gpu_memory_utilization x total is free when its worker
        # starts (v1/worker/gpu_worker.py init_device: "Free memory on device ... on startup is less than
        # desired GPU memory utilization"; vllm#20305). verl launches the engine after every worker's
        # init_model (ray_trainer.py:872-912 @ b178a3cd), so what those left on the GPU counts: parameters
        # not offloaded at init (fsdp_workers.py init_model; megatron_workers.py:595-600,637-639), the
        # Megatron gradient buffers and the distributed optimizer's fp32 main parameters (Adam's moments
        # are created by the first optimizer step, not before).
        r = step.resident if work.topology.colocated else _NOTHING_RESIDENT
        at_start = step.overhead + r.at_init
        if step.megatron:
            at_start += FP32_BYTES / consts.megatron_optimizer_bytes * (r.actor_optimizer + r.critic_optimizer)
        free_at_start = max(0.0, step.capacity_gib * GIB - at_start)
        check = (f"vllm's start-up check: {free_at_start / GIB:.1f} GiB free when the engine starts "
                 f"(training state {at_start / GIB:.1f} GiB already there) for gpu_memory_utilization x "
                 f"total = {pool.pool / GIB:.1f} GiB")
        if pool.pool - free_at_start >= consts.generate_thin_margin_gib * GIB:
            gen.reason = check.replace("vllm's start-up check:", "vllm cannot start:")
        elif pool.pool > free_at_start - consts.generate_thin_margin_gib * GIB:
            # short by less than the spread of the context term, or passing by less: too close to call
            gen.thin = check


# --- weight sync ------------------------------------------------------------------------------------


def weight_sync_phase(step: Step, pool: EnginePool) -> Phase:
    """The actor's weights streamed into the woken engine (see _workload._sync_order per verl version)."""
    work = step.work
    sync = Phase("weight_sync")
    if pool.engine.has_pool:
        sync.add("weights", f"{work.rollout.engine} weights woken for the update", pool.weights
                 if work.rollout.free_cache_engine else 0.0)
        bucket = (work.rollout.bucket_mb or 0) * MIB
        sync.add("activations", "CUDA-IPC weight bucket (checkpoint_engine.update_weights_bucket_megabytes)", bucket)
        sync.add("activations", "largest parameter gathered whole (embedding)", step.sizes.largest_tensor)
        # FSDP2's offload_policy stages tensor by tensor instead (engine/fsdp/transformer_impl.py:980-991 @ 0.9.1)
        if (not step.megatron and work.actor.param_offload and not work.actor.offload_policy
                and work.rollout.sync_order != "actor_before_weights"):
            sync.add("weights", "actor shard reloaded from CPU for the sync (param_offload)", step.sizes.params)
        if work.rollout.kv_with_weights and work.rollout.free_cache_engine:
            sync.add("kv_cache", f"KV cache restored with the weights ({work.rollout.engine}'s wake-up in this verl "
                     f"version takes no tags)", max(0.0, pool.kv))
    step.add_resident(sync, pool, actor_loaded=False)
    return sync


# --- log-prob passes --------------------------------------------------------------------------------


def old_log_prob_phase(step: Step, pool: EnginePool) -> Phase:
    """The actor's forward over the batch, entropy computed (fsdp_workers.py:1009)."""
    work, consts, r, sizes = step.work, step.consts, step.resident, step.sizes
    vocab = step.model.vocab / step.vocab_split
    tokens = micro_tokens(work, micro=work.actor.logprob_micro, dynamic=work.actor.logprob_dynamic,
                          budget=work.actor.logprob_max_token_len, split=step.split,
                          remove_padding=work.actor.remove_padding, batch_responses=work.responses_per_dp)
    old = Phase("old_log_prob")
    old.missing = missing_micro(work.actor.logprob_dynamic, work.actor.logprob_micro, "actor_rollout_ref.rollout")
    old.add("weights", "actor parameters (loaded for the forward)", _on_gpu(work.actor.offload_policy, sizes.params))
    old.add("optimizer", "actor Adam states (not offloaded)", r.actor_optimizer)
    old.add("grads", "Megatron gradient buffer (not offloaded)", r.actor_grads)
    old.add("weights", "gathered FSDP units (bf16)", sizes.gathered_fwd * step.transient)
    add_forward_peak(old, tokens, step.model, consts, step.act_split, step.transient, "logits + entropy",
                     forward_logit_bytes(work, consts, tokens, vocab, True))
    step.add_resident(old, pool, actor_loaded=True)
    return old


def ref_log_prob_phase(step: Step, pool: EnginePool) -> Phase:
    """The reference policy's forward: the actor with LoRA off, a Megatron shard, or FSDP units from CPU."""
    work, consts, r, sizes = step.work, step.consts, step.resident, step.sizes
    vocab = step.model.vocab / step.vocab_split
    ref = Phase("ref_log_prob")
    ref.missing = missing_micro(work.ref.dynamic, work.ref.micro, "actor_rollout_ref.ref")
    tokens = micro_tokens(work, micro=work.ref.micro, dynamic=work.ref.dynamic, budget=work.ref.max_token_len,
                          split=step.split, remove_padding=work.actor.remove_padding,
                          batch_responses=work.responses_per_dp)
    if work.ref.in_actor:
        ref.add("weights", "actor parameters with LoRA disabled (the reference policy)",
                _on_gpu(work.actor.offload_policy, sizes.params))
        ref.add("optimizer", "actor Adam states (not offloaded)", r.actor_optimizer)
        ref.add("weights", "gathered FSDP units (bf16)", sizes.gathered_fwd * step.transient)
        step.add_resident(ref, pool, actor_loaded=True)
    elif step.megatron:
        ref_sizes = megatron_sizes(work, step.model, consts, ref=True)
        ref.add("weights", "reference model (bf16 Megatron shard)", ref_sizes.params)
        step.add_resident(ref, pool, actor_loaded=False, ref_loaded=True)
    else:
        # FSDP forces CPUOffload on the reference model (fsdp_workers.py:524-526): only the unit
        # being computed is on the GPU, in the compute dtype.
        ref.add("weights", "reference model units gathered from CPU (bf16)", sizes.gathered_fwd * step.transient)
        step.add_resident(ref, pool, actor_loaded=False)
    add_forward_peak(ref, tokens, step.model, consts, step.act_split, step.transient, "logits (no entropy)",
                     forward_logit_bytes(work, consts, tokens, vocab, False))
    return ref


# --- critic ---------------------------------------------------------------------------------------------


def critic_phases(step: Step, pool: EnginePool) -> list[Phase]:
    """The critic's value forward and its update (no vocab head: a value per token)."""
    work, consts, r = step.work, step.consts, step.resident
    critic, c_sizes = step.critic, step.critic_sizes
    if critic is None or c_sizes is None:
        return []
    c_split = work.topology.cp if step.megatron else work.critic.sp
    values = Phase("critic_values")
    v_tokens = micro_tokens(work, micro=work.critic.fwd_micro, dynamic=work.critic.dynamic,
                            budget=work.critic.fwd_max_token_len, split=c_split,
                            remove_padding=work.critic.remove_padding, batch_responses=work.responses_per_dp)
    values.add("weights", "critic parameters (loaded)", _on_gpu(work.critic.offload_policy, c_sizes.params))
    values.add("optimizer", "critic Adam states (not offloaded)", r.critic_optimizer)
    values.add("weights", "gathered FSDP units (bf16)", c_sizes.gathered_fwd * step.transient)
    values.add("activations", f"forward activations ({v_tokens:,.0f} tokens per micro batch)",
               v_tokens * fwd_act_per_token(critic, consts, step.act_split) * step.transient)
    step.add_resident(values, pool, actor_loaded=False, critic_loaded=True)
    update = Phase("critic_update")
    # the critic's mini batch per data-parallel rank: FSDP dp = world / critic SP (fsdp_workers.py critic
    # normalisation); Megatron dp = mpu's data-parallel size, the actor's layout (megatron_workers.py:1046-1048)
    c_tokens = micro_tokens(work, micro=work.critic.micro, dynamic=work.critic.dynamic,
                            budget=work.critic.max_token_len, split=c_split,
                            remove_padding=work.critic.remove_padding, batch_responses=work.critic_mini_per_dp)
    cpu = work.critic.offload_policy
    update.add("weights", "critic parameters", _on_gpu(cpu, c_sizes.params))
    update.add("grads", "critic gradients", _on_gpu(cpu, c_sizes.grads))
    update.add("optimizer", "critic Adam states", _on_gpu(cpu, c_sizes.optimizer))
    update.add("weights", "gathered FSDP units (bf16)", c_sizes.gathered_bwd * step.transient)
    c_act = train_act_per_token(critic, consts, grad_ckpt=work.critic.grad_ckpt or work.actor.full_recompute,
                                offload=False, layers=step.layers_held, split=step.act_split)
    update.add("activations", f"activations ({c_tokens:,.0f} tokens per micro batch)",
               c_tokens * c_act * step.transient)
    step.add_resident(update, pool, actor_loaded=False, critic_loaded=True)
    return [values, update]


# --- actor update ---------------------------------------------------------------------------------------


def actor_update_phase(step: Step, pool: EnginePool) -> Phase:
    """One actor micro batch's forward and backward with the optimizer states loaded for the whole update."""
    work, consts, sizes = step.work, step.consts, step.sizes
    vocab = step.model.vocab / step.vocab_split
    upd = Phase("actor_update")
    if not work.actor.dynamic and work.actor.micro_per_gpu is None:
        # verl refuses to start (workers/config/actor.py:208 @ 0.9.1): no micro batch, no estimate
        upd.missing = ("cannot say: no actor micro batch; verl needs actor_rollout_ref.actor."
                       "ppo_micro_batch_size_per_gpu (or use_dynamic_bsz=True with ppo_max_token_len_per_gpu)")
    tokens = micro_tokens(work, micro=work.actor.micro_per_gpu, dynamic=work.actor.dynamic,
                          budget=work.actor.max_token_len,
                          split=step.split, remove_padding=work.actor.remove_padding, batch_responses=work.mini_per_dp)
    transient = step.transient
    cpu = work.actor.offload_policy
    upd.add("weights", "actor parameters", _on_gpu(cpu, sizes.params))
    upd.add("grads", "actor gradients", _on_gpu(cpu, sizes.grads))
    upd.add("optimizer", "actor Adam states (loaded for the whole update)", _on_gpu(cpu, sizes.optimizer))
    upd.add("weights", "gathered FSDP units (bf16) and their unsharded gradient", sizes.gathered_bwd * transient)
    kept, recomputed = train_act_parts(step.model, consts, grad_ckpt=work.actor.grad_ckpt,
                                       offload=work.actor.activation_offload,
                                       layers=step.layers_held, split=step.act_split, lora_rank=work.actor.lora_rank)
    logit_bytes = train_logit_bytes(work, consts, tokens, vocab)
    if work.actor.grad_ckpt:
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
    step.add_resident(upd, pool, actor_loaded=True)
    return upd


def step_phases(step: Step) -> tuple[list[Phase], EnginePool]:
    """Every phase of the step in verl's order, and the engine's pool they were sized with."""
    pool = step_pool(step)
    phases = [generate_phase(step, pool), weight_sync_phase(step, pool), old_log_prob_phase(step, pool)]
    if step.work.ref.used:
        phases.append(ref_log_prob_phase(step, pool))
    phases += critic_phases(step, pool)
    phases.append(actor_update_phase(step, pool))
    return phases, pool
