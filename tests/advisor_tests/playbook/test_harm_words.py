"""A warning's "harm held" line is words a user reads, not a condition's fields (issue 35 item 5: each warning says
which harm held). Every harm group of every rule renders without a parameter's name or a default it did not set."""

from __future__ import annotations

import pytest

from advisor.playbook._conditions import given_args
from advisor.playbook._rule_loader import load_playbook
from advisor.playbook._words import group_words as _group_words

GROUPS = [(rule.id, group) for rule in load_playbook() if rule.harm for group in rule.harm.any_of]


@pytest.mark.parametrize(("rule_id", "group"), GROUPS, ids=[f"{r}-{i}" for i, (r, _) in enumerate(GROUPS)])
def test_harm_words_name_no_parameter(rule_id: str, group) -> None:
    words = _group_words(group)
    for cond in group:
        assert cond.metric is None or cond.metric in words or cond.test in ("padding_waste_above", "kv_bound_above")
        for name, value in given_args(cond.params).items():  # the fallback's "(name value, ...)" dump
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            assert f"{name} {shown}" not in words and f"{name}={shown}" not in words, (rule_id, words)


def test_the_update_bound_harm_reads_as_its_rule_states_it() -> None:
    # TP002's third group (knowledge/rules/throughput/TP002-update-bound.yaml): response_length/mean, vs_metric,
    # other response_length/max, op lt, scale 0.5 -- "the mean response under half the longest"
    tp002 = next(rule for rule in load_playbook() if rule.id == "TP002")
    words = [_group_words(group) for group in tp002.harm.any_of]
    assert "response_length/mean below 0.5 x response_length/max" in words
