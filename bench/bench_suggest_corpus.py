"""A labelled corpus for `advisor suggest` on the CPU sandbox: injected faults x severities x modes x KL placements.

    python bench/bench_suggest_corpus.py [--policy lm|loglinear] [--subset] [--seeds 1 2 3] [--steps 50]
                                         [--parallel 2] [--only FAULT ...] [-v] [--cache DIR]

Every case is a sandbox run (sweeps/sandbox/: real GRPO/PPO on a small task, verl's keys and metrics)
with validation on held-out prompts every 10 steps (``trainer.test_freq=10``, greedy ``val_kwargs`` as
verl's defaults). Faults are config injections (a key set to a harmful value) in every mode they apply to:
GRPO with loss-side KL, PPO with a critic (no KL, or KL in the reward), RLOO with loss-side KL and a
DAPO-style GRPO without KL (clip-higher 0.28); each at two severities and on every seed. Healthy runs vary
the batch, group size, learning rate, response length and seed.

**Policy.** ``--policy lm`` (the default) runs the sandbox's language model (``+sandbox.policy=lm``: the small
transformer of sweeps/sandbox/lm_policy.py), ``--policy loglinear`` the 19-token log-linear policy. Its answers are
longer (about 12 tokens on average at the start of a run, 20 at most as it was taught: the working restated,
then ``#### n``), so the ``response_too_short`` fault caps them at 10 and 6 tokens (cutting most answers that
show the working, then all but the shortest direct ones) where the log-linear policy's caps are 3 and 2; the
healthy cap of 32 (24 in one healthy variation) lets every answer finish. The figures published up to issue 28
(full matrix, ``faults: key right 118/128``) are the log-linear policy's; those from issue 29 on are the
language model's ``--subset`` (docs/sandbox.md, docs/benchmarks.md).

**The full matrix and the subset.** The full matrix is 246 cases on 3 seeds (a 50-step run each, plus a re-run
with the advisor's fix): about 35 minutes with the log-linear policy, several hours with the language model on
2 cores (10 GRPO steps at this batch take about 8 s on an idle core, 25 s on the loaded machine of the
published run). ``--subset`` runs a representative
part of it (``subset_cases``), on the first seed only:

- every fault at its second severity, the one most likely to hurt, in two of the modes it applies to (every
  fault applies to at least two), chosen so that every mode and KL placement carries about as many faults as
  the others (the least used so far first; ties in the order of MODES): 14 fault cases, 1 to 3 per placement;
- the healthy run of every mode and placement (6; it is also the harm baseline a fault case is measured
  against), and the two healthy variations (lr 3e-6, response cap 24) once each, on GRPO with loss-side KL and
  PPO without KL: 8 healthy cases.

That is 22 cases, at most 36 runs (a fault case whose diff is empty is not re-run); its first run took
4,337 s at ``--parallel 2`` on the shared 2-core machine (load 5-7, other benches beside it), the two cases of
8 PPO epochs alone 1,586 s and 2,719 s. The one seed is the price:
a case that hurts on seed 1 counts, one that hurts only on seeds 2 or 3 is not seen; the per-fault figures of
the full matrix (3 seeds, both severities) stay the log-linear policy's until someone runs it on the LM.

The ground truth of a fault is the key it injected (``accept``: the injected key, or the other key the
same injection set). For each fault case the advisor's diff is applied and the run repeated with the same
seed; "better" means the held-out validation score (the mean of ``val-core/*/reward/mean@1`` at the last
two validations) rose. A healthy case is right when the advisor proposes no change.

A fault severity enters the corpus only when it hurts: its validation score on the seed is below the
healthy run's of the same mode and seed by at least MIN_HARM; the others are counted and listed as
"no harm" (a value that does not hurt is not a fault the advisor should fix).

Prints a line per case on stderr as it finishes (so a stopped run still shows its cases), with -v a line per
case on stdout at the end, a table per rule (fired, right, wrong), and ends with exactly:

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
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
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
POLICIES = ("lm", "loglinear")
# response_too_short's caps per policy: the log-linear policy's answers are a few words, "#### n" and EOS (3 and 2
# cut nearly all); the language model's restate the working first (about 12 tokens, up to 20 as taught): 10
# cuts most of those, 6 all but the shortest direct answers ("so #### 47<eos>")
RESPONSE_CAPS = {"loglinear": (3, 2), "lm": (10, 6)}
# the subset: the modes each fault runs in (of those it applies to), and where the healthy variations run
SUBSET_MODES_PER_FAULT = 2
SUBSET_HEALTHY_VARIATIONS = {1: ("grpo", "loss"), 2: ("ppo", "none")}


def faults_for(policy: str) -> tuple[Fault, ...]:
    """FAULTS with the response cap of ``policy``'s answers (the other faults do not depend on the policy)."""
    caps = RESPONSE_CAPS[policy]
    return tuple(replace(f, severities=tuple((f"data.max_response_length={c}",) for c in caps))
                 if f.name == "response_too_short" else f for f in FAULTS)


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


