"""The layout's two promises (docs/architecture.md), checked on the source: no package imports another
package's private name, and neither the packages nor the modules import each other in a circle.

Walks every ``import`` in advisor/ and sweeps/ (function-level imports included: a lazy import is still
a dependency) with ``ast``; nothing is imported. ``if TYPE_CHECKING:`` imports count for the circles (a circle that
only names types still ties the modules together: neither can be read, moved or typed without the other) and not
for the private names (naming a type is not reaching into its code).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("advisor", "sweeps")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for root in ROOTS for p in sorted((REPO / root).rglob("*.py"))}


MODULES = _modules()


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or
                                         (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _nodes(tree: ast.AST, type_checking: bool) -> list[ast.AST]:
    """Every node; with ``type_checking`` false, none under ``if TYPE_CHECKING:`` (never imported at run time)."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        todo.extend(child for child in ast.iter_child_nodes(node) if type_checking or not _is_type_checking(child))
    return out


def _imports(module: str, path: Path, type_checking: bool = False) -> list[tuple[int, str, str | None]]:
    """(line, imported module, imported name or None) for every import of advisor/sweeps code; with
    ``type_checking``, those under ``if TYPE_CHECKING:`` too."""
    package = _package_of(module, path)
    found = []
    for node in _nodes(ast.parse(path.read_text(), str(path)), type_checking):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] in ROOTS]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] not in ROOTS:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append((node.lineno, sub, None) if sub in MODULES else (node.lineno, target, alias.name))
    return found


def _owner(module: str) -> str:
    """The package that owns a module: the module itself if it is a package, else its parent."""
    path = MODULES.get(module)
    return module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]


def _private_crossing(importer: str, path: Path, target: str, name: str | None) -> str | None:
    """Why importing target[.name] from importer reaches into another package's privates, or None."""
    importer_pkg = _package_of(importer, path)
    parts = target.split(".")
    for depth in range(1, len(parts) + 1):
        if parts[depth - 1].startswith("_") and not parts[depth - 1].startswith("__"):
            owner = ".".join(parts[: depth - 1])
            if not (importer_pkg == owner or importer_pkg.startswith(owner + ".")):
                return f"{target} is private to {owner}"
            break
    if name and name.startswith("_") and not name.startswith("__"):
        owner = _owner(target)
        if not (importer_pkg == owner or importer_pkg.startswith(owner + ".")):
            return f"{target}.{name} is private to {owner}"
    return None


def test_no_package_imports_another_packages_private_name() -> None:
    crossings = []
    for module, path in MODULES.items():
        for line, target, name in _imports(module, path):
            why = _private_crossing(module, path, target, name)
            if why:
                crossings.append(f"{path.relative_to(REPO)}:{line}: {why}")
    assert crossings == []


def _top_package(module: str) -> str:
    """advisor.playbook._suggest -> advisor.playbook; advisor.errors -> advisor.errors (a leaf module)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "advisor" and len(parts) > 1 else parts[0]


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
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


def _graph(key) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        if module in ("advisor", "sweeps"):
            continue  # a root package's __init__ is its public face, importing downwards
        src = key(module)
        for _, target, _ in _imports(module, path, type_checking=True):
            while target not in MODULES and "." in target:
                target = target.rpartition(".")[0]
            dst = key(target)
            if dst != src and dst not in ("advisor", "sweeps"):
                graph.setdefault(src, set()).add(dst)
    return graph


@pytest.mark.parametrize("level", ["package", "module"])
def test_no_import_circle(level: str) -> None:
    """No circle, counting the imports under ``if TYPE_CHECKING:``."""
    graph = _graph(_top_package if level == "package" else (lambda m: m))
    assert _cycle(graph) is None


def test_an_import_only_for_types_counts_for_the_circles(tmp_path: Path) -> None:
    """The walk sees an ``if TYPE_CHECKING:`` import (either spelling of the guard) for the circles, and only
    there."""
    path = tmp_path / "mod.py"
    path.write_text("import typing\nfrom typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    from sweeps import runner\n"
                    "if typing.TYPE_CHECKING:\n    import advisor.errors\n")
    assert _imports("sweeps.mod", path) == []
    assert sorted(_imports("sweeps.mod", path, type_checking=True)) == [(4, "sweeps.runner", None),
                                                                        (6, "advisor.errors", None)]


SCRIPTS = ("bench", "scripts")
# crossings left: bench/gpu_memory_calibration.py swaps the harness's kernel stand-ins (module globals) for the
# real kernels on a GPU; a public switch in advisor.calibrate would replace it
_SCRIPT_CROSSINGS_LEFT = {"advisor.calibrate._model", "advisor.calibrate._verl_path"}


def test_bench_and_scripts_use_the_packages_public_faces() -> None:
    """The benchmarks and maintenance scripts belong to no package: they import what the packages export."""
    crossings = []
    for path in sorted(p for root in SCRIPTS for p in (REPO / root).rglob("*.py") if "_vendor" not in p.parts):
        module = _module_name(path)
        for line, target, name in _imports(module, path):
            why = _private_crossing(module, path, target, name)
            if why and (target if name is None else f"{target}.{name}") not in _SCRIPT_CROSSINGS_LEFT:
                crossings.append(f"{path.relative_to(REPO)}:{line}: {why}")
    assert crossings == []
