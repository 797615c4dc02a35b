"""The sandbox's ``Args``: every key it reads (verl's keys, the name of each in the field's metadata, and its own
``sandbox.*`` knobs), the policies it trains, and the errors a run raises. config.py fills an ``Args`` from a config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# verl version whose defaults and semantics the sandbox follows (knowledge/verl_defaults/<version>).
VERL_VERSION = "latest"


def _key(verl_key: str) -> dict[str, str]:
    return {"key": verl_key}


@dataclass
class Args:
    """Everything the sandbox reads: verl's keys (the name of each verl key is in the field's metadata) and the
    sandbox's own ``sandbox.*`` knobs. Defaults are verl's; the values always come from the loaded config."""

    # --- data -------------------------------------------------------------------------------------------------
    train_batch_size: int = field(default=1024, metadata=_key("data.train_batch_size"))
    """prompts per training step"""
    max_prompt_length: int = field(default=512, metadata=_key("data.max_prompt_length"))
    """padded prompt width; prompts longer than this are filtered, truncated or rejected (``data.truncation``)"""
    max_response_length: int = field(default=512, metadata=_key("data.max_response_length"))
    """padded response width; a response that has not emitted EOS by then is cut off and scores 0"""
    truncation: str = field(default="error", metadata=_key("data.truncation"))
    """what to do with an over-long prompt: error, left, right or middle"""
    filter_overlong_prompts: bool = field(default=False, metadata=_key("data.filter_overlong_prompts"))
    """drop over-long prompts from the data set instead of truncating them"""
    shuffle: bool = field(default=True, metadata=_key("data.shuffle"))
    """reshuffle the training prompts every epoch"""

    # --- rollout ----------------------------------------------------------------------------------------------
    n: int = field(default=1, metadata=_key("actor_rollout_ref.rollout.n"))
    """responses sampled per prompt (the GRPO group size)"""
    temperature: float = field(default=1.0, metadata=_key("actor_rollout_ref.rollout.temperature"))
    """sampling temperature; the actor's log-probs are computed at the same temperature, as in verl"""
    top_p: float = field(default=1.0, metadata=_key("actor_rollout_ref.rollout.top_p"))
    """nucleus sampling: keep the smallest set of tokens whose probability reaches top_p"""
    top_k: int = field(default=-1, metadata=_key("actor_rollout_ref.rollout.top_k"))
    """keep only the k most likely tokens (-1: all)"""
    do_sample: bool = field(default=True, metadata=_key("actor_rollout_ref.rollout.do_sample"))
    """sample (true) or decode greedily (false)"""
    val_n: int = field(default=1, metadata=_key("actor_rollout_ref.rollout.val_kwargs.n"))
    """responses per validation prompt"""
    val_temperature: float = field(default=0.0, metadata=_key("actor_rollout_ref.rollout.val_kwargs.temperature"))
    """validation sampling temperature"""
    val_top_p: float = field(default=1.0, metadata=_key("actor_rollout_ref.rollout.val_kwargs.top_p"))
    """validation top_p"""
    val_top_k: int = field(default=-1, metadata=_key("actor_rollout_ref.rollout.val_kwargs.top_k"))
    """validation top_k"""
    val_do_sample: bool = field(default=False, metadata=_key("actor_rollout_ref.rollout.val_kwargs.do_sample"))
    """sample during validation (false: greedy)"""

    # --- actor ------------------------------------------------------------------------------------------------
    ppo_mini_batch_size: int = field(default=256, metadata=_key("actor_rollout_ref.actor.ppo_mini_batch_size"))
    """prompts per optimizer step (times n responses); one training step makes train_batch_size/this steps"""
    ppo_micro_batch_size: int | None = field(default=None,
                                             metadata=_key("actor_rollout_ref.actor.ppo_micro_batch_size"))
    """deprecated global micro batch (divided by the number of ranks)"""
    ppo_micro_batch_size_per_gpu: int | None = field(
        default=None, metadata=_key("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"))
    """responses per forward/backward on one rank; unset means one micro-batch per mini-batch (verl refuses)"""
    use_dynamic_bsz: bool = field(default=False, metadata=_key("actor_rollout_ref.actor.use_dynamic_bsz"))
    """pack micro-batches by token count instead of by sample count"""
    ppo_max_token_len_per_gpu: int = field(default=16384,
                                           metadata=_key("actor_rollout_ref.actor.ppo_max_token_len_per_gpu"))
    """token budget of one micro-batch with use_dynamic_bsz"""
    ppo_epochs: int = field(default=1, metadata=_key("actor_rollout_ref.actor.ppo_epochs"))
    """passes over each batch"""
    clip_ratio: float = field(default=0.2, metadata=_key("actor_rollout_ref.actor.clip_ratio"))
    """PPO clip range epsilon (used where clip_ratio_low/high are null)"""
    clip_ratio_low: float | None = field(default=0.2, metadata=_key("actor_rollout_ref.actor.clip_ratio_low"))
    """lower clip range: the ratio is clipped at 1 - clip_ratio_low"""
    clip_ratio_high: float | None = field(default=0.2, metadata=_key("actor_rollout_ref.actor.clip_ratio_high"))
    """upper clip range: the ratio is clipped at 1 + clip_ratio_high (DAPO's clip-higher)"""
    clip_ratio_c: float = field(default=3.0, metadata=_key("actor_rollout_ref.actor.clip_ratio_c"))
    """dual-clip constant: for negative advantages the loss is capped at -A * clip_ratio_c (must be > 1)"""
    policy_loss_mode: str = field(default="vanilla", metadata=_key("actor_rollout_ref.actor.policy_loss.loss_mode"))
    """policy loss; the sandbox models verl's 'vanilla' (clipped PPO with dual clip)"""
    loss_agg_mode: str = field(default="token-mean", metadata=_key("actor_rollout_ref.actor.loss_agg_mode"))
    """token-mean, seq-mean-token-sum, seq-mean-token-mean or seq-mean-token-sum-norm"""
    loss_scale_factor: float | None = field(default=None, metadata=_key("actor_rollout_ref.actor.loss_scale_factor"))
    """divisor of seq-mean-token-sum-norm (null: max_response_length)"""
    entropy_coeff: float = field(default=0.0, metadata=_key("actor_rollout_ref.actor.entropy_coeff"))
    """entropy bonus in the actor loss"""
    calculate_entropy: bool = field(default=False, metadata=_key("actor_rollout_ref.actor.calculate_entropy"))
    """report the update-time entropy even when entropy_coeff is 0"""
    use_kl_loss: bool = field(default=False, metadata=_key("actor_rollout_ref.actor.use_kl_loss"))
    """add a KL(actor || reference) term to the actor loss (GRPO style)"""
    kl_loss_coef: float = field(default=0.001, metadata=_key("actor_rollout_ref.actor.kl_loss_coef"))
    """weight of the KL loss"""
    kl_loss_type: str = field(default="low_var_kl", metadata=_key("actor_rollout_ref.actor.kl_loss_type"))
    """KL estimator of the loss: kl/k1, abs, mse/k2, low_var_kl/k3 (a trailing '+' uses k2's gradient)"""
    data_loader_seed: int = field(default=42, metadata=_key("actor_rollout_ref.actor.data_loader_seed"))
    """the seed when sandbox.seed is unset"""
    grad_clip: float = field(default=1.0, metadata=_key("actor_rollout_ref.actor.grad_clip"))
    """clip the actor's total gradient norm to this (verl's legacy FSDP actor reads actor.grad_clip)"""
    lr: float = field(default=1e-6, metadata=_key("actor_rollout_ref.actor.optim.lr"))
    """actor learning rate (scaled by sandbox.lr_scale for the tiny model)"""
    lr_warmup_steps: int | None = field(default=-1, metadata=_key("actor_rollout_ref.actor.optim.lr_warmup_steps"))
    """warmup length in training steps; negative: use lr_warmup_steps_ratio"""
    lr_warmup_steps_ratio: float = field(default=0.0,
                                         metadata=_key("actor_rollout_ref.actor.optim.lr_warmup_steps_ratio"))
    """warmup length as a fraction of the total training steps"""
    lr_scheduler_type: str = field(default="constant",
                                   metadata=_key("actor_rollout_ref.actor.optim.lr_scheduler_type"))
    """constant or cosine (after the linear warmup)"""
    min_lr_ratio: float = field(default=0.0, metadata=_key("actor_rollout_ref.actor.optim.min_lr_ratio"))
    """floor of the cosine schedule, as a fraction of lr"""
    num_cycles: float = field(default=0.5, metadata=_key("actor_rollout_ref.actor.optim.num_cycles"))
    """cosine cycles over the run (0.5: one half-cosine down)"""
    weight_decay: float = field(default=0.01, metadata=_key("actor_rollout_ref.actor.optim.weight_decay"))
    """AdamW decoupled weight decay"""
    betas: tuple[float, float] = field(default=(0.9, 0.999), metadata=_key("actor_rollout_ref.actor.optim.betas"))
    """AdamW betas"""

    # --- critic -----------------------------------------------------------------------------------------------
    critic_enable: bool | None = field(default=None, metadata=_key("critic.enable"))
    """train a critic (null: only for adv_estimator=gae, as in verl's need_critic)"""
    critic_lr: float = field(default=1e-5, metadata=_key("critic.optim.lr"))
    """critic learning rate (scaled by sandbox.lr_scale)"""
    critic_lr_warmup_steps: int | None = field(default=-1, metadata=_key("critic.optim.lr_warmup_steps"))
    """critic warmup steps; negative: use the ratio"""
    critic_lr_warmup_steps_ratio: float = field(default=0.0, metadata=_key("critic.optim.lr_warmup_steps_ratio"))
    """critic warmup as a fraction of the total training steps"""
    critic_lr_scheduler_type: str = field(default="constant", metadata=_key("critic.optim.lr_scheduler_type"))
    """critic LR schedule: constant or cosine"""
    critic_min_lr_ratio: float = field(default=0.0, metadata=_key("critic.optim.min_lr_ratio"))
    """floor of the critic's cosine schedule"""
    critic_num_cycles: float = field(default=0.5, metadata=_key("critic.optim.num_cycles"))
    """cosine cycles of the critic's schedule"""
    critic_weight_decay: float = field(default=0.01, metadata=_key("critic.optim.weight_decay"))
    """critic AdamW weight decay"""
    critic_betas: tuple[float, float] = field(default=(0.9, 0.999), metadata=_key("critic.optim.betas"))
    """critic AdamW betas"""
    critic_ppo_mini_batch_size: int = field(default=256, metadata=_key("critic.ppo_mini_batch_size"))
    """critic mini-batch in prompts (defaults to the actor's)"""
    critic_ppo_micro_batch_size: int | None = field(default=None, metadata=_key("critic.ppo_micro_batch_size"))
    """deprecated global critic micro batch"""
    critic_ppo_micro_batch_size_per_gpu: int | None = field(default=None,
                                                            metadata=_key("critic.ppo_micro_batch_size_per_gpu"))
    """critic responses per forward/backward on one rank"""
    critic_use_dynamic_bsz: bool = field(default=False, metadata=_key("critic.use_dynamic_bsz"))
    """pack critic micro-batches by tokens"""
    critic_ppo_max_token_len_per_gpu: int = field(default=32768, metadata=_key("critic.ppo_max_token_len_per_gpu"))
    """critic token budget per micro-batch with use_dynamic_bsz"""
    critic_ppo_epochs: int = field(default=1, metadata=_key("critic.ppo_epochs"))
    """critic passes over each batch (defaults to the actor's)"""
    cliprange_value: float = field(default=0.5, metadata=_key("critic.cliprange_value"))
    """value clipping around the old values"""
    critic_loss_agg_mode: str = field(default="token-mean", metadata=_key("critic.loss_agg_mode"))
    """aggregation of the value loss (defaults to the actor's)"""
    critic_grad_clip: float = field(default=1.0, metadata=_key("critic.grad_clip"))
    """clip the critic's total gradient norm"""

    # --- algorithm --------------------------------------------------------------------------------------------
    adv_estimator: str = field(default="gae", metadata=_key("algorithm.adv_estimator"))
    """gae, grpo, grpo_vectorized, rloo, reinforce_plus_plus or reinforce_plus_plus_baseline"""
    gamma: float = field(default=1.0, metadata=_key("algorithm.gamma"))
    """discount factor"""
    lam: float = field(default=1.0, metadata=_key("algorithm.lam"))
    """GAE lambda"""
    norm_adv_by_std_in_grpo: bool = field(default=True, metadata=_key("algorithm.norm_adv_by_std_in_grpo"))
    """divide GRPO advantages by the group's standard deviation (false: Dr.GRPO)"""
    use_kl_in_reward: bool = field(default=False, metadata=_key("algorithm.use_kl_in_reward"))
    """subtract beta * KL(actor || reference) from the token rewards"""
    kl_penalty: str = field(default="kl", metadata=_key("algorithm.kl_penalty"))
    """KL estimator in the reward: kl/k1, abs, mse/k2, low_var_kl/k3"""
    kl_ctrl_type: str = field(default="fixed", metadata=_key("algorithm.kl_ctrl.type"))
    """fixed or adaptive beta"""
    kl_coef: float = field(default=0.001, metadata=_key("algorithm.kl_ctrl.kl_coef"))
    """initial (or fixed) beta of the reward-side KL"""
    kl_horizon: int = field(default=10000, metadata=_key("algorithm.kl_ctrl.horizon"))
    """adaptive controller horizon, in responses"""
    target_kl: float = field(default=0.1, metadata=_key("algorithm.kl_ctrl.target_kl"))
    """adaptive controller target KL"""

    # --- trainer ----------------------------------------------------------------------------------------------
    total_epochs: int = field(default=30, metadata=_key("trainer.total_epochs"))
    """epochs over the training set (when total_training_steps is null)"""
    total_training_steps: int | None = field(default=None, metadata=_key("trainer.total_training_steps"))
    """stop after this many steps"""
    n_gpus_per_node: int = field(default=8, metadata=_key("trainer.n_gpus_per_node"))
    """emulated GPUs per node; n_gpus_per_node * nnodes data-parallel ranks"""
    nnodes: int = field(default=1, metadata=_key("trainer.nnodes"))
    """emulated nodes"""
    project_name: str = field(default="verl_examples", metadata=_key("trainer.project_name"))
    """file logger directory"""
    experiment_name: str = field(default="gsm8k", metadata=_key("trainer.experiment_name"))
    """file logger file name"""
    logger: tuple[str, ...] = field(default=("console", "wandb"), metadata=_key("trainer.logger"))
    """backends; the sandbox writes console and file, and skips the others"""
    test_freq: int = field(default=-1, metadata=_key("trainer.test_freq"))
    """validate every this many steps and at the last step (-1: never)"""
    val_before_train: bool = field(default=True, metadata=_key("trainer.val_before_train"))
    """validate once before training, logged as step 0"""
    critic_warmup: int = field(default=0, metadata=_key("trainer.critic_warmup"))
    """skip the actor update while critic_warmup > step"""
    balance_batch: bool = field(default=True, metadata=_key("trainer.balance_batch"))
    """reorder the batch so every rank gets a similar token count (logs global_seqlen/*)"""
    rollout_data_dir: str | None = field(default=None, metadata=_key("trainer.rollout_data_dir"))
    """dump every step's samples to <dir>/<step>.jsonl"""

    # --- the sandbox's own knobs ------------------------------------------------------------------------------
    seed: int | None = field(default=None, metadata=_key("sandbox.seed"))
    """seed of everything random (null: actor_rollout_ref.actor.data_loader_seed, else 42)"""
    train_size: int = field(default=2048, metadata=_key("sandbox.train_size"))
    """prompts in the generated training set"""
    val_size: int = field(default=256, metadata=_key("sandbox.val_size"))
    """prompts in the generated validation set"""
    policy: str = field(default="lm", metadata=_key("sandbox.policy"))
    """lm: the small transformer (sweeps/sandbox/lm_policy.py); loglinear: the 19-token log-linear policy (fast tests).
    Unset, $SANDBOX_POLICY decides (the test suite sets loglinear), else lm"""
    lr_scale: float | None = field(default=None, metadata=_key("sandbox.lr_scale"))
    """Adam step = lr * lr_scale: a tiny model needs larger steps than a 7B model for the same policy change
    (null: LR_SCALES of the policy)"""
    deterministic_timing: bool = field(default=False, metadata=_key("sandbox.deterministic_timing"))
    """write fixed timing values so two runs with the same seed give byte-identical metric files"""
    emulate_model: str | None = field(default=None, metadata=_key("sandbox.emulate_model"))
    """model name for the memory emulation (with emulate_gpu)"""
    emulate_gpu: str | None = field(default=None, metadata=_key("sandbox.emulate_gpu"))
    """GPU name for the memory emulation (with emulate_model)"""
    fault: str | None = field(default=None, metadata=_key("sandbox.fault"))
    """a fault injected mid-run (sweeps/sandbox/faults.py: lr, kl, reward, nan_reward)"""
    fault_step: int = field(default=1, metadata=_key("sandbox.fault_step"))
    """the first training step that runs with the fault"""
    fault_factor: float = field(default=100.0, metadata=_key("sandbox.fault_factor"))
    """the lr fault's multiplier"""
    step_sleep: float = field(default=0.0, metadata=_key("sandbox.step_sleep"))
    """seconds to wait after each logged step (a live log for a watcher to follow)"""
    max_memory_gib: float = field(default=2.0, metadata=_key("sandbox.max_memory_gib"))
    """memory the run may map beyond its start (the interpreter, numpy, torch, the model), enforced by the
    kernel (RLIMIT_AS) in ``python -m sweeps.sandbox``: past it an allocation fails and the run exits 1 with one
    line, instead of growing until the machine's OOM killer stops it (a policy rambling toward a 1,024-token cap
    at 512 prompts x 5 reached 13.6 GB, issue #38). 0: no cap"""


