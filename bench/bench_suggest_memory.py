"""Peak memory (RSS) and wall time of ``advisor suggest`` on very large metrics files (issue #18).

Two generated inputs, written to a temporary folder that is removed afterwards (``--keep DIR``: written there
once and reused, never committed):

- a verl ``file``-logger JSONL of ``--steps`` steps (default 1,000,000), from the generator of
  bench_metrics_read.py: the ~150 metrics a step a verl 0.7 GRPO run logs, validation every 10 steps, NaN
  grad norms as verl 0.7 writes them (about 6.7 GB at 1,000,000 steps);
- a verl console log of ``--console-gb`` GB (default 2), the same records as the
  ``(TaskRunner pid=...) step:N - key:value - ...`` lines verl's console logger prints, 60 metrics a line (every
  one the playbook reads, then others), so 2 GB hold about 750,000 steps as in the issue's log.

Each runs ``python -m advisor suggest CONFIG FILE -f json`` in a child process of this checkout; its peak RSS
is the kernel's ru_maxrss from ``os.wait4``. Target: under 1 GiB for both. One line per input:

    suggest jsonl 1,000,000 steps (6.68 GB): peak RSS 0.56 GiB, 26.7 s (target < 1 GiB: met)

    python bench/bench_suggest_memory.py              # full size (needs ~9 GB free disk)
    python bench/bench_suggest_memory.py --quick      # 50,000 steps and a 0.1 GB console log
    python bench/bench_suggest_memory.py --keep /tmp/advisor-bench-mem
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))  # this checkout's advisor (the playbook the console lines are made for)

from bench_metrics_read import write_verl_jsonl  # noqa: E402

CONFIG = REPO / "examples" / "healthy_grpo" / "run.sh"
TARGET_GIB = 1.0
_JSONL_BYTES_PER_STEP = 6_700  # the generator's line, for the disk check
_RECORDS_REUSED = 1000  # console lines are these JSONL records, repeated with rising steps
# ~2.7 KB lines: the 2.15 GB console log held 754k steps (a run logging fewer metrics than the JSONL's 150)
_CONSOLE_METRICS = 60


def write_console_log(path: Path, target_bytes: int, jsonl: Path, metrics_per_line: int = _CONSOLE_METRICS) -> int:
    """Console lines (``step:N - key:value - ...``) made from the JSONL's records, repeated with rising steps until
    the file holds ``target_bytes``; returns the number of steps written.

    A line holds ``metrics_per_line`` metrics: every one the playbook reads (the columns ``suggest`` keeps, so the
    memory it needs is the most a line of that size can ask), then others in the record's order.
    """
    from advisor.metrics import ColumnFilter
    from advisor.playbook import load_playbook

    read = ColumnFilter({m for rule in load_playbook() for m in rule.metrics})
    records = []
    with jsonl.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if record["step"] >= 1:
                data = record["data"]
                names = [k for k in data if read(k)]
                names += [k for k in data if not read(k)][: max(0, metrics_per_line - len(names))]
                records.append(" - ".join(f"{k}:{data[k]!r}" for k in data if k in set(names)))
            if len(records) == _RECORDS_REUSED:
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


def measure(metrics: Path) -> tuple[float, float, int, str]:
    """(peak RSS in GiB, seconds, exit code, stderr) of ``advisor suggest CONFIG METRICS -f json``."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "advisor", "suggest", str(CONFIG), str(metrics), "-f", "json"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")  # read before waiting: a full pipe would block the child
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 2**20, seconds, proc.returncode, err.strip()  # ru_maxrss is in KiB on Linux


def _inputs(folder: Path, steps: int, console_gb: float) -> tuple[Path, Path, int]:
    jsonl = folder / f"verl-{steps}.jsonl"
    if not jsonl.exists():
        tmp = jsonl.with_suffix(".tmp")
        write_verl_jsonl(tmp, steps)
        tmp.replace(jsonl)
    console = folder / f"console-{console_gb:g}gb.log"
    if not console.exists():
        tmp = console.with_suffix(".tmp")
        write_console_log(tmp, int(console_gb * 1e9), jsonl)
        tmp.replace(console)
    console_steps = sum(1 for _ in console.open("rb"))
    return jsonl, console, console_steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1_000_000, help="steps of the JSONL log")
    parser.add_argument("--console-gb", type=float, default=2.0, help="size of the console log, in GB")
    parser.add_argument("--quick", action="store_true", help="50,000 steps and a 0.1 GB console log")
    parser.add_argument("--keep", type=Path, help="write the inputs here (once) and keep them, instead of a temp dir")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.console_gb = 50_000, 0.1
    folder = args.keep or Path(tempfile.mkdtemp(prefix="advisor-bench-mem-"))
    folder.mkdir(parents=True, exist_ok=True)
    need = args.steps * _JSONL_BYTES_PER_STEP + args.console_gb * 1e9
    free = shutil.disk_usage(folder).free
    try:
        if free < need * 1.1 and not (folder / f"verl-{args.steps}.jsonl").exists():
            print(f"needs about {need / 1e9:.1f} GB free in {folder}, has {free / 1e9:.1f} GB")
            return 2
        jsonl, console, console_steps = _inputs(folder, args.steps, args.console_gb)
        failed = False
        for kind, path, steps in (("jsonl", jsonl, args.steps), ("console", console, console_steps)):
            gib, seconds, code, err = measure(path)
            ok = gib < TARGET_GIB and code == 0
            failed |= not ok
            print(f"suggest {kind} {steps:,} steps ({path.stat().st_size / 1e9:.2f} GB): peak RSS {gib:.2f} GiB, "
                  f"{seconds:.1f} s (target < {TARGET_GIB:g} GiB: {'met' if ok else 'over'})", flush=True)
            if code != 0:
                print(f"  (exit {code}: {err[:300]})")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
