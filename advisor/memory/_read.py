"""Read a verl config into a :class:`~._workload.Workload`: one reader per role, composed by :func:`read_workload`.

verl's batch normalisation (global micro batches divided by dp = world / ulysses_sp, mini batches multiplied
by rollout.n first: verl/workers/fsdp_workers.py:239-273) is not redone here: it comes from advisor's one
:class:`~advisor.facts._batch.BatchPlan` (data-parallel and Ulysses sizes, micro batch per GPU per pass,
dynamic batching per pass). What differs by verl version is decided in :mod:`._verl_paths`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from advisor.codes import CONFIG_GROUP_CHOICE
from advisor.facts import BatchPlan, ForwardLayer, UpdateLayer, batch_plan, is_megatron, ulysses_size, unresolved_sizes

from . import _verl_paths as paths
from ._constants import MemoryConstants
from ._engines import engine_for
from ._models import ModelSpec, lookup_model
from ._workload import Actor, Batch, Critic, Lengths, Ref, Rollout, Topology, Workload

if TYPE_CHECKING:
    from advisor.load import VerlConfig

_A = "actor_rollout_ref.actor."
_R = "actor_rollout_ref.rollout."
_REF = "actor_rollout_ref.ref."
_M = "actor_rollout_ref.model."
_MCORE = _A + "megatron."

_LIMIT = 10**15  # a count past this is a typo (check's B012 says so); the estimate keeps the default instead


def _int(value: Any, default: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: inf
        return default
    return number if abs(number) <= _LIMIT else default


def _flt(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int of 400 digits
        return default
    return number if math.isfinite(number) and abs(number) <= _LIMIT else default


def _bool(value: Any, default: bool = False) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _micro(layer: UpdateLayer | ForwardLayer | None) -> int | None:
    """A pass's micro batch per GPU from the BatchPlan (None: dynamic batching or not set); at least 1, as a
    deprecated global micro batch smaller than dp still runs one response per GPU."""
    value = None if layer is None else layer.micro_batch_per_gpu
    return None if value is None else max(1, value)


def _version(cfg: VerlConfig) -> str:
    return str(getattr(cfg, "version", "") or "")


def read_topology(cfg: VerlConfig, plan: BatchPlan) -> Topology:
    """The GPUs, the training backend and its parallel sizes."""
    per_node = max(1, _int(cfg.get("trainer.n_gpus_per_node"), 8))
    n_gpus = max(1, _int(cfg.get("trainer.nnodes"), 1)) * per_node
    megatron = is_megatron(cfg)
    fsdp_size = _int(cfg.get(_A + "fsdp_config.fsdp_size"), -1)

    def mcore(name: str, default: int = 1) -> int:
        return max(1, _int(cfg.get(_MCORE + name), default)) if megatron else 1

    tp = mcore("tensor_model_parallel_size")
    return Topology(
        n_gpus=n_gpus,
        gpus_per_node=per_node,
        backend="megatron" if megatron else "fsdp",
        strategy="megatron" if megatron else str(cfg.get(_A + "strategy") or "fsdp"),
        sp=1 if megatron else max(1, plan.sequence_parallel),
        fsdp_shard=n_gpus if fsdp_size <= 0 or fsdp_size >= n_gpus else fsdp_size,
        tp=tp,
        pp=mcore("pipeline_model_parallel_size"),
        cp=mcore("context_parallel_size"),
        ep=mcore("expert_model_parallel_size"),
        etp=mcore("expert_tensor_parallel_size", tp),
        colocated=_bool(cfg.get("actor_rollout_ref.hybrid_engine"), True),
    )


def read_lengths(cfg: VerlConfig, model: ModelSpec, consts: MemoryConstants, sequence_tokens: float | None,
                 image_tokens: int | None, notes: list[str]) -> Lengths:
    """The configured maximum lengths and the typical real length (given, or from the dataset table)."""
    prompt_len = max(1, _int(cfg.get("data.max_prompt_length"), 512))
    response_len = max(1, _int(cfg.get("data.max_response_length"), 512))
    lengths = consts.dataset_lengths(cfg.get("data.train_files"))
    if sequence_tokens is not None:
        typical = float(min(prompt_len + response_len, max(1.0, sequence_tokens)))
        typical_source = f"{typical:.0f} real tokens per sequence (given)"
    elif lengths is not None:
        images = max(0, image_tokens or 0)
        typical = float(min(prompt_len, lengths.prompt_tokens + images) + min(response_len, lengths.response_tokens))
        typical_source = (f"'{lengths.match}' data: {lengths.prompt_tokens} prompt"
                          f"{f' + {images} image' if images else ''} + {lengths.response_tokens}"
                          f" response tokens per sequence ({lengths.source})")
    else:
        typical = float(prompt_len + response_len)
        typical_source = ("unknown dataset: every sequence assumed to fill max_prompt_length + "
                          "max_response_length (worst case)")
    # the shortest typical length the inputs allow, and what to pass when it is not the real one: the verdict
    # of a phase that fits at this floor and not at max length depends on an input we lack
    floor, missing = typical, None
    if sequence_tokens is None and lengths is None:
        # a mix with some known datasets: a micro batch of the shortest known one is the floor; else 1 token
        known = consts.shortest_known_lengths(cfg.get("data.train_files"))
        floor = (float(min(prompt_len, known.prompt_tokens) + min(response_len, known.response_tokens))
                 if known is not None else 1.0)
        missing = (f"the data's lengths ({cfg.get('data.train_files')!s:.80} is not among "
                   f"knowledge/memory.yaml datasets): pass --sequence-tokens N (typical prompt + response "
                   f"tokens{', image tokens included' if model.extra_params else ''})")
    elif model.extra_params and sequence_tokens is None and image_tokens is None:
        missing = ("the prompts' image tokens (a vision-language model): pass --image-tokens N "
                   "(or --sequence-tokens N)")
    if model.extra_params and sequence_tokens is None and image_tokens is None:
        notes.append("vision-language model: max_prompt_length bounds text and image tokens together "
                     "(rl_dataset.py counts the expanded image tokens); pass --image-tokens N (image tokens per "
                     "prompt) or --sequence-tokens N for typical lengths; the vision tower's activations are "
                     "not modelled")
    return Lengths(prompt_len, response_len, typical, typical_source, floor, missing)


_ASSUMED_TRAIN_BATCH = 1024  # verl's default data.train_batch_size (trainer/config/ppo_trainer.yaml, every release)


def read_batch(plan: BatchPlan, notes: list[str]) -> Batch:
    """The batch layers as advisor.facts reads them; what the arithmetic must assume for one the config leaves
    unknown is said in ``notes``."""
    train_batch = plan.prompts_per_step
    if train_batch is None:
        train_batch = _ASSUMED_TRAIN_BATCH
        notes.append(f"data.train_batch_size is not a positive integer: assumed {_ASSUMED_TRAIN_BATCH} prompts per "
                     "step (verl's default)")
    n = plan.n
    if n is None:
        n = 1
        notes.append("rollout.n is not a positive integer: assumed 1 response per prompt")
    mini = plan.actor.mini_batch_prompts
    if mini is None:
        mini = train_batch
        notes.append("actor ppo_mini_batch_size is not a positive integer: assumed one mini batch per step")
    return Batch(train_batch=train_batch, n=n, mini_batch=mini)


def _lora_rank(cfg: VerlConfig) -> int:
    rank = _int(cfg.get(_M + "lora_rank"), 0)
    return max(rank, 1) if cfg.get(_M + "lora_adapter_path") else rank


def read_actor(cfg: VerlConfig, topology: Topology, plan: BatchPlan, consts: MemoryConstants,
               notes: list[str]) -> Actor:
    """The actor's shards, offload, micro batches, and the log-prob and update paths its verl version takes."""
    megatron = topology.backend == "megatron"
    if megatron:
        param_off = _bool(cfg.get(_MCORE + "param_offload"))
        opt_off = _bool(cfg.get(_MCORE + "optimizer_offload"))
        grad_off = _bool(cfg.get(_MCORE + "grad_offload"))
        rmpad = _bool(cfg.get(_MCORE + "use_remove_padding"), True)
        granularity = cfg.get(_MCORE + "override_transformer_config.recompute_granularity")
        full_recompute = grad_ckpt = str(granularity).lower() == "full"
    else:
        param_off = _bool(cfg.get(_A + "fsdp_config.param_offload"))
        opt_off = _bool(cfg.get(_A + "fsdp_config.optimizer_offload"))
        grad_off = full_recompute = False
        rmpad = _bool(cfg.get(_A + "use_remove_padding"), _bool(cfg.get(_M + "use_remove_padding")))
        grad_ckpt = _bool(cfg.get(_M + "enable_gradient_checkpointing"), True)
    override_optim = cfg.get(_A + "optim.override_optimizer_config") or {}
    cpu_fraction = 0.0
    if isinstance(override_optim, dict) and _bool(override_optim.get("optimizer_cpu_offload")):
        cpu_fraction = min(1.0, max(0.0, _flt(override_optim.get("optimizer_offload_fraction"), 1.0)))

    micro = _micro(plan.actor)
    if micro is None and not plan.actor.dynamic:
        notes.append("actor micro batch not set: assumed the whole mini batch per GPU")
    max_token_len = max(1, _int(cfg.get(_A + "ppo_max_token_len_per_gpu"), 16384))
    entropy_coeff = _flt(cfg.get(_A + "entropy_coeff"), 0.0)
    version = _version(cfg)
    inplace, copy = paths.temperature_path(version, _flt(cfg.get(_R + "temperature"), 1.0), megatron)
    return Actor(
        dtype_bytes=consts.bytes_of(cfg.get(_A + "fsdp_config.model_dtype"), 4),
        param_offload=param_off,
        optimizer_offload=opt_off,
        grad_offload=grad_off,
        offload_policy=topology.strategy == "fsdp2" and _bool(cfg.get(_A + "fsdp_config.offload_policy")),
        micro_per_gpu=micro,
        dynamic=plan.actor.dynamic,
        max_token_len=max_token_len,
        logprob_micro=_micro(plan.old_log_prob),
        logprob_dynamic=plan.old_log_prob.dynamic,
        logprob_max_token_len=max(1, _int(cfg.get(_R + "log_prob_max_token_len_per_gpu"), max_token_len)),
        grad_ckpt=grad_ckpt,
        activation_offload=_bool(cfg.get(_M + "enable_activation_offload")) and not megatron,
        remove_padding=rmpad,
        fused_kernels=_bool(cfg.get(_M + "use_fused_kernels")),
        entropy_in_update=entropy_coeff != 0.0 or _bool(cfg.get(_A + "calculate_entropy")),
        entropy_chunking=_bool(cfg.get(_A + "entropy_from_logits_with_chunking")) or _bool(
            cfg.get(_REF + "entropy_from_logits_with_chunking")),
        entropy_checkpointing=_bool(cfg.get(_A + "entropy_checkpointing")),
        torch_compile=_bool(cfg.get(_A + "use_torch_compile"), True),
        lora_rank=_lora_rank(cfg),
        lora_targets=cfg.get(_M + "target_modules") or "all-linear",
        freeze_vision=_bool(cfg.get(_A + "freeze_vision_tower")),
        distributed_optimizer=_bool(cfg.get(_MCORE + "use_distributed_optimizer"), True),
        optimizer_cpu_fraction=cpu_fraction,
        full_recompute=full_recompute,
        legacy=paths.legacy_workers(version, str(cfg.get("trainer.use_legacy_worker_impl") or "auto")),
        inplace_temperature=inplace,
        temperature_copy=copy,
        checkpoint_save=_int(cfg.get("trainer.save_freq"), -1) > 0,
    )