def advise(overrides: list[str], records: list[tuple[int, dict[str, Any]]]) -> Any:
    """``advisor suggest`` on a sandbox run of ``overrides`` (its learning rules: the sandbox's timings and memory
    are a CPU's), read from the file verl's file logger would have written: an advisor.playbook.Suggestion."""
    from run_scenarios import verl_overrides, write_jsonl

    from advisor import load_config
    from advisor.playbook import playbook_without, suggest_run

    cfg = load_config(None, verl_overrides(overrides), verl_version="main")
    with tempfile.TemporaryDirectory() as tmp:
        return suggest_run(cfg, write_jsonl(records, Path(tmp) / "metrics.jsonl"),
                           rules=playbook_without(["memory", "throughput"]))


def evaluate(case: Case, steps: int, cache: str | None = None, policy: str = "lm") -> Outcome:
    started = time.perf_counter()
    base = [*COMMON, *MODES[case.mode][case.placement], *case.overrides,
            f"trainer.total_training_steps={steps}", f"+sandbox.seed={case.seed}", f"+sandbox.policy={policy}"]
    out = Outcome(case)
    try:
        records = cached_run(base, cache)
        out.val_before = final_validation(records)
        result = advise(base, records)
        out.diff, out.keys = result.overrides, [c.key for c in result.changes]
        out.decided_by = result.decided_by.id if result.decided_by and result.changes else None
        if case.kind == "fault" and out.diff:
            out.val_after = final_validation(cached_run([*base, *out.diff], cache))
    except Exception as exc:  # a case that cannot run is reported, not hidden
        out.error = f"{type(exc).__name__}: {exc}"
    out.seconds = time.perf_counter() - started
    return out


def cases(seeds: list[int], only: list[str] | None, faults: tuple[Fault, ...] = FAULTS) -> list[Case]:
    """The full matrix: every healthy variation in every mode and placement, every fault at every severity in
    every mode it applies to, on every seed (healthy runs first: they are the harm baselines)."""
    out = []
    for seed in seeds:
        for mode, placement in ALL:
            for i, extra in enumerate(HEALTHY):
                out.append(Case("healthy", f"healthy{i}", mode, placement, extra, seed))
        for fault in faults:
            if only and fault.name not in only:
                continue
            for mode, placement in fault.modes:
                for level, overrides in enumerate(fault.severities, 1):
                    out.append(Case("fault", f"{fault.name}@{level}", mode, placement, overrides, seed, fault.accept))
    return out


