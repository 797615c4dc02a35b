"""ALGO LOGIC: rollout. The batch the loop passes around, sampling with verl's rollout knobs, and batch balancing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .model import feature_rows, policy_forward
from .task import EOS, PAD, S_THINK, Prompts, next_state


@dataclass
class Batch:
    """What verl's DataProto holds for one step, response-side arrays trimmed to the longest response."""

    prompt_len: np.ndarray  # (N,)
    pair: np.ndarray  # (N,)
    answer: np.ndarray  # (N,)
    uid: np.ndarray  # (N,) prompt index: responses to the same prompt share it
    responses: np.ndarray  # (N, T) int, PAD after EOS
    mask: np.ndarray  # (N, T) float: 1 on response tokens incl. EOS
    rows: np.ndarray  # (N, T, 4) feature rows of each response token (log-linear policy; (N, T, 0) for the LM)
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    prompt_tokens: np.ndarray | None = None  # (N, P) left-padded prompt ids (the LM reads its prompt)

    @property
    def response_len(self) -> np.ndarray:
        return self.mask.sum(axis=1).astype(np.int64)

    def select(self, idx: np.ndarray) -> Batch:
        return Batch(self.prompt_len[idx], self.pair[idx], self.answer[idx], self.uid[idx], self.responses[idx],
                     self.mask[idx], self.rows[idx], {k: v[idx] for k, v in self.extra.items()},
                     None if self.prompt_tokens is None else self.prompt_tokens[idx])

    def micro(self, idx: np.ndarray) -> Batch:
        """``select``, trimmed to the micro-batch's own longest response (remove-padding: the rest is padding)."""
        width = max(1, int(self.mask[idx].sum(axis=1).max(initial=0)))
        return Batch(self.prompt_len[idx], self.pair[idx], self.answer[idx], self.uid[idx],
                     self.responses[idx, :width], self.mask[idx, :width], self.rows[idx, :width],
                     {k: v[idx, :width] if v.ndim == 2 else v[idx] for k, v in self.extra.items()},
                     None if self.prompt_tokens is None else self.prompt_tokens[idx])


def sample_tokens(logp: np.ndarray, rng: np.random.Generator, do_sample: bool, top_k: int, top_p: float
                  ) -> np.ndarray:
    """One token per row from log-probs (already at the temperature), with vLLM's top-k then top-p filter."""
    if not do_sample:
        return logp.argmax(axis=-1)
    probs = np.exp(logp)
    if 0 < top_k < probs.shape[-1]:
        kth = -np.sort(-probs, axis=-1)[:, top_k - 1: top_k]
        probs = np.where(probs >= kth, probs, 0.0)
    if top_p < 1.0:
        order = np.argsort(-probs, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(probs, order, axis=-1)
        total = sorted_p.sum(axis=-1, keepdims=True)
        keep_sorted = (np.cumsum(sorted_p, axis=-1) - sorted_p) < top_p * total
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=-1)
        probs = np.where(keep, probs, 0.0)
    cdf = np.cumsum(probs, axis=-1)
    u = rng.random(len(probs))[:, None] * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=-1), probs.shape[-1] - 1)


def generate(weights: np.ndarray, prompts: Prompts, uid: np.ndarray, max_len: int, temperature: float,
             do_sample: bool, top_k: int, top_p: float, rng: np.random.Generator) -> Batch:
    """Sample one response per prompt row, token by token, until EOS or max_len (truncation)."""
    n = len(prompts.pair)
    responses = np.full((n, max_len), PAD, dtype=np.int64)
    rows = np.zeros((n, max_len, 4), dtype=np.int64)
    state = np.full(n, S_THINK, dtype=np.int64)
    prev = prompts.tokens[:, -1].copy()
    active = np.arange(n)
    t = 0
    for t in range(max_len):
        r = feature_rows(prompts.pair[active], state[active], prev[active], t)
        rows[active, t] = r
        logp = policy_forward(weights, r, temperature if do_sample else 1.0)
        tok = sample_tokens(logp, rng, do_sample, top_k, top_p)
        responses[active, t] = tok
        state[active] = next_state(state[active], tok)
        prev[active] = tok
        active = active[tok != EOS]
        if len(active) == 0:
            break
    width = t + 1
    mask = np.zeros((n, width))
    ended = responses[:, :width] == EOS
    first_eos = np.where(ended.any(axis=1), ended.argmax(axis=1) + 1, max_len)
    mask[np.arange(width)[None, :] < first_eos[:, None]] = 1.0
    return Batch(prompts.lengths.copy(), prompts.pair.copy(), prompts.answer.copy(), uid,
                 responses[:, :width], mask, rows[:, :width])


def balance_batch(batch: Batch, n_ranks: int) -> tuple[Batch, dict[str, Any]]:
    """ray_trainer._balance_batch: reorder so each rank gets similar work, and log global_seqlen/*.

    verl partitions with Karmarkar-Karp; the sandbox uses greedy largest-first into equal-size groups.
    """
    seqlen = (batch.prompt_len + batch.response_len).astype(np.int64)
    workload = 24576 * seqlen + seqlen ** 2  # seqlen_balancing.calculate_workload
    size = len(seqlen) // n_ranks
    parts: list[list[int]] = [[] for _ in range(n_ranks)]
    loads = np.zeros(n_ranks)
    for i in sorted(range(len(seqlen)), key=lambda j: (-workload[j], j)):
        open_ranks = [r for r in range(n_ranks) if len(parts[r]) < size]
        r = min(open_ranks, key=lambda k: (loads[k], k))
        parts[r].append(i)
        loads[r] += workload[i]
    for r, part in enumerate(parts):  # smaller micro-batches at both ends (ray_trainer.py)
        part.sort(key=lambda j: (workload[j], j))
        parts[r] = part[::2] + part[1::2][::-1]
    chunks = seqlen.reshape(n_ranks, size).sum(axis=1)
    balanced = [int(seqlen[p].sum()) for p in parts]
    metrics = {"global_seqlen/min": int(chunks.min()), "global_seqlen/max": int(chunks.max()),
               "global_seqlen/minmax_diff": int(chunks.max() - chunks.min()),
               "global_seqlen/balanced_min": min(balanced), "global_seqlen/balanced_max": max(balanced),
               "global_seqlen/mean": float(chunks.sum() / n_ranks)}
    return batch.select(np.array([j for p in parts for j in p])), metrics
