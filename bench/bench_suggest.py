"""Wall time of ``advisor suggest`` on verl logs of 1,000 and 100,000 steps (~150 metrics a step).

The logs are the realistic GRPO file-logger logs of bench_metrics_read.py (same generator); the config
is the bundled healthy GRPO example. Three figures per log, best of ``--repeat`` runs:

- ``in-process``: ``load_config`` + ``suggest_run`` (read, normalise, signals, every rule, the diff),
  with the interpreter and libraries already loaded, i.e. the work itself;
- ``cli``: ``python -m advisor suggest CONFIG METRICS -f json`` as a user runs it (interpreter start,
  imports of click/numpy/pandas/pyarrow, then the work);
- ``python``: ``python -c pass``, the floor every command pays.

Target (issue #4): <= 0.5 s for 1,000 steps. Prints seconds and MB/s.

    python bench/bench_suggest.py [--steps 1000 100000] [--repeat 3] [--dir /tmp/advisor-bench]
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

from bench_metrics_read import write_verl_jsonl  # noqa: E402

from advisor import load_config  # noqa: E402
from advisor.playbook import suggest_run  # noqa: E402

CONFIG = REPO / "examples" / "healthy_grpo" / "run.sh"
TARGET_S = 0.5


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
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "advisor-bench")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)

    floor = _best(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.repeat)
    print(f"python -c pass: {floor:.3f} s")
    print(f"{'steps':>8} {'MB':>7} {'in-process s':>13} {'MB/s':>7} {'cli s':>7} {'cli - python s':>15}  target")
    ok = True
    for steps in args.steps:
        path = args.dir / f"verl_{steps}.jsonl"
        if not path.exists():
            write_verl_jsonl(path, steps)
        mb = path.stat().st_size / 1e6
        _in_process(path)  # warm the page cache and lazy imports
        work = _best(lambda p=path: _in_process(p), args.repeat)
        wall = _best(lambda p=path: _cli(p), args.repeat)
        verdict = ""
        if steps == 1_000:
            verdict = "met" if wall <= TARGET_S else f"missed (cli > {TARGET_S} s)"
            ok = ok and wall <= TARGET_S
        print(f"{steps:>8} {mb:>7.1f} {work:>13.3f} {mb / work:>7.0f} {wall:>7.3f} {wall - floor:>15.3f}  {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
