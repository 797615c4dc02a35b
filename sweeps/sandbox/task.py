"""THE TASK: one-digit additions answered in gsm8k's "#### <number>" format (the log-linear policy's), the language
model's prompts (lm_task.py) padded the same way, and the rule reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import lm_task
from .args import SandboxConfigError
from .text import ANSWER_PATTERN, detokenize

PAD, EOS, MARK, PLUS, EQ = 0, 1, 2, 3, 4
DIGIT0 = 5  # tokens 5..14 are the digits 0..9
FILLER0 = 15  # tokens 15..18 are words: let, me, see, so
VOCAB = ("<pad>", "<eos>", "####", "+", "=", *"0123456789", "let", "me", "see", "so")
V = len(VOCAB)
DATA_SOURCE = "sandbox/add"

# Model state before each response token: the context the policy and the critic see besides the prompt.
S_THINK, S_MARK = 0, 1  # before any marker; right after a marker
S_NUM = 2  # S_NUM + v: after "#### v" with v in 0..19
S_OVER, S_AFTER = 22, 23  # a number that cannot be an answer (leading 0, >= 20); text after the answer
N_STATES = 24
N_PAIRS = 101  # a*10+b for the 100 problems, 100 when the prompt was truncated into the equation
N_POS = 32  # positions beyond share the last row


@dataclass
class Prompts:
    """A padded batch of prompts (left-padded, as verl does) and their answers."""

    tokens: np.ndarray  # (N, max_prompt_length) int
    lengths: np.ndarray  # (N,) int
    pair: np.ndarray  # (N,) int: the problem the policy sees (100 = unreadable)
    answer: np.ndarray  # (N,) int


def make_prompts(rng: np.random.Generator, size: int, max_prompt_length: int, truncation: str,
                 filter_overlong: bool) -> Prompts:
    """Generate ``size`` problems "[let me see] a + b =" with a, b in 0..9."""
    a = rng.integers(0, 10, size)
    b = rng.integers(0, 10, size)
    n_words = rng.integers(0, 4, size)
    words = rng.integers(FILLER0, FILLER0 + 4, (size, 3))
    raw = [[*words[i, : n_words[i]], DIGIT0 + a[i], PLUS, DIGIT0 + b[i], EQ] for i in range(size)]
    padded = pad_prompts(raw, a + b, 10 * a + b, max_prompt_length, truncation, filter_overlong)
    out, lengths = padded.tokens, padded.lengths
    # the policy recognises the problem only if "a + b =" survived truncation
    readable = np.zeros(len(out), dtype=bool)
    if max_prompt_length >= 4:
        tail = out[:, -4:]
        readable = ((lengths >= 4) & (tail[:, 1] == PLUS) & (tail[:, 3] == EQ) & (tail[:, 0] >= DIGIT0)
                    & (tail[:, 0] < DIGIT0 + 10) & (tail[:, 2] >= DIGIT0) & (tail[:, 2] < DIGIT0 + 10))
    pair = np.where(readable, padded.pair, N_PAIRS - 1)
    return Prompts(out, lengths, pair.astype(np.int64), padded.answer)


def pad_prompts(raw: list[list[int]], answer: np.ndarray, pair: np.ndarray, max_prompt_length: int,
                truncation: str, filter_overlong: bool) -> Prompts:
    """Token lists -> left-padded prompts, filtered (data.filter_overlong_prompts) or truncated (data.truncation)
    at max_prompt_length as verl's RLHFDataset does."""
    if filter_overlong:
        keep = [i for i, p in enumerate(raw) if len(p) <= max_prompt_length]
        if not keep:
            raise SandboxConfigError(f"data.max_prompt_length={max_prompt_length} filters out every prompt "
                                     f"(the shortest sandbox prompt has {min(len(p) for p in raw)} tokens)")
        raw, answer, pair = [raw[i] for i in keep], answer[keep], pair[keep]
    out = np.full((len(raw), max_prompt_length), PAD, dtype=np.int64)
    lengths = np.zeros(len(raw), dtype=np.int64)
    for i, p in enumerate(raw):
        if len(p) > max_prompt_length:
            if truncation == "left":
                p = p[-max_prompt_length:]
            elif truncation == "right":
                p = p[:max_prompt_length]
            elif truncation == "middle":
                left = max_prompt_length // 2
                p = p[:left] + p[len(p) - (max_prompt_length - left):]
            else:
                raise SandboxConfigError(f"Prompt length {len(p)} is longer than {max_prompt_length}, consider "
                                         "increasing data.max_prompt_length or setting data.truncation")
        out[i, max_prompt_length - len(p):] = p
        lengths[i] = len(p)
    return Prompts(out, lengths, np.asarray(pair, dtype=np.int64), np.asarray(answer, dtype=np.int64))


def lm_prompts(rng: np.random.Generator, size: int, max_prompt_length: int, truncation: str,
               filter_overlong: bool) -> Prompts:
    """``size`` problems of the language model's task (sweeps/sandbox/lm_task.py); ``pair`` holds each one's kind."""
    problems = [lm_task.draw_problem(rng, lm_task.TaskMix()) for _ in range(size)]
    raw = [lm_task.prompt_tokens(p, rng) for p in problems]
    return pad_prompts(raw, np.array([p.answer for p in problems]), np.array([p.kind for p in problems]),
                       max_prompt_length, truncation, filter_overlong)


def decode(tokens: Sequence[int] | np.ndarray) -> str:
    """Token ids -> text, skipping special tokens; digits that follow each other form one number."""
    return detokenize(tokens, VOCAB, DIGIT0, (PAD, EOS))


def compute_score(responses: np.ndarray, lengths: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """The rule reward: 1.0 if the response ended with EOS and its last '#### <number>' is the answer, else 0.0.

    The extraction is gsm8k's strict one; requiring EOS is the sandbox's rule, so truncation costs the score.
    """
    scores = np.zeros(len(responses))
    for i in range(len(responses)):
        length = int(lengths[i])
        if responses[i, length - 1] != EOS:
            continue
        found = ANSWER_PATTERN.findall(decode(responses[i, :length]))
        if found and found[-1].replace(",", "") == str(int(answers[i])):
            scores[i] = 1.0
    return scores


def next_state(state: np.ndarray, token: np.ndarray) -> np.ndarray:
    """Advance the context state on the emitted tokens (vectorized over the batch)."""
    is_digit = (token >= DIGIT0) & (token < DIGIT0 + 10)
    digit = token - DIGIT0
    value = state - S_NUM
    in_num = (state >= S_NUM) & (state < S_OVER)
    grown = 10 * value + digit
    out = state.copy()
    out[token == MARK] = S_MARK
    out[is_digit & (state == S_MARK)] = (S_NUM + digit)[is_digit & (state == S_MARK)]
    ok = is_digit & in_num & (value > 0) & (grown < 20)
    out[ok] = (S_NUM + grown)[ok]
    out[is_digit & in_num & ~ok] = S_OVER
    words = ~is_digit & (token != MARK) & (token != EOS)
    out[words & (state != S_THINK)] = S_AFTER
    return out


def repeat_prompts(prompts: Prompts, n: int) -> Prompts:
    """DataProto.repeat(n, interleave=True)."""
    return Prompts(np.repeat(prompts.tokens, n, axis=0), np.repeat(prompts.lengths, n),
                   np.repeat(prompts.pair, n), np.repeat(prompts.answer, n))


def take_prompts(prompts: Prompts, idx: np.ndarray) -> Prompts:
    return Prompts(prompts.tokens[idx], prompts.lengths[idx], prompts.pair[idx], prompts.answer[idx])
