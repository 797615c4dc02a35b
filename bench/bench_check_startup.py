"""Start-up cost of `advisor check` against bare Python, measured in one run.

Target (issue 28): the median wall time of `advisor check` on a bundled example is at most 0.15 s above
the median of `python -c pass`, as installed (byte code written, so PYTHONDONTWRITEBYTECODE is dropped for
the runs) with the parsed-knowledge cache warm; the cold figure (ADVISOR_NO_CACHE=1) is printed beside it.
optuna, ray and plotting libraries are never imported on this path.

    python bench/bench_check_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "check" / "grpo_qwen2.5-7b_gsm8k.sh"
TARGET_S = 0.15
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
HEAVY = ("optuna", "ray", "matplotlib", "plotly", "pandas", "pyarrow", "torch")


def _median_wall(cmd: list[str], runs: int, **env: str) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env={**ENV, **env})
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _heavy_imports() -> list[str]:
    code = (f"import sys; from advisor.cli import main; sys.argv=['advisor','check',{str(EXAMPLE)!r},'-f','json']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"sys.stderr.write('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stderr
    return [m for m in err.rsplit("HEAVY:", 1)[-1].strip().split(",") if m]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    _median_wall([sys.executable, "-m", "advisor", "check", str(EXAMPLE)], 2)  # warm the page cache and .pyc
    bare = _median_wall([sys.executable, "-c", "pass"], args.runs)
    check = _median_wall([sys.executable, "-m", "advisor", "check", str(EXAMPLE), "-f", "json"], args.runs)
    text = _median_wall([sys.executable, "-m", "advisor", "check", str(EXAMPLE)], args.runs)
    cold = _median_wall([sys.executable, "-m", "advisor", "check", str(EXAMPLE)], args.runs, ADVISOR_NO_CACHE="1")
    help_ = _median_wall([sys.executable, "-m", "advisor", "--help"], args.runs)
    heavy = _heavy_imports()
    print(f"python -c pass            median {bare:.3f} s  ({args.runs} runs)")
    print(f"advisor --help            median {help_:.3f} s  (+{help_ - bare:.3f} s)")
    print(f"advisor check -f json     median {check:.3f} s  (+{check - bare:.3f} s)")
    print(f"advisor check (text)      median {text:.3f} s  (+{text - bare:.3f} s)")
    print(f"advisor check, no cache   median {cold:.3f} s  (+{cold - bare:.3f} s)")
    print(f"check start-up: +{text - bare:.2f} s over bare Python")
    print(f"target: at most +{TARGET_S:.2f} s -> {'met' if text - bare <= TARGET_S else 'MISSED'}")
    print(f"heavy modules imported by check: {heavy or 'none'}")


if __name__ == "__main__":
    main()
