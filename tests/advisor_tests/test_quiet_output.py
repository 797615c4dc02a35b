"""Output without noise (issue #30): each note is shown once, and only where it can change what the user does."""

from __future__ import annotations

from pathlib import Path

from advisor.checks import check
from advisor.load import load_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
VERL_MAIN = ROOT / "tests" / "fixtures" / "verl_main" / "examples"


def _ids(findings: list) -> list[str]:
    return [f.id for f in findings]


# --- 1. an undefined shell variable is noted once, and only when a key the checks read depends on it ----------


def test_home_in_data_paths_only_is_not_noted() -> None:
    # the bundled example reads $HOME only in data.train_files / data.val_files, which no check reads
    cfg = load_config(EXAMPLES / "check" / "grpo_qwen2.5-7b_gsm8k.sh")
    assert any(f.id == "L009" and f.details["variable"] == "HOME" for f in cfg.findings)  # the loader knows
    assert "L009" not in _ids(check(cfg).findings)


def test_home_in_the_model_path_is_noted() -> None:
    # verl's script builds actor_rollout_ref.model.path from $HOME: the model (heads, memory) cannot be known
    cfg = load_config(VERL_MAIN / "grpo_trainer" / "run_qwen3_5_27b_fsdp.sh")
    notes = [f for f in check(cfg).findings if f.id == "L009"]
    assert [f.details["variable"] for f in notes] == ["HOME"]
    assert "actor_rollout_ref.model.path" in notes[0].keys


def test_variable_in_a_number_is_said_once(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=$NNODES trainer.experiment_name=$NAME\n")
    found = check(load_config(script)).findings
    assert [(f.id, f.keys) for f in found if f.id in ("L008", "L009")] == [("L008", ("trainer.nnodes",))]
