"""The checks verl makes before or at the first step, with verl's wording where verl has one: the config values verl
refuses (verl/utils/config.py validate_config, ActorConfig/CriticConfig, fsdp_workers' normalisation) and the ones
the sandbox does not model.
"""

from __future__ import annotations

from .args import POLICIES, Args, SandboxConfigError, uses_critic
from .core_algos import ADV_ESTIMATOR_REGISTRY, KL_TYPES, LOSS_AGG_MODES
from .faults import fault_problems


def validate(args: Args) -> None:
    """The checks verl makes before or at the first step, with verl's wording where verl has one."""
    n_gpus = args.n_gpus_per_node * args.nnodes
    problems: list[str] = []
    if args.policy not in POLICIES:
        problems.append(f"sandbox.policy={args.policy!r}: use lm (the language model) or loglinear")
    if n_gpus < 1:
        problems.append(f"trainer.n_gpus_per_node * trainer.nnodes = {n_gpus}; need at least 1 rank")
    if args.train_batch_size < 1 or args.n < 1:
        problems.append("data.train_batch_size and actor_rollout_ref.rollout.n must be at least 1")
    if args.adv_estimator not in ADV_ESTIMATOR_REGISTRY:
        problems.append(f"algorithm.adv_estimator={args.adv_estimator!r} is not modelled by the sandbox; "
                        f"use one of {', '.join(ADV_ESTIMATOR_REGISTRY)}")
    if args.policy_loss_mode != "vanilla":
        problems.append(f"actor_rollout_ref.actor.policy_loss.loss_mode={args.policy_loss_mode!r} is not modelled "
                        "by the sandbox; it runs verl's 'vanilla' PPO loss")
    for key, mode in (("actor_rollout_ref.actor", args.loss_agg_mode), ("critic", args.critic_loss_agg_mode)):
        if mode not in LOSS_AGG_MODES:
            problems.append(f"{key}.loss_agg_mode: Invalid loss_agg_mode: {mode}")
    for key, kl in (("actor_rollout_ref.actor.kl_loss_type", args.kl_loss_type),
                    ("algorithm.kl_penalty", args.kl_penalty)):
        if kl.rstrip("+") not in KL_TYPES:
            problems.append(f"{key}={kl!r}: the sandbox models {', '.join(KL_TYPES)} (optionally with '+')")
    if args.clip_ratio_c <= 1.0:
        problems.append("The lower bound of the clip_ratio_c for dual-clip PPO should be greater than 1.0, "
                        f"but get the value: {args.clip_ratio_c}.")
    if args.kl_ctrl_type not in ("fixed", "adaptive"):
        problems.append(f"algorithm.kl_ctrl.type={args.kl_ctrl_type!r}: only fixed and adaptive exist")
    elif args.kl_ctrl_type == "adaptive" and args.kl_horizon <= 0:
        problems.append(f"horizon must be larger than 0. Got {args.kl_horizon}")
    for key, kind in (("actor_rollout_ref.actor.optim", args.lr_scheduler_type),
                      ("critic.optim", args.critic_lr_scheduler_type)):
        if kind not in ("constant", "cosine"):
            problems.append(f"{key}.lr_scheduler_type: LR scheduler type {kind} is not supported")
    if args.lr_warmup_steps is None or args.critic_lr_warmup_steps is None:
        problems.append("optim.lr_warmup_steps is null; verl calls int() on it (use -1 to take the ratio)")
    if args.do_sample and args.temperature <= 0:
        problems.append(f"actor_rollout_ref.rollout.temperature={args.temperature}: the actor divides its logits "
                        "by the temperature, so it must be > 0 (set do_sample=false for greedy rollouts)")
    if args.val_do_sample and args.temperature <= 0:
        problems.append("validation sampling needs rollout.temperature > 0 (verl asserts it)")
    if bool(args.emulate_gpu) != bool(args.emulate_model):
        problems.append("+sandbox.emulate_model and +sandbox.emulate_gpu go together; set both")
    if args.train_size < args.train_batch_size:
        problems.append(f"data.train_batch_size={args.train_batch_size} is larger than the sandbox's training set "
                        f"(+sandbox.train_size={args.train_size}); the dataloader would yield no batch")
    if args.max_response_length < 1:
        problems.append("data.max_response_length must be at least 1")
    problems += _batch_problems(args, n_gpus)
    problems += fault_problems(args)
    if problems:
        raise SandboxConfigError("\n".join(problems))


def _batch_problems(args: Args, n_gpus: int) -> list[str]:
    """verl/utils/config.py validate_config, ActorConfig/CriticConfig checks and fsdp_workers normalisation."""
    out: list[str] = []
    real = args.train_batch_size * args.n
    if not args.use_dynamic_bsz and real % n_gpus:
        out.append(f"real_train_batch_size ({real}) must be divisible by minimal possible batch size ({n_gpus})")
    elif real % n_gpus:  # the dispatch to ranks (DataProto.chunk) asserts it even with use_dynamic_bsz
        out.append(f"only support equal chunk. Got size of DataProto {real} and chunk {n_gpus}.")
    for role, mini, micro_global, micro, dynamic in (
        ("actor", args.ppo_mini_batch_size, args.ppo_micro_batch_size, args.ppo_micro_batch_size_per_gpu,
         args.use_dynamic_bsz),
        ("critic", args.critic_ppo_mini_batch_size, args.critic_ppo_micro_batch_size,
         args.critic_ppo_micro_batch_size_per_gpu, args.critic_use_dynamic_bsz),
    ):
        if role == "critic" and not uses_critic(args):
            continue
        if not dynamic and args.train_batch_size < mini:
            out.append(f"train_batch_size ({args.train_batch_size}) must be >= {role}.ppo_mini_batch_size ({mini})")
        if not dynamic and micro_global is not None and micro is not None:
            out.append(f"[{role}] You have set both '{role}.ppo_micro_batch_size' AND "
                       f"'{role}.ppo_micro_batch_size_per_gpu'. Please remove '{role}.ppo_micro_batch_size' "
                       "because only '*_ppo_micro_batch_size_per_gpu' is supported (the former is deprecated).")
        mini_per_rank = mini * args.n // n_gpus if n_gpus else 0
        if mini_per_rank <= 0:
            out.append(f"ppo_mini_batch_size {mini_per_rank} should be larger than 0 after normalization "
                       f"({role}.ppo_mini_batch_size={mini} x rollout.n={args.n} // {n_gpus} ranks)")
            continue
        per_gpu = micro if micro is not None else (micro_global // n_gpus if micro_global is not None else None)
        if not dynamic and per_gpu is not None:
            if per_gpu <= 0:
                out.append(f"{role}: micro batch per gpu is {per_gpu}; it must be at least 1")
            elif mini_per_rank % per_gpu:
                out.append(f"normalized ppo_mini_batch_size {mini_per_rank} should be divisible by "
                           f"ppo_micro_batch_size_per_gpu {per_gpu} ({role})")
    return out
