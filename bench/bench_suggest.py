"""Wall time of ``advisor suggest`` on verl logs of 1,000 and 100,000 steps (~150 metrics a step).

The logs are the realistic GRPO file-logger logs of bench_metrics_read.py (same generator); the config
is the bundled healthy GRPO example. Three figures per log, best of ``--repeat`` runs:

- ``in-process``: ``load_config`` + ``suggest_run`` (read, normalise, signals, every rule, the diff),
  with the interpreter and libraries already loaded, i.e. the work itself;
- ``cli``: ``python -m advisor suggest CONFIG METRICS -f json`` as a user runs it (interpreter start,
  imports of click/numpy/pandas/pyarrow, then the work);
- ``python``: ``python -c pass``, the floor every command pays.

Then, on the 1,000-step log, the metrics reader against pyarrow's own JSON reader (bench_metrics_read.py's
measure: the faster of pyarrow given the path and the memory-mapped file, the readers interleaved, best of
``--repeat`` each), so that both targets of issue #39 are measured side by side in one run. The last two lines:

    suggest on 1,000 steps from the command line: S s (best of R; target <= 0.3 s): met|missed
    metrics reader on 1,000 steps: X.XXx pyarrow's JSON reader (best of R each, interleaved; target >= 0.8x): met|missed

Targets (issue #39): ``advisor suggest`` <= 0.3 s on 1,000 steps; the reader >= 0.8x pyarrow. Exit 1 when one
is missed.

    python bench/bench_suggest.py [--steps 1000 100000] [--repeat 15] [--dir /tmp/advisor-bench]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # bench this checkout, not whatever `advisor` is installed
sys.path.insert(0, str(REPO / "bench"))

from bench_metrics_read import TARGET_RATIO, bench, write_verl_jsonl  # noqa: E402

from advisor import load_config  # noqa: E402
from advisor.playbook import suggest_run  # noqa: E402

CONFIG = REPO / "examples" / "healthy_grpo" / "run.sh"
TARGET_S = 0.3
TARGET_STEPS = 1_000


def _best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _in_process(path: Path) -> None:
    suggest_run(load_config(CONFIG), path)


def _cli(path: Path) -> None:
    subprocess.run([sys.executable, "-m", "advisor", "suggest", str(CONFIG), str(path), "-f", "json"],
                   check=True, capture_output=True, cwd=REPO)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "advisor-bench")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)

    floor = _best(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.repeat)
    print(f"python -c pass: {floor:.3f} s")
    print(f"{'steps':>8} {'MB':>7} {'in-process s':>13} {'MB/s':>7} {'cli s':>7} {'cli - python s':>15}")
    ok = True
    lines = []
    for steps in sorted(set(args.steps) | {TARGET_STEPS}):
        path = args.dir / f"verl_{steps}.jsonl"
        if not path.exists():
            write_verl_jsonl(path, steps)
        mb = path.stat().st_size / 1e6
        _in_process(path)  # warm the page cache and lazy imports
        work = _best(lambda p=path: _in_process(p), args.repeat)
        wall = _best(lambda p=path: _cli(p), args.repeat)
        print(f"{steps:>8} {mb:>7.1f} {work:>13.3f} {mb / work:>7.0f} {wall:>7.3f} {wall - floor:>15.3f}")
        if steps == TARGET_STEPS:
            met = wall <= TARGET_S
            ok = ok and met
            lines.append(f"suggest on {steps:,} steps from the command line: {wall:.3f} s (best of {args.repeat}; "
                         f"target <= {TARGET_S} s): {'met' if met else 'missed'}")
            ratio = bench(path, args.repeat)["ratio"]
            met = ratio >= TARGET_RATIO
            ok = ok and met
            lines.append(f"metrics reader on {steps:,} steps: {ratio:.2f}x pyarrow's JSON reader (best of "
                         f"{args.repeat} each, interleaved; target >= {TARGET_RATIO}x): {'met' if met else 'missed'}")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
