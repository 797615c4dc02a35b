"""Trial-steps a sweep spends with pruning against the full grid, and whether it reaches the full grid's
verdict.

Each scenario is a one-variable grid on the CPU sandbox trainer (``sweeps/sandbox/``), run through
``advisor sweep``'s engine with the local launcher: as the full grid (no pruning), and pruned four ways:
every value on every seed (``--every-seed``) with the seed-paired pruner alone (``--no-race``) and with the
race; and staged (the default: every value on the first seed, then the candidates in the first seed's order
on the other seeds until one is confirmed), without and with the race (the default). It prints, per scenario,
the verdicts and the training steps each spent, then the totals and how many verdicts agree with the full
grid's (the decision; and the decision with the same candidate value).

Target (issue 6): at most one third of the full grid's trial-steps for the same verdicts.

    python bench/bench_sweep_pruning.py [--steps 30] [--seeds 3] [--parallel 2] [--pace 0.4[,1]] [--quick]

Two more lines per scenario are computed from the full grid's own curves, without running anything:

- ``equal-step race``: what stopping the whole comparison would give if it stopped at the first step t (after
  the warm-up) where the paired verdict over every trial cut at t is decisive, at a level Bonferroni-corrected
  over the looks (1 - 0.05 / (looks x candidates)); its steps are counted as if every trial ran to t at once;
- ``settled from``: the step from which the full grid's verdict, recomputed on the trials cut at each later
  step, no longer changes: a rule that stops every trial at one common step before it agrees with the full
  grid only by luck.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sweeps import (  # noqa: E402
    INSUFFICIENT,
    LEVEL,
    PACE,
    Objective,
    Param,
    SweepSpec,
    TrialRecord,
    Verdict,
    decide,
    run_sweep,
)

TARGET = 1 / 3
# a small GRPO-free PPO setup: 256 prompts a step, 4 optimizer steps each, responses of at most 32 tokens
BASE = [
    "data.train_batch_size=256",
    "actor_rollout_ref.actor.ppo_mini_batch_size=64",
    "data.max_response_length=32",
    "trainer.val_before_train=false",
    "trainer.logger=[console]",
    "+sandbox.deterministic_timing=true",
]
LR = "actor_rollout_ref.actor.optim.lr"


@dataclass
class Scenario:
    name: str
    fault: list[str]  # overrides that make the baseline
    key: str
    values: list[float | int]
    objective: str = "critic/score/mean:max"


SCENARIOS = [
    Scenario("lr x100 (collapse)", [f"{LR}=1e-3"], LR, [1e-6, 3e-6, 1e-5, 3e-5, 1e-4]),
    Scenario("lr x10 (entropy collapse)", [f"{LR}=1e-4"], LR, [1e-6, 3e-6, 1e-5, 3e-5, 1e-3]),
    Scenario("lr x3 (fix starts slower)", [f"{LR}=3e-5"], LR, [1e-6, 3e-6, 1e-5, 1e-4, 1e-3]),
    Scenario("lr /10 (too slow)", [f"{LR}=1e-6"], LR, [3e-6, 1e-5, 3e-5, 1e-4, 1e-3]),
    Scenario("healthy lr (no fault)", [f"{LR}=1e-5"], LR, [1e-6, 3e-6, 3e-5, 1e-4, 1e-3]),
    Scenario("temperature 1.5", ["actor_rollout_ref.rollout.temperature=1.5"],
             "actor_rollout_ref.rollout.temperature", [0.3, 0.7, 1.0]),
    Scenario("entropy bonus 0.5", ["actor_rollout_ref.actor.entropy_coeff=0.5"],
             "actor_rollout_ref.actor.entropy_coeff", [0.0, 0.01, 0.1]),
    Scenario("micro-batch (no effect)", ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8"],
             "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", [1, 2, 4]),
]
QUICK = [0, 2, 4]


def _script(directory: Path, fault: list[str]) -> Path:
    path = directory / "run.sh"
    args = " ".join(shlex.quote(a) for a in [*BASE, *fault])
    path.write_text(f"#!/usr/bin/env bash\npython3 -m verl.trainer.main_ppo {args}\n")
    return path


def _verdict(v: Verdict) -> tuple[str, str]:
    candidate = ", ".join(f"{val:g}" if isinstance(val, float) else str(val) for val in (v.candidate or {}).values())
    return v.decision, candidate


@dataclass
class Outcome:
    steps: int
    decision: str
    candidate: str
    warmup: int
    trials: list[TrialRecord]
    baseline: dict[str, Any]


@dataclass(frozen=True)
class Variant:
    pace: float
    race: bool
    every_seed: bool

    def __str__(self) -> str:
        return (f"{'every seed' if self.every_seed else 'staged'}{' + race' if self.race else ''}"
                f"{f' pace {self.pace:g}' if self.pace != PACE else ''}")


def _run(script: Path, sc: Scenario, out: Path, args: argparse.Namespace, prune: bool, variant: Variant) -> Outcome:
    spec = SweepSpec([Param.grid(sc.key, sc.values)], Objective(*_objective(sc.objective)), steps=args.steps,
                     seeds=args.seeds, prune=prune, race=variant.race, every_seed=variant.every_seed,
                     warmup_steps=args.warmup_steps, pace=variant.pace)
    result = run_sweep(script, spec, command=[sys.executable, "-m", "sweeps.sandbox"], out=out,
                       parallel=args.parallel)
    return Outcome(result.trial_steps, *_verdict(result.verdict), spec.warmup, result.trials, result.baseline)


def _cut(trials: list[TrialRecord], step: int) -> list[TrialRecord]:
    """Every trial as it stood at ``step`` (complete ones cut there; shorter ones as they are)."""
    out = []
    for t in trials:
        curve = {s: v for s, v in t.curve.items() if s <= step}
        out.append(TrialRecord(t.number, t.values, t.seed, t.role, t.state, curve[max(curve)] if curve else None,
                               max(curve) if curve else None, t.constraints, t.feasible, t.reason, t.dir, curve))
    return out


def _equal_step_race(full: Outcome, objective: Objective, steps: int) -> tuple[int, str, str]:
    """The first step at which the paired verdict over every trial cut there is decisive (Bonferroni over the
    looks), and that verdict; the last step and the full verdict when it never is."""
    looks = range(max(1, full.warmup), steps + 1)
    level = 1 - (1 - LEVEL) / len(looks)
    for t in looks:
        v = decide(_cut(full.trials, t), full.baseline, objective, level=level)
        if v.decision != INSUFFICIENT:
            return (t, *_verdict(v))
    return (steps, full.decision, full.candidate)


def _settled_from(full: Outcome, objective: Objective, steps: int) -> int:
    """The step from which the full grid's verdict, on the trials cut at each later step, stays the same."""
    settled = steps
    for t in range(steps - 1, 0, -1):
        if _verdict(decide(_cut(full.trials, t), full.baseline, objective)) != (full.decision, full.candidate):
            break
        settled = t
    return settled


