"""An installed verl is read through its package metadata: its version and its own config YAMLs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from advisor import load_config
from advisor.checks import run_checks
from advisor.verl._defaults import reset_caches
from advisor.verl._installed import IGNORE_ENV, installed_verl

# A verl newer than any the advisor knows, with a key of its own (monolithic config, as verl <= 0.4 ships).
CONFIG = textwrap.dedent("""\
    data: {train_batch_size: 64, max_prompt_length: 512, max_response_length: 512}
    actor_rollout_ref:
      rollout: {name: vllm, n: 4, log_prob_micro_batch_size_per_gpu: 4}
      actor: {strategy: fsdp, ppo_mini_batch_size: 16, ppo_micro_batch_size_per_gpu: 4, use_kl_loss: false,
              use_dynamic_bsz: false}
    algorithm: {adv_estimator: grpo, use_kl_in_reward: false, brand_new_switch: true}
    trainer: {n_gpus_per_node: 8, nnodes: 1}
""")


def _fake_verl(site: Path, version: str, editable_root: Path | None = None) -> Path:
    root = editable_root or site
    config = root / "verl" / "trainer" / "config"
    config.mkdir(parents=True)
    (config / "ppo_trainer.yaml").write_text(CONFIG)
    (root / "verl" / "version").mkdir(parents=True)
    (root / "verl" / "version" / "version").write_text(version + "\n")
    info = site / f"verl-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: verl\nVersion: {version}\n")
    if editable_root is not None:
        (info / "direct_url.json").write_text(json.dumps({"url": editable_root.as_uri(),
                                                          "dir_info": {"editable": True}}))
    return root


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(IGNORE_ENV, raising=False)

    def install(version: str, *, editable: bool = False) -> Path:
        site = tmp_path / "site-packages"
        root = _fake_verl(site, version, tmp_path / "checkout" if editable else None)
        monkeypatch.syspath_prepend(str(site))
        reset_caches()
        return root

    yield install
    monkeypatch.setenv(IGNORE_ENV, "1")
    reset_caches()


@pytest.mark.parametrize("editable", [False, True])
def test_the_installed_verls_own_defaults_and_version_are_used(installed, editable: bool) -> None:
    root = installed("0.9.7", editable=editable)
    found = installed_verl()
    assert found is not None and found.version == "0.9.7" and found.root == root
    cfg = load_config(None, ["algorithm.brand_new_switch=false"])
    assert cfg.version == "0.9.7" and cfg.version_installed == str(root)
    assert not [f for f in cfg.findings if f.id == "L001"]  # a key only that verl has
    assert cfg.get("algorithm.brand_new_switch") is False
    # rules follow the version order: 0.9.7 runs the >= 0.8 engine-worker rules
    assert not [f for f in run_checks(cfg) if f.severity == "error"]


def test_a_given_version_wins_over_the_installed_one(installed) -> None:
    installed("0.9.7")
    cfg = load_config(None, verl_version="0.7.1")
    assert cfg.version == "0.7.1" and cfg.version_installed is None


def test_nothing_installed_means_detection_from_the_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IGNORE_ENV, raising=False)
    reset_caches()
    try:
        if installed_verl() is not None:
            pytest.skip("a real verl is installed here")
        assert load_config(None).version_installed is None
    finally:
        monkeypatch.setenv(IGNORE_ENV, "1")
        reset_caches()


def test_only_verls_own_metadata_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the quick look before importlib.metadata: verl_advisor's (or verl_foo's) dist-info is not verl's
    from advisor.verl._installed import _has_verl_metadata

    site = tmp_path / "site"
    (site / "verl_advisor-0.1.0.dist-info").mkdir(parents=True)
    monkeypatch.setattr("sys.path", [str(site)])
    assert not _has_verl_metadata()
    (site / "verl-0.9.1.dist-info").mkdir()
    assert _has_verl_metadata()
