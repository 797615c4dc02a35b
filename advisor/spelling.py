"""How far one spelling is from another, for "did you mean": edit distance with CPython's cut-off.

The distance counts insertions, deletions, substitutions and swaps of two neighbouring letters as one edit
each (Damerau's optimal string alignment), so ``temprature`` is 1 from ``temperature`` and 9 from ``qat``.
The cut-off is the one CPython uses for its own "Did you mean" on a misspelt name (``Python/suggestions.c``:
"No more than 1/3 of the involved characters should need changed", ``(name_size + item_size + 3) * MOVE_COST / 6``
with an edit costing ``MOVE_COST``): at most ``(len(a) + len(b) + 3) / 6`` edits, so a short word is allowed one
edit and a long key a few, never a rewrite.

The one "did you mean" engine of the advisor and the sweep runner (config keys, enumerated values, rule-file
fields, metric, model and GPU names), in place of difflib's ratio, which ranked the same words otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable


def edit_distance(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and neighbour swaps that turn ``a`` into ``b``."""
    return _distances(a, b)[-1] if a != b else 0


def _distances(a: str, b: str) -> list[int]:
    """The edits that turn each prefix of ``a`` (``a[:i]`` at index i) into ``b``."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    out = [len(b)]
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
        out.append(current[-1])
    return out


def close_enough(a: str, b: str, distance: int | None = None) -> bool:
    """Whether ``b`` is within CPython's cut-off of ``a``: at most (len(a) + len(b) + 3) / 6 edits."""
    d = edit_distance(a, b) if distance is None else distance
    return 6 * d <= len(a) + len(b) + 3


def closest(word: str, choices: Iterable[str], limit: int = 3, *, extra_suffix: bool = False) -> list[str]:
    """The choices within the cut-off of ``word``, nearest first; among equally near ones, the one that starts as
    ``word`` does for longer (``neq``: ``ne`` before ``eq``), then alphabetical order.

    ``extra_suffix``: a product name may carry a suffix the catalog's name lacks (``H100-80G-SXM9`` for
    ``H100-80GB``): each choice is also measured against the prefix of ``word`` nearest to it."""
    ranked = []
    for c in set(choices):
        if c == word:
            continue
        distances = _distances(word, c)
        d, compared = distances[-1], word
        if extra_suffix:
            i = min(range(len(distances)), key=lambda k: (distances[k], -k))
            if distances[i] < d:
                d, compared = distances[i], word[:i]
        if close_enough(compared, c, d):
            ranked.append((d, -_common_prefix(word, c), c))
    return [c for _, _, c in sorted(ranked)[:limit]]


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def likely_typo(a: str, b: str) -> bool:
    """Whether ``a`` is so near ``b`` that setting ``b`` in its place is safe to propose: at most one edit per ten
    characters of the two (a 36-character key allows three; ``kl_los_coef`` -> ``kl_loss_coef`` is one), far inside
    :func:`close_enough`'s "did you mean" cut-off."""
    return 20 * edit_distance(a, b) <= len(a) + len(b)
