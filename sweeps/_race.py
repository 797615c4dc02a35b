"""The race: stop the trial that has outrun every other value on its seed.

Rule: on one seed, once every other value planned there has finished behind the pace (pruned) or failed,
the one trial still running there leads that seed. It is stopped as soon as it has run the warm-up and at
least as many steps as each of the others; its state is ``stopped`` (not ``pruned``: it is the value that
won its seed, not one that fell behind), with the step and the reason in its note.

What the verdict reads, and why stopping the leader there leaves it as it was. The verdict (``_verdict``)
pairs a candidate with the baseline *on the same seed* at the last step both reached. Once every other value
on the seed has stopped, each pair the leader takes part in is fixed: its step is the other trial's last
step, which the leader has reached, so no pair reads the leader's later steps. The ranking of confirmed
candidates (the one whose trials ran the most steps) counts a stopped trial's planned steps: without the race
it would have run them all, since nothing was left on its seed to prune it. So the decision and the chosen
value are those of the same sweep without the race, except for what only the leader's later steps could
show: a crash or a constraint broken after the step it was stopped at, as for any pruned trial.

No correction for repeated looks is needed: the stop never looks at the verdict's statistic. It is decided
by which trials the pruner stopped, and the verdict is computed once, on the finished trials, by the same
rule. The pruner's own assumption carries over: a value more than 2.5 times slower than another on its
seed (``PACE``) does not catch up within the run.

Why not race the whole comparison at equal steps, stopping every trial once the paired verdict at a common
step t is significant at a level corrected for the number of looks (Bonferroni over the looks; or
alpha-spending, Lan & DeMets 1983; or an anytime-valid confidence sequence, Howard et al. 2021)? Two reasons,
measured by ``bench/bench_sweep_pruning.py`` on the full grid's own curves:

- with 3 seeds the paired bootstrap interval is [min, max] of the differences at every level above
  1 - 2/27 (92.6%), so no correction over looks makes it any stricter; the rule is "same sign on every
  seed" at every level;
- the question changes with t: the verdict compares values at the *last* step, and RL curves cross (a lower
  learning rate is behind for the first half and ahead at the end). Alpha-spending controls the chance of a
  false difference at a fixed question, not a difference that reverses. On the bench's scenarios a race at
  equal steps stops at step 3 to 12 of 30 and gets two decisions and three chosen values wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._space import same_point

RACE_ATTR = "race"
"""user attribute of a trial the race stopped: {"step": int, "why": str}"""


@dataclass(frozen=True)
class SeedTrial:
    """Another trial on the same seed, as the race needs it."""

    values: dict[str, Any]
    state: str  # as _plan.state_name reports it
    steps: int | None


def won_seed(values: dict[str, Any], seed: int, step: int, others: Sequence[SeedTrial],
             planned: Sequence[dict[str, Any]] | None, warmup_steps: int) -> str | None:
    """Why the running trial ``values`` on ``seed``, now at ``step``, has won its seed; None while it has not.

    Args:
        others: the other trials on the same seed (interrupted and duplicate ones left out).
        planned: every value planned on the seed; None when that is not known yet (TPE's first seed,
            whose values the sampler keeps proposing).
        warmup_steps: no trial is stopped before this step (the pruner's warm-up).
    """
    if planned is None or step < max(1, warmup_steps):
        return None
    last = 0
    for v in planned:
        if same_point(v, values):
            continue
        trials = [o for o in others if same_point(o.values, v)]
        if not trials or any(o.state not in ("pruned", "failed", "diverged") for o in trials):
            return None  # not started, still running, waiting, or it ran to the end
        last = max([last, *(o.steps or 0 for o in trials)])
    if step < last:
        return None
    return f"it outran every other value on seed {seed} (pruned or failed by step {last})"
