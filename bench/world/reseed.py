"""Run the world's undecided candidates on two more seeds (issue 35): resumable, one process per shard.

    nohup nice -n 15 python bench/world/reseed.py [--data FILE] [--shard I/N] &

Two seeds decide a change weakly (world.UNDECIDED_T). For each world run of ``--data`` (and of the diffs
``bench_world.py --run-missing`` kept beside it), every candidate whose two gains leave its verdict open, whichever
way they had it, is run on the world's two further sandbox seeds (world.more_seeds), with the base run on those
seeds once per world. Each result is appended to ``<data>-seeds34.jsonl.gz`` as it ends (one gzip member: a base
``{"split", "seed", "val"}`` or a candidate ``{"split", "seed", "overrides", "gains"}``); a rerun skips what is
there. ``bench_world.py`` judges such a candidate on all four seeds.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import world  # noqa: E402

Key = tuple[str, int]


def more_seeds_path(data: Path) -> Path:
    return world.beside(data, "seeds34")


def read_more_seeds(path: Path) -> tuple[dict[Key, list[float]], dict[tuple[str, int, tuple[str, ...]], list[float]]]:
    """The kept base validations ((split, world seed) -> two values) and candidate gains ((split, world seed, sorted
    diff) -> two gains), NaN for a run that failed."""
    bases: dict[Key, list[float]] = {}
    gains: dict[tuple[str, int, tuple[str, ...]], list[float]] = {}
    for e in world.read(path):
        values = [math.nan if v is None else float(v) for v in e.get("val", e.get("gains", []))]
        if "overrides" in e:
            gains[(e["split"], int(e["seed"]), tuple(sorted(e["overrides"])))] = values
        else:
            bases[(e["split"], int(e["seed"]))] = values
    return bases, gains


def undecided_diffs(record: dict[str, Any], extra: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """The record's candidates (stored, or kept by --run-missing for this world) that two seeds leave open."""
    diffs = [tuple(sorted(c["overrides"])) for c in record.get("candidates", []) if world.undecided(c["gains"])]
    diffs += [tuple(sorted(e["overrides"])) for e in extra if world.undecided(e["gains"])]
    return list(dict.fromkeys(diffs))


def run_more(record: dict[str, Any], diff: tuple[str, ...], bases: dict[Key, list[float]], out: Path) -> list[float]:
    """Run ``diff`` on the world's two further seeds (and the base run there, once per world), keep both in ``out``
    and return the diff's two gains."""
    from generate import validation

    key = (record["split"], int(record["seed"]))
    seeds = world.more_seeds(key[1])
    if key not in bases:
        bases[key] = [validation(record["overrides"], s)[0] for s in seeds]
        world.append(out, {"split": key[0], "seed": key[1], "val": _safe(bases[key])})
    gains = [validation([*record["overrides"], *diff], s)[0] - b for s, b in zip(seeds, bases[key], strict=True)]
    world.append(out, {"split": key[0], "seed": key[1], "overrides": sorted(diff), "gains": _safe(gains)})
    return gains


def reseed(data: Path, shard: tuple[int, int] = (0, 1), out: Path | None = None) -> int:
    out = out or more_seeds_path(data)
    world.repair(out)
    bases, done = read_more_seeds(out)
    extras: dict[Key, list[dict[str, Any]]] = {}
    for e in world.read(world.beside(data, "extra")):
        extras.setdefault((e["split"], int(e["seed"])), []).append(e)
    ran = 0
    began = time.perf_counter()
    for record in world.read(data):
        key = (record["split"], int(record["seed"]))
        if "error" in record or key[1] % shard[1] != shard[0]:
            continue
        todo = [d for d in undecided_diffs(record, extras.get(key, [])) if (*key, d) not in done]
        for diff in todo:
            run_more(record, diff, bases, out)
            ran += 1
        if todo:
            print(f"[{time.perf_counter() - began:.0f} s] {key[0]} {key[1]}: {len(todo)} candidates on seeds "
                  f"{world.more_seeds(key[1])}", file=sys.stderr, flush=True)
    return ran


def _safe(values: list[float]) -> list[float | None]:
    return [round(v, 5) if math.isfinite(v) else None for v in values]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=world.DATA)
    parser.add_argument("--shard", default="0/1", help="I/N: the world seeds equal to I modulo N (default 0/1)")
    args = parser.parse_args(argv)
    i, n = (int(x) for x in args.shard.split("/"))
    if not args.data.is_file():
        print(f"reseed.py: {args.data}: no such dataset file", file=sys.stderr)
        return 2
    print(f"{reseed(args.data, (i, n))} candidates run on two more seeds", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
