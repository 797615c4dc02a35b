"""sweeps.sandbox.lm_algos against the formulas it implements, and it and the sandbox's NumPy advantage estimators
and KL controller against verl's own functions where verl imports (their hand-computed tests: test_sandbox_algos.py).

The hand-computed tests write each expected number out from the formula named beside it (verl's core_algos.py
and torch_functional.py, PPO's clipped objective, J. Schulman's KL-estimator note), never from the code under test.
The parity tests run verl's functions and the mirrors on the same random tensors; they skip, saying why, where
``verl.trainer.ppo.core_algos`` cannot be imported (verl is no dependency of the project: it pulls in Ray,
transformers and tensordict).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the language-model sandbox needs it)")

import numpy as np  # noqa: E402

from sweeps.sandbox import lm_algos as la  # noqa: E402
from sweeps.sandbox.core_algos import AdaptiveKLController, compute_advantage, masked_whiten  # noqa: E402


def _t(*rows: Any) -> torch.Tensor:
    return torch.tensor(rows if len(rows) > 1 else rows[0], dtype=torch.float64)


# ----------------------------------------------------------------------------------------------------------------
# masked statistics


def test_masked_mean_ignores_masked_out_values_even_nan() -> None:
    # (1 + 2 + 4) / 3; the NaN sits under mask 0 (torch_functional.masked_sum replaces it by 0)
    value = la.masked_mean(_t([1.0, 2.0, float("nan"), 4.0]), _t([1.0, 1.0, 0.0, 1.0]))
    assert value.item() == pytest.approx(7 / 3, rel=1e-8)


# ----------------------------------------------------------------------------------------------------------------
# KL


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        pytest.param("kl", 0.5, id="k1"),
        pytest.param("k1", 0.5, id="k1-alias"),
        pytest.param("abs", 0.5, id="abs"),
        pytest.param("mse", 0.125, id="k2=(logp-ref)^2/2"),
        pytest.param("k2", 0.125, id="k2-alias"),
        pytest.param("low_var_kl", math.exp(-0.5) + 0.5 - 1, id="k3=e^(ref-logp)-(ref-logp)-1"),
        pytest.param("k3", math.exp(-0.5) + 0.5 - 1, id="k3-alias"),
        pytest.param("k3+", math.exp(-0.5) + 0.5 - 1, id="k3+-value-is-k3"),
    ],
)
def test_kl_penalty_estimators(kind: str, expected: float) -> None:
    assert la.kl_penalty(_t([-1.0]), _t([-1.5]), kind).item() == pytest.approx(expected, rel=1e-12)


def test_low_var_kl_is_clamped_at_10() -> None:
    # ref - logp = 30 is first clamped to 20; e^20 - 20 - 1 is then clamped to 10
    assert la.kl_penalty(_t([-31.0]), _t([-1.0]), "low_var_kl").item() == 10.0


def test_straight_through_kl_takes_k2s_gradient() -> None:
    # "k3+": value of k3, gradient of k2 = (logp - ref) = 0.5 with respect to logp
    logp = _t([-1.0]).requires_grad_()
    la.kl_penalty(logp, _t([-1.5]), "k3+").sum().backward()
    assert logp.grad is not None and logp.grad.item() == pytest.approx(0.5, rel=1e-12)


def test_unknown_kl_penalty_raises() -> None:
    with pytest.raises(NotImplementedError):
        la.kl_penalty(_t([0.0]), _t([0.0]), "full")


# ----------------------------------------------------------------------------------------------------------------
# losses


_LOSS_MAT = ([1.0, 2.0, 3.0], [4.0, 0.0, 0.0])
_LOSS_MASK = ([1.0, 1.0, 1.0], [1.0, 0.0, 0.0])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        pytest.param("token-mean", 10 / 4, id="token-mean:10/4"),
        pytest.param("token-sum", 10.0, id="token-sum"),
        pytest.param("seq-mean-token-sum", (6 + 4) / 2, id="seq-mean-token-sum"),
        pytest.param("seq-mean-token-sum-norm", (6 + 4) / 2 / 3, id="seq-mean-token-sum-norm:/width"),
        pytest.param("seq-mean-token-mean", (6 / 3 + 4 / 1) / 2, id="seq-mean-token-mean"),
    ],
)
def test_agg_loss_modes(mode: str, expected: float) -> None:
    assert la.agg_loss(_t(*_LOSS_MAT), _t(*_LOSS_MASK), mode).item() == pytest.approx(expected, rel=1e-8)


def test_agg_loss_token_mean_over_the_global_batch_times_dp_size() -> None:
    # this rank's 10 over 8 global tokens, times dp_size 2 (ranks' gradients are averaged)
    loss = la.agg_loss(_t(*_LOSS_MAT), _t(*_LOSS_MASK), "token-mean", dp_size=2, batch_num_tokens=8)
    assert loss.item() == pytest.approx(10 / 8 * 2, rel=1e-12)
    with pytest.raises(ValueError, match="batch_num_tokens is required"):
        la.agg_loss(_t(*_LOSS_MAT), _t(*_LOSS_MASK), "token-mean", dp_size=2)
    with pytest.raises(ValueError, match="Invalid loss_agg_mode"):
        la.agg_loss(_t(*_LOSS_MAT), _t(*_LOSS_MASK), "mean")


def test_ppo_policy_loss_clips_and_dual_clips() -> None:
    # four tokens, old log-prob 0, ratios (1.5, 4, 0.5, 1), advantages (+1, -1, -1, +1), clip 0.2, c 3:
    #   A=+1, r=1.5: max(-1.5, -1.2) = -1.2, clipped (upper)
    #   A=-1, r=4:   max(4, 1.2) = 4, then dual clip min(3, 4) = 3 (pg_clipfrac_lower)
    #   A=-1, r=0.5: max(0.5, 0.8) = 0.8, clipped (lower side of the ratio)
    #   A=+1, r=1:   -1, not clipped
    ratios = [1.5, 4.0, 0.5, 1.0]
    log_prob = _t([[math.log(r) for r in ratios]])
    loss, metrics = la.compute_policy_loss_vanilla(
        old_log_prob=torch.zeros_like(log_prob),
        log_prob=log_prob,
        advantages=_t([[1.0, -1.0, -1.0, 1.0]]),
        response_mask=torch.ones_like(log_prob),
    )
    assert loss.item() == pytest.approx((-1.2 + 3 + 0.8 - 1) / 4, rel=1e-8)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(2 / 4, rel=1e-6)
    assert metrics["actor/pg_clipfrac_lower"] == pytest.approx(1 / 4, rel=1e-6)
    # ppo_kl = mean(old - new) = -(ln 1.5 + ln 4 + ln 0.5 + 0) / 4 = -ln 3 / 4
    assert metrics["actor/ppo_kl"] == pytest.approx(-math.log(3) / 4, rel=1e-6)


def test_ppo_policy_loss_asymmetric_clip_high() -> None:
    # clip_ratio_high 0.28 (DAPO's clip-higher): A=+1, r=1.5 -> -1.28
    loss, _ = la.compute_policy_loss_vanilla(
        _t([[0.0]]), _t([[math.log(1.5)]]), _t([[1.0]]), _t([[1.0]]), clip_ratio_high=0.28
    )
    assert loss.item() == pytest.approx(-1.28, rel=1e-8)


def test_ppo_policy_loss_rejects_clip_ratio_c_at_or_below_1() -> None:
    with pytest.raises(ValueError, match="clip_ratio_c"):
        la.compute_policy_loss_vanilla(_t([[0.0]]), _t([[0.0]]), _t([[1.0]]), _t([[1.0]]), clip_ratio_c=1.0)


def test_value_loss_takes_the_larger_of_clipped_and_unclipped() -> None:
    # token 1: v=2, v_old=1, R=3, clip 0.5 -> clipped v 1.5; max((2-3)^2, (1.5-3)^2) = 2.25, clipped
    # token 2: v=1.2, v_old=1, R=3 -> inside the clip; (1.8)^2 = 3.24 both ways
    vf_loss, vf_clipfrac = la.compute_value_loss(
        vpreds=_t([[2.0, 1.2]]), returns=_t([[3.0, 3.0]]), values=_t([[1.0, 1.0]]), response_mask=_t([[1.0, 1.0]]),
        cliprange_value=0.5,
    )
    assert vf_loss.item() == pytest.approx(0.5 * (2.25 + 3.24) / 2, rel=1e-8)
    assert vf_clipfrac.item() == pytest.approx(0.5, rel=1e-6)


# ----------------------------------------------------------------------------------------------------------------
# parity with verl's own functions


def _verl() -> tuple[Any, Any]:
    try:
        from verl.trainer.ppo import core_algos
        from verl.utils import torch_functional
    except Exception as exc:  # verl brings Ray, transformers, tensordict...; any of them may be missing
        pytest.skip(f"verl cannot be imported here ({type(exc).__name__}: {exc}); parity with core_algos not checked")
    return core_algos, torch_functional


class _ActorConfig(dict):
    """The fields of verl's ActorConfig that compute_policy_loss_vanilla reads (attributes, .get, global batch)."""

    def __getattr__(self, name: str) -> Any:
        return self[name]


