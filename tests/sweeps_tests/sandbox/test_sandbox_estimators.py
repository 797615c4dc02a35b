"""The sandbox's advantage estimators as a registry keyed by name, with verl's contract
(verl/trainer/ppo/core_algos.py:113-150 register_adv_est / get_adv_estimator_fn @ 1dda039b): every name the sandbox
models is filed, under verl's own spelling; a second estimator under a taken name is refused; an unknown name raises
verl's message; the training loop's compute_advantage runs whatever estimator the config names."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sweeps.sandbox import SandboxConfigError, parse_args
from sweeps.sandbox.args import Args
from sweeps.sandbox.core_algos import (
    ADV_ESTIMATOR_REGISTRY,
    compute_advantage,
    get_adv_estimator_fn,
    register_adv_est,
)
from sweeps.sandbox.rollout import Batch

# verl's AdvantageEstimator values (core_algos.py:97-110 @ 1dda039b) the sandbox models, in the order the sandbox's
# refusal of another estimator lists them
MODELLED = ["gae", "grpo", "grpo_vectorized", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline"]


def _batch(n: int = 2, width: int = 3) -> Batch:
    return Batch(np.full(n, 4), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.arange(n),
                 np.ones((n, width), dtype=np.int64), np.ones((n, width)), np.zeros((n, width, 4), dtype=np.int64))


def test_every_modelled_estimator_is_filed_under_verls_name() -> None:
    assert list(ADV_ESTIMATOR_REGISTRY) == MODELLED
    assert all(get_adv_estimator_fn(name) is ADV_ESTIMATOR_REGISTRY[name] for name in MODELLED)
    # verl computes grpo_vectorized's advantages with the same formula as grpo's, without the loop over groups
    assert get_adv_estimator_fn("grpo_vectorized") is get_adv_estimator_fn("grpo")


def test_a_second_estimator_under_a_taken_name_is_refused() -> None:
    before = dict(ADV_ESTIMATOR_REGISTRY)

    def other(batch: Batch, rewards: np.ndarray, args: Args) -> tuple[np.ndarray, np.ndarray]:
        return rewards, rewards

    with pytest.raises(ValueError, match="Adv estimator grpo has already been registered"):
        register_adv_est("grpo")(other)
    assert ADV_ESTIMATOR_REGISTRY == before
    register_adv_est("grpo")(ADV_ESTIMATOR_REGISTRY["grpo"])  # the same function again is no conflict (verl: != fn)
    assert ADV_ESTIMATOR_REGISTRY == before


def test_an_unknown_name_raises_verls_message() -> None:
    with pytest.raises(ValueError, match=r"^Unknown advantage estimator simply: remax$"):
        get_adv_estimator_fn("remax")


def test_the_loop_runs_the_estimator_the_config_names(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def constant(batch: Batch, rewards: np.ndarray, args: Args) -> tuple[np.ndarray, np.ndarray]:
        calls.append(args.adv_estimator)
        return np.full_like(rewards, 2.0), np.full_like(rewards, 3.0)

    monkeypatch.setitem(ADV_ESTIMATOR_REGISTRY, "constant_for_test", constant)
    args = dataclasses.replace(Args(), adv_estimator="constant_for_test")
    adv, ret = compute_advantage(_batch(), np.zeros((2, 3)), args)
    assert calls == ["constant_for_test"]
    assert (adv == 2.0).all() and (ret == 3.0).all()


def test_a_config_naming_an_unmodelled_estimator_is_refused_with_the_registrys_names() -> None:
    with pytest.raises(SandboxConfigError) as err:
        parse_args(["algorithm.adv_estimator=remax", "+sandbox.policy=loglinear"])
    assert f"use one of {', '.join(MODELLED)}" in str(err.value)
