"""The one wildcard matcher for metric names and config keys: ``*`` stands for any run of characters (``/`` and
``.`` included, none at all too); nothing else is special (a ``?`` or ``[`` in a name is itself).

Metric families (``val-core/*``), the rules' metric patterns, report panels and deprecated key patterns
(``actor_rollout_ref.*.profiler.ranks``) all match through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache


@lru_cache(maxsize=4096)
def wildcard(pattern: str) -> re.Pattern[str]:
    """The regex for ``pattern`` (use ``fullmatch``); each ``*`` is a group holding the text it matched."""
    return re.compile("(.*)".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def matches(name: str, pattern: str) -> bool:
    """Whether all of ``name`` matches ``pattern``. The literal head and tail are compared first: most names
    fail there, without compiling a regex for the pattern."""
    if "*" not in pattern:
        return name == pattern
    head, _, rest = pattern.partition("*")
    tail = rest.rpartition("*")[2]
    if len(name) < len(head) + len(tail) or not (name.startswith(head) and name.endswith(tail)):
        return False
    return wildcard(pattern).fullmatch(name) is not None


def matching(names: Iterable[str], pattern: str) -> list[str]:
    """The names that match ``pattern``, sorted."""
    regex = wildcard(pattern)
    return sorted(n for n in names if regex.fullmatch(n))
