"""Algorithm rules: estimator, critic, KL placement, losses, optimizer and sequence lengths."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from advisor.facts import (
    GROUP_ESTIMATORS,
    N_KEY,
    as_int,
    clip_bounds,
    is_megatron,
    kl_in_reward,
    uses_critic,
    uses_reference,
)
from advisor.findings import Severity
from advisor.spelling import closest as nearest
from advisor.verl import ACTOR, ROLLOUT, at_least, in_range, render_value, unread_key

from ._registry import CheckContext, Issue, check
from .values import unknown_value

SCHEDULERS = ("constant", "cosine")
KL_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")  # core_algos.py kl_penalty_forward; 'full' raises


def _optim_roles(ctx: CheckContext) -> list[str]:
    return [ACTOR] + (["critic"] if uses_critic(ctx.cfg) else [])


@check("A001", "invalid-loss-agg-mode", Severity.ERROR, "verl/workers/config/actor.py:141-148 (0.6.1); "
                                                        "knowledge/verl_enums.yaml",
       sources={"<0.6.0": "verl/trainer/ppo/ray_trainer.py:443-448 (0.4.1) (_validate_config); "
                          "knowledge/verl_enums.yaml",
                ">=0.7.0,<0.8.0": "verl/workers/config/actor.py:203-210 (0.7.1); knowledge/verl_enums.yaml",
                ">=0.8.0": "verl/workers/config/actor.py:212-219 (0.8.0), 212-220 (0.9.1); knowledge/verl_enums.yaml"},
       verl=">=0.4.0")  # verl 0.2/0.3 had token-mean only (no loss_agg_mode key)
def loss_agg_mode_valid(ctx: CheckContext) -> Iterator[Issue]:
    """actor.loss_agg_mode must be one of verl's aggregation modes (the version's list)."""
    for issue in unknown_value(ctx, "loss_agg_mode", "loss_agg_mode", None):
        yield replace(issue, severity=Severity.ERROR, fixes=issue.fixes or [{f"{ACTOR}.loss_agg_mode": "token-mean"}])


@check("A002", "invalid-lr-scheduler", Severity.ERROR, "verl/workers/config/optimizer.py:83-89 (0.6.1)",
       sources={"<0.6.0": "verl/workers/fsdp_workers.py:376-391 (0.4.1) (NotImplementedError for another warmup_style)",
                ">=0.7.0,<0.8.0": "verl/workers/config/optimizer.py:116-122 (0.7.1)",
                ">=0.8.0": "verl/workers/config/optimizer.py:117-123 (0.8.0, 0.9.1) (FSDPOptimizerConfig)"},
       verl=">=0.4.0")  # verl 0.2/0.3 built a constant schedule whatever warmup_style said
def lr_scheduler_valid(ctx: CheckContext) -> Iterator[Issue]:
    """optim.lr_scheduler_type (and the deprecated warmup_style) must be constant or cosine."""
    if is_megatron(ctx.cfg):
        return  # Megatron's optimizer uses lr_decay_style
    for role in _optim_roles(ctx):
        for key in (f"{role}.optim.lr_scheduler_type", f"{role}.optim.warmup_style"):
            value = ctx.get(key)
            if value is not None and value not in SCHEDULERS:
                yield Issue(f"'{key}' is '{value}'; verl supports only constant and cosine", (key,),
                            [{key: "cosine" if "cos" in str(value) else "constant"}])


@check("A003", "dual-clip-bound", Severity.ERROR, "verl/trainer/ppo/core_algos.py:851-854 (0.6.1)",
       sources={"<0.6.0": "verl/trainer/ppo/core_algos.py:599 (0.4.1)",
                ">=0.7.0,<0.8.0": "verl/trainer/ppo/core_algos.py:1240-1243 (0.7.1)",
                ">=0.8.0,<0.9.0": "verl/trainer/ppo/core_algos.py:1242-1245 (0.8.0)",
                ">=0.9.0": "verl/trainer/ppo/core_algos.py:1249-1252 (0.9.1)"},
       verl=">=0.4.0")  # dual-clip PPO (clip_ratio_c) arrived in 0.4
def dual_clip_above_one(ctx: CheckContext) -> Iterator[Issue]:
    """clip_ratio_c (dual-clip lower bound) must be greater than 1."""
    c = ctx.get(f"{ACTOR}.clip_ratio_c")
    if isinstance(c, (int, float)) and c <= 1.0:
        yield Issue(f"clip_ratio_c = {c} must be > 1.0; verl asserts it in the first policy-loss call",
                    (f"{ACTOR}.clip_ratio_c",), [{f"{ACTOR}.clip_ratio_c": 3.0}], "3.0 is verl's default")


@check("A004", "kl-controller-invalid", Severity.ERROR,
       "verl/trainer/ppo/core_algos.py:190-209 (0.6.1) (get_kl_controller); verl/trainer/ppo/ray_trainer.py:342 "
       "(0.6.1)",
       sources={"<0.6.0": "verl/trainer/ppo/core_algos.py:143 (0.4.1); verl/trainer/ppo/ray_trainer.py:343 (0.4.1)",
                ">=0.7.0,<0.8.0": "verl/trainer/ppo/core_algos.py:193-212 (0.7.1); "
                                  "verl/trainer/ppo/ray_trainer.py:303 (0.7.1)",
                ">=0.8.0,<0.9.0": "verl/trainer/ppo/core_algos.py:193-212 (0.8.0); "
                                  "verl/trainer/ppo/ray_trainer.py:365 (0.8.0)",
                ">=0.9.0": "verl/trainer/ppo/core_algos.py:193-212 (0.9.1); verl/trainer/ppo/ray_trainer.py:365 "
                           "(0.9.1), "
                           "verl/trainer/ppo/v1/trainer_base.py:127 (0.9.1)"})
def kl_controller_valid(ctx: CheckContext) -> Iterator[Issue]:
    """In-reward KL needs kl_ctrl.type fixed or adaptive, and adaptive needs horizon > 0."""
    if not kl_in_reward(ctx.cfg):
        return
    kind = ctx.get("algorithm.kl_ctrl.type")
    if kind not in ("fixed", "adaptive"):
        yield Issue(f"algorithm.kl_ctrl.type '{kind}' is not fixed or adaptive", ("algorithm.kl_ctrl.type",),
                    [{"algorithm.kl_ctrl.type": "fixed"}])
    elif kind == "adaptive" and (as_int(ctx.get("algorithm.kl_ctrl.horizon")) or 0) <= 0:
        yield Issue("adaptive KL control needs algorithm.kl_ctrl.horizon > 0", ("algorithm.kl_ctrl.horizon",),
                    [{"algorithm.kl_ctrl.horizon": 10000}], "10000 is verl's default")


@check("A005", "invalid-kl-estimator", Severity.ERROR, "verl/trainer/ppo/core_algos.py:1412-1470 (0.6.1) (kl_penalty)",
       sources={">=0.8.0,<0.9.0": "verl/trainer/ppo/core_algos.py:2126-2189 (0.8.0) (kl_penalty, kl_penalty_forward)",
                ">=0.9.0": "verl/trainer/ppo/core_algos.py:2188-2251 (0.9.1) (kl_penalty, kl_penalty_forward)"})
def kl_estimator_valid(ctx: CheckContext) -> Iterator[Issue]:
    """kl_loss_type / kl_penalty must name an implemented KL estimator."""
    pairs = []
    if ctx.get(f"{ACTOR}.use_kl_loss"):
        pairs.append(f"{ACTOR}.kl_loss_type")
    if kl_in_reward(ctx.cfg):
        pairs.append("algorithm.kl_penalty")
    for key in pairs:
        value = str(ctx.get(key))
        if value.rstrip("+") not in KL_TYPES:
            yield Issue(f"'{key}' = '{value}' is not an implemented KL estimator ({', '.join(KL_TYPES)}, "
                        "optionally with '+')", (key,), [{key: "low_var_kl"}])


# The strategies verl's engine configs assert on, per version (verl/workers/config/engine.py: the
# ``assert self.strategy in [...]`` of each engine dataclass's __post_init__).
_STRATEGIES = (
    ("<0.4.0", ("fsdp", "megatron"), "verl/trainer/main_ppo.py:95-108 (0.3.0.post1) (else: NotImplementedError)"),
    (">=0.4.0,<0.6.0", ("fsdp", "fsdp2", "megatron"), "verl/trainer/main_ppo.py:127-165 (0.5.0) (else: "
                                                      "NotImplementedError)"),
    (">=0.6.0,<0.7.0", ("fsdp", "fsdp2", "megatron"), "verl/workers/config/engine.py:79,125 (0.6.1)"),
    (">=0.7.0,<0.7.1", ("fsdp", "fsdp2", "megatron", "veomni"), "0.7.0 verl/workers/config/engine.py:131,182,267"),
    (">=0.7.1,<0.8.0", ("fsdp", "fsdp2", "megatron", "veomni", "torchtitan"),
     "0.7.1 verl/workers/config/engine.py:176,250,336,396"),
    (">=0.8.0,<0.9.1", ("fsdp", "fsdp2", "megatron", "veomni", "torchtitan", "automodel", "mindspeed_megatron",
                        "mindspeed_fsdp"), "0.9.0 verl/workers/config/engine.py:220,304,447,536,654,678"),
    (">=0.9.1", ("fsdp", "fsdp2", "fsdp_turbo", "megatron", "veomni", "torchtitan", "automodel"),
     "0.9.1 verl/workers/config/engine.py:217,306,462,559,677"),
)


def _strategies(version: str) -> tuple[tuple[str, ...], str]:
    return next((names, src) for spec, names, src in _STRATEGIES if in_range(version, spec))


@check("A006", "unknown-strategy", Severity.ERROR, "verl/workers/config/engine.py:79,125 (0.6.1)",
       sources={spec: src for spec, _, src in _STRATEGIES})
def strategy_known(ctx: CheckContext) -> Iterator[Issue]:
    """actor.strategy must be one of the engines the verl version has."""
    strategy = ctx.get(f"{ACTOR}.strategy")
    names, _ = _strategies(ctx.cfg.version)
    if strategy not in names:
        close = nearest(str(strategy), names, limit=1)
        yield Issue(f"actor strategy '{strategy}' is not one verl {ctx.cfg.version} has ({', '.join(names)})"
                    + (f"; did you mean '{close[0]}'?" if close else ""), (f"{ACTOR}.strategy",),
                    [{f"{ACTOR}.strategy": close[0] if close else "fsdp"}])


@check("A007", "ulysses-needs-remove-padding", Severity.ERROR,
       "verl/workers/config/actor.py:244-249 (0.6.1) (FSDPActorConfig.validate: the model's flag); "
       "verl/workers/config/critic.py:204-206 (0.6.1)",
       sources={"<0.6.0": "verl/trainer/ppo/ray_trainer.py:461-467 (0.4.1) (_validate_config)",
                ">=0.7.0,<0.8.0": "verl/workers/config/actor.py:320 (0.7.1); "
                                  "verl/workers/config/critic.py:210 (0.7.1)",
                ">=0.8.0,<0.9.0": "verl/workers/config/actor.py:332 (0.8.0) (FSDPActorConfig.validate); "
                                  "verl/workers/engine/fsdp/transformer_impl.py:127-131 (0.8.0) (every role)",
                ">=0.9.0": "verl/workers/config/actor.py:331-341 (0.9.1) (FSDPActorConfig.validate); "
                           "verl/workers/engine/fsdp/transformer_impl.py:146-152 (0.9.1) (every role's FSDP engine)"})
def ulysses_needs_rmpad(ctx: CheckContext) -> Iterator[Issue]:
    """Ulysses sequence parallelism (> 1) requires use_remove_padding."""
    if is_megatron(ctx.cfg):
        return
    # verl asserts on the model's flag in every version: v0.4.1 in ray_trainer.py, from 0.6 in
    # FSDPActorConfig.validate(model_config) — actor.use_remove_padding only defaults to it
    actor_rmpad = "actor_rollout_ref.model.use_remove_padding"
    roles = [(f"{ACTOR}.ulysses_sequence_parallel_size", actor_rmpad, "actor_rollout_ref.model.use_remove_padding")]
    if uses_critic(ctx.cfg):
        roles.append(("critic.ulysses_sequence_parallel_size", "critic.model.use_remove_padding",
                      "critic.model.use_remove_padding"))
    for sp_key, rmpad_key, fix_key in roles:
        sp = as_int(ctx.get(sp_key)) or 1
        if sp > 1 and not ctx.get(rmpad_key):
            # from 0.8 the critic's config no longer checks it: its FSDP engine does, at worker start-up
            source = _CRITIC_RMPAD_ENGINE if sp_key.startswith("critic.") and at_least(ctx.cfg.version, "0.8.0") \
                else None
            yield Issue(f"'{sp_key}' = {sp} needs remove-padding, but '{rmpad_key}' is false", (sp_key, fix_key),
                        [{fix_key: True}], source=source)


_CRITIC_RMPAD_ENGINE = ("verl/workers/engine/fsdp/transformer_impl.py:127-131 (0.8.0), 146-152 (0.9.1) (the critic's "
                        "FSDP engine at start-up; its config dataclass no longer checks)")


@check("A008", "heads-not-divisible-by-sp", Severity.ERROR, "verl/models/transformers/monkey_patch.py:273-278 (0.6.1)",
       sources={"<0.6.0": "verl/models/transformers/monkey_patch.py:208-211 (0.4.1)",
                ">=0.7.0,<0.8.0": "verl/models/transformers/monkey_patch.py:333-338 (0.7.1)",
                ">=0.8.0,<0.9.0": "verl/models/transformers/monkey_patch.py:338-343 (0.8.0)",
                ">=0.9.0": "verl/models/transformers/monkey_patch.py:343-348 (0.9.1)"})
def heads_divisible_by_sp(ctx: CheckContext) -> Iterator[Issue]:
    """Ulysses SP needs attention heads divisible by sp (model known only)."""
    heads = as_int(getattr(ctx.model, "num_attention_heads", None))
    kv = as_int(getattr(ctx.model, "num_key_value_heads", None)) or heads
    sp = ctx.plan.sequence_parallel
    if not heads or sp <= 1:
        return
    if heads % sp or not (kv and (kv % sp == 0 or sp % kv == 0)):
        key = f"{ACTOR}.ulysses_sequence_parallel_size"
        good = [s for s in (8, 4, 2, 1) if heads % s == 0 and kv and (kv % s == 0 or s % kv == 0)
                and s < sp and ctx.plan.gpus % s == 0]
        yield Issue(f"ulysses_sequence_parallel_size {sp} does not split the model's {heads} attention heads / {kv} "
                    "KV heads evenly", (key,), [{key: s} for s in good[:2]])


@check("A009", "val-sampling-needs-temperature", Severity.ERROR, "verl/utils/config.py:192-195 (0.6.1)",
       sources={"<0.6.0": "verl/trainer/ppo/ray_trainer.py:473-474 (0.4.1) (_validate_config)",
                ">=0.7.0,<0.9.0": "verl/utils/config.py:185-188 (0.7.1, 0.8.0)",
                ">=0.9.0": "verl/utils/config.py:200-203 (0.9.1)"},
       verl=">=0.3.0")  # verl 0.2 had no val_kwargs
def val_sampling_needs_temperature(ctx: CheckContext) -> Iterator[Issue]:
    """val_kwargs.do_sample needs the *training* rollout temperature > 0 (verl checks that one)."""
    if ctx.mistyped(f"{ROLLOUT}.temperature"):
        return  # '$T' of an undefined variable: known only when the script runs (L008 says so)
    if ctx.get(f"{ROLLOUT}.val_kwargs.do_sample") and (ctx.get(f"{ROLLOUT}.temperature") or 0) <= 0:
        yield Issue("val_kwargs.do_sample is true while rollout.temperature is 0; verl asserts the training "
                    "temperature > 0 in this case", (f"{ROLLOUT}.temperature",), [{f"{ROLLOUT}.temperature": 1.0}])


@check("A010", "unknown-adv-estimator", Severity.WARNING, "verl/trainer/ppo/core_algos.py (AdvantageEstimator, "
       "register_adv_est); knowledge/verl_enums.yaml",
       sources={"<0.4.0": "verl/trainer/ppo/ray_trainer.py (compute_advantage: NotImplementedError for another "
                          "name); knowledge/verl_enums.yaml",
                ">=0.6.0": "verl/trainer/ppo/core_algos.py:88 (0.6.1, 0.8.0, 0.9.1) (AdvantageEstimator, "
                           "register_adv_est); knowledge/verl_enums.yaml"})
def estimator_known(ctx: CheckContext) -> Iterator[Issue]:
    """algorithm.adv_estimator should be one verl registers (custom ones need register_adv_est)."""
    entry = ctx.cfg.entry
    if entry is not None and entry.recipe is not None and "algorithm.adv_estimator" not in ctx.cfg.user_keys:
        return  # the recipe config's own estimator (sppo: null), which the recipe's trainer computes itself
    yield from unknown_value(ctx, "adv_estimator", "adv_estimator", "register_adv_est")


@check("A011", "warmup-steps-null", Severity.ERROR, "verl/workers/fsdp_workers.py:546 (0.6.1) (int(None))",
       sources={"<0.6.0": "verl/workers/fsdp_workers.py:375 (0.4.1) (int(None))",
                ">=0.7.0,<0.8.0": "verl/workers/fsdp_workers.py:653 (0.7.1) (int(None))",
                ">=0.8.0,<0.9.0": "verl/workers/engine/fsdp/transformer_impl.py:464,469 (0.8.0) (None <= 0 raises)",
                ">=0.9.0": "verl/workers/engine/fsdp/transformer_impl.py:509,514 (0.9.1) (None <= 0 raises)"},
       verl=">=0.3.0")  # verl 0.2 had only lr_warmup_steps_ratio
def warmup_steps_not_null(ctx: CheckContext) -> Iterator[Issue]:
    """optim.lr_warmup_steps: null crashes the legacy FSDP worker; use -1 to defer to the ratio."""
    if is_megatron(ctx.cfg):
        return
    for role in _optim_roles(ctx):
        key = f"{role}.optim.lr_warmup_steps"
        if ctx.cfg.has(key) and ctx.get(key, "absent") is None:
            yield Issue(f"'{key}' is null; the FSDP worker calls int() on it and crashes (use -1 to take the warmup "
                        "from lr_warmup_steps_ratio)", (key,), [{key: -1}])


@check("A012", "megatron-ulysses", Severity.ERROR, "verl/workers/actor/megatron_actor.py:159 (0.6.1)",
       sources={">=0.7.0": "verl/workers/actor/megatron_actor.py:193 (0.7.1)"},
       verl="<0.8.0")  # the Megatron engine of 0.8.0+ has no such assert (verl/workers/actor/ was removed)
def megatron_without_ulysses(ctx: CheckContext) -> Iterator[Issue]:
    """The Megatron actor supports no Ulysses SP (use Megatron context parallelism)."""
    if is_megatron(ctx.cfg) and (as_int(ctx.get(f"{ACTOR}.ulysses_sequence_parallel_size")) or 1) > 1:
        key = f"{ACTOR}.ulysses_sequence_parallel_size"
        yield Issue("Megatron actors require ulysses_sequence_parallel_size = 1 (use megatron.context_parallel_size)",
                    (key,), [{key: 1}])


def _overlong(ctx: CheckContext) -> tuple[str, int] | None:
    # DAPO recipe (reward_model.overlong_buffer), verl's DAPO reward manager before and after the reward
    # config moved under `reward` (0.8.0 verl/experimental/reward_loop/reward_manager/dapo.py:33)
    for prefix in ("reward_model.overlong_buffer", "reward_model.reward_kwargs.overlong_buffer_cfg",
                   "reward.reward_kwargs.overlong_buffer_cfg"):
        if ctx.get(f"{prefix}.enable"):
            length = as_int(ctx.get(f"{prefix}.len"))
            if length is not None:
                return prefix, length
    return None


@check("A013", "overlong-buffer-too-long", Severity.ERROR, "verl/workers/reward_manager/dapo.py:49-51 (0.7.1)",
       sources={">=0.8.0": "verl/experimental/reward_loop/reward_manager/dapo.py:33-45 (0.8.0, 0.9.1)"},
       verl=">=0.4.0")  # the DAPO reward manager arrived in 0.4
def overlong_buffer_fits(ctx: CheckContext) -> Iterator[Issue]:
    """The DAPO overlong buffer cannot be longer than max_response_length."""
    found = _overlong(ctx)
    R = as_int(ctx.get("data.max_response_length"))
    if found and R is not None and found[1] > R:
        prefix, length = found
        yield Issue(f"overlong buffer length ({length}) exceeds max_response_length ({R}); the DAPO reward manager "
                    "asserts max_resp_len >= overlong_buffer.len", (f"{prefix}.len", "data.max_response_length"),
                    [{f"{prefix}.len": R // 4}])


@check("A015", "router-replay-r2-in-bypass-mode", Severity.ERROR, "0.9.1 verl/utils/config.py:74-85,166 "
       "(_validate_router_replay_config)", verl=">=0.9.1")
def router_replay_r2_needs_recompute(ctx: CheckContext) -> Iterator[Issue]:
    """Router replay R2 records routes while old log-probs are recomputed, which bypass mode skips."""
    bypass = "algorithm.rollout_correction.bypass_mode"
    engine = ctx.get(f"{ACTOR}.strategy")
    if engine in ("megatron", "veomni"):  # the engine configs with a router_replay block
        key = f"{ACTOR}.{engine}.router_replay.mode"
        if ctx.get(key) == "R2" and ctx.get(bypass):
            yield Issue("router_replay.mode='R2' records MoE routes while the actor recomputes old log-probs, but "
                        "algorithm.rollout_correction.bypass_mode=true skips that forward; verl's validate_config "
                        "raises", (key, bypass), [{bypass: False}, {key: "R3"}],
                        "R2 needs the recompute pass; R3 replays the rollout's routes instead")


# --- legal but wrong ------------------------------------------------------------------------------------


def _group_n_candidates(ctx: CheckContext) -> list[dict[str, int]]:
    values = ctx.thresholds.group_defaults.rollout_n
    return [{N_KEY: v} for v in values]


@check("W001", "group-estimator-single-response", Severity.WARNING,
       "verl/trainer/ppo/core_algos.py:312-313 (0.6.1) (GRPO)",
       sources={">=0.8.0": "verl/trainer/ppo/core_algos.py:268,315-316 (0.8.0, 0.9.1) "
                           "(compute_grpo_outcome_advantage)"})
def group_estimator_needs_n(ctx: CheckContext) -> Iterator[Issue]:
    """A group-relative estimator (GRPO, RLOO, ...) with rollout.n = 1 has no group to compare."""
    est = ctx.get("algorithm.adv_estimator")
    n = ctx.plan.n
    if est in GROUP_ESTIMATORS and n == 1:
        yield Issue(f"adv_estimator '{est}' compares the responses of each prompt, but rollout.n = 1: every group "
                    "holds one response, so verl uses mean 0 / std 1 and each advantage is just the raw score "
                    "(no baseline; with 0/1 rewards nothing is ever pushed down)", (N_KEY,),
                    _group_n_candidates(ctx), "GRPO needs several responses per prompt (docs/algo/grpo.md)")


@check("W002", "gae-without-critic", Severity.ERROR,
       "verl/trainer/ppo/utils.py:85-96 (0.6.1) (need_critic: GAE needs values)",
       sources={"<0.6.0": "verl/trainer/ppo/ray_trainer.py:346-356 (0.4.1) (use_critic: GAE needs values)",
                ">=0.8.0": "verl/trainer/ppo/utils.py:96-107 (0.8.0, 0.9.1) (need_critic: GAE needs values)"},
       verl=">=0.6.0")  # critic.enable arrived in 0.6; before it GAE always built a critic
def gae_needs_critic(ctx: CheckContext) -> Iterator[Issue]:
    """GAE needs value estimates: critic.enable=False with adv_estimator=gae cannot train."""
    if ctx.get("algorithm.adv_estimator") == "gae" and ctx.get("critic.enable") is False:
        yield Issue("adv_estimator is gae but critic.enable is false: GAE needs the critic's values",
                    ("critic.enable", "algorithm.adv_estimator"),
                    [{"critic.enable": True}, {"algorithm.adv_estimator": "grpo"}])


@check("W003", "critic-unused", Severity.WARNING, "verl/trainer/ppo/utils.py:85-96 (0.6.1) (need_critic)",
       sources={">=0.8.0": "verl/trainer/ppo/utils.py:96-107 (0.8.0, 0.9.1) (need_critic)"},
       verl=">=0.6.0")  # critic.enable arrived in 0.6
def critic_without_gae(ctx: CheckContext) -> Iterator[Issue]:
    """critic.enable=True with an estimator that ignores values trains a critic for nothing."""
    est = ctx.get("algorithm.adv_estimator")
    entry = ctx.cfg.entry
    if ctx.get("critic.enable") is True and entry is not None and entry.critic is False:
        yield Issue(f"critic.enable is true but {entry.module}'s trainer never builds a critic "
                    f"({', '.join(entry.critic_source)}): the setting changes nothing", ("critic.enable",),
                    [{"critic.enable": None}])
    elif ctx.get("critic.enable") is True and est != "gae":
        yield Issue(f"critic.enable is true but adv_estimator '{est}' does not use values: the critic costs memory "
                    "and time and changes nothing", ("critic.enable",), [{"critic.enable": None}])


@check("W004", "kl-counted-twice", Severity.WARNING, "verl/utils/config.py:177 (0.6.1) (verl only prints a NOTICE)",
       sources={"<0.6.0": "verl/trainer/ppo/ray_trainer.py:451 (0.4.1) (verl only prints a NOTICE)",
                ">=0.7.0,<0.9.0": "verl/utils/config.py:170 (0.8.0) (verl only prints a NOTICE)",
                ">=0.9.0": "verl/utils/config.py:185 (0.9.1) (verl only prints a NOTICE)"},
       verl=">=0.4.0")  # use_kl_in_reward arrived in 0.4
def kl_in_one_place(ctx: CheckContext) -> Iterator[Issue]:
    """KL in the reward and in the loss at once penalises the same drift twice."""
    if kl_in_reward(ctx.cfg) and ctx.get(f"{ACTOR}.use_kl_loss"):
        critic = uses_critic(ctx.cfg)
        # best_practices.rst:168-171 @1dda039b: reward-side KL for PPO, loss-side for GRPO
        fixes = [{f"{ACTOR}.use_kl_loss": False}, {"algorithm.use_kl_in_reward": False}]
        yield Issue("KL is applied both in the reward (algorithm.use_kl_in_reward) and in the actor loss "
                    "(actor.use_kl_loss): the pull toward the reference policy is counted twice",
                    ("algorithm.use_kl_in_reward", f"{ACTOR}.use_kl_loss"), fixes if critic else fixes[::-1],
                    "verl's best practices: reward-side KL for PPO, loss-side KL for GRPO")


def _lora(ctx: CheckContext) -> bool:
    return (as_int(ctx.get("actor_rollout_ref.model.lora_rank")) or 0) > 0 or \
        (as_int(ctx.get("actor_rollout_ref.model.lora.rank")) or 0) > 0


@check("W005", "learning-rate-out-of-range", Severity.WARNING,
       "docs/perf/best_practices.rst:214-215 @1dda039b; verl examples")
def learning_rate_in_range(ctx: CheckContext) -> Iterator[Issue]:
    """Learning rates far from what verl's docs and examples use."""
    table = ctx.thresholds.learning_rate
    lora = _lora(ctx)
    roles = [(f"{ACTOR}.optim.lr", table.actor_lora if lora else table.actor_full, "LoRA actor" if lora else "actor")]
    if uses_critic(ctx.cfg):
        roles.append(("critic.optim.lr", table.critic, "critic"))
    for key, bounds, label in roles:
        lr = ctx.get(key)
        low, high = bounds.low, bounds.high
        if not isinstance(lr, (int, float)):
            continue
        if lr > high or lr < low:
            target = 1e-6 if label == "actor" else 1e-5 if label == "critic" else 3e-5
            try:
                shown = f"{lr:g}"
            except OverflowError:  # a 310-digit integer: past any float, as verl's float field would say
                shown = f"{len(str(abs(lr)))}-digit integer {str(lr)[:6]}... (past the largest float)"
            yield Issue(f"{label} learning rate {shown} is outside {low:g}..{high:g}; verl's docs start at 1e-6..1e-5 "
                        f"(LoRA examples 3e-5)", (key,), [{key: target}])


