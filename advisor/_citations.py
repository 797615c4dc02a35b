"""The verl files a check's source cites, parsed from its text.

A citation is ``verl/utils/config.py:88-124``, optionally naming the version its lines are from, before
(``0.9.1 verl/utils/config.py:88``) or after (``verl/utils/config.py:88-124 (0.9.1)``) the path. A citation
that names no version cites the file of the version checked. ``docs/...`` citations are verl's docs (main).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = r"v?\d+\.\d+\.\d+(?:\.(?:dev|post)\d*)?"
_CITE = re.compile(
    rf"(?:(?<![\w.])({_VERSION}) )?"  # a version before the path
    r"(?<![\w/.])((?:verl|docs)/[\w/.-]+?\.(?:py|yaml|rst|md))"  # the path
    r"(?::(\d+(?:[-,]\s?\d+)*))?"  # lines: 12, 12-20, 12,30-34
    rf"(?: \(({_VERSION})\))?"  # a version after the lines
)


@dataclass(frozen=True)
class Citation:
    path: str
    version: str | None  # the version whose lines these are; None: the version checked
    last_line: int | None  # the highest line cited

    @property
    def is_doc(self) -> bool:
        return self.path.startswith("docs/")


def citations(source: str) -> list[Citation]:
    """Every verl file (and docs page) a source text cites."""
    out = []
    for before, path, lines, after in _CITE.findall(source):
        tag = (before or after).lstrip("v") or None
        last = max(int(n) for n in re.findall(r"\d+", lines)) if lines else None
        out.append(Citation(path, tag, last))
    return out
