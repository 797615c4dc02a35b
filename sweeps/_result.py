"""What a sweep produced: one :class:`TrialRecord` per trial, and the :class:`SweepResult` that holds them."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from typing import Any

from advisor.errors import ExitCode

# Trial states as a sweep reports them: Optuna's, plus 'interrupted' for a trial whose driver stopped (the same
# point is re-queued as a new trial) and 'stopped' for a trial the race stopped once it had outrun every other
# value on its seed (``runner``; it is not behind: it is the value that led its seed), and 'diverged' for a trial
# whose objective, a loss or a validation metric went non-finite after finite values (never a result).
STATES = ("complete", "stopped", "pruned", "failed", "diverged", "interrupted", "running", "waiting")
FINISHED_WITH_RESULT = ("complete", "stopped", "pruned")
FAILED_STATES = ("failed", "diverged")  # ended without a result: it can neither be confirmed nor beat another
_IMPORT_ERROR = re.compile(r"\b(ModuleNotFoundError|ImportError)\b")


def interpreter(program: str) -> str:
    """The program a trial ran, with the file a bare name resolves to on this PATH (``python3`` -> its path)."""
    if "/" in program:
        return program
    found = shutil.which(program)
    return f"{program} ({found} on PATH)" if found else f"{program} (not on PATH)"


@dataclass
class TrialRecord:
    """One trial of a sweep.

    ``curve`` maps each step to the objective as it stood then (the tail mean of the steps so far), the
    values that were reported to the pruner; ``objective`` is its last value.
    """

    number: int
    values: dict[str, Any]
    seed: int | None
    role: str  # "baseline" | "candidate" | "explore" | "confirm"
    state: str
    objective: float | None = None
    steps: int | None = None
    constraints: dict[str, float | None] = field(default_factory=dict)
    feasible: bool | None = None
    reason: str | None = None
    dir: str | None = None
    curve: dict[int, float] = field(default_factory=dict)
    diverged: dict[str, Any] | None = None  # {"step", "metric", "value"} of a diverged trial

    def objective_at(self, step: int) -> float | None:
        """The objective as it stood at ``step`` (the last report at or before it)."""
        best = None
        for s in sorted(self.curve):
            if s > step:
                break
            best = self.curve[s]
        return best

    @property
    def usable(self) -> bool:
        """Finished with an objective the verdict can use (complete, stopped by the race, or pruned after
        reporting)."""
        return self.state in FINISHED_WITH_RESULT and bool(self.curve)

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "values": self.values, "seed": self.seed, "role": self.role,
                "state": self.state, "objective": self.objective, "steps": self.steps,
                "constraints": self.constraints, "feasible": self.feasible, "reason": self.reason, "dir": self.dir,
                **({"diverged": self.diverged} if self.diverged else {})}


@dataclass
class SweepResult:
    """A finished (or read back) sweep: its definition, trials, verdict, and where it is stored."""

    study: str
    storage: str
    out: str
    spec: dict[str, Any]
    baseline: dict[str, Any]
    trials: list[TrialRecord]
    verdict: Any  # Verdict
    trial_steps: int
    resumed: bool = False
    launcher: dict[str, Any] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)

    @property
    def dashboard(self) -> str:
        from ._storage import dashboard_command

        return dashboard_command(self.storage)

    @property
    def exit_code(self) -> int:
        """0 when the fix is confirmed; 1 for 'keep baseline' or 'insufficient evidence'; 2 when every trial failed
        (the sweep could not run: :meth:`failure` says why)."""
        if self.failure() is not None:
            return ExitCode.BAD_INPUT
        return ExitCode.OK if self.verdict.decision == "fix confirmed" else ExitCode.FOUND

    def failure(self) -> str | None:
        """When every trial failed (none ran to a result), one line: the first trial's error, and for an import
        error the interpreter that ran it; else None."""
        ran = sorted((t for t in self.trials if t.state not in ("interrupted", "waiting", "running")),
                     key=lambda t: t.number)
        if not ran or any(t.state != "failed" for t in ran):
            return None
        first = ran[0]
        reason = first.reason or "no reason recorded"
        where = f" ({first.dir}/stderr.log)" if first.dir else ""
        text = f"every trial failed ({len(ran)}); the first, #{first.number}{where}: {reason}"
        if _IMPORT_ERROR.search(reason) and self.command:
            text += f"; the trials ran {interpreter(self.command[0])}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "study": self.study,
            "storage": self.storage,
            "dashboard": self.dashboard,
            "out": self.out,
            "resumed": self.resumed,
            "launcher": self.launcher,
            "command": self.command,
            **self.spec,
            "baseline": self.baseline,
            "trial_steps": self.trial_steps,
            "trials": [t.to_dict() for t in self.trials],
            "verdict": self.verdict.to_dict(),
        }
