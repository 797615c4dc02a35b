"""Batch-size rules: what verl asserts about the four layers, and the silent traps it does not."""

from __future__ import annotations

import math
from collections.abc import Iterator

from advisor.facts import (
    MAX_SIZE,
    N_KEY,
    SIZE_KEYS,
    UpdateLayer,
    as_int,
    as_size,
    is_megatron,
    ulysses_size,
    uses_critic,
    uses_reference,
    uses_v1_trainer,
    v1_padded_batch,
    world_size,
)
from advisor.findings import Severity
from advisor.plural import counted
from advisor.verl import ACTOR, REF, ROLLOUT, at_least

from ._registry import CheckContext, Issue, check, divisors_near, multiples_near


def _dyn(ctx: CheckContext) -> bool:
    return bool(ctx.get(f"{ACTOR}.use_dynamic_bsz"))


def _train_batch_candidates(ctx: CheckContext, unit: int) -> list[dict[str, int]]:
    """train_batch_size values near the current one that are multiples of `unit` (and of M if possible)."""
    B = as_size(ctx.get("data.train_batch_size")) or unit
    M = as_size(ctx.get(f"{ACTOR}.ppo_mini_batch_size")) or 1
    both = unit * M // math.gcd(unit, M)
    values = multiples_near(both, B) + multiples_near(unit, B)
    return [{"data.train_batch_size": v} for v in dict.fromkeys(values)]


@check("B001", "train-batch-not-divisible", Severity.ERROR,
       "verl/utils/config.py:89-113 (0.6.1, 0.8.0) (validate_config)",
       sources={"<0.4.0": "verl/trainer/ppo/ray_trainer.py:303 (0.3.0.post1) (_validate_config: the GPU count)",
                ">=0.4.0,<0.6.0": "verl/trainer/ppo/ray_trainer.py:363-377 (0.4.1) (_validate_config)",
                ">=0.9.0": "verl/utils/config.py:103-127 (0.9.1) (validate_config)"})
def real_train_batch_divisible(ctx: CheckContext) -> Iterator[Issue]:
    """train_batch_size × rollout.n must be divisible by the minimal batch (GPUs; Megatron: DP × micro)."""
    if not ctx.validated:  # verl/utils/config.py validate_config enforces this; the recipe never calls it
        return
    # verl 0.6 put the rule under `if not use_dynamic_bsz` (0.6.1 verl/utils/config.py:89); before, it held with
    # dynamic batching too (0.3.0.post1 ray_trainer.py:302-304, 0.4.1 ray_trainer.py:363-377, 0.5.0 :391-416)
    if _dyn(ctx) and at_least(ctx.cfg.version, "0.6.0"):
        return
    B, n = as_size(ctx.get("data.train_batch_size")), ctx.plan.n
    gpus = world_size(ctx.cfg)
    if B is None or n is None or gpus <= 0:
        return
    if is_megatron(ctx.cfg):
        u = ctx.plan.micro["actor"].per_gpu_size
        if u is None or ctx.plan.data_parallel <= 0:
            return
        minimal, what = ctx.plan.data_parallel * u, f"Megatron DP ({ctx.plan.data_parallel}) × micro batch ({u})"
    else:
        minimal, what = gpus, f"the GPU count ({gpus})"
    if (B * n) % minimal:
        unit = minimal // math.gcd(minimal, n)
        yield Issue(f"train_batch_size × rollout.n = {B} × {n} = {B * n} is not divisible by {what}; "
                    f"verl asserts this before training", ("data.train_batch_size", N_KEY),
                    _train_batch_candidates(ctx, unit), "every data-parallel rank must get the same number of "
                    "responses")


@check("B002", "mini-batch-above-train-batch", Severity.ERROR,
       "verl/workers/config/actor.py:150-156 (0.6.1); verl/workers/config/critic.py:108-119 (0.6.1)",
       sources={"<0.6.0": "verl/trainer/ppo/ray_trainer.py:437,455 (0.4.1) (_validate_config)",
                ">=0.8.0,<0.9.0": "verl/workers/config/actor.py:221-227 (0.8.0); "
                                  "verl/workers/config/critic.py:116-127 (0.8.0)",
                ">=0.9.0": "verl/workers/config/actor.py:222-228 (0.9.1); verl/workers/config/critic.py:117-128 "
                           "(0.9.1)"},
       verl=">=0.3.0")  # verl 0.2 had no such assert
