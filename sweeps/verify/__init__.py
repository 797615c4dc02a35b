"""``advisor verify``: run ``suggest`` (or take the change the user names), sweep it, and say what was learned.

The plan (``knowledge/verify.yaml``):

- **values**: the baseline (the config's value), the proposed value and a third: one step beyond the proposal
  (the same ratio again for a positive number, the same difference for an integer), or the geometric midpoint
  after a move of more than 4x (after lr 1e-4 -> 1e-6 the useful question is whether 1e-5 already does), kept
  inside the key's customary range (``ranges``: a temperature of 0.3 -> 1.0 gets 1.2, not 3.33). Every value
  passes ``advisor check``'s rules (no new error) and, with a GPU given, the memory model, before a trial starts.
- **objective**: held-out validation (``val-core/*/mean@*``, at verl's fixed ``val_kwargs``) whenever the key
  changes how training samples are drawn or scored (temperature, top_p, n, the reward path) or the run logged
  validation; trials then validate every sixth of their steps. Otherwise the diagnosed tree's objective.
  Constraints are the diagnosed tree's (bounds from the metrics catalog's healthy ranges).
- **pruning**: none before a third of the steps; the baseline and the proposal are stopped only once both
  reached the step on the seed, and every value runs on every seed.
- **verdict** (``_verdict``): fix confirmed, a different value is better, keep baseline, or insufficient
  evidence with what more would decide it.
- **reproduction** (``_reproduce``): the diagnosis is read on every trial's metrics; trials whose baseline does
  not show it cannot refute the fix, and the verdict says so.

A memory/speed key that ``suggest`` adds only to keep the config valid is applied to every trial, baseline
included, so the comparison is about the fix alone.
"""

from __future__ import annotations

from ._plan import (
    BIG_MOVE,
    KeyRange,
    TreeGoal,
    ValidationGoal,
    VerifyPlan,
    VerifySettings,
    load_goals,
    load_ranges,
    load_validation,
    plan_verify,
    step_beyond,
    third_value,
)
from ._render import render_plan, render_verdict
from ._run import VerifyResult, apply_sentence, reproduce, run_plan, verify

__all__ = ["BIG_MOVE", "KeyRange", "TreeGoal", "ValidationGoal", "VerifyPlan", "VerifyResult", "VerifySettings",
           "apply_sentence", "load_goals", "load_ranges", "load_validation", "plan_verify", "render_plan",
           "render_verdict", "reproduce", "run_plan", "step_beyond", "third_value", "verify"]
