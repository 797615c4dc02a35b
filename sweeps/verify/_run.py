"""Running a verify plan: the sweep, the verdict on its trials, the diagnosis read on every trial."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.errors import ExitCode
from advisor.findings import Change
from advisor.load import VerlConfig
from advisor.playbook import suggest_run
from advisor.verl import parse_override

from .._space import format_value
from ._length import reached_note
from ._plan import VerifyPlan, VerifySettings, plan_verify
from ._reproduce import Reproduction, read_trials
from ._verdict import DIFFERENT_VALUE, VerifyVerdict, judge, with_reproduction


@dataclass
class VerifyResult:
    plan: VerifyPlan
    sweep: Any  # SweepResult
    verdict: VerifyVerdict | None = None
    steps_reached: int | None = None  # where the trials that ran to their end stopped

    @property
    def failure(self) -> str | None:
        """Every trial failed: the first one's error (exit 2); else None."""
        failure: str | None = self.sweep.failure()
        return failure

    @property
    def exit_code(self) -> int:
        if self.failure is not None:
            return ExitCode.BAD_INPUT
        return self.verdict.exit_code if self.verdict is not None else self.sweep.exit_code

    def steps_note(self) -> str | None:
        """Why the trials stopped before the planned step, when they did."""
        cfg = self.plan.suggestion.config
        epochs = cfg.get("trainer.total_epochs") if cfg.has("trainer.total_epochs") else None
        return reached_note(self.plan.steps, self.steps_reached, epochs)

    def apply(self) -> str | None:
        """When verify names another value than the one proposed: which to apply, and why."""
        return apply_sentence(self.plan, self.verdict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1, "suggestion": self.plan.suggestion.to_dict(), "plan": self.plan.to_dict(),
                "sweep": self.sweep.to_dict(), "verdict": self.verdict.to_dict() if self.verdict else None,
                "steps_reached": self.steps_reached, "steps_note": self.steps_note(), "apply": self.apply(),
                "error": self.failure}


def apply_sentence(plan: VerifyPlan, verdict: VerifyVerdict | None) -> str | None:
    """One sentence when the value verify found better is not the one proposed: apply the measured one."""
    if verdict is None or verdict.decision != DIFFERENT_VALUE or verdict.value is None:
        return None
    found = ", ".join(f"{k}={format_value(v)}" for k, v in verdict.value.items())
    guess = ", ".join(format_value(v) for v in (plan.point("proposed") or {}).values())
    metric = (plan.objective or plan.goal.objective).metric
    vs = verdict.versus_proposal
    if vs is not None and vs.status == "better" and vs.ci is not None:
        evidence = (f"the trials measured it better than {guess} on {metric} (mean difference "
                    f"{vs.mean_difference:+.4g}, {vs.level:.1%} interval [{vs.ci[0]:+.4g}, {vs.ci[1]:+.4g}] over "
                    f"{len(vs.pairs)} paired seeds)")
    else:
        evidence = f"the trials measured it better than the baseline on {metric}, and {guess} not"
    if plan.named:
        return f"Apply {found}, not the {guess} you named: {evidence}."
    return (f"Apply {found}, not suggest's {guess}: {evidence}; suggest's value is a first guess from the "
            f"playbook's rule, made before any trial ran.")


def verify(config: VerlConfig, metrics: str | Path, settings: VerifySettings | None = None) -> VerifyResult:
    """Suggest a diff for the run (or take ``settings.propose``), sweep it against the config's own values, and
    return what was learned."""
    settings = settings or VerifySettings()
    plan = plan_verify(suggest_run(config, metrics, window=settings.window, rules=settings.rules), settings)
    return run_plan(config, plan, settings)


def run_plan(config: VerlConfig, plan: VerifyPlan, settings: VerifySettings | None = None) -> VerifyResult:
    """Run the sweep of a :func:`plan_verify` plan (shown to the user first) and judge it."""
    from .._plan import SweepSpec
    from ..runner import run_sweep

    settings = settings or VerifySettings()
    assert plan.objective is not None
    single = len(plan.params) == 1
    protected = tuple(p for p in (plan.point("baseline"), plan.point("proposed")) if p is not None)
    spec = SweepSpec(params=plan.params, objective=plan.objective, steps=plan.steps,
                     constraints=list(plan.goal.constraints), seeds=settings.seeds,
                     trials=None if single else math.prod(len(p.values or ()) for p in plan.params),
                     prune=settings.prune, race=settings.race, every_seed=single, warmup_steps=plan.warmup,
                     protected=protected)
    run = settings.run.plus_overrides([*plan.fixed_overrides, *plan.trial_overrides])
    result = run_sweep(config, spec, run)
    ended = [t.steps for t in result.trials if t.state == "complete" and t.steps]
    reached = max(ended) if ended else None
    out = VerifyResult(plan, result, None, reached)
    if out.failure is not None:
        return out
    # trials that all ended before the planned step (their epochs ran out) are compared where they ended
    steps = reached if reached is not None and reached < plan.steps else plan.steps
    baseline, proposed = plan.point("baseline"), plan.point("proposed")
    if baseline is not None and proposed is not None:
        verdict = judge(result.trials, baseline, proposed, plan.point("third"), plan.objective,
                        plan.goal.constraints, steps=steps, level=spec.level, min_pairs=spec.min_pairs)
        reproduction = reproduce(plan, config, result.trials, gpu_memory_gib=settings.gpu_memory_gib)
        if reproduction is not None:
            verdict = with_reproduction(verdict, reproduction, steps=steps)
        out.verdict = verdict
    return out


def reproduce(plan: VerifyPlan, config: VerlConfig, records: Sequence[Any], *,
              gpu_memory_gib: float | None = None) -> Reproduction | None:
    """The diagnosis read on each value's trials, each with the config it ran; None for a change the user named
    (there is no diagnosis to reproduce) or a sweep of more than one key."""
    d = plan.suggestion.decided_by
    if plan.named or d is None or len(plan.params) != 1:
        return None
    key = plan.params[0].key
    old = config.get(key) if config.has(key) else None
    ran = [*plan.fixed, *_as_changes(config, [*plan.trial_overrides, f"trainer.total_training_steps={plan.steps}"])]
    configs = {role: config.with_changes([*ran, Change(key, old, value, add=not config.has(key))])
               for role, value in plan.roles.items()}
    roles = [(role, {key: value}) for role, value in plan.roles.items()]
    window = plan.suggestion.window
    return read_trials(d.rule, configs, roles, records, (window.first_step, window.last_step),
                       gpu_memory_gib=gpu_memory_gib)


def _as_changes(config: VerlConfig, overrides: Sequence[str]) -> list[Change]:
    out = []
    for text in overrides:
        override = parse_override(text)
        key = override.key.lstrip("+")
        out.append(Change(key, config.get(key) if config.has(key) else None, override.value,
                          add=not config.has(key)))
    return out
