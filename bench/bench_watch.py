"""`advisor watch` following live sandbox runs with a fault injected at a known step, and a 100,000-step file.

    python bench/bench_watch.py [--policy lm|loglinear] [--seeds N] [--healthy N] [--steps 60] [--fault-step 30]
                                [--sleep 0.02] [--follow-steps 100000] [--rate 1000] [--parallel 2] [-v]

The sandbox runs with ``+sandbox.policy`` (default ``lm``, the language-model policy). On the LM, part 1 runs a
representative subset by default: each fault on one seed and 3 healthy runs (``--seeds 1 --healthy 3``, 6 runs of
about a minute and a half each on 2 cores); the log-linear policy's defaults are the full 3 seeds and 10 healthy
runs (19 runs of a few seconds).

Part 1. Each case is two processes: the CPU sandbox (sweeps/sandbox/, GRPO with a loss-side KL, verl's
keys and metrics) writing verl's ``file`` logger JSONL live (flushed per step, ``+sandbox.step_sleep``
between steps), and ``advisor watch CONFIG FILE --format json`` following it, started first so it also
waits for the file to appear. A fault (sweeps/sandbox/faults.py) starts at ``--fault-step``:

- ``lr``: the actor lr x1000 (1e-6 -> 1e-3): the score collapses within a few steps;
- ``reward``: the reward parser breaks, every score is 0;
- ``nan_reward``: the reward function returns NaN for one response per batch.

The ``kl`` fault (the KL coefficient dropped to 0) is left out: on the sandbox it does not hurt, so the
right answer is no alert and it would measure nothing here. Measured on this config, seed 1, the drop at
step 30 of 60: with lr 1e-6 and kl_loss_coef 0.001 suggest finds nothing at any step (window 10 or 20); with
lr 1e-4 and kl_loss_coef 1.0 critic/score/mean goes on rising (0.65 at step 28, 0.84 at step 58); at lr 3e-4
and 1e-3 the run collapses with or without the KL (kl_loss_coef 1.0 and 5.0).

A fault is alerted when the first alert comes at or after the onset step (an alert before it is a false
alarm, and the case counts as missed). Healthy runs are the same config without a fault. Throughput and
memory rules are left out (``--skip-tree``): the sandbox's timings are a CPU's. Prints exactly::

    watch: alerted N/M faults
    watch: median steps from onset to alert X
    watch: healthy runs without alert N/M

Part 2. A writer appends a 100,000-step JSONL (60 metrics a step, values a healthy run's with noise) at
1,000 steps/s; the watcher (``advisor.watch.watch`` in its own process) reports its peak RSS
(``ru_maxrss``) when it has read 10,000 and 100,000 steps and its lag: how long after the writer wrote a
step the watcher had read it, at every 1,000th step. Prints::

    watch follow: 100000 steps at 1000 steps/s (writer took T s): peak RSS 10k steps X MiB, 100k steps Y MiB
    watch follow: lag median X s, max Y s
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # bench this checkout

CONFIG = ["data.max_response_length=32", "actor_rollout_ref.rollout.name=vllm",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
          "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8", "data.filter_overlong_prompts=true",
          "trainer.test_freq=10", "trainer.val_before_train=false", "algorithm.adv_estimator=grpo",
          "actor_rollout_ref.rollout.n=5", "data.train_batch_size=128",
          "actor_rollout_ref.actor.ppo_mini_batch_size=32",
          "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "actor_rollout_ref.actor.use_kl_loss=true"]
FAULTS = {"lr": ["+sandbox.fault_factor=1000"], "reward": [], "nan_reward": []}


@dataclass
class Case:
    fault: str | None
    seed: int


@dataclass
class Outcome:
    case: Case
    first_alert: int | None
    alerts: list[str]
    error: str = ""


def write_script(directory: Path, steps: int) -> Path:
    path = directory / "run.sh"
    path.write_text("#!/usr/bin/env bash\npython3 -m verl.trainer.main_ppo \\\n    "
                    + " \\\n    ".join(shlex.quote(a) for a in [*CONFIG, f"trainer.total_training_steps={steps}"])
                    + " \"$@\"\n")
    return path


def run_case(case: Case, args: argparse.Namespace, work: Path) -> Outcome:
    name = f"{case.fault or 'healthy'}-{case.seed}"
    log = work / f"{name}.jsonl"
    script = write_script(work, args.steps)
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(log), "PYTHONPATH": str(REPO)}
    watcher = subprocess.Popen(
        [sys.executable, "-m", "advisor", "watch", str(script), str(log), "--format", "json", "--idle-stop", "0.1",
         "--skip-tree", "throughput", "--skip-tree", "memory"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    fault = ([f"+sandbox.fault={case.fault}", f"+sandbox.fault_step={args.fault_step}", *FAULTS[case.fault]]
             if case.fault else [])
    trainer = subprocess.run(
        [sys.executable, "-m", "sweeps.sandbox", *CONFIG, f"trainer.total_training_steps={args.steps}",
         f"+sandbox.policy={args.policy}", f"+sandbox.seed={case.seed}", f"+sandbox.step_sleep={args.sleep}",
         "trainer.logger=[file]", *fault],
        capture_output=True, text=True, cwd=REPO, env=env)
    out, err = watcher.communicate(timeout=600)
    if trainer.returncode != 0 or watcher.returncode != 0:
        return Outcome(case, None, [], error=(trainer.stderr or err).strip().splitlines()[-1:][0] if
                       (trainer.stderr or err).strip() else f"exit {trainer.returncode}/{watcher.returncode}")
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    alerts = [e for e in events if e["event"] == "alert"]
    return Outcome(case, alerts[0]["step"] if alerts else None, [f"{e['step']}:{e['id']}" for e in alerts])


def part_one(args: argparse.Namespace) -> None:
    cases = [Case(f, 100 + s) for f in FAULTS for s in range(args.seeds)]
    cases += [Case(None, 200 + s) for s in range(args.healthy)]
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as tmp:
        work = Path(tmp)
        with ThreadPoolExecutor(args.parallel) as pool:
            outcomes = list(pool.map(lambda c: run_case(c, args, work), cases))
    delays = []
    alerted = healthy_quiet = 0
    faults = [o for o in outcomes if o.case.fault]
    healthy = [o for o in outcomes if not o.case.fault]
    for o in outcomes:
        if args.verbose or o.error:
            print(f"  {o.case.fault or 'healthy':<10} seed {o.case.seed}: first alert "
                  f"{o.first_alert} {' '.join(o.alerts)} {o.error}")
    for o in faults:
        if o.first_alert is not None and o.first_alert >= args.fault_step:
            alerted += 1
            delays.append(o.first_alert - args.fault_step)
    healthy_quiet = sum(1 for o in healthy if o.first_alert is None and not o.error)
    print(f"watch: alerted {alerted}/{len(faults)} faults")
    print(f"watch: median steps from onset to alert {statistics.median(delays) if delays else float('nan'):g}")
    print(f"watch: healthy runs without alert {healthy_quiet}/{len(healthy)}")


FOLLOWER = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from advisor import load_config
from advisor.playbook import playbook_without
from advisor.watch import WatchOptions, open_source, watch

script, path, start, rate, total = sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
source = open_source(path)
marks = {}
lags = []
inner = source.poll

def poll():
    records = inner()
    now = time.time()
    for step, _ in records:
        if step % 1000 == 0:
            lags.append(now - (start + step / rate))
        if step in (10_000, total):
            marks[step] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return records

source.poll = poll
cfg = load_config(script, [])
options = WatchOptions(fmt="json", max_steps=total, idle_stop_minutes=0.5,
                       rules=playbook_without(("memory", "throughput")))
with open("/dev/null", "w") as sink:
    result = watch(cfg, source, options, out=sink)
print(json.dumps({"marks": marks, "lags": lags, "steps": result.steps, "reason": result.reason}))
"""


