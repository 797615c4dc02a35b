"""The diff: a set of changes as an edit of the user's own file (YAML config or launch script).
"""

from __future__ import annotations

from ._edit import edit_for

__all__ = [
    "edit_for",
]
