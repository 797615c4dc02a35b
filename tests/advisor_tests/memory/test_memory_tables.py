"""The memory model's tables: the fix knobs (knowledge/memory_knobs.yaml) and the inference engines."""

from __future__ import annotations

import pytest

from advisor.datafiles import load_knowledge
from advisor.memory._engines import ENGINES, engine_for, pool_is_tunable
from advisor.memory._knobs import _KINDS, _problem, knob_rules


def test_every_knob_row_loads_and_has_a_cost():
    rules = knob_rules()
    costs = load_knowledge("memory.yaml")["fix_costs"]
    assert len(rules) == len(load_knowledge("memory_knobs.yaml")["knobs"])
    assert {r.knob for r in rules} <= set(costs) - {"source"}
    # every cost has a knob that can turn it
    assert set(costs) - {"source"} == {r.knob for r in rules}


@pytest.mark.parametrize(("row", "problem"), [
    ({"knob": "micro_batch", "kind": "micro_batch", "key": "k", "reason": "r", "facter": 2}, "unknown field(s) facter"),
    ({"knob": "micro_batch", "kind": "halving", "key": "k", "reason": "r"}, "unknown kind 'halving'"),
    ({"knob": "micro_batch", "kind": "switch", "reason": "r"}, "missing 'key'"),
    ({"knob": "x", "kind": "switch", "key": "k", "reason": "r", "set": {"grad_checkpoint": True}},
     "unknown workload field(s) grad_checkpoint"),
])
def test_a_malformed_knob_row_is_named(row, problem):
    assert _problem(row, _KINDS).startswith(problem)


def test_every_rollout_name_verl_accepts_has_an_engine_row():
    enums = load_knowledge("verl_enums.yaml")["versions"]
    names = {v for e in enums.values() if "rollout_name" in e for v in e["rollout_name"]["values"]}
    assert names <= set(ENGINES), names - set(ENGINES)
    assert all(pool_is_tunable(n) for n in names - {"hf"})


def test_an_unknown_engine_is_sized_like_a_total_share_pool_without_vllm_extras():
    row = engine_for("my_recipe_engine")
    assert row.pool == "total_share" and not row.startup_free_check and not row.cuda_graphs
    assert not pool_is_tunable("my_recipe_engine") and not pool_is_tunable("hf")
