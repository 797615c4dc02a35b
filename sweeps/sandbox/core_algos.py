"""ALGO LOGIC: KL, loss aggregation and advantages (verl/trainer/ppo/core_algos.py) on NumPy arrays, for both
policies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .args import Args
from .rollout import Batch

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")


def kl_penalty(logprob: np.ndarray, ref_logprob: np.ndarray, kind: str) -> np.ndarray:
    """core_algos.kl_penalty_forward; see http://joschu.net/blog/kl-approx.html."""
    kind = kind.rstrip("+")
    if kind in ("kl", "k1"):
        return logprob - ref_logprob
    if kind == "abs":
        return np.abs(logprob - ref_logprob)
    if kind in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob) ** 2
    if kind in ("low_var_kl", "k3"):
        kl = np.clip(ref_logprob - logprob, -20, 20)
        return np.clip(np.exp(kl) - kl - 1, -10, 10)
    raise ValueError(f"unknown kl penalty {kind!r}")


def kl_penalty_grad(logprob: np.ndarray, ref_logprob: np.ndarray, kind: str) -> np.ndarray:
    """d kl_penalty / d logprob. A trailing '+' is verl's straight-through trick: k2's gradient."""
    diff = logprob - ref_logprob
    if kind.endswith("+") or kind in ("mse", "k2"):
        return diff
    if kind in ("kl", "k1"):
        return np.ones_like(diff)
    if kind == "abs":
        return np.sign(diff)
    kl = -diff  # low_var_kl: d/dlogp (e^kl - kl - 1) = 1 - e^kl, zero where a clamp is active
    raw = np.exp(np.clip(kl, -20, 20)) - np.clip(kl, -20, 20) - 1
    live = (np.abs(kl) < 20) & (raw > -10) & (raw < 10)
    return np.where(live, 1.0 - np.exp(np.clip(kl, -20, 20)), 0.0)


def masked_mean(values: np.ndarray, mask: np.ndarray) -> float:
    """verl_F.masked_mean (with its 1e-8)."""
    return float((values * mask).sum() / (mask.sum() + 1e-8))


def masked_whiten(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """verl_F.masked_whiten: zero mean, unit (Bessel-corrected) variance over the masked entries."""
    mean = masked_mean(values, mask)
    count = mask.sum()
    var = masked_mean((values - mean) ** 2, mask) * count / (count - 1) if count > 1 else 0.0
    return (values - mean) / np.sqrt(var + 1e-8)


def agg_weights(mask: np.ndarray, mode: str, loss_scale_factor: float | None = None,
                num_tokens: float | None = None, num_seqs: float | None = None) -> np.ndarray:
    """Per-token weights w with agg_loss(loss_mat) = sum(w * loss_mat): core_algos.agg_loss, which is linear.

    ``num_tokens``/``num_seqs`` are the denominators (verl's batch_num_tokens / global_batch_size); left None
    they are those of ``mask`` itself, as in verl's legacy actor.
    """
    seq_tokens = mask.sum(axis=-1, keepdims=True)
    if mode == "token-mean":
        return mask / (mask.sum() if num_tokens is None else num_tokens)
    if mode == "seq-mean-token-sum-norm":
        return mask / (mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)
    seqs = float((seq_tokens > 0).sum()) if num_seqs is None else num_seqs
    if mode == "seq-mean-token-sum":
        return mask / seqs
    if mode == "seq-mean-token-mean":
        return mask / (seq_tokens + 1e-8) / seqs
    raise ValueError(f"Invalid loss_agg_mode: {mode}")


def agg_loss(loss_mat: np.ndarray, mask: np.ndarray, mode: str, loss_scale_factor: float | None = None) -> float:
    """core_algos.agg_loss without global batch info (the legacy actor and the trainer's entropy metric)."""
    return float((agg_weights(mask, mode, loss_scale_factor) * loss_mat).sum())


class AdaptiveKLController:
    """core_algos.AdaptiveKLController (Ziegler et al. 2019, https://arxiv.org/abs/1909.08593)."""

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: int) -> None:
        self.value: Any = init_kl_coef
        self.target, self.horizon = target_kl, horizon

    def update(self, current_kl: float, n_steps: int) -> None:
        proportional_error = np.clip(current_kl / self.target - 1, -0.2, 0.2)
        self.value *= 1 + proportional_error * n_steps / self.horizon


class FixedKLController:
    """core_algos.FixedKLController."""

    def __init__(self, kl_coef: float) -> None:
        self.value: Any = kl_coef

    def update(self, current_kl: float, n_steps: int) -> None:
        pass


def token_level_scores(batch: Batch, scores: np.ndarray) -> np.ndarray:
    """The reward manager puts each sequence's score on its last response token."""
    out = np.zeros_like(batch.mask)
    out[np.arange(len(scores)), batch.response_len - 1] = scores
    return out


def compute_gae_advantage_return(rewards: np.ndarray, values: np.ndarray, mask: np.ndarray, gamma: float,
                                 lam: float) -> tuple[np.ndarray, np.ndarray]:
    """core_algos.compute_gae_advantage_return: GAE over response tokens, then whitened advantages."""
    next_values = np.zeros(len(rewards))
    last_gae = np.zeros(len(rewards))
    advantages = np.zeros_like(rewards)
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_values - values[:, t]
        gae = delta + gamma * lam * last_gae
        next_values = values[:, t] * mask[:, t] + (1 - mask[:, t]) * next_values
        last_gae = gae * mask[:, t] + (1 - mask[:, t]) * last_gae
        advantages[:, t] = last_gae
    returns = advantages + values
    return masked_whiten(advantages, mask), returns


