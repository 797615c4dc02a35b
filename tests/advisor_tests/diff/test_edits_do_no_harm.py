"""Every fix `check` proposes on verl's example scripts and verl-recipe's scripts moves only its own key.

The scripts: verl main's examples (tests/fixtures/verl_main), verl-recipe's (tests/fixtures/verl_recipe) and the
older verl examples (tests/fixtures/verl_scripts); each folder's SOURCE.md says where they come from. For each
script `check` reads, its combined fix is made an edit of the script text; the edited text is read back and its
unresolved tree compared with the original's, key by key: the keys that moved must be the ones the changes name
(a renamed key's old name goes), each at the value its change gives. The comparison is this test's own (the
config trees as the loader reads them), not the advisor's edit check.

And the published GPG run (bench/published_runs/SOURCE.md): its launch script (verl @ 9bc2e8e2) and its log
set ``use_gpg_loss``, a key of verl main in June 2025: `check` calls it no typo and proposes no edit.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from advisor import load_config
from advisor.checks import check
from advisor.diff import edit_for
from advisor.errors import AdvisorError
from advisor.load import load_config_text
from advisor.verl import flatten_leaves

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SCRIPTS = sorted(p for folder in ("verl_main", "verl_recipe", "verl_scripts")
                 for p in (FIXTURES / folder).rglob("*.sh"))
GPG_SCRIPT = FIXTURES / "verl_gpg" / "examples" / "gpg_trainer" / "run_qwen2-7b_math.sh"
PUBLISHED = Path(__file__).resolve().parents[3] / "bench" / "published_runs"
_ABSENT = object()


def _leaves(cfg: Any) -> dict[str, Any]:
    return flatten_leaves(cfg.container)


def _moved(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k, _ABSENT) != after.get(k, _ABSENT)}


def _edits() -> list[tuple[Path, Any, Any]]:
    out = []
    for path in SCRIPTS:
        try:
            cfg = load_config(path)
        except AdvisorError:
            continue  # not an RL run, or no verl command: nothing to edit
        edit = edit_for(cfg, check(cfg).changes)
        if edit is not None and edit.in_file:
            out.append((path, cfg, edit))
    return out


EDITS = _edits()


def test_the_walk_finds_fixes_to_make() -> None:
    assert len(SCRIPTS) > 300
    assert len(EDITS) >= 5  # the corpus holds scripts check proposes an edit for; otherwise this test proves nothing


@pytest.mark.parametrize(("path", "cfg", "edit"), EDITS, ids=[str(p.relative_to(FIXTURES)) for p, _, _ in EDITS])
def test_a_fix_moves_only_its_own_key(path: Path, cfg: Any, edit: Any) -> None:
    after = load_config_text(edit.after, path, verl_version=cfg.version)
    before_leaves, after_leaves = _leaves(cfg), _leaves(after)
    named = {c.key for c in edit.in_file} | {c.renames for c in edit.in_file if c.renames}
    moved = _moved(before_leaves, after_leaves)
    assert all(any(k == n or k.startswith(n + ".") for n in named) for k in moved), sorted(moved - named)
    for change in edit.in_file:
        if change.delete:
            assert change.key not in after_leaves
        elif not isinstance(change.new, (dict, list)):
            assert after.get(change.key) == change.new, change
        if change.renames:
            assert change.renames not in after_leaves


def test_a_rename_never_lands_on_a_key_the_script_sets(tmp_path: Path) -> None:
    # kl_loss_coeff is one edit from kl_loss_coef, which the script already sets: a rename would set it twice
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n    algorithm.adv_estimator=grpo \\\n"
                      "    actor_rollout_ref.actor.kl_loss_coef=0.001 \\\n"
                      "    actor_rollout_ref.actor.kl_loss_coeff=0.01\n")
    cfg = load_config(script, verl_version="0.9.1")
    unknown = [f for f in cfg.findings if f.id == "L001"]
    assert [f.keys for f in unknown] == [("actor_rollout_ref.actor.kl_loss_coeff",)]
    assert not unknown[0].fix and "kl_loss_coef'" not in unknown[0].message
    # the same typo alone is renamed: the guard is the other key being set, not the spelling
    alone = tmp_path / "alone.sh"
    alone.write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.kl_loss_coeff=0.01\n")
    fix = next(f for f in load_config(alone, verl_version="0.9.1").findings if f.id == "L001").fix
    assert [(c.key, c.renames) for c in fix] == [("actor_rollout_ref.actor.kl_loss_coef",
                                                  "actor_rollout_ref.actor.kl_loss_coeff")]


def _no_did_you_mean_on_gpg(cfg: Any) -> None:
    report = check(cfg)
    for f in [*cfg.findings, *report.errors, *report.warnings, *report.infos]:
        if "actor_rollout_ref.actor.use_gpg_loss" in f.keys:
            assert "did you mean" not in f.message and not f.fix, f.message
    assert not [c for c in report.changes if "use_gpg_loss" in (c.renames or "") or c.key.endswith("use_kl_loss")]
    edit = edit_for(cfg, report.changes)
    assert edit is None or "use_kl_loss" not in edit.after.replace(edit.before, "")


@pytest.mark.parametrize("version", [None, "0.4.1", "0.9.1"])
def test_the_gpg_launch_script_is_no_typo(version: str | None) -> None:
    cfg = load_config(GPG_SCRIPT, verl_version=version)
    unknown = next(f for f in cfg.findings if f.keys == ("actor_rollout_ref.actor.use_gpg_loss",))
    assert "9bc2e8e2" in unknown.message  # where the key was read: verl's ppo_trainer.yaml at that commit
    _no_did_you_mean_on_gpg(cfg)


@pytest.mark.parametrize("log", ["gpg_qwen2-7b_math.log.gz", "gpg_qwen2-7b_math_megatron.log.gz"])
def test_the_gpg_log_reads_what_verl_printed_as_real(tmp_path: Path, log: str) -> None:
    path = tmp_path / log.removesuffix(".gz")
    path.write_bytes(gzip.decompress((PUBLISHED / log).read_bytes()))
    cfg = load_config(path)
    assert cfg.kind == "log-printed"
    ids = {f.id for f in cfg.findings}
    assert "L001" not in ids  # every key of the printed config is one the run's verl had
    assert "L002" not in ids  # the renamed micro-batch keys verl printed are its own nulls, not the user's
    printed = next(f for f in cfg.findings if f.id == "L014")
    assert "actor_rollout_ref.actor.use_gpg_loss" in printed.keys
    assert cfg.get("actor_rollout_ref.actor.use_gpg_loss") is True
    _no_did_you_mean_on_gpg(cfg)


def _gpg_log(tmp_path: Path) -> Path:
    path = tmp_path / "qwen2-7b_math.log"
    path.write_bytes(gzip.decompress((PUBLISHED / "gpg_qwen2-7b_math.log.gz").read_bytes()))
    return path


def test_a_launch_script_beside_its_log_is_read_on_the_logs_verl_version(tmp_path: Path) -> None:
    from advisor.cli._jobs import suggest_job

    log = _gpg_log(tmp_path)
    printed = load_config(log)
    alone = load_config(GPG_SCRIPT)
    assert alone.version != printed.version  # without the log, the newest release that fits its keys
    result = suggest_job(GPG_SCRIPT, log)
    assert result.cfg.version == printed.version
    assert any(f"read as verl {printed.version}" in n for n in result.suggestion.notes)


def test_a_script_that_only_calls_another_falls_back_to_the_printed_config(tmp_path: Path) -> None:
    from advisor.cli._jobs import suggest_job

    log = _gpg_log(tmp_path)
    wrapper = tmp_path / "run.sh"
    wrapper.write_text("#!/bin/bash\nset -x\nbash examples/gpg_trainer/run_qwen2-7b_math.sh \"$@\"\n")
    with pytest.raises(AdvisorError, match="no verl command found"):
        load_config(wrapper)
    result = suggest_job(wrapper, log)
    assert result.cfg.kind == "log-printed" and result.cfg.get("data.train_batch_size") == 1024
    assert any("runs no verl command itself" in n and "printed" in n for n in result.suggestion.notes)


def test_a_key_a_pre_0_2_run_printed_is_not_deprecated_under_it(tmp_path: Path) -> None:
    # verl-data's Qwen2.5-0.5B PPO run (bench/published_runs/SOURCE.md) ran a verl before 0.2: its printed config has
    # the global micro batch keys and none of their *_per_gpu successors, so those keys were current for it
    log = tmp_path / "qwen.log"
    log.write_bytes(gzip.decompress((PUBLISHED / "Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log.gz").read_bytes()))
    cfg = load_config(log)
    assert cfg.get("actor_rollout_ref.actor.ppo_micro_batch_size") is not None
    assert not cfg.has("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") or \
        cfg.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") is None
    assert not [f for f in cfg.findings if f.id in ("L001", "L002")]


def test_write_reads_its_edit_back_and_names_any_other_key_that_moves(tmp_path: Path) -> None:
    from advisor.diff import unintended_moves
    from advisor.findings import Change

    script = tmp_path / "run.sh"
    text = ("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.actor.optim.lr=1e-6 \\\n"
            "    actor_rollout_ref.actor.use_kl_loss=False\n")
    script.write_text(text)
    cfg = load_config(script, verl_version="0.9.1")
    lr = Change("actor_rollout_ref.actor.optim.lr", 1e-6, 5e-7)
    honest = text.replace("optim.lr=1e-6", "optim.lr=5e-7")
    assert unintended_moves(cfg, honest, [lr]) == {}
    # the same change written with a second setting of use_kl_loss after the first: that key moves too
    harmful = honest.replace("use_kl_loss=False\n",
                             "use_kl_loss=False \\\n    actor_rollout_ref.actor.use_kl_loss=true\n")
    assert set(unintended_moves(cfg, harmful, [lr])) == {"actor_rollout_ref.actor.use_kl_loss"}


def test_an_edit_never_renames_onto_a_key_the_file_sets(tmp_path: Path) -> None:
    from advisor.findings import Change

    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.actor.use_kl_loss=False \\\n"
                      "    actor_rollout_ref.actor.use_gpg_loss=True\n")
    cfg = load_config(script, verl_version="0.9.1")
    # the rename the old did-you-mean proposed for GPG's key: refused, neither in the file nor as an override
    rename = Change("actor_rollout_ref.actor.use_kl_loss", None, True, renames="actor_rollout_ref.actor.use_gpg_loss")
    edit = edit_for(cfg, [rename])
    assert edit is not None and not edit.in_file and not edit.overrides and edit.after == edit.before
    assert [c for c, _ in edit.refused] == [rename] and "twice" in edit.refused[0][1]
