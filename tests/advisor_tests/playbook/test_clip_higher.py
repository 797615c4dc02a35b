"""The clip_higher fact (DAPO's decoupled clip), which a fix's when_facts reads (KL007: tests/advisor_tests/playbook/
test_suggest.py; a misspelt fact: tests/rules_tests/test_rule_schema.py).

verl clips the ratio to [1 - clip_ratio_low, 1 + clip_ratio_high], each falling back to clip_ratio when unset
(verl/trainer/ppo/core_algos.py:1321-1322 @1dda039b); verl before 0.4 has neither key. DAPO's recipe sets 0.2 and 0.28
(docs/perf/best_practices.rst:200-201 @1dda039b).
"""

from __future__ import annotations

import pytest

from advisor import load_config
from advisor.playbook._signals import clip_higher

A = "actor_rollout_ref.actor."


@pytest.mark.parametrize(("overrides", "version", "expected"), [
    ([], None, False),  # verl's 0.2 / 0.2 / 0.2
    ([f"{A}clip_ratio_high=0.28"], None, True),  # DAPO's recipe
    ([f"{A}clip_ratio=0.28"], None, False),  # a wider symmetric clip: both bounds are set to 0.2 by default
    ([f"{A}clip_ratio_low=0.3", f"{A}clip_ratio_high=0.28"], None, False),  # upper bound below the lower one
    ([f"{A}clip_ratio=0.3"], "0.3.0.post1", False),  # no low/high keys: both bounds are clip_ratio
])
def test_clip_higher_reads_the_bounds_as_verl_does(overrides: list[str], version: str | None, expected: bool) -> None:
    cfg = load_config(None, ["algorithm.adv_estimator=grpo", *overrides], verl_version=version)
    assert clip_higher(cfg) is expected
