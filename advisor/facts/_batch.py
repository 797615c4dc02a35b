"""The four batch-size layers of a verl step, worked out the way verl's workers do it.

1. ``data.train_batch_size`` (B) prompts per training step;
2. ``actor_rollout_ref.rollout.n`` (n) responses per prompt: B×n responses per step;
3. ``ppo_mini_batch_size`` (M, prompts, global): one optimizer step per M×n responses;
4. ``ppo_micro_batch_size_per_gpu`` (u, responses) or ``ppo_max_token_len_per_gpu`` (dynamic): what one
   GPU runs in one forward/backward; gradient accumulation joins them into the mini-batch.

Layers 1-3 are algorithm knobs (global, they shape learning); layer 4 only shapes memory and speed.
Arithmetic follows the legacy FSDP worker (verl/workers/fsdp_workers.py:239-273: mini' = M×n // dp,
micro must divide mini') and Megatron (megatron_workers.py:353-372: dp = W / (TP×PP×CP)); see
verl-internals §3.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from advisor import codes
from advisor.load import VerlConfig
from advisor.plural import counted
from advisor.verl import ACTOR, CRITIC, REF, ROLLOUT, at_least

GROUP_ESTIMATORS = frozenset({
    # estimators that compare responses of the same prompt (verl/trainer/ppo/core_algos.py: they group
    # by `index`); with n = 1 each group has one response and there is no baseline
    "grpo", "grpo_vectorized", "grpo_passk", "rloo", "rloo_vectorized", "opo", "gpg",
    "reinforce_plus_plus_baseline", "optimal_token_baseline", "tir_optimal_token_baseline",
})


def as_int(value: Any) -> int | None:
    """An integer config value (a whole float counts); None for anything else, booleans included."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def as_size(value: Any) -> int | None:
    """A batch size, count or length: a positive integer, else None (B012 reports the zero, negative or absurd one)."""
    number = as_int(value)
    return number if number is not None and 0 < number <= MAX_SIZE else None


MAX_SIZE = 10**15  # far past any real batch, length or GPU count; beyond it float arithmetic overflows

N_KEY = f"{ROLLOUT}.n"  # responses per prompt: read here only (tests/advisor_tests/facts/test_one_reading.py)


def rollout_n(cfg: VerlConfig) -> int | None:
    """Responses sampled per prompt (``rollout.n``) as a positive integer; None when unset or not one (B012 says
    which)."""
    return as_size(cfg.get(N_KEY))


@dataclass(frozen=True)
class MicroSetting:
    """One pass's micro batch as the config sets it: the per-GPU key and the deprecated global one, each with its
    value (None: unset, or of a type verl rejects, which the loader reports as L008 and no check reads)."""

    role: str  # actor, critic, rollout log-prob, ref log-prob
    per_gpu_key: str
    global_key: str
    per_gpu: object = None
    global_value: object = None

    @property
    def per_gpu_size(self) -> int | None:
        return as_size(self.per_gpu)

    @property
    def global_size(self) -> int | None:
        return as_size(self.global_value)


# each pass's (section, key stem): the per-GPU key is the stem + "_per_gpu" (verl/workers/config/actor.py,
# critic.py; verl/trainer/config/ppo_trainer.yaml)
MICRO_PASSES = {"actor": (ACTOR, "ppo_micro_batch_size"), "critic": (CRITIC, "ppo_micro_batch_size"),
                "rollout log-prob": (ROLLOUT, "log_prob_micro_batch_size"),
                "ref log-prob": (REF, "log_prob_micro_batch_size")}


def micro_setting(cfg: VerlConfig, role: str, mistyped: frozenset[str] | None = None) -> MicroSetting:
    """The micro-batch keys of one pass (a role of :data:`MICRO_PASSES`) and their values as set (``mistyped``:
    :func:`mistyped_keys` of ``cfg``, when the caller has it)."""
    prefix, stem = MICRO_PASSES[role]
    per_gpu_key, global_key = f"{prefix}.{stem}_per_gpu", f"{prefix}.{stem}"
    if mistyped is None:
        mistyped = mistyped_keys(cfg)
    return MicroSetting(role, per_gpu_key, global_key,
                        None if per_gpu_key in mistyped else cfg.get(per_gpu_key),
                        None if global_key in mistyped else cfg.get(global_key))


