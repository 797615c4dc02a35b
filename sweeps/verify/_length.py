"""How many steps a trial really trains, known before it starts where it can be.

verl's trainer (and the sandbox, which runs its loop) trains ``trainer.total_training_steps`` steps when that is
set, but its loop is ``for epoch in range(total_epochs): for batch in train_dataloader``: it also stops at the
end of ``trainer.total_epochs`` epochs, whichever comes first (verl v0.9.0
``verl/trainer/ppo/ray_trainer.py:435-440`` sets the count, ``:1440`` bounds the loop by the epochs, ``:1482``
ends at the last step). An epoch is ``floor(prompts / data.train_batch_size)`` steps (``drop_last``).

- The sandbox's data is generated from its config, so :func:`sweeps.sandbox.planned_steps` counts the steps
  exactly: a trial is given that count, and the plan says why it is not the one asked.
- A verl command's data is its parquet files: when the run that showed the problem got at least as far as the
  trials are asked to go, they get there too (same config, same data); otherwise the count is only known once a
  trial runs, and the plan says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError
from advisor.load import VerlConfig
from advisor.verl import render_override

from .._plan import _base_argv, is_sandbox

EPOCH_END = "verl v0.9.0 ray_trainer.py:435-440, 1440"
"""where verl decides a run's length: the step count, and the epoch loop that can end it first"""


@dataclass(frozen=True)
class TrialLength:
    """The steps asked of each trial, the steps it will train when known, and a line saying why they differ."""

    asked: int
    steps: int | None  # None: known only once a trial runs
    note: str | None = None

    @property
    def runs(self) -> int:
        """The steps to give each trial and judge it at: the known count, else the count asked."""
        return self.steps if self.steps is not None else self.asked


def trial_length(cfg: VerlConfig, command: str | Sequence[str] | None, overrides: Sequence[str],
                 points: Sequence[dict[str, Any]], asked: int, run_reached: int | None) -> TrialLength:
    """How many steps the trials of ``points`` (each trial's swept values) train when asked for ``asked``.

    Args:
        command, overrides: the trial command and every trial's extra overrides (as ``advisor verify`` runs them).
        run_reached: the last step the run that showed the problem logged.
    """
    try:
        argv = _base_argv(cfg, command, overrides)
    except AdvisorError:  # no command it can run (the sweep says so when it starts): verl's rule still holds
        argv = []
    if not is_sandbox(argv):
        return _verl_length(cfg, asked, run_reached)
    from ..sandbox import SandboxConfigError, planned_steps

    own = argv[argv.index("sweeps.sandbox") + 1:]
    counts = []
    try:
        for values in points or [{}]:
            extra = [render_override(k, v, add=not cfg.has(k)) for k, v in values.items()]
            counts.append(planned_steps([*own, *extra, render_override("trainer.total_training_steps", asked)]))
    except (SandboxConfigError, AdvisorError):  # the trial reports the sandbox's own error
        return TrialLength(asked, None)
    steps = min(c[0] for c in counts)
    if steps >= asked:
        return TrialLength(asked, asked)
    per_epoch = min(c[1] for c in counts)
    epochs = cfg.get("trainer.total_epochs") if cfg.has("trainer.total_epochs") else None
    note = (f"each trial trains {steps} steps, not the {asked} asked: the sandbox's trainer, like verl's, stops at "
            f"the end of trainer.total_epochs={epochs} epochs of {per_epoch} steps (its prompts / "
            f"data.train_batch_size) when that comes first ({EPOCH_END})")
    return TrialLength(asked, steps, note)


def _verl_length(cfg: VerlConfig, asked: int, run_reached: int | None) -> TrialLength:
    if run_reached is not None and run_reached >= asked:
        return TrialLength(asked, asked)  # the run itself got that far with this config and data
    epochs = cfg.get("trainer.total_epochs") if cfg.has("trainer.total_epochs") else None
    batch = cfg.get("data.train_batch_size") if cfg.has("data.train_batch_size") else None
    note = (f"each trial is asked for {asked} steps, but stops earlier if it reaches the end of "
            f"trainer.total_epochs={epochs} epochs first ({EPOCH_END}); an epoch is the training data's prompts / "
            f"data.train_batch_size={batch}, which verify cannot count before a trial runs (the verdict reports "
            "the steps reached)")
    return TrialLength(asked, None, note)


def reached_note(asked: int, reached: int | None, epochs: Any) -> str | None:
    """After the sweep: one line when the trials that ran to their end stopped before the planned step."""
    if reached is None or reached >= asked:
        return None
    return (f"the trials ended at step {reached}, not the planned {asked}: a trial stops at the end of "
            f"trainer.total_epochs={epochs} epochs when that comes before trainer.total_training_steps "
            f"({EPOCH_END}); the verdict compares them at step {reached}")
