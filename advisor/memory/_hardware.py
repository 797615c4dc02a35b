"""Accelerators: the catalog in knowledge/gpus.yaml and the ``--gpu`` / ``--gpu-memory-gib`` lookup."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from advisor.datafiles import load_knowledge
from advisor.errors import ConfigError

_MIB_PER_GIB = 1024


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator: the total memory its driver reports, in GiB."""

    name: str
    memory_gib: float
    vendor: str = "nvidia"
    source: str = ""
    aliases: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "memory_gib": round(self.memory_gib, 2), "vendor": self.vendor,
                "source": self.source}


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


@cache
def gpu_catalog() -> tuple[GpuSpec, ...]:
    """Every accelerator in knowledge/gpus.yaml."""
    return tuple(
        GpuSpec(
            name=entry["name"],
            memory_gib=entry["memory_mib"] / _MIB_PER_GIB,
            vendor=entry.get("vendor", "nvidia"),
            source=entry.get("source", ""),
            aliases=tuple(str(a) for a in entry.get("aliases") or ()),
        )
        for entry in load_knowledge("gpus.yaml")["gpus"]
    )


@cache
def _ambiguous() -> dict[str, tuple[str, ...]]:
    """Names that more than one card answers to -> the catalog names to choose from."""
    data = load_knowledge("gpus.yaml").get("ambiguous") or {}
    return {_key(str(name)): tuple(str(c) for c in candidates) for name, candidates in data.items()}


@cache
def _gpu_index() -> dict[str, GpuSpec]:
    index: dict[str, GpuSpec] = {}
    for gpu in gpu_catalog():
        for label in (gpu.name, *gpu.aliases):
            index.setdefault(_key(label), gpu)
    return index


def resolve_gpu(name: str | None = None, *, memory_gib: float | None = None) -> GpuSpec:
    """The accelerator to estimate for: a catalog name, an explicit memory size, or both.

    Args:
        name: a catalog name or alias (``H100``, ``NVIDIA H100 80GB HBM3``, ``910B``, ``MI300X``), matched
            without case, spaces or dashes; a name of more than one card (``A100``) is refused.
        memory_gib: total device memory in GiB; overrides the catalog's value (must be > 0).

    Raises:
        ConfigError: neither given, an unknown or ambiguous name, or a non-positive memory size.
    """
    if memory_gib is not None and memory_gib <= 0:
        raise ConfigError(f"--gpu-memory-gib must be greater than 0 but got {memory_gib}")
    if name is None:
        if memory_gib is None:
            raise ConfigError("no GPU given", suggestion="pass --gpu NAME (e.g. H100) or --gpu-memory-gib N")
        return GpuSpec(name=f"{memory_gib:g} GiB GPU", memory_gib=float(memory_gib), vendor="unknown",
                       source="--gpu-memory-gib")
    gpu = _gpu_index().get(_key(name))
    if gpu is None and _key(name) in _ambiguous():
        candidates = _ambiguous()[_key(name)]
        raise ConfigError(
            f"GPU '{name}' names more than one card: {' or '.join(candidates)}",
            suggestion=f"pass --gpu {candidates[0]} (or another of them), or --gpu-memory-gib N with the card's memory",
        )
    if gpu is None:
        labels = [g.name for g in gpu_catalog()]
        from advisor.spelling import closest

        close = closest(name, labels, limit=1, extra_suffix=True)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(
            f"GPU '{name}' is not in the hardware catalog (knowledge/gpus.yaml)",
            suggestion=f"{hint}pass --gpu-memory-gib N with the card's memory in GiB; `advisor check --gpu list` "
                       "lists the catalog",
        )
    if memory_gib is not None:
        return GpuSpec(name=gpu.name, memory_gib=float(memory_gib), vendor=gpu.vendor,
                       source=f"{gpu.source}; memory overridden by --gpu-memory-gib", aliases=gpu.aliases)
    return gpu
