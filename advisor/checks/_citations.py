"""The verl files a check's source cites, parsed from its text.

A citation is ``verl/utils/config.py:88-124``, naming the versions its lines are from before
(``0.9.1 verl/utils/config.py:88``) or after (``verl/utils/config.py:88-124 (0.8.0, 0.9.1)``) the path. A
citation that names no version cites the file of the version checked. ``docs/...`` citations are verl's docs
(main).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = r"v?\d+\.\d+\.\d+(?:\.(?:dev|post)\d*)?"
_CITE = re.compile(
    rf"(?:(?<![\w.])({_VERSION}) )?"  # a version before the path
    r"(?<![\w/.])((?:verl|docs)/[\w/.-]+?\.(?:py|yaml|rst|md))"  # the path
    r"(?::(\d+(?:[-,]\s?\d+)*))?"  # lines: 12, 12-20, 12,30-34
    rf"(?: \(({_VERSION}(?:, {_VERSION})*)\))?"  # versions after the lines
)


@dataclass(frozen=True)
class Citation:
    """One verl file (or docs page) a source text cites."""

    path: str
    versions: tuple[str, ...]  # the versions whose lines these are; empty: the version checked
    last_line: int | None  # the highest line cited

    @property
    def is_doc(self) -> bool:
        return self.path.startswith("docs/")


def citations(source: str) -> list[Citation]:
    """Every verl file (and docs page) a source text cites."""
    out = []
    for before, path, lines, after in _CITE.findall(source):
        tags = tuple(v.strip().lstrip("v") for v in (before or after).split(",") if v.strip())
        last = max(int(n) for n in re.findall(r"\d+", lines)) if lines else None
        out.append(Citation(path, tags, last))
    return out
