"""sweeps._lm_algos against the formulas it implements, and against verl's own functions where verl imports.

The hand-computed tests write each expected number out from the formula named beside it (verl's core_algos.py
and torch_functional.py, PPO's clipped objective, J. Schulman's KL-estimator note), never from the code under test.
The parity tests run verl's functions and the mirrors on the same random tensors; they skip, saying why, where
``verl.trainer.ppo.core_algos`` cannot be imported (verl is no dependency of the project: it pulls in Ray,
transformers and tensordict).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the language-model sandbox needs it)")

from sweeps import _lm_algos as la  # noqa: E402


def _t(*rows: Any) -> torch.Tensor:
    return torch.tensor(rows if len(rows) > 1 else rows[0], dtype=torch.float64)


# ----------------------------------------------------------------------------------------------------------------
# masked statistics


def test_masked_mean_ignores_masked_out_values_even_nan() -> None:
    # (1 + 2 + 4) / 3; the NaN sits under mask 0 (torch_functional.masked_sum replaces it by 0)
    value = la.masked_mean(_t([1.0, 2.0, float("nan"), 4.0]), _t([1.0, 1.0, 0.0, 1.0]))
    assert value.item() == pytest.approx(7 / 3, rel=1e-8)


def test_masked_whiten_uses_the_unbiased_variance() -> None:
    # [1, 2, 3]: mean 2, unbiased variance ((1 + 0 + 1) / 2) = 1 -> [-1, 0, 1]
    whitened = la.masked_whiten(_t([1.0, 2.0, 3.0]), _t([1.0, 1.0, 1.0]))
    assert whitened.tolist() == pytest.approx([-1.0, 0.0, 1.0], abs=1e-7)


def test_masked_var_rejects_a_single_token() -> None:
    with pytest.raises(ValueError, match="sum of the mask is one"):
        la.masked_var(_t([1.0, 2.0]), _t([1.0, 0.0]))


def test_entropy_from_logits() -> None:
    # uniform over 4 tokens: ln 4; probabilities (1/4, 3/4) from logits (0, ln 3): -(1/4 ln 1/4 + 3/4 ln 3/4)
    assert la.entropy_from_logits(_t([0.0, 0.0, 0.0, 0.0])).item() == pytest.approx(math.log(4), rel=1e-12)
    entropy = la.entropy_from_logits(_t([0.0, math.log(3)]))
    assert entropy.item() == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), rel=1e-12)


def test_entropy_from_logits_is_nan_with_minus_inf_logits_as_in_verl() -> None:
    # verl's formula multiplies softmax (0) by the logit (-inf): a top-k/top-p mask must use a finite fill value
    assert math.isnan(la.entropy_from_logits(_t([0.0, -math.inf])).item())


def test_logprobs_from_logits_is_log_softmax_at_the_label() -> None:
    # logits (0, ln 3): p = (1/4, 3/4)
    logp = la.logprobs_from_logits(_t([[0.0, math.log(3)], [0.0, math.log(3)]]), torch.tensor([1, 0]))
    assert logp.tolist() == pytest.approx([math.log(0.75), math.log(0.25)], rel=1e-12)


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


def test_compute_rewards_subtracts_the_scaled_k1() -> None:
    # 0 - 0.1 * (-1 - -1.5) = -0.05; 1 - 0.1 * 0 = 1
    rewards = la.compute_rewards(_t([[0.0, 1.0]]), _t([[-1.0, -1.0]]), _t([[-1.5, -1.0]]), 0.1)
    assert rewards.tolist()[0] == pytest.approx([-0.05, 1.0], rel=1e-12)


def test_adaptive_kl_controller_moves_at_most_20_percent_of_n_over_horizon() -> None:
    # kl 3x the target: error clipped to +0.2, coefficient * (1 + 0.2 * 10 / 100) = 0.1 * 1.02
    ctl = la.AdaptiveKLController(init_kl_coef=0.1, target_kl=0.01, horizon=100)
    ctl.update(current_kl=0.03, n_steps=10)
    assert ctl.value == pytest.approx(0.102, rel=1e-12)
    fixed = la.FixedKLController(0.1)
    fixed.update(0.03, 10)
    assert fixed.value == 0.1


# ----------------------------------------------------------------------------------------------------------------
# advantages


def test_grpo_normalises_by_the_unbiased_group_std() -> None:
    # group a: scores (1, 0, 0, 1), mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = sqrt(1/3);
    # advantage +-0.5 / (sqrt(1/3) + 1e-6). group b (one response): mean 0, std 1 -> 1 / (1 + 1e-6)
    rewards = _t([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    mask = _t([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    adv, returns = la.compute_grpo_outcome_advantage(rewards, mask, ["a", "a", "a", "a", "b"])
    a = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    # rel 1e-7: the group-of-one std is verl's float32 torch.tensor(1.0), so 1 + 1e-6 is rounded to float32
    assert adv[:, 0].tolist() == pytest.approx([a, -a, -a, a, 1 / (1 + 1e-6)], rel=1e-7)
    assert adv[3, 1].item() == 0.0  # masked token
    assert torch.equal(adv, returns)


def test_dr_grpo_does_not_divide_by_std() -> None:
    adv, _ = la.compute_grpo_outcome_advantage(
        _t([[1.0], [0.0], [0.0], [0.0]]), _t([[1.0], [1.0], [1.0], [1.0]]), [0, 0, 0, 0], norm_adv_by_std_in_grpo=False
    )
    assert adv[:, 0].tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25], rel=1e-12)


def test_a_flat_group_has_zero_advantage() -> None:
    adv, _ = la.compute_grpo_outcome_advantage(_t([[1.0], [1.0], [1.0]]), _t([[1.0], [1.0], [1.0]]), [0, 0, 0])
    assert adv.abs().max().item() == 0.0


def test_rloo_subtracts_the_mean_of_the_others() -> None:
    # scores (1, 0, 0): 1 - mean(0, 0) = 1; 0 - mean(1, 0) = -0.5
    adv, _ = la.compute_rloo_outcome_advantage(_t([[1.0], [0.0], [0.0]]), _t([[1.0], [1.0], [1.0]]), [7, 7, 7])
    assert adv[:, 0].tolist() == pytest.approx([1.0, -0.5, -0.5], rel=1e-12)


def test_gae_by_hand() -> None:
    # gamma 1, lam 0.9, rewards (0, 1), values (0.2, 0.6), third token masked out:
    # t=1: delta = 1 - 0.6 = 0.4, A1 = 0.4; t=0: delta = 0 + 0.6 - 0.2 = 0.4, A0 = 0.4 + 0.9 * 0.4 = 0.76
    # returns = A + V = (0.96, 1.0); whitened over the two tokens: +-1/sqrt(2)
    adv, returns = la.compute_gae_advantage_return(
        _t([[0.0, 1.0, 5.0]]), _t([[0.2, 0.6, 9.0]]), _t([[1.0, 1.0, 0.0]]), gamma=1.0, lam=0.9
    )
    assert returns[0, :2].tolist() == pytest.approx([0.96, 1.0], rel=1e-12)
    assert adv[0, :2].tolist() == pytest.approx([1 / math.sqrt(2), -1 / math.sqrt(2)], rel=1e-6)


def test_reinforce_plus_plus_whitens_the_return_to_go() -> None:
    # returns (1, 1) and (0, 0): mean 0.5, unbiased var 4 * 0.25 / 3 = 1/3 -> +-0.5 * sqrt(3)
    adv, returns = la.compute_reinforce_plus_plus_outcome_advantage(
        _t([[0.0, 1.0], [0.0, 0.0]]), _t([[1.0, 1.0], [1.0, 1.0]]), gamma=1.0
    )
    assert returns.tolist() == [[1.0, 1.0], [0.0, 0.0]]
    h = 0.5 * math.sqrt(3)
    assert adv.flatten().tolist() == pytest.approx([h, h, -h, -h], rel=1e-6)


def test_reinforce_plus_plus_baseline_whitens_score_minus_group_mean() -> None:
    # group scores (1, 0) -> (0.5, -0.5) on both tokens; whitened like the case above: +-0.5 * sqrt(3)
    adv, _ = la.compute_reinforce_plus_plus_baseline_outcome_advantage(
        _t([[0.0, 1.0], [0.0, 0.0]]), _t([[1.0, 1.0], [1.0, 1.0]]), [0, 0]
    )
    h = 0.5 * math.sqrt(3)
    assert adv.flatten().tolist() == pytest.approx([h, h, -h, -h], rel=1e-6)


def test_remax_subtracts_the_greedy_baseline() -> None:
    adv, returns = la.compute_remax_outcome_advantage(_t([[0.0, 1.0]]), _t([0.25]), _t([[1.0, 1.0]]))
    assert returns.tolist() == [[1.0, 1.0]]
    assert adv.tolist() == [[0.75, 0.75]]


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


def test_entropy_loss_is_the_token_mean_entropy() -> None:
    logits = torch.zeros(2, 3, 4, dtype=torch.float64)
    mask = _t([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert la.compute_entropy_loss(logits, mask).item() == pytest.approx(math.log(4), rel=1e-8)


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
    torch.testing.assert_close(
        la.compute_entropy_loss(b["logits"], b["mask"]), core_algos.compute_entropy_loss(b["logits"], b["mask"])
    )
    torch.testing.assert_close(la.entropy_from_logits(b["logits"]), verl_f.entropy_from_logits(b["logits"]))
    torch.testing.assert_close(la.masked_whiten(b["adv"], b["mask"]), verl_f.masked_whiten(b["adv"], b["mask"]))
    torch.testing.assert_close(
        la.compute_rewards(b["rewards"], b["old"], b["ref"], 0.05),
        core_algos.compute_rewards(b["rewards"], b["old"], b["ref"], 0.05),
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_advantages_with_verl(seed: int) -> None:
    import numpy as np

    core_algos, _ = _verl()
    b = _batch(seed)
    index = np.array([i // 4 for i in range(b["mask"].shape[0])])  # groups of 4, as rollout.n=4
    for ours_fn, theirs_fn in (
        (la.compute_grpo_outcome_advantage, core_algos.compute_grpo_outcome_advantage),
        (la.compute_rloo_outcome_advantage, core_algos.compute_rloo_outcome_advantage),
        (
            la.compute_reinforce_plus_plus_baseline_outcome_advantage,
            core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage,
        ),
    ):
        torch.testing.assert_close(ours_fn(b["rewards"], b["mask"], index), theirs_fn(b["rewards"], b["mask"], index))
    ours_dr = la.compute_grpo_outcome_advantage(b["rewards"], b["mask"], index, norm_adv_by_std_in_grpo=False)
    theirs_dr = core_algos.compute_grpo_outcome_advantage(b["rewards"], b["mask"], index, norm_adv_by_std_in_grpo=False)
    torch.testing.assert_close(ours_dr, theirs_dr)
    torch.testing.assert_close(
        la.compute_gae_advantage_return(b["rewards"], b["values"], b["mask"], gamma=0.99, lam=0.95),
        core_algos.compute_gae_advantage_return(b["rewards"], b["values"], b["mask"], gamma=0.99, lam=0.95),
    )
    torch.testing.assert_close(
        la.compute_reinforce_plus_plus_outcome_advantage(b["rewards"], b["mask"], gamma=0.99),
        core_algos.compute_reinforce_plus_plus_outcome_advantage(
            b["rewards"], b["mask"], config=_ActorConfig(gamma=0.99)  # verl reads gamma from AlgoConfig
        ),
    )
    baselines = torch.rand(b["mask"].shape[0], generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(
        la.compute_remax_outcome_advantage(b["rewards"], baselines, b["mask"]),
        core_algos.compute_remax_outcome_advantage(b["rewards"], baselines, b["mask"]),
    )
    ours_ctl, theirs_ctl = la.AdaptiveKLController(0.05, 0.01, 1000), core_algos.AdaptiveKLController(0.05, 0.01, 1000)
    for kl in (0.002, 0.03, 0.011):
        ours_ctl.update(kl, 64)
        theirs_ctl.update(kl, 64)
    assert ours_ctl.value == pytest.approx(theirs_ctl.value, rel=1e-12)
