"""verl's PPO/GRPO algorithm functions in torch, for the sandbox's language-model policy.

Each function mirrors one function of verl's ``verl/trainer/ppo/core_algos.py`` or ``verl/utils/torch_functional.py``
with the same name, argument order and math; the comment above each cites the verl source as ``file:line`` at the
verl commit in ``VERL_COMMIT`` (verl main, 2026-08-22). Where verl takes a config object (``ActorConfig`` or
``AlgoConfig``) the mirror takes the few fields it reads as keyword arguments instead, so this module needs no verl.
tests/sweeps_tests/test_lm_algos.py checks the formulas by hand and, where verl can be imported, against verl's own
functions on the same tensors.

torch is imported by this module alone (the sandbox's log-linear policy and the advisor never import it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

# verl-project/verl main at the commit every file:line below refers to
VERL_COMMIT = "1dda039b9c6311889a9c9a26040677e1254814f9"

# ----------------------------------------------------------------------------------------------------------------
# masked statistics (verl/utils/torch_functional.py)


# verl/utils/torch_functional.py:210 clip_by_value
def clip_by_value(x: torch.Tensor, tensor_min: torch.Tensor, tensor_max: torch.Tensor) -> torch.Tensor:
    return torch.max(torch.min(x, tensor_max), tensor_min)


# verl/utils/torch_functional.py:231 entropy_from_logits: logsumexp(z) - sum(softmax(z) * z)
def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    pd = F.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)


# verl/utils/torch_functional.py:155 logprobs_from_logits_naive (log_softmax, then gather the label)
def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    logp = F.log_softmax(logits, dim=-1)
    return logp.gather(dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)


# verl/utils/torch_functional.py:273 masked_sum (NaNs outside the mask do not leak into the sum)
def masked_sum(values: torch.Tensor, mask: torch.Tensor, axis: int | tuple[int, ...] | None = None) -> torch.Tensor:
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum(dim=axis)


# verl/utils/torch_functional.py:294 masked_mean (the 1e-8 keeps an all-masked batch at 0, not NaN)
def masked_mean(values: torch.Tensor, mask: torch.Tensor, axis: int | tuple[int, ...] | None = None) -> torch.Tensor:
    s = masked_sum(values, mask, axis)
    return s / (mask.sum(dim=axis) + 1e-8)


# verl/utils/torch_functional.py:311 masked_var (Bessel-corrected by default)
def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    mean = masked_mean(values, mask)
    centered_values = values - mean
    variance = masked_mean(centered_values**2, mask)
    if unbiased:
        mask_sum = mask.sum()
        if mask_sum == 0:
            raise ValueError("At least one element in the mask has to be 1.")
        if mask_sum == 1:
            raise ValueError("The sum of the mask is one, which can cause a division by zero.")
        variance = variance * (mask_sum / (mask_sum - 1))
    return variance


# verl/utils/torch_functional.py:329 masked_whiten
def masked_whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened


# ----------------------------------------------------------------------------------------------------------------
# KL controllers and the in-reward KL penalty (verl/trainer/ppo/core_algos.py)


class AdaptiveKLController:
    """verl/trainer/ppo/core_algos.py:153 (Ziegler et al. 2019, https://arxiv.org/abs/1909.08593)."""

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: int) -> None:
        self.value = init_kl_coef
        self.target = target_kl
        self.horizon = horizon

    def update(self, current_kl: float, n_steps: int) -> None:
        proportional_error = min(max(current_kl / self.target - 1, -0.2), 0.2)  # np.clip(..., -0.2, 0.2)
        self.value *= 1 + proportional_error * n_steps / self.horizon


class FixedKLController:
    """verl/trainer/ppo/core_algos.py:177."""

    def __init__(self, kl_coef: float) -> None:
        self.value = kl_coef

    def update(self, current_kl: float, n_steps: int) -> None:
        pass


