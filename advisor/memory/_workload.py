"""What one training step asks of each GPU: a verl config as plain numbers, one record per role.

A :class:`Workload` composes the records the memory arithmetic reads: where the step runs
(:class:`Topology`), how long its sequences are (:class:`Lengths`), how many it takes (:class:`Batch`), the
actor, reference and critic training sides (:class:`Actor`, :class:`Ref`, :class:`Critic`) and the inference
engine (:class:`Rollout`). :mod:`._read` fills each from the config with one reader per role.

The fix search edits a workload by field path (``actor.micro_per_gpu``, ``rollout.gmu``: the names
knowledge/memory_knobs.yaml uses) through :meth:`Workload.edit`; the per-GPU properties follow an edited
GPU count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from ._models import ModelSpec


@dataclass(frozen=True)
class Topology:
    """GPUs and how training splits over them."""

    n_gpus: int
    gpus_per_node: int
    backend: str  # "fsdp" | "megatron"
    strategy: str  # fsdp | fsdp2 | megatron
    sp: int  # the actor's Ulysses sequence-parallel size (1 under Megatron)
    fsdp_shard: int  # GPUs one FSDP parameter shard group spans
    # Megatron (1 under FSDP)
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int
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


@dataclass(frozen=True)
class Lengths:
    """Sequence lengths: the configured maxima and the typical real length."""

    prompt_len: int
    response_len: int
    typical_tokens: float  # real tokens per sequence (remove-padding packs these)
    typical_source: str
    typical_floor: float  # the shortest typical length the inputs allow (1 when the dataset is unknown)
    missing: str | None  # what to pass when the real typical length is not known

    @property
    def max_seq_tokens(self) -> int:
        return self.prompt_len + self.response_len


@dataclass(frozen=True)
class Batch:
    """Batch sizes in prompts; rollout.n responses each."""

    train_batch: int
    n: int
    mini_batch: int


@dataclass(frozen=True)
class Actor:
    """The actor's training side: its shards, offload, micro batches and the log-prob and update paths."""

    dtype_bytes: int
    param_offload: bool
    optimizer_offload: bool
    grad_offload: bool
    offload_policy: bool  # FSDP2 CPUOffloadPolicy: sharded state and the optimizer step on the CPU
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
    lora_targets: Any  # "all-linear" or a list of module names, as verl reads target_modules
    freeze_vision: bool
    # Megatron
    distributed_optimizer: bool
    optimizer_cpu_fraction: float
    full_recompute: bool
    legacy: bool = False  # verl < 0.8 legacy workers: dp_actor.py computes the log-probs
    inplace_temperature: bool = False  # verl < 0.9.0 divides the logits in place (see _verl_paths)
    temperature_copy: bool = False  # verl >= 0.9.0 divides out of place, copying the logits
    checkpoint_save: bool = False  # trainer.save_freq > 0: each rank's shard is copied to the host on save


@dataclass(frozen=True)
class Ref:
    """The reference policy's log-prob pass."""

    used: bool
    in_actor: bool  # LoRA: the actor with its adapter off is the reference
    dtype_bytes: int
    param_offload: bool
    micro: int | None
    dynamic: bool
    max_token_len: int


@dataclass(frozen=True)
class Critic:
    """The critic (GAE) training side."""

    used: bool
    model: ModelSpec | None
    dtype_bytes: int
    param_offload: bool
    optimizer_offload: bool
    offload_policy: bool  # FSDP2 CPUOffloadPolicy: sharded state and the optimizer step on the CPU
    grad_ckpt: bool
    remove_padding: bool
    sp: int
    micro: int | None
    dynamic: bool
    max_token_len: int
    fwd_micro: int | None
    fwd_max_token_len: int
    grad_offload: bool


