"""A playbook fix changes the key verl reads in the run's version, never one it ships but ignores.

verl <= 0.7 clips the actor's gradient at ``actor.grad_clip`` (verl/workers/actor/dp_actor.py:392-398 @0.7.1);
from 0.8.0 the legacy workers are gone and the engine clips at ``actor.optim.clip_grad``
(verl/workers/engine/fsdp/transformer_impl.py:795-811 @0.9.1), while dp_actor.yaml:29 still ships grad_clip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor import load_config
from advisor.playbook import load_playbook
from advisor.playbook._diagnose import concrete_changes, config_holds
from advisor.verl import read_key

WHEELS = Path("/work/wheels/x")
BASE = ["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16", "algorithm.adv_estimator=grpo"]


def _nu001_clip_fix():
    rule = next(r for r in load_playbook() if r.id == "NU001")
    return next(f for f in rule.fixes if "actor_rollout_ref.actor.grad_clip" in f.set)


@pytest.mark.parametrize(("version", "expected"), [
    ("0.7.1", "actor_rollout_ref.actor.grad_clip"),
    ("0.8.0", "actor_rollout_ref.actor.optim.clip_grad"),
    ("0.9.1", "actor_rollout_ref.actor.optim.clip_grad"),
])
def test_the_gradient_clip_fix_changes_the_key_that_version_reads(version: str, expected: str) -> None:
    cfg = load_config(None, BASE, verl_version=version)
    changes = concrete_changes(_nu001_clip_fix(), cfg)
    assert changes is not None and [c.key for c in changes] == [expected]
    assert changes[0].old == 1.0  # verl's default clip in both homes (dp_actor.yaml, optim/fsdp.yaml)


def test_a_config_condition_reads_the_key_that_version_reads() -> None:
    rule = next(r for r in load_playbook() if r.id == "CF005")
    cond = next(c for c in rule.config if c.key == "actor_rollout_ref.actor.grad_clip")
    # the user loosened the clip verl 0.9.1 uses: the rule's "clip at or below 1.0" no longer holds
    assert not config_holds(cond, load_config(None, [*BASE, "actor_rollout_ref.actor.optim.clip_grad=5.0"],
                                              verl_version="0.9.1"))
    assert config_holds(cond, load_config(None, [*BASE, "actor_rollout_ref.actor.grad_clip=5.0"],
                                          verl_version="0.9.1"))  # set, but 0.9.1 never reads it


@pytest.mark.skipif(not (WHEELS / "verl-0.9.1").exists(), reason="verl release wheels not unpacked here")
def test_the_table_matches_verl_sources() -> None:
    """0.9.1's engine reads optimizer clip_grad and no Python file reads grad_clip outside the deprecation shim."""
    root = WHEELS / "verl-0.9.1" / "verl"
    engine = (root / "workers/engine/fsdp/transformer_impl.py").read_text()
    assert "self.optimizer_config.clip_grad" in engine
    readers = [p for p in root.rglob("*.py") if ".grad_clip" in p.read_text() and p.name != "optimizer.py"]
    assert readers == []
    assert read_key("actor_rollout_ref.actor.grad_clip", "0.7.1") == "actor_rollout_ref.actor.grad_clip"