def read_ref(cfg: VerlConfig, topology: Topology, plan: BatchPlan, actor: Actor, consts: MemoryConstants) -> Ref:
    """The reference policy: used for a KL loss or KL reward; a LoRA actor with its adapter off serves it."""
    megatron = topology.backend == "megatron"
    if megatron:
        param_off = _bool(cfg.get(_REF + "megatron.param_offload"), actor.param_offload)
    else:
        param_off = _bool(cfg.get(_REF + "fsdp_config.param_offload"))
    layer = plan.ref
    return Ref(
        used=_bool(cfg.get(_A + "use_kl_loss")) or _bool(cfg.get("algorithm.use_kl_in_reward")),
        in_actor=actor.lora_rank > 0 and not megatron,
        # verl falls back to bf16 for the ref when model_dtype is absent (fsdp_workers.py:324-328)
        dtype_bytes=consts.bytes_of(cfg.get(_REF + "fsdp_config.model_dtype"), 2),
        param_offload=param_off,
        micro=_micro(layer),
        dynamic=layer.dynamic if layer is not None else actor.dynamic,
        max_token_len=max(1, _int(cfg.get(_REF + "log_prob_max_token_len_per_gpu"), actor.max_token_len)),
    )


def _critic_fsdp_key(cfg: VerlConfig, name: str) -> str:
    """The critic's FSDP engine key: ``critic.fsdp.*`` from verl 0.8 (trainer/config/critic/dp_critic.yaml),
    ``critic.model.fsdp_config.*`` before."""
    return f"critic.fsdp.{name}" if cfg.has(f"critic.fsdp.{name}") else f"critic.model.fsdp_config.{name}"


