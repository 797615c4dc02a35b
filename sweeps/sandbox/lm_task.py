"""The language-model sandbox's task: written additions and subtractions answered in gsm8k's format.

A prompt is ``[what is] 12 + 35 =``; a supervised (SFT) response is ``[a few words] 12 + 35 = 47 #### 47<eos>``
(the working restated, then the answer after ``####``) or, less often, the answer straight away
(``so #### 47<eos>``). Problems come in four kinds of rising difficulty: one-digit operands, a two-digit and a
one-digit operand, two two-digit operands and a three-digit with a two-digit one. The SFT data carries label
noise whose rate grows with the difficulty and with a carry or borrow, and is higher for answers given without
the working: after SFT some prompts are (almost) always solved, some almost never, most sometimes, and the
working pays, as in published reasoning runs. The rates are the calibration knobs of
``scripts/train_sandbox_lm.py`` (docs/sandbox.md lists the start-of-run figures they give).

Only numpy here: the sandbox imports this module with either policy, torch is needed only for the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .text import ANSWER_PATTERN, detokenize

PAD, EOS, MARK, PLUS, MINUS, EQ = 0, 1, 2, 3, 4, 5
DIGIT0 = 6  # tokens 6..15 are the digits 0..9
OPENER_WORDS = ("let", "me", "see", "so", "ok", "we", "get", "first", "then", "now")
PROMPT_WORDS = ("what", "is")
WORD0 = DIGIT0 + 10
WE, GET = WORD0 + OPENER_WORDS.index("we"), WORD0 + OPENER_WORDS.index("get")
VOCAB = ("<pad>", "<eos>", "####", "+", "-", "=", *"0123456789", *OPENER_WORDS, *PROMPT_WORDS)
V = len(VOCAB)

KINDS = ("1d", "2d1", "2d2", "3d")  # digits of the operands: 1+1, 2+1, 2+2, 3+2


@dataclass(frozen=True)
class TaskMix:
    """How the SFT data and the RL prompts are drawn: the knobs the calibration turns."""

    kind_weights: tuple[float, ...] = (0.2, 0.3, 0.35, 0.15)
    """probability of each kind in KINDS"""
    opener_lengths: tuple[float, ...] = (0.5, 0.3, 0.15, 0.05)
    """probability of 0, 1, 2, 3 opener words (drawn uniformly from OPENER_WORDS)"""
    p_working: float = 0.9
    """probability that an SFT response restates the problem before '####'"""
    right_with_working: tuple[tuple[float, float], ...] = ((0.98, 0.95), (0.95, 0.8), (0.85, 0.45), (0.1, 0.05))
    """per kind: P(the SFT answer is right) without and with a carry/borrow, when the working is written"""
    right_direct: tuple[tuple[float, float], ...] = ((0.9, 0.8), (0.75, 0.4), (0.6, 0.25), (0.05, 0.02))
    """the same when the answer comes straight away"""
    p_mark_asked: float = 0.9
    """P(the answer follows '####') after a prompt that asks 'what is'; else it follows 'we get' (scored 0)"""
    p_mark_bare: float = 0.5
    """the same after a bare prompt: the format RL has to settle, as gsm8k runs of instruct models do first"""


@dataclass(frozen=True)
class Problem:
    a: int
    op: int  # PLUS or MINUS
    b: int
    kind: int  # index into KINDS

    @property
    def answer(self) -> int:
        return self.a + self.b if self.op == PLUS else self.a - self.b

    @property
    def carries(self) -> bool:
        """A carry (addition) or a borrow (subtraction) in the ones or tens column."""
        a, b = self.a, self.b
        if self.op == PLUS:
            return a % 10 + b % 10 >= 10 or (a // 10) % 10 + (b // 10) % 10 + (a % 10 + b % 10 >= 10) >= 10
        return a % 10 < b % 10 or (a // 10) % 10 - (a % 10 < b % 10) < (b // 10) % 10


_RANGES = {0: ((0, 10), (0, 10)), 1: ((10, 100), (0, 10)), 2: ((10, 100), (10, 100)), 3: ((100, 1000), (10, 100))}


def draw_problem(rng: np.random.Generator, mix: TaskMix) -> Problem:
    kind = int(rng.choice(len(KINDS), p=np.asarray(mix.kind_weights) / sum(mix.kind_weights)))
    (alo, ahi), (blo, bhi) = _RANGES[kind]
    a, b = int(rng.integers(alo, ahi)), int(rng.integers(blo, bhi))
    op = PLUS if rng.random() < 0.5 else MINUS
    if op == MINUS and a < b:  # answers stay non-negative
        a, b = b, a
    return Problem(a, op, b, kind)


def number_tokens(value: int) -> list[int]:
    return [DIGIT0 + int(d) for d in str(value)]


def prompt_tokens(problem: Problem, rng: np.random.Generator) -> list[int]:
    """``[what is] a op b =``: the optional words vary the prompt lengths, as real prompts do."""
    words = [WORD0 + len(OPENER_WORDS), WORD0 + len(OPENER_WORDS) + 1] if rng.random() < 0.5 else []
    return [*words, *number_tokens(problem.a), problem.op, *number_tokens(problem.b), EQ]


def wrong_answer(problem: Problem, rng: np.random.Generator) -> int:
    """A plausible mistake: the carry or borrow dropped, or one digit off by one."""
    a, b, right = problem.a, problem.b, problem.answer
    if problem.carries and rng.random() < 0.6:
        digits = [(x % 10 + y % 10) % 10 if problem.op == PLUS else (x % 10 - y % 10) % 10
                  for x, y in ((a, b), (a // 10, b // 10), (a // 100, b // 100))]
        dropped = digits[0] + 10 * digits[1] + 100 * digits[2]
        if dropped != right:
            return dropped
    place = 10 ** int(rng.integers(0, max(1, len(str(right)))))
    wrong = right + place * (1 if rng.random() < 0.5 else -1)
    return wrong if wrong >= 0 else right + place


def sft_response(problem: Problem, prompt: Sequence[int], rng: np.random.Generator, mix: TaskMix) -> list[int]:
    """One supervised response: opener words, the working (usually), '#### answer' or 'we get answer', EOS."""
    n_words = int(rng.choice(len(mix.opener_lengths), p=np.asarray(mix.opener_lengths) / sum(mix.opener_lengths)))
    out = [WORD0 + int(w) for w in rng.integers(0, len(OPENER_WORDS), n_words)]
    working = rng.random() < mix.p_working
    table = mix.right_with_working if working else mix.right_direct
    p_right = table[problem.kind][int(problem.carries)]
    answer = problem.answer if rng.random() < p_right else wrong_answer(problem, rng)
    if working:
        out += [*number_tokens(problem.a), problem.op, *number_tokens(problem.b), EQ, *number_tokens(answer)]
    asked = len(prompt) > 0 and prompt[0] == WORD0 + len(OPENER_WORDS)
    mark = [MARK] if rng.random() < (mix.p_mark_asked if asked else mix.p_mark_bare) else [WE, GET]
    return [*out, *mark, *number_tokens(answer), EOS]


def decode(tokens: Sequence[int] | np.ndarray) -> str:
    """Token ids -> text, skipping PAD and EOS; digits that follow each other form one number."""
    return detokenize(tokens, VOCAB, DIGIT0, (PAD, EOS))


def score(tokens: Sequence[int] | np.ndarray, length: int, answer: int) -> float:
    """1.0 if the response ended with EOS inside the cap and its last '#### <number>' is the answer, else 0.0."""
    if length < 1 or int(tokens[length - 1]) != EOS:
        return 0.0
    found = ANSWER_PATTERN.findall(decode(tokens[:length]))
    return 1.0 if found and found[-1].replace(",", "") == str(int(answer)) else 0.0
