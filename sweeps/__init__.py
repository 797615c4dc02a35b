"""Sweeps that prove or refute a config fix, and the CPU sandbox trainer they are tested on.

Three wings: the sweep runner here at the top (``sweeps/*.py``), ``sweeps.verify`` (``advisor verify``: its plan,
run and verdict) and ``sweeps.sandbox`` (the CPU sandbox trainer, ``python -m sweeps.sandbox``).

Public API (everything else is private and may change)::

    run_sweep(config, SweepSpec(...), RunSettings(command=..., launcher=..., parallel=...)) -> SweepResult
    SweepSpec, Param, Objective, Constraint          what to sweep and how to judge it
    RunSettings                                      how and where the trials run (any field also by name)
    parse_param, parse_objective, parse_constraint   the CLI's text forms
    LocalLauncher, RayJobLauncher, Launcher          where trials run (Launcher: what either is)
    SweepResult, TrialRecord, Verdict                what comes back
    decide, bootstrap_ci                             the verdict's rule and interval
    render_sweep, RichProgress, LineProgress         the text report; progress as a bar or as lines
    Progress                                         what a progress reporter is

Names are imported on first use, so ``python -m sweeps.sandbox`` and ``advisor check`` never load Optuna or
Ray (Optuna itself is imported only when a sweep runs).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what mypy and an IDE see; at run time __getattr__ imports each on first use (_EXPORTS)
    from ._launchers import Launcher, LocalLauncher, RayJobLauncher
    from ._objective import Constraint, Objective, parse_constraint, parse_objective, tail_mean
    from ._plan import SEED_KEYS, SweepSpec
    from ._pruner import PACE
    from ._render import LineProgress, RichProgress, render_sweep
    from ._result import SweepResult, TrialRecord
    from ._settings import Progress, RunSettings
    from ._space import Param, parse_param
    from ._verdict import INSUFFICIENT, LEVEL, Verdict, bootstrap_ci, decide
    from .runner import run_sweep

_EXPORTS = {
    "run_sweep": "runner",
    "SweepSpec": "_plan",
    "SEED_KEYS": "_plan",
    "RunSettings": "_settings",
    "Progress": "_settings",
    "Param": "_space",
    "parse_param": "_space",
    "Objective": "_objective",
    "Constraint": "_objective",
    "parse_objective": "_objective",
    "parse_constraint": "_objective",
    "tail_mean": "_objective",
    "Launcher": "_launchers",
    "LocalLauncher": "_launchers",
    "RayJobLauncher": "_launchers",
    "SweepResult": "_result",
    "TrialRecord": "_result",
    "Verdict": "_verdict",
    "bootstrap_ci": "_verdict",
    "decide": "_verdict",
    "INSUFFICIENT": "_verdict",
    "LEVEL": "_verdict",
    "PACE": "_pruner",
    "render_sweep": "_render",
    "RichProgress": "_render",
    "LineProgress": "_render",
}

__all__ = [
    "INSUFFICIENT",
    "LEVEL",
    "PACE",
    "SEED_KEYS",
    "Constraint",
    "Launcher",
    "LineProgress",
    "LocalLauncher",
    "Objective",
    "Param",
    "Progress",
    "RayJobLauncher",
    "RichProgress",
    "RunSettings",
    "SweepResult",
    "SweepSpec",
    "TrialRecord",
    "Verdict",
    "bootstrap_ci",
    "decide",
    "parse_constraint",
    "parse_objective",
    "parse_param",
    "render_sweep",
    "run_sweep",
    "tail_mean",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sweeps' has no attribute '{name}'")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
