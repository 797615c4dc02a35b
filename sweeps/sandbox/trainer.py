"""A CPU sandbox trainer that behaves like verl: real GRPO/PPO on a small task, verl's keys in, verl's metrics out.

Run it as ``python -m sweeps.sandbox [KEY=VALUE ...]`` with verl's own Hydra overrides, for example::

    python -m sweeps.sandbox algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=4 \\
        data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=16 \\
        trainer.total_training_steps=50 'trainer.logger=[console,file]'

The config is read through the advisor's own loader (verl's newest defaults plus the overrides), so a typo
fails the same way it would in ``advisor check``. Keys under ``sandbox.`` belong to the sandbox itself
(``+sandbox.seed=3``; the ``+`` may be left out).

What it trains (``sandbox.policy``): ``lm`` (the default), a small causal transformer supervised-trained on
written additions and subtractions (sweeps/sandbox/lm_policy.py, lm_task.py, lm_trainer.py; weights from
scripts/train_sandbox_lm.py), or ``loglinear``, a softmax policy over a 19-token vocabulary "pretrained" to answer
one-digit additions (``let me see 3 + 4 =``). Both answer in gsm8k's format (``... #### 7<eos>``), scored 1 when
the number after the last ``####`` is right and the response ends with EOS inside ``data.max_response_length``,
else 0. The reference policy is a frozen copy of the pretrained one. Everything downstream (KL, advantages, PPO
loss, mini- and micro-batches over emulated data-parallel ranks, AdamW, LR schedule, metrics, loggers) follows
verl's code paths and formulas; docs/sandbox.md lists the keys it models and the metrics it writes.

The package (sweeps/sandbox/) reads top to bottom like CleanRL's ``ppo.py``, one module a part: ``args`` and
``config`` (what it reads; ``verl_asserts``: the checks verl makes before the first step), ``task``, ``model``
and ``optim`` (the log-linear policy), the algorithm (``rollout``, ``core_algos``, ``updates``: the ALGO LOGIC),
``policies``, ``metrics`` and ``loggers``, then this module: the loop (``train``) and ``main``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .args import LR_SCALES, Args, EmulatedOutOfMemory, SandboxConfigError, uses_critic, uses_reference
from .config import parse_args
from .core_algos import (
    AdaptiveKLController,
    FixedKLController,
    agg_loss,
    compute_advantage,
    kl_penalty,
    token_level_scores,
)
from .faults import inject_before_step, scores_after_fault
from .loggers import Tracking
from .metrics import compute_data_metrics, compute_throughput_metrics, compute_timing_metrics, validation_metrics
from .optim import lr_factor, warmup_steps
from .policies import Policy, make_policy, task_prompts
from .rollout import Batch, balance_batch
from .task import repeat_prompts, take_prompts

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
                prompts = repeat_prompts(take_prompts(train_set, prompt_idx), args.n)
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
