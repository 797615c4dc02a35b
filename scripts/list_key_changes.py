"""List the config keys each verl release lost (in one version's defaults, unknown to the next) and how
``knowledge/deprecated_keys.yaml`` covers each in the newer version.

Reads the default trees in ``knowledge/verl_defaults/`` as ``advisor`` does; "lost" is defined in
``advisor.verl._deprecated.lost_keys``. Output, per trainer config and consecutive version pair:

    ppo_trainer 0.7.1 -> 0.8.0: 33 lost
      critic.model.fsdp_config.param_offload  -> critic.fsdp.param_offload  [PR #5870; ...]
      trainer.use_legacy_worker_impl          -> (removed: the legacy workers were removed; ...)  [PR #6067]

and a last line of totals. Exit status 1 when a lost key is neither covered by an entry nor listed
under ``not_renamed``.

Usage: python3 scripts/list_key_changes.py [--config ppo_trainer] [--uncovered]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.verl import BASE_CONFIGS, LostKey, lookup, lost_keys, not_renamed


def describe(lost: LostKey) -> tuple[str, str]:
    """(kind, text): kind is 'successor', 'removed', 'not renamed' or 'uncovered'."""
    found = lookup(lost.key, lost.newer, lost.config)
    if found is not None:
        sources = "; ".join(dict.fromkeys(h.entry.get("source", "") for h in found.hops))
        if found.replacement:
            return "successor", f"-> {found.replacement}  [{sources}]"
        return "removed", f"-> (removed: {found.hops[-1].entry.get('note') or 'no successor'})  [{sources}]"
    listed = not_renamed(lost.key, lost.older, lost.newer)
    if listed:
        return "not renamed", f"   (not renamed: {listed['reason']})"
    return "uncovered", "   UNCOVERED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--config", choices=BASE_CONFIGS, action="append", help="trainer config (default: both)")
    parser.add_argument("--uncovered", action="store_true", help="print only the keys the table misses")
    args = parser.parse_args(argv)
    totals = dict.fromkeys(("successor", "removed", "not renamed", "uncovered"), 0)
    for config in args.config or BASE_CONFIGS:
        for (older, newer), group in itertools.groupby(lost_keys(config), key=lambda k: (k.older, k.newer)):
            rows = [(lost, *describe(lost)) for lost in group]
            print(f"{config} {older} -> {newer}: {len(rows)} lost")
            width = max(len(lost.key) for lost, _, _ in rows)
            for lost, kind, text in rows:
                totals[kind] += 1
                if not args.uncovered or kind == "uncovered":
                    print(f"  {lost.key:<{width}}  {text}")
    print(", ".join(f"{n} {kind}" for kind, n in totals.items()))
    return 1 if totals["uncovered"] else 0


if __name__ == "__main__":
    sys.exit(main())
