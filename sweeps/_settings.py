"""How and where a sweep's trials run: one frozen object from the CLI through ``advisor verify`` to the runner.

:class:`SweepSpec` (``_plan``) says *what* to sweep and how to judge it; :class:`RunSettings` says everything
else: the training command, the overrides every trial gets, the launcher, the study's storage and name, how
many trials run at once, the sweep directory and where progress is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Protocol

from ._launchers import Launcher
from ._liveness import STALE_AFTER_S

POLL_S = 0.25
"""seconds between two reads of the running trials' metrics"""
STALL_TIMEOUT_S = 1800.0
"""seconds without a new metrics line after which a trial is failed as stalled. A verl step on a GPU takes
seconds to a few minutes; before the first one a run loads the model, starts Ray and its rollout engine (a
few minutes, longer for a large model's first vLLM compile), so 30 minutes fails a run only when it hangs."""


@dataclass(frozen=True)
class TrialEvent:
    """A trial started (``state`` "started") or ended (its final state, the step it reached, its objective)."""

    number: int
    values: dict[str, Any]
    seed: int | None
    role: str
    state: str
    metric: str  # the objective's name
    steps: int | None = None
    objective: float | None = None
    reason: str | None = None
    done: int = 0  # trials finished so far, and planned (as the progress bar counts them)
    total: int = 0


class Progress(Protocol):
    """Where the loop reports progress (the CLI draws a bar on stderr when it is a terminal). An object that also
    has ``trial(event: TrialEvent)`` is told when each trial starts and ends (``advisor verify``'s lines), and one
    that has ``plan(text: str)`` is given the sweep's plan in a line before the first trial starts."""

    def update(self, done: int, total: int, running: str) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RunSettings:
    """Everything about running a sweep's trials that is not the sweep itself.

    Args:
        command: the training command (a string split like a shell would, or an argument list); default: the
            launch script's verl command. The config's own overrides follow it.
        overrides: extra ``KEY=VALUE`` overrides for every trial (and for reading the config).
        launcher: :class:`LocalLauncher` (default) or :class:`RayJobLauncher`.
        storage: an Optuna storage URL or a journal file path; default ``<out>/study.journal``.
        study_name: default ``sweep-<keys>-<hash of the sweep definition>``, so the same command resumes.
        parallel: trials run at once by this driver (at least 1).
        out: the sweep directory; default ``sweeps-out/<study name>``.
        progress: where to report progress (default: nowhere).
        verl_version: the verl version the config is read for (default: detected).
        stale_after_s: a RUNNING trial whose lease is this old is taken over (drivers on other hosts).
        poll_s: seconds between two reads of the running trials' metrics.
        stall_timeout_s: a trial that logs no new metrics line for this long (from its start, or its last
            line) is stopped and failed as stalled; None: never.
    """

    command: str | tuple[str, ...] | None = None
    overrides: tuple[str, ...] = ()
    launcher: Launcher | None = None
    storage: str | None = None
    study_name: str | None = None
    parallel: int = 1
    out: str | Path | None = None
    progress: Progress | None = None
    verl_version: str | None = None
    stale_after_s: float = STALE_AFTER_S
    poll_s: float = POLL_S
    stall_timeout_s: float | None = STALL_TIMEOUT_S

    def __post_init__(self) -> None:  # lists from callers become tuples: the object is frozen all the way down
        if self.command is not None and not isinstance(self.command, str):
            object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "overrides", tuple(self.overrides))

    def with_(self, **changes: Any) -> RunSettings:
        """A copy with some fields changed (unknown names are a TypeError, as for the constructor)."""
        return replace(self, **changes)

    def plus_overrides(self, extra: Sequence[str]) -> RunSettings:
        return replace(self, overrides=(*self.overrides, *extra))


FIELDS = frozenset(f.name for f in fields(RunSettings))
