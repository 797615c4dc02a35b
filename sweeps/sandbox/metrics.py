"""METRICS (verl/trainer/ppo/metric_utils.py) and VALIDATION (ray_trainer._validate)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .args import Args
from .policies import LogLinearPolicy, Policy
from .rollout import Batch
from .task import DATA_SOURCE, Prompts, repeat_prompts


def compute_data_metrics(batch: Batch, use_critic: bool, max_prompt_length: int, max_response_length: int
                         ) -> dict[str, Any]:
    """metric_utils.compute_data_metrics."""
    mask = batch.mask.astype(bool)
    score = batch.extra["token_level_scores"].sum(axis=-1)
    reward = batch.extra["token_level_rewards"].sum(axis=-1)
    adv = batch.extra["advantages"][mask]
    ret = batch.extra["returns"][mask]
    resp_len = batch.response_len.astype(float)
    prompt_len = batch.prompt_len.astype(float)
    live = resp_len > 0
    out: dict[str, Any] = {
        "critic/score/mean": float(score[live].mean()), "critic/score/max": float(score[live].max()),
        "critic/score/min": float(score[live].min()),
        "critic/rewards/mean": float(reward[live].mean()), "critic/rewards/max": float(reward[live].max()),
        "critic/rewards/min": float(reward[live].min()),
        "critic/advantages/mean": float(adv.mean()), "critic/advantages/max": float(adv.max()),
        "critic/advantages/min": float(adv.min()),
        "critic/returns/mean": float(ret.mean()), "critic/returns/max": float(ret.max()),
        "critic/returns/min": float(ret.min()),
    }
    if use_critic:
        values = batch.extra["values"][mask]
        out.update({
            "critic/values/mean": float(values.mean()), "critic/values/max": float(values.max()),
            "critic/values/min": float(values.min()),
            # torch.var is Bessel-corrected
            "critic/vf_explained_var": float(1.0 - np.var(ret - values, ddof=1) / (np.var(ret, ddof=1) + 1e-5)),
        })
    out.update({
        "response_length/mean": float(resp_len.mean()), "response_length/max": float(resp_len.max()),
        "response_length/min": float(resp_len.min()),
        "response_length/clip_ratio": float(np.mean(resp_len == max_response_length)),
        "response_length_non_aborted/mean": float(resp_len[live].mean()),
        "response_length_non_aborted/max": float(resp_len[live].max()),
        "response_length_non_aborted/min": float(resp_len[live].min()),
        "response_length_non_aborted/clip_ratio": float(np.mean(resp_len[live] == max_response_length)),
        "response/aborted_ratio": float(np.mean(~live)),
        "prompt_length/mean": float(prompt_len.mean()), "prompt_length/max": float(prompt_len.max()),
        "prompt_length/min": float(prompt_len.min()),
        "prompt_length/clip_ratio": float(np.mean(prompt_len == max_prompt_length)),
    })
    return out


def compute_timing_metrics(batch: Batch, timing_raw: dict[str, float]) -> dict[str, Any]:
    """metric_utils.compute_timing_metrics: seconds per stage, and ms per token for the token-bound stages."""
    n_resp = int(batch.response_len.sum())
    n_all = n_resp + int(batch.prompt_len.sum())
    tokens = {"gen": n_resp, **{k: n_all for k in ("ref", "values", "adv", "update_critic", "update_actor")}}
    out: dict[str, Any] = {f"timing_s/{k}": v for k, v in timing_raw.items()}
    out.update({f"timing_per_token_ms/{k}": timing_raw[k] * 1000 / tokens[k] for k in tokens if k in timing_raw})
    return out


def compute_throughput_metrics(batch: Batch, timing_raw: dict[str, float], n_gpus: int) -> dict[str, Any]:
    """metric_utils.compute_throughout_metrics: tokens (prompt + response) per second per GPU."""
    total = int(batch.prompt_len.sum() + batch.response_len.sum())
    step_s = timing_raw["step"]
    return {"perf/total_num_tokens": total, "perf/time_per_step": step_s,
            "perf/throughput": total / (step_s * n_gpus)}


def validation_metrics(policy: Policy | np.ndarray, val: Prompts, args: Args, rng: np.random.Generator
                       ) -> dict[str, Any]:
    """ray_trainer._validate + process_validation_metrics for the reward variable: mean@N (val-core), std@N.
    ``policy`` may be the log-linear policy's weights."""
    n = args.val_n
    rep = repeat_prompts(val, n)
    uid = np.repeat(np.arange(len(val.pair)), n)
    do_sample = args.val_do_sample and args.val_temperature > 0
    if isinstance(policy, np.ndarray):
        weights, policy = policy, LogLinearPolicy.__new__(LogLinearPolicy)
        policy.rollout = weights
    out = policy.generate(rep, uid, args.max_response_length, args.val_temperature if do_sample else 1.0,
                          do_sample, args.val_top_k, args.val_top_p, rng)
    scores = policy.score(out).reshape(-1, n)
    metrics: dict[str, Any] = {f"val-core/{DATA_SOURCE}/reward/mean@{n}": np.mean(scores.mean(axis=1))}
    if n > 1:
        metrics[f"val-aux/{DATA_SOURCE}/reward/std@{n}"] = np.mean(scores.std(axis=1))
    return metrics