def _mark(run: tuple[str, str], full: Outcome) -> str:
    if run == (full.decision, full.candidate):
        return ""
    return " (other candidate)" if run[0] == full.decision else " DIFFERS"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--warmup-steps", type=int, default=None)
    parser.add_argument("--pace", default="0.4", help="pruner paces to run, comma-separated (default 0.4; 1 = "
                        "stop a trial behind another value at equal steps)")
    parser.add_argument("--quick", action="store_true", help="three scenarios instead of all")
    args = parser.parse_args()
    variants = [Variant(pace, race, every) for pace in (float(p) for p in args.pace.split(","))
                for every in (True, False) for race in (False, True)]
    scenarios = [SCENARIOS[i] for i in QUICK] if args.quick else SCENARIOS
    rows: list[tuple[Scenario, Outcome, dict[Variant, Outcome], tuple[int, str, str], int]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i, sc in enumerate(scenarios):
            (Path(tmp) / f"s{i}").mkdir()
            script = _script(Path(tmp) / f"s{i}", sc.fault)
            objective = Objective(*_objective(sc.objective))
            full = _run(script, sc, Path(tmp) / f"s{i}" / "full", args, False, Variant(1.0, False, True))
            runs = {v: _run(script, sc, Path(tmp) / f"s{i}" / f"{v.pace}-{v.race}-{v.every_seed}", args, True, v)
                    for v in variants}
            equal = _equal_step_race(full, objective, args.steps)
            settled = _settled_from(full, objective, args.steps)
            rows.append((sc, full, runs, equal, settled))
            print(f"{sc.name}: full grid {full.decision} {full.candidate} in {full.steps} steps; its verdict is "
                  f"settled from step {settled}", flush=True)
            for variant, run in runs.items():
                print(f"    {variant!s:<18} {run.decision:<21} {run.candidate:<6} {run.steps:>5} steps "
                      f"({run.steps / full.steps:.0%}){_mark((run.decision, run.candidate), full)}", flush=True)
            n = len(full.trials)
            print(f"    {'equal-step race':<18} {equal[1]:<21} {equal[2]:<6} {n * equal[0]:>5} steps "
                  f"({equal[0] / args.steps:.0%}; stops at step {equal[0]}, offline){_mark(equal[1:], full)}",
                  flush=True)
    steps_full = sum(full.steps for _, full, _, _, _ in rows)
    print()
    print(f"{len(rows)} scenarios, {args.steps} steps, {args.seeds} seeds, warm-up {rows[0][1].warmup} steps, "
          f"parallel {args.parallel}; full grid: {steps_full} trial-steps")

    def total(name: str, spent: int, verdicts: list[tuple[tuple[str, str], Outcome]]) -> None:
        decision = sum(run[0] == full.decision for run, full in verdicts)
        both = sum(run == (full.decision, full.candidate) for run, full in verdicts)
        print(f"{name:<18} {spent:>5} trial-steps = {spent / steps_full:.1%} of the full grid (target <= "
              f"{TARGET:.1%}: {'met' if spent <= TARGET * steps_full else 'not met'}); verdicts agree: "
              f"{decision}/{len(verdicts)} decisions, {both}/{len(verdicts)} with the same candidate")

    for v in variants:
        total(str(v), sum(r[2][v].steps for r in rows), [((r[2][v].decision, r[2][v].candidate), r[1]) for r in rows])
    total("equal-step race", sum(len(r[1].trials) * r[3][0] for r in rows), [(r[3][1:], r[1]) for r in rows])
    print(f"wall time: {time.perf_counter() - started:.0f} s")


def _objective(text: str) -> tuple[str, str]:
    metric, _, direction = text.rpartition(":")
    return metric, "maximize" if direction == "max" else "minimize"


if __name__ == "__main__":
    main()
