"""GPU-free memory harness: measures the activation and logit bytes of verl's actor update, log-prob
forwards and critic on a fake-tensor Hugging Face model (docs/memory-calibration.md).

Needs the optional ``[calibrate]`` extra (torch, transformers, peft); nothing here imports torch until a
measurement runs, so ``advisor`` starts without it.

    Request(model, tokens, switches=Switches(...), phase=..., layers=(a, b) | vocab=(v1, v2)) -> run(request)
    measure_all() -> the data of knowledge/memory_measured.yaml
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

REQUIRED = ("torch", "transformers", "peft")


def missing() -> list[str]:
    """The [calibrate] packages that are not installed."""
    return [name for name in REQUIRED if find_spec(name) is None]


def __getattr__(name: str) -> Any:  # lazy: torch is imported with the first measurement
    if name in ("Request", "run", "run_phases"):
        from . import _request

        return getattr(_request, name)
    if name in ("Switches", "PHASES", "measure_phase", "measure_phase_on", "Shape", "rank_tokens"):
        from . import _measure

        return getattr(_measure, name)
    if name in ("measure_all", "versions"):
        from . import _suite

        return getattr(_suite, name)
    if name in ("build_request", "run_command", "write_all"):
        from . import _command

        return getattr(_command, name)
    if name == "verl_path":
        from ._verl_path import verl_path

        return verl_path
    raise AttributeError(name)


__all__ = ["PHASES", "REQUIRED", "Request", "Shape", "Switches", "build_request", "measure_all", "measure_phase",
           "measure_phase_on", "missing", "rank_tokens", "run", "run_command", "run_phases", "verl_path", "versions",
           "write_all"]
