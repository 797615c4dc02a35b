"""Semantic normalisation of loss metrics across verl versions (advisor/metrics/_loss_sums.py)."""

from __future__ import annotations

import json
import re

import pytest

from advisor.metrics import load_metrics, normalize_loss_sums


@pytest.fixture
def frame(tmp_path):
    path = tmp_path / "run.jsonl"
    lines = [{"step": 1, "data": {"actor/pg_loss": 0.8, "actor/kl_loss": 0.04, "critic/vf_loss": 1.2,
                                  "actor/ppo_kl": 0.01}},
             {"step": 2, "data": {"actor/pg_loss": -0.4, "actor/kl_loss": 0.08, "critic/vf_loss": 0.6,
                                  "actor/ppo_kl": 0.02}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return load_metrics(path)


def test_v0_7_sums_are_divided_by_optimizer_steps(frame):
    out = normalize_loss_sums(frame, verl_version="0.7.0", optimizer_steps_per_step=4, strategy="fsdp",
                              critic_optimizer_steps_per_step=2)

    assert out["actor/pg_loss"].tolist() == [0.2, -0.1]
    assert out["actor/kl_loss"].tolist() == [0.01, 0.02]
    assert out["critic/vf_loss"].tolist() == [0.6, 0.3]
    assert out["actor/ppo_kl"].tolist() == [0.01, 0.02]  # a mean in every version: untouched
    assert frame["actor/pg_loss"].tolist() == [0.8, -0.4]  # the input frame is not changed
    assert len(out.normalizations) == 1
    assert "actor/pg_loss x 0.25" in out.normalizations[0] and "critic/vf_loss x 0.5" in out.normalizations[0]


def test_critic_defaults_to_the_actors_optimizer_steps(frame):
    out = normalize_loss_sums(frame, verl_version="0.7.1", optimizer_steps_per_step=4, strategy="fsdp2")

    assert out["critic/vf_loss"].tolist() == [0.3, 0.15]


def test_v0_6_values_are_multiplied_by_grad_accumulation(frame):
    out = normalize_loss_sums(frame, verl_version="v0.6.1", optimizer_steps_per_step=4, strategy="fsdp",
                              grad_accum_steps=8, critic_grad_accum_steps=2)

    assert out["actor/pg_loss"].tolist() == [6.4, -3.2]
    assert out["critic/vf_loss"].tolist() == [2.4, 1.2]


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        pytest.param({"grad_accum_steps": None}, "grad_accum_steps was not given", id="no-grad-accum"),
        pytest.param({"grad_accum_steps": 8, "use_dynamic_bsz": True}, "with dynamic batch size", id="dynamic-bsz"),
    ],
)
def test_v0_6_values_that_cannot_be_undone_are_left_and_said_so(frame, kwargs, reason):
    out = normalize_loss_sums(frame, verl_version="0.6.0", optimizer_steps_per_step=4, strategy="fsdp", **kwargs)

    assert out["actor/pg_loss"].tolist() == [0.8, -0.4]
    assert "NOT rescaled" in out.normalizations[0] and reason in out.normalizations[0]


@pytest.mark.parametrize(
    ("version", "strategy", "why"),
    [
        pytest.param("0.5.0", "fsdp", "logs the mean micro-batch loss", id="before-0.6"),
        pytest.param("0.7.0", "megatron", "Megatron logs the mean micro-batch loss", id="megatron"),
        # 0.8.0 removed the legacy workers; the engine workers log the mean mini-batch loss
        # (0.9.1:verl/workers/utils/losses.py:119, engine_workers.py:326-334, trainer_base.py:1863)
        pytest.param("0.8.0", "fsdp", "engine workers log the mean mini-batch loss", id="0.8.0-engine"),
        pytest.param("0.9.1", "fsdp2", "engine workers log the mean mini-batch loss", id="0.9.1-engine"),
        pytest.param("0.10.0.dev", "fsdp", "engine workers log the mean mini-batch loss", id="main-engine"),
    ],
)
def test_means_are_left_as_logged(frame, version, strategy, why):
    out = normalize_loss_sums(frame, verl_version=version, optimizer_steps_per_step=4, strategy=strategy)

    assert out["actor/pg_loss"].tolist() == [0.8, -0.4]
    assert why in out.normalizations[0]


def test_normalising_twice_changes_nothing_more(frame):
    once = normalize_loss_sums(frame, verl_version="0.7.0", optimizer_steps_per_step=4, strategy="fsdp")
    twice = normalize_loss_sums(once, verl_version="0.7.0", optimizer_steps_per_step=4, strategy="fsdp")

    assert twice["actor/pg_loss"].tolist() == [0.2, -0.1]
    assert twice.normalizations == once.normalizations


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"optimizer_steps_per_step": 0}, "optimizer_steps_per_step must be at least 1 but got 0.",
                     id="zero-steps"),
        pytest.param({"strategy": "deepspeed"}, "strategy must be one of fsdp, fsdp2, megatron but got 'deepspeed'.",
                     id="strategy"),
        pytest.param({"verl_version": "next"}, "verl version must look like '0.9.1' but got 'next'", id="version"),
        pytest.param({"grad_accum_steps": 0}, "grad_accum_steps must be at least 1 but got 0.", id="grad-accum"),
    ],
)
def test_bad_arguments(frame, kwargs, message):
    args = {"verl_version": "0.7.0", "optimizer_steps_per_step": 4, "strategy": "fsdp", **kwargs}

    with pytest.raises(ValueError, match=re.escape(message)):
        normalize_loss_sums(frame, **args)