def _group_stats(scores: np.ndarray, uid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-sample group mean, unbiased std and size (verl's id2mean / id2std; a group of 1 gets 0 and 1)."""
    _, inverse, counts = np.unique(uid, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=scores)
    mean = sums / counts
    sq = np.bincount(inverse, weights=(scores - mean[inverse]) ** 2)
    std = np.sqrt(sq / np.maximum(counts - 1, 1))
    single = counts == 1
    mean[single], std[single] = 0.0, 1.0
    return mean[inverse], std[inverse], counts[inverse]


# The advantage estimators by name, kept as verl keeps them: register_adv_est files an estimator in
# ADV_ESTIMATOR_REGISTRY, get_adv_estimator_fn looks one up (verl/trainer/ppo/core_algos.py:113-150 @ verl
# 1dda039b9c6311889a9c9a26040677e1254814f9, the commit of lm_algos.VERL_COMMIT). verl's estimators take tensors and a
# config; the sandbox's take the batch, its token-level rewards and Args, and return (advantages, returns).
AdvEstimator = Callable[[Batch, np.ndarray, Args], tuple[np.ndarray, np.ndarray]]
ADV_ESTIMATOR_REGISTRY: dict[str, AdvEstimator] = {}


def register_adv_est(name: str) -> Callable[[AdvEstimator], AdvEstimator]:
    """core_algos.py:116 register_adv_est: file the decorated estimator under ``name``; another estimator under a
    name already taken is an error."""

    def decorator(fn: AdvEstimator) -> AdvEstimator:
        if name in ADV_ESTIMATOR_REGISTRY and ADV_ESTIMATOR_REGISTRY[name] != fn:
            raise ValueError(f"Adv estimator {name} has already been registered: {ADV_ESTIMATOR_REGISTRY[name]} "
                             f"vs {fn}")
        ADV_ESTIMATOR_REGISTRY[name] = fn
        return fn

    return decorator


def get_adv_estimator_fn(name: str) -> AdvEstimator:
    """core_algos.py:137 get_adv_estimator_fn: the estimator filed under ``name``."""
    if name not in ADV_ESTIMATOR_REGISTRY:
        raise ValueError(f"Unknown advantage estimator simply: {name}")
    return ADV_ESTIMATOR_REGISTRY[name]


# core_algos.py:215 compute_gae_advantage_return (on the critic's values)
@register_adv_est("gae")
def gae_advantage(batch: Batch, rewards: np.ndarray, args: Args) -> tuple[np.ndarray, np.ndarray]:
    return compute_gae_advantage_return(rewards, batch.extra["values"], batch.mask, args.gamma, args.lam)


# core_algos.py:267 compute_grpo_outcome_advantage and :334 compute_grpo_vectorized_outcome_advantage (the same
# advantages, computed without a loop over the groups): the score minus its group's mean, over the group's std
@register_adv_est("grpo_vectorized")
@register_adv_est("grpo")  # the inner decorator files first: grpo, then grpo_vectorized
def grpo_outcome_advantage(batch: Batch, rewards: np.ndarray, args: Args) -> tuple[np.ndarray, np.ndarray]:
    scores = rewards.sum(axis=-1)
    mean, std, _ = _group_stats(scores, batch.uid)
    adv = (scores - mean) / (std + 1e-6) if args.norm_adv_by_std_in_grpo else scores - mean
    out = adv[:, None] * batch.mask
    return out, out


# core_algos.py:587 compute_rloo_outcome_advantage: the score minus the mean of the group's other scores
@register_adv_est("rloo")
def rloo_outcome_advantage(batch: Batch, rewards: np.ndarray, args: Args) -> tuple[np.ndarray, np.ndarray]:
    scores = rewards.sum(axis=-1)
    mean, _, count = _group_stats(scores, batch.uid)
    multi = count > 1
    adv = np.where(multi, (scores - mean) * count / np.maximum(count - 1, 1), scores)
    out = adv[:, None] * batch.mask
    return out, out


# core_algos.py:693 compute_reinforce_plus_plus_outcome_advantage: discounted returns that restart after EOS, whitened
@register_adv_est("reinforce_plus_plus")
def reinforce_plus_plus_outcome_advantage(batch: Batch, rewards: np.ndarray, args: Args
                                          ) -> tuple[np.ndarray, np.ndarray]:
    mask = batch.mask
    returns = np.zeros_like(rewards)
    running = np.zeros(len(rewards))
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + args.gamma * running
        returns[:, t] = running
        running = running * mask[:, t]
    return masked_whiten(returns, mask) * mask, returns


# core_algos.py:533 compute_reinforce_plus_plus_baseline_outcome_advantage: the score minus its group's mean, whitened
# over the batch
@register_adv_est("reinforce_plus_plus_baseline")
def reinforce_plus_plus_baseline_outcome_advantage(batch: Batch, rewards: np.ndarray, args: Args
                                                   ) -> tuple[np.ndarray, np.ndarray]:
    mask = batch.mask
    scores = rewards.sum(axis=-1)
    mean, _, _ = _group_stats(scores, batch.uid)
    out = np.broadcast_to((scores - mean)[:, None], mask.shape) * mask
    out = masked_whiten(out, mask) * mask
    return out, out


def compute_advantage(batch: Batch, rewards: np.ndarray, args: Args) -> tuple[np.ndarray, np.ndarray]:
    """ray_trainer.compute_advantage (verl/trainer/ppo/ray_trainer.py:187 at the same commit): the estimator of
    ``algorithm.adv_estimator`` from the registry (verl calls GAE and GRPO by name first; the math is the same)."""
    return get_adv_estimator_fn(args.adv_estimator)(batch, rewards, args)
