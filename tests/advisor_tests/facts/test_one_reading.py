"""rollout.n and the micro-batch keys are read by key only inside advisor/facts: everyone else takes them from the
BatchPlan (``plan.n``, ``plan.micro``, the layers) or ``advisor.facts.rollout_n``, so one coercion decides what a
value means (issue #39: 17 reads in 5 files with 4 coercions before)."""

from __future__ import annotations

import re
from pathlib import Path

ADVISOR = Path(__file__).resolve().parents[3] / "advisor"

# a call that reads a config value by key: cfg.get(...), ctx.get(...), cfg.has(...), a local number(...) helper
_READ = re.compile(r"(?:\.get|\.has|\bnumber|\b_setting)\(\s*([^,)]*)")
# the first argument names rollout.n or a micro-batch key: a literal, an f-string, or a prefix + suffix
_KEY = re.compile(r"""rollout\.n["']|ROLLOUT\}\.n["']|\+\s*["']n["']|micro_batch_size|\b_N\b|\bN_KEY\b""")


def reads_by_key(text: str) -> list[str]:
    """The lines of ``text`` that read rollout.n or a micro-batch key by key."""
    return [line.strip() for line in text.splitlines()
            if any(_KEY.search(m.group(1)) for m in _READ.finditer(line))]


def test_the_pattern_finds_every_spelling_of_a_read() -> None:
    # the 4 spellings the reads had before BatchPlan took them over (checks, playbook, memory)
    reads = ['n = as_int(ctx.get(f"{ROLLOUT}.n"))', 'cfg.get(_R + "n"), 1)', 'batch, n = as_size(cfg.get(_N))',
             '"n": number("actor_rollout_ref.rollout.n")',
             'u = as_size(ctx.get(f"{ACTOR}.ppo_micro_batch_size_per_gpu"))',
             'a, b = ctx.get(legacy), ctx.get(f"{prefix}.ppo_micro_batch_size")',
             'cfg.get("critic.ppo_micro_batch_size")']
    assert reads_by_key("\n".join(reads)) == reads
    writes = ['yield Issue("...", (N_KEY,), [{N_KEY: v}])', 'change[micro.per_gpu_key] = 4',
              'return [{f"{ROLLOUT}.n": v} for v in values]', 'n = ctx.plan.n', 'g = setting.global_size']
    assert reads_by_key("\n".join(writes)) == []


def test_no_module_outside_facts_reads_n_or_a_micro_batch_key() -> None:
    found = {}
    for path in sorted(ADVISOR.rglob("*.py")):
        if path.parent.name == "facts":
            continue
        lines = reads_by_key(path.read_text(encoding="utf-8"))
        if lines:
            found[str(path.relative_to(ADVISOR))] = lines
    assert not found, found


def test_facts_itself_holds_the_reads() -> None:
    text = "".join(p.read_text(encoding="utf-8") for p in (ADVISOR / "facts").glob("*.py"))
    assert reads_by_key(text)  # the one reading lives there (else the pattern above went blind)
