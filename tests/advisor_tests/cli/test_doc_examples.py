"""Every command the README and docs show with its output (```console blocks) prints that output today.

The runner is scripts/doc_examples.py (`--update` rewrites the shown outputs); only the repository's path
and timings are normalised.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("doc_examples", REPO / "scripts" / "doc_examples.py")
assert _spec is not None and _spec.loader is not None
doc_examples = importlib.util.module_from_spec(_spec)
sys.modules["doc_examples"] = doc_examples  # dataclasses look their module up there
_spec.loader.exec_module(doc_examples)

EXAMPLES = [e for doc in doc_examples.documents() for e in doc_examples.parse(doc)]


def test_the_readme_shows_commands_with_their_output() -> None:
    readme = [e for e in EXAMPLES if e.doc.name == "README.md"]
    assert len(readme) >= 2 and all(e.steps for e in readme)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_shown_output_is_what_the_command_prints(example: object) -> None:
    diff = doc_examples.stale(example, doc_examples.run(example))
    assert not diff, "\n".join(diff) + "\n(python scripts/doc_examples.py --update rewrites it)"


def test_a_changed_output_is_caught(tmp_path: Path) -> None:
    # the comparison is not vacuous: a doctored shown output differs
    doc = tmp_path / "doc.md"
    doc.write_text("```console\n$ advisor rule L005\nL005 something else entirely\n```\n", encoding="utf-8")
    (example,) = doc_examples.parse(doc)
    assert example.steps[0].command == "advisor rule L005"
    assert doc_examples.stale(example, doc_examples.run(example))


def test_every_relative_link_in_the_readme_and_docs_exists() -> None:
    import re

    missing = []
    for doc in doc_examples.documents():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
            if "://" not in target and not (doc.parent / target).exists():
                missing.append(f"{doc.relative_to(REPO)}: {target}")
    assert not missing


def test_the_readme_reads_in_five_minutes() -> None:
    # issue 30: at most a third of the 679-line, 50,821-byte README it replaced (commit 7df70b3)
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 679 // 3 and len(text.encode()) <= 50_821 // 3
