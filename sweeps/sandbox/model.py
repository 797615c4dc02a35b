"""THE MODEL: the log-linear policy and its value head over the same one-hot features, and the pretrained weights."""

from __future__ import annotations

import numpy as np

from .task import (
    DIGIT0,
    EOS,
    EQ,
    FILLER0,
    MARK,
    N_PAIRS,
    N_POS,
    N_STATES,
    PAD,
    PLUS,
    S_AFTER,
    S_MARK,
    S_NUM,
    S_OVER,
    S_THINK,
    V,
)

# Row offsets of the model's feature tables inside one parameter matrix (see TokenModel).
OFF_CTX = 0  # (problem, state): what this problem's answer looks like
OFF_SP = OFF_CTX + N_PAIRS * N_STATES  # (state, previous token): the output format
OFF_POS = OFF_SP + N_STATES * V  # (state, position in the response): length habits
OFF_BIAS = OFF_POS + N_STATES * N_POS
N_ROWS = OFF_BIAS + 1


def feature_rows(pair: np.ndarray, state: np.ndarray, prev: np.ndarray, pos: int | np.ndarray) -> np.ndarray:
    """The four parameter rows one token's prediction sums: (..., 4) int."""
    pos_arr = np.minimum(np.broadcast_to(pos, state.shape), N_POS - 1)
    return np.stack([OFF_CTX + pair * N_STATES + state, OFF_SP + state * V + prev,
                     OFF_POS + state * N_POS + pos_arr, np.full_like(state, OFF_BIAS)], axis=-1)


def pretrained_weights(rng: np.random.Generator) -> np.ndarray:
    """The starting policy, standing in for an SFT model: it knows the format and half knows the sums.

    About a third of its sampled answers are right at temperature 1; it wanders for a few words before
    '####', sometimes never writes a number or EOS, and sometimes has a wrong sum in mind.
    """
    w = np.zeros((N_ROWS, V))
    digits, words = slice(DIGIT0, DIGIT0 + 10), slice(FILLER0, FILLER0 + 4)
    w[OFF_BIAS, PAD] = -30.0  # never sampled
    for state in range(N_STATES):
        row = np.zeros(V)
        if state == S_THINK:
            row[words], row[MARK], row[EOS], row[digits], row[[PLUS, EQ]] = 1.6, 0.5, -2.0, -1.0, -2.0
        elif state == S_MARK:
            row[digits], row[EOS], row[MARK], row[words], row[[PLUS, EQ]] = 1.5, -1.5, -2.0, -1.5, -3.0
        elif state == S_OVER:
            row[EOS], row[digits], row[words], row[MARK] = 1.0, -0.5, 0.0, -1.0
        elif state == S_AFTER:
            row[EOS], row[words], row[MARK], row[digits] = 1.5, 0.5, -0.5, -1.0
        else:  # after "#### v"
            row[EOS], row[digits], row[words], row[MARK], row[[PLUS, EQ]] = 1.0, -0.2, -1.0, -2.0, -3.0
        w[OFF_SP + state * V: OFF_SP + (state + 1) * V] += row
    ramp = np.arange(N_POS)
    w[OFF_POS + S_THINK * N_POS + ramp, MARK] += 0.25 * ramp  # the longer it thinks, the likelier '####'
    for state in range(S_MARK, N_STATES):
        w[OFF_POS + state * N_POS + ramp, EOS] += 0.1 * ramp  # and the likelier it stops
    for pair in range(N_PAIRS - 1):
        answer = pair // 10 + pair % 10
        skill = rng.uniform(0.0, 3.0)
        ctx = OFF_CTX + pair * N_STATES
        w[ctx: ctx + N_STATES] += rng.normal(0.0, 0.3, (N_STATES, V))
        first, second = (answer, None) if answer < 10 else (answer // 10, answer % 10)
        w[ctx + S_MARK, DIGIT0 + first] += skill
        w[ctx + S_MARK, DIGIT0 + rng.integers(0, 10)] += rng.uniform(0.0, 2.0)  # a misconception
        if second is None:
            w[ctx + S_NUM + answer, EOS] += skill
        else:
            w[ctx + S_NUM + first, DIGIT0 + second] += 1.0 + skill
            w[ctx + S_NUM + first, EOS] -= 1.0
            w[ctx + S_NUM + answer, EOS] += skill
    return w


# ================================================================================================================
# THE MODEL: a softmax policy and a value head over the same one-hot features
# ================================================================================================================


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def policy_forward(weights: np.ndarray, rows: np.ndarray, temperature: float) -> np.ndarray:
    """log pi(. | context) at the rollout temperature: (..., V). verl's actor divides its logits the same way."""
    return log_softmax(weights[rows].sum(axis=-2) / temperature)


def value_forward(weights: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The critic: a linear value head over the same features."""
    return weights[rows].sum(axis=-1)


# verl's actor and critic with use_remove_padding compute on the response tokens only; so does the sandbox: a
# batch whose longest response hits max_response_length would otherwise spend its time on padding (1.5% of
# responses at 1024 tokens made a 2560-response step 7 s instead of 0.2 s). Padding gets 0, and is masked out.


def token_logprobs(weights: np.ndarray, rows: np.ndarray, tokens: np.ndarray, mask: np.ndarray,
                   temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """log pi(token) and the entropy at each response token (mask > 0): two (N, T) arrays, 0 on padding."""
    live = mask > 0
    logp = policy_forward(weights, rows[live], temperature)
    chosen, entropy = np.zeros(mask.shape), np.zeros(mask.shape)
    chosen[live] = np.take_along_axis(logp, tokens[live][:, None], axis=-1)[:, 0]
    entropy[live] = -(np.exp(logp) * logp).sum(axis=-1)
    return chosen, entropy


def token_values(weights: np.ndarray, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The critic's value at each response token, 0 on padding."""
    values = np.zeros(mask.shape)
    values[mask > 0] = value_forward(weights, rows[mask > 0])
    return values


def scatter_rows(rows: np.ndarray, grad_out: np.ndarray, n_rows: int) -> np.ndarray:
    """Backward of ``weights[rows].sum(-2)``: add each token's gradient into its four rows."""
    flat_rows = rows.reshape(-1, rows.shape[-1])
    if grad_out.ndim == rows.ndim:  # per-token vectors (policy): (..., V)
        width = grad_out.shape[-1]
        g = np.repeat(grad_out.reshape(-1, width), flat_rows.shape[1], axis=0)
        idx = (flat_rows.reshape(-1, 1) * width + np.arange(width)).ravel()
        return np.bincount(idx, weights=g.ravel(), minlength=n_rows * width).reshape(n_rows, width)
    g = np.repeat(grad_out.reshape(-1), flat_rows.shape[1])  # per-token scalars (critic)
    return np.bincount(flat_rows.ravel(), weights=g, minlength=n_rows)


def chosen_logprobs(logp_all: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    return np.take_along_axis(logp_all, tokens[..., None], axis=-1)[..., 0]
