"""How often the memory model predicts verl's known outcomes on the right side.

Runs the validation set (tests/advisor_tests/memory/validation_set.yaml): the device-tuning OOM trails
and MaxBatch results of verl's docs/perf/device_tuning.rst, and every example launch script under
tests/fixtures/verl_scripts/examples on the hardware it was written for. Prints each miss, one score
line per kind, and the total as the single number to track:

    python bench/bench_memory_accuracy.py            # from the repository root
    python bench/bench_memory_accuracy.py --all      # also print every case

Measured GPU peaks: none yet. The issue asks for a measured actor update (random small Qwen2.5,
AdamW, bf16 autocast, with and without gradient checkpointing) when the device tool lends a GPU; the
session that built this bench had no GPU, so there is no measured column.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "advisor_tests" / "memory"))

from memory_validation import cases  # noqa: E402

# the score docs/memory.md states; the bench says when the model moved away from it
BASELINE_RIGHT = 96
BASELINE_TOTAL = 116


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="print every case, not only the misses")
    args = parser.parse_args()

    started = time.perf_counter()
    score: dict[str, list[int]] = {}
    for case in cases():
        estimate = case.estimate()
        right = case.right(estimate)
        tally = score.setdefault(case.kind, [0, 0])
        tally[0] += right
        tally[1] += 1
        if args.all or not right:
            peak = estimate.peak
            mark = "ok  " if right else "MISS"
            print(f"{mark} {case.kind:13s} {case.id:62s} {case.gpu:11s} expected {case.expected:3s} "
                  f"predicted {estimate.verdict:5s} {peak.stage} {peak.peak_gib:.1f}/{peak.capacity_gib:.1f} GiB")
    elapsed = time.perf_counter() - started
    right = sum(r for r, _ in score.values())
    total = sum(t for _, t in score.values())
    for kind, (r, t) in score.items():
        print(f"{kind}: {r}/{t} right")
    print(f"memory model accuracy: {right}/{total} right ({100 * right / total:.1f}%) in {elapsed:.1f} s; "
          f"baseline {BASELINE_RIGHT}/{BASELINE_TOTAL}")
    return 0 if (right, total) == (BASELINE_RIGHT, BASELINE_TOTAL) else 1


if __name__ == "__main__":
    raise SystemExit(main())