def read_critic(cfg: VerlConfig, model: ModelSpec, topology: Topology, plan: BatchPlan, actor: Actor,
                consts: MemoryConstants) -> Critic:
    """The critic: on for GAE unless critic.enable says otherwise; the actor's model unless it names its own."""
    megatron = topology.backend == "megatron"
    # critic.enable null means "on iff adv_estimator == gae" (verl/trainer/ppo/utils.py:86-97)
    enable = cfg.get("critic.enable")
    used = _bool(enable) if enable is not None else str(cfg.get("algorithm.adv_estimator") or "gae") == "gae"
    critic_model = None
    if used:
        path = cfg.get("critic.model.path")
        other = lookup_model(str(path)) if path and "critic.model.path" in getattr(cfg, "user_keys", {}) else None
        critic_model = other or model
    micro = _micro(plan.critic)
    fwd = _micro(plan.values)
    max_token_len = max(1, _int(cfg.get("critic.ppo_max_token_len_per_gpu"), 32768))
    if megatron:
        param_off = _bool(cfg.get("critic.megatron.param_offload"))
        opt_off = _bool(cfg.get("critic.megatron.optimizer_offload"))
    else:
        param_off = _bool(cfg.get(_critic_fsdp_key(cfg, "param_offload")))
        opt_off = _bool(cfg.get(_critic_fsdp_key(cfg, "optimizer_offload")))
    return Critic(
        used=used,
        model=critic_model,
        dtype_bytes=consts.bytes_of(cfg.get(_critic_fsdp_key(cfg, "model_dtype")), 4),
        param_offload=param_off,
        optimizer_offload=opt_off,
        offload_policy=(not megatron and str(cfg.get("critic.strategy") or topology.strategy) == "fsdp2"
                        and _bool(cfg.get(_critic_fsdp_key(cfg, "offload_policy")))),
        grad_ckpt=_bool(cfg.get("critic.model.enable_gradient_checkpointing"), True),
        remove_padding=_bool(cfg.get("critic.model.use_remove_padding")) or megatron,
        sp=max(1, ulysses_size(cfg, "critic")),
        micro=micro,
        dynamic=plan.critic.dynamic if plan.critic is not None else actor.dynamic,
        max_token_len=max_token_len,
        fwd_micro=fwd if fwd is not None else micro,
        fwd_max_token_len=max(1, _int(cfg.get("critic.forward_max_token_len_per_gpu"), max_token_len)),
        grad_offload=_bool(cfg.get("critic.megatron.grad_offload")) if megatron else False,
    )


