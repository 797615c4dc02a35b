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


# --- 2. the loss-scale footer is printed only when it changes a verdict ----------------------------------------


def _suggest(example: str, *extra: str) -> str:
    from click.testing import CliRunner

    from advisor.cli import app

    run = EXAMPLES / example
    result = CliRunner().invoke(app, ["suggest", str(run / "run.sh"), str(run / "metrics.jsonl"), *extra])
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def test_losses_left_as_logged_print_no_footer() -> None:
    # verl 0.9.1's engine workers log the mean mini-batch loss: nothing is rescaled, nothing to say
    assert "loss sums" not in _suggest("lr_too_high")
    import json

    notes = json.loads(_suggest("lr_too_high", "--format", "json"))["notes"]
    assert any(n.startswith("loss sums: ") and "left as logged" in n for n in notes)  # still in the JSON


def test_rescaled_losses_that_change_the_verdict_are_footed() -> None:
    # read as verl 0.7.0 wrote it, actor/kl_loss is a sum over K = train_batch_size / ppo_mini_batch_size
    # = 512 / 128 = 4 optimizer steps (run.sh); divided by 4 it no longer spikes, and the footer says why
    text = _suggest("kl_spike_loss", "--verl-version", "0.7.0")
    assert "KL001" not in text
    assert "note: loss sums: actor/pg_loss x 0.25; actor/kl_loss x 0.25" in text


def test_rescaled_losses_that_change_nothing_print_no_footer() -> None:
    # verl 0.6.1 divides the loss by the grad-accumulation count; scaled back, KL001 fires as it does unscaled
    text = _suggest("kl_spike_loss", "--verl-version", "0.6.1")
    assert "KL001" in text
    assert "loss sums" not in text
