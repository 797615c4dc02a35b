"""What the memory model answers: per-phase peaks, host RAM, and the verdict over them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._hardware import GpuSpec
from ._models import ModelSpec

BREAKDOWN_KEYS = ("weights", "grads", "optimizer", "activations", "logits", "kv_cache", "cuda_graphs", "overhead")
# unknown: a phase the model cannot size (a missing input); it outranks ok, never tight or oom
RISK_ORDER = {"ok": 0, "unknown": 1, "tight": 2, "oom": 3}
STAGES = ("generate", "weight_sync", "old_log_prob", "ref_log_prob", "critic_values", "critic_update",
          "actor_update")


@dataclass(frozen=True)
class StageEstimate:
    """Peak memory of one phase on one GPU."""

    stage: str
    peak_gib: float
    capacity_gib: float
    risk: str
    breakdown: dict[str, float]
    details: tuple[tuple[str, str, float], ...] = ()
    reason: str | None = None
    basis: str | None = None  # what the risk was judged on, when not the whole peak (generate: beside the pool)
    worst_gib: float | None = None  # the same phase with every sequence at max length (None: same as peak)
    lengths: str = "typical"  # which lengths the peak and risk use: typical | worst case
    missing: str | None = None  # risk unknown: the input to pass

    @property
    def fraction(self) -> float:
        if self.risk == "unknown":
            return 0.0
        return self.peak_gib / self.capacity_gib if self.capacity_gib else float("inf")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "stage": self.stage,
            "peak_gib": round(self.peak_gib, 2),
            "capacity_gib": round(self.capacity_gib, 2),
            "risk": self.risk,
            "breakdown": {k: round(v, 2) for k, v in self.breakdown.items()},
            "details": [{"part": cat, "item": label, "gib": round(gib, 3)} for cat, label, gib in self.details],
        }
        if self.reason:
            out["reason"] = self.reason
        if self.basis:
            out["basis"] = self.basis
        if self.worst_gib is not None:
            out["worst_case_gib"] = round(self.worst_gib, 2)
        out["lengths"] = self.lengths
        if self.missing:
            out["missing"] = self.missing
        return out


@dataclass(frozen=True)
class HostEstimate:
    """Host RAM per node (advisor/memory/_host.py): the peak, and what verl's perf/cpu_memory_used_gb samples."""

    peak_gib: float
    capacity_gib: float | None
    risk: str | None
    details: tuple[tuple[str, float], ...] = ()
    sampled_gib: float = 0.0  # psutil's node `used` inside update_actor: pinned pages are not in it
    sampled_details: tuple[tuple[str, float], ...] = ()

    def summary(self) -> str:
        """One line for ``check``: the peak per node with its largest parts, and the risk when RAM is known."""
        parts = ", ".join(f"{label} {gib:.1f}" for label, gib in sorted(self.details, key=lambda d: -d[1])[:3])
        line = f"Host RAM per node: peak {self.peak_gib:.1f} GiB ({parts})"
        if self.capacity_gib:
            line += f"; {self.peak_gib / self.capacity_gib:.0%} of {self.capacity_gib:g} GiB: {self.risk}"
        else:
            line += "; pass --host-memory-gib for the risk"
        return (f"{line}. verl's perf/cpu_memory_used_gb should read about {self.sampled_gib:.0f} "
                "(it leaves pinned offload buffers out).")

    def to_dict(self) -> dict[str, Any]:
        return {
            "peak_gib_per_node": round(self.peak_gib, 2),
            "capacity_gib": None if self.capacity_gib is None else round(self.capacity_gib, 2),
            "risk": self.risk,
            "details": [{"item": label, "gib": round(gib, 3)} for label, gib in self.details],
            "sampled_gib_per_node": round(self.sampled_gib, 2),
        }


@dataclass(frozen=True)
class KvCapacity:
    """What the inference engine's cache holds on one GPU while generating (one rollout TP rank)."""

    engine: str
    tokens: float  # KV-cache tokens per GPU (0 for a hybrid model: it holds sequences, see ``sequences``)
    sequences: float  # sequences of ``sequence_tokens`` the cache holds at once
    sequence_tokens: int  # max_prompt_length + max_response_length
    max_num_seqs: int  # the engine's own cap on concurrent sequences

    @property
    def concurrent(self) -> float:
        """Sequences one replica runs at once: the cache's capacity, capped by max_num_seqs."""
        return min(self.sequences, float(self.max_num_seqs))


@dataclass(frozen=True)
class MemoryEstimate:
    """The memory model's answer for one config on one GPU type."""

    gpu: GpuSpec
    model: ModelSpec
    stages: tuple[StageEstimate, ...]
    host: HostEstimate
    assumptions: tuple[str, ...] = field(default=())
    kv: KvCapacity | None = None  # None: the engine keeps no pool (or no engine)

    @property
    def gpu_memory_gib(self) -> float:
        return self.gpu.memory_gib

    @property
    def verdict(self) -> str:
        """The worst risk over all phases (and host RAM when its size is known)."""
        risks = [s.risk for s in self.stages]
        if self.host.risk is not None:
            risks.append(self.host.risk)
        return max(risks, key=RISK_ORDER.__getitem__) if risks else "ok"

    @property
    def peak(self) -> StageEstimate:
        return max(self.stages, key=lambda s: (RISK_ORDER[s.risk], s.fraction))

    def stage(self, name: str) -> StageEstimate:
        for s in self.stages:
            if s.stage == name:
                return s
        raise KeyError(f"no stage {name!r}; stages: {', '.join(s.stage for s in self.stages)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu_memory_gib": round(self.gpu.memory_gib, 2),
            "gpu": self.gpu.to_dict(),
            "model": self.model.to_dict(),
            "stages": [s.to_dict() for s in self.stages],
            "host": self.host.to_dict(),
            "assumptions": list(self.assumptions),
            "verdict": self.verdict,
        }

    def rows(self) -> list[dict[str, Any]]:
        """One row per phase for a text table: stage, peak, capacity, percent, risk, the largest parts."""
        rows = []
        for s in self.stages:
            top = sorted(((k, v) for k, v in s.breakdown.items() if v >= 0.05), key=lambda kv: -kv[1])[:3]
            note = s.missing or s.reason or ""
            if s.basis and not note:
                note = s.basis
            if s.worst_gib is not None and s.risk != "unknown":
                worst = f"at typical lengths; worst case (every sequence at max length) {s.worst_gib:.1f} GiB"
                note = f"{note}; {worst}" if note else worst
            elif s.lengths == "worst case" and s.risk != "unknown" and s.stage != "generate":
                # the verdict says which lengths it is on (the generate phase does not depend on them)
                note = f"{note}; at max length (worst case)" if note else "at max length (worst case)"
            rows.append({
                "stage": s.stage,
                "peak_gib": round(s.peak_gib, 1),
                "capacity_gib": round(s.capacity_gib, 1),
                # None: the share is not known (no GPU size, or a phase the model cannot size), never 0
                "percent": round(100 * s.fraction) if s.risk != "unknown" and s.capacity_gib else None,
                "risk": s.risk,
                "largest": ", ".join(f"{k} {v:.1f}" for k, v in top),
                "reason": note,
            })
        return rows
