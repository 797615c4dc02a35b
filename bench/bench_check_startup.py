"""Start-up cost of `advisor check` against bare Python, measured in one run.

Target (issue 28): the median wall time of `advisor check` on a bundled example is at most 0.15 s above
the median of `python -c pass`, as installed (byte code written, so PYTHONDONTWRITEBYTECODE is dropped for
the runs) with the parsed-knowledge cache warm; the cold figure (ADVISOR_NO_CACHE=1) is printed beside it. The commands
take turns run by run, so a slow spell of a shared machine weighs on bare Python and on the advisor alike.
Bare Python runs in the same environment as the advisor; in an editable install (the README's) its start-up
includes setuptools' editable finder, which imports pathlib and friends the advisor needs anyway: the
``python -S`` line shows how much that is.
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


def _median_walls(commands: dict[str, tuple[list[str], dict[str, str]]], runs: int) -> dict[str, float]:
    """The median wall time of each command, the commands taking turns run by run: a slow spell of a shared
    machine then weighs on all of them alike, and the differences stay fair."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (cmd, env) in commands.items():
            start = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env={**ENV, **env})
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


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
    check = [sys.executable, "-m", "advisor", "check", str(EXAMPLE)]
    _median_walls({"warm": (check, {})}, 2)  # warm the page cache, the .pyc files and the knowledge cache
    walls = _median_walls({"bare": ([sys.executable, "-c", "pass"], {}),
                           "no site": ([sys.executable, "-S", "-c", "pass"], {}),
                           "help": ([sys.executable, "-m", "advisor", "--help"], {}),
                           "json": ([*check, "-f", "json"], {}),
                           "text": (check, {}),
                           "cold": (check, {"ADVISOR_NO_CACHE": "1"})}, args.runs)
    bare, no_site, help_, check_json, text, cold = (walls[k] for k in ("bare", "no site", "help", "json", "text",
                                                                       "cold"))
    heavy = _heavy_imports()
    print(f"python -c pass            median {bare:.3f} s  ({args.runs} runs)")
    print(f"python -S -c pass         median {no_site:.3f} s  (no site module: it and an editable install's "
          f"finder cost {bare - no_site:.3f} s of bare Python)")
    print(f"advisor --help            median {help_:.3f} s  (+{help_ - bare:.3f} s)")
    print(f"advisor check -f json     median {check_json:.3f} s  (+{check_json - bare:.3f} s)")
    print(f"advisor check (text)      median {text:.3f} s  (+{text - bare:.3f} s)")
    print(f"advisor check, no cache   median {cold:.3f} s  (+{cold - bare:.3f} s)")
    print(f"check start-up: +{text - bare:.2f} s over bare Python")
    print(f"target: at most +{TARGET_S:.2f} s -> {'met' if text - bare <= TARGET_S else 'MISSED'}")
    print(f"heavy modules imported by check: {heavy or 'none'}")


if __name__ == "__main__":
    main()
