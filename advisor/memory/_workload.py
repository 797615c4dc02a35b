"""What one training step asks of each GPU: a verl config read into plain numbers.

Everything the memory arithmetic needs is resolved here, once. verl's batch normalisation (global micro
batches divided by dp = world / ulysses_sp, mini batches multiplied by rollout.n first:
verl/workers/fsdp_workers.py:239-273) is not redone here: it comes from advisor's one
:class:`~advisor.facts._batch.BatchPlan` (data-parallel and Ulysses sizes, micro batch per GPU per pass, dynamic
batching per pass). The fix search edits a :class:`Workload` directly (cheap; the per-GPU properties
below follow an edited GPU count) and turns the winning edit back into config keys through :mod:`._knobs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from advisor.codes import CONFIG_GROUP_CHOICE
from advisor.facts import batch_plan, ulysses_size
from advisor.verl import at_least

from ._constants import MemoryConstants
from ._engines import engine_for
from ._models import ModelSpec, lookup_model

_A = "actor_rollout_ref.actor."
_R = "actor_rollout_ref.rollout."
_REF = "actor_rollout_ref.ref."
_M = "actor_rollout_ref.model."


@dataclass(frozen=True)
class Workload:
    """One colocated (hybrid-engine) verl step, per GPU."""

    # topology
    n_gpus: int
    gpus_per_node: int
    backend: str  # "fsdp" | "megatron"
    strategy: str  # fsdp | fsdp2 | megatron
    # sequences
    prompt_len: int
    response_len: int
    typical_tokens: float  # real tokens per sequence (remove-padding packs these)
    typical_source: str
    typical_floor: float  # the shortest typical length the inputs allow (1 when the dataset is unknown)
    lengths_missing: str | None  # what to pass when the real typical length is not known
    # batch sizes (prompts; rollout.n responses each)
    train_batch: int
    n: int
    mini_batch: int
    # actor
    sp: int
    fsdp_shard: int
    actor_dtype_bytes: int
    actor_param_offload: bool
    actor_optimizer_offload: bool
    actor_grad_offload: bool
    actor_offload_policy: bool
    micro_per_gpu: int | None
    dynamic: bool
    max_token_len: int
    logprob_micro: int | None
    logprob_dynamic: bool
    logprob_max_token_len: int
    grad_ckpt: bool
    activation_offload: bool
    remove_padding: bool
    fused_kernels: bool
    entropy_in_update: bool
    entropy_chunking: bool
    entropy_checkpointing: bool
    torch_compile: bool
    lora_rank: int
    lora_targets: Any
    freeze_vision: bool
    # reference policy
    ref_used: bool
    ref_in_actor: bool
    ref_dtype_bytes: int
    ref_param_offload: bool
    ref_micro: int | None
    ref_dynamic: bool
    ref_max_token_len: int
    # Megatron
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int
    distributed_optimizer: bool
    optimizer_cpu_fraction: float
    full_recompute: bool
    # critic
    critic_used: bool
    critic_model: ModelSpec | None
    critic_dtype_bytes: int
    critic_param_offload: bool
    critic_optimizer_offload: bool
    critic_offload_policy: bool  # FSDP2 CPUOffloadPolicy: sharded state and the optimizer step on the CPU
    critic_grad_ckpt: bool
    critic_remove_padding: bool
    critic_sp: int
    critic_micro: int | None
    critic_dynamic: bool
    critic_max_token_len: int
    critic_fwd_micro: int | None
    critic_fwd_max_token_len: int
    critic_grad_offload: bool
    # rollout engine
    engine: str
    gmu: float
    rollout_tp: int
    rollout_dp: int
    max_model_len: int | None  # None: the model's max_position_embeddings
    max_num_seqs: int
    max_num_batched_tokens: int
    enforce_eager: bool
    cudagraph_max_size: int | None
    free_cache_engine: bool
    bucket_mb: int
    rollout_weight_bytes: int
    notes: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()  # keys set to a shell variable the script never evaluates
    # training/rollout sections composed from a config-group option the advisor cannot see (group@pkg=option):
    # "pkg from option 'x'"; their engine, parallelism and offload are not known, so no phase is judged
    unseen: tuple[str, ...] = ()
    legacy_actor: bool = False  # verl < 0.8 legacy workers: dp_actor.py computes the log-probs
    inplace_temperature: bool = False  # verl < 0.9.0 divides the logits in place (see _temperature_path)
    temperature_copy: bool = False  # verl >= 0.9.0 divides out of place, copying the logits
    # what is on the GPU together while weights move to the engine (see _sync_order)
    sync_order: str = "actor_with_weights"
    kv_with_weights: bool = False  # the sync wakes the engine's KV cache with its weights (see _engines)
    engine_weights_stay: bool = False  # the sleeping engine keeps its weights on the GPU (SGLang LoRA adapter)
    max_model_len_settable: bool = True  # verl 0.7.x overwrites rollout.max_model_len
    vllm_startup_check: bool = True  # vLLM >= 0.9.1 (verl >= 0.6 allows it) checks free memory at start-up
    # actor_rollout_ref.hybrid_engine=False (fully async / one-step-off): the rollout has GPUs of its own
    # (verl/experimental/fully_async_policy/README.md:44 "Rollouter and Trainer use separate computing resources";
    # fully_async_trainer.py:76 asserts it), so no training state sits beside the engine
    colocated: bool = True

    @property
    def dp(self) -> int:
        """Data-parallel ranks of the actor (FSDP: world / ulysses_sp; Megatron: world / TP·PP·CP).

        BatchPlan.data_parallel for the config as read; a property so that a workload scaled to more GPUs
        (the fix search's "more GPUs" answer) follows.
        """
        if self.backend == "megatron":
            return max(1, self.n_gpus // (self.tp * self.pp * self.cp))
        return max(1, self.n_gpus // self.sp)

    @property
    def max_seq_tokens(self) -> int:
        return self.prompt_len + self.response_len

    @property
    def responses_per_dp(self) -> int:
        """Responses each data-parallel rank handles per step (B·n / dp)."""
        return max(1, self.train_batch * self.n // self.dp)

    @property
    def critic_dp(self) -> int:
        """Data-parallel ranks of the critic (FSDP: world / critic ulysses_sp; Megatron: the actor's layout)."""
        if self.backend == "megatron":
            return self.dp
        return max(1, self.n_gpus // self.critic_sp)

    @property
    def critic_mini_per_dp(self) -> int:
        """Responses per critic mini batch per data-parallel rank."""
        return max(1, self.mini_batch * self.n // self.critic_dp)

    @property
    def mini_per_dp(self) -> int:
        """Responses per mini batch per data-parallel rank (verl's normalised ppo_mini_batch_size)."""
        return max(1, self.mini_batch * self.n // self.dp)


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


# Keys the memory arithmetic cannot do without: a value the script leaves as an unevaluated shell variable
# (set only inside a `case`/`if` block the reader does not run) makes the estimate unknown, not a default.
_SIZING_KEYS = (
    "trainer.n_gpus_per_node", "trainer.nnodes", "data.max_prompt_length", "data.max_response_length",
    "data.train_batch_size", _A + "ppo_mini_batch_size", _A + "ppo_micro_batch_size_per_gpu",
    _A + "ppo_max_token_len_per_gpu", _A + "ulysses_sequence_parallel_size", _R + "tensor_model_parallel_size",
    _R + "gpu_memory_utilization", _R + "n", _R + "log_prob_micro_batch_size_per_gpu",
    _REF + "log_prob_micro_batch_size_per_gpu",
)


def _sync_order(version: str) -> str:
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


def _critic_fsdp_key(cfg: Any, name: str) -> str:
    """The critic's FSDP engine key: ``critic.fsdp.*`` from verl 0.8 (trainer/config/critic/dp_critic.yaml),
    ``critic.model.fsdp_config.*`` before."""
    return f"critic.fsdp.{name}" if cfg.has(f"critic.fsdp.{name}") else f"critic.model.fsdp_config.{name}"


def _kv_with_weights(cfg: Any, engine: str, version: str) -> bool:
    row = engine_for(engine)
    staged = _bool(cfg.get(row.staged_wake_up_key)) if row.staged_wake_up_key else False
    return row.restores_kv_with_weights(version, staged)


_SIZED_SECTIONS = ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "actor_rollout_ref.rollout", "critic")


def _is_unresolved(value: Any) -> bool:
    return isinstance(value, str) and "$" in value


def _micro(layer: Any) -> int | None:
    """A pass's micro batch per GPU from the BatchPlan (None: dynamic batching or not set); at least 1, as a
    deprecated global micro batch smaller than dp still runs one response per GPU."""
    value = None if layer is None else layer.micro_batch_per_gpu
    return None if value is None else max(1, value)


def _engine_max_model_len(cfg: Any, max_seq_tokens: int) -> tuple[int | None, bool, str | None]:
    """The context length verl gives the inference engine, by verl version (None: max_position_embeddings).

    Returns (length, whether rollout.max_model_len is honoured, a note for the assumptions).
    - verl <= 0.6: the user's value, else prompt + response (v0.4.1 vllm_async_server.py:149, v0.5.0 :220,
      v0.6.1 vllm_rollout_spmd.py:195; the 0.6.1 async server always uses prompt + response, :155).
    - verl 0.7.x: always the model's max_position_embeddings, the user's value is overwritten
      (v0.7.0 vllm_async_server.py:198, async_sglang_server.py:86).
    - verl 0.8.0.dev (b178a3cd): the user's value, else max_position_embeddings (vllm_async_server.py:113-114,
      async_sglang_server.py:172-173, trtllm_async_server.py:73-74; verl PR #5052, 2026-01-27).
    """
    user = _int(cfg.get(_R + "max_model_len"), 0) or None
    version = str(getattr(cfg, "version", "") or "")
    if not at_least(version, "0.7"):
        return (user or max_seq_tokens), True, None
    if not at_least(version, "0.8.0.dev"):
        note = (f"verl {version} gives the engine the model's max_position_embeddings as max_model_len"
                f"{' (rollout.max_model_len is overwritten)' if user else ''}")
        return None, False, note
    return user, True, None


def read_workload(cfg: Any, model: ModelSpec, consts: MemoryConstants,
                  sequence_tokens: float | None = None, image_tokens: int | None = None) -> Workload:
    """Resolve a :class:`~advisor.VerlConfig` into the per-GPU numbers the memory model needs.

    ``sequence_tokens`` (real prompt + response tokens of a typical sequence) overrides the dataset
    table; it is capped at max_prompt_length + max_response_length. ``image_tokens`` (a vision-language
    model's image tokens per prompt) are added to the dataset table's prompt: verl counts a prompt's
    expanded image tokens against max_prompt_length (utils/dataset/rl_dataset.py:206-244 @ 0.9.1).
    """
    notes: list[str] = []
    nnodes = max(1, _int(cfg.get("trainer.nnodes"), 1))
    per_node = max(1, _int(cfg.get("trainer.n_gpus_per_node"), 8))
    n_gpus = nnodes * per_node
    megatron = "megatron" in str(cfg.config_name) or str(cfg.get(_A + "strategy")) == "megatron"
    backend = "megatron" if megatron else "fsdp"
    strategy = "megatron" if megatron else str(cfg.get(_A + "strategy") or "fsdp")

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
    floor, lengths_missing = typical, None
    if sequence_tokens is None and lengths is None:
        # a mix with some known datasets: a micro batch of the shortest known one is the floor; else 1 token
        known = consts.shortest_known_lengths(cfg.get("data.train_files"))
        floor = (float(min(prompt_len, known.prompt_tokens) + min(response_len, known.response_tokens))
                 if known is not None else 1.0)
        lengths_missing = (f"the data's lengths ({cfg.get('data.train_files')!s:.80} is not among "
                           f"knowledge/memory.yaml datasets): pass --sequence-tokens N (typical prompt + response "
                           f"tokens{', image tokens included' if model.extra_params else ''})")
    elif model.extra_params and sequence_tokens is None and image_tokens is None:
        lengths_missing = ("the prompts' image tokens (a vision-language model): pass --image-tokens N "
                           "(or --sequence-tokens N)")
    if model.extra_params and sequence_tokens is None and image_tokens is None:
        notes.append("vision-language model: max_prompt_length bounds text and image tokens together "
                     "(rl_dataset.py counts the expanded image tokens); pass --image-tokens N (image tokens per "
                     "prompt) or --sequence-tokens N for typical lengths; the vision tower's activations are "
                     "not modelled")

    n = max(1, _int(cfg.get(_R + "n"), 1))
    train_batch = max(1, _int(cfg.get("data.train_batch_size"), 1024))
    mini_batch = max(1, _int(cfg.get(_A + "ppo_mini_batch_size"), train_batch))

    mcore = _A + "megatron."
    tp = max(1, _int(cfg.get(mcore + "tensor_model_parallel_size"), 1)) if megatron else 1
    pp = max(1, _int(cfg.get(mcore + "pipeline_model_parallel_size"), 1)) if megatron else 1
    cp = max(1, _int(cfg.get(mcore + "context_parallel_size"), 1)) if megatron else 1
    ep = max(1, _int(cfg.get(mcore + "expert_model_parallel_size"), 1)) if megatron else 1
    etp = max(1, _int(cfg.get(mcore + "expert_tensor_parallel_size"), tp)) if megatron else 1
    plan = batch_plan(cfg)
    sp = 1 if megatron else max(1, plan.sequence_parallel)

    fsdp_size = _int(cfg.get(_A + "fsdp_config.fsdp_size"), -1)
    shard = n_gpus if fsdp_size <= 0 or fsdp_size >= n_gpus else fsdp_size

    actor_dtype = cfg.get(_A + "fsdp_config.model_dtype")
    if megatron:
        param_off = _bool(cfg.get(mcore + "param_offload"))
        opt_off = _bool(cfg.get(mcore + "optimizer_offload"))
        grad_off = _bool(cfg.get(mcore + "grad_offload"))
    else:
        param_off = _bool(cfg.get(_A + "fsdp_config.param_offload"))
        opt_off = _bool(cfg.get(_A + "fsdp_config.optimizer_offload"))
        grad_off = False
    offload_policy = strategy == "fsdp2" and _bool(cfg.get(_A + "fsdp_config.offload_policy"))
    override_optim = cfg.get(_A + "optim.override_optimizer_config") or {}
    cpu_fraction = 0.0
    if isinstance(override_optim, dict) and _bool(override_optim.get("optimizer_cpu_offload")):
        cpu_fraction = min(1.0, max(0.0, _flt(override_optim.get("optimizer_offload_fraction"), 1.0)))

    dynamic = plan.actor.dynamic
    micro = _micro(plan.actor)
    if micro is None and not dynamic:
        notes.append("actor micro batch not set: assumed the whole mini batch per GPU")
    max_token_len = max(1, _int(cfg.get(_A + "ppo_max_token_len_per_gpu"), 16384))
    lp_dynamic = plan.old_log_prob.dynamic
    lp_micro = _micro(plan.old_log_prob)
    lp_max = max(1, _int(cfg.get(_R + "log_prob_max_token_len_per_gpu"), max_token_len))

    lora_rank = _int(cfg.get(_M + "lora_rank"), 0)
    if cfg.get(_M + "lora_adapter_path"):
        lora_rank = max(lora_rank, 1)
    use_kl = _bool(cfg.get(_A + "use_kl_loss")) or _bool(cfg.get("algorithm.use_kl_in_reward"))
    ref_in_actor = lora_rank > 0 and not megatron
    ref_dtype = cfg.get(_REF + "fsdp_config.model_dtype")
    ref_layer = plan.ref
    ref_dynamic = ref_layer.dynamic if ref_layer is not None else dynamic
    ref_micro = _micro(ref_layer)
    ref_max = max(1, _int(cfg.get(_REF + "log_prob_max_token_len_per_gpu"), max_token_len))
    if megatron:
        ref_param_off = _bool(cfg.get(_REF + "megatron.param_offload"), param_off)
    else:
        ref_param_off = _bool(cfg.get(_REF + "fsdp_config.param_offload"))

    entropy_coeff = _flt(cfg.get(_A + "entropy_coeff"), 0.0)
    entropy_in_update = entropy_coeff != 0.0 or _bool(cfg.get(_A + "calculate_entropy"))
    chunking = _bool(cfg.get(_A + "entropy_from_logits_with_chunking")) or _bool(
        cfg.get(_REF + "entropy_from_logits_with_chunking"))

    if megatron:
        rmpad = _bool(cfg.get(mcore + "use_remove_padding"), True)
        granularity = cfg.get(mcore + "override_transformer_config.recompute_granularity")
        full_recompute = str(granularity).lower() == "full"
        grad_ckpt = full_recompute
    else:
        rmpad = _bool(cfg.get(_A + "use_remove_padding"), _bool(cfg.get(_M + "use_remove_padding")))
        grad_ckpt = _bool(cfg.get(_M + "enable_gradient_checkpointing"), True)
        full_recompute = False

    # critic (GAE): critic.enable null means "on iff adv_estimator == gae" (verl/trainer/ppo/utils.py:86-97)
    critic_enable = cfg.get("critic.enable")
    adv = str(cfg.get("algorithm.adv_estimator") or "gae")
    critic_used = _bool(critic_enable) if critic_enable is not None else adv == "gae"
    critic_model = None
    if critic_used:
        critic_path = cfg.get("critic.model.path")
        user_keys = getattr(cfg, "user_keys", {})
        other = lookup_model(str(critic_path)) if critic_path and "critic.model.path" in user_keys else None
        critic_model = other or model
    critic_dynamic = plan.critic.dynamic if plan.critic is not None else dynamic
    critic_micro = _micro(plan.critic)
    critic_fwd = _micro(plan.values)
    critic_max = max(1, _int(cfg.get("critic.ppo_max_token_len_per_gpu"), 32768))
    critic_fwd_max = max(1, _int(cfg.get("critic.forward_max_token_len_per_gpu"), critic_max))
    if megatron:
        critic_param_off = _bool(cfg.get("critic.megatron.param_offload"))
        critic_opt_off = _bool(cfg.get("critic.megatron.optimizer_offload"))
    else:
        critic_param_off = _bool(cfg.get(_critic_fsdp_key(cfg, "param_offload")))
        critic_opt_off = _bool(cfg.get(_critic_fsdp_key(cfg, "optimizer_offload")))

    engine = str(cfg.get(_R + "name") or "vllm").lower()
    if engine in ("???", "none"):
        engine = "vllm"
        notes.append("rollout.name not set: assumed vllm")
    capture = cfg.get(_R + "cudagraph_capture_sizes")
    capture_max = max(int(x) for x in capture) if isinstance(capture, (list, tuple)) and capture else None
    quant = str(cfg.get(_R + "quantization") or "").lower()
    weight_bytes = 1 if quant.startswith("fp8") else consts.bytes_of(cfg.get(_R + "dtype"), 2)
    bucket = cfg.get(_R + "checkpoint_engine.update_weights_bucket_megabytes")
    max_model_len, settable, note = _engine_max_model_len(cfg, prompt_len + response_len)
    version = str(getattr(cfg, "version", "") or "")
    # verl <= 0.5 pins vllm <= 0.8.5 (setup.py), before vLLM's start-up free-memory check (0.9.1)
    startup_check = at_least(version, "0.6")
    if note:
        notes.append(note)

    unresolved = tuple(k for k in _SIZING_KEYS if _is_unresolved(cfg.get(k)))
    unseen = tuple(f"{f.keys[0]} from option '{f.details.get('option')}'" for f in getattr(cfg, "findings", ())
                   if f.id == CONFIG_GROUP_CHOICE.id and f.keys and f.keys[0].startswith(_SIZED_SECTIONS))
    # verl < 0.8 runs the legacy workers (dp_actor.py) unless trainer.use_legacy_worker_impl=disable
    # (main_ppo.py:128-131 @ 0.7.1); 0.8.0 ships only the engine workers (no verl/workers/actor/)
    legacy = not at_least(version, "0.8.0.dev") and \
        str(cfg.get("trainer.use_legacy_worker_impl") or "auto") != "disable"
    inplace, copy = _temperature_path(version, _flt(cfg.get(_R + "temperature"), 1.0), megatron)
    return Workload(
        unresolved=unresolved,
        unseen=unseen,
        legacy_actor=legacy,
        inplace_temperature=inplace,
        temperature_copy=copy,
        sync_order=_sync_order(version),
        kv_with_weights=_kv_with_weights(cfg, engine, version),
        engine_weights_stay=engine_for(engine).keeps_weights_asleep(
            version, lora_rank > 0 and not _bool(cfg.get(_M + "lora.merge"))),
        n_gpus=n_gpus,
        gpus_per_node=per_node,
        backend=backend,
        strategy=strategy,
        prompt_len=prompt_len,
        response_len=response_len,
        typical_tokens=typical,
        typical_source=typical_source,
        typical_floor=floor,
        lengths_missing=lengths_missing,
        train_batch=train_batch,
        n=n,
        mini_batch=mini_batch,
        sp=sp,
        fsdp_shard=shard,
        actor_dtype_bytes=consts.bytes_of(actor_dtype, 4),
        actor_param_offload=param_off,
        actor_optimizer_offload=opt_off,
        actor_grad_offload=grad_off,
        actor_offload_policy=offload_policy,
        micro_per_gpu=micro,
        dynamic=dynamic,
        max_token_len=max_token_len,
        logprob_micro=lp_micro,
        logprob_dynamic=lp_dynamic,
        logprob_max_token_len=lp_max,
        grad_ckpt=grad_ckpt,
        activation_offload=_bool(cfg.get(_M + "enable_activation_offload")) and not megatron,
        remove_padding=rmpad,
        fused_kernels=_bool(cfg.get(_M + "use_fused_kernels")),
        entropy_in_update=entropy_in_update,
        entropy_chunking=chunking,
        entropy_checkpointing=_bool(cfg.get(_A + "entropy_checkpointing")),
        torch_compile=_bool(cfg.get(_A + "use_torch_compile"), True),
        lora_rank=lora_rank,
        lora_targets=cfg.get(_M + "target_modules") or "all-linear",
        freeze_vision=_bool(cfg.get(_A + "freeze_vision_tower")),
        ref_used=use_kl,
        ref_in_actor=ref_in_actor,
        # verl falls back to bf16 for the ref when model_dtype is absent (fsdp_workers.py:324-328)
        ref_dtype_bytes=consts.bytes_of(ref_dtype, 2),
        ref_param_offload=ref_param_off,
        ref_micro=ref_micro,
        ref_dynamic=ref_dynamic,
        ref_max_token_len=ref_max,
        tp=tp,
        pp=pp,
        cp=cp,
        ep=ep,
        etp=etp,
        distributed_optimizer=_bool(cfg.get(mcore + "use_distributed_optimizer"), True),
        optimizer_cpu_fraction=cpu_fraction,
        full_recompute=full_recompute,
        critic_used=critic_used,
        critic_model=critic_model,
        critic_dtype_bytes=consts.bytes_of(cfg.get(_critic_fsdp_key(cfg, "model_dtype")), 4),
        critic_offload_policy=(not megatron and str(cfg.get("critic.strategy") or strategy) == "fsdp2"
                               and _bool(cfg.get(_critic_fsdp_key(cfg, "offload_policy")))),
        critic_param_offload=critic_param_off,
        critic_optimizer_offload=critic_opt_off,
        critic_grad_ckpt=_bool(cfg.get("critic.model.enable_gradient_checkpointing"), True),
        critic_remove_padding=_bool(cfg.get("critic.model.use_remove_padding")) or megatron,
        critic_sp=max(1, ulysses_size(cfg, "critic")),
        critic_micro=critic_micro,
        critic_dynamic=critic_dynamic,
        critic_max_token_len=critic_max,
        critic_fwd_micro=critic_fwd if critic_fwd is not None else critic_micro,
        critic_fwd_max_token_len=critic_fwd_max,
        critic_grad_offload=_bool(cfg.get("critic.megatron.grad_offload")) if megatron else False,
        engine=engine,
        gmu=_flt(cfg.get(_R + "gpu_memory_utilization"), 0.5),
        rollout_tp=max(1, _int(cfg.get(_R + "tensor_model_parallel_size"), 1)),
        rollout_dp=max(1, _int(cfg.get(_R + "data_parallel_size"), 1)),
        max_model_len=max_model_len,
        max_model_len_settable=settable,
        vllm_startup_check=startup_check,
        max_num_seqs=max(1, _int(cfg.get(_R + "max_num_seqs"), 256)),
        max_num_batched_tokens=max(1, _int(cfg.get(_R + "max_num_batched_tokens"), 8192)),
        enforce_eager=_bool(cfg.get(_R + "enforce_eager")),
        cudagraph_max_size=capture_max,
        free_cache_engine=_bool(cfg.get(_R + "free_cache_engine"), True),
        bucket_mb=_int(bucket, 0),
        rollout_weight_bytes=weight_bytes,
        notes=tuple(notes),
        colocated=_bool(cfg.get("actor_rollout_ref.hybrid_engine"), True),
    )


def _temperature_path(version: str, temperature: float, megatron: bool) -> tuple[bool, bool]:
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
