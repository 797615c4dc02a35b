"""Pre-launch GPU memory model of a colocated verl step, and the smallest config change that fits.

    estimate_memory(cfg, *, model=None, gpu=None, gpu_memory_gib=None, host_memory_gib=None,
                    model_config=None) -> MemoryEstimate
    find_memory_fix(cfg, estimate_kwargs, is_valid) -> MemoryFix
    largest_that_fits(cfg, estimate_kwargs) -> tuple[Largest, ...]
    resolve_model(cfg=None, *, model=None, model_config=None) -> ModelSpec
    resolve_gpu(name=None, *, memory_gib=None) -> GpuSpec

Light at import: numpy, torch and pandas are never imported here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what mypy and an IDE see; at run time __getattr__ imports each on first use (_HOMES)
    from ._estimate import estimate_memory
    from ._fix import MemoryFix, find_memory_fix
    from ._hardware import GpuSpec, gpu_catalog, resolve_gpu
    from ._max import Largest, largest_that_fits
    from ._models import ModelSpec, catalog, resolve_model
    from ._results import HostEstimate, KvCapacity, MemoryEstimate, StageEstimate

# public name -> the module that defines it, imported on first use: `advisor check` without --gpu asks only
# for the model catalog (resolve_model), so the estimator and the fix search stay unloaded
_HOMES = {
    "HostEstimate": "_results", "KvCapacity": "_results", "MemoryEstimate": "_results", "StageEstimate": "_results",
    "estimate_memory": "_estimate",
    "MemoryFix": "_fix", "find_memory_fix": "_fix",
    "GpuSpec": "_hardware", "gpu_catalog": "_hardware", "resolve_gpu": "_hardware",
    "Largest": "_max", "largest_that_fits": "_max",
    "ModelSpec": "_models", "catalog": "_models", "resolve_model": "_models",
}

__all__ = [
    "GpuSpec",
    "HostEstimate",
    "KvCapacity",
    "Largest",
    "MemoryEstimate",
    "MemoryFix",
    "ModelSpec",
    "StageEstimate",
    "catalog",
    "estimate_memory",
    "find_memory_fix",
    "gpu_catalog",
    "largest_that_fits",
    "resolve_gpu",
    "resolve_model",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'advisor.memory' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
