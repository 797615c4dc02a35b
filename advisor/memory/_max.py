"""The other question: the largest micro batch, token budget or gpu_memory_utilization that fits, per phase.

Each phase has the one knob verl sizes it by (the log-prob and update micro batches or token budgets, the
engine's gpu_memory_utilization). The answer is found on the same model as the verdict: the knob is
edited on the :class:`~._workload.Workload` and the phase re-estimated, up to the largest value that keeps
the phase ``ok`` (below 80% of the card; for the generate phase, a full margin beside the pool).

The answer holds at the worst case, every sequence at max_prompt_length + max_response_length: GRPO
responses grow during training, so a value that fits only the typical length runs out of memory later in
the run. The typical-length value is given beside it. Only values verl accepts are proposed: a micro batch
divides the per-GPU batch it splits (verl checks it for the update's mini batch: verl/workers/config/actor.py:235
and critic.py:111 @ main 1dda039b; a log-prob batch that a micro batch does not divide leaves a ragged last
micro batch); a token budget holds at least one whole sequence (verl/utils/seqlen_balancing.py:384 asserts
max_token_len >= the longest sequence) and is otherwise a round multiple of 1024.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._constants import constants
from ._engines import pool_is_tunable
from ._estimate import estimate_workload
from ._hardware import GpuSpec, resolve_gpu
from ._knobs import knob_rules
from ._models import resolve_model
from ._read import read_workload
from ._workload import Workload

if TYPE_CHECKING:
    from advisor.load import VerlConfig


@dataclass(frozen=True)
class Largest:
    """The largest value of one knob that keeps one phase ``ok``."""

    stage: str
    key: str
    current: float | None
    largest: float | None  # None: not even the smallest value fits (every sequence at max length)
    limit: float  # the top of the searched range (the largest value that means something)
    typical: float | None = None  # the largest at the typical lengths (None: same lengths, or none fits)
    typical_source: str = ""  # what the typical lengths are
    missing: str | None = None  # the phase cannot be judged at any value: the input to pass
    integer: bool = True  # a count (micro batch, token budget); False for gpu_memory_utilization

    @property
    def capped(self) -> bool:
        """True when the largest value searched still fits: the phase is not what limits the knob."""
        return self.largest is not None and self.largest >= self.limit

    def to_dict(self) -> dict[str, Any]:
        as_key = self._as_key
        return {"stage": self.stage, "key": self.key, "current": as_key(self.current),
                "largest": as_key(self.largest), "limit": as_key(self.limit), "capped": self.capped,
                "lengths": "worst case", "typical": as_key(self.typical), "typical_source": self.typical_source,
                "missing": self.missing}

    def _as_key(self, value: float | None) -> float | int | None:
        """A value as verl's config holds it: an integer key's value as an int (80, not 80.0)."""
        if value is None or not self.integer or value != value or value in (float("inf"), float("-inf")):
            return value
        return int(value) if float(value).is_integer() else value


@dataclass(frozen=True)
class _Knob:
    stage: str
    key: str
    field: str
    current: float | None
    low: float
    high: float
    step: float  # 1 for integers, 0.01 for gpu_memory_utilization
    grid: tuple[float, ...] = ()  # the values verl accepts, ascending (empty: every step in [low, high])


def _divisors(n: int) -> tuple[float, ...]:
    return tuple(float(d) for d in range(1, max(1, n) + 1) if n % d == 0)


def _budgets(seq: int, high: int) -> tuple[float, ...]:
    """Token budgets: one sequence, then multiples of 1024 up to the whole per-GPU batch."""
    return tuple(float(v) for v in sorted({seq, *range(-(-seq // 1024) * 1024, high + 1, 1024)}) if v <= max(seq, high))


def _key(field: str) -> str:
    """The config key that sets a workload field: knowledge/memory_knobs.yaml's entry for it (the one table of
    which key sizes which phase; a key per verl version: the first listed)."""
    rule = next(r for r in knob_rules() if r.field == field)
    return rule.key if isinstance(rule.key, str) else rule.key[0]


def _knobs(work: Workload) -> list[_Knob]:
    seq = work.max_seq_tokens
    per_dp = work.responses_per_dp
    knobs: list[_Knob] = []

    def knob(stage: str, field: str, current: float | None, low: float, high: float, step: float,
             grid: tuple[float, ...] = ()) -> None:
        knobs.append(_Knob(stage, _key(field), field, current, low, high, step, grid))

    if pool_is_tunable(work.rollout.engine):
        knob("generate", "rollout.gmu", work.rollout.gmu, 0.05, 0.99, 0.01)
    if work.actor.logprob_dynamic:
        knob("old_log_prob", "actor.logprob_max_token_len", work.actor.logprob_max_token_len, seq, seq * per_dp, 1,
             _budgets(seq, seq * per_dp))
    else:
        knob("old_log_prob", "actor.logprob_micro", work.actor.logprob_micro, 1, per_dp, 1, _divisors(per_dp))
    if work.ref.used:
        if work.ref.dynamic:
            knob("ref_log_prob", "ref.max_token_len", work.ref.max_token_len, seq, seq * per_dp, 1,
                 _budgets(seq, seq * per_dp))
        else:
            knob("ref_log_prob", "ref.micro", work.ref.micro, 1, per_dp, 1, _divisors(per_dp))
    if work.actor.dynamic:
        knob("actor_update", "actor.max_token_len", work.actor.max_token_len, seq, seq * work.mini_per_dp, 1,
             _budgets(seq, seq * work.mini_per_dp))
    else:
        knob("actor_update", "actor.micro_per_gpu", work.actor.micro_per_gpu, 1, work.mini_per_dp, 1,
             _divisors(work.mini_per_dp))
    if work.critic.used:
        if work.critic.dynamic:
            knob("critic_update", "critic.max_token_len", work.critic.max_token_len, seq, seq * work.mini_per_dp, 1,
                 _budgets(seq, seq * work.mini_per_dp))
        else:
            knob("critic_update", "critic.micro", work.critic.micro, 1, work.mini_per_dp, 1,
                 _divisors(work.mini_per_dp))
    return knobs


_RANK = {"ok": 0, "unknown": 1, "tight": 1, "oom": 2}


def _risk(stage: Any) -> str:
    return stage if isinstance(stage, str) else stage.risk


def _largest_on_grid(fits: Callable[[float], bool], grid: tuple[float, ...]) -> float | None:
    """The largest grid value for which ``fits`` holds (memory grows with the value: bisection is exact)."""
    if not grid or not fits(grid[0]):
        return None
    lo, hi = 0, len(grid) - 1
    if fits(grid[hi]):
        return grid[hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(grid[mid]):
            lo = mid
        else:
            hi = mid
    return grid[lo]


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


def largest_that_fits(cfg: VerlConfig, estimate_kwargs: Mapping[str, Any] | None = None) -> tuple[Largest, ...]:
    """For each phase, the largest value of the knob that sizes it that keeps the phase ``ok`` with every
    sequence at its max length, and (beside it) at the typical lengths.

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
    worst = work.edit({"lengths.typical_tokens": float(work.max_seq_tokens)})
    shorter = work.lengths.typical_tokens < work.max_seq_tokens
    # a knob may size other phases too (gpu_memory_utilization: the KV cache some verl versions wake during the
    # weight sync): a value fits only when it leaves every other phase no worse than it is now
    before = {s.stage: s for s in estimate_workload(worst, spec, gpu, with_worst_case=False).stages}
    typical_before = {s.stage: s.risk for s in estimate_workload(work, spec, gpu, with_worst_case=False).stages}
    out = []
    for knob in _knobs(work):
        def fits(value: float, knob: _Knob = knob, base: Workload = worst) -> bool:
            edit: dict[str, Any] = {knob.field: value if knob.step < 1 else int(value)}
            edited = base.edit(edit)
            est = estimate_workload(edited, spec, gpu, with_worst_case=False)
            now = before if base is worst else typical_before
            return est.stage(knob.stage).risk == "ok" and all(
                _RANK[s.risk] <= _RANK[_risk(now[s.stage])] for s in est.stages if s.stage != knob.stage)

        if before[knob.stage].risk == "unknown" and before[knob.stage].missing:
            out.append(Largest(knob.stage, knob.key, knob.current, None, knob.grid[-1] if knob.grid else knob.high,
                               missing=before[knob.stage].missing, integer=knob.step >= 1))
            continue

        def search(check: Callable[[float], bool], knob: _Knob = knob) -> float | None:
            if knob.grid:
                return _largest_on_grid(check, knob.grid)
            return _largest(check, knob.low, knob.high, knob.step)

        largest = search(fits)
        typical = None
        if shorter:
            def fits_typical(value: float, knob: _Knob = knob) -> bool:
                return fits(value, knob, work)

            typical = search(fits_typical)
        out.append(Largest(knob.stage, knob.key, knob.current, largest, knob.grid[-1] if knob.grid else knob.high,
                           typical, work.lengths.typical_source if shorter else "", integer=knob.step >= 1))
    return tuple(out)
