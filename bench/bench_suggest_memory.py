"""Peak memory (RSS) and wall time of ``advisor suggest`` on very large metrics files (issue #18).

Two generated inputs, written under ``--dir`` (default a folder in /tmp; never committed):

- a verl ``file``-logger JSONL of ``--steps`` steps (default 1,000,000; ~150 metrics a step, about 2.5 GB),
  from the generator of bench_metrics_read.py;
- a verl console log of about ``--console-gb`` GB (default 2), the same metrics as ``step:N - key:value``
  lines, as verl's console logger prints them.

Each runs ``python -m advisor suggest CONFIG FILE -f json`` in a child process; its peak RSS comes from
``os.wait4`` (the kernel's ru_maxrss). Target: under 1 GiB for both. Printed, one line per input:

    suggest jsonl 1,000,000 steps (2.56 GB): peak RSS 5.40 GiB, 61.2 s (target < 1 GiB: over)

    python bench/bench_suggest_memory.py [--steps 1000000] [--console-gb 2] [--dir /tmp/advisor-bench-mem]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from bench_metrics_read import write_verl_jsonl  # noqa: E402

CONFIG = REPO / "examples" / "healthy_grpo" / "run.sh"
TARGET_GIB = 1.0


def write_console_log(path: Path, target_bytes: int, jsonl: Path) -> int:
    """Console lines (``step:N - key:value - ...``) made from the JSONL's records, repeated with rising steps until
    the file holds ``target_bytes``; returns the number of steps written."""
    import json

    records = []
    with jsonl.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if record["step"] >= 1:
                records.append(" - ".join(f"{k}:{v!r}" for k, v in record["data"].items()))
            if len(records) == 1000:
                break
    step, written = 0, 0
    with path.open("w", encoding="utf-8") as fh:
        while written < target_bytes:
            block = []
            for body in records:
                step += 1
                block.append(f"(TaskRunner pid=4242) step:{step} - {body}\n")
            text = "".join(block)
            fh.write(text)
            written += len(text)
    return step


def measure(metrics: Path) -> tuple[float, float, int]:
    """(peak RSS in GiB, seconds, exit code) of ``advisor suggest CONFIG METRICS -f json``."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "advisor", "suggest", str(CONFIG), str(metrics), "-f", "json"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0,):
        print(f"  (exit {proc.returncode}: {proc.stderr.read().decode(errors='replace').strip()[:300]})")
    return usage.ru_maxrss / 2**20, seconds, proc.returncode  # ru_maxrss is in KiB on Linux


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1_000_000, help="steps of the JSONL log")
    parser.add_argument("--console-gb", type=float, default=2.0, help="size of the console log, in GB")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/advisor-bench-mem"))
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    jsonl = args.dir / f"verl-{args.steps}.jsonl"
    if not jsonl.exists():
        write_verl_jsonl(jsonl, args.steps)
    console = args.dir / f"console-{args.console_gb:g}gb.log"
    if not console.exists():
        write_console_log(console, int(args.console_gb * 1e9), jsonl)
    failed = False
    for kind, path, what in (("jsonl", jsonl, f"{args.steps:,} steps"), ("console", console, "log")):
        gib, seconds, code = measure(path)
        ok = gib < TARGET_GIB and code == 0
        failed |= not ok
        print(f"suggest {kind} {what} ({path.stat().st_size / 1e9:.2f} GB): peak RSS {gib:.2f} GiB, {seconds:.1f} s "
              f"(target < {TARGET_GIB:g} GiB: {'met' if ok else 'over'})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