def mini_batch_not_above_train_batch(ctx: CheckContext) -> Iterator[Issue]:
    """ppo_mini_batch_size (prompts) cannot exceed train_batch_size (prompts)."""
    if not ctx.validated:  # verl/utils/config.py validate_config enforces this; the recipe never calls it
        return
    B = as_size(ctx.get("data.train_batch_size"))
    if B is None:
        return
    roles = [(ACTOR, "actor")] + ([("critic", "critic")] if uses_critic(ctx.cfg) else [])
    for prefix, role in roles:
        if ctx.get(f"{prefix}.use_dynamic_bsz"):
            continue
        M = as_size(ctx.get(f"{prefix}.ppo_mini_batch_size"))
        if M is not None and B < M:
            yield Issue(f"{role} ppo_mini_batch_size ({M}) is larger than train_batch_size ({B}); both count "
                        "prompts, and verl refuses this", (f"{prefix}.ppo_mini_batch_size", "data.train_batch_size"),
                        [{f"{prefix}.ppo_mini_batch_size": d} for d in divisors_near(B, M)][:4],
                        "a mini-batch is a slice of the step's prompts")


def _exactly_one(ctx: CheckContext, role: str) -> Iterator[Issue]:
    setting = ctx.plan.micro[role]
    legacy, per_gpu = setting.global_key, setting.per_gpu_key
    a, b = setting.global_value, setting.per_gpu
    if a is None and b is None:
        suggestion = _micro_suggestion(ctx, role)
        yield Issue(f"{role}: neither '{legacy}' nor '{per_gpu}' is set; verl needs one when dynamic batch size "
                    "is off", (per_gpu,), [{per_gpu: suggestion}],
                    "a per-GPU micro batch only sets memory and speed; it does not change learning")
    elif a is not None and b is not None:
        yield Issue(f"{role}: both '{legacy}' ({a}) and '{per_gpu}' ({b}) are set; verl accepts only the per-GPU "
                    "one (the other is deprecated)", (legacy, per_gpu), [{legacy: None}],
                    "the global micro batch is deprecated")


def _micro_suggestion(ctx: CheckContext, role: str) -> int:
    """A per-GPU micro batch that divides the per-GPU mini-batch (verl's assert), preferring 4..8."""
    layer = ctx.plan.critic if role == "critic" else ctx.plan.actor
    mini = layer.mini_batch_per_gpu if layer is not None else None
    if role in ("rollout log-prob", "ref log-prob"):
        actor_u = ctx.plan.micro["actor"].per_gpu_size
        if actor_u:
            return actor_u * 2  # forward-only passes fit about twice the training micro batch (perf_tuning)
        mini = ctx.plan.actor.mini_batch_per_gpu
    if not mini:
        return 4
    return next(d for d in divisors_near(mini, 4))


@check("B003", "micro-batch-unset-or-both", Severity.ERROR,
       "verl/workers/config/actor.py:129-136 (0.6.1); verl/utils/config.py:117-170 (0.6.1); "
       "verl/workers/config/critic.py:90 (0.6.1) (__post_init__)",
       sources={"<0.6.0": "verl/trainer/ppo/ray_trainer.py:381-425 (0.4.1) (check_mutually_exclusive)",
                ">=0.8.0,<0.9.0": "verl/workers/config/actor.py:200-207 (0.8.0); verl/utils/config.py:117-168 (0.8.0); "
                                  "verl/workers/config/critic.py:102 (0.8.0) (__post_init__)",
                ">=0.9.0": "verl/workers/config/actor.py:200-207 (0.9.1); verl/utils/config.py:131-183 (0.9.1); "
                           "verl/workers/config/critic.py:103 (0.9.1) (__post_init__)"})
