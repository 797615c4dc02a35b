"""A diff writes the new value as the file spells the old one (issue 30): 1e-4 -> 1e-6, not 1e-06; False -> True."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from omegaconf._utils import get_yaml_loader

from advisor import load_config
from advisor.diff import edit_for
from advisor.diff._literal import respell
from advisor.findings import Change

LR = "actor_rollout_ref.actor.optim.lr"
KL = "actor_rollout_ref.actor.use_kl_loss"


@pytest.mark.parametrize("value, old, expected", [
    (1e-6, "1e-4", "1e-6"), (5e-6, "1e-5", "5e-6"), (1.5e-5, "1E-4", "1.5E-5"), (1e-6, "0.0001", "0.000001"),
    (0.002, "0.001", "0.002"), (True, "False", "True"), (False, "TRUE", "FALSE"),
])
def test_the_old_literal_sets_the_style(value: object, old: str, expected: str) -> None:
    assert respell(value, old) == expected


@pytest.mark.parametrize("value, old", [(True, "true"), (3, "4"), (1e-6, "$LR"), (float("nan"), "1e-4")])
def test_no_style_to_follow_leaves_the_default(value: object, old: str) -> None:
    assert respell(value, old) is None


@given(st.floats(min_value=1e-12, max_value=1e6, allow_nan=False, allow_infinity=False),
       st.sampled_from(["1e-4", "1E-4", "0.0001", "2.5e+3", "0.5"]))
def test_a_respelled_number_reads_back_as_the_same_value_in_hydras_yaml(value: float, old: str) -> None:
    text = respell(value, old)
    assert text is not None
    assert yaml.load(f"x: {text}", Loader=get_yaml_loader())["x"] == value  # OmegaConf's loader: a safe loader


def test_a_yaml_edit_keeps_the_files_spelling(tmp_path: Path) -> None:
    cfg_file = tmp_path / "cfg.yaml"
    cfg_file.write_text("actor_rollout_ref:\n  actor:\n    optim:\n      lr: 1e-4\n    use_kl_loss: False\n")
    cfg = load_config(cfg_file)
    edit = edit_for(cfg, [Change(LR, 1e-4, 1e-6, "test"), Change(KL, False, True, "test")])
    assert edit is not None
    assert "lr: 1e-6\n" in edit.after and "use_kl_loss: True\n" in edit.after


def test_a_script_edit_keeps_the_files_spelling(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.actor.optim.lr=0.0001 \\\n"
                      "    actor_rollout_ref.actor.use_kl_loss=False\n")
    cfg = load_config(script)
    edit = edit_for(cfg, [Change(LR, 1e-4, 5e-6, "test"), Change(KL, False, True, "test")])
    assert edit is not None
    assert "optim.lr=0.000005 " in edit.after and "use_kl_loss=True\n" in edit.after