def read_rollout(cfg: VerlConfig, lengths: Lengths, actor: Actor, consts: MemoryConstants, notes: list[str]) -> Rollout:
    """The inference engine's pool and limits, and how this verl version's weight sync wakes it."""
    engine = str(cfg.get(_R + "name") or "vllm").lower()
    if engine in ("???", "none"):
        engine = "vllm"
        notes.append("rollout.name not set: assumed vllm")
    version = _version(cfg)
    capture = cfg.get(_R + "cudagraph_capture_sizes")
    quant = str(cfg.get(_R + "quantization") or "").lower()
    user_len = _int(cfg.get(_R + "max_model_len"), 0) or None
    max_model_len, settable, note = paths.engine_max_model_len(version, user_len, lengths.max_seq_tokens)
    if note:
        notes.append(note)
    row = engine_for(engine)
    staged = _bool(cfg.get(row.staged_wake_up_key)) if row.staged_wake_up_key else False
    return Rollout(
        engine=engine,
        gmu=_flt(cfg.get(_R + "gpu_memory_utilization"), 0.5),
        tp=max(1, _int(cfg.get(_R + "tensor_model_parallel_size"), 1)),
        dp=max(1, _int(cfg.get(_R + "data_parallel_size"), 1)),
        max_model_len=max_model_len,
        max_num_seqs=max(1, _int(cfg.get(_R + "max_num_seqs"), 256)),
        max_num_batched_tokens=max(1, _int(cfg.get(_R + "max_num_batched_tokens"), 8192)),
        enforce_eager=_bool(cfg.get(_R + "enforce_eager")),
        cudagraph_max_size=max(int(x) for x in capture) if isinstance(capture, (list, tuple)) and capture else None,
        free_cache_engine=_bool(cfg.get(_R + "free_cache_engine"), True),
        bucket_mb=_int(cfg.get(_R + "checkpoint_engine.update_weights_bucket_megabytes"), 0),
        weight_bytes=1 if quant.startswith("fp8") else consts.bytes_of(cfg.get(_R + "dtype"), 2),
        max_model_len_settable=settable,
        vllm_startup_check=paths.vllm_startup_check(version),
        sync_order=paths.sync_order(version),
        kv_with_weights=row.restores_kv_with_weights(version, staged),
        engine_weights_stay=row.keeps_weights_asleep(version, actor.lora_rank > 0 and not _bool(
            cfg.get(_M + "lora.merge"))),
        host_weight_copy=(engine == "vllm" and _bool(cfg.get(_R + "free_cache_engine"), True)
                          and paths.vllm_sleep_keeps_host_copy(version, _bool(cfg.get(_R + "layered_summon")))),
        swap_gib=(_flt(cfg.get(_R + "engine_kwargs.vllm.swap_space"), consts.host_vllm_v0_swap_gib)
                  if engine == "vllm" and paths.vllm_v0_swap_space(version) else 0.0),
    )