def micro_batch_exactly_one(ctx: CheckContext) -> Iterator[Issue]:
    """Each role needs exactly one of the (deprecated) global or per-GPU micro batch sizes."""
    engine_workers = at_least(ctx.cfg.version, "0.8.0")  # the legacy workers are gone
    if not _dyn(ctx):
        yield from _exactly_one(ctx, "actor")
        # the log-prob checks are gated on the actor's use_dynamic_bsz, as in verl/utils/config.py:154-168
        entry = ctx.cfg.entry
        if entry is None or entry.old_log_prob is not False:  # gkd never runs this pass nor validate_config
            yield from _exactly_one(ctx, "rollout log-prob")
        # the legacy Megatron ref worker has its own assert (below); from 0.8 every engine goes through
        # validate_config (0.9.1 verl/utils/config.py:165-171)
        if uses_reference(ctx.cfg) and (not is_megatron(ctx.cfg) or engine_workers):
            yield from _exactly_one(ctx, "ref log-prob")
    ref = ctx.plan.micro["ref log-prob"]
    if is_megatron(ctx.cfg) and not engine_workers and uses_reference(ctx.cfg) \
            and ref.global_value is None and ref.per_gpu is None:
        key = ref.per_gpu_key
        yield Issue("ref log-prob: neither 'log_prob_micro_batch_size' nor its _per_gpu form is set; the Megatron "
                    "ref worker asserts one (megatron_workers.py:366-370)", (key,),
                    [{key: _micro_suggestion(ctx, "ref log-prob")}])
    if uses_critic(ctx.cfg) and not ctx.get("critic.use_dynamic_bsz"):
        yield from _exactly_one(ctx, "critic")


@check("B004", "global-micro-batch-invalid", Severity.ERROR, "verl/workers/config/actor.py:150-170 (0.6.1) "
                                                             "(ActorConfig.validate)",
       sources={"<0.6.0": "verl/trainer/ppo/ray_trainer.py:437-459 (0.4.1) (_validate_config)",
                ">=0.9.0": "0.9.1 verl/workers/config/actor.py:222-242, critic.py:107-116,225-232 (validate)"})
