"""What a sweep runs next, decided over plain data: the study's trials as :class:`Trial` snapshots and the ``Plan``.

Every decision is re-derived from the trials, so a new driver resumes where a dead one stopped. The driver
(``runner._Driver``) reads the study into snapshots (``_optuna_adapter.snapshot``), asks the functions here, and
carries out what they return: enqueue these points, ask the sampler for one, re-queue those trials, stop that one.

- a grid hands out its values on the first seed (Optuna's ``GridSampler``), then the other seeds: staged (the
  candidates in turn, ``_staged``), or every value on each seed, the value that went furthest first;
- TPE explores on the first seed with the baseline, then re-runs the best explored value (the candidate, chosen
  once) and the baseline on the other seeds;
- a RUNNING trial whose driver is gone is re-queued, and the waiting trials planned after it go behind it again;
- the race (``_race``) stops a trial once every other value planned on its seed was pruned or failed.

Nothing here imports Optuna (``tests/sweeps_tests/test_sweep_schedule.py`` runs without it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _staged as staged
from ._liveness import Lease, is_orphaned
from ._plan import Plan
from ._race import SeedTrial, won_seed
from ._result import TrialRecord
from ._space import same_point, same_value
from ._verdict import decide, lead

WAITING, RUNNING, COMPLETE = "WAITING", "RUNNING", "COMPLETE"
_FINISHED = ("COMPLETE", "PRUNED", "FAIL")  # Optuna's TrialState.is_finished()


@dataclass(frozen=True)
class Trial:
    """One trial of the study, as the schedule reads it."""

    number: int
    state: str  # Optuna's state name: WAITING, RUNNING, COMPLETE, PRUNED, FAIL
    values: dict[str, Any]  # the swept values (a WAITING trial's enqueued ones)
    seed: int
    role: str | None  # as stored; None for a trial the sampler proposed and no driver tagged yet
    planned: int  # its place in the planned order: its number, or for a re-queued copy its original's
    ignored: bool  # interrupted (re-queued as a new trial) or a duplicate grid point: it does not count
    record: TrialRecord  # as the sweep reports it
    last_step: int | None = None  # the last step it reported
    driver: Any = None  # the driver that runs it (``DriverIdentity.to_dict()``), as stored
    dir: str | None = None
    started_at: float | None = None  # epoch seconds
    handle: Any = field(default=None, compare=False, repr=False)  # the study's own object (for the adapter only)

    @property
    def finished(self) -> bool:
        return self.state in _FINISHED


@dataclass(frozen=True)
class Point:
    """A trial to enqueue: values on a seed, its role, and the attributes it is stored with."""

    values: dict[str, Any]
    seed: int
    role: str
    attrs: dict[str, Any] = field(default_factory=dict)  # requeued_from, planned

    def user_attrs(self) -> dict[str, Any]:
        return {"seed": self.seed, "role": self.role, **self.attrs}


@dataclass(frozen=True)
class Next:
    """What comes next: ``ask`` a trial now, after enqueueing ``enqueue``; ``candidate``: the value TPE picked
    for confirmation just now (to store, so it is chosen once)."""

    ask: bool
    enqueue: tuple[Point, ...] = ()
    candidate: dict[str, Any] | None = None


def role_of(plan: Plan, values: dict[str, Any], stored: str | None) -> str:
    """A trial's role: as stored, else what the plan makes of its values (a sampler's proposal explores)."""
    return stored or ("explore" if not plan.is_grid else plan.role(values))


def counted(trials: Sequence[Trial]) -> list[Trial]:
    return [t for t in trials if not t.ignored]


def covered(trials: Sequence[Trial], values: dict[str, Any], seed: int) -> bool:
    return any(t.seed == seed and same_point(t.values, values) for t in trials)


def is_duplicate(trials: Sequence[Trial], number: int, values: dict[str, Any], seed: int) -> bool:
    """A grid point asked again (two drivers, or a re-queued copy) that another trial already runs or ran."""
    return any(t.number != number and t.state != WAITING and t.seed == seed and same_point(t.values, values)
               for t in trials)


# -- what to run next -------------------------------------------------------------------------------------------


def rank(plan: Plan, trials: Sequence[Trial]) -> list[Any]:
    """Grid values, the one that went furthest on the seeds run so far (and then scored best) first: on each
    further seed it runs first, and the pruner measures the others against it. A running trial counts with
    the steps it has reported: the leader of a seed still running goes before a value already pruned."""
    key, sign = plan.keys[0], plan.spec.objective.sign
    best: dict[int, tuple[int, float]] = {}
    for t in trials:
        record = t.record
        if (record.usable or record.state == "running") and record.steps is not None and \
                record.objective is not None:
            i = next(i for i, v in enumerate(plan.grid_values) if same_value(v, record.values[key]))
            score = lead(record, sign, plan.spec.steps)
            best[i] = max(best.get(i, score), score)
    order = sorted(range(len(plan.grid_values)), key=lambda i: (i not in best, [-x for x in best.get(i, ())]))
    return [plan.grid_values[i] for i in order]


def next_grid(plan: Plan, trials: Sequence[Trial]) -> Next:
    """Grid: the sampler's grid over the values on the first seed, then the other seeds: staged (the
    candidates in turn, :func:`next_confirmation`), or every value on each seed, best value first."""
    if any(t.state == WAITING for t in trials):
        return Next(True)
    key, seeds = plan.keys[0], plan.seeds
    if any(not covered(trials, {key: v}, seeds[0]) for v in plan.grid_values):
        return Next(True)  # ask: GridSampler hands out a value not yet tried
    if plan.staged:
        return next_confirmation(plan, trials)
    for seed in seeds[1:]:
        for v in rank(plan, trials):
            if not covered(trials, {key: v}, seed):
                return Next(True, (Point({key: v}, seed, plan.role({key: v})),))
    return Next(False)


def next_confirmation(plan: Plan, trials: Sequence[Trial]) -> Next:
    """Staged grid (``_staged``), once the first seed has been handed out: the next pair, if any."""
    records = [t.record for t in trials]
    spec = plan.spec
    better: list[dict[str, Any]] | None = None  # the verdict's better candidates, computed once if asked

    def confirmed(values: dict[str, Any]) -> bool:
        nonlocal better
        if better is None:
            verdict = decide(records, plan.baseline, spec.objective, spec.constraints, level=spec.level,
                             min_pairs=spec.min_pairs, steps=spec.steps)
            better = [c.values for c in verdict.comparisons if c.status == "better"]
        return any(same_point(v, values) for v in better)

    points = staged.next_points(records, plan.baseline, plan.seeds, spec.objective.sign, spec.steps,
                                spec.min_pairs, confirmed)
    return Next(bool(points), tuple(Point(values, seed, plan.role(values)) for values, seed in points))


def choose_candidate(plan: Plan, trials: Sequence[Trial]) -> dict[str, Any] | None:
    """TPE: the explored value to confirm on the other seeds: the best complete, feasible one not the baseline."""
    sign = plan.spec.objective.sign
    best: TrialRecord | None = None
    for t in trials:
        if t.role != "explore" or t.state != COMPLETE:
            continue
        record = t.record
        if record.feasible is False or record.objective is None or same_point(record.values, plan.baseline):
            continue
        if best is None or sign * record.objective > sign * (best.objective or 0.0):
            best = record
    return None if best is None else best.values


def next_tpe(plan: Plan, trials: Sequence[Trial], candidate: dict[str, Any] | None) -> Next:
    """TPE: the baseline and TPE's values on the first seed, then the best value and the baseline on the
    other seeds. ``candidate``: the one stored, if any (else it is chosen once every explored value is in)."""
    if any(t.state == WAITING for t in trials):
        return Next(True)
    s0 = plan.seeds[0]
    if not covered(trials, plan.baseline, s0):
        return Next(True, (Point(plan.baseline, s0, "baseline"),))
    explored = [t for t in trials if t.role == "explore"]
    if len(explored) < plan.n_explore:
        return Next(True)  # ask: TPE proposes the next value
    if any(t.state == RUNNING for t in explored):
        return Next(False)  # the candidate is picked once every explored value is in
    chosen = None if candidate else choose_candidate(plan, trials)
    candidate = candidate or chosen
    if candidate is None:
        return Next(False)
    spec, baseline = plan.spec, plan.baseline
    order = staged.first_seed_order([t.record for t in trials], baseline, plan.seeds[0], spec.objective.sign,
                                    spec.steps)
    pair = [("baseline" if same_point(v, baseline) else "confirm", v)
            for v in staged.trailing_first(order, baseline, candidate)]  # as in a staged grid
    for seed in plan.seeds[1:]:
        missing = [(role, values) for role, values in pair if not covered(trials, values, seed)]
        if missing:  # both at once: the pruner's stand-in and the race see the other planned
            return Next(True, tuple(Point(values, seed, role) for role, values in missing), chosen)
    return Next(False, candidate=chosen)


def next_step(plan: Plan, trials: Sequence[Trial], candidate: dict[str, Any] | None) -> Next:
    """What comes next for the study's ``trials`` (all of them; the ignored ones are left out here)."""
    mine = counted(trials)
    return next_grid(plan, mine) if plan.is_grid else next_tpe(plan, mine, candidate)


