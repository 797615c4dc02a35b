"""`advisor check` against verl's own config validation, per installed release (issue 36, item 1).

For each release installed by ``scripts/install_verl_oracle.sh`` (default .oracle/verl-<version>, or
$VERL_ORACLE_DIR), draws ``--configs`` configs with the seeded generator of ``bench/verl_oracle/harness.py``,
runs verl's validation on each (in the release's own environment) and ``advisor check``'s checks at that
version, and prints, exactly:

    verl agreement <version>: N/M configs (rejects verl accepts: a, misses verl rejects: b)

then, per release, each kind of disagreement once with its count and an example (``--quiet`` leaves them out).
A release that is not installed prints one line saying so. verl's verdicts are cached beside the release.

    python bench/bench_verl_oracle.py [--configs 2000] [--seed 36] [--versions 0.4.1 0.7.1 0.9.1]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verl_oracle.harness import VERSIONS, compare, draws, installed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--versions", nargs="+", default=list(VERSIONS))
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    details = []
    for version in args.versions:
        if installed(version) is None:
            print(f"verl agreement {version}: not installed (scripts/install_verl_oracle.sh)")
            continue
        result = compare(version, draws(args.seed, args.configs, version))
        print(result.line(), flush=True)
        kinds: collections.Counter[tuple[str, str, str]] = collections.Counter()
        example = {}
        for row in result.disagreements():
            verl_said = row.verl.get("error", "accepts").splitlines()[-1][:160] if not row.verl["ok"] else "accepts"
            ids = ",".join(sorted({e[0] for e in row.advisor.errors})) or "no error"
            kind = (row.outcome, row.verl.get("where", ""), ids)
            kinds[kind] += 1
            example.setdefault(kind, (verl_said, row.config))
        later = collections.Counter(i for r in result.rows for i in r.advisor.later)
        raised = collections.Counter(r.verl.get("where", "?") for r in result.rows if not r.verl["ok"])
        details.append((version, kinds, example, later, raised))
    if not args.quiet:
        for version, kinds, example, later, raised in details:
            print(f"\n{version}: verl rejected {sum(raised.values())}, raised at: "
                  + ", ".join(f"{where} {n}" for where, n in raised.most_common()))
            print(f"{version}: advisor errors whose rule verl runs after this validation (not compared): "
                  + (", ".join(f"{i} {n}" for i, n in sorted(later.items())) or "none"))
            for (outcome, where, ids), n in kinds.most_common():
                said, config = example[(outcome, where, ids)]
                print(f"  {n} × {outcome}: verl {where or ''} {said!r}; advisor: {ids}\n      e.g. "
                      + " ".join(f"{k}={v}" for k, v in config))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
