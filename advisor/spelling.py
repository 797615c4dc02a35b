"""How far one spelling is from another, for "did you mean": edit distance with CPython's cut-off.

The distance counts insertions, deletions, substitutions and swaps of two neighbouring letters as one edit
each (Damerau's optimal string alignment), so ``temprature`` is 1 from ``temperature`` and 9 from ``qat``.
The cut-off is the one CPython uses for its own "Did you mean" on a misspelt name (``Python/suggestions.c``:
"No more than 1/3 of the involved characters should need changed", ``(name_size + item_size + 3) * MOVE_COST / 6``
with an edit costing ``MOVE_COST``): at most ``(len(a) + len(b) + 3) / 6`` edits, so a short word is allowed one
edit and a long key a few, never a rewrite.
"""

from __future__ import annotations

from collections.abc import Iterable


def edit_distance(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and neighbour swaps that turn ``a`` into ``b``."""
    if a == b:
        return 0
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def close_enough(a: str, b: str, distance: int | None = None) -> bool:
    """Whether ``b`` is within CPython's cut-off of ``a``: at most (len(a) + len(b) + 3) / 6 edits."""
    d = edit_distance(a, b) if distance is None else distance
    return 6 * d <= len(a) + len(b) + 3


def closest(word: str, choices: Iterable[str], limit: int = 3) -> list[str]:
    """The choices within the cut-off of ``word``, nearest first (ties in alphabetical order)."""
    ranked = sorted((d, c) for c in set(choices) if c != word and close_enough(word, c, d := edit_distance(word, c)))
    return [c for _, c in ranked[:limit]]
