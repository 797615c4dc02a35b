"""How far each critic of the world's train split rose from its first step: the rows CR001's `rose_from_first` rests on.

    python bench/world/critic_rise.py [--data FILE]

For every PPO-with-a-critic run (GAE) of the train split, on each of its two sandbox seeds: the critic's lr, the
injected fault, whether the run's label is empty, the first logged `critic/vf_explained_var` (verl computes a step's
values before that step's critic update, so the first is the untrained critic's), the run's peak (its highest 9-step
rolling median, edges padded with the end values, as advisor.playbook's MetricSignal.peak) minus that first value,
the lowest value, and the score's first and last. Sorted by the critic's lr. The test split is never read.
bench/world/FITS.md keeps the output CR001 cites.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's advisor

import world

from advisor.playbook import rolling_median

EV = "critic/vf_explained_var"
WIDTH = 9


def rolling_median_peak(values: np.ndarray, width: int = WIDTH) -> float:
    """The highest median of ``width`` consecutive values: MetricSignal.peak's reading, by the playbook's own code."""
    return float(np.max(rolling_median(values, width)))


def lines(records: list[dict]) -> list[tuple[float, str]]:
    out = []
    for r in records:
        if r["split"] != "train" or "error" in r or r["mode"] != "gae":
            continue
        lr = float(next((o.split("=", 1)[1] for o in r["overrides"] if o.startswith("critic.optim.lr=")), "1e-5"))
        fault = f"{r['fault']['name']}={r['fault']['value']}" if r["fault"] else "-"
        for i, metrics in enumerate(r["metrics"]):
            ev = np.array([m[EV] for _, m in metrics if m.get(EV) is not None], dtype=float)
            score = [m["critic/score/mean"] for _, m in metrics if m.get("critic/score/mean") is not None]
            if not ev.size:
                continue
            rise = rolling_median_peak(ev) - ev[0]
            out.append((lr, f"{r['seed']:>4}/{i} {r['kl']:<6} critic lr {lr:<9.3g} {fault:<34} "
                            f"label {'-' if not r['label'] else 'yes'}  first {ev[0]:+.4f}  peak-first {rise:+.4f}  "
                            f"min {ev.min():+.3g}  score {score[0]:.2f} -> {score[-1]:.2f}"))
    return sorted(out, key=lambda t: (t[0], t[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=world.DATA)
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"critic_rise: {args.data}: no such dataset file", file=sys.stderr)
        return 2
    for _, line in lines(world.read(args.data)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
