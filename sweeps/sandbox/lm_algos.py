"""verl's PPO/GRPO loss functions in torch, for the sandbox's language-model policy.

Each function mirrors one function of verl's ``verl/trainer/ppo/core_algos.py`` or ``verl/utils/torch_functional.py``
with the same name, argument order and math; the comment above each cites the verl source as ``file:line`` at the
verl commit in ``VERL_COMMIT`` (verl main, 2026-08-22). Where verl takes a config object (``ActorConfig`` or
``AlgoConfig``) the mirror takes the few fields it reads as keyword arguments instead, so this module needs no verl.
tests/sweeps_tests/sandbox/test_lm_algos.py checks the formulas by hand and, where verl can be imported, against
verl's own functions on the same tensors.

Only what the language-model trainer differentiates through lives here (the losses, the loss-side KL and the masked
statistics they use); the advantage estimators and KL controllers, computed on arrays for both policies, are
sweeps/sandbox/core_algos.py's (compute_advantage, AdaptiveKLController), checked against verl by the same test file.

torch is imported by the language-model modules alone (sweeps/sandbox/lm_*.py; the sandbox's log-linear policy and the
advisor never import it).
"""

from __future__ import annotations

import torch

# verl-project/verl main at the commit every file:line below refers to
VERL_COMMIT = "1dda039b9c6311889a9c9a26040677e1254814f9"

# ----------------------------------------------------------------------------------------------------------------
# masked statistics (verl/utils/torch_functional.py)


# verl/utils/torch_functional.py:210 clip_by_value
def clip_by_value(x: torch.Tensor, tensor_min: torch.Tensor, tensor_max: torch.Tensor) -> torch.Tensor:
    return torch.max(torch.min(x, tensor_max), tensor_min)


# verl/utils/torch_functional.py:273 masked_sum (NaNs outside the mask do not leak into the sum)
def masked_sum(values: torch.Tensor, mask: torch.Tensor, axis: int | tuple[int, ...] | None = None) -> torch.Tensor:
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum(dim=axis)


# verl/utils/torch_functional.py:294 masked_mean (the 1e-8 keeps an all-masked batch at 0, not NaN)
def masked_mean(values: torch.Tensor, mask: torch.Tensor, axis: int | tuple[int, ...] | None = None) -> torch.Tensor:
    s = masked_sum(values, mask, axis)
    return s / (mask.sum(dim=axis) + 1e-8)


# ----------------------------------------------------------------------------------------------------------------
# the KL penalty of the loss-side KL (verl/trainer/ppo/core_algos.py)


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
