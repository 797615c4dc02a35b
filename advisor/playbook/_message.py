"""A rule's ``message``: the placeholders it may name, checked when the rule loads, and its rendering on a run.

The fields are the primary metric's numbers (``{level:.3g}``, ``{early}``, ...), the window (``{first}``,
``{last_step}``) and any metric the rule reads, by name, with one of its numbers
(``{critic/vf_explained_var.level:.3g}``). A name outside these, a positional ``{}``, or a format spec the field's
value cannot take is a load error naming the file, the rule and the field, never a ``?`` printed when the rule fires.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Collection
from typing import Any

from advisor.typed import did_you_mean

from ._signals import MetricSignal, Signals

# each field of a message, with a value of its type (to try its format spec at load)
FIELDS: dict[str, object] = {
    "metric": "actor/ppo_kl", "value": 1.0, "level": 1.0, "last": 1.0, "early": 1.0, "max": 1.0, "min": 1.0,
    "change": 1.0, "first": 1, "last_step": 1,
}
# the numbers of a metric named in a message (MetricSignal's properties)
SIGNAL_NUMBERS = ("level", "mean", "last", "max", "min", "early_level", "peak", "recent", "best", "slope",
                  "relative_change", "spikes")
_NAME = re.compile(r"^([^.\[]*)(.*)$")


def message_problem(template: str, metrics: Collection[str]) -> tuple[str, str | None] | None:
    """What is wrong with a message template (and a "did you mean"), or None. ``metrics``: those the rule reads,
    the only ones a message may name."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as err:  # a lone '{' or '}'
        return f"{err} (a literal brace is written '{{{{' or '}}}}')", None
    for _literal, field, spec, conversion in parsed:
        if field is None:
            continue
        match = _NAME.match(field)
        assert match is not None  # the pattern matches every string
        name, rest = match.groups()
        if not name or name.isdigit():
            return f"a positional placeholder '{{{field}}}': name a field ({', '.join(FIELDS)})", None
        if name in FIELDS:
            if rest:
                return f"'{{{field}}}': {name} is a value, not a metric", None
            sample = FIELDS[name]
        elif "/" in name:
            if name not in metrics:
                return (f"'{{{field}}}' names {name}, which the rule does not read (its metrics: "
                        f"{', '.join(sorted(metrics))})", did_you_mean(name, metrics))
            number = rest[1:] if rest.startswith(".") else ""
            if number not in SIGNAL_NUMBERS:
                return (f"'{{{field}}}' needs one of {name}'s numbers: {{{name}.level}} (or "
                        f"{', '.join(SIGNAL_NUMBERS[1:])})", did_you_mean(number, SIGNAL_NUMBERS) if number else None)
            sample = 1.0
        else:
            return f"unknown placeholder '{{{field}}}' (the fields: {', '.join(FIELDS)})", did_you_mean(name, FIELDS)
        if spec and "{" in spec:
            return f"'{{{field}:{spec}}}': a format spec may not hold a placeholder", None
        try:
            format(sample if conversion is None else repr(sample) if conversion == "r" else str(sample), spec or "")
        except ValueError as err:
            return f"'{{{field}:{spec}}}': {err}", None
    return None


class _Fields(dict):  # type: ignore[type-arg]
    """The fields of a message: the primary metric's (``{level}``), and any metric by name
    (``{critic/vf_explained_var.level}``: a metric the run did not log reads as NaN)."""

    def __init__(self, signals: Signals, **fields: Any) -> None:
        super().__init__(**fields)
        self._signals = signals

    def __missing__(self, key: str) -> MetricSignal:
        return self._signals[key]  # the loader allows only metric names here


def render_message(template: str, primary: MetricSignal, signals: Signals) -> str:
    """The message on this run (its template passed :func:`message_problem` at load)."""
    values = _Fields(signals, metric=primary.name, value=primary.level, level=primary.level, last=primary.last,
                     early=primary.early_level, max=primary.max, min=primary.min,
                     change=primary.relative_change * 100 if math.isfinite(primary.relative_change) else math.nan,
                     first=signals.window.first_step, last_step=signals.window.last_step)
    return template.format_map(values)
