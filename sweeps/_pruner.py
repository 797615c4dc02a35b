"""The pruner: stop a trial once it falls behind the pace of another value on the same seed.

Rule: after ``warmup_steps``, trial (value, seed) is stopped at step t when some other value on the *same
seed* had already done better by step ``max(2, floor(pace * t))`` than this trial has by step t. With the
default ``pace = 0.4`` that means: it is more than 2.5 times slower than the best value on its seed; a run
that diverges falls below what the others had after their first update. Step 1 is never the reference: its
rollout comes from the untrained policy, the same for every value of a seed, so only noise can fall below it.

A value queued on the seed beside it that has not reached that step there yet (waiting behind it, or
started later) stands in with its curve on the first seed, where it has run already. That is what lets a
sweep that runs one trial at a time stop the loser of a later seed's pair when it runs first: nothing of the
other value is on its seed yet. The stand-in is only for values planned on the seed, never for every value
of the first seed, and the margin (2.5 times slower) is far wider than the spread between seeds; the verdict
still pairs the two on their own seed, at the step both reached.

Protected values (``advisor verify``'s baseline and proposed value): a trial of one is stopped at step t only
once every other protected value has reached step t on the same seed (or ended there), so the question the
sweep was asked, the proposal against the baseline, is always answered at equal steps on that seed.

A validation objective (``sparse``) is reported only every ``trainer.test_freq`` steps (verl validates then
and at the last step, ``verl/trainer/ppo/ray_trainer.py`` lines 1727-1728 in verl 0.9.1), so another
trial rarely has a value at exactly ``floor(pace * t)``; the reference is then its value at the last step at
or before it that it reported, i.e. where it stood then, the same validation a verl user would read. A
per-step objective keeps the exact step: no value there means no reference.

Why not Optuna's ``MedianPruner`` as it is: it compares a trial with every finished trial, whatever its
seed, so a good value on an unlucky seed is stopped as often as a bad value (with three seeds of the same
value, about half fall below the median by noise alone). A sweep here runs its values on the same seeds
and judges them in pairs (``_verdict``), so the pruner compares within a seed: the trials of other values
on that seed (running, finished or pruned), which share its data order and initial weights.

Why not "behind the leader at the same step" (``pace = 1``, successive halving's race): RL fixes are
often slow starters. A lower learning rate is behind early and ahead at the end; racing at equal steps
stops exactly the fix a sweep is meant to confirm. ``bench/bench_sweep_pruning.py`` measures the trade-off
(``pace`` 1 spends fewer steps and gets more verdicts wrong).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ._space import same_point
from ._storage import import_optuna

PACE = 0.4
"""a trial is stopped when worse at step t than another value on its seed was at step floor(PACE * t)"""

_PRUNER_CLASS: Any = None


def _trial_seed(trial: Any, default: int | None) -> int | None:
    seed = trial.user_attrs.get("seed")
    return default if seed is None else seed


def _params(trial: Any) -> dict[str, Any]:
    """A trial's values; a WAITING one has them only as its enqueued fixed params."""
    return dict(trial.params or trial.system_attrs.get("fixed_params", {}))


def _value_at(trial: Any, step: int, sparse: bool = False) -> float | None:
    """``trial``'s report at ``step``; with ``sparse``, its last report at or before ``step``."""
    values = trial.intermediate_values
    if sparse:
        before = [s for s in values if s <= step]
        step = max(before) if before else step
    value = values.get(step)
    return None if value is None or value != value else float(value)  # NaN never wins


def seed_paired_pruner(warmup_steps: int, first_seed: int, pace: float = PACE,
                       protected: Sequence[dict[str, Any]] = (), sparse: bool = False) -> Any:
    """A :class:`optuna.pruners.BasePruner` implementing the rule above.

    Args:
        warmup_steps: no trial is stopped before this step (at least 0).
        first_seed: the seed of trials that do not name one (those asked from the sampler, before the
            driver wrote the attribute).
        pace: in (0, 1]; smaller stops fewer trials (only the clearly slower ones).
        protected: values whose trials are stopped only once the other protected values reached the step on
            their seed (above).
        sparse: the objective is reported only at some steps (validation): compare with where another trial
            stood at the reference step (its last report at or before it), not only with a report there.
    """
    global _PRUNER_CLASS
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be at least 0 but got {warmup_steps}")
    if not 0 < pace <= 1:
        raise ValueError(f"pace must be in (0, 1] but got {pace}")
    if _PRUNER_CLASS is None:
        optuna = import_optuna()

        class SeedPairedPruner(optuna.pruners.BasePruner):  # type: ignore[name-defined]
            """Stop a trial that is behind the pace of another value on its seed (after a warm-up)."""

            def __init__(self, warmup_steps: int, first_seed: int, pace: float,
                         protected: Sequence[dict[str, Any]], sparse: bool) -> None:
                self.warmup_steps = warmup_steps
                self.first_seed = first_seed
                self.pace = pace
                self.protected = [dict(p) for p in protected]
                self.sparse = sparse

            def prune(self, study: Any, trial: Any) -> bool:
                step = trial.last_step
                if step is None or step < max(1, self.warmup_steps):
                    return False
                value = _value_at(trial, step)
                if value is None:
                    return False
                earlier = min(step, max(2, math.floor(self.pace * step)))
                sign = 1.0 if study.direction.name == "MAXIMIZE" else -1.0
                seed = _trial_seed(trial, self.first_seed)
                state = optuna.trial.TrialState
                trials = study.get_trials(deepcopy=False, states=(state.COMPLETE, state.RUNNING, state.PRUNED,
                                                                  state.WAITING))
                if not self._compared(trials, trial, seed, step):
                    return False
                for other in trials:
                    params = _params(other)
                    if other.number == trial.number or _trial_seed(other, self.first_seed) != seed or \
                            params == trial.params:
                        continue
                    theirs = _value_at(other, earlier, self.sparse)
                    behind = other.state in (state.RUNNING, state.WAITING) and (other.last_step or 0) < earlier
                    if seed != self.first_seed and behind:  # not there yet on this seed
                        theirs = self._on_first_seed(trials, params, earlier)
                    if theirs is not None and sign * theirs > sign * value:
                        return True
                return False

            def _compared(self, trials: list[Any], trial: Any, seed: int | None, step: int) -> bool:
                """False while ``trial`` is of a protected value and another protected value has not reached
                ``step`` on its seed (not started, waiting, or running behind)."""
                mine = dict(trial.params)
                if not any(same_point(mine, p) for p in self.protected):
                    return True
                for other in self.protected:
                    if same_point(other, mine):
                        continue
                    ran = [t for t in trials if _trial_seed(t, self.first_seed) == seed and
                           same_point(_params(t), other) and t.state != optuna.trial.TrialState.WAITING]
                    if not any(t.state.is_finished() or (t.last_step or 0) >= step for t in ran):
                        return False
                return True

            def _on_first_seed(self, trials: list[Any], params: dict[str, Any], step: int) -> float | None:
                for other in trials:
                    if _trial_seed(other, self.first_seed) == self.first_seed and _params(other) == params:
                        theirs = _value_at(other, step, self.sparse)
                        if theirs is not None:
                            return theirs
                return None

        _PRUNER_CLASS = SeedPairedPruner
    return _PRUNER_CLASS(warmup_steps, first_seed, pace, protected, sparse)
