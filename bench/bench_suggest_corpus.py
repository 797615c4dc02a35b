"""A labelled corpus for `advisor suggest` on the CPU sandbox: injected faults x severities x modes x KL placements.

    python bench/bench_suggest_corpus.py [--seeds 1 2 3] [--steps 50] [--parallel 2] [--only FAULT ...] [-v]
                                         [--cache DIR]

Every case is a sandbox run (sweeps/sandbox.py: real GRPO/PPO on a small task, verl's keys and metrics)
with validation on held-out prompts every 10 steps (``trainer.test_freq=10``, greedy ``val_kwargs`` as
verl's defaults). Faults are config injections (a key set to a harmful value) in every mode they apply to:
GRPO with loss-side KL, PPO with a critic (no KL, or KL in the reward), RLOO with loss-side KL and a
DAPO-style GRPO without KL (clip-higher 0.28); each at two severities and on every seed. Healthy runs vary
the batch, group size, learning rate, response length and seed.

The ground truth of a fault is the key it injected (``accept``: the injected key, or the other key the
same injection set). For each fault case the advisor's diff is applied and the run repeated with the same
seed; "better" means the held-out validation score (the mean of ``val-core/*/reward/mean@1`` at the last
two validations) rose. A healthy case is right when the advisor proposes no change.

A fault severity enters the corpus only when it hurts: its validation score on the seed is below the
healthy run's of the same mode and seed by at least MIN_HARM; the others are counted and listed as
"no harm" (a value that does not hurt is not a fault the advisor should fix).

Prints a line per case with -v, a table per rule (fired, right, wrong), and ends with exactly:

    faults: key right N/M
    faults: fixed run better N/M
    healthy: no change N/M

Throughput and memory rules are left out: the sandbox's timings are a CPU's, not a GPU's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # bench this checkout
sys.path.insert(0, str(REPO / "bench" / "scenarios"))

MIN_HARM = 0.03  # validation score below the healthy run's by at least this much (3 of 100 prompts)
VAL = ["trainer.test_freq=10", "trainer.val_before_train=false"]
COMMON = ["data.max_response_length=32", "actor_rollout_ref.rollout.name=vllm",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
          "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8", "data.filter_overlong_prompts=true", *VAL]
GROUP = ["actor_rollout_ref.rollout.n=5", "data.train_batch_size=128", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
         "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"]
PPO = ["algorithm.adv_estimator=gae", "data.train_batch_size=256", "actor_rollout_ref.actor.ppo_mini_batch_size=64",
       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8", "critic.ppo_micro_batch_size_per_gpu=8"]

# mode -> KL placement -> overrides
MODES: dict[str, dict[str, list[str]]] = {
    "grpo": {"loss": ["algorithm.adv_estimator=grpo", *GROUP, "actor_rollout_ref.actor.use_kl_loss=true"],
             "reward": ["algorithm.adv_estimator=grpo", *GROUP, "algorithm.use_kl_in_reward=true"]},
    "ppo": {"none": PPO, "reward": [*PPO, "algorithm.use_kl_in_reward=true"]},
    "rloo": {"loss": ["algorithm.adv_estimator=rloo", *GROUP, "actor_rollout_ref.actor.use_kl_loss=true"]},
    "dapo": {"none": ["algorithm.adv_estimator=grpo", *GROUP, "actor_rollout_ref.actor.use_kl_loss=false",
                      "actor_rollout_ref.actor.clip_ratio_high=0.28"]},
}
ALL = [(m, p) for m, places in MODES.items() for p in places]
GROUP_MODES = [(m, p) for m, p in ALL if m != "ppo"]


@dataclass(frozen=True)
class Fault:
    name: str
    severities: tuple[tuple[str, ...], ...]  # overrides per severity
    accept: tuple[str, ...]  # the injected key(s): a diff changing one of them names the fault
    modes: tuple[tuple[str, str], ...]


LR = "actor_rollout_ref.actor.optim.lr"
FAULTS = (
    Fault("lr_too_high", ((f"{LR}=5e-5",), (f"{LR}=2e-4",)), (LR,), tuple(ALL)),
    Fault("response_too_short", (("data.max_response_length=3",), ("data.max_response_length=2",)),
          ("data.max_response_length",), tuple(ALL)),
    Fault("entropy_bonus_too_large", (("actor_rollout_ref.actor.entropy_coeff=0.5",),
                                      ("actor_rollout_ref.actor.entropy_coeff=1.0",)),
          ("actor_rollout_ref.actor.entropy_coeff",), tuple(ALL)),
    Fault("temperature_too_low", (("actor_rollout_ref.rollout.temperature=0.1",),
                                  ("actor_rollout_ref.rollout.temperature=0.05",)),
          ("actor_rollout_ref.rollout.temperature",), tuple(GROUP_MODES)),
    Fault("reward_kl_too_strong", (("algorithm.kl_ctrl.kl_coef=1.0",), ("algorithm.kl_ctrl.kl_coef=3.0",)),
          ("algorithm.kl_ctrl.kl_coef", "algorithm.use_kl_in_reward"), (("grpo", "reward"), ("ppo", "reward"))),
    Fault("too_many_epochs", (("actor_rollout_ref.actor.ppo_epochs=4", f"{LR}=2e-5"),
                              ("actor_rollout_ref.actor.ppo_epochs=8", f"{LR}=1e-5")),
          ("actor_rollout_ref.actor.ppo_epochs", LR), tuple(ALL)),
    Fault("critic_lr_too_low", (("critic.optim.lr=1e-7",), ("critic.optim.lr=1e-8",)), ("critic.optim.lr",),
          (("ppo", "none"), ("ppo", "reward"))),
)
# healthy variations, applied to every mode and placement (with the seeds, well over 30 runs)
HEALTHY = (
    (),
    (f"{LR}=3e-6",),
    ("data.max_response_length=24",),
)


@dataclass
class Case:
    kind: str  # fault | healthy
    name: str
    mode: str
    placement: str
    overrides: tuple[str, ...]
    seed: int
    accept: tuple[str, ...] = ()


@dataclass
class Outcome:
    case: Case
    diff: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    decided_by: str | None = None
    val_before: float = math.nan
    val_after: float = math.nan
    seconds: float = 0.0
    error: str = ""


def final_validation(records: list[tuple[int, dict[str, Any]]]) -> float:
    """Mean of the last two held-out validation scores (val-core/<source>/reward/mean@N)."""
    values = [float(v) for _, m in records for k, v in m.items() if k.startswith("val-core/") and v is not None]
    return sum(values[-2:]) / len(values[-2:]) if values else math.nan


def cached_run(overrides: list[str], cache: str | None) -> list[tuple[int, dict[str, Any]]]:
    """The sandbox run of these overrides, from ``cache`` when it ran before (a sandbox run is a function of its
    overrides and seed, so the rule changes under test are re-scored without re-training)."""
    from sweeps.sandbox import run

    if not cache:
        return run(overrides)
    path = Path(cache) / (hashlib.sha1(json.dumps(overrides).encode()).hexdigest() + ".json")
    if path.exists():
        return [(int(step), data) for step, data in json.loads(path.read_text())]
    records = run(overrides)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records))
    return records


def evaluate(case: Case, steps: int, cache: str | None = None) -> Outcome:
    from run_scenarios import verl_overrides, write_jsonl

    from advisor import load_config
    from advisor.playbook import playbook_without, suggest_run

    started = time.perf_counter()
    base = [*COMMON, *MODES[case.mode][case.placement], *case.overrides,
            f"trainer.total_training_steps={steps}", f"+sandbox.seed={case.seed}"]
    out = Outcome(case)
    try:
        records = cached_run(base, cache)
        out.val_before = final_validation(records)
        cfg = load_config(None, verl_overrides(base), verl_version="main")
        with tempfile.TemporaryDirectory() as tmp:
            result = suggest_run(cfg, write_jsonl(records, Path(tmp) / "metrics.jsonl"),
                                 rules=playbook_without(["memory", "throughput"]))
        out.diff, out.keys = result.overrides, [c.key for c in result.changes]
        out.decided_by = result.decided_by.id if result.decided_by and result.changes else None
        if case.kind == "fault" and out.diff:
            out.val_after = final_validation(cached_run([*base, *out.diff], cache))
    except Exception as exc:  # a case that cannot run is reported, not hidden
        out.error = f"{type(exc).__name__}: {exc}"
    out.seconds = time.perf_counter() - started
    return out


def cases(seeds: list[int], only: list[str] | None) -> list[Case]:
    out = []
    for seed in seeds:
        for mode, placement in ALL:
            for i, extra in enumerate(HEALTHY):
                out.append(Case("healthy", f"healthy{i}", mode, placement, extra, seed))
        for fault in FAULTS:
            if only and fault.name not in only:
                continue
            for mode, placement in fault.modes:
                for level, overrides in enumerate(fault.severities, 1):
                    out.append(Case("fault", f"{fault.name}@{level}", mode, placement, overrides, seed, fault.accept))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=None, help="fault names (healthy runs always run)")
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per case")
    parser.add_argument("--cache", default=None, help="a folder keeping each sandbox run (reused when it exists)")
    args = parser.parse_args(argv)

    todo = cases(args.seeds, args.only)
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        outcomes = list(pool.map(evaluate, todo, [args.steps] * len(todo), [args.cache] * len(todo)))
    healthy_val = {(o.case.mode, o.case.placement, o.case.seed): o.val_before for o in outcomes
                   if o.case.kind == "healthy" and o.case.name == "healthy0"}

    faults, harmless, healthy, errors = [], [], [], []
    for o in outcomes:
        if o.error:
            errors.append(o)
        elif o.case.kind == "healthy":
            healthy.append(o)
        elif o.val_before <= healthy_val.get((o.case.mode, o.case.placement, o.case.seed), math.nan) - MIN_HARM:
            faults.append(o)
        else:
            harmless.append(o)
    fired: Counter[str] = Counter()
    right: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    key_right = better = 0
    for o in faults:
        named = any(k in o.case.accept for k in o.keys)
        key_right += named
        better += bool(o.diff) and o.val_after > o.val_before
        if o.decided_by:
            fired[o.decided_by] += 1
            (right if named else wrong)[o.decided_by] += 1
    quiet = 0
    for o in healthy:
        quiet += not o.diff
        if o.decided_by:
            fired[o.decided_by] += 1
            wrong[o.decided_by] += 1

    if args.verbose:
        for o in outcomes:
            c = o.case
            tag = ("error" if o.error else "healthy" if c.kind == "healthy" else
                   "fault" if o in faults else "no harm")
            print(f"{tag:8s} {c.name:28s} {c.mode:4s}/{c.placement:6s} seed {c.seed}  val {o.val_before:.3f}"
                  f"{f' -> {o.val_after:.3f}' if not math.isnan(o.val_after) else '':10s} "
                  f"{o.decided_by or '-':6s} {' '.join(o.diff) or '(no change)'} {o.error}  {o.seconds:.1f}s")
        print()
    print(f"{len(outcomes)} cases in {time.perf_counter() - started:.0f} s (parallel {args.parallel}); "
          f"{len(harmless)} injected severities did not hurt validation (by >= {MIN_HARM}) and are left out; "
          f"{len(errors)} errors")
    for name, count in sorted(Counter(o.case.name.split("@")[0] for o in harmless).items()):
        changed = sum(bool(o.diff) for o in harmless if o.case.name.split("@")[0] == name)
        print(f"  no harm: {name} x{count} (a change proposed on {changed})")
    print(f"{'rule':6s} {'fired':>5s} {'right':>5s} {'wrong':>5s}")
    for rule in sorted(fired):
        print(f"{rule:6s} {fired[rule]:5d} {right[rule]:5d} {wrong[rule]:5d}")
    print(f"faults: key right {key_right}/{len(faults)}")
    print(f"faults: fixed run better {better}/{len(faults)}")
    print(f"healthy: no change {quiet}/{len(healthy)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
