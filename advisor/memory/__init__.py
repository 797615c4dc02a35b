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

from ._estimate import HostEstimate, MemoryEstimate, StageEstimate, estimate_memory
from ._fix import MemoryFix, find_memory_fix
from ._hardware import GpuSpec, gpu_catalog, resolve_gpu
from ._max import Largest, largest_that_fits
from ._models import ModelSpec, catalog, resolve_model

__all__ = [
    "GpuSpec",
    "HostEstimate",
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
