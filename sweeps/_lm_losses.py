"""Torch losses of the LM sandbox, with the signatures of verl's core_algos (verl main 1dda039b,
verl/trainer/ppo/core_algos.py: agg_loss :1140, compute_policy_loss_vanilla :1286, compute_value_loss :2124,
kl_penalty :2187). Only what the sandbox's LM updates call."""

from __future__ import annotations

from typing import Any

import torch


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / (mask.sum() + 1e-8)  # verl_F.masked_mean


def agg_loss(loss_mat: torch.Tensor, loss_mask: torch.Tensor, loss_agg_mode: str, dp_size: int = 1,
             batch_num_tokens: float | None = None, global_batch_size: float | None = None,
             loss_scale_factor: float | None = None) -> torch.Tensor:
    if loss_agg_mode == "token-mean":
        tokens = loss_mask.sum() if batch_num_tokens is None else batch_num_tokens
        return (loss_mat * loss_mask).sum() / tokens * dp_size
    if loss_agg_mode == "token-sum":
        return (loss_mat * loss_mask).sum() * dp_size
    if loss_agg_mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm"):
        seq_losses = (loss_mat * loss_mask).sum(dim=-1)
        seq_mask = (loss_mask.sum(dim=-1) > 0).float()
        seqs = seq_mask.sum() if global_batch_size is None else global_batch_size
        loss = (seq_losses * seq_mask).sum() / seqs * dp_size
        if loss_agg_mode == "seq-mean-token-sum-norm":
            loss = loss / (loss_mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)
        return loss
    if loss_agg_mode == "seq-mean-token-mean":
        counts = loss_mask.sum(dim=-1)
        seq_losses = (loss_mat * loss_mask).sum(dim=-1) / (counts + 1e-8)
        seq_mask = (counts > 0).float()
        seqs = seq_mask.sum() if global_batch_size is None else global_batch_size
        return (seq_losses * seq_mask).sum() / seqs * dp_size
    raise ValueError(f"Invalid loss_agg_mode: {loss_agg_mode}")


def compute_policy_loss_vanilla(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor,
                                response_mask: torch.Tensor, loss_agg_mode: str = "token-mean",
                                config: Any = None, rollout_is_weights: torch.Tensor | None = None
                                ) -> tuple[torch.Tensor, dict[str, Any]]:
    assert config is not None
    low = config.clip_ratio_low if config.clip_ratio_low is not None else config.clip_ratio
    high = config.clip_ratio_high if config.clip_ratio_high is not None else config.clip_ratio
    clip_ratio_c = config.get("clip_ratio_c", 3.0)
    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = _masked_mean(-negative_approx_kl, response_mask)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - low, 1 + high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = _masked_mean(torch.gt(pg_losses2, pg_losses1).float(), response_mask)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_clipfrac_lower = _masked_mean(torch.gt(clip_pg_losses1, pg_losses3) * (advantages < 0).float(), response_mask)
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode, **config.global_batch_info)
    return pg_loss, {"actor/pg_clipfrac": pg_clipfrac.detach().item(), "actor/ppo_kl": ppo_kl.detach().item(),
                     "actor/pg_clipfrac_lower": pg_clipfrac_lower.detach().item()}


def kl_penalty_forward(logprob: torch.Tensor, ref_logprob: torch.Tensor, kl_penalty: str) -> torch.Tensor:
    if kl_penalty in ("kl", "k1"):
        return logprob - ref_logprob
    if kl_penalty == "abs":
        return (logprob - ref_logprob).abs()
    if kl_penalty in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()
    if kl_penalty in ("low_var_kl", "k3"):
        kl = torch.clamp(ref_logprob - logprob, min=-20, max=20)
        return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    raise NotImplementedError


def kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, kl_penalty: str) -> torch.Tensor:
    """A trailing '+' keeps the estimator's value with k2's gradient (straight through)."""
    base = kl_penalty[:-1] if kl_penalty.endswith("+") else kl_penalty
    forward = kl_penalty_forward(logprob, ref_logprob, base)
    if not kl_penalty.endswith("+") or base in ("mse", "k2"):
        return forward
    backward = kl_penalty_forward(logprob, ref_logprob, "k2")
    return backward - backward.detach() + forward.detach()


def compute_value_loss(vpreds: torch.Tensor, returns: torch.Tensor, values: torch.Tensor,
                       response_mask: torch.Tensor, cliprange_value: float, loss_agg_mode: str = "token-mean",
                       dp_size: int = 1, batch_num_tokens: float | None = None,
                       global_batch_size: float | None = None, loss_scale_factor: float | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    vpredclipped = torch.clamp(vpreds, values - cliprange_value, values + cliprange_value)
    vf_losses1 = (vpreds - returns) ** 2
    vf_losses2 = (vpredclipped - returns) ** 2
    clipped_vf_losses = torch.max(vf_losses1, vf_losses2)
    vf_loss = 0.5 * agg_loss(clipped_vf_losses, response_mask, loss_agg_mode, dp_size, batch_num_tokens,
                             global_batch_size, loss_scale_factor)
    vf_clipfrac = _masked_mean(torch.gt(vf_losses2, vf_losses1).float(), response_mask)
    return vf_loss, vf_clipfrac
