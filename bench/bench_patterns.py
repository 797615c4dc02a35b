"""`advisor suggest` on the pattern corpus: the debugging guides' symptom -> fix rows rendered as verl runs.

    python bench/bench_patterns.py [--seeds 1 2 3] [--only CASE ...] [-v]

Each case of bench/patterns/cases.yaml (a guide row, its source, the modes and KL placements it occurs in) is rendered
by bench/patterns/render.py as a config and a series of verl's metric set on every noise seed, and `suggest` is
asked once per rendering (with ``--gpu`` when the case names the card). A fault is right when the diff changes a key
the guide's fix names (``accept``), or, where the guide's remedy is outside the config (``inspect``), when no diff is
proposed and a listed rule reports the problem. A healthy run (shaped like published verl runs) is right when no
change is proposed. Ends with exactly:

    patterns: key right N/M
    patterns: healthy no change N/M
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # bench this checkout
sys.path.insert(0, str(REPO / "bench" / "patterns"))


def judge(expect: dict[str, Any], result: Any) -> bool:
    keys = {c.key for c in result.changes}
    if "accept" in expect:
        return bool(keys & set(expect["accept"]))
    reported = {d.id for d in result.diagnoses}
    return not keys and bool(reported & set(expect["inspect"]))


def run_case(case: dict[str, Any], mode: str, seed: int, data: dict[str, Any]) -> Any:
    from render import render

    from advisor import load_config
    from advisor.memory import resolve_gpu
    from advisor.playbook import suggest

    overrides, frame = render(case, mode, seed, data)
    cfg = load_config(None, overrides, verl_version=case.get("verl"))
    gpu = resolve_gpu(case["gpu"]).memory_gib if case.get("gpu") else None
    return suggest(cfg, frame, gpu_memory_gib=gpu)


def main(argv: list[str] | None = None) -> int:
    from render import load

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="noise seeds (default: the file's)")
    parser.add_argument("--only", nargs="*", default=None, help="case ids")
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per rendering")
    args = parser.parse_args(argv)
    data = load()
    seeds = args.seeds or data["seeds"]
    right = total = quiet = healthy = 0
    for kind, entries in (("fault", data["cases"]), ("healthy", data["healthy"])):
        for case in entries:
            if args.only and case["id"] not in args.only:
                continue
            for mode in case["modes"]:
                for seed in seeds:
                    result = run_case(case, mode, seed, data)
                    if kind == "fault":
                        ok = judge(case["expect"], result)
                        right, total = right + ok, total + 1
                    else:
                        ok = result.verdict == "no change"
                        quiet, healthy = quiet + ok, healthy + 1
                    if args.verbose or not ok:
                        decided = result.decided_by.id if result.decided_by else "-"
                        print(f"{'ok  ' if ok else 'MISS'} {kind:7s} {case['id']:28s} {mode:10s} seed {seed}  "
                              f"{decided:6s} {' '.join(result.overrides) or '(' + result.verdict + ')'}")
    print(f"patterns: key right {right}/{total}")
    print(f"patterns: healthy no change {quiet}/{healthy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