@check("W006", "overlong-prompts-unfiltered", Severity.WARNING,
       "verl/utils/dataset/rl_dataset.py:113,181-183 (0.7.0) (truncation read, never applied)",
       sources={">=0.7.1,<0.8.0": "verl/utils/dataset/rl_dataset.py:114 (0.7.1) (truncation read, never applied)",
                ">=0.8.0,<0.9.0": "verl/utils/dataset/rl_dataset.py:115,194-196 (0.8.0) (truncation read, never "
                                  "applied)",
                ">=0.9.0": "verl/utils/dataset/rl_dataset.py:118,197-199 (0.9.1) (truncation read, never applied)"},
       verl=">=0.7.0")
def overlong_prompts_filtered(ctx: CheckContext) -> Iterator[Issue]:
    """Since verl 0.7.0 data.truncation is ignored: only filter_overlong_prompts keeps long prompts out."""
    if not at_least(ctx.cfg.version, "0.7.0") or ctx.get("data.filter_overlong_prompts"):
        return
    yield Issue(f"data.filter_overlong_prompts is false and verl {ctx.cfg.version} no longer applies "
                f"data.truncation ('{ctx.get('data.truncation')}'): prompts longer than max_prompt_length reach the "
                "rollout as they are", ("data.filter_overlong_prompts",), [{"data.filter_overlong_prompts": True}])


