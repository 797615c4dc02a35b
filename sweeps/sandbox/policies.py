"""THE POLICIES behind one interface: the log-linear one (model.py, updates.py), the language model (lm_trainer.py)."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from .args import Args
from .model import N_ROWS, pretrained_weights, token_logprobs, token_values
from .optim import AdamW
from .rollout import Batch, generate
from .task import N_PAIRS, Prompts, compute_score, decode, lm_prompts, make_prompts
from .updates import update_critic, update_policy


class Policy(Protocol):
    """What the training loop asks of a policy: rollout, score, log-probs, values, the two updates."""

    def generate(self, prompts: Prompts, uid: np.ndarray, max_len: int, temperature: float, do_sample: bool,
                 top_k: int, top_p: float, rng: np.random.Generator) -> Batch: ...

    def score(self, batch: Batch) -> np.ndarray: ...

    def log_probs(self, batch: Batch, temperature: float, reference: bool = False
                  ) -> tuple[np.ndarray, np.ndarray]: ...

    def values(self, batch: Batch) -> np.ndarray: ...

    def update_policy(self, batch: Batch, args: Args, lr: float, n_ranks: int) -> dict[str, Any]: ...

    def update_critic(self, batch: Batch, args: Args, lr: float, n_ranks: int) -> dict[str, Any]: ...

    def sync_rollout(self) -> None: ...

    def prompt_text(self, batch: Batch, i: int) -> str: ...

    def response_text(self, tokens: np.ndarray) -> str: ...


class LogLinearPolicy:
    """The log-linear policy and its linear critic, with a rollout copy synced after each actor update."""

    def __init__(self, args: Args, init_rng: np.random.Generator) -> None:
        self.actor = pretrained_weights(init_rng)
        self.reference = self.actor.copy()
        self.rollout = self.actor.copy()
        self.critic = np.zeros(N_ROWS)
        self.actor_opt = AdamW(self.actor, (args.betas[0], args.betas[1]), args.weight_decay)
        self.critic_opt = AdamW(self.critic, (args.critic_betas[0], args.critic_betas[1]), args.critic_weight_decay)

    def generate(self, prompts: Prompts, uid: np.ndarray, max_len: int, temperature: float, do_sample: bool,
                 top_k: int, top_p: float, rng: np.random.Generator) -> Batch:
        return generate(self.rollout, prompts, uid, max_len, temperature, do_sample, top_k, top_p, rng)

    def score(self, batch: Batch) -> np.ndarray:
        return compute_score(batch.responses, batch.response_len, batch.answer)

    def log_probs(self, batch: Batch, temperature: float, reference: bool = False) -> tuple[np.ndarray, np.ndarray]:
        return token_logprobs(self.reference if reference else self.actor, batch.rows, batch.responses, batch.mask,
                              temperature)

    def values(self, batch: Batch) -> np.ndarray:
        return token_values(self.critic, batch.rows, batch.mask)

    def update_policy(self, batch: Batch, args: Args, lr: float, n_ranks: int) -> dict[str, Any]:
        return update_policy(self.actor, self.actor_opt, batch, args, lr, n_ranks)

    def update_critic(self, batch: Batch, args: Args, lr: float, n_ranks: int) -> dict[str, Any]:
        return update_critic(self.critic, self.critic_opt, batch, args, lr, n_ranks)

    def sync_rollout(self) -> None:
        np.copyto(self.rollout, self.actor)

    def prompt_text(self, batch: Batch, i: int) -> str:
        a, b = divmod(int(batch.pair[i]), 10)
        return f"{a} + {b} =" if batch.pair[i] < N_PAIRS - 1 else "(truncated)"

    def response_text(self, tokens: np.ndarray) -> str:
        return decode(tokens)


def make_policy(args: Args, init_rng: np.random.Generator, use_critic: bool, use_ref: bool) -> Policy:
    if args.policy == "lm":
        from .lm_trainer import LMPolicy  # torch: imported only when the language model runs

        return LMPolicy(args, use_critic, use_ref)
    return LogLinearPolicy(args, init_rng)


def task_prompts(args: Args, rng: np.random.Generator, size: int) -> Prompts:
    """The policy's task: its training or validation prompts under the config's data rules."""
    make = lm_prompts if args.policy == "lm" else make_prompts
    return make(rng, size, args.max_prompt_length, args.truncation, args.filter_overlong_prompts)