def mistyped_keys(cfg: VerlConfig) -> frozenset[str]:
    """Keys whose value is of a type verl rejects (the loader's L008 finding)."""
    return frozenset(f.keys[0] for f in getattr(cfg, "findings", ()) if f.id == codes.WRONG_TYPE.id and f.keys)


# the counts the batch layers and the memory arithmetic are built from (B012 checks each the user set)
SIZE_KEYS = ("data.train_batch_size", N_KEY, f"{ACTOR}.ppo_mini_batch_size",
             f"{ACTOR}.ppo_micro_batch_size_per_gpu", f"{ACTOR}.ppo_micro_batch_size", f"{ACTOR}.ppo_epochs",
             f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu", f"{REF}.log_prob_micro_batch_size_per_gpu",
             "critic.ppo_mini_batch_size", "critic.ppo_micro_batch_size_per_gpu", "critic.ppo_epochs",
             "data.max_prompt_length", "data.max_response_length", "trainer.n_gpus_per_node", "trainer.nnodes")

# Keys the memory arithmetic cannot do without: a value the script leaves as an unevaluated shell variable
# (set only inside a `case`/`if` block the reader does not run) makes the estimate unknown, not a default.
_SIZING_KEYS = (
    "trainer.n_gpus_per_node", "trainer.nnodes", "data.max_prompt_length", "data.max_response_length",
    "data.train_batch_size", f"{ACTOR}.ppo_mini_batch_size", f"{ACTOR}.ppo_micro_batch_size_per_gpu",
    f"{ACTOR}.ppo_max_token_len_per_gpu", f"{ACTOR}.ulysses_sequence_parallel_size",
    f"{ROLLOUT}.tensor_model_parallel_size", f"{ROLLOUT}.gpu_memory_utilization", N_KEY,
    f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu", f"{REF}.log_prob_micro_batch_size_per_gpu",
)


def unresolved_sizes(cfg: VerlConfig) -> tuple[str, ...]:
    """The sizing keys (batch layers, lengths, GPUs, the rollout's TP and memory share) whose value is a shell
    variable the script leaves unevaluated: what they hold is unknown, not a default."""
    return tuple(k for k in _SIZING_KEYS if isinstance(value := cfg.get(k), str) and "$" in value)


@dataclass
class UpdateLayer:
    """How one trained model (actor or critic) consumes a step's responses."""

    role: str
    mini_batch_prompts: int | None
    mini_batch_responses: int | None  # global M×n
    mini_batch_per_gpu: int | None  # mini' = M×n // dp (verl floors silently)
    mini_batches_per_step: int | None
    epochs: int
    optimizer_steps_per_step: int | None
    dynamic: bool
    micro_batch_per_gpu: int | None  # responses per forward/backward (None when dynamic)
    grad_accum_steps: int | None
    max_tokens_per_micro_batch: int | None  # u×(P+R), or the token budget × sp when dynamic


@dataclass
class ForwardLayer:
    """A forward-only pass over the step's responses (old log-prob, ref log-prob, values)."""

    role: str
    dynamic: bool
    micro_batch_per_gpu: int | None
    forward_passes_per_gpu: int | None
    max_tokens_per_micro_batch: int | None


@dataclass
class BatchPlan:
    """All numbers of the four layers for one config, plus a plain-words explanation."""

    strategy: str
    gpus: int
    sequence_parallel: int
    data_parallel: int
    prompts_per_step: int | None
    n: int | None
    responses_per_step: int | None
    responses_per_gpu: float | None
    max_prompt_tokens: int | None
    max_response_tokens: int | None
    rollout_replicas: int | None
    responses_per_replica: float | None
    actor: UpdateLayer
    critic: UpdateLayer | None
    old_log_prob: ForwardLayer
    ref: ForwardLayer | None
    values: ForwardLayer | None
    # prompts per generation round (data.gen_batch_size; the dataloader's batch): DAPO-style oversampling
    # generates gen_batch_size × n responses a round and keeps rounds until the filtered batch is full
    generation_prompts: int | None = None
    words: list[str] = field(default_factory=list)
    # each pass's micro-batch keys as set (MICRO_PASSES' roles); what the checks of those keys read, not shown
    micro: dict[str, MicroSetting] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["micro"]
        return out