def global_micro_batch_valid(ctx: CheckContext) -> Iterator[Issue]:
    """The deprecated global ppo_micro_batch_size must divide the mini-batch and cover every GPU."""
    if not ctx.validated:  # verl/utils/config.py validate_config enforces this; the recipe never calls it
        return
    roles = [(ACTOR, "actor", _dyn(ctx))]
    if uses_critic(ctx.cfg):
        roles.append(("critic", "critic", bool(ctx.get("critic.use_dynamic_bsz"))))
    gpus = world_size(ctx.cfg)
    for prefix, role, dynamic in roles:
        setting = ctx.plan.micro[role]
        g = setting.global_size
        M = as_size(ctx.get(f"{prefix}.ppo_mini_batch_size"))
        if dynamic or g is None or M is None or g <= 0:
            continue
        sp = ulysses_size(ctx.cfg, prefix)
        per_gpu = max(1, (g * sp) // max(gpus, 1)) if gpus else 1
        fix = [{setting.global_key: None, setting.per_gpu_key: per_gpu}]
        if M % g:
            yield Issue(f"{role}: ppo_mini_batch_size ({M}) is not divisible by the global ppo_micro_batch_size ({g})",
                        (setting.global_key,), fix, "switch to the per-GPU micro batch")
        if g * sp < gpus:
            yield Issue(f"{role}: global ppo_micro_batch_size ({g}) × ulysses_sp ({sp}) is below the GPU count "
                        f"({gpus}): each GPU would get a micro batch of 0", (setting.global_key,), fix,
                        "switch to the per-GPU micro batch")


def _update_roles(ctx: CheckContext) -> list[tuple[str, str, UpdateLayer]]:
    roles: list[tuple[str, str, UpdateLayer]] = [(ACTOR, "actor", ctx.plan.actor)]
    if uses_critic(ctx.cfg) and ctx.plan.critic is not None:
        roles.append(("critic", "critic", ctx.plan.critic))
    return roles


@check("B005", "mini-batch-zero-per-gpu", Severity.ERROR, "verl/workers/fsdp_workers.py:249-253 (0.7.1); "
       "verl/workers/megatron_workers.py:355-356 (0.7.1)",
       sources={">=0.8.0": "verl/workers/engine_workers.py:258-261 (0.8.0), 266-270 (0.9.1) (train_mini_batch)"})
def mini_batch_per_gpu_positive(ctx: CheckContext) -> Iterator[Issue]:
    """ppo_mini_batch_size × n must give every data-parallel rank a share (verl >= 0.8: an equal share)."""
    dp = ctx.plan.data_parallel
    n = ctx.plan.n
    if not dp or n is None:
        return
    # verl 0.8 removed the legacy workers (fsdp_workers.py); the engine worker asserts divisibility
    exact = at_least(ctx.cfg.version, "0.8.0")
    B = as_size(ctx.get("data.train_batch_size"))
    for prefix, role, layer in _update_roles(ctx):
        mini = layer.mini_batch_per_gpu
        M = layer.mini_batch_prompts
        if M is None:
            continue
        if mini == 0:
            need = math.ceil(dp / n)
            yield Issue(f"{role}: ppo_mini_batch_size × n = {M} × {n} = {counted(M * n, 'response')} spread over "
                        f"{counted(dp, 'data-parallel rank')} gives 0 per GPU; verl asserts it is > 0",
                        (f"{prefix}.ppo_mini_batch_size",), [{f"{prefix}.ppo_mini_batch_size": need}],
                        "each rank needs at least one response per mini-batch")
        elif exact and (M * n) % dp:
            unit = dp // math.gcd(dp, n)
            candidates = [m for m in multiples_near(unit, M) if B is None or m <= B] or multiples_near(unit, M)
            yield Issue(f"{role}: ppo_mini_batch_size × n = {M} × {n} = {counted(M * n, 'response')} cannot be split "
                        f"evenly over {counted(dp, 'data-parallel rank')}; verl {ctx.cfg.version}'s engine worker "
                        "asserts they can",
                        (f"{prefix}.ppo_mini_batch_size",),
                        [{f"{prefix}.ppo_mini_batch_size": m} for m in candidates[:3]],
                        "every rank takes an equal share of each mini-batch")


@check("B006", "micro-batch-not-dividing-mini-batch", Severity.ERROR,
       "verl/workers/fsdp_workers.py:262-270 (0.7.1) (actor: divides, then 'should be larger than'), 1350-1358 "
       "(critic)",
       sources={">=0.8.0": "verl/workers/engine/utils.py:90-93 (0.8.0), 124-127 (0.9.1) (prepare_micro_batches)"})
def micro_divides_mini(ctx: CheckContext) -> Iterator[Issue]:
    """The per-GPU micro batch must divide the per-GPU mini-batch (M × n // dp)."""
    if is_megatron(ctx.cfg):
        return
    for _prefix, role, layer in _update_roles(ctx):
        setting = ctx.plan.micro[role]
        u = setting.per_gpu_size
        mini = layer.mini_batch_per_gpu
        if u is None or not mini:
            continue  # verl checks this whenever the per-GPU micro batch is set, dynamic or not
        if mini % u:
            candidates = [d for d in divisors_near(mini, u) if d <= u][:3] or [1]
            # micro > mini: verl <= 0.7 asserts mini // micro > 0 ("should be larger than"); the engine
            # workers' divisibility assert (engine/utils.py) rejects it too, as mini % micro = mini
            relation, verl_says = ("is larger than", "verl asserts the mini-batch holds at least one micro-batch") \
                if u > mini else ("does not divide", "verl asserts it does")
            yield Issue(f"{role}: ppo_micro_batch_size_per_gpu ({u}) {relation} the per-GPU mini-batch "
                        f"({counted(layer.mini_batch_responses, 'response')} / "
                        f"{counted(ctx.plan.data_parallel, 'rank')} = {mini}); {verl_says}",
                        (setting.per_gpu_key,), [{setting.per_gpu_key: d} for d in candidates],
                        "a micro batch only sets memory and speed")


@check("B007", "batch-not-divisible-by-data-parallel", Severity.ERROR,
       "verl/protocol.py:871-881 (0.6.1) (DataProto.chunk) via verl/single_controller/base/decorator.py",
       sources={"<0.6.0": "verl/protocol.py:653-663 (0.4.1) (DataProto.chunk) via "
                          "verl/single_controller/base/decorator.py",
                ">=0.8.0,<0.9.0": "verl/protocol.py:864-874 (0.8.0) (DataProto.chunk)",
                ">=0.9.0": "verl/protocol.py:861-871 (0.9.1) (DataProto.chunk)"})
def batch_divisible_by_dp(ctx: CheckContext) -> Iterator[Issue]:
    """With dynamic batch size, train_batch_size × n must still split evenly over data-parallel ranks."""
    if not _dyn(ctx):
        return  # then B001 already requires divisibility by every GPU
    B, n, dp = as_size(ctx.get("data.train_batch_size")), ctx.plan.n, ctx.plan.data_parallel
    if B is None or n is None or not dp:
        return
    if (B * n) % dp:
        unit = dp // math.gcd(dp, n)
        padding = _v1_padding(ctx)
        if padding is not None:
            yield Issue(f"train_batch_size × n = {counted(B * n, 'response')} cannot be split evenly over "
                        f"{counted(dp, 'data-parallel rank')}; {padding}", ("data.train_batch_size",),
                        _train_batch_candidates(ctx, unit),
                        "no padding: every sample of the step is a real one", severity=Severity.WARNING,
                        source=_V1_PADDING_SOURCE)
            return
        yield Issue(f"train_batch_size × n = {counted(B * n, 'response')} cannot be split evenly over "
                    f"{counted(dp, 'data-parallel rank')}; "
                    "the first step fails in DataProto.chunk", ("data.train_batch_size",),
                    _train_batch_candidates(ctx, unit), "every rank must get the same number of responses")


_ENGINE_ITERATOR_SOURCE = ("verl/utils/tensordict_utils.py:588 (0.8.0, 0.9.1) (make_iterator asserts) via "
                           "verl/workers/engine_workers.py:264 (0.8.0), 273 (0.9.1)")
_V1_PADDING_SOURCE = "0.9.1 verl/trainer/ppo/v1/trainer_base.py:1589-1621 (pads to the batch multiple)"


def _v1_padding(ctx: CheckContext) -> str | None:
    """What the V1 trainer pads each step with, in words, or None when it does not pad (or is not used)."""
    padded = v1_padded_batch(ctx.cfg, ctx.plan.data_parallel or 0)
    if padded is None or padded[0] == padded[1]:
        return None
    responses, total, multiple = padded
    share = (total - responses) / total
    return (f"verl's V1 trainer pads each step from {responses} to {total} samples (a multiple of {multiple}: "
            f"the data-parallel size and ppo_mini_batch_size × n) with no-op samples, so {share:.1%} of each "
            "step's update compute is spent on padding")


@check("B008", "batch-not-divisible-by-agent-workers", Severity.ERROR,
       "verl/experimental/agent_loop/agent_loop.py (AgentLoopManager.generate_sequences: chunk), verl/protocol.py; "
       "the generation round is the dataloader batch × n (0.7.1 verl/trainer/ppo/ray_trainer.py:1307-1321)",
       sources={">=0.8.0,<0.9.0": "verl/experimental/agent_loop/agent_loop.py:1102-1111 (0.8.0) (chunk), "
                                  "verl/protocol.py:864-874 (0.8.0); the generation round is the dataloader batch × n "
                                  "(verl/trainer/ppo/ray_trainer.py:410 (0.8.0))",
                ">=0.9.0": "verl/experimental/agent_loop/agent_loop.py:1232-1247 (0.9.1) (chunk), "
                           "verl/protocol.py:861-871 (0.9.1); the generation round is the dataloader batch × n "
                           "(verl/trainer/ppo/ray_trainer.py:407 (0.9.1))"},
       verl=">=0.5.0")  # the agent loop arrived in 0.5
def batch_divisible_by_agent_workers(ctx: CheckContext) -> Iterator[Issue]:
    """The async rollout splits train_batch_size × n responses evenly over agent-loop workers."""
    mode = ctx.get(f"{ROLLOUT}.mode")
    if not at_least(ctx.cfg.version, "0.7.0") and mode != "async":
        return
    if uses_v1_trainer(ctx.cfg):
        return  # V1 splits a TensorDict, unevenly if need be (0.9.1 verl/trainer/ppo/v1/agent_loop_tq.py:251-256)
    workers = as_size(ctx.get(f"{ROLLOUT}.agent.num_workers"))
    # a generation round is data.gen_batch_size prompts (the dataloader's batch, 0.7.1 ray_trainer.py:348) × n
    G, n = ctx.plan.generation_prompts, ctx.plan.n
    if not workers or G is None or n is None:
        return
    if (G * n) % workers:
        unit = workers // math.gcd(workers, n)
        gen = as_size(ctx.get("data.gen_batch_size"))
        what, key = ("data.gen_batch_size", "data.gen_batch_size") if gen and gen > 0 else \
            ("train_batch_size", "data.train_batch_size")
        fixes = [{key: m} for m in multiples_near(unit, G)] if gen and gen > 0 else _train_batch_candidates(ctx, unit)
        yield Issue(f"{what} × n = {G * n} is not divisible by rollout.agent.num_workers ({workers}); "
                    "generation fails in the first step", (key, f"{ROLLOUT}.agent.num_workers"),
                    [*fixes,
                     *[{f"{ROLLOUT}.agent.num_workers": d} for d in divisors_near(G * n, workers) if d <= workers][:2]],
                    "agent-loop workers each take an equal share")


@check("B011", "train-batch-not-whole-gen-batches", Severity.ERROR,
       "0.9.1 verl/trainer/ppo/v1/trainer_base.py:1480-1489 (_next_train_batch)", verl=">=0.9.0")
def train_batch_in_whole_gen_batches(ctx: CheckContext) -> Iterator[Issue]:
    """The V1 trainer fetches a step's prompts in whole data.gen_batch_size chunks."""
    if not uses_v1_trainer(ctx.cfg) or ctx.get("algorithm.filter_groups.enable"):
        return  # filter_groups fetches one prompt at a time (trainer_base.py:172-183)
    B, G = as_size(ctx.get("data.train_batch_size")), as_size(ctx.get("data.gen_batch_size"))
    if not B or not G or G <= 0 or B % G == 0:
        return
    yield Issue(f"train_batch_size ({B}) is not a multiple of data.gen_batch_size ({G}); verl's V1 trainer "
                "fetches prompts in whole gen_batch_size chunks and raises ValueError at the first step",
                ("data.gen_batch_size", "data.train_batch_size"),
                [{"data.gen_batch_size": d} for d in list(divisors_near(B, G))[:3]],
                "a step is a whole number of generation rounds")


@check("B012", "batch-size-not-positive", Severity.ERROR,
       "0.7.1 verl/workers/fsdp_workers.py:251-254 (asserts the mini-batch > 0), 263 (divides by the micro batch)")
def sizes_positive(ctx: CheckContext) -> Iterator[Issue]:
    """A batch size, sample count, length or GPU count the user set must be a positive integer."""
    user = ctx.cfg.user_keys
    # the fully async trainer asserts train_batch_size == 0 (0.9.1 verl/experimental/fully_async_policy/
    # fully_async_rollouter.py:351): it streams prompts instead of taking batches
    streaming = ctx.cfg.entry is not None and "fully_async" in ctx.cfg.entry.module
    for key in SIZE_KEYS:
        value = as_int(ctx.get(key)) if key in user else None
        if streaming and key == "data.train_batch_size" and value == 0:
            continue
        if value is not None and value <= 0:
            yield Issue(f"{key} is {value}; verl needs a positive count here (0 fails an assert or divides by zero "
                        "when the workers start)", (key,), [], "every batch layer needs at least one sample")
        elif value is not None and value > MAX_SIZE:
            yield Issue(f"{key} is a number of {len(str(value))} digits; no run holds that many", (key,), [],
                        "a count past 10^15 is a typo")


def _budgets(ctx: CheckContext) -> Iterator[tuple[str, bool]]:
    yield f"{ACTOR}.ppo_max_token_len_per_gpu", _dyn(ctx)
    yield f"{ROLLOUT}.log_prob_max_token_len_per_gpu", bool(ctx.get(f"{ROLLOUT}.log_prob_use_dynamic_bsz"))
    if uses_reference(ctx.cfg):
        yield f"{REF}.log_prob_max_token_len_per_gpu", bool(ctx.get(f"{REF}.log_prob_use_dynamic_bsz"))
    if uses_critic(ctx.cfg):
        critic_dyn = bool(ctx.get("critic.use_dynamic_bsz"))
        yield "critic.ppo_max_token_len_per_gpu", critic_dyn
        yield "critic.forward_max_token_len_per_gpu", critic_dyn


@check("B009", "token-budget-below-sequence", Severity.ERROR,
       "verl/utils/seqlen_balancing.py (rearrange_micro_batches)",
       sources={">=0.6.0,<0.7.0": "verl/utils/seqlen_balancing.py:261,295-296 (0.6.1) (rearrange_micro_batches)",
                ">=0.8.0": "verl/utils/seqlen_balancing.py:348,384-385 (0.8.0, 0.9.1) (rearrange_micro_batches)"})
def token_budget_fits_one_sequence(ctx: CheckContext) -> Iterator[Issue]:
    """With dynamic batch size, each token budget × ulysses_sp must hold one prompt+response."""
    P, R = as_size(ctx.get("data.max_prompt_length")), as_size(ctx.get("data.max_response_length"))
    if P is None or R is None:
        return
    sp = ctx.plan.sequence_parallel
    factor = ctx.thresholds.dynamic_token_budget.recommended_factor
    for key, dynamic in _budgets(ctx):
        budget = as_size(ctx.get(key))
        if not dynamic or budget is None:
            continue
        key_sp = ulysses_size(ctx.cfg, "critic") if key.startswith("critic") else sp
        if budget * key_sp < P + R:
            yield Issue(f"'{key}' = {budget} tokens (× ulysses_sp {key_sp}) is below one full sequence "
                        f"(max_prompt_length + max_response_length = {P + R}); verl asserts it fits",
                        (key,), [{key: math.ceil(factor * (P + R) / key_sp)}],
                        f"perf_tuning.rst recommends at least {factor}× (prompt + response)")


@check("B010", "megatron-gpus-not-divisible", Severity.ERROR, "verl/utils/config.py:90-99 (0.6.1, 0.8.0)",
       sources={"<0.6.0": "verl/trainer/ppo/ray_trainer.py:363-377 (0.4.1) (_validate_config)",
                ">=0.9.0": "verl/utils/config.py:104-112 (0.9.1)"})
def megatron_parallel_divides_gpus(ctx: CheckContext) -> Iterator[Issue]:
    """The GPU count must be a multiple of Megatron TP × PP × CP."""
    if not ctx.validated:  # verl/utils/config.py validate_config enforces this; the recipe never calls it
        return
    if not is_megatron(ctx.cfg):
        return
    mp = 1
    for key in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"):
        mp *= as_size(ctx.get(f"{ACTOR}.megatron.{key}")) or 1
    gpus = world_size(ctx.cfg)
    if gpus and gpus % mp:
        yield Issue(f"the GPU count ({gpus}) is not divisible by Megatron TP × PP × CP = {mp}",
                    (f"{ACTOR}.megatron.tensor_model_parallel_size", f"{ACTOR}.megatron.pipeline_model_parallel_size"),
                    [{f"{ACTOR}.megatron.pipeline_model_parallel_size": 1}], "model parallel groups tile the GPUs")


# --- legal but wrong ------------------------------------------------------------------------------------


@check("B101", "short-last-mini-batch", Severity.WARNING,
       "verl/workers/actor/dp_actor.py:548,583 (0.7.1) (not validated)",
       sources={">=0.8.0": _ENGINE_ITERATOR_SOURCE})
def last_mini_batch_short(ctx: CheckContext) -> Iterator[Issue]:
    """train_batch_size not divisible by ppo_mini_batch_size leaves a short, under-weighted last mini-batch."""
    B, M = as_size(ctx.get("data.train_batch_size")), as_size(ctx.get(f"{ACTOR}.ppo_mini_batch_size"))
    if B is None or M is None or M > B or B % M == 0:
        return
    fixes = [*[_with_micro(ctx, d) for d in list(divisors_near(B, M))[:3]],
             *[{"data.train_batch_size": b} for b in multiples_near(M, B)[:2]]]
    keys = ("data.train_batch_size", f"{ACTOR}.ppo_mini_batch_size")
    padding = _v1_padding(ctx)
    if padding is not None:
        yield Issue(f"train_batch_size ({B}) is not a multiple of ppo_mini_batch_size ({M}); {padding}", keys, fixes,
                    "equal mini-batches with no padding samples", source=_V1_PADDING_SOURCE)
        return
    if uses_v1_trainer(ctx.cfg):
        return  # padded to a whole number of mini-batches (trainer_base.py:1589-1621); nothing is short
    if at_least(ctx.cfg.version, "0.8.0"):  # the engine worker, not the legacy actor
        yield Issue(f"train_batch_size ({B}) is not a multiple of ppo_mini_batch_size ({M}): verl {ctx.cfg.version}'s "
                    "engine worker splits each rank's share of the step into mini-batches of ppo_mini_batch_size × n "
                    "/ dp responses and asserts they divide it, so the first update fails", keys, fixes,
                    "equal mini-batches", severity=Severity.ERROR)
        return
    yield Issue(f"train_batch_size ({B}) is not a multiple of ppo_mini_batch_size ({M}): the last of "
                f"{counted(math.ceil(B / M), 'mini-batch')} holds {counted(B % M, 'prompt')} but its loss is scaled as "
                f"if it held {M}",
                keys, fixes, "equal mini-batches weight every optimizer step the same")


def _with_micro(ctx: CheckContext, mini_prompts: int) -> dict[str, int]:
    """A new actor mini-batch, plus the per-GPU micro batch that keeps dividing it (verl asserts that)."""
    change = {f"{ACTOR}.ppo_mini_batch_size": mini_prompts}
    n, dp, micro = ctx.plan.n, ctx.plan.data_parallel, ctx.plan.micro["actor"]
    u = micro.per_gpu_size
    if n and dp and u:
        per_gpu = mini_prompts * n // dp
        if per_gpu and per_gpu % u:
            change[micro.per_gpu_key] = next(d for d in divisors_near(per_gpu, u) if d <= u)
    return change


@check("B102", "mini-batch-floored", Severity.WARNING,
       "verl/workers/fsdp_workers.py:249-250 (0.7.1) (integer division, silent)",
       verl="<0.8.0")  # the legacy workers are gone from 0.8.0; the engine worker asserts instead (B005)
def mini_batch_floored(ctx: CheckContext) -> Iterator[Issue]:
    """ppo_mini_batch_size × n not divisible by the data-parallel size is silently floored."""
    dp, n = ctx.plan.data_parallel, ctx.plan.n
    B = as_size(ctx.get("data.train_batch_size"))
    if not dp or n is None:
        return
    for prefix, role, layer in _update_roles(ctx):
        M = layer.mini_batch_prompts
        if M is None or (M * n) % dp == 0 or (M * n) // dp == 0:
            continue
        effective = (M * n) // dp * dp
        unit = dp // math.gcd(dp, n)
        candidates = [m for m in multiples_near(unit, M) if B is None or (m <= B and B % m == 0)] or \
            multiples_near(unit, M)
        yield Issue(f"{role}: ppo_mini_batch_size × n = {counted(M * n, 'response')} cannot be split over "
                    f"{counted(dp, 'rank')}; verl floors each rank's share, so optimizer steps see "
                    f"{counted(effective, 'response')}, not {M * n}",
                    (f"{prefix}.ppo_mini_batch_size",), [{f"{prefix}.ppo_mini_batch_size": m} for m in candidates[:3]],
                    "a mini-batch that splits evenly keeps every response")


@check("B103", "on-policy-clipfrac-zero", Severity.INFO, "verl/workers/actor/dp_actor.py:550,598 (0.7.1) (v0.6.0+)",
       verl="<0.8.0")  # the engine workers of 0.8.0+ have no on-policy shortcut (0.9.1 workers/utils/losses.py)
def on_policy_shortcut(ctx: CheckContext) -> Iterator[Issue]:
    """One mini-batch and one epoch: pg_clipfrac and ppo_kl are exactly 0 by construction."""
    if not at_least(ctx.cfg.version, "0.6.0") or is_megatron(ctx.cfg):
        return
    layer = ctx.plan.actor
    if layer.mini_batches_per_step == 1 and layer.epochs == 1:
        yield Issue("one mini-batch per step and ppo_epochs = 1: the update is exactly on-policy, so "
                    "actor/pg_clipfrac and actor/ppo_kl will read 0 by construction (not a bug)",
                    ("data.train_batch_size", f"{ACTOR}.ppo_mini_batch_size", f"{ACTOR}.ppo_epochs"))


@check("B104", "token-budget-below-recommended", Severity.INFO, "docs/perf/perf_tuning.rst:150-151")
def token_budget_recommended(ctx: CheckContext) -> Iterator[Issue]:
    """The actor's dynamic token budget should be at least twice one prompt+response."""
    P, R = as_size(ctx.get("data.max_prompt_length")), as_size(ctx.get("data.max_response_length"))
    if not _dyn(ctx) or P is None or R is None:
        return
    factor = ctx.thresholds.dynamic_token_budget.recommended_factor
    key = f"{ACTOR}.ppo_max_token_len_per_gpu"
    budget = as_size(ctx.get(key))
    sp = ctx.plan.sequence_parallel
    if budget is not None and P + R <= budget * sp < factor * (P + R):
        yield Issue(f"'{key}' = {budget} fits fewer than {factor} full sequences of {P + R} tokens: micro-batches "
                    "hold one or two responses and the GPU idles", (key,),
                    [{key: math.ceil(factor * (P + R) / sp)}],
                    f"perf_tuning.rst: at least {factor}× (prompt + response)")
