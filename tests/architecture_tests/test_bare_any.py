"""The count of bare ``Any`` annotations in advisor/ and sweeps/ only goes down (issue 39: 425 then, at most 300
wanted).

Counted with ``ast`` on the source, nothing imported: every annotation of a function's parameters (``*args`` and
``**kwargs`` included) and return, and of an annotated assignment (a dataclass field, a module or local variable),
whose whole annotation is ``Any`` (the name ``Any``, ``typing.Any``, or the string ``"Any"``). ``dict[str, Any]``
and ``Any | None`` are not bare: they say what the container or the option is. When a change lowers the count,
lower :data:`CEILING` to it so it cannot grow back.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CEILING = 299  # 2026-12-07: the package faces, the CLI, the memory readers, the playbook frames and the report typed


def _annotations(tree: ast.AST) -> Iterator[ast.expr]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
            yield from (a.annotation for a in every if a.annotation is not None)
            if node.returns is not None:
                yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation


def _is_bare_any(annotation: ast.expr) -> bool:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):  # a quoted annotation
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    return ((isinstance(annotation, ast.Name) and annotation.id == "Any") or
            (isinstance(annotation, ast.Attribute) and annotation.attr == "Any"))


def bare_any(root: Path) -> dict[str, int]:
    """file (relative to the repository) -> its bare ``Any`` annotations, for the files that have any."""
    counts = {}
    for path in sorted(root.rglob("*.py")):
        n = sum(map(_is_bare_any, _annotations(ast.parse(path.read_text(), str(path)))))
        if n:
            counts[str(path.relative_to(REPO))] = n
    return counts


def test_counter_counts_what_it_says() -> None:
    source = ("from typing import Any\nimport typing\n"
              "def f(a: Any, *b: Any, c: 'Any', **d: typing.Any) -> Any: ...\n"  # 5 bare
              "def g(a: dict[str, Any], b: Any | None, c: list[Any]) -> int: ...\n"  # none
              "class C:\n    x: Any\n    y: Any = None\n    z: tuple[Any, ...] = ()\n")  # 2 bare
    assert sum(map(_is_bare_any, _annotations(ast.parse(source)))) == 7


def test_bare_any_only_goes_down() -> None:
    counts = {**bare_any(REPO / "advisor"), **bare_any(REPO / "sweeps")}
    total = sum(counts.values())
    worst = ", ".join(f"{path} {n}" for path, n in sorted(counts.items(), key=lambda kv: -kv[1])[:8])
    assert total <= CEILING, f"{total} bare Any annotations, over the ceiling of {CEILING} (most in: {worst})"
