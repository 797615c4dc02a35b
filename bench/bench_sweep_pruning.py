"""Trial-steps a sweep spends with pruning against the full grid, and whether both reach the same verdict.

Each scenario is a one-variable grid on the CPU sandbox trainer (``sweeps/sandbox.py``), run twice through
``advisor sweep``'s engine with the local launcher: once with the seed-paired pruner, once without
(the full grid). It prints, per scenario, both verdicts and the training steps both spent, then the totals.

Target (issue 6): pruning spends at most one third of the full grid's trial-steps; report how often the two
verdicts agree (the decision; and the decision with the same candidate value).

    python bench/bench_sweep_pruning.py [--steps 30] [--seeds 3] [--parallel 2] [--quick]

The floor of what pruning can save: the leading value still runs every step on every seed, and every other
value runs at least the warm-up, so the ratio is at least 1/V + (1 - 1/V) * warmup/steps for V values.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sweeps import Objective, Param, SweepSpec, run_sweep  # noqa: E402

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


def _verdict(result: object) -> tuple[str, str]:
    v = result.verdict  # type: ignore[attr-defined]
    candidate = ", ".join(f"{val:g}" if isinstance(val, float) else str(val) for val in (v.candidate or {}).values())
    return v.decision, candidate


def _run(script: Path, sc: Scenario, out: Path, args: argparse.Namespace, prune: bool, pace: float
         ) -> tuple[int, str, str, int]:
    spec = SweepSpec([Param.grid(sc.key, sc.values)], Objective(*_objective(sc.objective)), steps=args.steps,
                     seeds=args.seeds, prune=prune, warmup_steps=args.warmup_steps, pace=pace)
    result = run_sweep(script, spec, command=[sys.executable, "-m", "sweeps.sandbox"], out=out,
                       parallel=args.parallel)
    return (result.trial_steps, *_verdict(result), spec.warmup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--warmup-steps", type=int, default=None)
    parser.add_argument("--pace", default="0.4,1.0",
                        help="pruner paces to compare, comma-separated (the default 0.4, and 1.0 = race)")
    parser.add_argument("--quick", action="store_true", help="three scenarios instead of all")
    args = parser.parse_args()
    paces = [float(p) for p in args.pace.split(",")]
    scenarios = [SCENARIOS[i] for i in QUICK] if args.quick else SCENARIOS
    rows: list[tuple[Scenario, dict[object, tuple[int, str, str, int]]]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i, sc in enumerate(scenarios):
            (Path(tmp) / f"s{i}").mkdir()
            script = _script(Path(tmp) / f"s{i}", sc.fault)
            outcome = {"full": _run(script, sc, Path(tmp) / f"s{i}" / "full", args, False, 1.0)}
            full = outcome["full"]
            line = f"{sc.name:<27} full grid: {full[1]:<21} {full[2]:<6} {full[0]:>5} steps"
            for pace in paces:
                outcome[pace] = run = _run(script, sc, Path(tmp) / f"s{i}" / f"pace{pace}", args, True, pace)
                mark = "" if run[1:3] == full[1:3] else (" (other candidate)" if run[1] == full[1] else " DIFFERS")
                line += f" | pace {pace:g}: {run[1]:<21} {run[2]:<6} {run[0]:>5} ({run[0] / full[0]:.0%}){mark}"
            rows.append((sc, outcome))
            print(line, flush=True)
    steps_full = sum(o["full"][0] for _, o in rows)
    print()
    print(f"{len(rows)} scenarios, {args.steps} steps, {args.seeds} seeds, warm-up {rows[0][1]['full'][3]} steps, "
          f"parallel {args.parallel}; full grid: {steps_full} trial-steps")
    for pace in paces:
        spent = sum(o[pace][0] for _, o in rows)
        decision = sum(o["full"][1] == o[pace][1] for _, o in rows)
        both = sum(o["full"][1:3] == o[pace][1:3] for _, o in rows)
        print(f"pace {pace:g}: trial-steps with pruning {spent} = {spent / steps_full:.1%} of the full grid "
              f"(target <= {TARGET:.1%}); verdicts agree: {decision}/{len(rows)} decisions, "
              f"{both}/{len(rows)} with the same candidate")
    print(f"wall time: {time.perf_counter() - started:.0f} s")


def _objective(text: str) -> tuple[str, str]:
    metric, _, direction = text.rpartition(":")
    return metric, "maximize" if direction == "max" else "minimize"


if __name__ == "__main__":
    main()