def subset_cases(seed: int, only: list[str] | None = None, faults: tuple[Fault, ...] = FAULTS) -> list[Case]:
    """The representative subset (the docstring at the top says why): on one seed, every fault at its last
    severity in up to SUBSET_MODES_PER_FAULT of its modes, the least used so far first (ties in ALL's order), so
    that the faults spread over every mode and placement; the healthy run of every mode and placement (the
    faults' harm baselines) and each healthy variation once."""
    out = [Case("healthy", "healthy0", mode, placement, HEALTHY[0], seed) for mode, placement in ALL]
    for i, (mode, placement) in SUBSET_HEALTHY_VARIATIONS.items():
        out.append(Case("healthy", f"healthy{i}", mode, placement, HEALTHY[i], seed))
    used: Counter[tuple[str, str]] = Counter()
    for fault in faults:
        if only and fault.name not in only:
            continue
        chosen = sorted(fault.modes, key=lambda m: (used[m], ALL.index(m)))[:SUBSET_MODES_PER_FAULT]
        level = len(fault.severities)
        for mode, placement in sorted(chosen, key=ALL.index):
            used[(mode, placement)] += 1
            out.append(Case("fault", f"{fault.name}@{level}", mode, placement, fault.severities[-1], seed,
                            fault.accept))
    return out


def update_cost(case: Case) -> int:
    """Responses a training step updates on, times the PPO epochs: a rough order of the cases' run times."""
    epochs = next((int(o.split("=")[1]) for o in case.overrides if o.startswith(
        "actor_rollout_ref.actor.ppo_epochs=")), 1)
    return epochs * (256 if case.mode == "ppo" else 128 * 5)


def case_line(o: Outcome) -> str:
    c = o.case
    after = f" -> {o.val_after:.3f}" if not math.isnan(o.val_after) else ""
    return (f"{c.name:28s} {c.mode:4s}/{c.placement:6s} seed {c.seed}  val {o.val_before:.3f}{after:10s} "
            f"{o.decided_by or '-':6s} {' '.join(o.diff) or '(no change)'} {o.error}  {o.seconds:.1f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", choices=POLICIES, default="lm", help="the sandbox's policy (default: lm)")
    parser.add_argument("--subset", action="store_true",
                        help="the representative subset on the first seed (see the docstring), not the full matrix")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=None, help="fault names (healthy runs always run)")
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per case")
    parser.add_argument("--cache", default=None, help="a folder keeping each sandbox run (reused when it exists)")
    args = parser.parse_args(argv)

    faults = faults_for(args.policy)
    todo = subset_cases(args.seeds[0], args.only, faults) if args.subset else cases(args.seeds, args.only, faults)
    started = time.perf_counter()
    print(f"{len(todo)} cases ({'subset' if args.subset else 'full matrix'}), policy {args.policy}, "
          f"{args.steps} steps, parallel {args.parallel}", file=sys.stderr, flush=True)
    done: dict[int, Outcome] = {}
    with ProcessPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        # the longest cases first, so that the last ones to end are short (the order of the report is todo's)
        order = sorted(range(len(todo)), key=lambda i: -update_cost(todo[i]))
        futures = {pool.submit(evaluate, todo[i], args.steps, args.cache, args.policy): i for i in order}
        for future in as_completed(futures):  # a line per case as it ends: a stopped run still shows its cases
            o = done[futures[future]] = future.result()
            print(f"[{len(done)}/{len(todo)} {time.perf_counter() - started:.0f} s] {case_line(o)}", file=sys.stderr,
                  flush=True)
    outcomes = [done[i] for i in range(len(todo))]
    healthy_val = {(o.case.mode, o.case.placement, o.case.seed): o.val_before for o in outcomes
                   if o.case.kind == "healthy" and o.case.name == "healthy0"}

    hurt, harmless, healthy, errors = [], [], [], []
    for o in outcomes:
        if o.error:
            errors.append(o)
        elif o.case.kind == "healthy":
            healthy.append(o)
        elif o.val_before <= healthy_val.get((o.case.mode, o.case.placement, o.case.seed), math.nan) - MIN_HARM:
            hurt.append(o)
        else:
            harmless.append(o)
    fired: Counter[str] = Counter()
    right: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    key_right = better = 0
    for o in hurt:
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
            tag = ("error" if o.error else "healthy" if o.case.kind == "healthy" else
                   "fault" if o in hurt else "no harm")
            print(f"{tag:8s} {case_line(o)}")
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
    print(f"faults: key right {key_right}/{len(hurt)}")
    print(f"faults: fixed run better {better}/{len(hurt)}")
    print(f"healthy: no change {quiet}/{len(healthy)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
