"""No import circle among advisor's modules even counting the imports under ``if TYPE_CHECKING:`` (issue 39: "no
circle, type-only included"); test_imports.py checks the run-time imports of advisor/ and sweeps/.

The typed faces and results name their types in ``if TYPE_CHECKING:`` blocks; such an import does not run, but a
circle of them still means two modules each need the other to be read. Read with ``ast``, nothing imported. (sweeps/
is being split into wings on another branch; its type-only circle sandbox <-> _lm_trainer is that work's.)
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((REPO / "advisor").rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _edges(module: str, path: Path) -> set[str]:
    """The advisor modules ``module`` imports, at run time or for the type checker alike."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(filter(None, (_resolve(a.name) for a in node.names if a.name.startswith("advisor"))))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "advisor":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found = sub if sub in MODULES else _resolve(target)
                if found:
                    out.add(found)
    out.discard(module)
    return out


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_finder_sees_a_type_only_circle() -> None:
    assert _circle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert _circle({"a": {"b"}, "b": set()}) is None


def test_no_module_circle_counting_type_only_imports() -> None:
    # advisor/__init__.py is the public face: it imports downwards (its packages import advisor.<module>, never it)
    graph = {m: _edges(m, p) - {"advisor"} for m, p in MODULES.items() if m != "advisor"}
    assert _circle(graph) is None
