"""The train split's measurements the playbook's world-fitted thresholds rest on (issue 35): read only the train split.

    python bench/world/train_fits.py [KEY ...] [--data FILE] [--with KEY ...] [--extra]

For each key (default: the keys the fitted rules change), one line per stored one-key counterfactual of the train
split that changes it: the world seed, mode, the run's value -> the candidate's value, the paired validation gains
on the world's two seeds, ``+`` when the change improves validation beyond noise (world.improves), where the
candidate came from (the advisor's proposal or fixes, the fault put back, a random change) and the run's fault.
Sorted by the run's value, so a threshold reads off as the value where ``+`` starts or stops. ``--with`` adds the
run's value of other keys to each row (a rule that also reads ``rollout.n``); ``--extra`` adds the diffs
``bench_world.py --run-missing`` ran later (world-v1-extra.jsonl.gz, its train records only), marked ``extra``. A
change two seeds left open shows its gains on the two further seeds reseed.py ran too, and is judged on the four
(``--two-seeds``: on two, as before). The test split is never read: fitting looks at train only.
bench/world/FITS.md keeps the output the rules cite.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import world
from reseed import more_seeds_path, read_more_seeds

KEYS = (world.LR, f"{world.A}entropy_coeff", f"{world.A}use_kl_loss", "algorithm.kl_ctrl.kl_coef",
        f"{world.A}ppo_epochs", f"{world.R}top_p", "data.max_response_length")


def current(record: dict[str, Any], key: str) -> Any:
    """The run's value of ``key``: the base config with its fault applied."""
    knobs = dict(record["knobs"])
    if record["fault"]:
        knobs[record["fault"]["key"]] = record["fault"]["value"]
    return knobs.get(key, world.UNSET_DEFAULTS.get(key))


def extra_candidates(path: Path) -> dict[int, list[dict[str, Any]]]:
    """The train split's one-key diffs that bench_world.py --run-missing ran, as candidates of their world seed."""
    out: dict[int, list[dict[str, Any]]] = {}
    if not path.is_file():
        return out
    for e in world.read(path):
        if e.get("split") == "train" and len(e["overrides"]) == 1:
            out.setdefault(int(e["seed"]), []).append({"keys": [world.key_of(e["overrides"][0])],
                                                       "overrides": e["overrides"], "gains": e["gains"],
                                                       "sources": ["extra"]})
    return out


def rows(records: list[dict[str, Any]], key: str, show: tuple[str, ...] = (),
         extra: dict[int, list[dict[str, Any]]] | None = None,
         more: dict[tuple[str, int, tuple[str, ...]], list[float]] | None = None) -> list[tuple[Any, str]]:
    out = []
    for r in records:
        if r["split"] != "train" or "error" in r:
            continue
        now = current(r, key)
        stored = r.get("candidates", [])
        ran = [c for c in (extra or {}).get(int(r["seed"]), [])
               if not any(sorted(s["overrides"]) == c["overrides"] for s in stored)]
        for c in [*stored, *ran]:
            if c["keys"] != [key]:
                continue
            new = c["overrides"][0].split("=", 1)[1]
            fault = r["fault"]["name"] if r["fault"] else "-"
            values = [*c["gains"], *(more or {}).get(("train", int(r["seed"]), tuple(sorted(c["overrides"]))), [])]
            gains = ", ".join("nan" if g is None or not math.isfinite(g) else f"{g:+.3f}" for g in values)
            better = world.improves([math.nan if g is None else g for g in values])
            also = "".join(f" {k.rsplit('.', 1)[-1]}={current(r, k)}" for k in show)
            out.append((now, f"{r['seed']:>4} {r['mode']:<20} {now!s:>10} -> {new:<10} {'+' if better else ' '} "
                             f"[{gains}] {'/'.join(c['sources'])} fault={fault}{also}"))
    return sorted(out, key=lambda t: (float(t[0]) if isinstance(t[0], (int, float)) else 0.0, t[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("keys", nargs="*", default=list(KEYS))
    parser.add_argument("--data", type=Path, default=world.DATA)
    parser.add_argument("--with", dest="show", nargs="+", default=[], help="the run's value of these keys too")
    parser.add_argument("--extra", action="store_true", help="add the train diffs bench_world.py --run-missing ran")
    parser.add_argument("--two-seeds", action="store_true", help="judge every change on two seeds, as before")
    args = parser.parse_args(argv)
    records = [r for r in world.read(args.data) if r["split"] == "train"]
    extra = extra_candidates(world.beside(args.data, "extra")) if args.extra else None
    more = None if args.two_seeds else read_more_seeds(more_seeds_path(args.data))[1]
    print(f"train split of {args.data.name}: {len(records)} world runs")
    for key in args.keys:
        print(f"\n{key}: run's value -> candidate, + improves beyond noise, [gains on seeds 1, 2 (3, 4)]")
        print("\n".join(line for _, line in rows(records, key, tuple(args.show), extra, more)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
