"""advisor check with a GPU: the memory section joins the report, an OOM is an error with a fix."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from advisor import load_config
from advisor.checks import run_checks
from advisor.checks._report import check
from advisor.cli import app

SCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "verl_scripts" / "examples"
QWEN3 = SCRIPTS / "grpo_trainer" / "run_qwen3-8b.sh"


def test_memory_section_in_json_when_a_gpu_is_given() -> None:
    result = CliRunner().invoke(app, ["check", str(QWEN3), "--gpu", "H100", "-f", "json"])
    assert result.exit_code == 0, result.output
    memory = json.loads(result.stdout)["memory"]
    assert memory["verdict"] in ("ok", "tight")
    assert {s["stage"] for s in memory["stages"]} >= {"generate", "actor_update"}
    for stage in memory["stages"]:
        assert set(stage) >= {"stage", "peak_gib", "capacity_gib", "risk", "breakdown"}


def test_no_memory_section_without_a_gpu() -> None:
    assert "memory" not in check(load_config(QWEN3)).to_dict()


def test_oom_is_an_error_and_its_fix_is_valid_and_fits() -> None:
    # Qwen3-8B, no offload: vLLM takes 0.9 x 40 GB while the actor's fp32 state (~12 B/param over 8 GPUs)
    # stays resident during generation
    cfg = load_config(QWEN3, ["actor_rollout_ref.rollout.gpu_memory_utilization=0.9"])
    report = check(cfg, gpu="A100-40GB")
    assert report.memory is not None and report.memory.verdict == "oom"
    finding = next(f for f in report.findings if f.id == "M001")
    assert finding.severity == "error" and report.exit_code == 1
    if finding.fix:  # the fix touches only memory/speed knobs and keeps the config valid
        patched = cfg.with_changes(finding.fix)
        assert not [f for f in run_checks(patched, verify_fixes=False) if f.severity == "error"]
        assert check(patched, gpu="A100-40GB").memory.verdict == "ok"
        for change in finding.fix:
            assert change.key not in ("data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size",
                                      "actor_rollout_ref.rollout.n", "data.max_response_length")


def test_unknown_model_keeps_the_check_and_says_what_is_missing(tmp_path: Path) -> None:
    cfg = load_config(QWEN3, ["actor_rollout_ref.model.path=/nowhere/my-private-model"])
    report = check(cfg, gpu="H100")
    assert report.memory is None
    info = next(f for f in report.findings if f.id == "M003")
    assert "model-config" in (info.details.get("suggestion") or "") + info.message
