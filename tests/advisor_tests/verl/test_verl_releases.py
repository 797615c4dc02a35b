"""A config written for a verl release has no unknown-key error when read as that release.

The configs are verl's own launch scripts at each release tag (tests/fixtures/verl_releases, SOURCE.md there);
for 0.9.1, whose tag our copy of verl lacks, the nearest are main's of 2026-08-22 (tests/fixtures/verl_main).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor import load_config
from advisor.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RELEASES = {tag.name[1:]: tag for tag in sorted((FIXTURES / "verl_releases").iterdir()) if tag.is_dir()}
RELEASES["0.9.1"] = FIXTURES / "verl_main"

# (release, script) -> the key verl refuses, and why the script is broken as written at that tag
BROKEN = {
    # 0.3.0.post1's ppo_megatron_trainer.yaml has no actor_rollout_ref.model.use_remove_padding
    ("0.3.0.post1", "run_deepseek7b_llm_megatron.sh"): "actor_rollout_ref.model.use_remove_padding",
    # rollout.yaml has engine_kwargs.sglang: {} from 0.6 (0.5.0 had attention_backend: null): Hydra needs '+'
    **{(version, script): "actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend"
       for version, script in [("0.6.1", "run_gptoss_20b.sh"), ("0.7.0", "run_gptoss_20b.sh"),
                               ("0.7.1", "run_gptoss_20b.sh"), ("0.8.0", "run_gpt_oss_20b_fsdp.sh"),
                               ("0.9.0", "run_gpt_oss_20b_fsdp.sh"), ("0.9.1", "run_gpt_oss_20b_fsdp.sh")]},
}


def _scripts(folder: Path) -> list[Path]:
    return sorted(p for sub in ("ppo_trainer", "grpo_trainer") for p in (folder / "examples" / sub).glob("*.sh"))


def test_every_release_has_its_scripts() -> None:
    assert set(RELEASES) == {"0.2.0.post2", "0.3.0.post1", "0.4.1", "0.5.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0",
                             "0.9.0", "0.9.1"}
    assert all(len(_scripts(folder)) >= 10 for folder in RELEASES.values())


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_a_releases_own_scripts_have_no_unknown_key_there(version: str) -> None:
    unknown: dict[str, list[str]] = {}
    for script in _scripts(RELEASES[version]):
        try:
            cfg = load_config(script, verl_version=version)
        except ConfigError as err:  # a stub that runs no verl command (the megatron-lite pointer of 0.9.0)
            assert "no verl command found" in str(err), script
            continue
        keys = [f.keys[0] for f in cfg.findings if f.id == "L001"]
        expected = BROKEN.get((version, script.name))
        if expected is not None:
            assert expected in keys, script.name
            keys.remove(expected)
        if keys:
            unknown[script.name] = keys
    assert unknown == {}


@pytest.mark.parametrize("version, script", [("0.2.0.post2", "run_deepseek7b_llm.sh"),
                                             ("0.3.0.post1", "run_qwen2-7b_rm.sh")])
def test_an_old_releases_script_is_read_as_that_release(version: str, script: str) -> None:
    # forks pin old verl (TinyZero and Search-R1 on 0.1-0.3): their keys date them (fsdp_config.grad_offload,
    # '+trainer.val_before_train' before 0.4 had the key)
    path = next(p for p in _scripts(RELEASES[version]) if p.name == script)
    cfg = load_config(path)
    assert cfg.version == version
    assert not [f for f in cfg.findings if f.severity == "error"]
