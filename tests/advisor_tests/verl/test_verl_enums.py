"""knowledge/verl_enums.yaml is what scripts/generate_verl_enums.py reads from verl's source of each version."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from advisor.checks.values import enumeration

REPO = Path(__file__).resolve().parents[3]
WHEELS = Path("/work/wheels/x")


def _generator():
    spec = importlib.util.spec_from_file_location("generate_verl_enums", REPO / "scripts" / "generate_verl_enums.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not (WHEELS / "verl-0.9.1").is_dir(), reason="verl's release wheels are not unpacked here")
def test_the_file_is_current() -> None:
    gen = _generator()
    assert (REPO / "knowledge" / "verl_enums.yaml").read_text() == gen.render(gen.generate())


@pytest.mark.skipif(not (WHEELS / "verl-0.9.1").is_dir(), reason="verl's release wheels are not unpacked here")
@pytest.mark.parametrize("version", ["0.4.1", "0.6.1", "0.9.1"])
def test_every_value_is_on_the_lines_named(version: str) -> None:
    for name in ("adv_estimator", "loss_agg_mode", "rollout_name"):
        enum = enumeration(version, name)
        text = "\n".join(
            "\n".join((WHEELS / f"verl-{version}" / src.split(":")[0]).read_text().splitlines()[
                int(src.split(":")[1].split("-")[0]) - 1:int(src.split(":")[1].split("-")[-1])])
            for src in enum["source"].split("; "))
        for value in enum["values"]:
            assert f'"{value}"' in text or f"'{value}'" in text, (version, name, value)


def test_versions_differ_where_verl_did() -> None:
    # verl 0.9.1's ActorConfig accepts token-sum (verl/workers/config/actor.py:212-218); 0.6.1's does not
    assert "token-sum" in enumeration("0.9.1", "loss_agg_mode")["values"]
    assert "token-sum" not in enumeration("0.6.1", "loss_agg_mode")["values"]
    assert "gpg" not in enumeration("0.4.1", "adv_estimator")["values"]
    assert enumeration("0.9.1", "rollout_name")["values"] == ["vllm", "sglang", "trtllm"]
