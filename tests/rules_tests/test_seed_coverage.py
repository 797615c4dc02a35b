"""Every row of the seeds' fix tables is covered (knowledge/rules/seed_coverage.yaml), and the map is true:
each covering rule exists and applies to the row's tree, each adopted key is one its rules (or advisor check's
memory knobs) really propose, and each key left out says why.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from advisor.playbook._rule_loader import load_playbook
from advisor.verl._defaults import known_in_versions

REPO = Path(__file__).resolve().parents[2]
COVERAGE = yaml.safe_load((REPO / "knowledge" / "rules" / "seed_coverage.yaml").read_text())["rows"]
SEED_000 = (REPO.parent / "shared" / "seeds" / "000_6854433b7dde6892.txt")
RULES = {r.id: r for r in load_playbook()}
# advisor check's memory fix (M001) proposes the knobs named in knowledge/memory_knobs.yaml
KNOBS_SOURCE = (REPO / "knowledge" / "memory_knobs.yaml").read_text()


def _fix_keys(rule_id: str) -> set[str]:
    return {key for fix in RULES[rule_id].fixes for key in fix.set}


@pytest.mark.parametrize("row", COVERAGE, ids=[r["id"] for r in COVERAGE])
def test_row_is_covered_by_real_rules_and_keys(row: dict) -> None:
    covered_by = row["covered_by"]
    assert covered_by, "a row needs at least one covering rule"
    for rule_id in covered_by:
        assert rule_id == "M001" or rule_id in RULES, f"{rule_id} is not a rule"
    for key in row.get("keys", []):
        by_rules = any(key in _fix_keys(r) for r in covered_by if r != "M001")
        by_memory = "M001" in covered_by and key.rsplit(".", 1)[-1] in KNOBS_SOURCE
        assert by_rules or by_memory, f"no rule of {covered_by} proposes {key}"
    assert row.get("keys") or row.get("outside_config"), "say what covers the remedy: keys or outside_config"
    for key, why in (row.get("not_adopted") or {}).items():
        assert why.strip(), f"{key}: say why it is not adopted"
        assert key not in {k for r in covered_by if r != "M001" for k in _fix_keys(r)}, \
            f"{key} is listed as not adopted but {covered_by} propose it"


def test_every_key_named_is_a_verl_key() -> None:
    # the seeds name keys of the verl they were written for (critic.model.fsdp_config.* became critic.fsdp.*)
    dapo = {"reward_model.overlong_buffer.enable", "algorithm.filter_groups.enable"}  # the DAPO recipe's keys
    for row in COVERAGE:
        for key in [*row.get("keys", []), *(row.get("not_adopted") or {})]:
            assert key in dapo or known_in_versions(key, "ppo_trainer"), f"{row['id']}: {key} is not in verl's config"


def test_every_fix_table_of_seed_000_has_rows() -> None:
    if not SEED_000.exists():
        pytest.skip("the seeds are not beside this checkout")
    text = SEED_000.read_text()
    tables = text.count("常见修法")  # each tree's "common fixes" table
    trees = {r["id"].split("-")[1] for r in COVERAGE if r["id"].startswith("s000-")}
    # reward, kl, adv, clip, entropy, len/prompt, oom/gen/update/ref (throughput and memory share one table)
    assert tables == 7
    assert {"reward", "kl", "adv", "clip", "entropy", "len", "oom"} <= trees