@check("W007", "response-length-too-short", Severity.WARNING, "knowledge/check_thresholds.yaml (response_length)")
def response_length_fits_answers(ctx: CheckContext) -> Iterator[Issue]:
    """Answers that cannot fit the response length: reasoning models with short limits, oversized overlong buffers."""
    R = as_int(ctx.get("data.max_response_length"))
    if R is None:
        return
    limits = ctx.thresholds.response_length
    path = str(ctx.get("actor_rollout_ref.model.path") or "").lower()
    name = path.rstrip("/").rsplit("/", 1)[-1]
    minimum = limits.thinking_min_tokens
    if any(tag in name for tag in limits.thinking_models) and R < minimum:
        yield Issue(f"'{name}' writes long reasoning before its answer, but max_response_length is {R}: most answers "
                    "will be cut before the final line and score 0", ("data.max_response_length",),
                    [{"data.max_response_length": minimum * 2}], "docs: clip_ratio > 0.1 means truncating too much")
    found = _overlong(ctx)
    fraction = limits.overlong_buffer_max_fraction
    if found and found[1] <= R and found[1] > fraction * R:
        prefix, length = found
        yield Issue(f"the DAPO overlong buffer ({length}) covers more than {fraction:.0%} of "
                    f"max_response_length ({R}): any answer longer than {R - length} tokens is penalised",
                    (f"{prefix}.len",), [{f"{prefix}.len": R // 4}], "the DAPO paper uses a 4k buffer on 20k responses")


@check("W008", "legacy-actor-ignores-optim-clip-grad", Severity.WARNING,
       "verl/workers/actor/dp_actor.py:392-400 (0.7.1)",
       verl="<0.8.0")  # verl 0.8.0 removed the legacy actor (verl/workers/actor/)
def clip_grad_where_read(ctx: CheckContext) -> Iterator[Issue]:
    """The legacy FSDP actor clips with actor.grad_clip; actor.optim.clip_grad is ignored there."""
    if is_megatron(ctx.cfg) or ctx.get("trainer.use_legacy_worker_impl") == "disable":
        return
    key = f"{ACTOR}.optim.clip_grad"
    if key in ctx.cfg.user_keys and ctx.get(key) != ctx.get(f"{ACTOR}.grad_clip"):
        yield Issue(f"'{key}' is set to {ctx.get(key)} but the legacy FSDP actor clips with actor.grad_clip "
                    f"({ctx.get(f'{ACTOR}.grad_clip')})", (key, f"{ACTOR}.grad_clip"),
                    [{f"{ACTOR}.grad_clip": ctx.get(key)}])


@check("W009", "warmup-zero-ignores-ratio", Severity.WARNING, "verl/workers/fsdp_workers.py:546-552 (0.6.1)",
       sources={"<0.6.0": "verl/workers/fsdp_workers.py:375-381 (0.4.1)",
                ">=0.7.0,<0.8.0": "verl/workers/fsdp_workers.py:653-659 (0.7.1)",
                ">=0.8.0,<0.9.0": "verl/workers/engine/fsdp/transformer_impl.py:464-471 (0.8.0)",
                ">=0.9.0": "verl/workers/engine/fsdp/transformer_impl.py:509-516 (0.9.1)"},
       verl=">=0.3.0")  # verl 0.2 had only lr_warmup_steps_ratio
def warmup_ratio_used(ctx: CheckContext) -> Iterator[Issue]:
    """lr_warmup_steps = 0 means no warmup; only a negative value defers to lr_warmup_steps_ratio."""
    for role in _optim_roles(ctx):
        steps, ratio = ctx.get(f"{role}.optim.lr_warmup_steps"), ctx.get(f"{role}.optim.lr_warmup_steps_ratio")
        if steps == 0 and isinstance(ratio, (int, float)) and ratio > 0:
            key = f"{role}.optim.lr_warmup_steps"
            yield Issue(f"'{key}' is 0, so lr_warmup_steps_ratio ({ratio}) is ignored (only a negative value defers to "
                        "the ratio)", (key,), [{key: -1}])


@check("W010", "kl-loss-without-reference", Severity.INFO,
       "verl/trainer/ppo/utils.py:71-82 (0.6.1) (need_reference_policy)",
       sources={"<0.6.0": "verl/trainer/ppo/ray_trainer.py:331 (0.4.1) (use_reference_policy)",
                ">=0.8.0": "verl/trainer/ppo/utils.py:75-93 (0.8.0, 0.9.1) (need_reference_policy)"})
def kl_settings_inactive(ctx: CheckContext) -> Iterator[Issue]:
    """KL coefficients set while their KL is off have no effect."""
    user = ctx.cfg.user_keys
    if not ctx.get(f"{ACTOR}.use_kl_loss") and f"{ACTOR}.kl_loss_coef" in user and (user[f"{ACTOR}.kl_loss_coef"] or 0):
        yield Issue("actor.kl_loss_coef is set but actor.use_kl_loss is false: no loss-side KL is applied",
                    (f"{ACTOR}.kl_loss_coef", f"{ACTOR}.use_kl_loss"), [{f"{ACTOR}.use_kl_loss": True}],
                    "kl_loss_coef weighs the KL loss only when use_kl_loss is true "
                    "(v0.9.1 verl/workers/utils/losses.py:132-140)")
    if not uses_reference(ctx.cfg) and (user.get("algorithm.kl_ctrl.kl_coef") or 0):
        yield Issue("algorithm.kl_ctrl.kl_coef is set but no KL is used anywhere (use_kl_in_reward and use_kl_loss "
                    "are false)", ("algorithm.kl_ctrl.kl_coef", "algorithm.use_kl_in_reward"),
                    [{"algorithm.use_kl_in_reward": True}],
                    "kl_ctrl.kl_coef weighs the in-reward KL only when use_kl_in_reward is true "
                    "(v0.9.1 verl/trainer/ppo/ray_trainer.py:1639-1642)")


@check("W011", "lora-full-finetune-lr", Severity.WARNING,
       "docs/advance/ppo_lora.rst:164 (raise lr by an order of magnitude)")
def lora_learning_rate_raised(ctx: CheckContext) -> Iterator[Issue]:
    """A LoRA actor at a full-fine-tuning learning rate: verl's LoRA guide raises it by about ten times."""
    minimum = ctx.thresholds.lora.min_actor_lr
    key = f"{ACTOR}.optim.lr"
    lr = ctx.get(key)
    low = ctx.thresholds.learning_rate.actor_lora.low
    if not _lora(ctx) or not isinstance(lr, (int, float)) or not low <= lr < minimum:
        return  # W005 reports a rate below every LoRA example
    yield Issue(f"LoRA actor (lora_rank > 0) with optim.lr {lr:g}, under {minimum:g} (ten times the 1e-6 of verl's "
                "full-fine-tuning examples): only the adapters train, and verl's LoRA guide raises the lr by about an "
                "order of magnitude (its example: 3e-5)",
                (key, "actor_rollout_ref.model.lora_rank"), [{key: float(f"{lr * 10:.3g}")}],
                "docs/advance/ppo_lora.rst:164: increase the learning rate by an order of magnitude for LoRA")


@check("W012", "clip-ratio-low-above-high", Severity.WARNING, "verl/trainer/ppo/core_algos.py:923-931 (0.6.1); "
       "docs/perf/best_practices.rst:200-201 @1dda039b",
       sources={">=0.8.0,<0.9.0": "verl/trainer/ppo/core_algos.py:1314-1322 (0.8.0); "
                                  "docs/perf/best_practices.rst:200-201 @1dda039b",
                ">=0.9.0": "verl/trainer/ppo/core_algos.py:1321-1329 (0.9.1); "
                           "docs/perf/best_practices.rst:200-201 @1dda039b"})
def clip_ratio_bounds_ordered(ctx: CheckContext) -> Iterator[Issue]:
    """clip_ratio_low above clip_ratio_high reverses DAPO's clip-higher (0.2 / 0.28)."""
    if not ctx.cfg.has(f"{ACTOR}.clip_ratio_low") or not ctx.cfg.has(f"{ACTOR}.clip_ratio_high"):
        return  # verl <= 0.3 has one symmetric clip_ratio
    bounds = clip_bounds(ctx.cfg)
    if bounds is None or bounds[0] <= bounds[1]:
        return
    low, high = bounds
    dapo = ctx.thresholds.clip_ratio.dapo
    yield Issue(f"clip_ratio_low ({low:g}) is above clip_ratio_high ({high:g}): verl clamps the ratio to "
                f"[{1 - low:g}, {1 + high:g}], so a token whose probability rises is clipped sooner than one that "
                f"falls, the reverse of DAPO's clip-higher (low {dapo.low:g}, high {dapo.high:g}), which keeps "
                "exploration alive; the bounds look swapped", (f"{ACTOR}.clip_ratio_low", f"{ACTOR}.clip_ratio_high"),
                [{f"{ACTOR}.clip_ratio_low": high, f"{ACTOR}.clip_ratio_high": low}],
                "swapped back: the upper bound is the wider one, as in DAPO (best_practices.rst:200-201 @1dda039b)")


@check("W013", "group-sampling-temperature-low", Severity.WARNING, "docs/perf/best_practices.rst:136-137 @1dda039b")
def group_sampling_temperature(ctx: CheckContext) -> Iterator[Issue]:
    """A group estimator sampling at a low temperature: the n answers to a prompt agree, their advantages are 0."""
    est = ctx.get("algorithm.adv_estimator")
    n = ctx.plan.n or 1
    temperature = ctx.get(f"{ROLLOUT}.temperature")
    limits = ctx.thresholds.group_sampling
    minimum, target = limits.min_rollout_temperature, limits.recommended_temperature
    if est not in GROUP_ESTIMATORS or n < 2 or not isinstance(temperature, (int, float)) \
            or temperature <= 0 or temperature >= minimum:
        return  # temperature 0 is greedy decoding: A009/W001 territory, and verl's own choice to allow
    yield Issue(f"adv_estimator '{est}' compares the rollout.n = {n} answers of each prompt, but rollout.temperature "
                f"is {temperature:g}: near-greedy sampling makes the answers agree, so more groups score alike and "
                f"get zero advantage (verl's docs: keep enough randomness, temperature {target})",
                (f"{ROLLOUT}.temperature",), [{f"{ROLLOUT}.temperature": float(target)}],
                "best_practices.rst:136-137 @1dda039b: temperature=1.0 is a good default for rollouts")


@check("W014", "key-accepted-never-read", Severity.WARNING,
       "knowledge/read_keys.yaml (each entry cites the verl code that reads the other key); "
       "verl/trainer/main_ppo.py (0.9.1) (no legacy reward migration)", verl=">=0.8.0")
def key_accepted_never_read(ctx: CheckContext) -> Iterator[Issue]:
    """A key the version's YAML accepts (Hydra takes it) that no code of that version reads: its value is dropped
    without a word, while the key verl does read keeps its default."""
    user = ctx.cfg.user_keys
    strategy = str(ctx.get(f"{ACTOR}.strategy"))
    entry = ctx.cfg.launch.entry_point if ctx.cfg.launch is not None else ""
    for key, value in user.items():
        found = unread_key(key, ctx.cfg.version)
        if found is None:
            continue
        unread, read_as = found
        if (unread.strategies and strategy not in unread.strategies) or \
                (unread.except_entry and unread.except_entry in entry) or read_as in user:
            continue
        yield Issue(f"'{key}' is accepted by verl {ctx.cfg.version} but never read: {render_value(value)} has no "
                    f"effect, and verl reads '{read_as}' instead (left at {render_value(ctx.get(read_as))})",
                    (key, read_as),
                    source=unread.source)
