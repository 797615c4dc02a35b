"""A CPU sandbox trainer that behaves like verl: real GRPO/PPO on a small task, verl's keys in, verl's metrics out.

Run it as ``python -m sweeps.sandbox [KEY=VALUE ...]`` with verl's own Hydra overrides, for example::

    python -m sweeps.sandbox algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=4 \\
        data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=16 \\
        trainer.total_training_steps=50 'trainer.logger=[console,file]'

The config is read through the advisor's own loader (verl's newest defaults plus the overrides), so a typo
fails the same way it would in ``advisor check``. Keys under ``sandbox.`` belong to the sandbox itself
(``+sandbox.seed=3``; the ``+`` may be left out).

What it trains (``sandbox.policy``): ``lm`` (the default), a small causal transformer supervised-trained on
written additions and subtractions (sweeps/_lm_policy.py, _lm_task.py, _lm_trainer.py; weights from
scripts/train_sandbox_lm.py), or ``loglinear``, a softmax policy over a 19-token vocabulary "pretrained" to answer
one-digit additions (``let me see 3 + 4 =``). Both answer in gsm8k's format (``... #### 7<eos>``), scored 1 when
the number after the last ``####`` is right and the response ends with EOS inside ``data.max_response_length``,
else 0. The reference policy is a frozen copy of the pretrained one. Everything downstream (KL, advantages, PPO
loss, mini- and micro-batches over emulated data-parallel ranks, AdamW, LR schedule, metrics, loggers) follows
verl's code paths and formulas; docs/sandbox.md lists the keys it models and the metrics it writes.

The file reads top to bottom like CleanRL's ``ppo.py``: ``Args``, the task, the model, the algorithm
(``# ALGO LOGIC:`` sections), metrics and loggers, then ``main``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import numbers
import os
import pprint
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from . import lm_task
from .faults import fault_problems, inject_before_step, scores_after_fault

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
    """lm: the small transformer (sweeps/_lm_policy.py); loglinear: the 19-token log-linear policy (fast tests).
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
    """a fault injected mid-run (sweeps/_faults.py: lr, kl, reward, nan_reward)"""
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
ADV_ESTIMATORS = ("gae", "grpo", "grpo_vectorized", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline")
LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")


class SandboxConfigError(ValueError):
    """The config cannot be run by the sandbox (verl would refuse it, or the sandbox does not model it)."""


class EmulatedOutOfMemory(RuntimeError):
    """The memory model says this config does not fit the emulated GPU."""


def parse_args(overrides: Sequence[str]) -> tuple[Args, Any]:
    """Load verl's defaults plus ``overrides`` through the advisor's loader and read the keys the sandbox models.

    Raises:
        SandboxConfigError: an error finding (typo, removed key, wrong type), or a value the sandbox cannot run.
        advisor.ConfigError: an override that cannot be parsed.
    """
    from advisor import load_config

    # `sandbox.x=1` is accepted without Hydra's '+' (the key is the sandbox's own, never in verl's defaults)
    overrides = [f"+{o}" if o.startswith("sandbox.") else o for o in overrides]
    cfg = load_config(None, overrides, verl_version=VERL_VERSION)
    errors = [f.message for f in cfg.findings if f.severity == "error"]
    user_sandbox_keys = [s.key for s in cfg.settings if s.key.startswith("sandbox.")]
    for key in user_sandbox_keys:
        if key not in SANDBOX_KEYS:
            close = difflib.get_close_matches(key, sorted(SANDBOX_KEYS), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known: {', '.join(sorted(SANDBOX_KEYS))}"
            errors.append(f"key '{key}' is not a sandbox knob{hint}")
    if errors:
        raise SandboxConfigError("\n".join(errors))
    for finding in cfg.findings:
        if finding.severity == "warning":
            print(f"warning: {finding.message}", file=sys.stderr)
    if cfg.get("algorithm.use_kl_in_reward") and cfg.get("actor_rollout_ref.actor.use_kl_loss"):
        print("NOTICE: You have both enabled in-reward kl and kl loss.", file=sys.stderr)  # verl/utils/config.py

    values: dict[str, Any] = {}
    for f in dataclasses.fields(Args):
        raw = cfg.get(f.metadata["key"], f.default)
        values[f.name] = _coerce(f.metadata["key"], raw, str(f.type))
    if cfg.get("sandbox.policy") is None:
        values["policy"] = os.environ.get(POLICY_ENV) or "lm"
    if values["lr_scale"] is None and values["policy"] in LR_SCALES:
        values["lr_scale"] = LR_SCALES[values["policy"]]
    args = Args(**values)
    _validate(args)
    return args, cfg


def _coerce(key: str, raw: Any, annotation: str) -> Any:
    """Read a config value as the type Args declares for it (OmegaConf gives 1 for a float written as 1)."""
    if raw is None:
        return None
    base = annotation.split("|")[0].strip()
    try:
        if base == "bool":
            if isinstance(raw, str):
                return raw.strip().lower() in ("1", "true", "yes")
            return bool(raw)
        if base.startswith("tuple"):
            items = [raw] if isinstance(raw, str) else list(raw)
            return tuple(float(x) for x in items) if "float" in base else tuple(str(x) for x in items)
        if base == "float":
            return float(raw)
        if base == "int":
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            return int(raw)
    except (TypeError, ValueError) as err:
        raise SandboxConfigError(f"'{key}' is {raw!r}, which the sandbox cannot read as {base}") from err
    return str(raw)


def _validate(args: Args) -> None:
    """The checks verl makes before or at the first step, with verl's wording where verl has one."""
    n_gpus = args.n_gpus_per_node * args.nnodes
    problems: list[str] = []
    if args.policy not in POLICIES:
        problems.append(f"sandbox.policy={args.policy!r}: use lm (the language model) or loglinear")
    if n_gpus < 1:
        problems.append(f"trainer.n_gpus_per_node * trainer.nnodes = {n_gpus}; need at least 1 rank")
    if args.train_batch_size < 1 or args.n < 1:
        problems.append("data.train_batch_size and actor_rollout_ref.rollout.n must be at least 1")
    if args.adv_estimator not in ADV_ESTIMATORS:
        problems.append(f"algorithm.adv_estimator={args.adv_estimator!r} is not modelled by the sandbox; "
                        f"use one of {', '.join(ADV_ESTIMATORS)}")
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


def uses_critic(args: Args) -> bool:
    """verl's need_critic: critic.enable if set, else only for GAE."""
    return bool(args.critic_enable) if args.critic_enable is not None else args.adv_estimator == "gae"


def uses_reference(args: Args) -> bool:
    """verl's need_reference_policy."""
    return args.use_kl_in_reward or args.use_kl_loss


# ================================================================================================================
# THE TASK: one-digit additions answered in gsm8k's "#### <number>" format
# ================================================================================================================

PAD, EOS, MARK, PLUS, EQ = 0, 1, 2, 3, 4
DIGIT0 = 5  # tokens 5..14 are the digits 0..9
FILLER0 = 15  # tokens 15..18 are words: let, me, see, so
VOCAB = ("<pad>", "<eos>", "####", "+", "=", *"0123456789", "let", "me", "see", "so")
V = len(VOCAB)
DATA_SOURCE = "sandbox/add"
# gsm8k's strict extraction (verl/utils/reward_score/gsm8k.py): the last "#### <number>" in the response
ANSWER_PATTERN = re.compile(r"#### (\-?[0-9\.\,]+)")

# Model state before each response token: the context the policy and the critic see besides the prompt.
S_THINK, S_MARK = 0, 1  # before any marker; right after a marker
S_NUM = 2  # S_NUM + v: after "#### v" with v in 0..19
S_OVER, S_AFTER = 22, 23  # a number that cannot be an answer (leading 0, >= 20); text after the answer
N_STATES = 24
N_PAIRS = 101  # a*10+b for the 100 problems, 100 when the prompt was truncated into the equation
N_POS = 32  # positions beyond share the last row


@dataclass
class Prompts:
    """A padded batch of prompts (left-padded, as verl does) and their answers."""

    tokens: np.ndarray  # (N, max_prompt_length) int
    lengths: np.ndarray  # (N,) int
    pair: np.ndarray  # (N,) int: the problem the policy sees (100 = unreadable)
    answer: np.ndarray  # (N,) int


def make_prompts(rng: np.random.Generator, size: int, max_prompt_length: int, truncation: str,
                 filter_overlong: bool) -> Prompts:
    """Generate ``size`` problems "[let me see] a + b =" with a, b in 0..9."""
    a = rng.integers(0, 10, size)
    b = rng.integers(0, 10, size)
    n_words = rng.integers(0, 4, size)
    words = rng.integers(FILLER0, FILLER0 + 4, (size, 3))
    raw = [[*words[i, : n_words[i]], DIGIT0 + a[i], PLUS, DIGIT0 + b[i], EQ] for i in range(size)]
    padded = pad_prompts(raw, a + b, 10 * a + b, max_prompt_length, truncation, filter_overlong)
    out, lengths = padded.tokens, padded.lengths
    # the policy recognises the problem only if "a + b =" survived truncation
    readable = np.zeros(len(out), dtype=bool)
    if max_prompt_length >= 4:
        tail = out[:, -4:]
        readable = ((lengths >= 4) & (tail[:, 1] == PLUS) & (tail[:, 3] == EQ) & (tail[:, 0] >= DIGIT0)
                    & (tail[:, 0] < DIGIT0 + 10) & (tail[:, 2] >= DIGIT0) & (tail[:, 2] < DIGIT0 + 10))
    pair = np.where(readable, padded.pair, N_PAIRS - 1)
    return Prompts(out, lengths, pair.astype(np.int64), padded.answer)


def pad_prompts(raw: list[list[int]], answer: np.ndarray, pair: np.ndarray, max_prompt_length: int,
                truncation: str, filter_overlong: bool) -> Prompts:
    """Token lists -> left-padded prompts, filtered (data.filter_overlong_prompts) or truncated (data.truncation)
    at max_prompt_length as verl's RLHFDataset does."""
    if filter_overlong:
        keep = [i for i, p in enumerate(raw) if len(p) <= max_prompt_length]
        if not keep:
            raise SandboxConfigError(f"data.max_prompt_length={max_prompt_length} filters out every prompt "
                                     f"(the shortest sandbox prompt has {min(len(p) for p in raw)} tokens)")
        raw, answer, pair = [raw[i] for i in keep], answer[keep], pair[keep]
    out = np.full((len(raw), max_prompt_length), PAD, dtype=np.int64)
    lengths = np.zeros(len(raw), dtype=np.int64)
    for i, p in enumerate(raw):
        if len(p) > max_prompt_length:
            if truncation == "left":
                p = p[-max_prompt_length:]
            elif truncation == "right":
                p = p[:max_prompt_length]
            elif truncation == "middle":
                left = max_prompt_length // 2
                p = p[:left] + p[len(p) - (max_prompt_length - left):]
            else:
                raise SandboxConfigError(f"Prompt length {len(p)} is longer than {max_prompt_length}, consider "
                                         "increasing data.max_prompt_length or setting data.truncation")
        out[i, max_prompt_length - len(p):] = p
        lengths[i] = len(p)
    return Prompts(out, lengths, np.asarray(pair, dtype=np.int64), np.asarray(answer, dtype=np.int64))


def lm_prompts(rng: np.random.Generator, size: int, max_prompt_length: int, truncation: str,
               filter_overlong: bool) -> Prompts:
    """``size`` problems of the language model's task (sweeps/_lm_task.py); ``pair`` holds each one's kind."""
    problems = [lm_task.draw_problem(rng, lm_task.TaskMix()) for _ in range(size)]
    raw = [lm_task.prompt_tokens(p, rng) for p in problems]
    return pad_prompts(raw, np.array([p.answer for p in problems]), np.array([p.kind for p in problems]),
                       max_prompt_length, truncation, filter_overlong)


def decode(tokens: Sequence[int] | np.ndarray) -> str:
    """Token ids -> text, skipping special tokens; digits that follow each other form one number."""
    text = ""
    prev_digit = False
    for t in tokens:
        if t in (PAD, EOS):
            continue
        is_digit = DIGIT0 <= t < DIGIT0 + 10
        text += VOCAB[t] if (is_digit and prev_digit) or not text else " " + VOCAB[t]
        prev_digit = is_digit
    return text


def compute_score(responses: np.ndarray, lengths: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """The rule reward: 1.0 if the response ended with EOS and its last '#### <number>' is the answer, else 0.0.

    The extraction is gsm8k's strict one; requiring EOS is the sandbox's rule, so truncation costs the score.
    """
    scores = np.zeros(len(responses))
    for i in range(len(responses)):
        length = int(lengths[i])
        if responses[i, length - 1] != EOS:
            continue
        found = ANSWER_PATTERN.findall(decode(responses[i, :length]))
        if found and found[-1].replace(",", "") == str(int(answers[i])):
            scores[i] = 1.0
    return scores


def next_state(state: np.ndarray, token: np.ndarray) -> np.ndarray:
    """Advance the context state on the emitted tokens (vectorized over the batch)."""
    is_digit = (token >= DIGIT0) & (token < DIGIT0 + 10)
    digit = token - DIGIT0
    value = state - S_NUM
    in_num = (state >= S_NUM) & (state < S_OVER)
    grown = 10 * value + digit
    out = state.copy()
    out[token == MARK] = S_MARK
    out[is_digit & (state == S_MARK)] = (S_NUM + digit)[is_digit & (state == S_MARK)]
    ok = is_digit & in_num & (value > 0) & (grown < 20)
    out[ok] = (S_NUM + grown)[ok]
    out[is_digit & in_num & ~ok] = S_OVER
    words = ~is_digit & (token != MARK) & (token != EOS)
    out[words & (state != S_THINK)] = S_AFTER
    return out


# Row offsets of the model's feature tables inside one parameter matrix (see TokenModel).
OFF_CTX = 0  # (problem, state): what this problem's answer looks like
OFF_SP = OFF_CTX + N_PAIRS * N_STATES  # (state, previous token): the output format
OFF_POS = OFF_SP + N_STATES * V  # (state, position in the response): length habits
OFF_BIAS = OFF_POS + N_STATES * N_POS
N_ROWS = OFF_BIAS + 1


def feature_rows(pair: np.ndarray, state: np.ndarray, prev: np.ndarray, pos: int | np.ndarray) -> np.ndarray:
    """The four parameter rows one token's prediction sums: (..., 4) int."""
    pos_arr = np.minimum(np.broadcast_to(pos, state.shape), N_POS - 1)
    return np.stack([OFF_CTX + pair * N_STATES + state, OFF_SP + state * V + prev,
                     OFF_POS + state * N_POS + pos_arr, np.full_like(state, OFF_BIAS)], axis=-1)


def pretrained_weights(rng: np.random.Generator) -> np.ndarray:
    """The starting policy, standing in for an SFT model: it knows the format and half knows the sums.

    About a third of its sampled answers are right at temperature 1; it wanders for a few words before
    '####', sometimes never writes a number or EOS, and sometimes has a wrong sum in mind.
    """
    w = np.zeros((N_ROWS, V))
    digits, words = slice(DIGIT0, DIGIT0 + 10), slice(FILLER0, FILLER0 + 4)
    w[OFF_BIAS, PAD] = -30.0  # never sampled
    for state in range(N_STATES):
        row = np.zeros(V)
        if state == S_THINK:
            row[words], row[MARK], row[EOS], row[digits], row[[PLUS, EQ]] = 1.6, 0.5, -2.0, -1.0, -2.0
        elif state == S_MARK:
            row[digits], row[EOS], row[MARK], row[words], row[[PLUS, EQ]] = 1.5, -1.5, -2.0, -1.5, -3.0
        elif state == S_OVER:
            row[EOS], row[digits], row[words], row[MARK] = 1.0, -0.5, 0.0, -1.0
        elif state == S_AFTER:
            row[EOS], row[words], row[MARK], row[digits] = 1.5, 0.5, -0.5, -1.0
        else:  # after "#### v"
            row[EOS], row[digits], row[words], row[MARK], row[[PLUS, EQ]] = 1.0, -0.2, -1.0, -2.0, -3.0
        w[OFF_SP + state * V: OFF_SP + (state + 1) * V] += row
    ramp = np.arange(N_POS)
    w[OFF_POS + S_THINK * N_POS + ramp, MARK] += 0.25 * ramp  # the longer it thinks, the likelier '####'
    for state in range(S_MARK, N_STATES):
        w[OFF_POS + state * N_POS + ramp, EOS] += 0.1 * ramp  # and the likelier it stops
    for pair in range(N_PAIRS - 1):
        answer = pair // 10 + pair % 10
        skill = rng.uniform(0.0, 3.0)
        ctx = OFF_CTX + pair * N_STATES
        w[ctx: ctx + N_STATES] += rng.normal(0.0, 0.3, (N_STATES, V))
        first, second = (answer, None) if answer < 10 else (answer // 10, answer % 10)
        w[ctx + S_MARK, DIGIT0 + first] += skill
        w[ctx + S_MARK, DIGIT0 + rng.integers(0, 10)] += rng.uniform(0.0, 2.0)  # a misconception
        if second is None:
            w[ctx + S_NUM + answer, EOS] += skill
        else:
            w[ctx + S_NUM + first, DIGIT0 + second] += 1.0 + skill
            w[ctx + S_NUM + first, EOS] -= 1.0
            w[ctx + S_NUM + answer, EOS] += skill
    return w


# ================================================================================================================
# THE MODEL: a softmax policy and a value head over the same one-hot features
# ================================================================================================================


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def policy_forward(weights: np.ndarray, rows: np.ndarray, temperature: float) -> np.ndarray:
    """log pi(. | context) at the rollout temperature: (..., V). verl's actor divides its logits the same way."""
    return log_softmax(weights[rows].sum(axis=-2) / temperature)


def value_forward(weights: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The critic: a linear value head over the same features."""
    return weights[rows].sum(axis=-1)


# verl's actor and critic with use_remove_padding compute on the response tokens only; so does the sandbox: a
# batch whose longest response hits max_response_length would otherwise spend its time on padding (1.5% of
# responses at 1024 tokens made a 2560-response step 7 s instead of 0.2 s). Padding gets 0, and is masked out.


def token_logprobs(weights: np.ndarray, rows: np.ndarray, tokens: np.ndarray, mask: np.ndarray,
                   temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """log pi(token) and the entropy at each response token (mask > 0): two (N, T) arrays, 0 on padding."""
    live = mask > 0
    logp = policy_forward(weights, rows[live], temperature)
    chosen, entropy = np.zeros(mask.shape), np.zeros(mask.shape)
    chosen[live] = np.take_along_axis(logp, tokens[live][:, None], axis=-1)[:, 0]
    entropy[live] = -(np.exp(logp) * logp).sum(axis=-1)
    return chosen, entropy


def token_values(weights: np.ndarray, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The critic's value at each response token, 0 on padding."""
    values = np.zeros(mask.shape)
    values[mask > 0] = value_forward(weights, rows[mask > 0])
    return values


def scatter_rows(rows: np.ndarray, grad_out: np.ndarray, n_rows: int) -> np.ndarray:
    """Backward of ``weights[rows].sum(-2)``: add each token's gradient into its four rows."""
    flat_rows = rows.reshape(-1, rows.shape[-1])
    if grad_out.ndim == rows.ndim:  # per-token vectors (policy): (..., V)
        width = grad_out.shape[-1]
        g = np.repeat(grad_out.reshape(-1, width), flat_rows.shape[1], axis=0)
        idx = (flat_rows.reshape(-1, 1) * width + np.arange(width)).ravel()
        return np.bincount(idx, weights=g.ravel(), minlength=n_rows * width).reshape(n_rows, width)
    g = np.repeat(grad_out.reshape(-1), flat_rows.shape[1])  # per-token scalars (critic)
    return np.bincount(flat_rows.ravel(), weights=g, minlength=n_rows)


@dataclass
class AdamW:
    """torch.optim.AdamW (decoupled weight decay, bias-corrected moments), on one parameter array."""

    params: np.ndarray
    betas: tuple[float, float]
    weight_decay: float
    eps: float = 1e-8
    step_count: int = 0
    exp_avg: np.ndarray = field(init=False)
    exp_avg_sq: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.exp_avg = np.zeros_like(self.params)
        self.exp_avg_sq = np.zeros_like(self.params)

    def step(self, grad: np.ndarray, lr: float) -> None:
        b1, b2 = self.betas
        self.step_count += 1
        self.params *= 1.0 - lr * self.weight_decay
        self.exp_avg += (1.0 - b1) * (grad - self.exp_avg)
        self.exp_avg_sq = b2 * self.exp_avg_sq + (1.0 - b2) * grad * grad
        bias1 = 1.0 - b1 ** self.step_count
        bias2 = 1.0 - b2 ** self.step_count
        denom = np.sqrt(self.exp_avg_sq) / math.sqrt(bias2) + self.eps
        self.params -= (lr / bias1) * self.exp_avg / denom


def clip_grad_norm(grad: np.ndarray, max_norm: float) -> float:
    """torch.nn.utils.clip_grad_norm_: scale in place to max_norm; return the norm before clipping."""
    total = float(np.sqrt(np.sum(grad * grad)))
    coef = max_norm / (total + 1e-6)
    if coef < 1.0 and math.isfinite(total):
        grad *= coef
    return total


def lr_factor(step: int, warmup: int, total: int, kind: str, min_lr_ratio: float, num_cycles: float) -> float:
    """verl/utils/torch_functional.py get_constant/cosine_schedule_with_warmup, as a multiplier of lr."""
    if step < warmup:
        return float(step) / float(max(1, warmup))
    if kind == "constant":
        return 1.0
    progress = float(step - warmup) / float(max(1, total - warmup))
    coef, intercept = (1 - min_lr_ratio) * 0.5, (1 + min_lr_ratio) * 0.5
    return max(min_lr_ratio, math.cos(math.pi * num_cycles * 2.0 * progress) * coef + intercept)


def warmup_steps(explicit: int, ratio: float, total: int) -> int:
    """fsdp_workers.py: a negative lr_warmup_steps means int(ratio * total)."""
    return int(explicit) if explicit >= 0 else int(ratio * total)


# ================================================================================================================
# ALGO LOGIC: rollout
# ================================================================================================================


@dataclass
class Batch:
    """What verl's DataProto holds for one step, response-side arrays trimmed to the longest response."""

    prompt_len: np.ndarray  # (N,)
    pair: np.ndarray  # (N,)
    answer: np.ndarray  # (N,)
    uid: np.ndarray  # (N,) prompt index: responses to the same prompt share it
    responses: np.ndarray  # (N, T) int, PAD after EOS
    mask: np.ndarray  # (N, T) float: 1 on response tokens incl. EOS
    rows: np.ndarray  # (N, T, 4) feature rows of each response token (log-linear policy; (N, T, 0) for the LM)
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    prompt_tokens: np.ndarray | None = None  # (N, P) left-padded prompt ids (the LM reads its prompt)

    @property
    def response_len(self) -> np.ndarray:
        return self.mask.sum(axis=1).astype(np.int64)

    def select(self, idx: np.ndarray) -> Batch:
        return Batch(self.prompt_len[idx], self.pair[idx], self.answer[idx], self.uid[idx], self.responses[idx],
                     self.mask[idx], self.rows[idx], {k: v[idx] for k, v in self.extra.items()},
                     None if self.prompt_tokens is None else self.prompt_tokens[idx])

    def micro(self, idx: np.ndarray) -> Batch:
        """``select``, trimmed to the micro-batch's own longest response (remove-padding: the rest is padding)."""
        width = max(1, int(self.mask[idx].sum(axis=1).max(initial=0)))
        return Batch(self.prompt_len[idx], self.pair[idx], self.answer[idx], self.uid[idx],
                     self.responses[idx, :width], self.mask[idx, :width], self.rows[idx, :width],
                     {k: v[idx, :width] if v.ndim == 2 else v[idx] for k, v in self.extra.items()},
                     None if self.prompt_tokens is None else self.prompt_tokens[idx])


def sample_tokens(logp: np.ndarray, rng: np.random.Generator, do_sample: bool, top_k: int, top_p: float
                  ) -> np.ndarray:
    """One token per row from log-probs (already at the temperature), with vLLM's top-k then top-p filter."""
    if not do_sample:
        return logp.argmax(axis=-1)
    probs = np.exp(logp)
    if 0 < top_k < probs.shape[-1]:
        kth = -np.sort(-probs, axis=-1)[:, top_k - 1: top_k]
        probs = np.where(probs >= kth, probs, 0.0)
    if top_p < 1.0:
        order = np.argsort(-probs, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(probs, order, axis=-1)
        total = sorted_p.sum(axis=-1, keepdims=True)
        keep_sorted = (np.cumsum(sorted_p, axis=-1) - sorted_p) < top_p * total
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=-1)
        probs = np.where(keep, probs, 0.0)
    cdf = np.cumsum(probs, axis=-1)
    u = rng.random(len(probs))[:, None] * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=-1), probs.shape[-1] - 1)


def generate(weights: np.ndarray, prompts: Prompts, uid: np.ndarray, max_len: int, temperature: float,
             do_sample: bool, top_k: int, top_p: float, rng: np.random.Generator) -> Batch:
    """Sample one response per prompt row, token by token, until EOS or max_len (truncation)."""
    n = len(prompts.pair)
    responses = np.full((n, max_len), PAD, dtype=np.int64)
    rows = np.zeros((n, max_len, 4), dtype=np.int64)
    state = np.full(n, S_THINK, dtype=np.int64)
    prev = prompts.tokens[:, -1].copy()
    active = np.arange(n)
    t = 0
    for t in range(max_len):
        r = feature_rows(prompts.pair[active], state[active], prev[active], t)
        rows[active, t] = r
        logp = policy_forward(weights, r, temperature if do_sample else 1.0)
        tok = sample_tokens(logp, rng, do_sample, top_k, top_p)
        responses[active, t] = tok
        state[active] = next_state(state[active], tok)
        prev[active] = tok
        active = active[tok != EOS]
        if len(active) == 0:
            break
    width = t + 1
    mask = np.zeros((n, width))
    ended = responses[:, :width] == EOS
    first_eos = np.where(ended.any(axis=1), ended.argmax(axis=1) + 1, max_len)
    mask[np.arange(width)[None, :] < first_eos[:, None]] = 1.0
    return Batch(prompts.lengths.copy(), prompts.pair.copy(), prompts.answer.copy(), uid,
                 responses[:, :width], mask, rows[:, :width])


def balance_batch(batch: Batch, n_ranks: int) -> tuple[Batch, dict[str, Any]]:
    """ray_trainer._balance_batch: reorder so each rank gets similar work, and log global_seqlen/*.

    verl partitions with Karmarkar-Karp; the sandbox uses greedy largest-first into equal-size groups.
    """
    seqlen = (batch.prompt_len + batch.response_len).astype(np.int64)
    workload = 24576 * seqlen + seqlen ** 2  # seqlen_balancing.calculate_workload
    size = len(seqlen) // n_ranks
    parts: list[list[int]] = [[] for _ in range(n_ranks)]
    loads = np.zeros(n_ranks)
    for i in sorted(range(len(seqlen)), key=lambda j: (-workload[j], j)):
        open_ranks = [r for r in range(n_ranks) if len(parts[r]) < size]
        r = min(open_ranks, key=lambda k: (loads[k], k))
        parts[r].append(i)
        loads[r] += workload[i]
    for r, part in enumerate(parts):  # smaller micro-batches at both ends (ray_trainer.py)
        part.sort(key=lambda j: (workload[j], j))
        parts[r] = part[::2] + part[1::2][::-1]
    chunks = seqlen.reshape(n_ranks, size).sum(axis=1)
    balanced = [int(seqlen[p].sum()) for p in parts]
    metrics = {"global_seqlen/min": int(chunks.min()), "global_seqlen/max": int(chunks.max()),
               "global_seqlen/minmax_diff": int(chunks.max() - chunks.min()),
               "global_seqlen/balanced_min": min(balanced), "global_seqlen/balanced_max": max(balanced),
               "global_seqlen/mean": float(chunks.sum() / n_ranks)}
    return batch.select(np.array([j for p in parts for j in p])), metrics


# ================================================================================================================
# ALGO LOGIC: KL, loss aggregation and advantages (verl/trainer/ppo/core_algos.py)
# ================================================================================================================


def kl_penalty(logprob: np.ndarray, ref_logprob: np.ndarray, kind: str) -> np.ndarray:
    """core_algos.kl_penalty_forward; see http://joschu.net/blog/kl-approx.html."""
    kind = kind.rstrip("+")
    if kind in ("kl", "k1"):
        return logprob - ref_logprob
    if kind == "abs":
        return np.abs(logprob - ref_logprob)
    if kind in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob) ** 2
    if kind in ("low_var_kl", "k3"):
        kl = np.clip(ref_logprob - logprob, -20, 20)
        return np.clip(np.exp(kl) - kl - 1, -10, 10)
    raise ValueError(f"unknown kl penalty {kind!r}")


def kl_penalty_grad(logprob: np.ndarray, ref_logprob: np.ndarray, kind: str) -> np.ndarray:
    """d kl_penalty / d logprob. A trailing '+' is verl's straight-through trick: k2's gradient."""
    diff = logprob - ref_logprob
    if kind.endswith("+") or kind in ("mse", "k2"):
        return diff
    if kind in ("kl", "k1"):
        return np.ones_like(diff)
    if kind == "abs":
        return np.sign(diff)
    kl = -diff  # low_var_kl: d/dlogp (e^kl - kl - 1) = 1 - e^kl, zero where a clamp is active
    raw = np.exp(np.clip(kl, -20, 20)) - np.clip(kl, -20, 20) - 1
    live = (np.abs(kl) < 20) & (raw > -10) & (raw < 10)
    return np.where(live, 1.0 - np.exp(np.clip(kl, -20, 20)), 0.0)


def masked_mean(values: np.ndarray, mask: np.ndarray) -> float:
    """verl_F.masked_mean (with its 1e-8)."""
    return float((values * mask).sum() / (mask.sum() + 1e-8))


def masked_whiten(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """verl_F.masked_whiten: zero mean, unit (Bessel-corrected) variance over the masked entries."""
    mean = masked_mean(values, mask)
    count = mask.sum()
    var = masked_mean((values - mean) ** 2, mask) * count / (count - 1) if count > 1 else 0.0
    return (values - mean) / np.sqrt(var + 1e-8)


def agg_weights(mask: np.ndarray, mode: str, loss_scale_factor: float | None = None,
                num_tokens: float | None = None, num_seqs: float | None = None) -> np.ndarray:
    """Per-token weights w with agg_loss(loss_mat) = sum(w * loss_mat): core_algos.agg_loss, which is linear.

    ``num_tokens``/``num_seqs`` are the denominators (verl's batch_num_tokens / global_batch_size); left None
    they are those of ``mask`` itself, as in verl's legacy actor.
    """
    seq_tokens = mask.sum(axis=-1, keepdims=True)
    if mode == "token-mean":
        return mask / (mask.sum() if num_tokens is None else num_tokens)
    if mode == "seq-mean-token-sum-norm":
        return mask / (mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)
    seqs = float((seq_tokens > 0).sum()) if num_seqs is None else num_seqs
    if mode == "seq-mean-token-sum":
        return mask / seqs
    if mode == "seq-mean-token-mean":
        return mask / (seq_tokens + 1e-8) / seqs
    raise ValueError(f"Invalid loss_agg_mode: {mode}")


def agg_loss(loss_mat: np.ndarray, mask: np.ndarray, mode: str, loss_scale_factor: float | None = None) -> float:
    """core_algos.agg_loss without global batch info (the legacy actor and the trainer's entropy metric)."""
    return float((agg_weights(mask, mode, loss_scale_factor) * loss_mat).sum())


class AdaptiveKLController:
    """core_algos.AdaptiveKLController (Ziegler et al. 2019, https://arxiv.org/abs/1909.08593)."""

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: int) -> None:
        self.value: Any = init_kl_coef
        self.target, self.horizon = target_kl, horizon

    def update(self, current_kl: float, n_steps: int) -> None:
        proportional_error = np.clip(current_kl / self.target - 1, -0.2, 0.2)
        self.value *= 1 + proportional_error * n_steps / self.horizon


class FixedKLController:
    """core_algos.FixedKLController."""

    def __init__(self, kl_coef: float) -> None:
        self.value: Any = kl_coef

    def update(self, current_kl: float, n_steps: int) -> None:
        pass


def token_level_scores(batch: Batch, scores: np.ndarray) -> np.ndarray:
    """The reward manager puts each sequence's score on its last response token."""
    out = np.zeros_like(batch.mask)
    out[np.arange(len(scores)), batch.response_len - 1] = scores
    return out


def compute_gae_advantage_return(rewards: np.ndarray, values: np.ndarray, mask: np.ndarray, gamma: float,
                                 lam: float) -> tuple[np.ndarray, np.ndarray]:
    """core_algos.compute_gae_advantage_return: GAE over response tokens, then whitened advantages."""
    next_values = np.zeros(len(rewards))
    last_gae = np.zeros(len(rewards))
    advantages = np.zeros_like(rewards)
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_values - values[:, t]
        gae = delta + gamma * lam * last_gae
        next_values = values[:, t] * mask[:, t] + (1 - mask[:, t]) * next_values
        last_gae = gae * mask[:, t] + (1 - mask[:, t]) * last_gae
        advantages[:, t] = last_gae
    returns = advantages + values
    return masked_whiten(advantages, mask), returns


def _group_stats(scores: np.ndarray, uid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-sample group mean, unbiased std and size (verl's id2mean / id2std; a group of 1 gets 0 and 1)."""
    _, inverse, counts = np.unique(uid, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=scores)
    mean = sums / counts
    sq = np.bincount(inverse, weights=(scores - mean[inverse]) ** 2)
    std = np.sqrt(sq / np.maximum(counts - 1, 1))
    single = counts == 1
    mean[single], std[single] = 0.0, 1.0
    return mean[inverse], std[inverse], counts[inverse]


def compute_advantage(batch: Batch, rewards: np.ndarray, args: Args) -> tuple[np.ndarray, np.ndarray]:
    """ray_trainer.compute_advantage for the estimators the sandbox models."""
    mask = batch.mask
    if args.adv_estimator == "gae":
        return compute_gae_advantage_return(rewards, batch.extra["values"], mask, args.gamma, args.lam)
    scores = rewards.sum(axis=-1)
    if args.adv_estimator in ("grpo", "grpo_vectorized"):
        mean, std, _ = _group_stats(scores, batch.uid)
        adv = (scores - mean) / (std + 1e-6) if args.norm_adv_by_std_in_grpo else scores - mean
        out = adv[:, None] * mask
        return out, out
    if args.adv_estimator == "rloo":
        mean, _, count = _group_stats(scores, batch.uid)
        multi = count > 1
        adv = np.where(multi, (scores - mean) * count / np.maximum(count - 1, 1), scores)
        out = adv[:, None] * mask
        return out, out
    if args.adv_estimator == "reinforce_plus_plus_baseline":
        mean, _, _ = _group_stats(scores, batch.uid)
        out = np.broadcast_to((scores - mean)[:, None], mask.shape) * mask
        out = masked_whiten(out, mask) * mask
        return out, out
    # reinforce_plus_plus: discounted returns that restart after EOS, whitened
    returns = np.zeros_like(rewards)
    running = np.zeros(len(rewards))
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + args.gamma * running
        returns[:, t] = running
        running = running * mask[:, t]
    return masked_whiten(returns, mask) * mask, returns


# ================================================================================================================
# ALGO LOGIC: actor and critic updates (verl/workers/actor/dp_actor.py, verl/workers/critic/dp_critic.py)
# ================================================================================================================


def rank_mini_micro_batches(n_samples: int, n_ranks: int, mini_per_rank: int, micro_per_rank: int | None,
                            token_counts: np.ndarray | None = None, max_token_len: int | None = None
                            ) -> list[list[list[np.ndarray]]]:
    """The index layout of one update: [mini-batch][rank] -> micro-batches of sample indices.

    Each rank holds a contiguous 1/n_ranks of the batch (verl's dispatch), splits it into mini-batches of
    mini_per_rank samples and those into micro-batches (fixed size, or packed by tokens with use_dynamic_bsz).
    """
    per_rank = n_samples // n_ranks
    n_mini = -(-per_rank // mini_per_rank)
    layout: list[list[list[np.ndarray]]] = []
    for k in range(n_mini):
        ranks = []
        for r in range(n_ranks):
            lo = r * per_rank + k * mini_per_rank
            idx = np.arange(lo, min(lo + mini_per_rank, (r + 1) * per_rank))
            ranks.append(idx)
        if token_counts is not None and max_token_len is not None:
            # prepare_dynamic_batch: as many micro-batches as the token budget needs, the max over ranks
            n_micro = max(min(len(i), -(-int(token_counts[i].sum()) // max_token_len)) for i in ranks)
            layout.append([np.array_split(i, max(1, n_micro)) for i in ranks])
        else:
            size = micro_per_rank or mini_per_rank
            layout.append([[i[j: j + size] for j in range(0, len(i), size)] for i in ranks])
    return layout


def update_layout(batch: Batch, n_ranks: int, mini_responses: int, micro_per_gpu: int | None,
                  micro_global: int | None, max_token_len: int | None) -> list[list[list[np.ndarray]]]:
    """The layout of one actor or critic update: a mini-batch of ``mini_responses`` split over the ranks, micro-
    batches per GPU (the deprecated global size divided by the ranks, as verl's workers do), or packed by tokens
    when ``max_token_len`` is given (use_dynamic_bsz)."""
    if micro_per_gpu is None and micro_global is not None:
        micro_per_gpu = micro_global // n_ranks
    return rank_mini_micro_batches(len(batch.uid), n_ranks, mini_responses // n_ranks, micro_per_gpu,
                                   batch.prompt_len + batch.response_len, max_token_len)


@dataclass
class ActorLoss:
    """One micro-batch's contribution: gradient, loss sums and verl's per-micro-batch metrics."""

    grad: np.ndarray
    loss: float  # what was differentiated: pg - entropy_coeff * entropy + kl_loss_coef * kl
    pg_loss: float
    kl_loss: float
    metrics: dict[str, float]


def actor_micro_batch(weights: np.ndarray, mb: Batch, token_weights: np.ndarray, args: Args, on_policy: bool
                      ) -> ActorLoss:
    """Forward + backward of verl's actor loss on one micro-batch.

    loss = sum(w * pg) - entropy_coeff * sum(w * H) + kl_loss_coef * sum(w * kl(logp, ref)), where w are the
    mini-batch's aggregation weights (compute_policy_loss_vanilla with dual clip, dp_actor.update_policy).
    """
    mask = mb.mask
    logp_all = policy_forward(weights, mb.rows, args.temperature)  # (n, T, V)
    probs = np.exp(logp_all)
    logp = np.take_along_axis(logp_all, mb.responses[..., None], axis=-1)[..., 0]
    old = logp.copy() if on_policy else mb.extra["old_log_probs"]  # dp_actor: on-policy uses detached logp
    adv = mb.extra["advantages"]

    neg_kl = np.clip(logp - old, -20.0, 20.0)
    ratio = np.exp(neg_kl)
    low = args.clip_ratio_low if args.clip_ratio_low is not None else args.clip_ratio
    high = args.clip_ratio_high if args.clip_ratio_high is not None else args.clip_ratio
    loss1 = -adv * ratio
    loss2 = -adv * np.clip(ratio, 1 - low, 1 + high)
    clipped = loss2 > loss1
    loss_max = np.maximum(loss1, loss2)
    loss3 = -adv * args.clip_ratio_c
    dual = (adv < 0) & (loss3 < loss_max)
    pg_losses = np.where(dual, loss3, loss_max)
    metrics = {"actor/pg_clipfrac": masked_mean(clipped.astype(float), mask),
               "actor/ppo_kl": masked_mean(-neg_kl, mask),
               "actor/pg_clipfrac_lower": masked_mean(((loss_max > loss3) & (adv < 0)).astype(float), mask)}
    # d pg_loss / d logp: -A * ratio on the unclipped branch, 0 where a clip (or the +-20 clamp) is active
    live = ~clipped & ~dual & (np.abs(logp - old) < 20.0)
    d_logp = token_weights * np.where(live, -adv * ratio, 0.0)
    pg_loss = float((token_weights * pg_losses).sum())
    loss = pg_loss

    d_logits = np.zeros_like(logp_all)
    calc_entropy = args.calculate_entropy or args.entropy_coeff != 0
    if calc_entropy:
        entropy = -(probs * logp_all).sum(axis=-1)
        metrics["actor/entropy"] = agg_loss(entropy, mask, args.loss_agg_mode, args.loss_scale_factor)
        if args.entropy_coeff != 0:
            loss -= args.entropy_coeff * float((token_weights * entropy).sum())
            # d(-c * sum w H)/dz = c * w * p * (log p + H)
            d_logits += args.entropy_coeff * token_weights[..., None] * probs * (logp_all + entropy[..., None])
    kl_loss = 0.0
    if args.use_kl_loss:
        ref = mb.extra["ref_log_prob"]
        kld = kl_penalty(logp, ref, args.kl_loss_type)
        kl_loss = float((token_weights * kld).sum())
        loss += args.kl_loss_coef * kl_loss
        d_logp = d_logp + args.kl_loss_coef * token_weights * kl_penalty_grad(logp, ref, args.kl_loss_type)
        metrics["actor/kl_coef"] = args.kl_loss_coef
    onehot = np.zeros_like(logp_all)
    np.put_along_axis(onehot, mb.responses[..., None], 1.0, axis=-1)
    d_logits += d_logp[..., None] * (onehot - probs)
    d_logits /= args.temperature
    grad = scatter_rows(mb.rows, d_logits * mask[..., None], len(weights))
    return ActorLoss(grad, loss, pg_loss, kl_loss, metrics)


def mini_batch_weights(mask: np.ndarray, mode: str, loss_scale_factor: float | None, response_width: int
                       ) -> np.ndarray:
    """Aggregation weights over a whole mini-batch (all ranks), so every micro-batch layout gives one update.

    As verl's engine path passes global batch_num_tokens / global_batch_size into agg_loss. For
    seq-mean-token-sum-norm the sum is divided by (loss_scale_factor or max_response_length) x sequences,
    which is what verl's legacy actor computes with one sample per micro-batch.
    """
    if mode == "seq-mean-token-sum-norm":
        seqs = float((mask.sum(axis=-1) > 0).sum())
        scale = loss_scale_factor if loss_scale_factor is not None else response_width
        return mask / (scale * seqs)
    return agg_weights(mask, mode)


def update_policy(weights: np.ndarray, optimizer: AdamW, batch: Batch, args: Args, lr: float, n_ranks: int
                  ) -> dict[str, Any]:
    """dp_actor.update_policy: ppo_epochs x mini-batches, gradient accumulation over micro-batches, one clipped
    AdamW step per mini-batch. Returns verl's reduced metrics (lists averaged, pg/kl loss the mean mini-batch loss,
    as verl >= 0.8 logs them)."""
    layout = update_layout(batch, n_ranks, args.ppo_mini_batch_size * args.n, args.ppo_micro_batch_size_per_gpu,
                           args.ppo_micro_batch_size, args.ppo_max_token_len_per_gpu if args.use_dynamic_bsz else None)
    on_policy = len(layout) == 1 and args.ppo_epochs == 1
    width = args.max_response_length
    lists: dict[str, list[float]] = {}
    pg_total, kl_total = 0.0, 0.0
    for _ in range(args.ppo_epochs):
        for ranks in layout:
            mini_idx = np.concatenate([np.concatenate(micros) for micros in ranks])
            w_mini = mini_batch_weights(batch.mask[mini_idx], args.loss_agg_mode, args.loss_scale_factor, width)
            grad = np.zeros_like(weights)
            for mb, w_micro in _micro_batches(batch, ranks, w_mini):
                out = actor_micro_batch(weights, mb, w_micro, args, on_policy)
                grad += out.grad
                pg_total += out.pg_loss
                kl_total += out.kl_loss
                for k, v in out.metrics.items():
                    lists.setdefault(k, []).append(v)
            grad_norm = clip_grad_norm(grad, args.grad_clip)
            if math.isfinite(grad_norm):
                optimizer.step(grad, lr)
            else:
                print(f"WARN: rank 0 grad_norm is not finite: {grad_norm}", file=sys.stderr)
            lists.setdefault("actor/grad_norm", []).extend([grad_norm] * n_ranks)
    # verl >= 0.8 logs the mean mini-batch loss of the update (0.9.1 verl/workers/utils/losses.py:73-81,
    # verl/utils/metric/utils.py:150-154); 0.7's legacy actor summed them (advisor/metrics/_loss_sums.py)
    updates = max(1, args.ppo_epochs * len(layout))
    metrics: dict[str, Any] = {"actor/pg_loss": np.float64(pg_total / updates)}
    if args.use_kl_loss:  # verl logs kl_loss only with the KL loss on (losses.py:132-142 at main 1dda039b)
        metrics["actor/kl_loss"] = np.float64(kl_total / updates)
    metrics.update({k: _reduce(k, v) for k, v in lists.items()})
    return metrics


def _micro_batches(batch: Any, ranks: Any, w_mini: np.ndarray) -> Iterator[tuple[Any, np.ndarray]]:
    """Each rank's micro batches of one mini batch, in order, with their rows of the mini batch's loss weights
    (``w_mini`` is laid out rank by rank, micro batch by micro batch), trimmed to the micro batch's width."""
    offset = 0
    for micros in ranks:
        for idx in micros:
            mb = batch.micro(idx)
            yield mb, w_mini[offset: offset + len(idx), :mb.mask.shape[1]]
            offset += len(idx)


def _reduce(key: str, values: list[float]) -> np.floating[Any]:
    """verl/utils/metric/utils.py reduce_metrics: max if the name says max, min if min, else mean."""
    if "max" in key:
        return np.max(values)
    if "min" in key:
        return np.min(values)
    return np.mean(values)


def critic_micro_batch(weights: np.ndarray, mb: Batch, token_weights: np.ndarray, cliprange_value: float
                       ) -> tuple[np.ndarray, float, dict[str, float]]:
    """core_algos.compute_value_loss (clipped, 0.5 x agg of the max of both squared errors) and its gradient."""
    vpreds = value_forward(weights, mb.rows)
    values, returns = mb.extra["values"], mb.extra["returns"]
    clipped_v = np.clip(vpreds, values - cliprange_value, values + cliprange_value)
    loss1 = (vpreds - returns) ** 2
    loss2 = (clipped_v - returns) ** 2
    vf_loss = 0.5 * float((token_weights * np.maximum(loss1, loss2)).sum())
    clip_used = loss2 > loss1
    d_v = np.where(clip_used, 0.0, token_weights * (vpreds - returns))
    grad = scatter_rows(mb.rows, d_v * mb.mask, len(weights))
    metrics = {"critic/vf_clipfrac": masked_mean(clip_used.astype(float), mb.mask),
               "critic/vpred_mean": masked_mean(vpreds, mb.mask)}
    return grad, vf_loss, metrics


def update_critic(weights: np.ndarray, optimizer: AdamW, batch: Batch, args: Args, lr: float, n_ranks: int
                  ) -> dict[str, Any]:
    """dp_critic.update_critic, with the same layout and aggregation rules as the actor."""
    layout = update_layout(batch, n_ranks, args.critic_ppo_mini_batch_size * args.n,
                           args.critic_ppo_micro_batch_size_per_gpu, args.critic_ppo_micro_batch_size,
                           args.critic_ppo_max_token_len_per_gpu if args.critic_use_dynamic_bsz else None)
    lists: dict[str, list[float]] = {}
    vf_total = 0.0
    for _ in range(args.critic_ppo_epochs):
        for ranks in layout:
            mini_idx = np.concatenate([np.concatenate(micros) for micros in ranks])
            # compute_value_loss passes no loss_scale_factor: seq-mean-token-sum-norm divides by the width
            w_mini = mini_batch_weights(batch.mask[mini_idx], args.critic_loss_agg_mode, None,
                                        args.max_response_length)
            grad = np.zeros_like(weights)
            for mb, w_micro in _micro_batches(batch, ranks, w_mini):
                g, loss, m = critic_micro_batch(weights, mb, w_micro, args.cliprange_value)
                grad += g
                vf_total += loss
                for k, v in m.items():
                    lists.setdefault(k, []).append(v)
            grad_norm = clip_grad_norm(grad, args.critic_grad_clip)
            if math.isfinite(grad_norm):
                optimizer.step(grad, lr)
            lists.setdefault("critic/grad_norm", []).extend([grad_norm] * n_ranks)
    updates = max(1, args.critic_ppo_epochs * len(layout))
    metrics: dict[str, Any] = {"critic/vf_loss": np.float64(vf_total / updates)}  # the mean, as in verl >= 0.8
    metrics.update({k: _reduce(k, v) for k, v in lists.items()})
    return metrics


# ================================================================================================================
# THE POLICIES behind one interface: the log-linear one above, the language model (sweeps/_lm_trainer.py)
# ================================================================================================================


class Policy(Protocol):
    """What the training loop asks of a policy: rollout, score, log-probs, values, the two updates."""

    def generate(self, prompts: Prompts, uid: np.ndarray, max_len: int, temperature: float, do_sample: bool,
                 top_k: int, top_p: float, rng: np.random.Generator) -> Batch: ...

    def score(self, batch: Batch) -> np.ndarray: ...

    def log_probs(self, batch: Batch, temperature: float, reference: bool = False
                  ) -> tuple[np.ndarray, np.ndarray]: ...

    def values(self, batch: Batch) -> np.ndarray: ...

    def update_policy(self, batch: Batch, args: Args, lr: float, n_ranks: int) -> dict[str, Any]: ...

    def update_critic(self, batch: Batch, args: Args, lr: float, n_ranks: int) -> dict[str, Any]: ...

    def sync_rollout(self) -> None: ...

    def prompt_text(self, batch: Batch, i: int) -> str: ...

    def response_text(self, tokens: np.ndarray) -> str: ...


class LogLinearPolicy:
    """The log-linear policy and its linear critic, with a rollout copy synced after each actor update."""

    def __init__(self, args: Args, init_rng: np.random.Generator) -> None:
        self.actor = pretrained_weights(init_rng)
        self.reference = self.actor.copy()
        self.rollout = self.actor.copy()
        self.critic = np.zeros(N_ROWS)
        self.actor_opt = AdamW(self.actor, (args.betas[0], args.betas[1]), args.weight_decay)
        self.critic_opt = AdamW(self.critic, (args.critic_betas[0], args.critic_betas[1]), args.critic_weight_decay)

    def generate(self, prompts: Prompts, uid: np.ndarray, max_len: int, temperature: float, do_sample: bool,
                 top_k: int, top_p: float, rng: np.random.Generator) -> Batch:
        return generate(self.rollout, prompts, uid, max_len, temperature, do_sample, top_k, top_p, rng)

    def score(self, batch: Batch) -> np.ndarray:
        return compute_score(batch.responses, batch.response_len, batch.answer)

    def log_probs(self, batch: Batch, temperature: float, reference: bool = False) -> tuple[np.ndarray, np.ndarray]:
        return token_logprobs(self.reference if reference else self.actor, batch.rows, batch.responses, batch.mask,
                              temperature)

    def values(self, batch: Batch) -> np.ndarray:
        return token_values(self.critic, batch.rows, batch.mask)

    def update_policy(self, batch: Batch, args: Args, lr: float, n_ranks: int) -> dict[str, Any]:
        return update_policy(self.actor, self.actor_opt, batch, args, lr, n_ranks)

    def update_critic(self, batch: Batch, args: Args, lr: float, n_ranks: int) -> dict[str, Any]:
        return update_critic(self.critic, self.critic_opt, batch, args, lr, n_ranks)

    def sync_rollout(self) -> None:
        np.copyto(self.rollout, self.actor)

    def prompt_text(self, batch: Batch, i: int) -> str:
        a, b = divmod(int(batch.pair[i]), 10)
        return f"{a} + {b} =" if batch.pair[i] < N_PAIRS - 1 else "(truncated)"

    def response_text(self, tokens: np.ndarray) -> str:
        return decode(tokens)


def make_policy(args: Args, init_rng: np.random.Generator, use_critic: bool, use_ref: bool) -> Policy:
    if args.policy == "lm":
        from .lm_trainer import LMPolicy  # torch: imported only when the language model runs

        return LMPolicy(args, use_critic, use_ref, Batch, update_layout, _reduce)
    return LogLinearPolicy(args, init_rng)


def task_prompts(args: Args, rng: np.random.Generator, size: int) -> Prompts:
    """The policy's task: its training or validation prompts under the config's data rules."""
    make = lm_prompts if args.policy == "lm" else make_prompts
    return make(rng, size, args.max_prompt_length, args.truncation, args.filter_overlong_prompts)


# ================================================================================================================
# METRICS (verl/trainer/ppo/metric_utils.py) and VALIDATION
# ================================================================================================================


def compute_data_metrics(batch: Batch, use_critic: bool, max_prompt_length: int, max_response_length: int
                         ) -> dict[str, Any]:
    """metric_utils.compute_data_metrics."""
    mask = batch.mask.astype(bool)
    score = batch.extra["token_level_scores"].sum(axis=-1)
    reward = batch.extra["token_level_rewards"].sum(axis=-1)
    adv = batch.extra["advantages"][mask]
    ret = batch.extra["returns"][mask]
    resp_len = batch.response_len.astype(float)
    prompt_len = batch.prompt_len.astype(float)
    live = resp_len > 0
    out: dict[str, Any] = {
        "critic/score/mean": float(score[live].mean()), "critic/score/max": float(score[live].max()),
        "critic/score/min": float(score[live].min()),
        "critic/rewards/mean": float(reward[live].mean()), "critic/rewards/max": float(reward[live].max()),
        "critic/rewards/min": float(reward[live].min()),
        "critic/advantages/mean": float(adv.mean()), "critic/advantages/max": float(adv.max()),
        "critic/advantages/min": float(adv.min()),
        "critic/returns/mean": float(ret.mean()), "critic/returns/max": float(ret.max()),
        "critic/returns/min": float(ret.min()),
    }
    if use_critic:
        values = batch.extra["values"][mask]
        out.update({
            "critic/values/mean": float(values.mean()), "critic/values/max": float(values.max()),
            "critic/values/min": float(values.min()),
            # torch.var is Bessel-corrected
            "critic/vf_explained_var": float(1.0 - np.var(ret - values, ddof=1) / (np.var(ret, ddof=1) + 1e-5)),
        })
    out.update({
        "response_length/mean": float(resp_len.mean()), "response_length/max": float(resp_len.max()),
        "response_length/min": float(resp_len.min()),
        "response_length/clip_ratio": float(np.mean(resp_len == max_response_length)),
        "response_length_non_aborted/mean": float(resp_len[live].mean()),
        "response_length_non_aborted/max": float(resp_len[live].max()),
        "response_length_non_aborted/min": float(resp_len[live].min()),
        "response_length_non_aborted/clip_ratio": float(np.mean(resp_len[live] == max_response_length)),
        "response/aborted_ratio": float(np.mean(~live)),
        "prompt_length/mean": float(prompt_len.mean()), "prompt_length/max": float(prompt_len.max()),
        "prompt_length/min": float(prompt_len.min()),
        "prompt_length/clip_ratio": float(np.mean(prompt_len == max_prompt_length)),
    })
    return out


def compute_timing_metrics(batch: Batch, timing_raw: dict[str, float]) -> dict[str, Any]:
    """metric_utils.compute_timing_metrics: seconds per stage, and ms per token for the token-bound stages."""
    n_resp = int(batch.response_len.sum())
    n_all = n_resp + int(batch.prompt_len.sum())
    tokens = {"gen": n_resp, **{k: n_all for k in ("ref", "values", "adv", "update_critic", "update_actor")}}
    out: dict[str, Any] = {f"timing_s/{k}": v for k, v in timing_raw.items()}
    out.update({f"timing_per_token_ms/{k}": timing_raw[k] * 1000 / tokens[k] for k in tokens if k in timing_raw})
    return out


def compute_throughput_metrics(batch: Batch, timing_raw: dict[str, float], n_gpus: int) -> dict[str, Any]:
    """metric_utils.compute_throughout_metrics: tokens (prompt + response) per second per GPU."""
    total = int(batch.prompt_len.sum() + batch.response_len.sum())
    step_s = timing_raw["step"]
    return {"perf/total_num_tokens": total, "perf/time_per_step": step_s,
            "perf/throughput": total / (step_s * n_gpus)}


def validation_metrics(policy: Policy | np.ndarray, val: Prompts, args: Args, rng: np.random.Generator
                       ) -> dict[str, Any]:
    """ray_trainer._validate + process_validation_metrics for the reward variable: mean@N (val-core), std@N.
    ``policy`` may be the log-linear policy's weights."""
    n = args.val_n
    rep = _repeat(val, n)
    uid = np.repeat(np.arange(len(val.pair)), n)
    do_sample = args.val_do_sample and args.val_temperature > 0
    if isinstance(policy, np.ndarray):
        weights, policy = policy, LogLinearPolicy.__new__(LogLinearPolicy)
        policy.rollout = weights
    out = policy.generate(rep, uid, args.max_response_length, args.val_temperature if do_sample else 1.0,
                          do_sample, args.val_top_k, args.val_top_p, rng)
    scores = policy.score(out).reshape(-1, n)
    metrics: dict[str, Any] = {f"val-core/{DATA_SOURCE}/reward/mean@{n}": np.mean(scores.mean(axis=1))}
    if n > 1:
        metrics[f"val-aux/{DATA_SOURCE}/reward/std@{n}"] = np.mean(scores.std(axis=1))
    return metrics


def _repeat(prompts: Prompts, n: int) -> Prompts:
    """DataProto.repeat(n, interleave=True)."""
    return Prompts(np.repeat(prompts.tokens, n, axis=0), np.repeat(prompts.lengths, n),
                   np.repeat(prompts.pair, n), np.repeat(prompts.answer, n))


def _take(prompts: Prompts, idx: np.ndarray) -> Prompts:
    return Prompts(prompts.tokens[idx], prompts.lengths[idx], prompts.pair[idx], prompts.answer[idx])


# ================================================================================================================
# LOGGERS (verl/utils/tracking.py, verl/utils/logger/aggregate_logger.py)
# ================================================================================================================


def console_line(data: dict[str, Any], step: int) -> str:
    """aggregate_logger.concat_dict_to_str: 'step:N - key:pformat(value) - ...', numbers only."""
    parts = [f"step:{step}"]
    parts += [f"{k}:{pprint.pformat(v)}" for k, v in data.items() if isinstance(v, numbers.Number)]
    return " - ".join(parts)


def _json_value(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (numbers.Integral, np.integer)):
        return int(v)
    if isinstance(v, (numbers.Real, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None  # orjson writes NaN and +-inf as null
    return v


def jsonl_line(data: dict[str, Any], step: int) -> str:
    """tracking.FileLogger: one compact JSON object per log call."""
    payload = {"step": step, "data": {k: _json_value(v) for k, v in data.items()}}
    return json.dumps(payload, separators=(",", ":"), allow_nan=False)


def file_logger_path(project_name: str, experiment_name: str) -> Path:
    """tracking.FileLogger: $VERL_FILE_LOGGER_PATH, else $VERL_FILE_LOGGER_ROOT (or .)/project/experiment.jsonl."""
    explicit = os.environ.get("VERL_FILE_LOGGER_PATH")
    if explicit:
        return Path(explicit)
    root = Path(os.path.expanduser(os.environ.get("VERL_FILE_LOGGER_ROOT", ".")))
    return root / project_name / f"{experiment_name}.jsonl"


class Tracking:
    """The backends the sandbox can write: console (stdout) and file (JSONL). Others are skipped with a note."""

    def __init__(self, args: Args, echo: bool) -> None:
        backends = list(args.logger)
        self.console = echo and "console" in backends
        self.fp = None
        if "file" in backends or os.environ.get("VERL_FILE_LOGGER_PATH"):
            path = file_logger_path(args.project_name, args.experiment_name)
            path.parent.mkdir(parents=True, exist_ok=True)
            if echo and not os.environ.get("VERL_FILE_LOGGER_PATH"):  # verl says so only for a derived path
                print(f"Creating file logger at {path}", file=sys.stderr)
            self.fp = path.open("w", encoding="utf-8")
        skipped = [b for b in backends if b not in ("console", "file")]
        if skipped and echo:
            print(f"sandbox: logger backend(s) {', '.join(skipped)} are not available in the sandbox; skipped",
                  file=sys.stderr)
        self.history: list[tuple[int, dict[str, Any]]] = []

    def log(self, data: dict[str, Any], step: int) -> None:
        self.history.append((step, data))
        if self.console:
            print(console_line(data, step), flush=True)
        if self.fp is not None:
            self.fp.write(jsonl_line(data, step) + "\n")
            self.fp.flush()

    def finish(self) -> None:
        if self.fp is not None:
            self.fp.close()


# ================================================================================================================
# MEMORY EMULATION HOOK (advisor.memory; wired and tested by the lead once it is merged)
# ================================================================================================================


def emulate_memory(cfg: Any, args: Args) -> float | None:
    """Peak GPU memory (GiB) of the training process as the advisor's memory model predicts it.

    Returns None without +sandbox.emulate_model/emulate_gpu. Raises EmulatedOutOfMemory with verl's (torch's)
    message when the model's verdict is 'oom', and SandboxConfigError when advisor.memory is missing.
    """
    if not args.emulate_model:
        return None
    try:
        from advisor.memory import estimate_memory
    except ImportError as err:
        raise SandboxConfigError("+sandbox.emulate_model/emulate_gpu need the advisor's memory model "
                                 "(advisor.memory), which this checkout does not have") from err
    estimate = estimate_memory(cfg, model=args.emulate_model, gpu=args.emulate_gpu)
    stages = list(estimate.stages)
    peak = max(stages, key=lambda s: s.peak_gib)
    if estimate.verdict == "tight":
        print(f"sandbox: the memory model calls {args.emulate_model} on {args.emulate_gpu} tight "
              f"(peak {peak.peak_gib:.1f} GiB in stage '{peak.stage}')", file=sys.stderr)
    if estimate.verdict == "oom":
        worst = max(stages, key=lambda s: s.peak_gib - s.capacity_gib)
        need = worst.peak_gib - worst.capacity_gib
        raise EmulatedOutOfMemory(
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {need:.2f} GiB. GPU 0 has a total "
            f"capacity of {worst.capacity_gib:.2f} GiB of which 0 bytes is free. (sandbox emulation of "
            f"{args.emulate_model} on {args.emulate_gpu}: stage '{worst.stage}' needs {worst.peak_gib:.2f} GiB)")
    return float(peak.peak_gib)


# ================================================================================================================
# MAIN
# ================================================================================================================


@contextmanager
def marked_timer(name: str, timing_raw: dict[str, float], fixed: bool) -> Iterator[None]:
    """verl's marked_timer: wall seconds of a stage (or a fixed 1 ms with +sandbox.deterministic_timing)."""
    start = time.perf_counter()
    yield
    timing_raw[name] = 0.001 if fixed else time.perf_counter() - start


def train(args: Args, cfg: Any = None, *, echo: bool = True) -> list[tuple[int, dict[str, Any]]]:
    """Run the loop of RayPPOTrainer.fit; return the logged (step, metrics) records.

    Raises:
        EmulatedOutOfMemory: the memory emulation says the config does not fit.
    """
    # TRY NOT TO MODIFY: seeding
    seed = args.seed if args.seed is not None else args.data_loader_seed
    streams = np.random.SeedSequence(seed).spawn(5)
    data_rng, init_rng, rollout_rng, val_rng, shuffle_rng = (np.random.default_rng(s) for s in streams)

    n_ranks = args.n_gpus_per_node * args.nnodes
    use_critic, use_ref = uses_critic(args), uses_reference(args)

    # task setup
    train_set = task_prompts(args, data_rng, args.train_size)
    val_set = task_prompts(args, data_rng, args.val_size)
    steps_per_epoch = len(train_set.pair) // args.train_batch_size
    if steps_per_epoch == 0:
        raise SandboxConfigError(f"data.train_batch_size={args.train_batch_size} is larger than the "
                                 f"{len(train_set.pair)} prompts left after filtering")
    total_steps = args.total_training_steps or steps_per_epoch * args.total_epochs

    # model setup: actor, frozen reference, the rollout engine's copy, critic
    policy = make_policy(args, init_rng, use_critic, use_ref)
    actor_warmup = warmup_steps(args.lr_warmup_steps or 0, args.lr_warmup_steps_ratio, total_steps)
    critic_warmup = warmup_steps(args.critic_lr_warmup_steps or 0, args.critic_lr_warmup_steps_ratio, total_steps)
    actor_sched_step, critic_sched_step = 0, 0
    kl_ctrl: AdaptiveKLController | FixedKLController = (
        AdaptiveKLController(args.kl_coef, args.target_kl, args.kl_horizon) if args.kl_ctrl_type == "adaptive"
        else FixedKLController(args.kl_coef))
    peak_memory_gib = emulate_memory(cfg, args)
    lr_scale = args.lr_scale if args.lr_scale is not None else LR_SCALES[args.policy]
    fixed_timing = args.deterministic_timing

    logger = Tracking(args, echo)
    global_step = 0
    if args.val_before_train:
        logger.log(validation_metrics(policy, val_set, args, val_rng), step=global_step)
    global_step = 1
    try:
        for epoch in range(args.total_epochs):
            order = shuffle_rng.permutation(len(train_set.pair)) if args.shuffle else np.arange(len(train_set.pair))
            for b in range(steps_per_epoch):
                inject_before_step(args, kl_ctrl, global_step)
                metrics: dict[str, Any] = {}
                timing_raw: dict[str, float] = {}
                is_last_step = global_step >= total_steps
                prompt_idx = order[b * args.train_batch_size: (b + 1) * args.train_batch_size]
                prompts = _repeat(_take(train_set, prompt_idx), args.n)
                uid = np.repeat(np.arange(len(prompt_idx)), args.n)
                step_start = time.perf_counter()
                # ALGO LOGIC: rollout and reward
                with marked_timer("gen", timing_raw, fixed_timing):
                    batch = policy.generate(prompts, uid, args.max_response_length, args.temperature,
                                            args.do_sample, args.top_k, args.top_p, rollout_rng)
                with marked_timer("reward", timing_raw, fixed_timing):
                    scores = policy.score(batch)
                    scores = scores_after_fault(args, global_step, scores)
                    batch.extra["scores"] = scores
                if args.balance_batch:
                    batch, seqlen_metrics = balance_batch(batch, n_ranks)
                    metrics.update(seqlen_metrics)
                # ALGO LOGIC: old log-probs (and the pre-update entropy), reference, values
                with marked_timer("old_log_prob", timing_raw, fixed_timing):
                    batch.extra["old_log_probs"], entropy = policy.log_probs(batch, args.temperature)
                    metrics["actor/entropy"] = agg_loss(entropy, batch.mask, args.loss_agg_mode,
                                                        args.loss_scale_factor)
                if use_ref:
                    with marked_timer("ref", timing_raw, fixed_timing):
                        batch.extra["ref_log_prob"] = policy.log_probs(batch, args.temperature, reference=True)[0]
                if use_critic:
                    with marked_timer("values", timing_raw, fixed_timing):
                        batch.extra["values"] = policy.values(batch)
                # ALGO LOGIC: rewards (with the reward-side KL) and advantages
                with marked_timer("adv", timing_raw, fixed_timing):
                    scores_tok = token_level_scores(batch, batch.extra["scores"])
                    batch.extra["token_level_scores"] = scores_tok
                    if args.use_kl_in_reward:
                        kld = kl_penalty(batch.extra["old_log_probs"], batch.extra["ref_log_prob"],
                                         args.kl_penalty) * batch.mask
                        beta = kl_ctrl.value
                        batch.extra["token_level_rewards"] = scores_tok - beta * kld
                        seq_kl = (kld * batch.mask).sum(axis=-1) / (batch.mask.sum(axis=-1) + 1e-8)
                        current_kl = float(seq_kl.mean())
                        kl_ctrl.update(current_kl, n_steps=len(batch.uid))
                        metrics["actor/reward_kl_penalty"] = current_kl
                        metrics["actor/reward_kl_penalty_coeff"] = beta
                    else:
                        batch.extra["token_level_rewards"] = scores_tok
                    adv, ret = compute_advantage(batch, batch.extra["token_level_rewards"], args)
                    batch.extra["advantages"], batch.extra["returns"] = adv, ret
                # ALGO LOGIC: updates
                if use_critic:
                    with marked_timer("update_critic", timing_raw, fixed_timing):
                        factor = lr_factor(critic_sched_step, critic_warmup, total_steps,
                                           args.critic_lr_scheduler_type, args.critic_min_lr_ratio,
                                           args.critic_num_cycles)
                        critic_lr = args.critic_lr * factor
                        critic_metrics = policy.update_critic(batch, args, critic_lr * lr_scale, n_ranks)
                        critic_metrics["critic/lr"] = np.float64(critic_lr)  # reduce_metrics makes it numpy
                        critic_sched_step += 1
                    metrics.update(critic_metrics)
                if args.critic_warmup <= global_step:
                    with marked_timer("update_actor", timing_raw, fixed_timing):
                        factor = lr_factor(actor_sched_step, actor_warmup, total_steps, args.lr_scheduler_type,
                                           args.min_lr_ratio, args.num_cycles)
                        actor_lr = args.lr * factor
                        actor_metrics = policy.update_policy(batch, args, actor_lr * lr_scale, n_ranks)
                        if peak_memory_gib is not None:
                            actor_metrics["perf/max_memory_allocated_gb"] = np.float64(peak_memory_gib)
                        actor_metrics["actor/lr"] = np.float64(actor_lr)
                        actor_sched_step += 1
                    with marked_timer("update_weights", timing_raw, fixed_timing):
                        policy.sync_rollout()
                    metrics.update(actor_metrics)
                timing_raw["step"] = 0.01 if fixed_timing else time.perf_counter() - step_start
                if args.rollout_data_dir:
                    _dump_rollout(batch, args.rollout_data_dir, global_step, policy)
                if args.test_freq > 0 and (is_last_step or global_step % args.test_freq == 0):
                    with marked_timer("testing", timing_raw, fixed_timing):
                        metrics.update(validation_metrics(policy, val_set, args, val_rng))
                metrics.update({"training/global_step": global_step, "training/epoch": epoch})
                metrics.update(compute_data_metrics(batch, use_critic, args.max_prompt_length,
                                                    args.max_response_length))
                metrics.update(compute_timing_metrics(batch, timing_raw))
                metrics.update(compute_throughput_metrics(batch, timing_raw, n_ranks))
                logger.log(metrics, step=global_step)
                if args.step_sleep:
                    time.sleep(args.step_sleep)
                global_step += 1
                if is_last_step:
                    return logger.history
    finally:
        logger.finish()
    return logger.history


def _chosen(logp_all: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    return np.take_along_axis(logp_all, tokens[..., None], axis=-1)[..., 0]


def _dump_rollout(batch: Batch, directory: str, step: int, policy: Policy) -> None:
    """ray_trainer._log_rollout_data: {dir}/{step}.jsonl with input, output, gts, score, step."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    with (path / f"{step}.jsonl").open("w", encoding="utf-8") as fp:
        for i in range(len(batch.uid)):
            record = {"input": policy.prompt_text(batch, i),
                      "output": policy.response_text(batch.responses[i, : batch.response_len[i]]),
                      "gts": str(int(batch.answer[i])), "score": float(batch.extra["scores"][i]), "step": step}
            fp.write(json.dumps(record) + "\n")


def run(overrides: Sequence[str], *, echo: bool = False) -> list[tuple[int, dict[str, Any]]]:
    """Parse ``overrides`` and train; the records that were logged. For tests and sweeps.

    Raises:
        SandboxConfigError, advisor.ConfigError: the config cannot be run.
        EmulatedOutOfMemory: the memory emulation says it does not fit.
    """
    args, cfg = parse_args(overrides)
    return train(args, cfg, echo=echo)


def planned_steps(overrides: Sequence[str]) -> tuple[int, int]:
    """(the steps a run of ``overrides`` trains, its steps per epoch), without training: as :func:`train` (and
    verl's ``RayPPOTrainer.fit``) it stops at ``trainer.total_training_steps`` or at the end of
    ``trainer.total_epochs`` epochs, whichever comes first.

    Raises:
        SandboxConfigError, advisor.ConfigError: the config cannot be run.
    """
    import contextlib
    import io

    with contextlib.redirect_stderr(io.StringIO()):  # parse_args prints the config's warnings for a run
        args, _ = parse_args(overrides)
    seed = args.seed if args.seed is not None else args.data_loader_seed
    data_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(5)[0])  # train()'s seeding
    train_set = task_prompts(args, data_rng, args.train_size)
    per_epoch = len(train_set.pair) // args.train_batch_size
    by_epochs = per_epoch * args.total_epochs
    return (min(args.total_training_steps, by_epochs) if args.total_training_steps else by_epochs), per_epoch


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``python -m sweeps.sandbox [KEY=VALUE ...]``. Exit 0 on success, 1 on emulated OOM, 2 on bad config."""
    from advisor.errors import AdvisorError

    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    try:
        args, cfg = parse_args(argv)
        cap_memory(args)
        train(args, cfg, echo=True)
    except (SandboxConfigError, AdvisorError) as err:
        for line in str(err).splitlines():
            print(f"sweeps.sandbox: {line}", file=sys.stderr)
        return 2
    except EmulatedOutOfMemory as err:
        print(str(err), file=sys.stderr)
        return 1
    except (MemoryError, RuntimeError) as err:
        if isinstance(err, RuntimeError) and "allocate" not in str(err):  # torch: "can't allocate memory"
            raise
        print(f"sweeps.sandbox: the run needed more than its memory cap, "
              f"sandbox.max_memory_gib={args.max_memory_gib:g} GiB beyond its start; lower data.train_batch_size or "
              "data.max_response_length, or raise the cap (+sandbox.max_memory_gib=0 removes it)", file=sys.stderr)
        return 1
    return 0


def cap_memory(args: Args) -> None:
    """Bound what the run may map (RLIMIT_AS) to what it maps now plus ``args.max_memory_gib``: an allocation past
    it fails (MemoryError in numpy, RuntimeError in torch) and :func:`main` exits 1 with one line. Linux only
    (``/proc/self/statm``); elsewhere, and with a cap of 0, nothing is bounded."""
    if not args.max_memory_gib or args.max_memory_gib <= 0:
        return
    import resource

    if args.policy == "lm":
        import torch  # noqa: F401  (its libraries' mappings are part of the start, not of the run's growth)
    try:
        with open("/proc/self/statm") as fp:
            mapped = int(fp.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = mapped + int(args.max_memory_gib * (1 << 30))
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft == resource.RLIM_INFINITY or limit < soft:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))

