"""Coefficients as slopes: bytes per token per layer (two depths) and bytes per logit (two vocab sizes).

A slope cancels everything that does not grow with the varied dimension (the embeddings, the final norm,
the lm_head's weight gradient, one recomputed layer), so each coefficient is exactly the term it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor.memory import ModelSpec

from ._measure import Phase, Shape, Switches, measure_phase, rank_tokens


@dataclass(frozen=True)
class Slope:
    phase: Phase
    per: str  # "token_layer" | "logit"
    value: float  # bytes
    points: tuple[tuple[int, int], ...]  # (layers or vocab, peak bytes)
    tokens: int  # per rank

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, f"bytes_per_{self.per}": round(self.value, 3), "tokens_per_rank": self.tokens,
                "peaks": [{"at": at, "peak_bytes": peak} for at, peak in self.points]}


def layer_slope(spec: ModelSpec, tokens: int, switches: Switches, phase: Phase = "update",
                layers: tuple[int, int] = (1, 3), vocab: int | None = 256) -> Slope:
    """Bytes per token per decoder layer of ``phase`` (a small vocab keeps the logits off the peak)."""
    n = rank_tokens(tokens, switches.ulysses_sp)
    points = tuple((depth, measure_phase(Shape(spec, n, layers=depth, vocab=vocab), switches, phase))
                   for depth in layers)
    (l1, p1), (l2, p2) = points
    return Slope(phase, "token_layer", (p2 - p1) / ((l2 - l1) * n), points, n)


def logit_slope(spec: ModelSpec, tokens: int, switches: Switches, phase: Phase = "update",
                vocabs: tuple[int, int] = (4096, 8192), layers: int = 1) -> Slope:
    """Bytes per logit ([tokens x vocab] element) of ``phase``, the embeddings frozen so that the lm_head's
    weight gradient (a parameter-sized term) stays out of it."""
    n = rank_tokens(tokens, switches.ulysses_sp)
    points = tuple((v, measure_phase(Shape(spec, n, layers=layers, vocab=v, freeze_embeddings=True), switches, phase))
                   for v in vocabs)
    (v1, p1), (v2, p2) = points
    return Slope(phase, "logit", (p2 - p1) / ((v2 - v1) * n), points, n)


def token_slope(spec: ModelSpec, tokens: tuple[int, int], switches: Switches, phase: Phase = "log_prob",
                layers: int = 2, vocab: int | None = 256) -> Slope:
    """Bytes per token of ``phase`` at a fixed depth (the forward passes: one layer live at a time)."""
    n1, n2 = (rank_tokens(t, switches.ulysses_sp) for t in tokens)
    points = tuple((n, measure_phase(Shape(spec, n, layers=layers, vocab=vocab), switches, phase)) for n in (n1, n2))
    (t1, p1), (t2, p2) = points
    return Slope(phase, "token", (p2 - p1) / (t2 - t1), points, n2)
