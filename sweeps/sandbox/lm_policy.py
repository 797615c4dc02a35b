"""The language-model policy of the sandbox: a small causal transformer on CPU (torch), with a value head for the
critic, autoregressive sampling with a KV cache, and verl's log-prob/entropy conventions.

Architecture (GPT-2 style, pre-LayerNorm): token and learned position embeddings, ``N_LAYERS`` blocks of
``N_HEADS``-head causal self-attention and a GELU MLP, a final LayerNorm, and an LM head tied to the token
embedding. The critic is a separate copy with a linear value head on the last hidden state, as verl's critic is
a separate model (verl/workers/critic/dp_critic.py). The shipped weights are trained by
``scripts/train_sandbox_lm.py`` on the task of sweeps/sandbox/lm_task.py.

Prompts are left-padded and responses right-padded, as in verl's DataProto; positions count real tokens only
(verl computes position_ids from the attention mask), so padding never shifts a sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import lm_task as task

D_MODEL, N_LAYERS, N_HEADS, D_FF, MAX_POS = 64, 2, 4, 128, 64
WEIGHTS = Path(__file__).resolve().parent / "assets" / "sandbox_lm.pt"


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.fc = nn.Linear(D_MODEL, D_FF)
        self.out = nn.Linear(D_FF, D_MODEL)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``mask``: (B, 1, T_query, T_key) bool, True where a query may attend. Returns the output and the
        keys/values of all positions so far (the KV cache)."""
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D_MODEL, dim=-1)
        q, k, v = (z.view(b, t, N_HEADS, D_MODEL // N_HEADS).transpose(1, 2) for z in (q, k, v))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, D_MODEL))
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return x, (k, v)


class TinyLM(nn.Module):
    """The causal LM; ``value_head`` is set on the critic's copy only."""

    def __init__(self, with_value_head: bool = False) -> None:
        super().__init__()
        self.tok = nn.Embedding(task.V, D_MODEL)
        self.pos = nn.Embedding(MAX_POS, D_MODEL)
        self.blocks = nn.ModuleList([Block() for _ in range(N_LAYERS)])
        self.ln_f = nn.LayerNorm(D_MODEL)
        for module in self.modules():  # GPT-2's initialisation: N(0, 0.02), zero biases
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)
        self.value_head: nn.Linear | None = None
        if with_value_head:
            self.value_head = nn.Linear(D_MODEL, 1)
            nn.init.zeros_(self.value_head.weight)  # the critic starts at V = 0, as the log-linear one does
            nn.init.zeros_(self.value_head.bias)

    def hidden(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
               past: list[tuple[torch.Tensor, torch.Tensor]] | None = None
               ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        x = self.tok(tokens) + self.pos(positions.clamp(0, MAX_POS - 1))  # beyond MAX_POS: the last row
        cache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, mask, None if past is None else past[i])
            cache.append(kv)
        return self.ln_f(x), cache

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return h @ self.tok.weight.T  # tied embeddings

    def values(self, h: torch.Tensor) -> torch.Tensor:
        assert self.value_head is not None, "values() needs the critic's copy (with_value_head=True)"
        return self.value_head(h).squeeze(-1)


def load_policy(path: Path = WEIGHTS) -> TinyLM:
    """The shipped SFT model (a state_dict, stored in float16 to keep the package small)."""
    model = TinyLM()
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model


def critic_from(policy: TinyLM) -> TinyLM:
    """verl's critic starts from the same pretrained weights with a fresh value head."""
    critic = TinyLM(with_value_head=True)
    critic.load_state_dict(policy.state_dict(), strict=False)
    return critic


# ----------------------------------------------------------------------------------------------------------------
# sequences: left-padded prompt + right-padded response


def sequence_layout(prompt: torch.Tensor, prompt_valid: torch.Tensor, response: torch.Tensor,
                    response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The full (B, P+T) token ids, position ids and (B, 1, L, L) attention mask of prompt + response."""
    tokens = torch.cat([prompt, response], dim=1)
    valid = torch.cat([prompt_valid, response_mask > 0], dim=1)
    positions = (valid.long().cumsum(dim=1) - 1).clamp(min=0)
    length = tokens.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    # a padded query attends to itself only, so no row of the softmax is empty
    mask = (causal & valid[:, None, :]) | torch.eye(length, dtype=torch.bool)
    return tokens, positions, mask[:, None]


def response_logits_hidden(model: TinyLM, prompt: torch.Tensor, prompt_valid: torch.Tensor,
                           response: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """The hidden states that predict each response token: positions P-1 .. P+T-2 (verl's
    ``logits[:, -response_length - 1 : -1]``)."""
    tokens, positions, mask = sequence_layout(prompt, prompt_valid, response, response_mask)
    h, _ = model.hidden(tokens, positions, mask)
    p, t = prompt.shape[1], response.shape[1]
    return h[:, p - 1: p + t - 1]


def logprobs_entropy(model: TinyLM, prompt: torch.Tensor, prompt_valid: torch.Tensor, response: torch.Tensor,
                     response_mask: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(token) and the entropy at each response position, with the logits divided by the rollout
    temperature (verl/workers/actor/dp_actor.py: ``logits.div_(temperature)``)."""
    h = response_logits_hidden(model, prompt, prompt_valid, response, response_mask)
    logp_all = F.log_softmax(model.logits(h) / temperature, dim=-1)
    logp = logp_all.gather(-1, response.clamp(min=0)[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(dim=-1)
    return logp, entropy


# ----------------------------------------------------------------------------------------------------------------
# sampling


@dataclass(frozen=True)
class Sampling:
    """vLLM's sampling knobs as verl's rollout passes them."""

    temperature: float = 1.0
    top_k: int = -1
    top_p: float = 1.0
    do_sample: bool = True


def filter_logits(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """Temperature, then top-k, then top-p (vLLM's order); filtered tokens get -inf."""
    z = logits / sampling.temperature
    if 0 < sampling.top_k < z.shape[-1]:
        kth = torch.topk(z, sampling.top_k, dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, -math.inf)
    if sampling.top_p < 1.0:
        sorted_z, order = torch.sort(z, dim=-1, descending=True)
        probs = sorted_z.softmax(dim=-1)
        drop_sorted = probs.cumsum(dim=-1) - probs >= sampling.top_p  # keep the smallest set reaching top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        z = z.masked_fill(drop, -math.inf)
    return z


def next_tokens(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> torch.Tensor:
    if not sampling.do_sample:
        return logits.argmax(dim=-1)
    probs = filter_logits(logits, sampling).softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(model: TinyLM, prompt: torch.Tensor, prompt_valid: torch.Tensor, max_len: int, sampling: Sampling,
             generator: torch.Generator) -> torch.Tensor:
    """Sample responses token by token until EOS or ``max_len`` (a response cut there is truncated).

    Returns (B, T) token ids, PAD after EOS, T the longest response. Finished rows leave the batch (and the
    KV cache), so one rambling response costs its own tokens only.
    """
    b = prompt.shape[0]
    out = torch.full((b, max_len), task.PAD, dtype=torch.long)
    positions = (prompt_valid.long().cumsum(dim=1) - 1).clamp(min=0)
    p = prompt.shape[1]
    causal = torch.ones(p, p, dtype=torch.bool).tril()
    mask = ((causal & prompt_valid[:, None, :]) | torch.eye(p, dtype=torch.bool))[:, None]
    h, cache = model.hidden(prompt, positions, mask)
    logits = model.logits(h[:, -1])
    key_valid = prompt_valid.clone()
    next_pos = prompt_valid.long().sum(dim=1)
    active = torch.arange(b)
    width = 0
    for t in range(max_len):
        tok = next_tokens(logits, sampling, generator)
        out[active, t] = tok
        width = t + 1
        keep = tok != task.EOS
        if not bool(keep.any()) or t == max_len - 1:
            break
        if not bool(keep.all()):
            active, tok, next_pos, key_valid = active[keep], tok[keep], next_pos[keep], key_valid[keep]
            cache = [(k[keep], v[keep]) for k, v in cache]
        key_valid = torch.cat([key_valid, torch.ones(len(active), 1, dtype=torch.bool)], dim=1)
        h, cache = model.hidden(tok[:, None], next_pos[:, None], key_valid[:, None, None, :], cache)
        logits = model.logits(h[:, -1])
        next_pos = next_pos + 1
    return out[:, :width]


def response_mask(responses: torch.Tensor) -> torch.Tensor:
    """1.0 on response tokens up to and including the first EOS (all of them when there is none)."""
    is_eos = responses == task.EOS
    before = is_eos.long().cumsum(dim=1) - is_eos.long()  # EOS tokens strictly before each position
    return (before == 0).float()


def state_size_bytes(model: nn.Module) -> int:
    return sum(v.numel() * 2 for v in model.state_dict().values())  # float16 on disk


def state_for_disk(model: nn.Module) -> dict[str, Any]:
    return {k: v.detach().to(torch.float16).clone() for k, v in model.state_dict().items()}


# ----------------------------------------------------------------------------------------------------------------
# the start-of-run figures the SFT is calibrated to (scripts/train_sandbox_lm.py, tests)


def pad_left(prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad prompts to the longest: (B, P) ids and the (B, P) bool mask of real tokens."""
    width = max(len(p) for p in prompts)
    tokens = torch.full((len(prompts), width), task.PAD, dtype=torch.long)
    valid = torch.zeros(len(prompts), width, dtype=torch.bool)
    for i, p in enumerate(prompts):
        tokens[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
        valid[i, width - len(p):] = True
    return tokens, valid


@dataclass(frozen=True)
class StartFigures:
    entropy: float  # token-mean entropy (nats) of T=1 samples, as verl's actor/entropy at step 1
    sampled_score: float  # mean score of T=1 samples (critic/score/mean at step 1)
    greedy_score: float  # mean score of greedy decoding (val-core with verl's default val_kwargs)

    @property
    def ratio(self) -> float:
        return self.sampled_score / self.greedy_score if self.greedy_score else math.nan


@torch.no_grad()
def start_figures(model: TinyLM, n_prompts: int = 512, samples: int = 4, seed: int = 0,
                  max_response_length: int = 32) -> StartFigures:
    """Sample ``samples`` responses at T=1 and one greedy response for ``n_prompts`` RL prompts."""
    rng = np.random.default_rng(seed)
    problems = [task.draw_problem(rng, task.TaskMix()) for _ in range(n_prompts)]
    prompts = [task.prompt_tokens(p, rng) for p in problems]
    generator = torch.Generator().manual_seed(seed)
    tokens, valid = pad_left([p for p in prompts for _ in range(samples)])
    resp = generate(model, tokens, valid, max_response_length, Sampling(), generator)
    mask = response_mask(resp)
    _, entropy = logprobs_entropy(model, tokens, valid, resp, mask, 1.0)
    answers = [p.answer for p in problems for _ in range(samples)]
    lengths = mask.sum(dim=1).long().tolist()
    sampled = sum(task.score(resp[i].tolist(), lengths[i], answers[i]) for i in range(len(answers))) / len(answers)
    g_tokens, g_valid = pad_left(prompts)
    greedy = generate(model, g_tokens, g_valid, max_response_length, Sampling(do_sample=False), generator)
    g_len = response_mask(greedy).sum(dim=1).long().tolist()
    greedy_score = sum(task.score(greedy[i].tolist(), g_len[i], problems[i].answer)
                       for i in range(n_prompts)) / n_prompts
    return StartFigures(float((entropy * mask).sum() / mask.sum()), sampled, greedy_score)
