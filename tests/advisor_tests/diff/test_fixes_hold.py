"""Every printed set of changes holds together: applied as one edit of the user's file (or overrides where
the user runs with overrides) and checked again, it leaves no error and raises nothing new."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor import load_config
from advisor.checks._report import check
from advisor.cli import app
from advisor.diff._edit import edit_for
from advisor.playbook._suggest import suggest_run

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CONFIGS = sorted(EXAMPLES.glob("check/*")) + sorted(EXAMPLES.glob("*/run.sh"))
RUNS = sorted(p.parent for p in EXAMPLES.glob("*/metrics.jsonl"))
SCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "verl_scripts"


def signatures(findings, *, severities=("error", "warning", "info")) -> set[tuple[str, tuple[str, ...]]]:
    return {(f.id, f.keys) for f in findings if f.severity in severities}


def apply_and_recheck(path: Path, changes, verl_version: str | None = None) -> tuple:
    """Write the changes into the file (a copy) as advisor --write does; check it again with the rest as overrides."""
    cfg = load_config(path, verl_version=verl_version)
    edit = edit_for(cfg, list(changes))
    assert edit is not None, f"{path.name}: not edited"
    edit.write()
    rest = [c.override() for c in edit.overrides]
    return edit, check(load_config(path, rest, verl_version=verl_version))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_checks_combined_fixes_recheck_clean(tmp_path: Path, config: Path) -> None:
    copy = tmp_path / config.name
    shutil.copy(config, copy)
    before = check(load_config(copy))
    if not before.changes:
        pytest.skip("nothing to fix")
    edit, after = apply_and_recheck(copy, before.changes)
    assert edit.in_file, "a key set in the file is fixed in the file"
    assert after.errors == []
    fixable = {(f.id, f.keys) for f in before.findings if f.fix and f.severity != "info"}
    assert signatures(after.findings) & fixable == set(), "a fixed finding is still there"
    assert signatures(after.findings, severities=("error", "warning")) <= signatures(before.findings), \
        "the changes raised a new finding"
    assert not [f for f in after.findings if f.fix and (f.id, f.keys) not in signatures(before.findings)]


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_suggests_diff_recheck_raises_nothing_new(tmp_path: Path, run: Path) -> None:
    copy = tmp_path / "run.sh"
    shutil.copy(run / "run.sh", copy)
    base = check(load_config(copy))
    result = suggest_run(load_config(copy), run / "metrics.jsonl")
    for changes in [result.changes, *result.alternatives]:
        if not changes:
            continue
        shutil.copy(run / "run.sh", copy)
        copy.with_name("run.sh.bak").unlink(missing_ok=True)
        edit, after = apply_and_recheck(copy, changes)
        assert edit.overrides == [], "every key of the diff is written into the script"
        assert signatures(after.findings) <= signatures(base.findings), [c.override() for c in changes]


def test_ppo_broken_fixed_with_write_passes_check(tmp_path: Path) -> None:
    copy = tmp_path / "ppo_broken.yaml"
    shutil.copy(EXAMPLES / "check" / "ppo_broken.yaml", copy)
    runner = CliRunner()
    assert runner.invoke(app, ["check", str(copy)]).exit_code == 1
    written = runner.invoke(app, ["check", str(copy), "--write"])
    assert written.exit_code == 0, written.output
    assert "re-checked: 0 errors, 0 warnings" in written.stdout
    assert (tmp_path / "ppo_broken.yaml.bak").read_text() == (EXAMPLES / "check" / "ppo_broken.yaml").read_text()
    fixed = runner.invoke(app, ["check", str(copy), "-f", "json"])
    assert fixed.exit_code == 0, fixed.output
    data = json.loads(fixed.stdout)
    assert data["errors"] == [] and data["warnings"] == [] and data["changes"] == []
    text = copy.read_text()
    # the typo is renamed in the file, and the coefficient it carried comes with the switch that makes it act
    assert "kl_los_coef" not in text and "    kl_loss_coef: 0.01\n" in text and "use_kl_loss: true" in text
    assert text.startswith("# A partial verl config")  # comments survive


def test_write_never_overwrites_a_backup(tmp_path: Path) -> None:
    copy = tmp_path / "ppo_broken.yaml"
    shutil.copy(EXAMPLES / "check" / "ppo_broken.yaml", copy)
    (tmp_path / "ppo_broken.yaml.bak").write_text("mine\n")
    result = CliRunner().invoke(app, ["check", str(copy), "--write"])
    assert result.exit_code == 2
    assert "backup" in result.output and (tmp_path / "ppo_broken.yaml.bak").read_text() == "mine\n"
    assert copy.read_text() == (EXAMPLES / "check" / "ppo_broken.yaml").read_text()


def test_a_misspelt_override_in_a_script_is_renamed_there(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(
        "#!/usr/bin/env bash\n"
        "python3 -m verl.trainer.main_ppo \\\n"
        "    algorithm.adv_estimator=grpo \\\n"
        "    data.train_batch_size=256 \\\n"
        "    actor_rollout_ref.rollout.name=vllm \\\n"
        "    actor_rollout_ref.rollout.n=5 \\\n"
        "    actor_rollout_ref.actor.use_kl_loss=True \\\n"
        "    actor_rollout_ref.actor.kl_los_coef=0.01 \\\n"
        "    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \\\n"
        "    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \\\n"
        "    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16 \\\n"
        "    trainer.n_gpus_per_node=8 $@\n")
    result = CliRunner().invoke(app, ["check", str(script), "-f", "diff"])
    assert "-    actor_rollout_ref.actor.kl_los_coef=0.01 \\\n+    actor_rollout_ref.actor.kl_loss_coef=0.01 \\\n" \
        in result.stdout
    written = CliRunner().invoke(app, ["check", str(script), "--write"])
    assert written.exit_code == 0, written.output
    assert check(load_config(script)).errors == []


def test_changes_to_keys_given_on_the_command_line_stay_overrides(tmp_path: Path) -> None:
    copy = tmp_path / "run.sh"
    shutil.copy(EXAMPLES / "kl_spike_loss" / "run.sh", copy)
    cfg = load_config(copy, ["data.train_batch_size=500"])
    report = check(cfg)
    edit = edit_for(cfg, report.changes)
    assert [c.key for c in edit.overrides] == ["data.train_batch_size"]
    assert "data.train_batch_size=512" in edit.after  # the script's own line is left alone


@pytest.fixture(scope="module")
def verl_scripts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("verl") / "verl_scripts"
    shutil.copytree(SCRIPTS, copy)
    return copy


@pytest.mark.slow
def test_verls_own_scripts_fixed_in_place_recheck_clean(verl_scripts: Path) -> None:
    edited = 0
    for script in sorted(verl_scripts.rglob("*.sh")):
        try:  # read as 0.8.0, the release after this January copy of main (legacy trainer: B008 applies)
            before = check(load_config(script, verl_version="0.8.0"))
        except Exception:  # not a launch script (prepare_dapo_data.sh)
            continue
        if not before.changes or not before.errors:
            continue
        _, after = apply_and_recheck(script, before.changes, verl_version="0.8.0")
        assert signatures(after.findings, severities=("error",)) <= \
            {(f.id, f.keys) for f in before.errors if not f.fix}, script.name
        edited += 1
    assert edited >= 4  # the LoRA tuning scripts' B008 at least


def test_a_hydra_run_directory_gets_overrides_not_an_edit(tmp_path: Path) -> None:
    # a Hydra dump records a run launched with overrides: the fix is more overrides, never an edit of the dump
    import yaml

    from advisor.verl._defaults import default_container

    tree = default_container("0.9.1", "ppo_trainer")
    tree["data"]["train_batch_size"] = 300
    tree["actor_rollout_ref"]["rollout"]["name"] = "vllm"
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(tree))
    (tmp_path / ".hydra" / "overrides.yaml").write_text("- data.train_batch_size=300\n"
                                                        "- actor_rollout_ref.rollout.name=vllm\n")
    cfg = load_config(tmp_path)
    report = check(cfg)
    assert cfg.kind == "hydra-dump" and report.changes
    assert edit_for(cfg, report.changes) is None
    written = CliRunner().invoke(app, ["check", str(tmp_path), "--write"])
    assert written.exit_code == 2 and "not a hydra-dump config" in written.stderr
    text = CliRunner().invoke(app, ["check", str(tmp_path)]).stdout
    assert "Hydra overrides, paste after your command:" in text and "--- " not in text


def test_the_report_shows_the_chosen_diff_as_an_edit_of_the_script_too(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    run = EXAMPLES / "kl_spike_loss"
    result = CliRunner().invoke(app, ["report", str(run / "run.sh"), str(run / "metrics.jsonl"),
                                      "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r.html").read_text()
    change = suggest_run(load_config(run / "run.sh"), run / "metrics.jsonl").changes[0]
    assert change.new == change.old / 2  # KL001 halves the lr; the script spells 1e-5, so its line reads 5e-6
    assert f"+    {change.key}=5e-6 \\" in page  # the script's own line, rewritten in its own notation