# verl/trainer/ppo/core_algos.py:2215 kl_penalty_forward (J. Schulman, http://joschu.net/blog/kl-approx.html)
def kl_penalty_forward(logprob: torch.Tensor, ref_logprob: torch.Tensor, kl_penalty: str) -> torch.Tensor:
    if kl_penalty in ("kl", "k1"):
        return logprob - ref_logprob
    if kl_penalty == "abs":
        return (logprob - ref_logprob).abs()
    if kl_penalty in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()
    if kl_penalty in ("low_var_kl", "k3"):
        kl = torch.clamp(ref_logprob - logprob, min=-20, max=20)  # verl: "for numerical stability"
        ratio = torch.exp(kl)
        kld = (ratio - kl - 1).contiguous()
        return torch.clamp(kld, min=-10, max=10)
    raise NotImplementedError(f"kl_penalty {kl_penalty!r}")  # verl raises NotImplementedError for "full" too


# verl/trainer/ppo/core_algos.py:2187 kl_penalty: a trailing '+' (e.g. "k3+") keeps the estimator's value but
# takes k2's gradient (straight-through), since k2's gradient is the unbiased one
def kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, kl_penalty: str) -> torch.Tensor:
    base_kl_penalty = kl_penalty[:-1] if kl_penalty.endswith("+") else kl_penalty
    forward_score = kl_penalty_forward(logprob, ref_logprob, base_kl_penalty)
    if not kl_penalty.endswith("+") or kl_penalty in ("mse", "k2"):
        return forward_score
    backward_score = 0.5 * (logprob - ref_logprob).square()
    return backward_score - backward_score.detach() + forward_score.detach()


# verl/trainer/ppo/core_algos.py:1124 compute_rewards (token scores minus kl_ratio * (logp - ref))
def compute_rewards(
    token_level_scores: torch.Tensor, old_log_prob: torch.Tensor, ref_log_prob: torch.Tensor, kl_ratio: float
) -> torch.Tensor:
    kl = old_log_prob - ref_log_prob
    return token_level_scores - kl * kl_ratio


# ----------------------------------------------------------------------------------------------------------------
# advantage estimators (verl/trainer/ppo/core_algos.py; each returns (advantages, returns))


# verl/trainer/ppo/core_algos.py:216 compute_gae_advantage_return (advantages whitened over the response mask)
def compute_gae_advantage_return(
    token_level_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        nextvalues: torch.Tensor | float = 0
        lastgaelam: torch.Tensor | float = 0
        advantages_reversed = []
        for t in reversed(range(token_level_rewards.shape[-1])):
            delta = token_level_rewards[:, t] + gamma * nextvalues - values[:, t]
            lastgaelam_ = delta + gamma * lam * lastgaelam
            # masked positions carry the next value and the running advantage through unchanged
            nextvalues = values[:, t] * response_mask[:, t] + (1 - response_mask[:, t]) * nextvalues
            lastgaelam = lastgaelam_ * response_mask[:, t] + (1 - response_mask[:, t]) * lastgaelam
            advantages_reversed.append(lastgaelam)
        advantages = torch.stack(advantages_reversed[::-1], dim=1)
        returns = advantages + values
        advantages = masked_whiten(advantages, response_mask)
    return advantages, returns


def _group_scores(scores: torch.Tensor, index: Sequence[Any]) -> dict[Any, list[torch.Tensor]]:
    id2score: dict[Any, list[torch.Tensor]] = defaultdict(list)
    for i in range(scores.shape[0]):
        id2score[index[i]].append(scores[i])
    return id2score


def _group_means(id2score: dict[Any, list[torch.Tensor]]) -> dict[Any, torch.Tensor]:
    """Each group's mean score; a group of one has mean 0 (as each of verl's group estimators sets it)."""
    return {idx: torch.tensor(0.0) if len(group) == 1 else torch.mean(torch.stack(group))
            for idx, group in id2score.items()}


# verl/trainer/ppo/core_algos.py:268 compute_grpo_outcome_advantage: (score - group mean) / (group std + eps),
# torch.std being the unbiased (n-1) std; a group of one gets mean 0, std 1
def compute_grpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Any],
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    scores = token_level_rewards.sum(dim=-1)
    with torch.no_grad():
        id2score = _group_scores(scores, index)
        id2mean: dict[Any, torch.Tensor] = {}
        id2std: dict[Any, torch.Tensor] = {}
        for idx, group in id2score.items():
            if len(group) == 1:
                id2mean[idx], id2std[idx] = torch.tensor(0.0), torch.tensor(1.0)
            else:
                stacked = torch.stack(group)
                id2mean[idx], id2std[idx] = torch.mean(stacked), torch.std(stacked)
        for i in range(scores.shape[0]):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]  # Dr.GRPO, https://arxiv.org/abs/2503.20783
        scores = scores.unsqueeze(-1) * response_mask
    return scores, scores


