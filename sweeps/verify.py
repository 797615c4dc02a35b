"""``advisor verify``: run ``suggest``, then sweep the keys it would change and say whether the fix holds.

The plan: the suggested key(s) at the baseline (the config's value), the proposed value and one step
beyond it (the same ratio again for a positive number, the same difference for an integer), or, when the
proposal moves a positive number more than 4x, the geometric midpoint instead (after lr 1e-4 -> 1e-6 the
useful question is whether 1e-5 already does, not whether 1e-8 does better); the
objective and constraints of the diagnosed tree (``knowledge/verify.yaml``, bounds from the metrics
catalog's healthy ranges). A memory/speed key that ``suggest`` adds only to keep the config valid is
applied to every trial, baseline included, so the comparison is about the fix alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.datafiles import knowledge_dir, load_knowledge
from advisor.errors import PlaybookError, SweepError
from advisor.findings import Change
from advisor.load import VerlConfig
from advisor.metrics import load_catalog
from advisor.playbook import PERFORMANCE_KEY, TREES, Suggestion, config_errors, suggest_run, validated

from ._objective import Constraint, Objective
from ._space import Param

VERIFY_FILE = "verify.yaml"


@dataclass(frozen=True)
class TreeGoal:
    """What a fix of one debug tree must improve (objective) and keep (constraints)."""

    tree: str
    objective: Objective
    constraints: tuple[Constraint, ...]
    why: str


@dataclass
class VerifyPlan:
    """The sweep ``advisor verify`` runs for a suggestion."""

    suggestion: Suggestion
    params: list[Param]
    fixed: list[Change]  # dependent memory/speed keys applied to every trial
    goal: TreeGoal
    steps: int
    notes: list[str] = field(default_factory=list)

    @property
    def fixed_overrides(self) -> list[str]:
        return [c.override() for c in self.fixed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "decided_by": self.suggestion.decided_by.id if self.suggestion.decided_by else None,
            "tree": self.goal.tree,
            "params": [{"key": p.key, "values": list(p.values or ())} for p in self.params],
            "fixed": self.fixed_overrides,
            "objective": self.goal.objective.to_dict(),
            "constraints": [c.to_dict() for c in self.goal.constraints],
            "why": self.goal.why,
            "steps": self.steps,
            "notes": list(self.notes),
        }


def load_goals() -> dict[str, TreeGoal]:
    """knowledge/verify.yaml, checked: every tree has a goal; every bound is a published healthy range."""
    path = knowledge_dir() / VERIFY_FILE
    data = load_knowledge(VERIFY_FILE)
    trees = data.get("trees") if isinstance(data, dict) else None
    if not isinstance(trees, dict):
        raise PlaybookError("needs a 'trees' mapping", path=str(path))
    catalog = load_catalog()
    goals: dict[str, TreeGoal] = {}
    for tree in TREES:
        raw = trees.get(tree)
        if not isinstance(raw, dict) or not isinstance(raw.get("objective"), dict):
            raise PlaybookError(f"tree '{tree}' has no objective", path=str(path))
        metric, goal = raw["objective"].get("metric"), raw["objective"].get("goal")
        if goal not in ("max", "min") or not catalog.is_known(str(metric)):
            raise PlaybookError(f"tree '{tree}': objective needs a known metric and goal max|min", path=str(path))
        constraints = []
        for key, op, bound in (("below_healthy", "<=", "high"), ("above_healthy", ">=", "low")):
            for name in raw.get(key) or []:
                info = catalog.lookup(name)
                value = getattr(info.healthy, bound, None) if info and info.healthy else None
                if value is None:
                    raise PlaybookError(f"tree '{tree}': {name} has no healthy {bound} bound in the metrics "
                                        "catalog", path=str(path))
                constraints.append(Constraint(name, op, float(value)))
        goals[tree] = TreeGoal(tree, Objective(str(metric), "maximize" if goal == "max" else "minimize"),
                               tuple(constraints), str(raw.get("why", "")))
    unknown = set(trees) - set(TREES)
    if unknown:
        raise PlaybookError(f"unknown tree(s): {', '.join(sorted(unknown))}", path=str(path))
    return goals


def step_beyond(old: Any, new: Any) -> Any | None:
    """The value one step past ``new`` in the direction ``old -> new``; None when there is no such step.

    Positive floats step by the same ratio (lr 1e-6 -> 5e-7 gives 2.5e-7), integers by the same
    difference (n 1 -> 5 gives 9; never below 1), a float from 0 by the same difference. Booleans and
    strings have none.
    """
    if isinstance(old, bool) or isinstance(new, bool) or not isinstance(old, (int, float)) \
            or not isinstance(new, (int, float)) or old == new:
        return None
    if isinstance(old, int) and isinstance(new, int):
        beyond = new + (new - old)
        return beyond if beyond >= 1 else None
    old_f, new_f = float(old), float(new)
    if old_f > 0 and new_f > 0:
        return float(f"{new_f * (new_f / old_f):.6g}")
    beyond = new_f + (new_f - old_f)
    return float(f"{beyond:.6g}") if beyond >= 0 or new_f < 0 else None


BIG_MOVE = 4.0  # a proposal that moves a positive number by more than this ratio gets a midpoint, not a step beyond


def third_value(old: Any, new: Any) -> tuple[Any, str] | None:
    """The third value to sweep beside ``old`` and ``new``, and what it is: one step beyond ``new``
    (:func:`step_beyond`), or the geometric midpoint (two significant digits) when ``new`` is more than
    ``BIG_MOVE`` times ``old`` or less than a ``BIG_MOVE``-th of it; None when there is none."""
    if isinstance(old, float) and isinstance(new, float) and old > 0 and new > 0 and \
            max(new / old, old / new) > BIG_MOVE:
        return float(f"{math.sqrt(old * new):.2g}"), "midpoint"
    beyond = step_beyond(old, new)
    return None if beyond is None else (beyond, "one step beyond")


def plan_verify(suggestion: Suggestion, *, steps: int | None = None) -> VerifyPlan:
    """The sweep that tests ``suggestion``'s diff.

    Raises:
        SweepError: there is nothing to verify (no change proposed, or the remedy is outside the config).
    """
    if not suggestion.changes or suggestion.decided_by is None:
        d = suggestion.decided_by
        reason = (f"{d.id}'s remedy is outside the config; see `advisor suggest`" if d is not None
                  else "the run looks healthy on every metric the playbook reads")
        raise SweepError(f"nothing to verify: advisor suggest proposes no config change ({reason})")
    cfg, rule = suggestion.config, suggestion.decided_by.rule
    goal = load_goals()[rule.tree]
    primary = [c for c in suggestion.changes if rule.tree in ("memory", "throughput")
               or not PERFORMANCE_KEY.search(c.key)]
    fixed = [c for c in suggestion.changes if c not in primary]
    notes: list[str] = []
    if fixed and config_errors(cfg.with_changes(fixed)) - config_errors(cfg):
        raise SweepError(f"cannot verify {suggestion.decided_by.id}'s diff on a paired baseline: "
                         f"{', '.join(c.override() for c in fixed)} is only valid together with the fix")
    params = []
    for change in primary:
        values = [change.old, change.new]
        third = third_value(change.old, change.new) if len(primary) == 1 else None
        if third is not None:
            value, what = third
            if _valid_beyond(cfg, change, value, fixed, rule, suggestion):
                values.append(value)
                if what == "midpoint":
                    notes.append(f"{change.key}={value}: the geometric midpoint, since the proposal moves it more "
                                 f"than {BIG_MOVE:g}x (one step beyond would be {step_beyond(change.old, change.new)})")
            else:
                notes.append(f"{change.key}={value} ({what}) left out: verl would reject it")
        params.append(Param.grid(change.key, values))
    run_steps = steps if steps is not None else _observed_steps(suggestion)
    if fixed:
        notes.append("applied to every trial (memory/speed only): " + ", ".join(c.override() for c in fixed))
    return VerifyPlan(suggestion, params, fixed, goal, run_steps, notes)


def _valid_beyond(cfg: VerlConfig, change: Change, beyond: Any, fixed: Sequence[Change], rule: Any,
                  suggestion: Suggestion) -> bool:
    trial = (Change(change.key, change.old, beyond, change.reason, add=change.add),)
    ok = validated(cfg.with_changes(fixed), trial, rule, config_errors(cfg.with_changes(fixed)))
    return ok is not None and len(ok) == 1


def _observed_steps(suggestion: Suggestion) -> int:
    """As many steps as the run that showed the problem (its last logged step), at least 10."""
    last = suggestion.window.last_step if suggestion.window.size else 0
    return max(10, int(last))


@dataclass
class VerifyResult:
    plan: VerifyPlan
    sweep: Any  # SweepResult

    @property
    def exit_code(self) -> int:
        return int(self.sweep.exit_code)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1, "suggestion": self.plan.suggestion.to_dict(), "plan": self.plan.to_dict(),
                "sweep": self.sweep.to_dict()}


def verify(config: VerlConfig, metrics: str | Path, *, steps: int | None = None, seeds: int = 3,
           window: int | None = None, rules: tuple[Any, ...] | None = None,
           command: str | Sequence[str] | None = None, overrides: Sequence[str] = (), launcher: Any | None = None,
           storage: str | None = None, study_name: str | None = None, parallel: int = 1,
           out: str | Path | None = None, progress: Any | None = None, prune: bool = True,
           race: bool = True, every_seed: bool = False) -> VerifyResult:
    """Suggest a diff for the run, sweep it against the config's own values, and return the verdict."""
    from .runner import SweepSpec, run_sweep

    plan = plan_verify(suggest_run(config, metrics, window=window, rules=rules), steps=steps)
    spec = SweepSpec(params=plan.params, objective=plan.goal.objective, steps=plan.steps,
                     constraints=list(plan.goal.constraints), seeds=seeds,
                     trials=math.prod(len(p.values or ()) for p in plan.params) if len(plan.params) > 1 else None,
                     prune=prune, race=race, every_seed=every_seed and len(plan.params) == 1)
    result = run_sweep(config, spec, command=command, overrides=[*overrides, *plan.fixed_overrides],
                       launcher=launcher, storage=storage, study_name=study_name, parallel=parallel, out=out,
                       progress=progress)
    return VerifyResult(plan, result)


def render_plan(plan: VerifyPlan, console: Any) -> None:
    """What will be swept and why, before (or instead of, with --dry-run) the sweep."""
    from rich.markup import escape

    d = plan.suggestion.decided_by
    console.print(f"[bold]verify[/] {escape(d.id)} ({escape(d.rule.tree)}): {escape(d.summary)}")
    for p in plan.params:
        values = ", ".join(repr(v) for v in (p.values or ()))
        console.print(f"  sweep {escape(p.key)} over [{escape(values)}] (baseline first)")
    obj = plan.goal.objective
    cons = ", ".join(f"{c.metric}{c.op}{c.bound:g}" for c in plan.goal.constraints) or "none"
    console.print(f"  objective {escape(obj.metric)} ({obj.direction}), constraints {escape(cons)}, "
                  f"{plan.steps} steps: {escape(plan.goal.why)}")
    for note in plan.notes:
        console.print(f"  [dim]{escape(note)}[/dim]")
