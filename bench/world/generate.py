"""Generate the intervention-labelled world (issue 35): seeded, resumable, one process.

    nohup nice -n 15 python bench/world/generate.py [--worlds 130] [--splits train test] [--out FILE] &

For each world index, in turn for each split: draw a base config and a fault (bench/world/world.py), run it on
the language-model sandbox on the world's two seeds, ask ``advisor suggest`` (its learning rules) about the first
seed's run, then run every candidate one-key change (each fix the advisor offers, its proposal as a whole, the
fault's key put back, two random one-key changes) on both seeds and record the validation gains. Each world run is
appended to the dataset (one gzip member, with its seed) as it ends; a rerun skips the world seeds already there,
so a stopped generator continues where it stopped.

``--fresh N --start S`` draws N worlds of a fresh test split (the test split's config region, world seeds from S
in [2e6, 1e9)) into ``--out``, by default ``data/fresh-<S>.jsonl.gz`` (the file bench/bench_world.py --fresh N
--start S reads), never the train/test dataset.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # bench/: the corpus bench's helpers

import world  # noqa: E402
from bench_suggest_corpus import advise, final_validation  # noqa: E402


@cache
def commit() -> str:
    """The checkout's commit when this process first asked the advisor: the rules it loaded then (the playbook is
    read once per process), so a commit made while the generator runs does not relabel its later records. A
    working tree with uncommitted changes under advisor/ or knowledge/ is marked ``+dirty``."""
    out = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(HERE.parents[1]), "status", "--porcelain", "--", "advisor", "knowledge"],
                           capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + ("+dirty" if dirty else "")


def advisor_candidates(result: Any) -> tuple[list[str], list[str]]:
    """The advisor's proposal (its whole diff) and every one-key fix any rule offers for the run, in its order:
    the proposal's changes, the ranked alternatives, then the other diagnoses' fixes."""
    ones: list[str] = []
    changes = [*result.changes, *(c for alt in result.alternatives for c in alt),
               *(c for d in result.diagnoses for _, cs in d.fixes for c in cs)]
    for change in changes:
        override = change.override()
        if override not in ones:
            ones.append(override)
    return list(result.overrides), ones[:world.MAX_ADVISOR_CANDIDATES]


def validation(overrides: list[str], seed: int) -> tuple[float, list[tuple[int, dict[str, Any]]], str]:
    from sweeps.sandbox import run

    try:
        records = run([*overrides, f"+sandbox.seed={seed}"])
    except Exception as exc:  # a change the sandbox or verl refuses is recorded, not labelled
        return math.nan, [], f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return final_validation(records), records, ""


def evaluate_world(split: str, seed: int, size: dict[str, Any] | None = None) -> dict[str, Any]:
    """One world run and its counterfactuals, as the record the dataset stores."""
    size = size or world.SIZE
    started = time.perf_counter()
    base, fault, rng = world.draw_world(split, seed)
    overrides = world.run_overrides(base, fault, size)
    seeds = world.sandbox_seeds(seed)
    record: dict[str, Any] = {"version": world.VERSION, "split": split, "seed": seed, "sandbox_seeds": list(seeds),
                              "size": size, "mode": base["mode"], "kl": base["kl"], "knobs": base["knobs"],
                              "fault": fault, "overrides": overrides}
    runs = [validation(overrides, s) for s in seeds]
    record["val"] = [v for v, _, _ in runs]
    record["metrics"] = [world.compact_metrics(r) for _, r, _ in runs]
    errors = [e for _, _, e in runs if e]
    if errors:
        record["error"] = errors[0]
        record["seconds"] = round(time.perf_counter() - started, 1)
        return record
    commit()  # fixed before the first advice loads the playbook
    result = advise([*overrides, f"+sandbox.seed={seeds[0]}"], runs[0][1])
    proposal, ones = advisor_candidates(result)
    record["advisor"] = {"commit": commit(), "proposal": proposal, "one_key_fixes": ones,
                         "decided_by": result.decided_by.id if result.decided_by else None,
                         "diagnoses": [d.id for d in result.diagnoses]}
    sources: dict[tuple[str, ...], list[str]] = {}
    if proposal:
        sources.setdefault(tuple(sorted(proposal)), []).append("proposal")
    for o in ones:
        sources.setdefault((o,), []).append("advisor")
    if fault:
        sources.setdefault((world.render(fault["key"], fault["base_value"]),), []).append("fault")
    for o in world.random_changes(rng, base, "train" if split == "train" else "test", fault):
        sources.setdefault((o,), []).append("random")
    candidates = []
    for change, tags in sources.items():
        vals, errs = [], []
        for s in seeds:
            v, _, e = validation([*overrides, *change], s)
            vals.append(v)
            errs.append(e)
        gains = [round(v - b, 5) if math.isfinite(v) else math.nan for v, b in zip(vals, record["val"], strict=True)]
        candidate = {"overrides": list(change), "keys": sorted({world.key_of(o) for o in change}), "sources": tags,
                     "val": vals, "gains": gains, "improves": world.improves(gains)}
        if any(errs):
            candidate["error"] = next(e for e in errs if e)
        candidates.append(candidate)
    record["candidates"] = candidates
    record["label"] = world.label(candidates)
    record["seconds"] = round(time.perf_counter() - started, 1)
    return record


def json_safe(value: Any) -> Any:
    """NaN as null (the file is JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def generate(out: Path, splits: list[str], worlds: int, start: int | None = None,
             size: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    done = {(r["split"], r["seed"]) for r in world.repair(out)}
    meta = out.with_name(out.name.replace(".jsonl.gz", ".meta.json"))
    meta.write_text(json.dumps(world.meta(size), indent=1) + "\n")
    began = time.perf_counter()
    for index in range(worlds):
        for split in splits:
            seed = world.world_seed(split, index, start)
            if (split, seed) in done:
                continue
            record = json_safe(evaluate_world(split, seed, size))
            world.append(out, record)
            fault = record["fault"]["name"] if record["fault"] else "none"
            print(f"[{time.perf_counter() - began:.0f} s] {split} {seed} {record['mode']}/{record['kl']} "
                  f"{fault}: val {record['val']} label {record.get('label')} "
                  f"advisor {record.get('advisor', {}).get('proposal')} {record.get('error', '')} "
                  f"({record['seconds']} s)", file=sys.stderr, flush=True)
    return world.read(out)


def fresh_path(start: int, folder: Path = world.DATA.parent) -> Path:
    """Where a fresh test split from world seed ``start`` is kept (bench/bench_world.py --fresh reads it)."""
    return folder / f"fresh-{start}.jsonl.gz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=130, help="world runs per split (default 130)")
    parser.add_argument("--splits", nargs="+", choices=["train", "test"], default=["train", "test"])
    parser.add_argument("--out", type=Path, default=None,
                        help=f"default {world.DATA.name}; with --fresh, fresh-<start>.jsonl.gz beside it")
    parser.add_argument("--fresh", type=int, default=0, help="draw this many worlds of a fresh test split instead")
    parser.add_argument("--start", type=int, default=world.SEED_RANGES["fresh"][0],
                        help="the fresh split's first world seed")
    parser.add_argument("--lr-scale", type=float, default=None,
                        help="a pilot at this sandbox.lr_scale (needs --out: never mixed into a dataset)")
    args = parser.parse_args(argv)
    size = None if args.lr_scale is None else {**world.SIZE, "lr_scale": args.lr_scale}
    if size is not None and (args.out is None or args.out.resolve() == world.DATA.resolve()):
        print(f"generate.py: --lr-scale writes a pilot: name its own file with --out (not {world.DATA.name})",
              file=sys.stderr)
        return 2
    if args.fresh:
        out = args.out or fresh_path(args.start)
        if out.resolve() == world.DATA.resolve():  # a fresh split is held out: never mixed into the dataset
            print(f"generate.py: --fresh writes a fresh split, not into {world.DATA.name}", file=sys.stderr)
            return 2
        generate(out, ["fresh"], args.fresh, args.start, size)
    else:
        generate(args.out or world.DATA, args.splits, args.worlds, size=size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
