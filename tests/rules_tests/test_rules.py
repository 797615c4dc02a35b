"""Every playbook rule: schema, fixtures that fire and stay quiet, known keys, known metrics."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from advisor.datafiles import knowledge_dir
from advisor.errors import PlaybookError
from advisor.playbook._diagnose import concrete_changes, diagnose
from advisor.playbook._rule_loader import PERFORMANCE_KEY, PERFORMANCE_TREES, load_playbook, parse_rule
from advisor.playbook._signals import Signals, run_facts
from advisor.verl._defaults import key_index

from ._runs import build_run, load_fixture

RULES = load_playbook()
IDS = [r.id for r in RULES]


def diagnosed(rule, case):
    cfg, frame = build_run(case)
    signals = Signals(frame, case.get("window"), gpu_memory_gib=case.get("gpu_memory_gib"))
    return diagnose(rule, cfg, run_facts(cfg), signals)


def fires(rule, case) -> bool:
    """Diagnosed at the rule's own severity: its conditions and its harm hold."""
    d = diagnosed(rule, case)
    return d is not None and d.harmful


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_has_fixtures_that_fire_and_stay_quiet(rule) -> None:
    fixture = load_fixture(rule.id)
    assert fixture.get("fires"), f"{rule.id}: no 'fires' fixture"
    assert fixture.get("quiet"), f"{rule.id}: no 'quiet' fixture"
    for case in fixture["fires"]:
        assert fires(rule, case), f"{rule.id} should fire: {case['name']}"
    for case in fixture["quiet"]:
        assert not fires(rule, case), f"{rule.id} should stay quiet: {case['name']}"
    for case in fixture.get("trend", []):  # the conditions hold, the harm does not: info, no diff
        d = diagnosed(rule, case)
        assert d is not None and not d.harmful and d.severity == "info", f"{rule.id} trend only: {case['name']}"


@pytest.mark.parametrize("rule", [r for r in RULES if r.fixes and r.severity != "info"], ids=lambda r: r.id)
def test_a_rule_that_proposes_a_change_states_its_harm(rule) -> None:
    assert rule.harm is not None and rule.harm.text


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_keys_exist_in_verl_defaults(rule) -> None:
    index = key_index("0.10.0.dev", "ppo_trainer")
    keys = [c.key for c in rule.config] + [k for f in rule.fixes for k in f.set] + \
           [c.key for f in rule.fixes for c in f.when_config]
    for key in keys:
        assert index.knows(key), f"{rule.id}: '{key}' is not a verl config key"


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_metrics_are_ones_verl_emits(rule) -> None:
    catalog_path = knowledge_dir() / "metrics.yaml"
    if not catalog_path.exists():
        pytest.skip("knowledge/metrics.yaml not present")
    catalog = yaml.safe_load(catalog_path.read_text())
    names = set(catalog["metrics"])
    patterns = [re.compile("^" + re.escape(p).replace(r"\*", ".*") + "$") for p in catalog.get("patterns", {})]
    for metric in rule.metrics:
        concrete = metric.replace("*", "x")
        assert metric in names or any(p.match(concrete) for p in patterns), f"{rule.id}: unknown metric {metric}"


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_convergence_rules_never_change_memory_knobs(rule) -> None:
    if rule.tree in PERFORMANCE_TREES:
        return
    for fix in rule.fixes:
        assert not any(PERFORMANCE_KEY.search(k) for k in fix.set), (rule.id, fix.set)


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_fixes_apply_to_the_firing_config(rule) -> None:
    for case in load_fixture(rule.id).get("fires", []):
        cfg, _ = build_run(case)
        for fix in rule.fixes:
            changes = concrete_changes(fix, cfg)
            for change in changes or ():
                assert change.new != change.old


def _write_rule(tmp_path: Path, tree: str, text: str) -> Path:
    path = tmp_path / tree / "XX001-test.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


BASE_RULE = {"id": "XX001", "name": "test", "tree": "kl", "severity": "warning", "summary": "s",
             "conditions": [{"metric": "actor/ppo_kl", "test": "above", "value": 0.1}], "message": "m",
             "rationale": "r", "sources": ["s"]}


@pytest.mark.parametrize("patch, message", [
    ({"conditions": [{"metric": "actor/ppo_kl", "test": "bigger", "value": 1}]}, "unknown test 'bigger'"),
    ({"fixes": [{"set": {"a.b": 1, "c.d": 2, "e.f": 3}}]}, "at most 2"),
    ({"fixes": [{"set": {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 2}}]}, "memory/speed knob"),
    ({"fixes": [{"set": {"x.y": "{current} ** 2"}}]}, "only a literal"),
    ({"severity": "fatal"}, "severity"),
    ({"healthy": {"actor/ppo_kl": {"high": 0.01}}}, "needs a source"),
    ({"id": "kl1"}, "must look like"),
    ({"conditions": [{"metric": "actor/ppo_kl", "test": "above", "value": 1, "not": "yes"}]}, "not must be"),
    ({"fixes": [{"set": {"actor_rollout_ref.actor.optim.lr": 1e-6}}]}, "needs a 'harm'"),
    ({"harm": {"any": [[{"metric": "critic/score/mean", "test": "flat"}]]}}, "harm must be a mapping with a 'text'"),
])
def test_malformed_rules_are_rejected_with_the_file_named(tmp_path: Path, patch: dict, message: str) -> None:
    data = {**BASE_RULE, **patch}
    path = _write_rule(tmp_path, "kl", yaml.safe_dump(data))
    with pytest.raises(PlaybookError, match=re.escape(message)) as info:
        parse_rule(data, path)
    assert str(path) in str(info.value)