_SIZED_SECTIONS = ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "actor_rollout_ref.rollout", "critic")


def read_workload(cfg: VerlConfig, model: ModelSpec, consts: MemoryConstants,
                  sequence_tokens: float | None = None, image_tokens: int | None = None) -> Workload:
    """Resolve a :class:`~advisor.VerlConfig` into the per-GPU numbers the memory model needs.

    ``sequence_tokens`` (real prompt + response tokens of a typical sequence) overrides the dataset
    table; it is capped at max_prompt_length + max_response_length. ``image_tokens`` (a vision-language
    model's image tokens per prompt) are added to the dataset table's prompt: verl counts a prompt's
    expanded image tokens against max_prompt_length (utils/dataset/rl_dataset.py:206-244 @ 0.9.1).
    """
    notes: list[str] = []  # in reading order: lengths, actor, rollout
    plan = batch_plan(cfg)
    topology = read_topology(cfg, plan)
    lengths = read_lengths(cfg, model, consts, sequence_tokens, image_tokens, notes)
    actor = read_actor(cfg, topology, plan, consts, notes)
    rollout = read_rollout(cfg, lengths, actor, consts, notes)
    return Workload(
        topology=topology,
        lengths=lengths,
        batch=read_batch(plan, notes),
        actor=actor,
        ref=read_ref(cfg, topology, plan, actor, consts),
        critic=read_critic(cfg, model, topology, plan, actor, consts),
        rollout=rollout,
        notes=tuple(notes),
        unresolved=unresolved_sizes(cfg),
        unseen=tuple(f"{f.keys[0]} from option '{f.details.get('option')}'" for f in getattr(cfg, "findings", ())
                     if f.id == CONFIG_GROUP_CHOICE.id and f.keys and f.keys[0].startswith(_SIZED_SECTIONS)),
    )
