"""How many of verl main's RL example scripts ``advisor check --gpu`` gives a GPU memory section (issue #26).

Reads every launch script under tests/fixtures/verl_main/examples (verl main @ 1dda039b, August 2026; see its
SOURCE.md) but sft/, as ``advisor check SCRIPT --gpu GPU`` does, with --gpu H100-80GB, or the script's own GPU
where its name says one (``_npu``/ascend_extras: Ascend-910B, ``96gb``/``_h20_``: H20, ``_h800_``: H800; the
rule tests/advisor_tests/memory/memory_validation.py:example_gpu holds). A script the advisor reads as no RL
launch (a generation run, a stub that only prints where the launcher moved) is counted apart, not in the
denominator. Prints one line per script without a memory section (why), each generate phase that is tight or
out of memory, and the measurement line:

    memory section for 88 of 92 verl main RL example scripts (95.7%) with --gpu H100-80GB (their own GPU where named)

    python bench/bench_memory_coverage.py            # from the repository root
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "advisor_tests" / "memory"))

from memory_validation import example_gpu  # noqa: E402

ROOT = REPO / "tests" / "fixtures" / "verl_main" / "examples"


def _gpu(relative: str) -> str:
    gpu = example_gpu(relative)
    return "H100-80GB" if gpu == "H100" else gpu


def main() -> int:
    from advisor import AdvisorError, load_config
    from advisor.checks import check
    from advisor.codes import MEMORY_NOT_ESTIMATED

    start = time.perf_counter()
    with_memory, without, not_rl, generate_risky = 0, [], [], []
    scripts = [p for p in sorted(ROOT.rglob("*.sh")) if not p.relative_to(ROOT).as_posix().startswith("sft/")]
    for path in scripts:
        rel = path.relative_to(ROOT).as_posix()
        try:
            report = check(load_config(path), gpu=_gpu(rel))
        except AdvisorError as err:
            not_rl.append((rel, str(err).splitlines()[0][:110]))
            continue
        if report.memory is None:
            why = next((f.message for f in report.findings if f.id == MEMORY_NOT_ESTIMATED.id), "no memory section")
            without.append((rel, why[:150]))
            continue
        with_memory += 1
        gen = report.memory.stage("generate")
        if gen.risk in ("tight", "oom"):
            generate_risky.append((rel, gen.risk))
    total = with_memory + len(without)
    for rel, why in without:
        print(f"  no memory section: {rel}: {why}")
    for rel, why in not_rl:
        print(f"  not an RL launch (not counted): {rel}: {why}")
    for rel, risk in generate_risky:
        print(f"  generate {risk}: {rel}")
    print(f"({len(scripts)} scripts outside sft/ read in {time.perf_counter() - start:.1f} s)")
    share = 100 * with_memory / total
    print(f"memory section for {with_memory} of {total} verl main RL example scripts ({share:.1f}%) "
          "with --gpu H100-80GB (their own GPU where named)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
