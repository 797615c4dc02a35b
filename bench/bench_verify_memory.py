"""Peak memory and wall time of `advisor verify` on each bundled example, trials on the CPU sandbox (issue #38).

    python bench/bench_verify_memory.py [--only NAME ...] [--timeout 600]

Each example runs as a user runs it: ``advisor verify examples/<name>/run.sh examples/<name>/metrics.jsonl
--command 'python -m sweeps.sandbox'`` (the sandbox at its own scale, knowledge/verify.yaml sandbox_scale; each
trial's memory capped by sandbox.max_memory_gib). Prints, per example::

    verify peak RSS: <example> N MiB
    verify wall: <example> S s (exit C)

The peak is the whole verify's, children included: the largest sum of the resident set sizes of the verify
process and every process under it (its trials), sampled every 0.2 s from /proc, and never below
``getrusage(RUSAGE_CHILDREN).ru_maxrss`` (the largest single process, exact but not a sum), read in a fresh
process per example so one example's peak is not another's. Linux only (/proc). Targets: each peak under
4 GiB, each verify under 5 minutes on 2 cores. An example whose run is healthy exits 2 ("nothing to verify")
after suggest; it is measured all the same.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.parent.name for p in (REPO / "examples").glob("*/metrics.jsonl"))
SAMPLE_S = 0.2


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fp:
                fields = fp.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fp:
            return int(fp.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss(root: int) -> int:
    """The resident bytes of ``root`` and every process under it, now."""
    tree, total, todo = _children(), 0, [root]
    while todo:
        pid = todo.pop()
        total += _rss_bytes(pid)
        todo += tree.get(pid, [])
    return total


def measure_one(name: str, timeout: float) -> dict[str, float | int]:
    """One example's verify: its peak tree RSS (bytes), wall time and exit code (in this process: run it fresh)."""
    example = REPO / "examples" / name
    argv = [sys.executable, "-m", "advisor", "verify", str(example / "run.sh"), str(example / "metrics.jsonl"),
            "--command", "python -m sweeps.sandbox"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SANDBOX_POLICY", None)  # the sandbox's default policy, the language model, as a user gets it
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            done.wait(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        _, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        _, err = proc.communicate()
        code = -9
    wall = time.monotonic() - start
    done.set()
    sampler.join()
    children_max = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    last = err.decode("utf-8", "replace").strip().splitlines()[-1:] if err else []
    return {"peak": max(peak, children_max), "wall": wall, "code": code, "last": last[0][:200] if last else ""}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=EXAMPLES, help="these examples only")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a verify is stopped")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # one example, in a fresh process: JSON on stdout
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(args.one, args.timeout)))
        return 0
    worst = 0
    for name in args.only or EXAMPLES:
        out = subprocess.run([sys.executable, __file__, "--one", name, "--timeout", str(args.timeout)],
                             capture_output=True, text=True, check=True)
        result = json.loads(out.stdout)
        mib = round(result["peak"] / (1 << 20))
        worst = max(worst, mib)
        print(f"verify peak RSS: {name} {mib} MiB", flush=True)
        said = "" if result["code"] in (0, 1) else f": {result['last']}"
        print(f"verify wall: {name} {result['wall']:.0f} s (exit {result['code']}){said}", flush=True)
    print(f"verify peak RSS, largest of {len(args.only or EXAMPLES)}: {worst} MiB (target: each under 4096 MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
