"""Token ids to text for both policies' vocabularies (task.py, lm_task.py), and gsm8k's answer extraction."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

import numpy as np

# gsm8k's strict extraction (verl/utils/reward_score/gsm8k.py): the last "#### <number>" in the response
ANSWER_PATTERN = re.compile(r"#### (\-?[0-9\.\,]+)")


def detokenize(tokens: Sequence[int] | np.ndarray, vocab: Sequence[str], digit0: int, skip: Collection[int]) -> str:
    """Token ids -> text, leaving out ``skip`` (padding, EOS); the digits ``digit0..digit0+9`` that follow each
    other form one number, every other token is a word of its own."""
    text = ""
    prev_digit = False
    for t in tokens:
        t = int(t)
        if t in skip:
            continue
        is_digit = digit0 <= t < digit0 + 10
        text += vocab[t] if (is_digit and prev_digit) or not text else " " + vocab[t]
        prev_digit = is_digit
    return text
