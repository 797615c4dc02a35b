"""Every finding id in one table: the code constants of ``advisor.codes``, the registered checks and the
playbook's rules, each with what it checks, what it mirrors and the file:line that implements it.

It reads from every stage (checks, playbook), so it lives with the command that asks (``advisor rule``).
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from advisor import codes
from advisor.codes import CODES, Code
from advisor.errors import AdvisorError, PlaybookError
from advisor.spelling import closest as nearest


class CodeInfo(NamedTuple):
    """One finding id as ``advisor rule`` shows it."""

    id: str
    name: str
    severity: str
    kind: str  # load | memory | band | check | rule
    summary: str
    sources: tuple[str, ...]  # what it mirrors: verl file:line, docs, or the advisor's own reasoning
    location: str  # file:line of the code or rule file that implements it
    extra: Mapping[str, Any] = MappingProxyType({})  # tree (rules); verl (checks limited to versions)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "severity": self.severity, "kind": self.kind,
                "summary": self.summary, "sources": list(self.sources), "location": self.location, **self.extra}


# the top package's folder (wherever this module sits in it) and the checkout or site-packages above it
_PACKAGE = Path(str(sys.modules[__name__.partition(".")[0]].__file__)).resolve().parent
_ROOT = _PACKAGE.parent
_KIND = {"L": "load", "M": "memory", "X": "band"}


def _relative(path: str | Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(_ROOT)) if path.is_relative_to(_ROOT) else str(path)


def _constant_sites() -> dict[str, str]:
    """Code id -> the file:line that builds its finding: ``NAME.finding(`` first, then a line that picks the
    constant (``code = MEMORY_OOM if ...``), then one that compares with it (``f.id == NAME.id``)."""
    names = {name: c.id for name, c in vars(codes).items() if isinstance(c, Code)}
    word = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b(\.finding\(|\.id\b|\.name\b)?")
    best: dict[str, tuple[int, str]] = {}
    for path in sorted(_PACKAGE.rglob("*.py")):
        if path.resolve() == Path(str(codes.__file__)).resolve():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith(("from ", "import ")):
                continue
            for match in word.finditer(line):
                rank = 0 if match.group(2) == ".finding(" else 2 if match.group(2) else 1
                code = names[match.group(1)]
                if code not in best or rank < best[code][0]:
                    best[code] = (rank, f"{_relative(path)}:{number}")
    return {code: site for code, (_, site) in best.items()}


def _id_line(path: str) -> int:
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("id:"):
            return number
    return 1


@cache
def all_codes() -> dict[str, CodeInfo]:
    """Every finding id: the code constants, the registered checks and the playbook's rules, sorted by id.

    Raises:
        PlaybookError: a rule file does not load, or an id is defined in two places.
    """
    from advisor.checks import CHECKS
    from advisor.playbook import load_playbook

    sites = _constant_sites()
    found: dict[str, CodeInfo] = {}

    def add(info: CodeInfo) -> None:
        if info.id in found:
            raise PlaybookError(f"finding id {info.id} is defined twice: {found[info.id].location} and "
                                f"{info.location}")
        found[info.id] = info

    for c in CODES.values():
        add(CodeInfo(c.id, c.name, c.severity, _KIND[c.id[0]], c.summary, (c.source,), sites.get(c.id, "")))
    for chk in CHECKS:
        code = chk.fn.__code__
        sources = (chk.source, *(f"{src} (verl {spec})" for spec, src in chk.sources))
        add(CodeInfo(chk.id, chk.name, chk.severity, "check", chk.summary, sources,
                     f"{_relative(inspect.getsourcefile(chk.fn) or code.co_filename)}:{code.co_firstlineno}",
                     {"verl": chk.verl} if chk.verl else {}))
    for rule in load_playbook():
        add(CodeInfo(rule.id, rule.name, str(rule.severity), "rule", rule.summary, rule.sources,
                     f"{_relative(rule.path)}:{_id_line(rule.path)}",
                     {"tree": str(rule.tree), **({"verl": rule.verl} if rule.verl else {})}))
    return dict(sorted(found.items()))


def lookup(code_id: str) -> CodeInfo:
    """The id (any case), or an AdvisorError (exit 2) with the closest ids."""
    codes = all_codes()
    wanted = code_id.strip().upper()
    if wanted in codes:
        return codes[wanted]
    close = nearest(wanted, list(codes), limit=3)
    hint = "did you mean " + " or ".join(f"'{c}'" for c in close) + "?" if close else \
        "'advisor rule --list' lists them"
    raise AdvisorError(f"no finding has the id '{code_id}'", suggestion=hint)
