"""The trial contract: what command one trial runs, in which directory, with which environment and files.

A trial is the training command as an argument list (never a shell string built from values), followed
by, in this order (Hydra applies overrides left to right, so the last one wins):

1. the config's own overrides (those of the launch script, or of a YAML's settings);
2. the extra ``KEY=VALUE`` overrides given to ``advisor sweep``;
3. the trial's values of the swept keys and of the seed keys;
4. ``trainer.total_training_steps=S``, ``trainer.experiment_name=<name>_trial<N>`` and
   ``trainer.logger=[..., file]`` (``console`` instead of ``file`` where the metrics come from the
   console stream: Ray jobs, and verl before 0.6.0, which has no ``file`` backend).

It runs in ``<out>/trials/<N>/`` with ``stdout.log`` and ``stderr.log`` kept there, and the environment of
``advisor sweep`` plus ``VERL_FILE_LOGGER_PATH=<out>/trials/<N>/metrics.jsonl``, ``PYTHONUNBUFFERED=1``,
and ``PYTHONPATH`` starting with the directory ``advisor sweep`` was started in (so ``python -m pkg``
finds what it finds there).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.verl import render_override

# Lines that name why a training process died, most specific first.
_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|HIP out of memory|CUDA error: out of memory"
                  r"|CUBLAS_STATUS_ALLOC_FAILED")
_EXCEPTION = re.compile(r"^\s*(?:\([^)]*\)\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b.*)$")
_NCCL = re.compile(r"NCCL (?:error|WARN .*(?:timeout|Timeout))", re.I)
_MAX_REASON_CHARS = 300
_TAIL_BYTES = 256 * 1024


@dataclass
class TrialCommand:
    """Everything needed to start one trial and read its output."""

    argv: list[str]
    env: dict[str, str]  # set on top of the driver's environment
    cwd: Path
    metrics_path: Path
    metrics_format: str  # "jsonl" | "console"
    stdout_path: Path
    stderr_path: Path

    def to_dict(self) -> dict[str, Any]:
        return {"argv": self.argv, "env": self.env, "cwd": str(self.cwd), "metrics_path": str(self.metrics_path),
                "metrics_format": self.metrics_format}


@dataclass
class TrialTemplate:
    """The part of every trial's command that does not depend on the trial.

    Args:
        base_argv: program and the config's overrides (items 1 and 2 of the contract).
        logger: the config's ``trainer.logger`` backends.
        experiment_name: the config's ``trainer.experiment_name``.
        console_metrics: read metrics from the console stream instead of the ``file`` logger.
        pythonpath: directory put first on ``PYTHONPATH``.
        existing_keys: keys the config has; a swept key outside it is written ``++key=value``.
    """

    base_argv: list[str]
    logger: list[str]
    experiment_name: str | None
    console_metrics: bool
    pythonpath: str
    existing_keys: frozenset[str] = field(default_factory=frozenset)

    def overrides(self, values: dict[str, Any]) -> list[str]:
        return [render_override(k, v, add=k not in self.existing_keys) for k, v in values.items()]

    def command(self, values: dict[str, Any], steps: int, trial_dir: Path, trial_number: int,
                env: dict[str, str] | None = None) -> TrialCommand:
        """The command of one trial; ``values`` maps each swept and seed key to this trial's value."""
        backend = "console" if self.console_metrics else "file"
        logger = [*self.logger, backend] if backend not in self.logger else list(self.logger)
        tail = [render_override("trainer.total_training_steps", steps),
                render_override("trainer.logger", logger)]
        if self.experiment_name is not None:
            tail.append(render_override("trainer.experiment_name", f"{self.experiment_name}_trial{trial_number}"))
        trial_dir = trial_dir.resolve()
        metrics_file = trial_dir / "metrics.jsonl"
        stdout = trial_dir / "stdout.log"
        extra = {"VERL_FILE_LOGGER_PATH": str(metrics_file), "PYTHONUNBUFFERED": "1",
                 "PYTHONPATH": self.pythonpath, **(env or {})}
        return TrialCommand(
            argv=[*self.base_argv, *self.overrides(values), *tail],
            env=extra,
            cwd=trial_dir,
            metrics_path=stdout if self.console_metrics else metrics_file,
            metrics_format="console" if self.console_metrics else "jsonl",
            stdout_path=stdout,
            stderr_path=trial_dir / "stderr.log",
        )


def join_pythonpath(first: str, existing: str | None) -> str:
    return first if not existing else f"{first}:{existing}"


def _tail_lines(path: Path) -> list[str]:
    try:
        with path.open("rb") as fp:
            fp.seek(0, 2)
            size = fp.tell()
            fp.seek(max(0, size - _TAIL_BYTES))
            text = fp.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return text.splitlines()


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_REASON_CHARS else text[: _MAX_REASON_CHARS - 1] + "…"


def failure_reason(logs: Sequence[Path], returncode: int | None) -> str:
    """Why a trial died, from the end of its logs: an out-of-memory line first, then the last exception line,
    then an NCCL error, else the exit status."""
    lines = [line for path in logs for line in _tail_lines(path)]
    for line in lines:
        if _OOM.search(line):
            return _clip(line)
    for line in reversed(lines):
        m = _EXCEPTION.match(line)
        if m:
            return _clip(m.group(1))
    for line in reversed(lines):
        if _NCCL.search(line):
            return _clip(line)
    return exit_status(returncode)


def exit_status(returncode: int | None) -> str:
    if returncode is None:
        return "the process ended without an exit status"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (the kernel's out-of-memory killer sends SIGKILL)" if -returncode == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    if returncode in (137, 143):
        return f"exit code {returncode} (killed by {'SIGKILL' if returncode == 137 else 'SIGTERM'})"
    return f"exit code {returncode}"
