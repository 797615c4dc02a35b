"""One comparison table (advisor.operators) and one wildcard matcher (advisor.wildcard) for the whole code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from advisor.operators import compare
from advisor.verl._deprecated import fill
from advisor.wildcard import matches, matching

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(REPO / "advisor").rglob("*.py"), *(REPO / "sweeps").rglob("*.py")])


@pytest.mark.parametrize("op, left, right, expected", [
    ("<", 1, 2, True), ("lt", 2, 2, False), ("le", 2, 2, True), (">=", 3, 2, True), ("ge", 1, 2, False),
    ("gt", 0.3, 0.2, True), ("==", "a", "a", True), ("eq", 1, 1.0, True), ("!=", 1, 2, True), ("ne", 1, 1, False),
])
def test_compare_reads_symbols_and_rule_names_alike(op: str, left, right, expected: bool) -> None:
    assert compare(op, left, right) is expected


def test_an_unknown_operator_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        compare("=~", 1, 1)


@pytest.mark.parametrize("name, pattern, expected", [
    ("val-core/openai/gsm8k/reward/mean@1", "val-core/*", True),  # '*' crosses '/'
    ("actor_rollout_ref.actor.profiler.ranks", "actor_rollout_ref.*.profiler.ranks", True),  # and '.'
    ("val-aux/x", "val-core/*", False),
    ("timing_s/gen", "timing_s/gen", True),
    ("actor/pg_loss?", "actor/pg_loss?", True), ("actor/pg_lossX", "actor/pg_loss?", False),  # '?' is literal
    ("a[1]", "a[1]", True), ("a1", "a[1]", False),  # so is '['
])
def test_the_wildcard_is_a_star_and_nothing_else(name: str, pattern: str, expected: bool) -> None:
    assert matches(name, pattern) is expected


def test_the_head_and_tail_shortcut_agrees_with_the_whole_pattern() -> None:
    """matches() turns a name down on the pattern's literal head and tail before compiling it; what it answers
    is what the full regex of the module docstring's rule ('*' any run, the rest literal) answers."""
    import itertools

    def reference(name: str, pattern: str) -> bool:
        return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), name, re.DOTALL) is not None

    alphabet = ["a", ".", "*", "ab", "b."]
    patterns = {"".join(p) for n in range(5) for p in itertools.product(alphabet, repeat=n)}
    names = {"".join(p).replace("*", "") for n in range(4) for p in itertools.product(["a", ".", "b", "a."], repeat=n)}
    wrong = [(n, p) for p in patterns for n in names if matches(n, p) != reference(n, p)]
    assert len(patterns) * len(names) > 10_000 and wrong == []


def test_matching_sorts_and_fill_reuses_what_each_star_matched() -> None:
    assert matching(["val-core/b", "val-aux/a", "val-core/a"], "val-core/*") == ["val-core/a", "val-core/b"]
    assert fill("*.optim.clip_grad", "critic.optim.grad_clip", "*.optim.grad_clip") == "critic.optim.clip_grad"


def test_no_module_keeps_its_own_operator_table_or_glob_matcher() -> None:
    for path in SOURCES:
        text, name = path.read_text(encoding="utf-8"), path.relative_to(REPO).as_posix()
        if name != "advisor/operators.py":
            assert not re.search(r"operator\.(lt|le|gt|ge)\b|Version\.__(lt|le|gt|ge)__", text), name
            assert not re.search(r'"<=?": *value', text), name
        if name != "advisor/wildcard.py":
            assert 'split("*")' not in text and r'replace(r"\*"' not in text, name
        if name != "advisor/load/_script.py":  # bash `case` patterns: shell globs
            assert "fnmatch" not in text, name
