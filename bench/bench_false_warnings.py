"""`advisor check` on every launch script of verl main's examples and of verl-recipe: how many it reads without a
false warning.

    python bench/bench_false_warnings.py [-v]

The scripts: tests/fixtures/verl_main/examples/**/*.sh (verl main @ 1dda039b) and tests/fixtures/verl_recipe/**/*.sh
(verl-recipe @ 48ea0a79); each folder's SOURCE.md says where they come from. A script `check` refuses as input
(exit 2: not RL training, no verl command) is not counted in M; it is listed with -v.

A finding (error or warning) is false when an oracle the advisor did not write refutes it:

- unknown key (L001, L007) on a key that is real: a key of some verl release's defaults (the key index of each
  version, read from the release wheels) or of a recipe or verl commit (knowledge/foreign_keys.yaml, read from
  verl-recipe's configs and scripts), when the finding calls it a typo ("did you mean") instead of naming where
  it exists;
- "did you mean" onto a key the script itself sets (a rename would set that key twice);
- L008 "depends on a shell variable the script does not define here" where the script assigns that variable at
  its top level (a line of its own, ``NAME=...`` or ``export NAME=...`` at column 0: bash sets it before the
  command runs).

Before it, one line counts verl main's GRPO/PPO/tuning scripts (grpo_trainer/, ppo_trainer/, tuning/*/) that get an
L008 (a key whose value the script leaves unknown), as read alone and with ``--set-var DEVICE=gpu`` (the variable
their headers say to export). Ends with exactly:

    verl examples and recipes read without a false warning: N/M
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
FIXTURES = REPO / "tests" / "fixtures"
CORPORA = (FIXTURES / "verl_main" / "examples", FIXTURES / "verl_recipe")


def _top_level_assigned(text: str, name: str) -> bool:
    return re.search(rf"^(?:export\s+)?{re.escape(name)}=", text, re.M) is not None


def false_findings(path: Path) -> list[str] | None:
    """Why each false finding of ``check`` on ``path`` is false (None: check refuses the file as input)."""
    from advisor import load_config
    from advisor.checks import check
    from advisor.errors import AdvisorError
    from advisor.verl import BASE_CONFIGS, foreign_key, key_index, version_names

    try:
        cfg = load_config(path)
    except AdvisorError:
        return None
    report = check(cfg)
    text = path.read_text(errors="replace")
    user = set(cfg.user_keys)
    out: list[str] = []
    for f in [*report.errors, *report.warnings]:
        key = f.keys[0] if f.keys else ""
        close = (f.details or {}).get("did_you_mean") or []
        if f.id in ("L001", "L007") and close:
            real = foreign_key(key) is not None or any(
                key_index(v, c).knows(key) for v in version_names() for c in BASE_CONFIGS if _has(v, c))
            if real:
                out.append(f"{f.id} calls the real key {key} a typo of {close[0]}")
            if close[0] in user:
                out.append(f"{f.id} maps {key} onto {close[0]}, which the script sets")
        if f.id == "L008" and "does not define here" in f.message and cfg.launch is not None:
            names = [n for n, keys in cfg.launch.unresolved.items() if key in keys and re.fullmatch(r"\w+", n)]
            defined = [n for n in names if _top_level_assigned(text, n)]
            if defined:
                out.append(f"L008 on {key}: ${defined[0]} is assigned at the script's top level")
    return out


def _has(version: str, config: str) -> bool:
    from advisor.errors import ConfigError
    from advisor.verl import key_index

    try:
        key_index(version, config)
    except (ConfigError, FileNotFoundError, KeyError):
        return False
    return True


def l008_count(variables: dict[str, str]) -> tuple[int, int]:
    """(scripts with an L008, scripts) among verl main's GRPO/PPO/tuning examples."""
    from advisor import load_config
    from advisor.errors import AdvisorError

    root = CORPORA[0]
    files = sorted([*root.glob("grpo_trainer/*.sh"), *root.glob("ppo_trainer/*.sh"), *root.glob("tuning/*/*.sh")])
    hit = 0
    for path in files:
        try:
            cfg = load_config(path, script_vars=variables)
        except AdvisorError:
            continue
        hit += any(f.id == "L008" for f in cfg.findings)
    return hit, len(files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per script with a false finding")
    args = parser.parse_args()
    scripts = sorted(p for root in CORPORA for p in root.rglob("*.sh"))
    read = clean = 0
    refused: list[Path] = []
    for path in scripts:
        found = false_findings(path)
        if found is None:
            refused.append(path)
            continue
        read += 1
        clean += not found
        if found and args.verbose:
            print(f"{path.relative_to(FIXTURES)}: " + "; ".join(found))
    if args.verbose:
        print(f"not read as verl RL launch scripts (exit 2): {len(refused)}: "
              + ", ".join(str(p.relative_to(FIXTURES)) for p in refused))
    alone, total = l008_count({})
    gpu, _ = l008_count({"DEVICE": "gpu"})
    print(f"verl main GRPO/PPO/tuning scripts with an L008: {alone}/{total} read alone, {gpu}/{total} with "
          "--set-var DEVICE=gpu")
    print(f"verl examples and recipes read without a false warning: {clean}/{read}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
