"""Where the sandbox's learning-rate optimum sits, read off the world's train split (issue 35).

    python bench/world/lr_optimum.py [--data FILE]

For every train world run without an injected fault, each stored candidate that changes the actor's lr alone: the
mean validation gain of moving the run's lr down and of moving it up, by half-decade of the run's lr (log10 rounded
to 0.5). Where moving down gains and moving up loses, the optimum lies below that bin. verl's docs start the
lr around 1e-6 (docs/perf/best_practices.rst:214-215 @1dda039b); the sandbox maps a verl lr to an Adam step of
lr x sandbox.lr_scale (sweeps/sandbox/args.py: LR_SCALES), so the optimum this prints, against 1e-6, is the factor
by which that scale is off for runs of the world's length. Reads the train split only.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import world  # noqa: E402


def half_decade(value: float) -> float:
    return round(math.log10(value) * 2) / 2


def lr_moves(records: list[dict]) -> dict[tuple[float, str], list[float]]:
    """(run's lr bin, "down" or "up") -> each such move's mean gain over its seeds."""
    moves: dict[tuple[float, str], list[float]] = defaultdict(list)
    for r in records:
        if r["split"] != "train" or "error" in r or r["fault"] is not None:
            continue
        for c in r["candidates"]:
            gains = [g for g in c["gains"] if g is not None and math.isfinite(g)]
            if c["keys"] != [world.LR] or len(c["overrides"]) != 1 or not gains:
                continue
            new = float(c["overrides"][0].split("=", 1)[1])
            run = float(r["knobs"][world.LR])
            if new != run:
                moves[(half_decade(run), "down" if new < run else "up")].append(float(np.mean(gains)))
    return moves


def table(moves: dict[tuple[float, str], list[float]]) -> list[str]:
    lines = ["run's lr (log10)   moved down           moved up"]
    for b in sorted({b for b, _ in moves}):
        cells = [f"{np.mean(moves[(b, d)]):+.3f} (n={len(moves[(b, d)])})" if (b, d) in moves else "-"
                 for d in ("down", "up")]
        lines.append(f"{b:>16}   {cells[0]:<20} {cells[1]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=world.DATA)
    args = parser.parse_args(argv)
    moves = lr_moves(world.read(args.data))
    print(f"train runs without a fault in {args.data.name}: {sum(map(len, moves.values()))} lr-only candidates; "
          "mean validation gain of moving the lr, by half-decade")
    print("\n".join(table(moves)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