def uses_critic(cfg: VerlConfig) -> bool:
    """verl/trainer/ppo/utils.py:86-97 need_critic: critic.enable if set, else adv_estimator == gae; a recipe
    whose trainer fixes ``use_critic = False`` (sppo, prime, spin, gkd) never builds one."""
    if cfg.entry is not None and cfg.entry.critic is False:
        return False
    enable = cfg.get("critic.enable")
    if enable is not None:
        return bool(enable)
    return bool(cfg.get("algorithm.adv_estimator") == "gae")


def clip_bounds(cfg: VerlConfig) -> tuple[float, float] | None:
    """The policy ratio's clip bounds (low, high) as verl reads them: each of clip_ratio_low / clip_ratio_high falls
    back to clip_ratio when unset (verl/trainer/ppo/core_algos.py:1321-1322 @1dda039b; verl < 0.4 has neither key).
    None when a bound is not a number."""
    base = cfg.get("actor_rollout_ref.actor.clip_ratio")
    low, high = (cfg.get(f"actor_rollout_ref.actor.{key}") for key in ("clip_ratio_low", "clip_ratio_high"))
    low, high = (base if v is None else v for v in (low, high))
    if not all(isinstance(v, (int, float)) for v in (low, high)):
        return None
    return float(low), float(high)


def kl_in_reward(cfg: VerlConfig) -> bool:
    """Whether the KL penalty is applied to the reward.

    ``algorithm.use_kl_in_reward`` since verl 0.4; before it (0.2, 0.3) the trainer applied it whenever the
    loss had no KL term (0.3.0.post1 verl/trainer/ppo/ray_trainer.py:881-883, 0.2.0.post2 :916-918).
    """
    if cfg.has("algorithm.use_kl_in_reward"):
        return bool(cfg.get("algorithm.use_kl_in_reward"))
    if at_least(cfg.version, "0.4.0"):
        return False  # a recipe's own config without the key (gkd): verl >= 0.4 reads it with a False default
    return not cfg.get("actor_rollout_ref.actor.use_kl_loss")


def uses_reference(cfg: VerlConfig) -> bool:
    """verl/trainer/ppo/utils.py:72-76 need_reference_policy (verl <= 0.3 always built the reference)."""
    return kl_in_reward(cfg) or bool(cfg.get("actor_rollout_ref.actor.use_kl_loss"))


def uses_v1_trainer(cfg: VerlConfig) -> bool:
    """verl >= 0.9's main_ppo runs the V1 trainer unless ``trainer.use_v1=false`` (0.9.1 main_ppo.py:183-192;
    the default since verl PR #6823); earlier versions have only the legacy RayPPOTrainer, and a recipe's entry
    point runs the recipe's own trainer (a RayPPOTrainer subclass, e.g. recipe/dapo/dapo_ray_trainer.py), as does
    any entry point whose code never reads ``trainer.use_v1`` (verl.experimental's fully_async_policy)."""
    if cfg.entry is not None and cfg.entry.v1_trainer is False:
        return False
    if cfg.launch is not None and not cfg.launch.entry_point.startswith("verl."):
        return False
    if "/" in cfg.config_name:  # a recipe's config ("dapo/dapo_trainer"): its own trainer
        return False
    return at_least(cfg.version, "0.9.0") and bool(cfg.get("trainer.use_v1", False))


