"""The CPU sandbox trainer: real GRPO/PPO on a small task, verl's keys in, verl's metrics out.

Run it as ``python -m sweeps.sandbox [KEY=VALUE ...]``; ``--help`` prints its description (trainer.py's
docstring). The package reads top to bottom like CleanRL's single-file trainer, one module a part:

    args.py        Args: every key the sandbox reads (verl's, and its own ``sandbox.*``), the errors
    ...
    trainer.py     the loop of RayPPOTrainer.fit, the command line

Public API (what the sweeps, the benches and the tests run)::

    run(overrides) -> [(step, metrics)]       parse the overrides and train (no console output)
    planned_steps(overrides)                  the steps a run trains, without training
    main(argv)                                the command line; exit 0, 1 (emulated OOM, memory cap) or 2 (bad config)
    parse_args(overrides) -> (Args, config)   the config as the sandbox reads it
    console_line, jsonl_line                  one logged record as verl's console and file loggers write it
    SandboxConfigError, EmulatedOutOfMemory   what a run raises

The language model's own modules (lm_*.py, the ``lm`` face for scripts) import torch; nothing here does.
"""

from __future__ import annotations

from .trainer import (
    SANDBOX_KEYS,
    Args,
    EmulatedOutOfMemory,
    SandboxConfigError,
    console_line,
    jsonl_line,
    main,
    parse_args,
    planned_steps,
    run,
    train,
)

__all__ = ["SANDBOX_KEYS", "Args", "EmulatedOutOfMemory", "SandboxConfigError", "console_line", "jsonl_line", "main",
           "parse_args", "planned_steps", "run", "train"]
