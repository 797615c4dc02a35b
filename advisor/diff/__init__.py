"""The diff: a set of changes as an edit of the user's own file (YAML config or launch script), and the check
that the edited file moves only the keys the changes name.
"""

from __future__ import annotations

from ._edit import FileEdit, edit_for
from ._meaning import moved_keys, unintended_moves

__all__ = [
    "FileEdit",
    "edit_for",
    "moved_keys",
    "unintended_moves",
]
