"""One detokenizer for both policies' vocabularies (sweeps/sandbox/text.py): padding and EOS left out, digits that
follow each other joined into one number, every other token a word; the expected texts are spelled out by hand."""

from __future__ import annotations

import numpy as np

from sweeps.sandbox import lm_task, task
from sweeps.sandbox.text import detokenize


def test_the_log_linear_vocabulary_reads_as_words_and_numbers() -> None:
    let, see = task.FILLER0, task.FILLER0 + 2
    tokens = np.array([task.PAD, let, see, task.DIGIT0 + 1, task.DIGIT0 + 2, task.MARK, task.DIGIT0 + 1,
                       task.DIGIT0 + 2, task.EOS, task.PAD])
    assert task.decode(tokens) == "let see 12 #### 12"


def test_the_language_models_vocabulary_reads_as_words_and_numbers() -> None:
    what, is_ = lm_task.WORD0 + len(lm_task.OPENER_WORDS), lm_task.WORD0 + len(lm_task.OPENER_WORDS) + 1
    d = lm_task.DIGIT0
    tokens = [what, is_, d + 4, d + 7, lm_task.MINUS, d + 5, lm_task.EQ, lm_task.MARK, d + 4, d + 2, lm_task.EOS]
    assert lm_task.decode(tokens) == "what is 47 - 5 = #### 42"


def test_a_skipped_token_between_digits_leaves_one_number_and_a_word_splits_numbers() -> None:
    vocab = ("<pad>", "<eos>", "x", "0", "1")
    assert detokenize([3, 0, 4, 2, 4, 1], vocab, 3, (0, 1)) == "01 x 1"
    assert detokenize([], vocab, 3, (0, 1)) == ""