def part_two(args: argparse.Namespace) -> None:
    import numpy as np

    from sweeps.sandbox import run

    records = run([*CONFIG, "trainer.total_training_steps=20", "+sandbox.seed=7", f"+sandbox.policy={args.policy}"])
    base = {k: float(v) for k, v in records[-1][1].items() if isinstance(v, (int, float)) or hasattr(v, "dtype")}
    names = list(base)[:60]
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="bench-watch-follow-") as tmp:
        work = Path(tmp)
        script = write_script(work, args.follow_steps)
        path = work / "follow.jsonl"
        start = time.time() + 3.0  # the follower loads the config meanwhile
        follower = subprocess.Popen(
            [sys.executable, "-c", FOLLOWER, str(REPO), str(script), str(path), repr(start), str(args.rate),
             str(args.follow_steps)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        noise = rng.standard_normal((1000, len(names))) * 0.02
        with path.open("w") as fp:
            for step in range(1, args.follow_steps + 1):
                due = start + step / args.rate
                delay = due - time.time()
                if delay > 0:
                    time.sleep(delay)
                row = noise[step % 1000]
                data = {n: base[n] * (1 + row[j]) for j, n in enumerate(names)}
                fp.write(json.dumps({"step": step, "data": data}, separators=(",", ":")) + "\n")
                fp.flush()
        written = time.time()
        out, err = follower.communicate(timeout=900)
    if follower.returncode != 0:
        print(f"watch follow: the follower failed: {err.strip().splitlines()[-1:]}")
        return
    result = json.loads(out.strip().splitlines()[-1])
    marks = {int(k): v for k, v in result["marks"].items()}
    lags = result["lags"]
    print(f"watch follow: {result['steps']} steps at {args.rate:g} steps/s (writer took {written - start:.1f} s): "
          f"peak RSS 10k steps {marks.get(10_000, float('nan')):.1f} MiB, "
          f"{args.follow_steps // 1000}k steps {marks.get(args.follow_steps, float('nan')):.1f} MiB")
    print(f"watch follow: lag median {statistics.median(lags):.3f} s, max {max(lags):.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=None, help="seeds per fault (lm: 1, loglinear: 3)")
    parser.add_argument("--healthy", type=int, default=None, help="healthy runs (lm: 3, loglinear: 10)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--fault-step", type=int, default=30)
    parser.add_argument("--sleep", type=float, default=0.02)
    parser.add_argument("--follow-steps", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--policy", choices=("lm", "loglinear"), default="lm", help="the sandbox's policy")
    parser.add_argument("--skip-follow", action="store_true")
    parser.add_argument("--skip-faults", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    lm = args.policy == "lm"  # the representative subset on the language model (docstring)
    args.seeds = args.seeds if args.seeds is not None else (1 if lm else 3)
    args.healthy = args.healthy if args.healthy is not None else (3 if lm else 10)
    if not args.skip_faults:
        part_one(args)
    if not args.skip_follow:
        part_two(args)


if __name__ == "__main__":
    main()
