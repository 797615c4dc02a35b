"""Each rule's record on the world's train split (issue 35): the runs it decides and what its change does there.

    python bench/world/rule_record.py [--data FILE] [--since SEED]

For every train world run the advisor (this checkout's rules) proposes a change for, the rule that decided it, and
whether the change improves validation beyond noise (judged on four seeds where two left it open, as
bench_world.py judges), whether the top key is in the run's label, and whether the run was healthy (empty label:
the change cost a run for nothing). ``--since SEED`` splits the counts at that world seed: the worlds before it
are the ones the rules were fitted on, those from it on were drawn after (a rule that holds only on the first half
was fitted to its noise). Reads the train split only.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import bench_world  # noqa: E402
import world  # noqa: E402

COLUMNS = ("decides", "improves", "key right", "healthy changed")


def records_by_rule(records: list[dict], extra: bench_world.Extra, more: bench_world.MoreSeeds,
                    since: int | None) -> dict[tuple[str, str], Counter]:
    """(rule, part) -> counts of COLUMNS; part is "all", or "before"/"after" ``since``."""
    out: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in records:
        result = bench_world.advice_of(r)
        diff = list(result.overrides)
        if not diff:
            continue
        rule = result.decided_by.id if result.decided_by else "-"
        label = bench_world.label_of(r, extra, more)
        gains = bench_world.stored_gains(r, diff, extra, more)
        part = "all" if since is None else ("before" if int(r["seed"]) < since else "after")
        counts = out[(rule, part)]
        counts["decides"] += 1
        counts["improves"] += gains is not None and world.improves(gains)
        counts["key right"] += bool(result.changes) and result.changes[0].key in label
        counts["healthy changed"] += not label
    return out


def table(counts: dict[tuple[str, str], Counter]) -> list[str]:
    counts = defaultdict(Counter, counts)
    parts = sorted({p for _, p in counts}, key=["all", "before", "after"].index)
    rules = sorted({r for r, _ in counts}, key=lambda r: (-sum(counts[(r, p)]["decides"] for p in parts), r))
    head = "rule    " + " | ".join(f"{p}: " + ", ".join(COLUMNS) for p in parts)
    lines = [head]
    for rule in rules:
        cells = [" ".join(f"{counts[(rule, p)][c]:>3}" for c in COLUMNS) for p in parts]
        lines.append(f"{rule:<8}" + " | ".join(f"{p}: {cell}" for p, cell in zip(parts, cells, strict=True)))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=world.DATA)
    parser.add_argument("--since", type=int, default=None, help="split the counts at this world seed")
    args = parser.parse_args(argv)
    records = [r for r in world.read(args.data) if r["split"] == "train" and "error" not in r]
    extra = bench_world.read_extra(bench_world.extra_path(args.data))
    more = bench_world.MoreSeeds.of(args.data)
    print(f"train split of {args.data.name}: {len(records)} world runs; per deciding rule: "
          + ", ".join(COLUMNS))
    print("\n".join(table(records_by_rule(records, extra, more, args.since))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
