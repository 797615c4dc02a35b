"""The sandbox's language-model policy behind the interface the training loop of sweeps/sandbox/trainer.py calls.

Rollout, log-probs, values and the actor/critic updates run the transformer of sweeps/sandbox/lm_policy.py in torch;
everything else (batching over emulated ranks, mini- and micro-batches, advantages, the KL controller, the LR
schedule, metrics and loggers) stays the sandbox's own, shared with the log-linear policy. The updates follow
verl/workers/actor/dp_actor.py and verl/workers/critic/dp_critic.py: gradient accumulation over micro-batches
whose losses are aggregated over the whole mini-batch (verl's global batch info), ``clip_grad_norm_`` at
``grad_clip`` (a non-finite norm skips the step), then one ``torch.optim.AdamW`` step.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
import torch

from . import lm_policy as lp
from . import lm_task as task
from .args import Args
from .lm_algos import agg_loss, compute_policy_loss_vanilla, compute_value_loss, kl_penalty, masked_mean
from .rollout import Batch
from .task import Prompts
from .updates import reduce_metric, update_layout


def _prompt_tensors(batch_tokens: np.ndarray, lengths: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """The left-padded prompt ids, trimmed to the longest prompt, and their mask of real tokens."""
    width = max(1, int(lengths.max(initial=1)))
    tokens = torch.from_numpy(np.ascontiguousarray(batch_tokens[:, -width:]))
    valid = torch.arange(width)[None, :] >= (width - torch.from_numpy(lengths))[:, None]
    return tokens, valid


class LMPolicy:
    """Actor, frozen reference and (for PPO) critic; the rollout runs on the actor's current weights, as verl's
    rollout engine does once the weights are synced after each update."""

    def __init__(self, args: Args, use_critic: bool, use_ref: bool) -> None:
        torch.set_num_threads(1)  # deterministic, and trials run side by side on the cores
        seed = args.seed if args.seed is not None else args.data_loader_seed
        torch.manual_seed(seed)
        self.actor = lp.load_policy()
        self.reference = lp.load_policy() if use_ref else None
        self.critic = lp.critic_from(self.actor) if use_critic else None
        for model in (self.actor, self.reference, self.critic):
            if model is not None:
                model.eval()  # no dropout in this model; eval() for the record
        if self.reference is not None:
            self.reference.requires_grad_(False)
        self.actor_opt = torch.optim.AdamW(self.actor.parameters(), lr=0.0, betas=args.betas,
                                           weight_decay=args.weight_decay)
        self.critic_opt = (torch.optim.AdamW(self.critic.parameters(), lr=0.0, betas=args.critic_betas,
                                             weight_decay=args.critic_weight_decay)
                           if self.critic is not None else None)

    # ------------------------------------------------------------------------------------------------------------
    # rollout

    def generate(self, prompts: Prompts, uid: np.ndarray, max_len: int, temperature: float, do_sample: bool,
                 top_k: int, top_p: float, rng: np.random.Generator) -> Batch:
        tokens, valid = _prompt_tensors(prompts.tokens, prompts.lengths)
        generator = torch.Generator().manual_seed(int(rng.integers(0, 2**62)))
        sampling = lp.Sampling(temperature if do_sample else 1.0, top_k, top_p, do_sample)
        responses = lp.generate(self.actor, tokens, valid, max_len, sampling, generator)
        mask = lp.response_mask(responses)
        resp = responses.numpy().copy()
        resp[mask.numpy() == 0] = task.PAD
        n, width = resp.shape
        return Batch(prompts.lengths.copy(), prompts.pair.copy(), prompts.answer.copy(), uid, resp,
                     mask.numpy().astype(np.float64), np.zeros((n, width, 0), dtype=np.int64),
                        prompt_tokens=tokens.numpy())

    def sync_rollout(self) -> None:
        """The rollout samples from the actor itself: nothing to copy."""

    @staticmethod
    def score(batch: Batch) -> np.ndarray:
        lengths = batch.response_len
        return np.array([task.score(batch.responses[i], int(lengths[i]), int(batch.answer[i]))
                         for i in range(len(lengths))])

    @staticmethod
    def prompt_text(batch: Batch, i: int) -> str:
        assert batch.prompt_tokens is not None
        return task.decode(batch.prompt_tokens[i])

    @staticmethod
    def response_text(tokens: np.ndarray) -> str:
        return task.decode(tokens)

    # ------------------------------------------------------------------------------------------------------------
    # log-probs and values

    @staticmethod
    def _tensors(mb: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        assert mb.prompt_tokens is not None
        prompt, valid = _prompt_tensors(mb.prompt_tokens, mb.prompt_len)
        return prompt, valid, torch.from_numpy(mb.responses), torch.from_numpy(mb.mask).float()

    @torch.no_grad()
    def log_probs(self, batch: Batch, temperature: float, reference: bool = False
                  ) -> tuple[np.ndarray, np.ndarray]:
        """log pi(token) and entropy of the actor (or the reference) at the rollout temperature, 0 on padding."""
        model = self.reference if reference else self.actor
        assert model is not None
        logp, entropy = lp.logprobs_entropy(model, *self._tensors(batch), temperature)
        mask = batch.mask
        return logp.double().numpy() * mask, entropy.double().numpy() * mask

    @torch.no_grad()
    def values(self, batch: Batch) -> np.ndarray:
        assert self.critic is not None
        prompt, valid, resp, mask = self._tensors(batch)
        h = lp.response_logits_hidden(self.critic, prompt, valid, resp, mask)
        return self.critic.values(h).double().numpy() * batch.mask

    # ------------------------------------------------------------------------------------------------------------
    # updates

    def update_policy(self, batch: Batch, args: Args, lr: float, n_ranks: int) -> dict[str, Any]:
        """dp_actor.update_policy; the metrics as updates.update_policy (the log-linear policy's) reduces them.

        Each mini-batch runs one forward and one backward over all its micro-batches: the loss is the sum of the
        micro-batches' losses (each aggregated with the mini-batch's global token and sequence counts), which is
        the gradient verl accumulates micro-batch by micro-batch; the per-micro-batch metrics are verl's."""
        layout = update_layout(batch, n_ranks, args.ppo_mini_batch_size * args.n, args.ppo_micro_batch_size_per_gpu,
                             args.ppo_micro_batch_size,
                             args.ppo_max_token_len_per_gpu if args.use_dynamic_bsz else None)
        on_policy = len(layout) == 1 and args.ppo_epochs == 1
        scale: Any = args.loss_scale_factor if args.loss_scale_factor is not None else args.max_response_length
        for group in self.actor_opt.param_groups:
            group["lr"] = lr
        lists: dict[str, list[float]] = {}
        pg_total, kl_total = 0.0, 0.0
        for _ in range(args.ppo_epochs):
            for ranks in layout:
                mini, info = _mini_batch(batch, ranks, scale)
                self.actor_opt.zero_grad()
                logp_all, entropy_all = lp.logprobs_entropy(self.actor, *self._tensors(mini), args.temperature)
                loss = torch.zeros(())
                for rows, mb in _micro_slices(mini, ranks):
                    mb_loss, pg_loss, kl_loss, mb_metrics = self._actor_micro_loss(
                        mb, logp_all[rows, :mb.mask.shape[1]], entropy_all[rows, :mb.mask.shape[1]], args, info,
                        on_policy)
                    loss = loss + mb_loss
                    pg_total += pg_loss
                    kl_total += kl_loss
                    for k, v in mb_metrics.items():
                        lists.setdefault(k, []).append(v)
                loss.backward()
                grad_norm = float(torch.nn.utils.clip_grad_norm_(self.actor.parameters(), args.grad_clip))
                if math.isfinite(grad_norm):
                    self.actor_opt.step()
                else:
                    print(f"WARN: rank 0 grad_norm is not finite: {grad_norm}", file=sys.stderr)
                lists.setdefault("actor/grad_norm", []).extend([grad_norm] * n_ranks)
        updates = max(1, args.ppo_epochs * len(layout))
        metrics: dict[str, Any] = {"actor/pg_loss": np.float64(pg_total / updates)}
        if args.use_kl_loss:
            metrics["actor/kl_loss"] = np.float64(kl_total / updates)
        metrics.update({k: reduce_metric(k, v) for k, v in lists.items()})
        return metrics

    @staticmethod
    def _actor_micro_loss(mb: Batch, logp: torch.Tensor, entropy: torch.Tensor, args: Args,
                          info: dict[str, Any], on_policy: bool) -> tuple[torch.Tensor, float, float, dict[str, float]]:
        """One micro-batch of dp_actor.update_policy: (loss, pg_loss, kl_loss, metrics)."""
        mask = torch.from_numpy(mb.mask).float()
        # dp_actor: on-policy (one mini-batch, one epoch) takes the detached current log-probs as the old ones
        old = logp.detach() if on_policy else torch.from_numpy(mb.extra["old_log_probs"]).float()
        adv = torch.from_numpy(mb.extra["advantages"]).float()
        pg_loss, metrics = compute_policy_loss_vanilla(
            old, logp, adv, mask, args.loss_agg_mode, clip_ratio=args.clip_ratio, clip_ratio_low=args.clip_ratio_low,
            clip_ratio_high=args.clip_ratio_high, clip_ratio_c=args.clip_ratio_c, **info)
        metrics = {k: float(v) for k, v in metrics.items()}
        loss = pg_loss
        if args.calculate_entropy or args.entropy_coeff != 0:
            metrics["actor/entropy"] = agg_loss(entropy.detach(), mask, args.loss_agg_mode,
                                                loss_scale_factor=info["loss_scale_factor"]).item()
            if args.entropy_coeff != 0:
                loss = loss - args.entropy_coeff * agg_loss(entropy, mask, args.loss_agg_mode, **info)
        kl_value = 0.0
        if args.use_kl_loss:
            kld = kl_penalty(logp, torch.from_numpy(mb.extra["ref_log_prob"]).float(), args.kl_loss_type)
            kl_loss = agg_loss(kld, mask, args.loss_agg_mode, **info)
            loss = loss + args.kl_loss_coef * kl_loss
            kl_value = kl_loss.item()
            metrics["actor/kl_coef"] = args.kl_loss_coef
        return loss, pg_loss.item(), kl_value, metrics

    def update_critic(self, batch: Batch, args: Args, lr: float, n_ranks: int) -> dict[str, Any]:
        """dp_critic.update_critic with the actor's layout and aggregation rules (one forward per mini-batch)."""
        assert self.critic is not None and self.critic_opt is not None
        layout = update_layout(batch, n_ranks, args.critic_ppo_mini_batch_size * args.n,
                             args.critic_ppo_micro_batch_size_per_gpu, args.critic_ppo_micro_batch_size,
                             args.critic_ppo_max_token_len_per_gpu if args.critic_use_dynamic_bsz else None)
        for group in self.critic_opt.param_groups:
            group["lr"] = lr
        lists: dict[str, list[float]] = {}
        vf_total = 0.0
        for _ in range(args.critic_ppo_epochs):
            for ranks in layout:
                # compute_value_loss passes no loss_scale_factor: seq-mean-token-sum-norm divides by the width
                mini, info = _mini_batch(batch, ranks, args.max_response_length)
                self.critic_opt.zero_grad()
                prompt, valid, resp, mask_all = self._tensors(mini)
                vpreds_all = self.critic.values(lp.response_logits_hidden(self.critic, prompt, valid, resp, mask_all))
                loss = torch.zeros(())
                for rows, mb in _micro_slices(mini, ranks):
                    mask = torch.from_numpy(mb.mask).float()
                    vpreds = vpreds_all[rows, :mask.shape[1]]
                    vf_loss, vf_clipfrac = compute_value_loss(
                        vpreds, torch.from_numpy(mb.extra["returns"]).float(),
                        torch.from_numpy(mb.extra["values"]).float(), mask, args.cliprange_value,
                        args.critic_loss_agg_mode, **info)
                    loss = loss + vf_loss
                    vf_total += vf_loss.item()
                    lists.setdefault("critic/vf_clipfrac", []).append(vf_clipfrac.item())
                    lists.setdefault("critic/vpred_mean", []).append(masked_mean(vpreds.detach(), mask).item())
                loss.backward()
                grad_norm = float(torch.nn.utils.clip_grad_norm_(self.critic.parameters(), args.critic_grad_clip))
                if math.isfinite(grad_norm):
                    self.critic_opt.step()
                lists.setdefault("critic/grad_norm", []).extend([grad_norm] * n_ranks)
        updates = max(1, args.critic_ppo_epochs * len(layout))
        metrics: dict[str, Any] = {"critic/vf_loss": np.float64(vf_total / updates)}
        metrics.update({k: reduce_metric(k, v) for k, v in lists.items()})
        return metrics


def _mini_batch(batch: Batch, ranks: list[list[np.ndarray]], scale: Any) -> tuple[Batch, dict[str, Any]]:
    """One mini-batch (its micro-batches rank by rank) and verl's global batch info for its losses: one process
    emulates every rank, so dp_size 1 with the whole mini-batch's token and sequence counts."""
    mini = batch.micro(np.concatenate([np.concatenate(micros) for micros in ranks]))
    info = {"dp_size": 1, "batch_num_tokens": int(mini.mask.sum()),
            "global_batch_size": int((mini.mask.sum(axis=-1) > 0).sum()), "loss_scale_factor": scale}
    return mini, info


def _micro_slices(mini: Batch, ranks: list[list[np.ndarray]]) -> list[tuple[slice, Batch]]:
    """The micro-batches of a mini-batch laid out rank by rank (``mini`` holds them in that order): each one's
    rows of ``mini`` and its own Batch, trimmed to its longest response."""
    out = []
    offset = 0
    for micros in ranks:
        for idx in micros:
            rows = slice(offset, offset + len(idx))
            out.append((rows, mini.micro(np.arange(offset, offset + len(idx)))))
            offset += len(idx)
    return out
