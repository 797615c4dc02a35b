"""The sandbox's algorithm pieces against the formulas they implement.

Expected numbers are worked out by hand from the formula named in each test (verl's core_algos.py, torch's
AdamW / clip_grad_norm_ docs, J. Schulman's KL-estimator note), never taken from the code under test.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from sweeps.sandbox.args import Args, SandboxConfigError
from sweeps.sandbox.core_algos import (
    LOSS_AGG_MODES,
    AdaptiveKLController,
    FixedKLController,
    agg_loss,
    compute_advantage,
    compute_gae_advantage_return,
    kl_penalty,
    kl_penalty_grad,
    masked_whiten,
    token_level_scores,
)
from sweeps.sandbox.metrics import compute_data_metrics
from sweeps.sandbox.model import N_ROWS, chosen_logprobs, policy_forward, pretrained_weights
from sweeps.sandbox.optim import AdamW, clip_grad_norm, lr_factor, warmup_steps
from sweeps.sandbox.rollout import Batch, generate
from sweeps.sandbox.task import (
    DIGIT0,
    EOS,
    FILLER0,
    MARK,
    N_PAIRS,
    PAD,
    V,
    compute_score,
    decode,
    make_prompts,
    repeat_prompts,
)
from sweeps.sandbox.updates import actor_micro_batch, critic_micro_batch, mini_batch_weights, update_policy

# ----------------------------------------------------------------------------------------------------------------
# KL estimators (http://joschu.net/blog/kl-approx.html; core_algos.kl_penalty_forward)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        pytest.param("kl", 0.5, id="k1:logp-ref"),
        pytest.param("k1", 0.5, id="k1-alias"),
        pytest.param("abs", 0.5, id="abs"),
        pytest.param("mse", 0.125, id="k2:half-squared"),
        pytest.param("k2", 0.125, id="k2-alias"),
        # k3 = e^(ref-logp) - (ref-logp) - 1 = e^-0.5 + 0.5 - 1
        pytest.param("low_var_kl", 0.10653065971263342, id="k3"),
        pytest.param("k3+", 0.10653065971263342, id="k3-straight-through-value"),
    ],
)
def test_kl_penalty_values_follow_the_estimator_formulas(kind: str, expected: float) -> None:
    value = kl_penalty(np.array([-1.0]), np.array([-1.5]), kind)
    assert value[0] == pytest.approx(expected, rel=1e-12)


def test_low_var_kl_is_clamped_at_10() -> None:
    # ref - logp = 20: e^20 - 21 is far above verl's clamp of 10
    assert kl_penalty(np.array([-25.0]), np.array([-5.0]), "low_var_kl")[0] == 10.0


@pytest.mark.parametrize("kind", ["kl", "abs", "mse", "low_var_kl"])
def test_kl_penalty_gradient_matches_finite_differences(kind: str) -> None:
    logp = np.array([-1.0, -2.3, -0.4])
    ref = np.array([-1.5, -2.0, -0.41])
    eps = 1e-6
    numeric = (kl_penalty(logp + eps, ref, kind) - kl_penalty(logp - eps, ref, kind)) / (2 * eps)
    np.testing.assert_allclose(kl_penalty_grad(logp, ref, kind), numeric, rtol=1e-6, atol=1e-9)


def test_straight_through_kl_uses_k2_gradient() -> None:
    # verl: a trailing '+' keeps the forward value but back-propagates 0.5 * (logp - ref)^2
    logp, ref = np.array([-1.0]), np.array([-1.5])
    assert kl_penalty_grad(logp, ref, "low_var_kl+")[0] == pytest.approx(0.5)


# ----------------------------------------------------------------------------------------------------------------
# loss aggregation (core_algos.agg_loss)

LOSS = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
MASK = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    ("mode", "scale", "expected"),
    [
        pytest.param("token-mean", None, 7 / 3, id="token-mean:(1+2+4)/3"),
        pytest.param("seq-mean-token-sum", None, 3.5, id="seq-mean-token-sum:(3+4)/2"),
        pytest.param("seq-mean-token-mean", None, 2.75, id="seq-mean-token-mean:(1.5+4)/2"),
        pytest.param("seq-mean-token-sum-norm", None, 7 / 3, id="sum-norm:(3+4)/width3"),
        pytest.param("seq-mean-token-sum-norm", 7.0, 1.0, id="sum-norm:(3+4)/scale7"),
    ],
)
def test_agg_loss_modes(mode: str, scale: float | None, expected: float) -> None:
    assert agg_loss(LOSS, MASK, mode, scale) == pytest.approx(expected, rel=1e-7)


def test_agg_loss_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="Invalid loss_agg_mode: token-sum"):
        agg_loss(LOSS, MASK, "token-sum")


# ----------------------------------------------------------------------------------------------------------------
# advantage estimators (core_algos.py)


def test_gae_returns_follow_the_recursion() -> None:
    # delta_t = r_t + g V_{t+1} - V_t, A_t = delta_t + g l A_{t+1}, with g = 0.9, l = 0.5:
    # A2 = 1 - 0.7 = 0.3; A1 = (0.9*0.7 - 0.6) + 0.45*0.3 = 0.165; A0 = (0.9*0.6 - 0.5) + 0.45*0.165 = 0.11425
    rewards = np.array([[0.0, 0.0, 1.0]])
    values = np.array([[0.5, 0.6, 0.7]])
    adv, ret = compute_gae_advantage_return(rewards, values, np.ones((1, 3)), gamma=0.9, lam=0.5)
    np.testing.assert_allclose(ret, [[0.61425, 0.765, 1.0]], rtol=1e-12)
    raw = np.array([0.11425, 0.165, 0.3])
    whitened = (raw - raw.mean()) / math.sqrt(raw.var(ddof=1) + 1e-8)  # verl_F.masked_whiten (Bessel)
    np.testing.assert_allclose(adv[0], whitened, rtol=1e-7)  # masked_mean adds 1e-8 to its counts


def test_gae_ignores_padding_after_eos() -> None:
    rewards = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    values = np.array([[0.2, 0.4, 0.0], [0.1, 0.3, 0.5]])
    mask = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    _, ret = compute_gae_advantage_return(rewards, values, mask, gamma=1.0, lam=1.0)
    # with gamma = lam = 1 every return is the sequence's final reward
    np.testing.assert_allclose(ret * mask, mask, rtol=1e-12)


def _batch_for_scores(scores: list[float], uid: list[int], width: int = 3) -> tuple[Batch, np.ndarray]:
    n = len(scores)
    mask = np.ones((n, width))
    batch = Batch(np.full(n, 4), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.array(uid),
                  np.ones((n, width), dtype=np.int64), mask, np.zeros((n, width, 4), dtype=np.int64))
    return batch, token_level_scores(batch, np.array(scores))


def _args(**changes: Any) -> Args:
    return dataclasses.replace(Args(), **changes)


def test_grpo_normalises_by_the_unbiased_group_std() -> None:
    batch, rewards = _batch_for_scores([1, 0, 0, 1], [0, 0, 0, 0])
    adv, ret = compute_advantage(batch, rewards, _args(adv_estimator="grpo"))
    std = math.sqrt(4 * 0.25 / 3)  # torch.std is Bessel-corrected
    np.testing.assert_allclose(adv[:, 0], np.array([0.5, -0.5, -0.5, 0.5]) / (std + 1e-6), rtol=1e-12)
    np.testing.assert_array_equal(adv, ret)


def test_dr_grpo_only_subtracts_the_group_mean() -> None:
    batch, rewards = _batch_for_scores([1, 0, 0, 1], [0, 0, 0, 0])
    adv, _ = compute_advantage(batch, rewards, _args(adv_estimator="grpo", norm_adv_by_std_in_grpo=False))
    np.testing.assert_allclose(adv[:, 0], [0.5, -0.5, -0.5, 0.5], rtol=1e-12)


def test_grpo_group_of_one_keeps_the_raw_score() -> None:
    # core_algos.compute_grpo_outcome_advantage: a single-response group gets mean 0 and std 1
    batch, rewards = _batch_for_scores([1, 0], [0, 1])
    adv, _ = compute_advantage(batch, rewards, _args(adv_estimator="grpo"))
    np.testing.assert_allclose(adv[:, 0], [1 / (1 + 1e-6), 0.0], rtol=1e-12)


def test_rloo_uses_the_leave_one_out_mean() -> None:
    # baseline of each sample = mean of the other two: 1 - 0 = 1, 0 - 0.5 = -0.5
    batch, rewards = _batch_for_scores([1, 0, 0], [0, 0, 0])
    adv, _ = compute_advantage(batch, rewards, _args(adv_estimator="rloo"))
    np.testing.assert_allclose(adv[:, 0], [1.0, -0.5, -0.5], rtol=1e-12)


def test_reinforce_plus_plus_baseline_whitens_score_minus_group_mean() -> None:
    # group scores (1, 0) -> (0.5, -0.5) on each of 3 tokens; over the 6 tokens mean 0, unbiased variance
    # 6 * 0.25 / 5 = 0.3 -> +-0.5 / sqrt(0.3) (core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage)
    batch, rewards = _batch_for_scores([1.0, 0.0], [0, 0])
    adv, _ = compute_advantage(batch, rewards, _args(adv_estimator="reinforce_plus_plus_baseline"))
    h = 0.5 / math.sqrt(0.3 + 1e-8)
    np.testing.assert_allclose(adv, [[h] * 3, [-h] * 3], rtol=1e-9)


def test_masked_whiten_uses_the_unbiased_variance() -> None:
    # [1, 2, 3] (the 9 masked out): mean 2, unbiased variance (1 + 0 + 1) / 2 = 1 -> [-1, 0, 1]
    whitened = masked_whiten(np.array([1.0, 2.0, 3.0, 9.0]), np.array([1.0, 1.0, 1.0, 0.0]))
    np.testing.assert_allclose(whitened[:3], [-1.0, 0.0, 1.0], atol=1e-7)


def test_reinforce_plus_plus_returns_are_discounted_sums() -> None:
    batch, rewards = _batch_for_scores([1.0, 0.0], [0, 1])
    _, ret = compute_advantage(batch, rewards, _args(adv_estimator="reinforce_plus_plus", gamma=0.5))
    np.testing.assert_allclose(ret, [[0.25, 0.5, 1.0], [0.0, 0.0, 0.0]], rtol=1e-12)


# ----------------------------------------------------------------------------------------------------------------
# controllers, schedules, optimizer


@pytest.mark.parametrize(
    ("current_kl", "expected"),
    [
        pytest.param(0.2, 0.1 * (1 + 0.2 * 1000 / 10000), id="above-target:error-clipped-to+0.2"),
        pytest.param(0.05, 0.1 * (1 - 0.2 * 1000 / 10000), id="below-target:error-clipped-to-0.2"),
        pytest.param(0.11, 0.1 * (1 + 0.1 * 1000 / 10000), id="near-target:error-0.1"),
    ],
)
def test_adaptive_kl_controller_update(current_kl: float, expected: float) -> None:
    # beta <- beta * (1 + clip(kl/target - 1, -0.2, 0.2) * n_steps / horizon)   (core_algos.py)
    ctrl = AdaptiveKLController(0.1, target_kl=0.1, horizon=10000)
    ctrl.update(current_kl, n_steps=1000)
    assert float(ctrl.value) == pytest.approx(expected, rel=1e-12)


def test_fixed_kl_controller_never_moves() -> None:
    ctrl = FixedKLController(0.3)
    ctrl.update(5.0, n_steps=1000)
    assert ctrl.value == 0.3


@pytest.mark.parametrize(
    ("step", "kind", "min_ratio", "expected"),
    [
        pytest.param(0, "constant", 0.0, 0.0, id="warmup-starts-at-0"),
        pytest.param(5, "constant", 0.0, 0.5, id="warmup-linear"),
        pytest.param(10, "constant", 0.0, 1.0, id="after-warmup"),
        pytest.param(60, "cosine", 0.0, 0.5, id="cosine-halfway"),
        pytest.param(110, "cosine", 0.0, 0.0, id="cosine-end"),
        pytest.param(110, "cosine", 0.1, 0.1, id="cosine-floor"),
    ],
)
def test_lr_schedule(step: int, kind: str, min_ratio: float, expected: float) -> None:
    # torch_functional.get_{constant,cosine}_schedule_with_warmup with 10 warmup steps of 110
    assert lr_factor(step, 10, 110, kind, min_ratio, 0.5) == pytest.approx(expected, abs=1e-12)


def test_warmup_ratio_is_used_when_steps_are_negative() -> None:
    assert warmup_steps(-1, 0.1, 55) == 5  # int(0.1 * 55)
    assert warmup_steps(3, 0.1, 55) == 3


def test_clip_grad_norm_scales_to_max_norm() -> None:
    grad = np.array([3.0, 4.0])
    assert clip_grad_norm(grad, 1.0) == 5.0
    np.testing.assert_allclose(grad, np.array([3.0, 4.0]) / (5 + 1e-6), rtol=1e-12)
    small = np.array([0.3, 0.4])
    clip_grad_norm(small, 1.0)
    np.testing.assert_array_equal(small, [0.3, 0.4])


def test_adamw_first_step_moves_each_weight_by_lr() -> None:
    # bias-corrected first Adam step: m/sqrt(v) = g/|g|; decoupled decay: p * (1 - lr * wd)
    params = np.array([1.0, -2.0])
    opt = AdamW(params, (0.9, 0.999), weight_decay=0.01)
    opt.step(np.array([0.5, -3.0]), lr=0.1)
    np.testing.assert_allclose(params, [1.0 * 0.999 - 0.1, -2.0 * 0.999 + 0.1], rtol=1e-7)


# ----------------------------------------------------------------------------------------------------------------
# the losses: values, gradients, dual clip


def _rollout_batch(args: Args, n_prompts: int = 6, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    prompts = repeat_prompts(make_prompts(rng, n_prompts, 16, "error", False), args.n)
    uid = np.repeat(np.arange(n_prompts), args.n)
    weights = pretrained_weights(rng)
    batch = generate(weights, prompts, uid, 12, args.temperature, True, -1, 1.0, rng)
    logp = chosen_logprobs(policy_forward(weights, batch.rows, args.temperature), batch.responses)
    batch.extra["old_log_probs"] = logp + rng.normal(0, 0.4, logp.shape)  # off-policy: ratios clip
    batch.extra["ref_log_prob"] = logp + rng.normal(0, 0.3, logp.shape)
    batch.extra["advantages"] = rng.normal(0, 1.5, logp.shape) * batch.mask
    batch.extra["values"] = rng.normal(0, 0.5, logp.shape) * batch.mask
    batch.extra["returns"] = rng.normal(0, 1.0, logp.shape) * batch.mask
    return batch


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({}, id="pg-only"),
        pytest.param({"use_kl_loss": True, "kl_loss_coef": 0.3, "kl_loss_type": "low_var_kl"}, id="kl-k3"),
        pytest.param({"use_kl_loss": True, "kl_loss_coef": 0.3, "kl_loss_type": "k1"}, id="kl-k1"),
        pytest.param({"entropy_coeff": 0.05, "temperature": 0.7}, id="entropy-temperature"),
        pytest.param({"clip_ratio_c": 1.5, "clip_ratio_high": 0.28}, id="dual-clip-clip-higher"),
    ],
)
def test_actor_gradient_matches_finite_differences(mode: str, changes: dict[str, Any]) -> None:
    args = _args(n=2, loss_agg_mode=mode, **changes)
    batch = _rollout_batch(args)
    weights = pretrained_weights(np.random.default_rng(1))
    token_w = mini_batch_weights(batch.mask, mode, None, 12)
    out = actor_micro_batch(weights, batch, token_w, args, on_policy=False)
    rng = np.random.default_rng(2)
    for _ in range(3):
        direction = rng.normal(size=weights.shape)
        eps = 1e-6
        plus = actor_micro_batch(weights + eps * direction, batch, token_w, args, False).loss
        minus = actor_micro_batch(weights - eps * direction, batch, token_w, args, False).loss
        numeric = (plus - minus) / (2 * eps)
        assert float((out.grad * direction).sum()) == pytest.approx(numeric, rel=1e-4, abs=1e-7)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_critic_gradient_matches_finite_differences(mode: str) -> None:
    batch = _rollout_batch(_args(n=2))
    weights = np.random.default_rng(3).normal(0, 0.2, N_ROWS)
    token_w = mini_batch_weights(batch.mask, mode, None, 12)
    grad, _, _ = critic_micro_batch(weights, batch, token_w, cliprange_value=0.5)
    rng = np.random.default_rng(4)
    for _ in range(3):
        d = rng.normal(size=weights.shape)
        eps = 1e-6
        plus = critic_micro_batch(weights + eps * d, batch, token_w, 0.5)[1]
        minus = critic_micro_batch(weights - eps * d, batch, token_w, 0.5)[1]
        assert float((grad * d).sum()) == pytest.approx((plus - minus) / (2 * eps), rel=1e-4, abs=1e-7)


def _one_token_batch(logp_now: float, old: float, adv: float) -> tuple[Batch, np.ndarray]:
    """One response token whose current log-prob under `weights` is logp_now."""
    rows = np.array([[[0, 1, 2, 3]]])
    weights = np.zeros((4, V))
    # two-way softmax between token EOS and the rest: choose logits so log p(EOS) == logp_now
    weights[0, :] = -50.0
    weights[0, EOS] = 0.0
    weights[0, MARK] = math.log(1 / math.exp(logp_now) - 1)
    batch = Batch(np.array([4]), np.array([0]), np.array([0]), np.array([0]), np.array([[EOS]]),
                  np.ones((1, 1)), rows)
    batch.extra.update(old_log_probs=np.array([[old]]), advantages=np.array([[adv]]))
    return batch, weights


def test_dual_clip_caps_the_loss_of_negative_advantages() -> None:
    # ratio = e^(log 0.5 - log 0.1) = 5 > clip_ratio_c = 3 with A = -1: loss = -A * c = 3, no gradient
    batch, weights = _one_token_batch(math.log(0.5), math.log(0.1), -1.0)
    out = actor_micro_batch(weights, batch, np.ones((1, 1)), _args(), on_policy=False)
    assert out.pg_loss == pytest.approx(3.0)
    assert out.metrics["actor/pg_clipfrac_lower"] == pytest.approx(1.0)  # masked_mean: 1 / (1 + 1e-8)
    # the standard clip does not bind: max(-A r, -A clip(r)) = -A r = 5 is the unclipped branch
    assert out.metrics["actor/pg_clipfrac"] == 0.0
    assert np.all(out.grad == 0)


def test_clip_is_inactive_inside_the_trust_region() -> None:
    # ratio = 1.1 within [0.8, 1.2]: loss = -A * ratio, clipfrac 0, ppo_kl = old - logp = -log 1.1
    batch, weights = _one_token_batch(math.log(0.55), math.log(0.5), 2.0)
    out = actor_micro_batch(weights, batch, np.ones((1, 1)), _args(), on_policy=False)
    assert out.pg_loss == pytest.approx(-2.0 * 1.1)
    assert out.metrics["actor/pg_clipfrac"] == 0.0
    assert out.metrics["actor/ppo_kl"] == pytest.approx(-math.log(1.1), rel=1e-6)
    assert np.abs(out.grad).sum() > 0


def test_clip_higher_widens_only_the_upper_bound() -> None:
    # ratio 1.25 with A > 0: clipped at clip_ratio_high 0.2, free at 0.28 (DAPO's clip-higher)
    batch, weights = _one_token_batch(math.log(0.625), math.log(0.5), 1.0)
    clipped = actor_micro_batch(weights, batch, np.ones((1, 1)), _args(), on_policy=False)
    free = actor_micro_batch(weights, batch, np.ones((1, 1)), _args(clip_ratio_high=0.28), on_policy=False)
    assert clipped.metrics["actor/pg_clipfrac"] == pytest.approx(1.0) and clipped.pg_loss == pytest.approx(-1.2)
    assert free.metrics["actor/pg_clipfrac"] == 0.0 and free.pg_loss == pytest.approx(-1.25)


# ----------------------------------------------------------------------------------------------------------------
# the update: mini-batches, micro-batches, ranks


def _update(args: Args, batch: Batch, n_ranks: int) -> tuple[np.ndarray, dict[str, Any]]:
    weights = pretrained_weights(np.random.default_rng(1))
    opt = AdamW(weights, args.betas, args.weight_decay)
    metrics = update_policy(weights, opt, batch, args, lr=0.01, n_ranks=n_ranks)
    return weights, metrics


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_micro_batch_size_does_not_change_the_update(mode: str) -> None:
    base = _args(n=4, train_batch_size=8, ppo_mini_batch_size=4, ppo_epochs=2, loss_agg_mode=mode,
                 use_kl_loss=True, entropy_coeff=0.01)
    batch = _rollout_batch(base, n_prompts=8)
    reference, ref_metrics = _update(dataclasses.replace(base, ppo_micro_batch_size_per_gpu=None), batch, 2)
    layouts: list[dict[str, Any]] = [{"ppo_micro_batch_size_per_gpu": 1}, {"ppo_micro_batch_size_per_gpu": 4},
                                     {"ppo_micro_batch_size": 4},
                                     {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 40}]
    for changes in layouts:
        weights, metrics = _update(dataclasses.replace(base, **changes), batch, 2)
        np.testing.assert_allclose(weights, reference, rtol=1e-10, atol=1e-12, err_msg=str(changes))
        for key in ("actor/pg_loss", "actor/kl_loss", "actor/grad_norm"):
            assert float(metrics[key]) == pytest.approx(float(ref_metrics[key]), rel=1e-9), (key, changes)


def test_rank_count_does_not_change_a_single_mini_batch_update() -> None:
    base = _args(n=4, train_batch_size=8, ppo_mini_batch_size=8, ppo_epochs=1, ppo_micro_batch_size_per_gpu=2)
    batch = _rollout_batch(base, n_prompts=8)
    reference, _ = _update(base, batch, 1)
    for ranks in (2, 4, 8):
        weights, _ = _update(base, batch, ranks)
        np.testing.assert_allclose(weights, reference, rtol=1e-10, atol=1e-12)


def test_pg_loss_is_the_mean_over_optimizer_steps() -> None:
    # verl >= 0.8 logs the mean mini-batch loss of the update (0.9.1 verl/workers/utils/losses.py:73-81,
    # verl/utils/metric/utils.py:150-154); 0.7's dp_actor summed them. With A = 1 on every token each
    # mini-batch loss is about -1 (ratio near 1), so the mean of the 4 mini-batches x 2 epochs is about -1.
    base = _args(n=2, train_batch_size=8, ppo_mini_batch_size=2, ppo_epochs=2)
    batch = _rollout_batch(base, n_prompts=8)
    batch.extra["advantages"] = batch.mask.copy()
    start = pretrained_weights(np.random.default_rng(1))  # the weights _update starts from
    batch.extra["old_log_probs"] = chosen_logprobs(policy_forward(start, batch.rows, 1.0), batch.responses)
    _, metrics = _update(base, batch, 1)
    assert float(metrics["actor/pg_loss"]) == pytest.approx(-1.0, abs=0.05)  # 8 losses of about -1, averaged
    _, single = _update(dataclasses.replace(base, ppo_mini_batch_size=8, ppo_epochs=1), batch, 1)
    assert float(single["actor/pg_loss"]) == pytest.approx(-1.0, abs=1e-12)  # on-policy: ratio is exactly 1


def test_on_policy_shortcut_zeroes_clipfrac_and_ppo_kl() -> None:
    # dp_actor: one mini-batch and one epoch use old_log_prob = log_prob.detach(); stale old log-probs are ignored
    base = _args(n=2, train_batch_size=8, ppo_mini_batch_size=8, ppo_epochs=1)
    batch = _rollout_batch(base, n_prompts=8)
    _, metrics = _update(base, batch, 2)
    assert float(metrics["actor/pg_clipfrac"]) == 0.0
    assert float(metrics["actor/ppo_kl"]) == 0.0
    assert float(metrics["actor/pg_clipfrac_lower"]) == 0.0
    _, two_epochs = _update(dataclasses.replace(base, ppo_epochs=2), batch, 2)
    assert float(two_epochs["actor/ppo_kl"]) != 0.0


# ----------------------------------------------------------------------------------------------------------------
# the task


def test_score_needs_the_marker_the_right_number_and_eos() -> None:
    d = {str(i): DIGIT0 + i for i in range(10)}
    cases = [
        ([FILLER0, MARK, d["1"], d["2"], EOS], 12, 1.0),  # "let #### 12"
        ([MARK, d["1"], d["2"], PAD], 12, 0.0),  # truncated: no EOS
        ([MARK, d["7"], EOS, PAD], 12, 0.0),  # wrong number
        ([d["1"], d["2"], EOS, PAD], 12, 0.0),  # no marker
        ([MARK, d["3"], MARK, d["5"], EOS], 5, 1.0),  # the last answer counts
        ([MARK, d["0"], d["5"], EOS, PAD], 5, 0.0),  # "05" != "5" (string compare, as gsm8k)
    ]
    for tokens, answer, expected in cases:
        length = tokens.index(EOS) + 1 if EOS in tokens else len(tokens)
        got = compute_score(np.array([tokens]), np.array([length]), np.array([answer]))[0]
        assert got == expected, (decode(tokens), answer)


def test_decode_renders_gsm8k_style_text() -> None:
    assert decode([FILLER0 + 3, MARK, DIGIT0 + 1, DIGIT0 + 4, EOS]) == "so #### 14"


def test_prompt_truncation_modes() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(SandboxConfigError, match="is longer than 3"):
        make_prompts(rng, 50, 3, "error", False)
    left = make_prompts(np.random.default_rng(0), 50, 3, "left", False)
    assert left.lengths.max() == 3 and np.all(left.pair == N_PAIRS - 1)  # "a + b =" no longer fits
    with pytest.raises(SandboxConfigError, match="filters out every prompt"):
        make_prompts(np.random.default_rng(0), 50, 3, "error", True)
    kept = make_prompts(np.random.default_rng(0), 200, 5, "error", True)
    assert kept.lengths.max() <= 5 and np.all(kept.pair < N_PAIRS - 1)


# ----------------------------------------------------------------------------------------------------------------
# data metrics (metric_utils.compute_data_metrics)


def test_data_metrics_on_a_hand_built_batch() -> None:
    # two responses in a width-3 window: A fills it (truncation), B stops after 1 token
    mask = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    batch = Batch(np.array([4, 6]), np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64), np.array([0, 1]),
                  np.ones((2, 3), dtype=np.int64), mask, np.zeros((2, 3, 4), dtype=np.int64))
    batch.extra.update(
        token_level_scores=np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]),
        token_level_rewards=np.array([[-0.1, -0.1, 0.9], [-0.1, 0.0, 0.0]]),
        advantages=np.array([[0.5, -0.5, 2.0], [-1.0, 9.0, 9.0]]),  # 9 sits on padding: must be ignored
        returns=np.array([[1.0, 1.0, 1.0], [0.0, 7.0, 7.0]]),
        values=np.array([[0.8, 0.1, 0.6], [0.2, 0.0, 0.0]]),
    )
    m = compute_data_metrics(batch, use_critic=True, max_prompt_length=6, max_response_length=3)
    assert (m["critic/score/mean"], m["critic/score/max"], m["critic/score/min"]) == (0.5, 1.0, 0.0)
    assert m["critic/rewards/mean"] == pytest.approx((0.7 - 0.1) / 2)
    assert (m["critic/advantages/max"], m["critic/advantages/min"]) == (2.0, -1.0)
    assert m["critic/advantages/mean"] == pytest.approx(0.25)
    assert m["critic/returns/mean"] == pytest.approx(0.75)
    diff = np.array([0.2, 0.9, 0.4, -0.2])  # returns - values on the 4 response tokens
    ret = np.array([1.0, 1.0, 1.0, 0.0])
    var = lambda x: ((x - x.mean()) ** 2).sum() / (len(x) - 1)  # noqa: E731 (torch.var is unbiased)
    assert m["critic/vf_explained_var"] == pytest.approx(1 - var(diff) / (var(ret) + 1e-5), rel=1e-12)
    assert (m["response_length/mean"], m["response_length/max"], m["response_length/min"]) == (2.0, 3.0, 1.0)
    assert m["response_length/clip_ratio"] == 0.5  # length == max_response_length
    assert m["prompt_length/clip_ratio"] == 0.5  # length == max_prompt_length
    assert m["response/aborted_ratio"] == 0.0
