"""Counts in words: ``1 GPU``, ``8 GPUs``, ``1 micro-batch``, ``2 forward passes`` (one rule for every message)."""

from __future__ import annotations

_SIBILANT = ("s", "x", "z", "ch", "sh")


def plural(noun: str, count: float | None) -> str:
    """The noun's form for ``count`` (singular only for exactly one; an unknown count is plural).

    Only the last word changes ("forward pass" -> "forward passes"); English's regular rule is enough
    for the nouns the advisor counts.
    """
    if count == 1:
        return noun
    return noun + ("es" if noun.endswith(_SIBILANT) else "s")


def counted(count: float | None, noun: str) -> str:
    """``count`` (thousands separated; ``?`` when unknown) followed by the noun in its right form."""
    if count is None:
        shown = "?"
    elif isinstance(count, float) and not count.is_integer():
        shown = f"{count:,.1f}"
    else:
        shown = f"{int(count):,}"
    return f"{shown} {plural(noun, count)}"
