"""The verify plan and verdict as console text."""

from __future__ import annotations

from typing import Any

from .._space import format_value
from ._plan import VerifyPlan
from ._run import VerifyResult
from ._verdict import DIFFERENT_VALUE, FIX_CONFIRMED


def render_plan(plan: VerifyPlan, console: Any) -> None:
    """What will be swept and why, before (or instead of, with --dry-run) the sweep."""
    from rich.markup import escape

    d = plan.suggestion.decided_by
    if plan.named:
        console.print("[bold]verify[/] the change you named" + (f" (the run's diagnosis: {escape(d.id)}, "
                                                               f"{escape(d.rule.tree)})" if d else ""))
    else:
        assert d is not None
        console.print(f"[bold]verify[/] {escape(d.id)} ({escape(d.rule.tree)}): {escape(d.summary)}")
    for p in plan.params:
        values = ", ".join(format_value(v) for v in (p.values or ()))
        console.print(f"  sweep {escape(p.key)} over [{escape(values)}] (baseline, proposed, third)")
    obj = plan.objective or plan.goal.objective
    cons = ", ".join(f"{c.metric}{c.op}{c.bound:g}" for c in plan.goal.constraints) or "none"
    console.print(f"  objective {escape(obj.metric)} ({obj.direction}): {escape(plan.objective_why)}")
    steps = f"{plan.steps} steps" if plan.steps_known else f"up to {plan.steps} steps"
    console.print(f"  constraints {escape(cons)}; {steps} a trial, no pruning before step {plan.warmup}")
    for note in plan.notes:
        console.print(f"  [dim]{escape(note)}[/dim]")


def render_verdict(result: VerifyResult, console: Any) -> None:
    """The verify verdict and, per value, the seeds and steps behind it."""
    from rich.markup import escape

    v = result.verdict
    if v is None:
        return
    colour = {"fix confirmed": "green", "a different value is better": "green"}.get(v.decision, "yellow")
    named = "" if v.value is None else ": " + ", ".join(f"{k}={format_value(x)}" for k, x in v.value.items())
    console.print(f"[bold {colour}]verify: {escape(v.decision.upper())}[/]{escape(named)}")
    console.print(f"  {escape(v.reason)}")
    apply = result.apply()
    if apply:
        console.print(f"  [bold]{escape(apply)}[/]")
    if v.more:
        console.print(f"  would decide it: {escape(v.more)}")
    if v.constraints_dropped:
        console.print(f"  not applied (the baseline breaks it too): {escape(', '.join(v.constraints_dropped))}")
    r = v.reproduction
    if r is not None:
        console.print(f"  {escape(r.describe())}")
        if r.reproduced is None:
            console.print(f"  [yellow]whether the trials show {escape(r.rule_id)} is unknown: {escape(r.why_not())}[/]")
        elif not r.reproduced and v.decision in (FIX_CONFIRMED, DIFFERENT_VALUE):
            console.print(f"  [yellow]the baseline's trials do not show {escape(r.rule_id)} ({escape(r.why_not())}): "
                          f"the value is better on these trials; that it cures {escape(r.rule_id)} is not shown[/]")
    for run in v.runs:
        values = ", ".join(f"{k.rsplit('.', 1)[-1]}={format_value(x)}" for k, x in run.values.items())
        console.print(f"  {run.role:<9} {escape(values)}: {escape(run.describe())}")
    note = result.steps_note()
    if note:
        console.print(f"  {escape(note)}")
