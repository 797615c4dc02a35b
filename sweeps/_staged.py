"""The staged grid: every value on the first seed, then the candidates one at a time on the other seeds.

Successive halving with seeds as the budget. The first seed runs the whole grid (the pruner stops what falls
behind). The candidates are then ranked as the first seed left them: the value that went furthest (the pruner
keeps the value that leads), then the best objective. The first of them runs on every other seed beside the
baseline; if it beats the baseline on every seed the sweep is done, otherwise the next one runs there too,
and so on.

What that keeps of the full grid's verdict (``_verdict``): the decision. A fix is confirmed when some
candidate wins on every seed, and *keep baseline* still needs every candidate worse on every seed, so when
none wins they all run (most of them pruned within a few steps). What can differ is which value is confirmed
when several would win: the first seed's leader, where the full grid picks the best mean over the seeds.

Why it saves: RL learning curves cross (a lower learning rate is behind for the first half of a run and
ahead at the end), so the two values that cross both run to the end wherever they run side by side; the
pruner rightly stops neither. Staged, the crossing is watched once, on the first seed, and the other seeds
run only the value that came out ahead, against the baseline. On a later seed the two are queued together
and, of the two, the one that was behind on the first seed starts first: the pruner measures it against the
other's first-seed curve until the other's own curve on the seed is there (``_pruner``), and once it is
pruned the race (``_race``) stops the other at the same step. So one trial at a time, where the second of a
pair starts only when the first has ended, saves as much as two at once.

Not run again: a candidate that failed or broke a constraint on the first seed (the verdict counts it as
failed or infeasible whatever the other seeds show); and nothing at all once the baseline has failed on so
many seeds that no candidate can reach ``min_pairs`` paired seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._result import TrialRecord
from ._space import same_point
from ._verdict import lead


def first_seed_order(records: Sequence[TrialRecord], baseline: dict[str, Any], first_seed: int, sign: float,
                     steps: int) -> list[dict[str, Any]]:
    """The values in the first seed's order (furthest, then best), the baseline among them (last when it has no
    result); a candidate that failed or broke a constraint there is left out."""
    scored = []
    for r in records:
        is_baseline = same_point(r.values, baseline)
        if r.seed == first_seed and r.usable and r.objective is not None and (is_baseline or r.feasible is not False):
            scored.append((lead(r, sign, steps), r.values))
    order = [values for _, values in sorted(scored, key=lambda s: s[0], reverse=True)]
    if not any(same_point(v, baseline) for v in order):
        order.append(baseline)
    return order


def trailing_first(order: Sequence[dict[str, Any]], a: dict[str, Any], b: dict[str, Any]
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pair (a, b), the one further back in the first seed's ``order`` first (one not in it counts as last;
    on a tie ``a`` first): it runs first on a later seed, so the pruner can stop it before the other starts."""
    def place(values: dict[str, Any]) -> int:
        return next((i for i, v in enumerate(order) if same_point(v, values)), len(order))

    return (a, b) if place(a) >= place(b) else (b, a)


def baseline_out(records: Sequence[TrialRecord], baseline: dict[str, Any], n_seeds: int, min_pairs: int) -> bool:
    """The baseline failed on so many seeds that no candidate can reach ``min_pairs`` paired seeds."""
    failed = {r.seed for r in records if r.state in ("failed", "diverged") and same_point(r.values, baseline)}
    return n_seeds - len(failed) < min_pairs


def next_points(records: Sequence[TrialRecord], baseline: dict[str, Any], seeds: Sequence[int], sign: float,
                steps: int, min_pairs: int, confirmed: Callable[[dict[str, Any]], bool]
                ) -> list[tuple[dict[str, Any], int]]:
    """What to queue next once the first seed has been handed out: one later seed's missing pair (the value that
    was behind on the first seed first), or nothing (wait for a running trial, or done).

    Args:
        records: the sweep's trials (interrupted ones left out), waiting and running ones included.
        confirmed: whether a candidate, all of whose trials have finished, beat the baseline (the verdict's rule).
    """
    first, later = seeds[0], seeds[1:]
    if any(r.state == "running" for r in records if r.seed == first):
        return []  # the order is the first seed's, known once it has run
    if baseline_out(records, baseline, len(seeds), min_pairs):
        return []
    order = first_seed_order(records, baseline, first, sign, steps)
    for values in order:
        if same_point(values, baseline):
            continue
        pair = trailing_first(order, baseline, values)
        for seed in later:
            missing = [(point, seed) for point in pair
                       if not any(r.seed == seed and same_point(r.values, point) for r in records)]
            if missing:  # both at once: the race sees the second one planned (waiting) on the seed
                return missing
        if any(r.state in ("running", "waiting") for r in records):
            return []  # the next candidate waits for this one's verdict
        if confirmed(values):
            return []
    return []


def candidates_begun(points: Iterable[tuple[dict[str, Any], int]], baseline: dict[str, Any], first_seed: int) -> int:
    """How many candidates have been queued on a later seed (for the progress bar's total), of the sweep's
    (values, seed) points."""
    begun: list[dict[str, Any]] = []
    for values, seed in points:
        if seed != first_seed and not same_point(values, baseline) and not any(same_point(values, v) for v in begun):
            begun.append(values)
    return len(begun)
