"""The other question: the largest micro batch, token budget or gpu_memory_utilization that fits, per phase.

Each phase has the one knob verl sizes it by (the log-prob and update micro batches or token budgets, the
engine's gpu_memory_utilization). The answer is found on the same model as the verdict: the knob is
edited on the :class:`~._workload.Workload` and the phase re-estimated, up to the largest value that keeps
the phase ``ok`` (below 80% of the card; for the generate phase, a full margin beside the pool).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ._constants import constants
from ._engines import pool_is_tunable
from ._estimate import estimate_workload
from ._hardware import GpuSpec, resolve_gpu
from ._models import resolve_model
from ._workload import Workload, read_workload

_A = "actor_rollout_ref.actor."
_R = "actor_rollout_ref.rollout."
_REF = "actor_rollout_ref.ref."


@dataclass(frozen=True)
class Largest:
    """The largest value of one knob that keeps one phase ``ok``."""

    stage: str
    key: str
    current: float | None
    largest: float | None  # None: not even the smallest value fits
    limit: float  # the top of the searched range (the largest value that means something)

    @property
    def capped(self) -> bool:
        """True when the largest value searched still fits: the phase is not what limits the knob."""
        return self.largest is not None and self.largest >= self.limit

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "key": self.key, "current": self.current, "largest": self.largest,
                "limit": self.limit, "capped": self.capped}


@dataclass(frozen=True)
class _Knob:
    stage: str
    key: str
    field: str
    current: float | None
    low: float
    high: float
    step: float  # 1 for integers, 0.01 for gpu_memory_utilization


def _knobs(work: Workload) -> list[_Knob]:
    seq = work.max_seq_tokens
    per_dp = work.responses_per_dp
    knobs: list[_Knob] = []
    if pool_is_tunable(work.engine):
        knobs.append(_Knob("generate", _R + "gpu_memory_utilization", "gmu", work.gmu, 0.05, 0.99, 0.01))
    if work.logprob_dynamic:
        knobs.append(_Knob("old_log_prob", _R + "log_prob_max_token_len_per_gpu", "logprob_max_token_len",
                           work.logprob_max_token_len, seq, seq * per_dp, 1))
    else:
        knobs.append(_Knob("old_log_prob", _R + "log_prob_micro_batch_size_per_gpu", "logprob_micro",
                           work.logprob_micro, 1, per_dp, 1))
    if work.ref_used:
        if work.ref_dynamic:
            knobs.append(_Knob("ref_log_prob", _REF + "log_prob_max_token_len_per_gpu", "ref_max_token_len",
                               work.ref_max_token_len, seq, seq * per_dp, 1))
        else:
            knobs.append(_Knob("ref_log_prob", _REF + "log_prob_micro_batch_size_per_gpu", "ref_micro",
                               work.ref_micro, 1, per_dp, 1))
    if work.dynamic:
        knobs.append(_Knob("actor_update", _A + "ppo_max_token_len_per_gpu", "max_token_len", work.max_token_len,
                           seq, seq * work.mini_per_dp, 1))
    else:
        knobs.append(_Knob("actor_update", _A + "ppo_micro_batch_size_per_gpu", "micro_per_gpu", work.micro_per_gpu,
                           1, work.mini_per_dp, 1))
    if work.critic_used:
        if work.critic_dynamic:
            knobs.append(_Knob("critic_update", "critic.ppo_max_token_len_per_gpu", "critic_max_token_len",
                               work.critic_max_token_len, seq, seq * work.mini_per_dp, 1))
        else:
            knobs.append(_Knob("critic_update", "critic.ppo_micro_batch_size_per_gpu", "critic_micro",
                               work.critic_micro, 1, work.mini_per_dp, 1))
    return knobs


def _largest(fits: Callable[[float], bool], low: float, high: float, step: float) -> float | None:
    """The largest value in [low, high] (on the step grid) for which ``fits`` holds.

    A fractional knob (gpu_memory_utilization) fits only inside a window (too small: the weights do not fit
    the pool; too large: nothing fits beside it), so its grid is scanned from the top; an integer knob
    (micro batch, token budget) only grows memory, so bisection is exact.
    """
    lo, hi = round(low / step), round(high / step)
    if step < 1:
        return next((round(i * step, 2) for i in range(hi, lo - 1, -1) if fits(round(i * step, 2))), None)
    if not fits(lo * step):
        return None
    if fits(hi * step):
        return hi * step
    while hi - lo > 1:  # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid * step):
            lo = mid
        else:
            hi = mid
    return lo * step


def largest_that_fits(cfg: Any, estimate_kwargs: Mapping[str, Any] | None = None) -> tuple[Largest, ...]:
    """For each phase, the largest value of the knob that sizes it that keeps the phase ``ok``.

    Args:
        cfg: a :class:`~advisor.VerlConfig`.
        estimate_kwargs: the keyword arguments of :func:`~advisor.memory.estimate_memory`.

    Raises:
        ConfigError: unknown model or GPU (as :func:`~advisor.memory.estimate_memory`).
    """
    kwargs = dict(estimate_kwargs or {})
    spec = resolve_model(cfg, model=kwargs.get("model"), model_config=kwargs.get("model_config"))
    gpu_arg = kwargs.get("gpu")
    gpu = gpu_arg if isinstance(gpu_arg, GpuSpec) else resolve_gpu(gpu_arg, memory_gib=kwargs.get("gpu_memory_gib"))
    work = read_workload(cfg, spec, constants(), kwargs.get("sequence_tokens"), kwargs.get("image_tokens"))
    out = []
    for knob in _knobs(work):
        def fits(value: float, knob: _Knob = knob) -> bool:
            edited = replace(work, **{knob.field: value if knob.step < 1 else int(value)})
            est = estimate_workload(edited, spec, gpu, with_worst_case=False)
            return est.stage(knob.stage).risk == "ok"

        largest = _largest(fits, knob.low, knob.high, knob.step)
        out.append(Largest(knob.stage, knob.key, knob.current, largest, knob.high))
    return tuple(out)
