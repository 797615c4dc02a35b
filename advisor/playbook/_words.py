"""A harm condition in the words a warning prints ("harm held: response_length/mean below 0.5 x response_length/max"):
which of a rule's harm groups held, so a user can judge it (issue 35, item 5)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._conditions import given_args
from ._rule_loader import Condition

_COMPARE_WORDS = {"lt": "below", "le": "at most", "gt": "above", "ge": "at least"}
_PUBLISHED = "the highest step healthy published verl runs logged at the same progress"


def _offset(a: dict[str, Any]) -> str:
    offset = a.get("offset") or 0.0
    return f" {'+' if offset > 0 else '-'} {abs(offset):g}" if offset else ""


def _where(a: dict[str, Any]) -> str:
    return (f"on at least {a['fraction']:.0%} of the window's steps" if a.get("fraction") is not None
            else "(the window's median)")


def _since(a: dict[str, Any]) -> str:
    return f"{a['since']:.0%} of the run" if a["since"] else "its early level"


def _median_vs_value(word: str) -> Callable[[str, dict[str, Any]], str]:
    return lambda m, a: f"{m} {word} {a['value']:g} {_where(a)}"


def _every_step(word: str) -> Callable[[str, dict[str, Any]], str]:
    return lambda m, a: f"every {m} of the window {word} {a['value']:g}"


def _median_vs_early(word: str) -> Callable[[str, dict[str, Any]], str]:
    return lambda m, a: f"{m}'s window median {word} {a['factor']:g} x its early median"


def _vs_published(word: str) -> Callable[[str, dict[str, Any]], str]:
    return lambda m, a: f"{m} {word} {a['factor']:g} x {_PUBLISHED}"


# a harm condition's test -> its words, from the metric and the condition's arguments
_PHRASES: dict[str, Callable[[str, dict[str, Any]], str]] = {
    "vs_metric": lambda m, a: f"{m} {_COMPARE_WORDS[str(a['op'])]} {a['scale']:g} x {a['other']}{_offset(a)}",
    "ratio_above": lambda m, a: f"{m} above {a['value']:g} x {a['other']}",
    "above": _median_vs_value("above"),
    "below": _median_vs_value("below"),
    "at_most": _every_step("at most"),
    "at_least": _every_step("at least"),
    "falls": _median_vs_early("at most"),
    "rises": _median_vs_early("at least"),
    "falls_from_peak": lambda m, a: f"{m}'s window median at most {a['factor']:g} x its peak (9-step rolling median)",
    "fell_early": lambda m, a: f"{m} at most {a['factor']:g} x its early level by {a['by']:.0%} of the run",
    "flat_groups_above": lambda m, a: (f"the expected share of groups scoring alike, p^n + (1-p)^n with p = {m}, "
                                       f"above {a['value']:g}"),
    "padding_waste_above": lambda m, a: (f"padding above {a['value']:.0%} of the tokens the update computes "
                                         "(use_remove_padding=False)"),
    "kv_bound_above": lambda m, a: f"sequences generating at once above {a['value']:g} x what the KV cache holds",
    "saturated": lambda m, a: f"{m} at {a['share']:.0%} or more of the reward's range (critic/score/min..max)",
    "stalled": lambda m, a: f"{m} gained at most {a['min_gain']:.0%} since {_since(a)} and is not climbing (a stall)",
    "beyond_published": _vs_published("above"),
    "within_published": _vs_published("within"),
    "accelerating": lambda m, a: (f"{m} {'doubling' if str(a['direction']) == 'up' else 'halving'} at least "
                                  f"{a['min_doublings']:g} times over the window, projected across {a['limit']:g} "
                                  "within the run"),
}


def condition_words(cond: Condition) -> str:
    """One harm condition in words: ``response_length/mean below 0.5 x response_length/max``,
    ``critic/score/mean not decreasing by more than 10% of its level over the window (Theil-Sen trend)``; a test
    without a phrasing here reads ``metric test (arg value, ...)``."""
    a, m, test = given_args(cond.params), cond.metric or "", cond.test
    if test in ("increasing", "decreasing"):  # the negation reads inside the phrase
        return (f"{m} {'not ' if cond.negate else ''}{test} by more than {a['min_change']:.0%} of its level over "
                "the window (Theil-Sen trend)")
    phrase = _PHRASES.get(test)
    if phrase is not None and (test not in ("above", "below") or "value" in a):
        text = phrase(m, a)
    else:
        given = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in a.items())
        text = f"{m} {test.replace('_', ' ')}" + (f" ({given})" if given else "")
    return f"not {text}" if cond.negate else text


def group_words(group: tuple[Condition, ...]) -> str:
    """The harm group that held, from its conditions ("response_length/mean below 0.5 x response_length/max")."""
    if not group:
        return "the rule's conditions themselves (its harm is its conditions)"
    return "; ".join(condition_words(cond) for cond in group)
