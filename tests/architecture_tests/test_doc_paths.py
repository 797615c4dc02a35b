"""Docs that name code point at where it is (issue 28): every ``advisor/...``, ``sweeps/...`` or ``knowledge/...``
path named in README.md, docs/*.md, or the text (docstrings, comments) of the advisor and sweeps packages exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# a repository path: not part of a longer one (verl-advisor/exit_code, site-packages/advisor/...)
_PATH = re.compile(r"(?<![\w./-])((?:advisor|sweeps|knowledge)/[\w./{},*<>-]*)")


def _expand(path: str) -> list[str]:
    """``checks/{algorithm,batch}.py`` -> both files; a placeholder (``<verb>``, an f-string's ``{FILE}``, a brace
    list the line breaks) or a glob keeps the folder before it."""
    match = re.search(r"\{([^{}]*,[^{}]*)\}", path)
    if match:
        return [p for choice in match.group(1).split(",")
                for p in _expand(path[:match.start()] + choice + path[match.end():])]
    cut = min((i for i in (path.find("<"), path.find("*"), path.find("{")) if i >= 0), default=len(path))
    if cut < len(path):
        path = path[:path.rfind("/", 0, cut) + 1]
    return [path.rstrip(".,:;)")]


def _named(files: list[Path]) -> dict[str, list[str]]:
    """Each named path that does not exist -> where it is named (file:line)."""
    missing: dict[str, list[str]] = {}
    for file in files:
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            for raw in _PATH.findall(line):
                for path in _expand(raw):
                    if not (REPO / path).exists():
                        missing.setdefault(path, []).append(f"{file.relative_to(REPO)}:{number}")
    return missing


def test_paths_named_in_the_docs_exist() -> None:
    assert _named([REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]) == {}


def test_paths_named_in_the_code_exist() -> None:
    code = sorted(p for package in ("advisor", "sweeps") for p in (REPO / package).rglob("*.py"))
    assert _named(code) == {}


def test_the_path_reader_expands_braces_and_placeholders() -> None:
    assert _expand("advisor/checks/{algorithm,batch}.py") == ["advisor/checks/algorithm.py", "advisor/checks/batch.py"]
    assert _expand("advisor/cli/<verb>.py") == ["advisor/cli/"]
    assert _expand("knowledge/rules/*.yaml.") == ["knowledge/rules/"]
    assert _expand("knowledge/{FILE}") == ["knowledge/"]
    assert _expand("advisor/checks/{algorithm,") == ["advisor/checks/"]


def test_the_rule_count_docs_suggest_states_is_the_playbooks() -> None:
    root = Path(__file__).resolve().parents[2]
    stated = re.search(r"The playbook is data: (\d+) rules", (root / "docs" / "suggest.md").read_text(encoding="utf-8"))
    assert stated is not None
    assert int(stated.group(1)) == len(list((root / "knowledge" / "rules").glob("*/*.yaml")))
