"""Measure where published, healthy verl runs keep the metrics the playbook judges.

verl's docs link full training logs of their baseline runs (docs/algo/baseline.md, "command and logs").
This reads those console logs (``step:N - key:value - ...``, verl's console logger) from a local clone of
https://github.com/eric-haibin-lin/verl-data (branch ``experiments``) and writes, per run and metric, the
5th, 50th and 95th percentile and the maximum over the steps after the first 10% (the start of a run is
not its steady state), to knowledge/published_runs.yaml. Rule bands cite this file.

    python scripts/published_run_bands.py --repo /path/to/verl-data [--check]

Old metric names are read as today's (actor/entropy_loss was renamed actor/entropy; critic/kl is today's
actor/reward_kl_penalty).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from _generated import write_or_check  # noqa: E402

OUT = REPO / "knowledge" / "published_runs.yaml"
BRANCH = "experiments"
# docs/algo/baseline.md rows linking these logs (verl main 1dda039b)
RUNS = {
    "gsm8k/Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log":
        "docs/algo/baseline.md:23 (Qwen2.5-0.5B-Instruct PPO, 56.7)",
    "gsm8k/gemma-2-2b-it-ppo-bsz512_4-prompt1024-resp-512-0.640.log":
        "docs/algo/baseline.md:21 (gemma-2-2b-it SFT + PPO, 64.02)",
    "gsm8k/Qwen2.5-0.5B-bsz256_2-prompt512-resp256-0.538.log":
        "verl-data experiments branch (Qwen2.5-0.5B PPO, 512-token prompts)",
}
RENAMED = {"actor/entropy_loss": "actor/entropy", "critic/kl": "actor/reward_kl_penalty"}
METRICS = ("actor/pg_clipfrac", "actor/ppo_kl", "actor/entropy", "actor/grad_norm", "critic/vf_clipfrac",
           "critic/vf_explained_var", "actor/reward_kl_penalty", "critic/advantages/max", "critic/advantages/min",
           "critic/score/mean", "response_length/mean")


def parse(text: str) -> list[dict[str, float]]:
    rows = []
    for line in text.splitlines():
        if "step:" not in line:
            continue
        row = {}
        for part in line[line.index("step:"):].split(" - "):
            key, _, value = part.rpartition(":")
            try:
                row[RENAMED.get(key, key)] = float(value)
            except ValueError:
                continue
        rows.append(row)
    return rows


def summary(rows: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    out = {}
    for metric in METRICS:
        values = np.array([r[metric] for r in rows if metric in r])
        if not values.size:
            continue
        steady = values[len(values) // 10:]
        out[metric] = {"p5": float(f"{np.percentile(steady, 5):.4g}"), "p50": float(f"{np.median(steady):.4g}"),
                       "p95": float(f"{np.percentile(steady, 95):.4g}"), "max": float(f"{steady.max():.4g}"),
                       "steps": int(values.size)}
    return out


def build(repo: Path) -> str:
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", BRANCH], capture_output=True, text=True,
                            check=True).stdout.strip()
    runs = {}
    for path, cited in RUNS.items():
        text = subprocess.run(["git", "-C", str(repo), "show", f"{BRANCH}:{path}"], capture_output=True,
                              text=True, check=True).stdout
        runs[path] = {"linked_from": cited, "metrics": summary(parse(text))}
    header = ("# Written by scripts/published_run_bands.py; do not edit. Percentiles over the steps after the\n"
              "# first 10% of published, healthy verl runs (console logs linked from docs/algo/baseline.md).\n")
    data = {"schema": 1, "source": f"https://github.com/eric-haibin-lin/verl-data/tree/{commit}", "runs": runs}
    return header + yaml.safe_dump(data, sort_keys=False, width=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="a clone of eric-haibin-lin/verl-data")
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    args = parser.parse_args()
    return write_or_check({OUT: build(args.repo)}, REPO, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