@dataclass(frozen=True)
class Rollout:
    """The inference engine: its pool, its limits and how the weight sync wakes it."""

    engine: str
    gmu: float
    tp: int
    dp: int
    max_model_len: int | None  # None: the model's max_position_embeddings
    max_num_seqs: int
    max_num_batched_tokens: int
    enforce_eager: bool
    cudagraph_max_size: int | None
    free_cache_engine: bool
    bucket_mb: int
    weight_bytes: int
    max_model_len_settable: bool = True  # verl 0.7.x overwrites rollout.max_model_len
    vllm_startup_check: bool = True  # vLLM >= 0.9.1 (verl >= 0.6 allows it) checks free memory at start-up
    # what is on the GPU together while weights move to the engine (see _verl_paths.sync_order)
    sync_order: str = "actor_with_weights"
    kv_with_weights: bool = False  # the sync wakes the engine's KV cache with its weights (see _engines)
    engine_weights_stay: bool = False  # the sleeping engine keeps its weights on the GPU (SGLang LoRA adapter)
    host_weight_copy: bool = False  # vLLM's level-1 sleep backs its weights up in host memory (_verl_paths)
    swap_gib: float = 0.0  # vLLM V0's pinned CPU swap space per worker (0 under V1)


ROLES = {"topology": Topology, "lengths": Lengths, "batch": Batch, "actor": Actor, "ref": Ref, "critic": Critic,
         "rollout": Rollout}


@dataclass(frozen=True)
class Workload:
    """One colocated (hybrid-engine) verl step, per GPU: the roles' records and what reading them noted."""

    topology: Topology
    lengths: Lengths
    batch: Batch
    actor: Actor
    ref: Ref
    critic: Critic
    rollout: Rollout
    notes: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()  # keys set to a shell variable the script never evaluates
    # training/rollout sections composed from a config-group option the advisor cannot see (group@pkg=option):
    # "pkg from option 'x'"; their engine, parallelism and offload are not known, so no phase is judged
    unseen: tuple[str, ...] = ()

    @property
    def megatron(self) -> bool:
        return self.topology.backend == "megatron"

    @property
    def max_seq_tokens(self) -> int:
        return self.lengths.max_seq_tokens

    @property
    def responses_per_dp(self) -> int:
        """Responses each data-parallel rank handles per step (B·n / dp)."""
        return max(1, self.batch.train_batch * self.batch.n // self.topology.dp)

    @property
    def mini_per_dp(self) -> int:
        """Responses per mini batch per data-parallel rank (verl's normalised ppo_mini_batch_size)."""
        return max(1, self.batch.mini_batch * self.batch.n // self.topology.dp)

    @property
    def critic_dp(self) -> int:
        """Data-parallel ranks of the critic (FSDP: world / critic ulysses_sp; Megatron: the actor's layout)."""
        if self.megatron:
            return self.topology.dp
        return max(1, self.topology.n_gpus // self.critic.sp)

    @property
    def critic_mini_per_dp(self) -> int:
        """Responses per critic mini batch per data-parallel rank."""
        return max(1, self.batch.mini_batch * self.batch.n // self.critic_dp)

    def value(self, path: str) -> Any:
        """A field or property by path: ``actor.micro_per_gpu``, ``topology.dp``, ``mini_per_dp``."""
        role, _, name = path.rpartition(".")
        return getattr(getattr(self, role) if role else self, name)

    def edit(self, changes: Mapping[str, Any]) -> Workload:
        """A copy with fields changed by path (``{"rollout.gmu": 0.6, "topology.n_gpus": 16}``)."""
        by_role: dict[str, dict[str, Any]] = {}
        for path, new in changes.items():
            role, _, name = path.partition(".")
            by_role.setdefault(role, {})[name] = new
        return replace(self, **{role: replace(getattr(self, role), **edit) for role, edit in by_role.items()})


def _names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)} | {n for n in dir(cls) if isinstance(getattr(cls, n), property)}


# every path value() reads; edit() takes the role fields among them (a property such as topology.dp follows them)
FIELD_PATHS = frozenset({f"{role}.{name}" for role, cls in ROLES.items() for name in _names(cls)}
                        | (_names(Workload) - set(ROLES)))
EDITABLE_PATHS = frozenset(f"{role}.{f.name}" for role, cls in ROLES.items() for f in fields(cls))