def total_trials(plan: Plan, trials: Sequence[Trial]) -> int:
    """For the progress bar: a staged grid's first seed and the candidates begun on the others (at least
    one); otherwise the plan's count."""
    if not plan.staged:
        return plan.total_trials
    points = [(t.values, t.seed) for t in counted(trials)]
    begun = staged.candidates_begun(points, plan.baseline, plan.seeds[0])
    return len(plan.grid_values) + (len(plan.seeds) - 1) * (1 + max(1, begun))


# -- recovery ---------------------------------------------------------------------------------------------------


def orphaned(trials: Sequence[Trial], mine: Collection[int], stale_after_s: float, other_drivers: list[Any],
             now: float | None = None) -> list[Trial]:
    """The RUNNING trials not run by this driver (``mine``: their numbers) whose driver is gone (``_liveness``)."""
    now = time.time() if now is None else now
    out = []
    for t in trials:
        if t.state != RUNNING or t.number in mine:
            continue
        lease = Lease(Path(t.dir)) if t.dir else None
        started = now - t.started_at if t.started_at is not None else None
        if is_orphaned(t.driver, lease, started, stale_after_s, other_drivers):
            out.append(t)
    return out


def requeued(plan: Plan, t: Trial) -> Point:
    """The copy of an interrupted trial ``t``: its values on its seed, in its planned place."""
    return Point(t.values, t.seed, role_of(plan, t.values, t.role), {"requeued_from": t.number, "planned": t.planned})


