"""How often the memory model predicts verl's known outcomes on the right side.

Runs the validation set (tests/advisor_tests/memory/validation_set.yaml): the device-tuning OOM trails
and MaxBatch results of verl's docs/perf/device_tuning.rst, and every example launch script under
tests/fixtures/verl_scripts/examples on the hardware it was written for (those that cannot run as written,
by arithmetic a test shows, scored apart as cannot_run). Prints each miss, one score line per kind, the
estimate / measured table per point (median, min, max), and the total as the single number to track:

    python bench/bench_memory_accuracy.py            # from the repository root
    python bench/bench_memory_accuracy.py --all      # also print every case

Estimate / measured: the trails' OOM boundaries, where the measured peak is the card's usable memory
(a cudaMalloc failure); and the published torch max_memory_allocated of eight verl runs
(tests/advisor_tests/memory/calibration_points.yaml), against the engine pool plus the largest training
phase. No GPU was lent to the sessions that built this bench, so there is no measured actor-update
column of our own yet (issue 19, item 7).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "advisor_tests" / "memory"))

from memory_validation import calibration_points, cases, torch_allocated_gib  # noqa: E402

# the score docs/memory.md states; the bench says when the model moved away from it
BASELINE_RIGHT = 103
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
    _ratio_table()
    _calibration_table()
    _per_point_summary()
    right = sum(r for r, _ in score.values())
    total = sum(t for _, t in score.values())
    for kind, (r, t) in score.items():
        print(f"{kind}: {r}/{t} right")
    print(f"memory model accuracy: {right}/{total} right ({100 * right / total:.1f}%) in {elapsed:.1f} s; "
          f"baseline {BASELINE_RIGHT}/{BASELINE_TOTAL}")
    return 0 if (right, total) == (BASELINE_RIGHT, BASELINE_TOTAL) else 1


# usable memory of an 80 GB H100 (memory-calibration.yaml: "H100 80GB = 79.19 GiB usable to torch"); a
# trail's OOM point is a cudaMalloc failure, so the physical peak there is at least this
H100_USABLE_GIB = 79.19


def _ratio_table() -> None:
    """Estimate / measured at each OOM trail boundary (measured: the card's usable memory, a lower bound)."""
    import statistics

    trails: dict[str, dict[str, list]] = {}
    for case in cases():
        if case.kind != "device_tuning":
            continue
        prompts = int(case.id.rsplit("@", 1)[1])
        trails.setdefault(case.script.name, {"ran": [], "oom": []})[case.expected].append((prompts, case))
    rows = []
    for name, points in trails.items():
        if not points["oom"] or not points["ran"]:
            continue
        first_oom = min(points["oom"], key=lambda p: p[0])
        last_ran = max((p for p in points["ran"] if p[0] < first_oom[0]), key=lambda p: p[0])
        oom_peak = first_oom[1].estimate().peak.peak_gib
        ran_peak = last_ran[1].estimate().peak.peak_gib
        rows.append((name, last_ran[0], ran_peak / H100_USABLE_GIB, first_oom[0], oom_peak / H100_USABLE_GIB))
    print("estimate / measured at the OOM boundary of each trail (measured = 79.19 GiB usable H100; "
          "the ran point's real peak is below it, the OOM point's at or above it)")
    print(f"{'trail':48s} {'ran at':>6s} {'ratio':>6s} {'oom at':>6s} {'ratio':>6s}")
    for name, ran_at, ran_ratio, oom_at, oom_ratio in rows:
        print(f"{name:48s} {ran_at:6d} {ran_ratio:6.3f} {oom_at:6d} {oom_ratio:6.3f}")
    ratios = [r[4] for r in rows]
    if ratios:
        print(f"estimate / measured at the OOM points: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, "
              f"max {max(ratios):.3f} over {len(ratios)} trails (1.0 or more is right)")


def _calibration_table() -> None:
    """Estimate / measured torch max_memory_allocated of published verl runs (calibration_points.yaml)."""
    import statistics

    print("estimate / measured torch max_memory_allocated of published verl runs (engine pool + training peak)")
    print(f"{'run':26s} {'estimate':>8s} {'measured':>8s} {'ratio':>6s}  note")
    ratios = []
    for point in calibration_points():
        estimate = torch_allocated_gib(point.estimate())
        ratio = estimate / point.measured_gib
        ratios.append(ratio)
        print(f"{point.id:26s} {estimate:8.1f} {point.measured_gib:8.1f} {ratio:6.3f}  {point.assumed}")
    print(f"estimate / measured over the published runs: median {statistics.median(ratios):.3f}, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f} over {len(ratios)} runs")


def _per_point_summary() -> None:
    """Estimate / measured for every point with a measurement: each trail point against the 79.19 GiB boundary
    (a point that ran was below it, one that ran out of memory at or above it) and each published run's
    max_memory_allocated. The example scripts have no measurement (only that they ran) and are not in it."""
    import statistics

    groups: dict[str, list[float]] = {"trail points that ran (right below 1)": [],
                                      "trail points that ran out of memory (right at 1 or above)": [],
                                      "published runs' max_memory_allocated (right at 1)": []}
    keys = list(groups)
    for case in cases():
        if case.kind == "device_tuning":
            ratio = case.estimate().peak.peak_gib / H100_USABLE_GIB
            groups[keys[0] if case.expected == "ran" else keys[1]].append(ratio)
    for point in calibration_points():
        groups[keys[2]].append(torch_allocated_gib(point.estimate()) / point.measured_gib)
    print("estimate / measured per point (validation trails + published runs)")
    print(f"{'points':58s} {'n':>3s} {'median':>7s} {'min':>6s} {'max':>6s}")
    every = []
    for name, ratios in groups.items():
        every += ratios
        print(f"{name:58s} {len(ratios):3d} {statistics.median(ratios):7.3f} {min(ratios):6.3f} {max(ratios):6.3f}")
    print(f"{'all points with a measurement':58s} {len(every):3d} {statistics.median(every):7.3f} "
          f"{min(every):6.3f} {max(every):6.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
