"""The memory model's tables: the fix knobs (knowledge/memory_knobs.yaml) and the inference engines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import advisor.memory
from advisor.datafiles import load_knowledge
from advisor.memory._engines import ENGINES, engine_for, pool_is_tunable
from advisor.memory._knobs import _KINDS, _problem, knob_rules
from advisor.memory._workload import FIELD_PATHS


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
    ({"knob": "x", "kind": "switch", "key": "k", "reason": "r", "set": {"topology.dp": 2}},
     "cannot edit derived workload value(s) topology.dp"),
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


def _imports(module: str) -> set[str]:
    """The sibling modules a memory module imports (``from ._x import`` / ``from . import _x``), type-only too."""
    tree = ast.parse((Path(advisor.memory.__file__).parent / f"{module}.py").read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out |= {node.module} if node.module else {a.name for a in node.names}
    return out


def test_the_engine_table_and_the_workload_do_not_import_each_other() -> None:
    """The engine table is data the workload reader asks; the pool arithmetic that needs a workload is _pool's."""
    assert "_workload" not in _imports("_engines")
    assert "_engines" not in _imports("_workload")


def test_every_knob_names_workload_fields_by_their_path() -> None:
    """memory_knobs.yaml's paths read the role records (a typo is refused when the table loads: _problem)."""
    paths = {p for r in knob_rules() for p in (*r.when, *r.set, *r.current, r.field, r.divides, r.dp) if p}
    assert paths <= FIELD_PATHS
    assert {"actor.micro_per_gpu", "rollout.gmu", "topology.dp", "critic_mini_per_dp"} <= paths
