"""The CPU sandbox trainer: real GRPO/PPO on a small task, verl's keys in, verl's metrics out.

Run it as ``python -m sweeps.sandbox [KEY=VALUE ...]``; ``--help`` prints what it does (trainer.py's docstring).
The package reads top to bottom like CleanRL's single-file trainer, one module a part:

    args.py          Args: every key the sandbox reads (verl's, and its own ``sandbox.*``); the errors a run raises
    config.py        a config (verl's defaults plus the overrides, through the advisor's loader) read into Args
    verl_asserts.py  the checks verl makes before the first step, with verl's wording
    task.py          the log-linear policy's task, both policies' prompts, the rule reward
    model.py         the log-linear policy and value head, its pretrained weights
    optim.py         AdamW, gradient clipping, the LR schedule
    rollout.py       ALGO LOGIC: the batch, sampling, batch balancing
    core_algos.py    ALGO LOGIC: KL, loss aggregation, the advantage estimators' registry
    updates.py       ALGO LOGIC: the actor and critic updates over emulated ranks
    policies.py      the interface the loop calls; the log-linear policy behind it
    metrics.py       verl's data, timing and throughput metrics; validation
    loggers.py       verl's console and file loggers
    trainer.py       the loop of RayPPOTrainer.fit; the command line
    faults.py        faults injected mid-run (sandbox.fault)
    text.py          token ids to text, for both vocabularies
    lm_*.py, lm.py   the language-model policy (torch): task, model, losses, the policy behind the interface

Public API (what the sweeps, the benches and the tests run)::

    run(overrides) -> [(step, metrics)]       parse the overrides and train (no console output)
    planned_steps(overrides)                  the steps a run trains, without training
    main(argv)                                the command line; exit 0, 1 (emulated OOM, memory cap) or 2 (bad config)
    parse_args(overrides) -> (Args, config)   the config as the sandbox reads it
    console_line, jsonl_line                  one logged record as verl's console and file loggers write it
    SandboxConfigError, EmulatedOutOfMemory   what a run raises

torch is imported by lm_policy, lm_algos and lm_trainer alone, and only when the language model runs.
"""

from __future__ import annotations

from .args import SANDBOX_KEYS, Args, EmulatedOutOfMemory, SandboxConfigError
from .config import parse_args
from .loggers import console_line, jsonl_line
from .trainer import main, planned_steps, run, train

__all__ = ["SANDBOX_KEYS", "Args", "EmulatedOutOfMemory", "SandboxConfigError", "console_line", "jsonl_line", "main",
           "parse_args", "planned_steps", "run", "train"]
