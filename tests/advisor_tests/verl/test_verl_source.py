"""Reading verl's defaults from a wheel, a source tree or a git commit (scripts/generate_verl_defaults.py)."""

from __future__ import annotations

import subprocess
import textwrap
import zipfile
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from advisor.verl._source import (
    GitSource,
    TreeSource,
    WheelSource,
    dataclass_classes,
    default_tree,
    engine_configs,
    extra_fields,
    field_annotations,
    text_fields,
)

FILES = {
    # a composed config in verl's layout: a model_engine group and a package-placed group option
    "verl/trainer/config/ppo_trainer.yaml": """\
        defaults:
          - model_engine: dp
          - algorithm@algorithm.rollout_correction: rollout_correction
          - _self_
        algorithm:
          _target_: verl.trainer.config.AlgoConfig
          adv_estimator: gae
        trainer:
          nnodes: 1
          save_dir: ckpt/${trainer.nnodes}
        """,
    "verl/trainer/config/model_engine/dp.yaml": "# @package _global_\nmodel_engine: dp\n",
    "verl/trainer/config/model_engine/megatron.yaml": "# @package _global_\nmodel_engine: megatron\n",
    "verl/trainer/config/algorithm/rollout_correction.yaml": "rollout_is_threshold: 2.0\nbypass_mode: false\n",
    "verl/trainer/config/algorithm.py": """\
        from dataclasses import dataclass
        from typing import Optional

        @dataclass
        class RolloutCorrectionConfig:
            rollout_is_threshold: str | float = 2.0
            bypass_mode: bool = False

        @dataclass
        class AlgoConfig:
            adv_estimator: str = "gae"
            rollout_correction: Optional[RolloutCorrectionConfig] = None
            norm_adv_by_std_in_grpo: bool = True
        """,
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def _hydra(root: Path, overrides: list[str]) -> dict:
    with initialize_config_dir(config_dir=str(root / "verl/trainer/config"), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=overrides)
    return OmegaConf.to_container(cfg, resolve=False)  # type: ignore[return-value]


def test_a_composed_config_equals_hydras_composition(tree: Path) -> None:
    found = default_tree(TreeSource(tree), "ppo_trainer")
    assert found is not None
    assert found[0] == _hydra(tree, [])
    assert found[0]["trainer"]["save_dir"] == "ckpt/${trainer.nnodes}"  # links kept, as verl has them


def test_every_model_engine_choice_is_a_config(tree: Path) -> None:
    source = TreeSource(tree)
    assert engine_configs(source) == {"ppo_megatron_trainer": "megatron"}
    found = default_tree(source, "ppo_megatron_trainer")
    assert found is not None and found[0] == _hydra(tree, ["model_engine=megatron"])


def test_a_wheel_and_a_git_commit_read_the_same_as_the_tree(tree: Path, tmp_path: Path) -> None:
    wheel = tmp_path / "verl-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for rel in FILES:
            zf.write(tree / rel, rel)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["cp", "-r", f"{tree}/verl", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)
    expected = default_tree(TreeSource(tree), "ppo_trainer")
    assert default_tree(WheelSource(wheel), "ppo_trainer") == expected
    assert default_tree(GitSource(repo, "HEAD"), "ppo_trainer")[0] == expected[0]  # type: ignore[index]


def test_dataclass_fields_the_yaml_lacks_and_fields_that_take_text(tree: Path) -> None:
    source = TreeSource(tree)
    composed, _ = default_tree(source, "ppo_trainer")  # type: ignore[misc]
    classes = dataclass_classes(source)
    assert extra_fields(composed, classes) == {"algorithm": ["norm_adv_by_std_in_grpo"]}
    # RolloutCorrectionConfig is reached through AlgoConfig's annotation; its threshold admits "0.5_4.0"
    notes = field_annotations(source)
    assert text_fields(composed, classes, notes) == ["algorithm.rollout_correction.rollout_is_threshold"]