# verl/trainer/ppo/core_algos.py:588 compute_rloo_outcome_advantage: n/(n-1) * (score - group mean), i.e. the
# score minus the mean of the other n-1 responses
def compute_rloo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Any],
    epsilon: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    scores = token_level_rewards.sum(dim=-1)
    with torch.no_grad():
        id2score = _group_scores(scores, index)
        id2mean = _group_means(id2score)
        for i in range(scores.shape[0]):
            n = len(id2score[index[i]])
            if n > 1:
                scores[i] = scores[i] * n / (n - 1) - id2mean[index[i]] * n / (n - 1)
        scores = scores.unsqueeze(-1) * response_mask
    return scores, scores


# verl/trainer/ppo/core_algos.py:536 compute_reinforce_plus_plus_baseline_outcome_advantage: score minus the group
# mean, broadcast over the response, then whitened over the whole batch
def compute_reinforce_plus_plus_baseline_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Any],
    epsilon: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    response_length = token_level_rewards.shape[-1]
    scores = token_level_rewards.sum(dim=-1)
    with torch.no_grad():
        id2score = _group_scores(scores, index)
        id2mean = _group_means(id2score)
        for i in range(scores.shape[0]):
            scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1).tile([1, response_length]) * response_mask
        scores = masked_whiten(scores, response_mask) * response_mask
    return scores, scores


# verl/trainer/ppo/core_algos.py:694 compute_reinforce_plus_plus_outcome_advantage (verl reads gamma from
# AlgoConfig): discounted return-to-go, whitened over the batch
def compute_reinforce_plus_plus_outcome_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        returns = torch.zeros_like(token_level_rewards)
        running_return: torch.Tensor | float = 0
        for t in reversed(range(token_level_rewards.shape[1])):
            new_running_return = token_level_rewards[:, t] + gamma * running_return
            returns[:, t] = new_running_return * response_mask[:, t]
            running_return = new_running_return * response_mask[:, t] + running_return * (1 - response_mask[:, t])
        advantages = masked_whiten(returns, response_mask) * response_mask
    return advantages, returns


# verl/trainer/ppo/core_algos.py:735 compute_remax_outcome_advantage: return-to-go minus the greedy baseline
def compute_remax_outcome_advantage(
    token_level_rewards: torch.Tensor, reward_baselines: torch.Tensor, response_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        returns = (token_level_rewards * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
        advantages = returns - reward_baselines.unsqueeze(-1) * response_mask
    return advantages, returns


# ----------------------------------------------------------------------------------------------------------------
# losses (verl/trainer/ppo/core_algos.py)


# verl/trainer/ppo/core_algos.py:1140 agg_loss: the loss matrix to a scalar, the same for any data-parallel split
# when the global token count / batch size is given (each rank's share is scaled by dp_size, then averaged)
def agg_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_agg_mode: str,
    dp_size: int = 1,
    batch_num_tokens: int | torch.Tensor | None = None,
    global_batch_size: int | torch.Tensor | None = None,
    loss_scale_factor: int | None = None,
) -> torch.Tensor:
    if loss_agg_mode == "token-mean":
        if batch_num_tokens is None:
            if dp_size > 1:
                raise ValueError("(global) batch_num_tokens is required when dp_size > 1")
            batch_num_tokens = loss_mask.sum()
        return masked_sum(loss_mat, loss_mask) / batch_num_tokens * dp_size
    if loss_agg_mode == "token-sum":
        return masked_sum(loss_mat, loss_mask) * dp_size
    if loss_agg_mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm"):
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)
        seq_mask = (torch.sum(loss_mask, dim=-1) > 0).float()  # fully masked sequences do not count
        if global_batch_size is None:
            if dp_size > 1:
                raise ValueError("global_batch_size is required when dp_size > 1")
            global_batch_size = seq_mask.sum()
        loss = masked_sum(seq_losses, seq_mask) / global_batch_size * dp_size
        if loss_agg_mode == "seq-mean-token-sum-norm":
            loss /= loss_scale_factor if loss_scale_factor is not None else loss_mask.shape[-1]
        return loss
    if loss_agg_mode == "seq-mean-token-mean":
        seq_tokens = torch.sum(loss_mask, dim=-1)
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / (seq_tokens + 1e-8)
        seq_mask = (seq_tokens > 0).float()
        if global_batch_size is None:
            if dp_size > 1:
                raise ValueError("global_batch_size is required when dp_size > 1")
            global_batch_size = seq_mask.sum()
        return masked_sum(seq_losses, seq_mask) / global_batch_size * dp_size
    raise ValueError(f"Invalid loss_agg_mode: {loss_agg_mode}")


