"""The smallest performance-only config change that brings every phase under the ``ok`` threshold."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any

from advisor.findings import Change

from ._constants import constants
from ._estimate import MemoryEstimate, estimate_workload
from ._hardware import GpuSpec, resolve_gpu
from ._knobs import Candidate, candidates
from ._models import resolve_model
from ._read import read_workload
from ._workload import Workload

if TYPE_CHECKING:
    from advisor.load import VerlConfig

_PAIR_CANDIDATES_PER_KNOB = 8
_MAX_GPU_MULTIPLIER = 8


@dataclass(frozen=True)
class MemoryFix:
    """What :func:`find_memory_fix` found: the changes (possibly none) and why."""

    changes: tuple[Change, ...]
    explanation: str
    fits: bool
    before: MemoryEstimate
    after: MemoryEstimate | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "fits": self.fits,
            "changes": [c.to_dict() for c in self.changes],
            "overrides": [c.override() for c in self.changes],
            "explanation": self.explanation,
            "verdict_before": self.before.verdict,
            "verdict_after": None if self.after is None else self.after.verdict,
        }


def _worst(estimate: MemoryEstimate) -> str:
    s = estimate.peak
    return f"{s.stage} {s.peak_gib:.1f}/{s.capacity_gib:.1f} GiB ({100 * s.fraction:.0f}%)"


def _all_ok(estimate: MemoryEstimate) -> bool:
    # an unknown phase (a missing input) is not something a config change can bring under the line
    return all(s.risk in ("ok", "unknown") for s in estimate.stages) and estimate.host.risk in (None, "ok")


def find_memory_fix(
    cfg: VerlConfig,
    estimate_kwargs: Mapping[str, Any] | None = None,
    is_valid: Callable[[Any], bool] | None = None,
) -> MemoryFix:
    """Search one- then two-key performance-only changes for the cheapest that makes every phase ``ok``.

    Args:
        cfg: the :class:`~advisor.VerlConfig` to fix.
        estimate_kwargs: the keyword arguments of :func:`estimate_memory` (model, gpu, gpu_memory_gib,
            host_memory_gib, model_config, sequence_tokens).
        is_valid: a predicate on the patched config (the caller's validation checks); a candidate
            change is only proposed when it holds. Default: every config is valid.

    Returns:
        A :class:`MemoryFix`: empty ``changes`` with ``fits=True`` when nothing needs fixing, the
        changes when a fix exists, or ``fits=False`` with a plain explanation of what is left (more
        GPUs, or an algorithm change the user must choose).

    Raises:
        ConfigError: unknown model or GPU (as :func:`estimate_memory`).
    """
    kwargs = dict(estimate_kwargs or {})
    valid = is_valid or (lambda _cfg: True)
    spec = resolve_model(cfg, model=kwargs.get("model"), model_config=kwargs.get("model_config"))
    gpu_arg = kwargs.get("gpu")
    gpu = gpu_arg if isinstance(gpu_arg, GpuSpec) else resolve_gpu(gpu_arg, memory_gib=kwargs.get("gpu_memory_gib"))
    host = kwargs.get("host_memory_gib")
    consts = constants()
    work = read_workload(cfg, spec, consts, kwargs.get("sequence_tokens"), kwargs.get("image_tokens"))
    before = estimate_workload(work, spec, gpu, host)
    if _all_ok(before):
        return MemoryFix((), f"every phase is below {consts.ok_below:.0%} of {gpu.memory_gib:.1f} GiB; "
                             "nothing to change", True, before, before)

    singles = candidates(cfg, work, consts.fix_costs)

    def evaluate(combo: tuple[Candidate, ...]) -> MemoryEstimate:
        edited = work
        for cand in combo:
            edited = cand.apply(edited)
        return estimate_workload(edited, spec, gpu, host, with_worst_case=False)

    fitting: list[tuple[float, float, tuple[Candidate, ...], MemoryEstimate]] = []
    for cand in singles:
        est = evaluate((cand,))
        if _all_ok(est):
            fitting.append((cand.cost, est.peak.fraction, (cand,), est))
    found = _first_valid(cfg, fitting, valid)
    if found is None:
        pool = _pair_pool(singles)
        pairs = []
        for a, b in combinations(pool, 2):
            if a.knob == b.knob and set(a.edit) & set(b.edit):
                continue
            if {c.key for c in a.changes} & {c.key for c in b.changes}:
                continue
            est = evaluate((a, b))
            if _all_ok(est):
                pairs.append((a.cost + b.cost, est.peak.fraction, (a, b), est))
        found = _first_valid(cfg, pairs, valid)
    if found is not None:
        combo, est = found
        changes = tuple(c for cand in combo for c in cand.changes)
        summary = "; ".join(f"{c.key}: {c.old} -> {c.new} ({c.reason})" for c in changes)
        return MemoryFix(changes, f"{_worst(before)} is {before.peak.risk}; {summary} brings every phase below "
                                  f"{consts.ok_below:.0%} (worst after: {_worst(est)})", True, before, est)
    return MemoryFix((), _nothing_fits(work, spec, gpu, host, before), False, before, None)


def _pair_pool(singles: list[Candidate]) -> list[Candidate]:
    """The cheapest few values of each knob (pairs over everything would be quadratic in noise)."""
    by_knob: dict[tuple[str, ...], list[Candidate]] = {}
    for cand in singles:
        by_knob.setdefault(tuple(sorted(cand.edit)), []).append(cand)
    pool: list[Candidate] = []
    for group in by_knob.values():
        group = sorted(group, key=lambda c: c.cost)
        # keep the cheapest values and the most aggressive one
        keep = group[:_PAIR_CANDIDATES_PER_KNOB - 1]
        if group[-1] is not keep[-1]:
            keep.append(group[-1])
        pool.extend(keep)
    return pool


def _first_valid(cfg: VerlConfig, options: Sequence[tuple[float, float, tuple[Candidate, ...], MemoryEstimate]],
                 valid: Callable[[Any], bool]) -> tuple[tuple[Candidate, ...], MemoryEstimate] | None:
    for _cost, _fraction, combo, est in sorted(options, key=lambda o: (o[0], o[1])):
        changes = [c for cand in combo for c in cand.changes]
        if valid(cfg.with_changes(changes)):
            return combo, est
    return None


def _gap(before: MemoryEstimate, ok_below: float) -> str:
    """How far the worst phase is from fitting, in GiB and as a share of the card."""
    s = before.peak
    if s.basis:  # generate: judged on what fits beside the engine's pool
        over = s.peak_gib - s.capacity_gib
        line = "the card"
    else:
        over = s.peak_gib - ok_below * s.capacity_gib
        line = f"the {ok_below:.0%} line"
    if over <= 0:
        return f"{-over:.1f} GiB under {line}, too thin a margin"
    return f"{over:.1f} GiB over {line} ({100 * over / s.capacity_gib:.0f}% of the card)"


def _nothing_fits(work: Workload, spec: Any, gpu: GpuSpec, host: Any, before: MemoryEstimate) -> str:
    consts = constants()
    worst = _worst(before)
    more = None
    for factor in range(2, _MAX_GPU_MULTIPLIER + 1):
        scaled = work.edit({"topology.n_gpus": work.topology.n_gpus * factor,
                            "topology.fsdp_shard": work.topology.fsdp_shard * factor})
        if _all_ok(estimate_workload(scaled, spec, gpu, host, with_worst_case=False)):
            more = factor
            break
    options = []
    if more:
        gpus = work.topology.n_gpus
        options.append(f"{more}x the GPUs ({gpus * more} instead of {gpus}) with the same settings")
    options.append("GPUs with more memory")
    options.append("an algorithm change you must choose yourself (shorter max_response_length, smaller "
                   "ppo_mini_batch_size or rollout.n, LoRA)")
    return (f"{worst} is {before.peak.risk}, {_gap(before, consts.ok_below)}, and no one- or two-key "
            f"performance change (micro batches, token budgets, checkpointing, offload, gpu_memory_utilization, "
            f"rollout TP, max_num_seqs, entropy chunking/checkpointing, fsdp2, model_dtype) brings every phase "
            f"under it. Options: {'; '.join(options)}")
