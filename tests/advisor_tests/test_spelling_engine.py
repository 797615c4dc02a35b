"""One "did you mean" engine: advisor.spelling, at every site that suggests a spelling (difflib's ratio is gone)."""

from __future__ import annotations

import re
from pathlib import Path

from advisor.spelling import closest, likely_typo

ROOT = Path(__file__).resolve().parents[2]


def test_no_site_ranks_spellings_with_difflib() -> None:
    sites = [p for p in (*ROOT.joinpath("advisor").rglob("*.py"), ROOT / "sweeps" / "runner.py")
             if re.search(r"get_close_matches|SequenceMatcher", p.read_text(encoding="utf-8"))]
    assert not sites, sites


def test_equally_near_choices_prefer_the_one_that_starts_alike() -> None:
    assert closest("neq", ["eq", "ne", "gt"], limit=1) == ["ne"]  # both one edit away; "not equal" was meant


def test_a_product_name_with_an_extra_suffix_finds_its_catalog_name() -> None:
    assert closest("H100-80G-SXM9", ["A100-80GB", "H100-80GB"], extra_suffix=True)[0] == "H100-80GB"
    assert closest("H100-80G-SXM9", ["H100-80GB", "A100-80GB"]) == []  # 5 edits: past the cut-off for a key


def test_a_likely_typo_is_one_edit_in_ten_characters() -> None:
    assert likely_typo("actor_rollout_ref.actor.kl_los_coef", "actor_rollout_ref.actor.kl_loss_coef")
    assert not likely_typo("actor.lr", "critic.lr")  # close, but another key, not a slip
