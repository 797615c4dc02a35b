"""Faults the sandbox can inject mid-run, so that a watcher's onset step is known (``+sandbox.fault=...``).

Each fault starts at ``+sandbox.fault_step=K`` (the first training step that runs with it) and lasts to the
end of the run, as the failures it stands for do:

- ``lr``: the actor's learning rate is multiplied by ``+sandbox.fault_factor`` (default 100): a scheduler or
  a resumed optimizer state gone wrong.
- ``kl``: the KL coefficient drops to 0, on the loss side (``actor.kl_loss_coef``) and the reward side
  (``algorithm.kl_ctrl``): nothing pulls the policy back to the reference any more.
- ``reward``: the reward parser breaks: every response scores 0 (a changed answer format, a scorer that
  throws and returns its default).
- ``nan_reward``: the reward function returns NaN for one response of each batch (a parser that turns an
  unreadable answer into ``float("nan")``); NaN then reaches the advantages and the loss.

``+sandbox.step_sleep=S`` waits S seconds after each logged step, so a watcher can follow a live file.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

FAULTS = ("lr", "kl", "reward", "nan_reward")


def fault_problems(args: Any) -> list[str]:
    """What is wrong with the fault knobs, in the sandbox's wording (empty when nothing is)."""
    problems = []
    if args.fault is not None and args.fault not in FAULTS:
        problems.append(f"+sandbox.fault={args.fault!r}: the sandbox injects {', '.join(FAULTS)}")
    if args.fault is not None and args.fault_step < 1:
        problems.append(f"+sandbox.fault_step={args.fault_step}: a fault starts at a training step, 1 or later")
    if not (math.isfinite(args.fault_factor) and args.fault_factor > 0):
        problems.append(f"+sandbox.fault_factor={args.fault_factor}: must be a positive number")
    if not (math.isfinite(args.step_sleep) and args.step_sleep >= 0):
        problems.append(f"+sandbox.step_sleep={args.step_sleep}: must be 0 or more seconds")
    return problems


def inject_before_step(args: Any, kl_ctrl: Any, step: int) -> None:
    """At the fault's first step, change what the rest of the run trains with (``args`` is the run's own)."""
    if args.fault is None or step != args.fault_step:
        return
    if args.fault == "lr":
        args.lr *= args.fault_factor
    elif args.fault == "kl":
        args.kl_loss_coef = 0.0
        kl_ctrl.value = 0.0  # the adaptive controller multiplies its value: 0 stays 0


def scores_after_fault(args: Any, step: int, scores: np.ndarray) -> np.ndarray:
    """The reward function's output once a reward fault has started."""
    if args.fault is None or step < args.fault_step:
        return scores
    if args.fault == "reward":
        return np.zeros_like(scores)
    if args.fault == "nan_reward":
        broken = scores.astype(float)
        broken[0] = math.nan
        return broken
    return scores
