"""Is the CPU sandbox LLM-like where it matters? Its runs against published verl runs and the guides' fault symptoms.

    python bench/bench_sandbox_fidelity.py [--policy lm|loglinear] [--steps 50] [--seed 1] [-v]

Six sandbox runs at bench size (the scenario corpus's, bench/bench_suggest_corpus.py: GRPO with 5 responses to
each of 128 prompts a step, PPO with 256 prompts, ``data.max_response_length=32``), each ``--steps`` steps on
``+sandbox.seed=SEED``, with verl's defaults otherwise (lr 1e-6, KL coefficient 0.001, temperature 1):

- ``grpo``: healthy GRPO with verl's KL loss (low_var_kl); ``ppo``: healthy PPO (GAE, critic) with the KL in
  the reward, as the published PPO runs;
- ``lr_too_high``: ``grpo`` at lr 1e-4 (examples/lr_too_high's); ``cold_small_n``: ``grpo`` sampling at
  temperature 0.3 (examples/grpo_flat_groups') with 2 responses per prompt; ``no_kl``: ``grpo`` without the KL
  loss; ``short``: ``grpo`` with max_response_length half the healthy run's first mean response length.

Each target of bench/fidelity_targets.yaml (its range, source and how the range was derived) turns one run into
one number; a line per target prints the name, the sandbox's value, the range (published runs', or the fault
symptom's) and its source, then
exactly ``sandbox fidelity: N/M targets in range``. ``-v`` adds each run's wall time. On the language model the
six runs take 6-13 minutes on 2 cores (the healthy GRPO run 65-146 s, with the machine more or less loaded);
``--policy loglinear`` takes 40 s.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # bench this checkout

TARGETS = Path(__file__).resolve().parent / "fidelity_targets.yaml"
Records = list[tuple[int, dict[str, Any]]]

# bench size: the scenario corpus's (bench/bench_suggest_corpus.py COMMON, GROUP, PPO)
COMMON = ["data.max_response_length=32", "data.filter_overlong_prompts=true", "trainer.val_before_train=true",
          "trainer.test_freq=-1", "trainer.balance_batch=false"]  # unbalanced: the dump keeps each group together
GRPO = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=5", "data.train_batch_size=128",
        "actor_rollout_ref.actor.ppo_mini_batch_size=32", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.use_kl_loss=true"]
PPO = ["algorithm.adv_estimator=gae", "data.train_batch_size=256", "actor_rollout_ref.actor.ppo_mini_batch_size=64",
       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8", "critic.ppo_micro_batch_size_per_gpu=8",
       "algorithm.use_kl_in_reward=true"]


def changed(base: list[str], *changes: str) -> list[str]:
    """``base`` with each KEY=VALUE of ``changes`` replacing (or joining) the override of that key."""
    keys = {c.split("=", 1)[0] for c in changes}
    return [o for o in base if o.split("=", 1)[0] not in keys] + list(changes)


RUNS: dict[str, list[str]] = {
    "grpo": GRPO,
    "ppo": PPO,
    "lr_too_high": changed(GRPO, "actor_rollout_ref.actor.optim.lr=1e-4"),
    "cold_small_n": changed(GRPO, "actor_rollout_ref.rollout.temperature=0.3", "actor_rollout_ref.rollout.n=2"),
    "no_kl": changed(GRPO, "actor_rollout_ref.actor.use_kl_loss=false"),
    "short": GRPO,  # data.max_response_length: from the healthy GRPO run (short_length)
}


class Run:
    """One sandbox run: its logged records and its rollout dumps (trainer.rollout_data_dir)."""

    def __init__(self, records: Records, dump_dir: Path, n: int, seconds: float) -> None:
        self.train = [(s, m) for s, m in records if "actor/entropy" in m or "critic/score/mean" in m]
        self.records, self.dump_dir, self.n, self.seconds = records, dump_dir, n, seconds

    def series(self, metric: str) -> list[float]:
        return [float(m[metric]) for _, m in self.train if m.get(metric) is not None]

    def first(self, metric: str) -> float:
        values = self.series(metric)
        return values[0] if values else math.nan

    def end(self, metric: str) -> float:
        values = self.series(metric)
        tail = values[-max(1, len(values) // 10):]
        return sum(tail) / len(tail) if tail else math.nan

    def greedy_score(self) -> float:
        """The validation score logged before training (step 0; greedy with verl's val_kwargs)."""
        for step, metrics in self.records:
            if step == 0:
                scores = [v for k, v in metrics.items() if k.startswith("val-core/") and "/mean@" in k]
                if scores:
                    return float(scores[0])
        return math.nan

    def flat_groups(self) -> float:
        """Share of groups (n consecutive responses of a step's dump) whose responses all scored the same."""
        flat = total = 0
        for path in sorted(self.dump_dir.glob("*.jsonl")):
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            for i in range(0, len(rows) - self.n + 1, self.n):
                group = rows[i:i + self.n]
                if len({r["input"] for r in group}) != 1:
                    raise SystemExit(f"{path}: responses {i}..{i + self.n - 1} are not one prompt's group; "
                                     "the dump must keep verl's interleaved order (trainer.balance_batch=false)")
                total += 1
                flat += len({r["score"] for r in group}) == 1
        return flat / total if total else math.nan


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


MEASURES: dict[str, Callable[[dict[str, Run], dict[str, Any]], float]] = {
    "first": lambda runs, t: runs[t["run"]].first(t["metric"]),
    "end": lambda runs, t: runs[t["run"]].end(t["metric"]),
    "fall": lambda runs, t: runs[t["run"]].first(t["metric"]) / runs[t["run"]].end(t["metric"]),
    "gain": lambda runs, t: runs[t["run"]].end(t["metric"]) - runs[t["run"]].first(t["metric"]),
    "mean": lambda runs, t: _mean(runs[t["run"]].series(t["metric"])),
    "peak": lambda runs, t: max(runs[t["run"]].series(t["metric"]), default=math.nan),
    "sampled_over_greedy": lambda runs, t: runs[t["run"]].first(t["metric"]) / runs[t["run"]].greedy_score(),
    "flat_groups": lambda runs, t: runs[t["run"]].flat_groups(),
    "end_ratio_of": lambda runs, t: runs[t["of"]].end(t["metric"]) / runs[t["run"]].end(t["metric"]),
}


def load_targets(path: Path = TARGETS) -> list[dict[str, Any]]:
    """The targets, each checked for the fields the bench reads."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    targets = doc["targets"]
    for i, t in enumerate(targets):
        missing = [k for k in ("name", "run", "metric", "measure", "range", "cite", "source", "derived")
                   if not t.get(k)]
        if missing:
            raise ValueError(f"{path}: targets[{i}] lacks {', '.join(missing)}")
        if t["measure"] not in MEASURES or t["run"] not in RUNS or (t["measure"] == "end_ratio_of"
                                                                      and t.get("of") not in RUNS):
            raise ValueError(f"{path}: targets[{i}] ({t['name']}): unknown measure or run")
        low, high = t["range"]
        if (low is None and high is None) or (low is not None and high is not None and low > high):
            raise ValueError(f"{path}: targets[{i}] ({t['name']}): range {t['range']} is not [low, high]")
    return targets


def in_range(value: float, bounds: list[float | None]) -> bool:
    low, high = bounds
    return math.isfinite(value) and (low is None or value >= low) and (high is None or value <= high)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def short_length(grpo: Run) -> int:
    """Half the healthy GRPO run's mean response length at its first step: most responses no longer fit."""
    return max(1, int(grpo.first("response_length/mean") // 2))


def sandbox_policy_overrides(policy: str) -> list[str]:
    """``+sandbox.policy=POLICY``; a checkout whose sandbox has only the log-linear policy takes no key."""
    from sweeps import sandbox

    if "sandbox.policy" in sandbox.SANDBOX_KEYS:
        return [f"+sandbox.policy={policy}"]
    if policy == "loglinear":
        return []
    raise SystemExit("bench_sandbox_fidelity: this checkout's sandbox has no sandbox.policy key (no language-model "
                     "policy); run with --policy loglinear")


def run_one(name: str, overrides: list[str], tmp: Path, verbose: bool) -> Run:
    from sweeps.sandbox import run

    dump = tmp / name
    started = time.perf_counter()
    records = run([*overrides, f"trainer.rollout_data_dir={dump}"])
    seconds = time.perf_counter() - started
    n = int(next((o.split("=", 1)[1] for o in reversed(overrides) if o.startswith("actor_rollout_ref.rollout.n=")),
                 1))
    if verbose:
        print(f"  run {name}: {len(records)} records in {seconds:.1f} s", file=sys.stderr, flush=True)
    return Run(records, dump, n, seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", choices=("lm", "loglinear"), default="lm", help="the sandbox's policy")
    parser.add_argument("--steps", type=int, default=50, help="training steps of each run")
    parser.add_argument("--seed", type=int, default=1, help="+sandbox.seed of every run")
    parser.add_argument("-v", "--verbose", action="store_true", help="each run's wall time on stderr")
    args = parser.parse_args(argv)
    targets = load_targets()
    base = [*COMMON, *sandbox_policy_overrides(args.policy), f"trainer.total_training_steps={args.steps}",
            f"+sandbox.seed={args.seed}"]
    runs: dict[str, Run] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in RUNS.items():
            if name == "short":
                overrides = changed(overrides, f"data.max_response_length={short_length(runs['grpo'])}")
            runs[name] = run_one(name, changed(base, *overrides), Path(tmp), args.verbose)
        values = [MEASURES[t["measure"]](runs, t) for t in targets]
    hits = 0
    for t, value in zip(targets, values, strict=True):
        ok = in_range(value, t["range"])
        hits += ok
        low, high = t["range"]
        print(f"{'ok ' if ok else 'OUT'} {t['name']}: {value:.3g} (range {_fmt(low)}..{_fmt(high)}; "
              f"{t['cite']})")
    print(f"healthy GRPO run: {args.steps} steps in {runs['grpo'].seconds:.0f} s ({args.policy} policy)")
    print(f"sandbox fidelity: {hits}/{len(targets)} targets in range")
    return 0


if __name__ == "__main__":
    sys.exit(main())
