"""The train split's measurements the playbook's world-fitted thresholds rest on (issue 35): read only the train split.

    python bench/world/train_fits.py [KEY ...] [--data FILE]

For each key (default: the keys the fitted rules change), one line per stored one-key counterfactual of the train
split that changes it: the world seed, mode, the run's value -> the candidate's value, the paired validation gains
on the world's two seeds, ``+`` when the change improves validation beyond noise (world.improves), where the
candidate came from (the advisor's proposal or fixes, the fault put back, a random change) and the run's fault.
Sorted by the run's value, so a threshold reads off as the value where ``+`` starts or stops. The test split is never
read: fitting looks at train only. bench/world/FITS.md keeps the output the rules cite.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import world

KEYS = (world.LR, f"{world.A}entropy_coeff", f"{world.A}use_kl_loss", "algorithm.kl_ctrl.kl_coef",
        f"{world.A}ppo_epochs", f"{world.R}top_p", "data.max_response_length")


def current(record: dict[str, Any], key: str) -> Any:
    """The run's value of ``key``: the base config with its fault applied."""
    knobs = dict(record["knobs"])
    if record["fault"]:
        knobs[record["fault"]["key"]] = record["fault"]["value"]
    return knobs.get(key, world.UNSET_DEFAULTS.get(key))


def rows(records: list[dict[str, Any]], key: str) -> list[tuple[Any, str]]:
    out = []
    for r in records:
        if r["split"] != "train" or "error" in r:
            continue
        now = current(r, key)
        for c in r.get("candidates", []):
            if c["keys"] != [key]:
                continue
            new = c["overrides"][0].split("=", 1)[1]
            fault = r["fault"]["name"] if r["fault"] else "-"
            gains = ", ".join("nan" if g is None else f"{g:+.3f}" for g in c["gains"])
            better = world.improves([math.nan if g is None else g for g in c["gains"]])
            out.append((now, f"{r['seed']:>4} {r['mode']:<20} {now!s:>10} -> {new:<10} {'+' if better else ' '} "
                             f"[{gains}] {'/'.join(c['sources'])} fault={fault}"))
    return sorted(out, key=lambda t: (float(t[0]) if isinstance(t[0], (int, float)) else 0.0, t[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("keys", nargs="*", default=list(KEYS))
    parser.add_argument("--data", type=Path, default=world.DATA)
    args = parser.parse_args(argv)
    records = [r for r in world.read(args.data) if r["split"] == "train"]
    print(f"train split of {args.data.name}: {len(records)} world runs")
    for key in args.keys:
        print(f"\n{key}: run's value -> candidate, + improves beyond noise, [gain seed 1, gain seed 2]")
        print("\n".join(line for _, line in rows(records, key)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