def behind(trials: Sequence[Trial], planned: int) -> list[Trial]:
    """Waiting trials planned after ``planned``, in planned order: they go behind a trial re-queued at
    ``planned``. Optuna hands out waiting trials by trial number, and a later seed's pair must run in its planned
    order (the value trailing on the first seed first) for the pruner and the race to act
    (``_staged.trailing_first``)."""
    return sorted((t for t in trials if t.state == WAITING and t.planned > planned), key=lambda t: t.planned)


# -- the race ---------------------------------------------------------------------------------------------------


def racing(plan: Plan) -> bool:
    return plan.spec.race and plan.spec.prune


def planned_on(plan: Plan, seed: int, trials: Sequence[Trial], candidate: dict[str, Any] | None
               ) -> list[dict[str, Any]] | None:
    """Every value planned on ``seed``, a seed other than the first, or None while a TPE sweep has no
    candidate yet. ``trials``: the counted ones."""
    if plan.staged:  # the baseline and the candidates begun there so far (one more only if none wins)
        return [plan.baseline, *(t.values for t in trials if t.seed == seed)]
    if plan.is_grid:
        return [{plan.keys[0]: v} for v in plan.grid_values]
    return None if candidate is None else [plan.baseline, candidate]


def race(plan: Plan, number: int, values: dict[str, Any], seed: int, trials: Sequence[Trial],
         candidate: dict[str, Any] | None) -> Callable[[int], str | None]:
    """Why the race stops trial ``number`` (``values`` on ``seed``) at a given step, or None. ``trials``: the
    counted ones, read once (the other trials on the seed do not change while one trial's lines are read)."""
    spec = plan.spec
    if not racing(plan) or seed == plan.seeds[0]:
        # the first seed runs as the pruner leaves it, so the value that leads runs all the steps once (and
        # for TPE the sampler is still proposing values there)
        return lambda step: None
    planned = planned_on(plan, seed, trials, candidate)
    if planned is None:
        return lambda step: None
    others = [SeedTrial(t.values, t.record.state, t.last_step) for t in trials if t.number != number and t.seed == seed]
    return lambda step: None if step >= spec.steps or step < spec.warmup else \
        won_seed(values, seed, step, others, planned, spec.warmup)