def v1_padded_batch(cfg: VerlConfig, dp: int) -> tuple[int, int, int] | None:
    """(responses per step, after padding, the multiple padded to) on the V1 trainer, or None off it.

    Before the update the V1 trainer pads the batch with no-op samples up to a multiple of
    lcm(data-parallel size, actor ppo_mini_batch_size × n, critic ppo_mini_batch_size × n when a critic
    trains): 0.9.1 verl/trainer/ppo/v1/trainer_base.py:1589-1621 (_get_required_batch_multiple, then
    padding_utils.upsample_batch_to_divisible_size).
    """
    if not uses_v1_trainer(cfg) or dp <= 0:
        return None
    B, n = as_size(cfg.get("data.train_batch_size")), rollout_n(cfg)
    if not B or not n or B <= 0 or n <= 0:
        return None
    multiple = dp
    prefixes = [ACTOR, *([CRITIC] if uses_critic(cfg) else [])]
    for prefix in prefixes:
        mini = as_size(cfg.get(f"{prefix}.ppo_mini_batch_size"))
        if mini and mini > 0:
            multiple = math.lcm(multiple, mini * n)
    responses = B * n
    return responses, -(-responses // multiple) * multiple, multiple


def is_megatron(cfg: VerlConfig) -> bool:
    """Whether the Megatron workers train this config: verl picks the workers by ``actor.strategy`` alone
    (verl/trainer/main_ppo.py TaskRunner.add_actor_rollout_worker: ``elif config.actor_rollout_ref.actor.strategy
    == "megatron"``); every ppo_megatron_trainer.yaml sets it (knowledge/verl_defaults/*/)."""
    return bool(cfg.get(f"{ACTOR}.strategy") == "megatron")


def world_size(cfg: VerlConfig) -> int:
    per_node = as_size(cfg.get("trainer.n_gpus_per_node")) or 0
    nodes = as_size(cfg.get("trainer.nnodes")) or 0
    return per_node * nodes


def ulysses_size(cfg: VerlConfig, prefix: str = ACTOR) -> int:
    """A role's Ulysses sequence-parallel size.

    The role's own ``ulysses_sequence_parallel_size`` (deprecated from 0.7.1) wins when above 1, as verl copies it
    into the engine config (0.9.1 verl/workers/config/actor.py:328-329); otherwise the engine config's
    (``actor.fsdp_config``, ``critic.fsdp`` from 0.9, ``critic.model.fsdp_config`` before, VeOmni's
    ``ulysses_parallel_size``), which verl's
    examples set since the engine workers (verl main examples/grpo_trainer/run_qwen3_8b_fsdp.sh).
    """
    own = as_size(cfg.get(f"{prefix}.ulysses_sequence_parallel_size")) or 1
    if own > 1:
        return own
    for key in (f"{prefix}.fsdp_config.ulysses_sequence_parallel_size", f"{prefix}.fsdp.ulysses_sequence_parallel_size",
                f"{prefix}.model.fsdp_config.ulysses_sequence_parallel_size",
                f"{prefix}.veomni.ulysses_parallel_size"):  # VeOmni's name (0.9.1 trainer/config/engine/veomni.yaml)
        if cfg.has(key) and (value := as_size(cfg.get(key))) and value > 1:
            return value
    return 1


def actor_data_parallel(cfg: VerlConfig) -> tuple[int, int]:
    """(dp, sp) of the actor: FSDP dp = W / ulysses_sp; Megatron dp = W / (TP×PP×CP)."""
    gpus = world_size(cfg)
    if is_megatron(cfg):
        mp = 1
        for key in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"):
            mp *= as_size(cfg.get(f"actor_rollout_ref.actor.megatron.{key}")) or 1
        return max(gpus // mp, 0), 1
    sp = ulysses_size(cfg)
    return max(gpus // sp, 0), sp


def _update_layer(cfg: VerlConfig, role: str, prefix: str, dp: int, sp: int, B: int | None, n: int | None,
                  seq_len: int | None) -> UpdateLayer:
    M = as_size(cfg.get(f"{prefix}.ppo_mini_batch_size"))
    E = as_size(cfg.get(f"{prefix}.ppo_epochs")) or 1
    dynamic = bool(cfg.get(f"{prefix}.use_dynamic_bsz"))
    u = as_size(cfg.get(f"{prefix}.ppo_micro_batch_size_per_gpu"))
    global_micro = as_size(cfg.get(f"{prefix}.ppo_micro_batch_size"))
    if u is None and global_micro is not None and dp:
        u = global_micro // dp  # deprecated global micro batch, normalised like fsdp_workers.py:248-252
    mini_responses = M * n if M is not None and n is not None else None
    mini_per_gpu = mini_responses // dp if mini_responses is not None and dp else None
    per_gpu = B * n / dp if B is not None and n is not None and dp else None
    mini_batches = math.ceil(per_gpu / mini_per_gpu) if per_gpu and mini_per_gpu else None
    # a micro batch larger than the mini-batch is no accumulation of 0 micro-batches: verl refuses it (B006)
    grad_accum = mini_per_gpu // u if (mini_per_gpu and u and u <= mini_per_gpu and not dynamic) else None
    if dynamic:
        budget = as_size(cfg.get(f"{prefix}.ppo_max_token_len_per_gpu"))
        max_tokens = budget * sp if budget is not None else None
        micro = None
    else:
        micro = u
        max_tokens = u * seq_len if u is not None and seq_len is not None else None
    return UpdateLayer(role, M, mini_responses, mini_per_gpu, mini_batches, E,
                       E * mini_batches if mini_batches is not None else None, dynamic, micro, grad_accum,
                       max_tokens)


def _forward_layer(cfg: VerlConfig, role: str, micro_key: str, global_key: str, dyn_key: str, budget_key: str,
                   dp: int, sp: int, per_gpu: float | None, seq_len: int | None) -> ForwardLayer:
    dynamic = bool(cfg.get(dyn_key))
    u = as_size(cfg.get(micro_key))
    global_micro = as_size(cfg.get(global_key))
    if u is None and global_micro is not None and dp:
        u = global_micro // dp
    if dynamic:
        budget = as_size(cfg.get(budget_key))
        max_tokens = budget * sp if budget is not None else None
        return ForwardLayer(role, True, None, None, max_tokens)
    passes = math.ceil(per_gpu / u) if per_gpu and u else None
    return ForwardLayer(role, False, u, passes, u * seq_len if u and seq_len else None)


def generation_prompts(cfg: VerlConfig) -> int | None:
    """Prompts fetched per generation round: ``data.gen_batch_size`` when set, else train_batch_size.

    The legacy trainer's dataloader batch (0.7.1 verl/trainer/ppo/ray_trainer.py:348, 0.8.0 :410); the V1
    trainer's fetch granularity, forced to 1 under filter_groups (0.9.1 verl/trainer/ppo/v1/trainer_base.py:
    172-183, 1480-1489).
    """
    gen = as_size(cfg.get("data.gen_batch_size"))
    return gen if gen and gen > 0 else as_size(cfg.get("data.train_batch_size"))


def batch_plan(cfg: VerlConfig) -> BatchPlan:
    """Work out every batch layer of one training step for this config."""
    gpus = world_size(cfg)
    dp, sp = actor_data_parallel(cfg)
    B = as_size(cfg.get("data.train_batch_size"))
    n = rollout_n(cfg)
    P = as_size(cfg.get("data.max_prompt_length"))
    R = as_size(cfg.get("data.max_response_length"))
    seq_len = P + R if P is not None and R is not None else None
    responses = B * n if B is not None and n is not None else None
    per_gpu = responses / dp if responses is not None and dp else None

    actor = _update_layer(cfg, "actor", ACTOR, dp, sp, B, n, seq_len)
    critic = None
    values = None
    if uses_critic(cfg):
        critic_sp = ulysses_size(cfg, CRITIC)
        critic_dp = dp if is_megatron(cfg) else max(gpus // critic_sp, 0)
        critic = _update_layer(cfg, "critic", CRITIC, critic_dp, critic_sp, B, n, seq_len)
        values = _forward_layer(cfg, "values", "critic.forward_micro_batch_size_per_gpu",
                                "critic.forward_micro_batch_size", "critic.use_dynamic_bsz",
                                "critic.forward_max_token_len_per_gpu", critic_dp, critic_sp,
                                responses / critic_dp if responses and critic_dp else None, seq_len)
    old = _forward_layer(cfg, "old_log_prob", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                         "actor_rollout_ref.rollout.log_prob_micro_batch_size",
                         "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz",
                         "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu", dp, sp, per_gpu, seq_len)
    ref = None
    if uses_reference(cfg):
        ref = _forward_layer(cfg, "ref", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
                             "actor_rollout_ref.ref.log_prob_micro_batch_size",
                             "actor_rollout_ref.ref.log_prob_use_dynamic_bsz",
                             "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", dp, sp, per_gpu, seq_len)
    rollout_mp = 1
    for key in ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size"):
        rollout_mp *= as_size(cfg.get(f"actor_rollout_ref.rollout.{key}")) or 1
    replicas = gpus // rollout_mp if rollout_mp else None
    mistyped = mistyped_keys(cfg)
    plan = BatchPlan(
        strategy=str(cfg.get("actor_rollout_ref.actor.strategy")),
        gpus=gpus, sequence_parallel=sp, data_parallel=dp,
        prompts_per_step=B, n=n, responses_per_step=responses, responses_per_gpu=per_gpu,
        max_prompt_tokens=P, max_response_tokens=R,
        rollout_replicas=replicas or None,
        responses_per_replica=responses / replicas if responses and replicas else None,
        actor=actor, critic=critic, old_log_prob=old, ref=ref, values=values,
        generation_prompts=generation_prompts(cfg),
        micro={role: micro_setting(cfg, role, mistyped) for role in MICRO_PASSES},
    )
    plan.words = explain(plan)
    return plan


def _fmt(x: float | int | None) -> str:
    if x is None:
        return "?"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:,.1f}"
    return f"{int(x):,}"


def _update_words(layer: UpdateLayer, dp: int, strategy: str) -> str:
    steps = layer.optimizer_steps_per_step
    epochs = (f" ({counted(layer.epochs, 'epoch')} × {counted(layer.mini_batches_per_step, 'mini-batch')})"
              if layer.epochs > 1 else "")
    head = (f"The {layer.role} makes {counted(steps, 'optimizer step')} per training step{epochs}, each on "
            f"{counted(layer.mini_batch_responses, 'response')} ({counted(layer.mini_batch_prompts, 'prompt')} × n)")
    gpus = ("the one data-parallel GPU" if dp == 1 else f"each of the {dp} data-parallel GPUs" if dp > 1
            else "each data-parallel GPU (how many is unknown)")
    mini, micro = layer.mini_batch_per_gpu, layer.micro_batch_per_gpu
    refused = "" if strategy == "megatron" else "; verl refuses it"  # B006 (the legacy Megatron actor splits)
    if layer.dynamic:
        tail = (f"; {gpus} takes {_fmt(mini)} of them and packs "
                f"them into micro-batches of at most {counted(layer.max_tokens_per_micro_batch, 'token')}")
    elif micro and mini is not None and micro > mini:
        tail = (f"; {gpus} gets {_fmt(mini)} of them, fewer than its micro batch of "
                f"{counted(micro, 'response')} (a micro batch larger than the mini-batch{refused})")
    elif micro and mini and mini % micro:
        tail = (f"; {gpus} gets {_fmt(mini)} of them, which its micro batch of "
                f"{counted(micro, 'response')} does not divide (no whole number of micro-batches{refused})")
    else:
        tail = (f"; {gpus} accumulates {counted(layer.grad_accum_steps, 'micro-batch')} of "
                f"{counted(layer.micro_batch_per_gpu, 'response')} "
                f"(≤ {counted(layer.max_tokens_per_micro_batch, 'token')} each) into its "
                f"{_fmt(layer.mini_batch_per_gpu)}")
    return head + tail + "."


def explain(plan: BatchPlan) -> list[str]:
    """The batch layers in words a newcomer understands."""
    words = [
        f"Each training step samples {counted(plan.prompts_per_step, 'prompt')} × n={_fmt(plan.n)} = "
        f"{counted(plan.responses_per_step, 'response')} (at most {_fmt(plan.max_prompt_tokens)} prompt + "
        f"{_fmt(plan.max_response_tokens)} response tokens each) on {counted(plan.gpus or None, 'GPU')}.",
    ]
    if plan.generation_prompts and plan.prompts_per_step and plan.generation_prompts != plan.prompts_per_step:
        words.append(f"Prompts are fetched and generated {_fmt(plan.generation_prompts)} at a time "
                     f"(data.gen_batch_size): {_fmt(plan.generation_prompts)} × n = "
                     f"{counted(plan.generation_prompts * (plan.n or 0), 'response')} a generation round.")
    if plan.rollout_replicas:
        words.append(f"Generation runs on {counted(plan.rollout_replicas, 'inference replica')}, about "
                     f"{counted(plan.responses_per_replica, 'response')} each.")
    words.append(_update_words(plan.actor, plan.data_parallel, plan.strategy))
    if plan.critic is not None:
        words.append(_update_words(plan.critic, plan.data_parallel, plan.strategy))
    for layer in (plan.old_log_prob, plan.ref, plan.values):
        if layer is None:
            continue
        label = {"old_log_prob": "Recomputing old log-probs", "ref": "The reference model's log-probs",
                 "values": "The critic's value pass"}[layer.role]
        if layer.dynamic:
            words.append(f"{label}: token-packed micro-batches of at most "
                         f"{counted(layer.max_tokens_per_micro_batch, 'token')} per GPU.")
        else:
            words.append(f"{label}: {counted(layer.forward_passes_per_gpu, 'forward pass')} per GPU of "
                         f"{counted(layer.micro_batch_per_gpu, 'response')}.")
    return words