POLICIES = ("lm", "loglinear")
POLICY_ENV = "SANDBOX_POLICY"  # the policy when sandbox.policy is unset (tests/conftest.py: loglinear)
# lr_scale per policy. loglinear: its one-hot rows need ~1e-2 Adam steps to move; lm: the transformer's SFT ran at
# 3e-3, so lr 1e-6 x 300 = 3e-4 is a gentle fine-tuning step and lr 1e-4 x 300 = 3e-2 an unstable one.
LR_SCALES = {"loglinear": 1e4, "lm": 300.0}
SANDBOX_KEYS = {f.metadata["key"] for f in dataclasses.fields(Args) if f.metadata["key"].startswith("sandbox.")}


class SandboxConfigError(ValueError):
    """The config cannot be run by the sandbox (verl would refuse it, or the sandbox does not model it)."""


class EmulatedOutOfMemory(RuntimeError):
    """The memory model says this config does not fit the emulated GPU."""


def uses_critic(args: Args) -> bool:
    """verl's need_critic: critic.enable if set, else only for GAE."""
    return bool(args.critic_enable) if args.critic_enable is not None else args.adv_estimator == "gae"


def uses_reference(args: Args) -> bool:
    """verl's need_reference_policy."""
    return args.use_kl_in_reward or args.use_kl_loss