# verl/trainer/ppo/core_algos.py:1286 compute_policy_loss_vanilla: PPO's clipped objective with dual clip
# (https://arxiv.org/abs/1912.09729). verl reads clip_ratio, clip_ratio_low/high, clip_ratio_c and
# global_batch_info from ActorConfig; here they are keyword arguments with verl's defaults
# (actor.clip_ratio 0.2, clip_ratio_c 3.0). Returns (pg_loss, {"actor/pg_clipfrac", "actor/ppo_kl",
# "actor/pg_clipfrac_lower"}) as verl does.
def compute_policy_loss_vanilla(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    rollout_is_weights: torch.Tensor | None = None,
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    dp_size: int = 1,
    batch_num_tokens: int | torch.Tensor | None = None,
    global_batch_size: int | torch.Tensor | None = None,
    loss_scale_factor: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    cliprange_low = clip_ratio_low if clip_ratio_low is not None else clip_ratio
    cliprange_high = clip_ratio_high if clip_ratio_high is not None else clip_ratio
    if not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be greater than 1.0 for dual-clip PPO, got {clip_ratio_c}")

    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)  # verl: for stability
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)

    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - cliprange_low, 1 + cliprange_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses1).float(), response_mask)

    # dual clip: for A < 0 the loss is capped at -A * clip_ratio_c
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_clipfrac_lower = masked_mean(torch.gt(clip_pg_losses1, pg_losses3) * (advantages < 0).float(), response_mask)

    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(
        loss_mat=pg_losses,
        loss_mask=response_mask,
        loss_agg_mode=loss_agg_mode,
        dp_size=dp_size,
        batch_num_tokens=batch_num_tokens,
        global_batch_size=global_batch_size,
        loss_scale_factor=loss_scale_factor,
    )
    pg_metrics = {
        "actor/pg_clipfrac": pg_clipfrac.detach().item(),
        "actor/ppo_kl": ppo_kl.detach().item(),
        "actor/pg_clipfrac_lower": pg_clipfrac_lower.detach().item(),
    }
    return pg_loss, pg_metrics


# verl/trainer/ppo/core_algos.py:2107 compute_entropy_loss
def compute_entropy_loss(
    logits: torch.Tensor, response_mask: torch.Tensor, loss_agg_mode: str = "token-mean"
) -> torch.Tensor:
    token_entropy = entropy_from_logits(logits)
    return agg_loss(loss_mat=token_entropy, loss_mask=response_mask, loss_agg_mode=loss_agg_mode)


# verl/trainer/ppo/core_algos.py:2124 compute_value_loss: 0.5 * max((v - R)^2, (clip(v, v_old ± c) - R)^2)
def compute_value_loss(
    vpreds: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange_value: float,
    loss_agg_mode: str = "token-mean",
    dp_size: int = 1,
    batch_num_tokens: int | torch.Tensor | None = None,
    global_batch_size: int | torch.Tensor | None = None,
    loss_scale_factor: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    vpredclipped = clip_by_value(vpreds, values - cliprange_value, values + cliprange_value)
    vf_losses1 = (vpreds - returns) ** 2
    vf_losses2 = (vpredclipped - returns) ** 2
    clipped_vf_losses = torch.max(vf_losses1, vf_losses2)
    vf_loss = 0.5 * agg_loss(
        loss_mat=clipped_vf_losses,
        loss_mask=response_mask,
        loss_agg_mode=loss_agg_mode,
        dp_size=dp_size,
        batch_num_tokens=batch_num_tokens,
        global_batch_size=global_batch_size,
        loss_scale_factor=loss_scale_factor,
    )
    vf_clipfrac = masked_mean(torch.gt(vf_losses2, vf_losses1).float(), response_mask)
    return vf_loss, vf_clipfrac
