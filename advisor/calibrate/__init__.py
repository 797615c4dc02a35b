"""GPU-free memory harness: measures the activation and logit bytes of verl's actor update, log-prob
forwards and critic on a fake-tensor Hugging Face model (docs/memory-calibration.md).

Needs the optional ``[calibrate]`` extra (torch, transformers, peft); nothing here imports torch until a
measurement runs, so ``advisor`` starts without it.

    Request(model, tokens, switches=Switches(...), phase=..., layers=(a, b) | vocab=(v1, v2)) -> run(request)
    measure_all() -> the data of knowledge/memory_measured.yaml
"""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what mypy and an IDE see; at run time __getattr__ imports each on first use (_HOMES)
    from ._command import build_request, run_command, write_all
    from ._measure import PHASES, Shape, Switches, measure_phase, measure_phase_on, rank_tokens
    from ._request import Request, run, run_phases
    from ._suite import measure_all, versions
    from ._verl_path import verl_path

REQUIRED = ("torch", "transformers", "peft")

# public name -> the module that defines it, imported on first use: torch comes with the first measurement
_HOMES = {
    "Request": "_request", "run": "_request", "run_phases": "_request",
    "PHASES": "_measure", "Shape": "_measure", "Switches": "_measure", "measure_phase": "_measure",
    "measure_phase_on": "_measure", "rank_tokens": "_measure",
    "measure_all": "_suite", "versions": "_suite",
    "build_request": "_command", "run_command": "_command", "write_all": "_command",
    "verl_path": "_verl_path",
}


def missing() -> list[str]:
    """The [calibrate] packages that are not installed."""
    return [name for name in REQUIRED if find_spec(name) is None]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'advisor.calibrate' has no attribute '{name}'")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)


__all__ = ["PHASES", "REQUIRED", "Request", "Shape", "Switches", "build_request", "measure_all", "measure_phase",
           "measure_phase_on", "missing", "rank_tokens", "run", "run_command", "run_phases", "verl_path", "versions",
           "write_all"]
