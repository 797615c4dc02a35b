"""The one table of comparison operators, by symbol (``<``, ``>=``) and by the rule files' names (``lt``, ``ge``).

Version ranges (``>=0.7.0,<0.9``), rule conditions (``op: gt``), the launch-script reader's ``[[ a -lt b ]]``
and sweep constraints (``actor/ppo_kl<0.02``) all compare through it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}
# the spelling of rule files (YAML keeps `<` awkward to quote), as in Python's operator module
NAMES = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def compare(op: str, left: Any, right: Any) -> bool:
    """``left op right`` for a symbol (``<=``) or a name (``le``); KeyError for anything else."""
    return bool(COMPARISONS[NAMES.get(op, op)](left, right))
