"""The sandbox scenario suite: does the advisor name the injected fault, and does its fix help?

    python bench/scenarios/run_scenarios.py [--only NAME ...] [--seeds 1 2] [--steps 40]

For each scenario in scenarios.yaml and each seed: run the sandbox with the base config plus the
fault, ask `advisor suggest` (or `advisor check --gpu` for memory scenarios) for the diff, apply it,
rerun with the same seed, and score (a) named — the diff touches the injected key or an accepted
alternative — and (b) better — the fixed run beats the faulty one on the scenario's target metric
(mean over the advisor's window). Healthy baselines score (a) when no change is proposed. Prints
both rates.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from advisor import load_config  # noqa: E402
from advisor.checks import check  # noqa: E402
from advisor.playbook import (  # noqa: E402
    PERFORMANCE_TREES,
    load_playbook,
    suggest_run,
)
from sweeps.sandbox import run  # noqa: E402

SANDBOX_ONLY = ("+sandbox.", "sandbox.")


@dataclass
class Outcome:
    scenario: str
    seed: int
    diff: list[str]
    decided_by: str | None
    named: bool
    better: bool | None
    before: float | None = None
    after: float | None = None
    note: str = ""
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def frame_of(records: list[tuple[int, dict[str, Any]]]) -> Any:
    import pandas as pd

    rows = {step: {k: (math.nan if v is None else float(v)) for k, v in m.items()
                   if v is None or isinstance(v, (int, float))} for step, m in records}
    return pd.DataFrame.from_dict(rows, orient="index").sort_index()


def write_jsonl(records: list[tuple[int, dict[str, Any]]], path: Path) -> Path:
    """The run as verl's file logger writes it, so the advisor reads it as it reads a real run."""
    import json

    def plain(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    with path.open("w") as fh:
        for step, metrics in records:
            data = {k: plain(float(v) if not isinstance(v, (bool, int)) else v) for k, v in metrics.items()
                    if v is None or isinstance(v, (int, float))}
            fh.write(json.dumps({"step": step, "data": data}, separators=(",", ":")) + "\n")
    return path


def verl_overrides(overrides: list[str]) -> list[str]:
    return [o for o in overrides if not o.startswith(SANDBOX_ONLY)]


def window_mean(frame: Any, metric: str, window: Any) -> float:
    series = frame.loc[frame.index >= window.first_step, metric].dropna()
    return float(series.mean()) if len(series) else math.nan


def run_one(scenario: dict[str, Any], base: list[str], seed: int, steps: int) -> Outcome:
    started = time.perf_counter()
    common = [*base, f"trainer.total_training_steps={steps}", f"+sandbox.seed={seed}"]
    faulty = [*common, *scenario.get("fault", [])]
    accept = set(scenario.get("accept", []))
    rules = tuple(r for r in load_playbook() if r.tree not in PERFORMANCE_TREES)
    if scenario.get("kind") == "memory":
        cfg = load_config(None, verl_overrides(faulty), verl_version="main")
        report = check(cfg, gpu=scenario["gpu"])
        diff = [c.override() for c in report.changes if c.key in {k for f in report.findings if f.id.startswith("M")
                                                                   for k in f.keys}]
        named = any(c.key in accept for c in report.changes)
        emulate = [f"+sandbox.emulate_model={cfg.get('actor_rollout_ref.model.path').rsplit('/', 1)[-1]}",
                   f"+sandbox.emulate_gpu={scenario['gpu']}"]
        ok_before = _runs(faulty + emulate)
        ok_after = _runs(faulty + emulate + diff)
        return Outcome(scenario["name"], seed, diff, "M001" if diff else None, named, ok_after and not ok_before,
                       note=f"faulty run {'finished' if ok_before else 'ran out of memory'}, fixed run "
                            f"{'finished' if ok_after else 'ran out of memory'}",
                       seconds=time.perf_counter() - started)
    records = run(faulty)
    frame = frame_of(records)
    cfg = load_config(None, verl_overrides(faulty), verl_version="main")
    with tempfile.TemporaryDirectory() as tmp:
        result = suggest_run(cfg, write_jsonl(records, Path(tmp) / "metrics.jsonl"), rules=rules)
    diff = result.overrides
    decided = result.decided_by.id if result.decided_by else None
    if not scenario.get("fault"):  # a healthy baseline: right when nothing is proposed
        return Outcome(scenario["name"], seed, diff, decided, named=not diff, better=None,
                       seconds=time.perf_counter() - started)
    named = any(c.key in accept for c in result.changes)
    target = scenario["target"]
    before = window_mean(frame, target["metric"], result.window)
    if not diff:
        return Outcome(scenario["name"], seed, diff, decided, named, False, before, None, "no diff proposed",
                       time.perf_counter() - started)
    fixed = frame_of(run([*faulty, *diff]))
    after = window_mean(fixed, target["metric"], result.window)
    better = after > before if target["goal"] == "max" else after < before
    return Outcome(scenario["name"], seed, diff, decided, named, bool(better), before, after,
                   seconds=time.perf_counter() - started)


def _runs(overrides: list[str]) -> bool:
    from sweeps.sandbox import EmulatedOutOfMemory

    try:
        run([*overrides, "trainer.total_training_steps=2"])
    except EmulatedOutOfMemory:
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--seeds", nargs="*", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    args = parser.parse_args()
    spec = yaml.safe_load((HERE / "scenarios.yaml").read_text())
    seeds = args.seeds or spec["seeds"]
    steps = args.steps or spec["steps"]
    outcomes: list[Outcome] = []
    for scenario in spec["scenarios"]:
        if args.only and scenario["name"] not in args.only:
            continue
        for seed in seeds:
            o = run_one(scenario, spec["bases"][scenario["base"]], seed, steps)
            outcomes.append(o)
            better = "-" if o.better is None else ("yes" if o.better else "no")
            values = f"{o.before:.4g} -> {o.after:.4g}" if o.before is not None and o.after is not None else o.note
            print(f"{o.scenario:26s} seed {seed}  named {'yes' if o.named else 'no ':3s} better {better:3s} "
                  f"{o.decided_by or '-':6s} {' '.join(o.diff) or '(no change)'}  [{values}]  {o.seconds:.1f}s",
                  flush=True)
    faults = [o for o in outcomes if o.better is not None]
    healthy = [o for o in outcomes if o.better is None]
    named = sum(o.named for o in faults)
    better = sum(bool(o.better) for o in faults)
    quiet = sum(o.named for o in healthy)
    print()
    print(f"injected faults: named {named}/{len(faults)} ({named / max(len(faults), 1):.0%}), "
          f"fixed run better {better}/{len(faults)} ({better / max(len(faults), 1):.0%})")
    print(f"healthy baselines: no change proposed {quiet}/{len(healthy)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
