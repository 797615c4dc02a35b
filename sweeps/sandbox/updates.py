"""ALGO LOGIC: the log-linear policy's actor and critic updates (verl/workers/actor/dp_actor.py,
verl/workers/critic/dp_critic.py), and the mini-/micro-batch layout over emulated ranks both policies share.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .args import Args
from .core_algos import agg_loss, agg_weights, kl_penalty, kl_penalty_grad, masked_mean
from .model import policy_forward, scatter_rows, value_forward
from .optim import AdamW, clip_grad_norm
from .rollout import Batch


def rank_mini_micro_batches(n_samples: int, n_ranks: int, mini_per_rank: int, micro_per_rank: int | None,
                            token_counts: np.ndarray | None = None, max_token_len: int | None = None
                            ) -> list[list[list[np.ndarray]]]:
    """The index layout of one update: [mini-batch][rank] -> micro-batches of sample indices.

    Each rank holds a contiguous 1/n_ranks of the batch (verl's dispatch), splits it into mini-batches of
    mini_per_rank samples and those into micro-batches (fixed size, or packed by tokens with use_dynamic_bsz).
    """
    per_rank = n_samples // n_ranks
    n_mini = -(-per_rank // mini_per_rank)
    layout: list[list[list[np.ndarray]]] = []
    for k in range(n_mini):
        ranks = []
        for r in range(n_ranks):
            lo = r * per_rank + k * mini_per_rank
            idx = np.arange(lo, min(lo + mini_per_rank, (r + 1) * per_rank))
            ranks.append(idx)
        if token_counts is not None and max_token_len is not None:
            # prepare_dynamic_batch: as many micro-batches as the token budget needs, the max over ranks
            n_micro = max(min(len(i), -(-int(token_counts[i].sum()) // max_token_len)) for i in ranks)
            layout.append([np.array_split(i, max(1, n_micro)) for i in ranks])
        else:
            size = micro_per_rank or mini_per_rank
            layout.append([[i[j: j + size] for j in range(0, len(i), size)] for i in ranks])
    return layout


def update_layout(batch: Batch, n_ranks: int, mini_responses: int, micro_per_gpu: int | None,
                  micro_global: int | None, max_token_len: int | None) -> list[list[list[np.ndarray]]]:
    """The layout of one actor or critic update: a mini-batch of ``mini_responses`` split over the ranks, micro-
    batches per GPU (the deprecated global size divided by the ranks, as verl's workers do), or packed by tokens
    when ``max_token_len`` is given (use_dynamic_bsz)."""
    if micro_per_gpu is None and micro_global is not None:
        micro_per_gpu = micro_global // n_ranks
    return rank_mini_micro_batches(len(batch.uid), n_ranks, mini_responses // n_ranks, micro_per_gpu,
                                   batch.prompt_len + batch.response_len, max_token_len)


@dataclass
class ActorLoss:
    """One micro-batch's contribution: gradient, loss sums and verl's per-micro-batch metrics."""

    grad: np.ndarray
    loss: float  # what was differentiated: pg - entropy_coeff * entropy + kl_loss_coef * kl
    pg_loss: float
    kl_loss: float
    metrics: dict[str, float]


def actor_micro_batch(weights: np.ndarray, mb: Batch, token_weights: np.ndarray, args: Args, on_policy: bool
                      ) -> ActorLoss:
    """Forward + backward of verl's actor loss on one micro-batch.

    loss = sum(w * pg) - entropy_coeff * sum(w * H) + kl_loss_coef * sum(w * kl(logp, ref)), where w are the
    mini-batch's aggregation weights (compute_policy_loss_vanilla with dual clip, dp_actor.update_policy).
    """
    mask = mb.mask
    logp_all = policy_forward(weights, mb.rows, args.temperature)  # (n, T, V)
    probs = np.exp(logp_all)
    logp = np.take_along_axis(logp_all, mb.responses[..., None], axis=-1)[..., 0]
    old = logp.copy() if on_policy else mb.extra["old_log_probs"]  # dp_actor: on-policy uses detached logp
    adv = mb.extra["advantages"]

    neg_kl = np.clip(logp - old, -20.0, 20.0)
    ratio = np.exp(neg_kl)
    low = args.clip_ratio_low if args.clip_ratio_low is not None else args.clip_ratio
    high = args.clip_ratio_high if args.clip_ratio_high is not None else args.clip_ratio
    loss1 = -adv * ratio
    loss2 = -adv * np.clip(ratio, 1 - low, 1 + high)
    clipped = loss2 > loss1
    loss_max = np.maximum(loss1, loss2)
    loss3 = -adv * args.clip_ratio_c
    dual = (adv < 0) & (loss3 < loss_max)
    pg_losses = np.where(dual, loss3, loss_max)
    metrics = {"actor/pg_clipfrac": masked_mean(clipped.astype(float), mask),
               "actor/ppo_kl": masked_mean(-neg_kl, mask),
               "actor/pg_clipfrac_lower": masked_mean(((loss_max > loss3) & (adv < 0)).astype(float), mask)}
    # d pg_loss / d logp: -A * ratio on the unclipped branch, 0 where a clip (or the +-20 clamp) is active
    live = ~clipped & ~dual & (np.abs(logp - old) < 20.0)
    d_logp = token_weights * np.where(live, -adv * ratio, 0.0)
    pg_loss = float((token_weights * pg_losses).sum())
    loss = pg_loss

    d_logits = np.zeros_like(logp_all)
    calc_entropy = args.calculate_entropy or args.entropy_coeff != 0
    if calc_entropy:
        entropy = -(probs * logp_all).sum(axis=-1)
        metrics["actor/entropy"] = agg_loss(entropy, mask, args.loss_agg_mode, args.loss_scale_factor)
        if args.entropy_coeff != 0:
            loss -= args.entropy_coeff * float((token_weights * entropy).sum())
            # d(-c * sum w H)/dz = c * w * p * (log p + H)
            d_logits += args.entropy_coeff * token_weights[..., None] * probs * (logp_all + entropy[..., None])
    kl_loss = 0.0
    if args.use_kl_loss:
        ref = mb.extra["ref_log_prob"]
        kld = kl_penalty(logp, ref, args.kl_loss_type)
        kl_loss = float((token_weights * kld).sum())
        loss += args.kl_loss_coef * kl_loss
        d_logp = d_logp + args.kl_loss_coef * token_weights * kl_penalty_grad(logp, ref, args.kl_loss_type)
        metrics["actor/kl_coef"] = args.kl_loss_coef
    onehot = np.zeros_like(logp_all)
    np.put_along_axis(onehot, mb.responses[..., None], 1.0, axis=-1)
    d_logits += d_logp[..., None] * (onehot - probs)
    d_logits /= args.temperature
    grad = scatter_rows(mb.rows, d_logits * mask[..., None], len(weights))
    return ActorLoss(grad, loss, pg_loss, kl_loss, metrics)


def mini_batch_weights(mask: np.ndarray, mode: str, loss_scale_factor: float | None, response_width: int
                       ) -> np.ndarray:
    """Aggregation weights over a whole mini-batch (all ranks), so every micro-batch layout gives one update.

    As verl's engine path passes global batch_num_tokens / global_batch_size into agg_loss. For
    seq-mean-token-sum-norm the sum is divided by (loss_scale_factor or max_response_length) x sequences,
    which is what verl's legacy actor computes with one sample per micro-batch.
    """
    if mode == "seq-mean-token-sum-norm":
        seqs = float((mask.sum(axis=-1) > 0).sum())
        scale = loss_scale_factor if loss_scale_factor is not None else response_width
        return mask / (scale * seqs)
    return agg_weights(mask, mode)


def update_policy(weights: np.ndarray, optimizer: AdamW, batch: Batch, args: Args, lr: float, n_ranks: int
                  ) -> dict[str, Any]:
    """dp_actor.update_policy: ppo_epochs x mini-batches, gradient accumulation over micro-batches, one clipped
    AdamW step per mini-batch. Returns verl's reduced metrics (lists averaged, pg/kl loss the mean mini-batch loss,
    as verl >= 0.8 logs them)."""
    layout = update_layout(batch, n_ranks, args.ppo_mini_batch_size * args.n, args.ppo_micro_batch_size_per_gpu,
                           args.ppo_micro_batch_size, args.ppo_max_token_len_per_gpu if args.use_dynamic_bsz else None)
    on_policy = len(layout) == 1 and args.ppo_epochs == 1
    width = args.max_response_length
    lists: dict[str, list[float]] = {}
    pg_total, kl_total = 0.0, 0.0
    for _ in range(args.ppo_epochs):
        for ranks in layout:
            mini_idx = np.concatenate([np.concatenate(micros) for micros in ranks])
            w_mini = mini_batch_weights(batch.mask[mini_idx], args.loss_agg_mode, args.loss_scale_factor, width)
            grad = np.zeros_like(weights)
            for mb, w_micro in _micro_batches(batch, ranks, w_mini):
                out = actor_micro_batch(weights, mb, w_micro, args, on_policy)
                grad += out.grad
                pg_total += out.pg_loss
                kl_total += out.kl_loss
                for k, v in out.metrics.items():
                    lists.setdefault(k, []).append(v)
            grad_norm = clip_grad_norm(grad, args.grad_clip)
            if math.isfinite(grad_norm):
                optimizer.step(grad, lr)
            else:
                print(f"WARN: rank 0 grad_norm is not finite: {grad_norm}", file=sys.stderr)
            lists.setdefault("actor/grad_norm", []).extend([grad_norm] * n_ranks)
    # verl >= 0.8 logs the mean mini-batch loss of the update (0.9.1 verl/workers/utils/losses.py:73-81,
    # verl/utils/metric/utils.py:150-154); 0.7's legacy actor summed them (advisor/metrics/_loss_sums.py)
    updates = max(1, args.ppo_epochs * len(layout))
    metrics: dict[str, Any] = {"actor/pg_loss": np.float64(pg_total / updates)}
    if args.use_kl_loss:  # verl logs kl_loss only with the KL loss on (losses.py:132-142 at main 1dda039b)
        metrics["actor/kl_loss"] = np.float64(kl_total / updates)
    metrics.update({k: reduce_metric(k, v) for k, v in lists.items()})
    return metrics


def _micro_batches(batch: Any, ranks: Any, w_mini: np.ndarray) -> Iterator[tuple[Any, np.ndarray]]:
    """Each rank's micro batches of one mini batch, in order, with their rows of the mini batch's loss weights
    (``w_mini`` is laid out rank by rank, micro batch by micro batch), trimmed to the micro batch's width."""
    offset = 0
    for micros in ranks:
        for idx in micros:
            mb = batch.micro(idx)
            yield mb, w_mini[offset: offset + len(idx), :mb.mask.shape[1]]
            offset += len(idx)


def reduce_metric(key: str, values: list[float]) -> np.floating[Any]:
    """verl/utils/metric/utils.py reduce_metrics: max if the name says max, min if min, else mean."""
    if "max" in key:
        return np.max(values)
    if "min" in key:
        return np.min(values)
    return np.mean(values)


def critic_micro_batch(weights: np.ndarray, mb: Batch, token_weights: np.ndarray, cliprange_value: float
                       ) -> tuple[np.ndarray, float, dict[str, float]]:
    """core_algos.compute_value_loss (clipped, 0.5 x agg of the max of both squared errors) and its gradient."""
    vpreds = value_forward(weights, mb.rows)
    values, returns = mb.extra["values"], mb.extra["returns"]
    clipped_v = np.clip(vpreds, values - cliprange_value, values + cliprange_value)
    loss1 = (vpreds - returns) ** 2
    loss2 = (clipped_v - returns) ** 2
    vf_loss = 0.5 * float((token_weights * np.maximum(loss1, loss2)).sum())
    clip_used = loss2 > loss1
    d_v = np.where(clip_used, 0.0, token_weights * (vpreds - returns))
    grad = scatter_rows(mb.rows, d_v * mb.mask, len(weights))
    metrics = {"critic/vf_clipfrac": masked_mean(clip_used.astype(float), mb.mask),
               "critic/vpred_mean": masked_mean(vpreds, mb.mask)}
    return grad, vf_loss, metrics


def update_critic(weights: np.ndarray, optimizer: AdamW, batch: Batch, args: Args, lr: float, n_ranks: int
                  ) -> dict[str, Any]:
    """dp_critic.update_critic, with the same layout and aggregation rules as the actor."""
    layout = update_layout(batch, n_ranks, args.critic_ppo_mini_batch_size * args.n,
                           args.critic_ppo_micro_batch_size_per_gpu, args.critic_ppo_micro_batch_size,
                           args.critic_ppo_max_token_len_per_gpu if args.critic_use_dynamic_bsz else None)
    lists: dict[str, list[float]] = {}
    vf_total = 0.0
    for _ in range(args.critic_ppo_epochs):
        for ranks in layout:
            mini_idx = np.concatenate([np.concatenate(micros) for micros in ranks])
            # compute_value_loss passes no loss_scale_factor: seq-mean-token-sum-norm divides by the width
            w_mini = mini_batch_weights(batch.mask[mini_idx], args.critic_loss_agg_mode, None,
                                        args.max_response_length)
            grad = np.zeros_like(weights)
            for mb, w_micro in _micro_batches(batch, ranks, w_mini):
                g, loss, m = critic_micro_batch(weights, mb, w_micro, args.cliprange_value)
                grad += g
                vf_total += loss
                for k, v in m.items():
                    lists.setdefault(k, []).append(v)
            grad_norm = clip_grad_norm(grad, args.critic_grad_clip)
            if math.isfinite(grad_norm):
                optimizer.step(grad, lr)
            lists.setdefault("critic/grad_norm", []).extend([grad_norm] * n_ranks)
    updates = max(1, args.critic_ppo_epochs * len(layout))
    metrics: dict[str, Any] = {"critic/vf_loss": np.float64(vf_total / updates)}  # the mean, as in verl >= 0.8
    metrics.update({k: reduce_metric(k, v) for k, v in lists.items()})
    return metrics