def _batch(seed: int, bsz: int = 12, width: int = 7) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, width + 1, (bsz,), generator=gen)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).float()
    rewards = torch.zeros(bsz, width)
    rewards[torch.arange(bsz), lengths - 1] = torch.randint(0, 2, (bsz,), generator=gen).float()
    old = -torch.rand(bsz, width, generator=gen) * 3
    return {
        "mask": mask,
        "rewards": rewards,
        "old": old,
        "new": old + torch.randn(bsz, width, generator=gen) * 0.4,
        "ref": old + torch.randn(bsz, width, generator=gen) * 0.3,
        "adv": torch.randn(bsz, width, generator=gen),
        "values": torch.randn(bsz, width, generator=gen),
        "vpreds": torch.randn(bsz, width, generator=gen),
        "logits": torch.randn(bsz, width, 11, generator=gen),
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_losses_and_kl_with_verl(seed: int) -> None:
    core_algos, verl_f = _verl()
    b = _batch(seed)
    for mode in ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-sum-norm", "seq-mean-token-mean"):
        ours = la.agg_loss(b["adv"], b["mask"], mode)
        torch.testing.assert_close(ours, core_algos.agg_loss(b["adv"], b["mask"], mode))
    for kind in ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "k3+"):
        ours = la.kl_penalty(b["new"], b["ref"], kind)
        torch.testing.assert_close(ours, core_algos.kl_penalty(b["new"], b["ref"], kind))
    for low, high, c in ((0.2, 0.2, 3.0), (0.2, 0.28, 3.0), (0.1, 0.3, 1.5)):
        config = _ActorConfig(clip_ratio=0.2, clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=c)
        config["global_batch_info"] = {}
        theirs = core_algos.compute_policy_loss_vanilla(b["old"], b["new"], b["adv"], b["mask"], "token-mean", config)
        ours = la.compute_policy_loss_vanilla(
            b["old"], b["new"], b["adv"], b["mask"], "token-mean", clip_ratio_low=low, clip_ratio_high=high,
            clip_ratio_c=c,
        )
        torch.testing.assert_close(ours[0], theirs[0])
        assert ours[1] == pytest.approx(theirs[1], rel=1e-6, abs=1e-9)
    torch.testing.assert_close(
        la.compute_value_loss(b["vpreds"], b["rewards"], b["values"], b["mask"], 0.5),
        core_algos.compute_value_loss(b["vpreds"], b["rewards"], b["values"], b["mask"], 0.5),
    )
    np.testing.assert_allclose(
        masked_whiten(b["adv"].double().numpy(), b["mask"].double().numpy()),
        verl_f.masked_whiten(b["adv"].double(), b["mask"].double()).numpy(), rtol=1e-12, atol=1e-12,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_advantages_with_verl(seed: int) -> None:
    """The sandbox's advantage estimators and KL controller (sweeps/sandbox/core_algos.py, NumPy, shared by both
    policies) against verl's core_algos on the same batch."""
    core_algos, _ = _verl()
    b = {k: v.double() for k, v in _batch(seed).items()}
    index = np.array([i // 4 for i in range(b["mask"].shape[0])])  # groups of 4, as rollout.n=4
    rewards, mask = b["rewards"].numpy(), b["mask"].numpy()
    batch = SimpleNamespace(mask=mask, uid=index, extra={"values": b["values"].numpy()})

    def ours(estimator: str, **extra: Any) -> tuple[np.ndarray, np.ndarray]:
        args = SimpleNamespace(adv_estimator=estimator, gamma=0.99, lam=0.95, norm_adv_by_std_in_grpo=True)
        return compute_advantage(batch, rewards, SimpleNamespace(**{**vars(args), **extra}))  # type: ignore[arg-type]

    def close(mine: tuple[np.ndarray, np.ndarray], theirs: tuple[torch.Tensor, torch.Tensor]) -> None:
        for a, t in zip(mine, theirs, strict=True):
            np.testing.assert_allclose(a, t.numpy(), rtol=1e-6, atol=1e-9)

    close(ours("grpo"), core_algos.compute_grpo_outcome_advantage(b["rewards"], b["mask"], index))
    close(ours("grpo", norm_adv_by_std_in_grpo=False),
          core_algos.compute_grpo_outcome_advantage(b["rewards"], b["mask"], index, norm_adv_by_std_in_grpo=False))
    close(ours("rloo"), core_algos.compute_rloo_outcome_advantage(b["rewards"], b["mask"], index))
    close(ours("reinforce_plus_plus_baseline"),
          core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(b["rewards"], b["mask"], index))
    close(ours("gae"), core_algos.compute_gae_advantage_return(b["rewards"], b["values"], b["mask"], gamma=0.99,
                                                               lam=0.95))
    close(ours("reinforce_plus_plus"), core_algos.compute_reinforce_plus_plus_outcome_advantage(
        b["rewards"], b["mask"], config=_ActorConfig(gamma=0.99)))  # verl reads gamma from AlgoConfig
    ours_ctl, theirs_ctl = AdaptiveKLController(0.05, 0.01, 1000), core_algos.AdaptiveKLController(0.05, 0.01, 1000)
    for kl in (0.002, 0.03, 0.011):
        ours_ctl.update(kl, 64)
        theirs_ctl.update(kl, 64)
    assert ours_ctl.value == pytest.approx(theirs_ctl.value, rel=1e-12)
