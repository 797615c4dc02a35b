"""``advisor explain METRIC``: the verl source, the rules that read it, and exit 2 for unknown names.

Expected sources are verl's own lines (the verl 0.9.1 wheel; before that github:volcengine/verl b178a3cd, read with
`git show`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from advisor.cli import app
from advisor.playbook._explain import explain_metric
from advisor.playbook._rule_loader import Rule, parse_rule


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def _rule(tmp_path: Path, rid: str, tree: str, metric: str, extra_evidence: list[str] | None = None,
          healthy: dict | None = None) -> Rule:
    folder = tmp_path / "rules" / tree
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{rid}-test-rule.yaml"
    data = {
        "id": rid, "name": "test-rule", "tree": tree, "severity": "warning", "summary": f"{metric} too high",
        "conditions": [{"metric": metric, "test": "above", "value": 0.02}],
        "evidence": [metric, *(extra_evidence or [])], "message": "x", "rationale": "y", "sources": ["z"],
    }
    if healthy:
        data["healthy"] = healthy
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return parse_rule(yaml.safe_load(path.read_text()), path)


@pytest.mark.parametrize("metric, source_parts, before_parts", [
    # 0.9.1 core_algos.py:1340 ppo_kl = masked_mean(-negative_approx_kl), 1373 logged;
    # b178a3cd core_algos.py:1214 and 1247
    ("actor/ppo_kl", ["verl/trainer/ppo/core_algos.py:1336-1340,1373", "compute_policy_loss_vanilla"],
     ["verl/trainer/ppo/core_algos.py:1210-1214,1247"]),
    # 0.9.1 metric_utils.py:576 "response_length/clip_ratio" (b178a3cd: 193)
    ("response_length/clip_ratio", ["verl/trainer/ppo/metric_utils.py:", "576-578", "compute_data_metrics"],
     ["193-195"]),
    # 0.9.1 metric_utils.py:540 "critic/vf_explained_var" (b178a3cd: 184)
    ("critic/vf_explained_var", ["verl/trainer/ppo/metric_utils.py:", ",540", "compute_data_metrics"], [",184"]),
    # 0.9.1 engine_workers.py:219 final_metrics["perf/max_memory_allocated_gb"] (b178a3cd: fsdp_workers.py:915)
    ("perf/max_memory_allocated_gb", ["verl/workers/engine_workers.py:219"], ["verl/workers/fsdp_workers.py:915"]),
    # 0.9.1 ray_trainer.py:115 actor/reward_kl_penalty in apply_kl_penalty (b178a3cd: 107)
    ("actor/reward_kl_penalty", ["verl/trainer/ppo/ray_trainer.py:", ",115", "apply_kl_penalty"], [",107"]),
])
def test_explain_json_names_the_verl_source(metric: str, source_parts: list[str], before_parts: list[str]) -> None:
    result = run("explain", metric, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["name"] == metric and data["kind"] == "metric"
    for part in source_parts:
        assert part in data["source"], data["source"]
    for part in before_parts:
        assert part in data["source_before"], data["source_before"]
    assert data["formula"] and data["since"]
    assert data["verl_version"] == "0.9.1" and data["before_commit"].startswith("b178a3cd")


def test_explain_json_carries_the_healthy_range_and_its_source() -> None:
    data = json.loads(run("explain", "actor/pg_clipfrac", "-f", "json").stdout)
    assert data["healthy"]["low"] == 0.0 and data["healthy"]["high"] == 0.3  # knowledge/published_runs.yaml
    assert "published_runs.yaml" in data["healthy"]["source"]
    assert "0 by construction" in data["notes"]


def test_explain_text_shows_source_formula_and_range() -> None:
    result = run("explain", "actor/ppo_kl")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for part in ("actor/ppo_kl", "core_algos.py:1210-1214,1247", "old_logp - logp", "0 to 0.01",
                 "1707.06347", "since verl 0.1"):
        assert part in text, part


def test_a_family_member_is_explained_by_its_pattern() -> None:
    data = json.loads(run("explain", "val-core/openai/gsm8k/reward/mean@1", "-f", "json").stdout)
    assert data["kind"] == "pattern" and data["pattern"] == "val-core/*"
    assert "_val_metrics_update" in data["source"]


@pytest.mark.parametrize("typo, suggestion", [
    ("actor/ppo_kll", "actor/ppo_kl"),
    ("response_length/clip_ration", "response_length/clip_ratio"),
    ("entropy", "actor/entropy"),
])
def test_unknown_metric_exits_2_with_one_did_you_mean_line(typo: str, suggestion: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "advisor", "explain", typo], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"unknown metric '{typo}'" in lines[0] and f"did you mean '{suggestion}'" in lines[0]
    assert "Traceback" not in proc.stderr


def test_a_name_with_nothing_close_still_exits_2() -> None:
    result = run("explain", "zzzz")
    assert result.exit_code == 2
    assert "unknown metric 'zzzz'" in result.output


@pytest.mark.parametrize("old, new", [("timing/gen", "timing_s/gen"), ("critic/kl", "actor/reward_kl_penalty")])
def test_old_names_map_through_the_alias_table(old: str, new: str) -> None:
    explanation = explain_metric(old, rules=())
    assert explanation.name == new and explanation.renamed is not None and explanation.renamed.old == old
    assert explanation.info is not None and explanation.info.name == new


def test_old_name_renamed_through_a_monkeypatched_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    from advisor.playbook import _explain

    def fake_rename(name: str) -> _explain.Renaming | None:
        return _explain.Renaming(name, "actor/reward_kl_penalty", "<0.4.0") if name == "critic/kl" else None

    monkeypatch.setattr(_explain, "rename_metric", fake_rename)
    data = explain_metric("critic/kl", rules=()).to_dict()
    assert data["name"] == "actor/reward_kl_penalty" and data["renamed"]["old"] == "critic/kl"
    assert "apply_kl_penalty" in data["source"]


def test_a_name_verl_never_logs_is_explained_not_rejected() -> None:
    result = run("explain", "episode/reward/mean", "-f", "json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["kind"] == "not_logged" and data["source"] is None
    assert "critic/score/mean" in data["not_logged"]["instead"]


def test_rules_that_read_the_metric_are_listed_with_their_range(tmp_path: Path) -> None:
    kl = _rule(tmp_path, "KL901", "kl", "actor/ppo_kl", ["actor/pg_clipfrac"],
               healthy={"actor/ppo_kl": {"low": 0.001, "high": 0.01, "source": "seed 001 §1.3"}})
    entropy = _rule(tmp_path, "EN901", "entropy", "actor/entropy")
    rules = [kl, entropy]
    ppo_kl = explain_metric("actor/ppo_kl", rules=rules)
    assert [r.id for r in ppo_kl.rules] == ["KL901"]
    assert ppo_kl.rules[0].healthy is not None and ppo_kl.rules[0].healthy.high == 0.01
    clipfrac = explain_metric("actor/pg_clipfrac", rules=rules)  # read as evidence only
    assert [r.id for r in clipfrac.rules] == ["KL901"] and clipfrac.rules[0].healthy is None
    assert explain_metric("critic/vf_loss", rules=rules).rules == ()


def test_cli_lists_playbook_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from advisor.playbook import _rule_loader as _playbook

    rule = _rule(tmp_path, "RL901", "response_length", "response_length/clip_ratio")
    monkeypatch.setattr(_playbook, "load_playbook", lambda: (rule,))
    data = json.loads(run("explain", "response_length/clip_ratio", "-f", "json").stdout)
    assert data["rules"] == [{"id": "RL901", "name": "test-rule", "tree": "response_length",
                              "summary": "response_length/clip_ratio too high", "healthy": None}]
    text = run("explain", "response_length/clip_ratio").stdout
    assert "RL901 test-rule (response_length)" in " ".join(text.split())


def test_check_still_does_not_import_pandas() -> None:
    script = Path(__file__).resolve().parents[2] / "fixtures/verl_scripts/examples/grpo_trainer/run_qwen3-8b.sh"
    code = ("import sys; from click.testing import CliRunner; from advisor.cli import app; "
            f"r = CliRunner().invoke(app, ['check', {str(script)!r}]); assert r.exit_code == 0, r.output; "
            "print('pandas' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "False", proc.stderr
