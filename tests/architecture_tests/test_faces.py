"""The lazy package faces (issue 39): each imports its public names on first use at run time, and names them all
under ``if TYPE_CHECKING:`` so that mypy and an IDE see the real types instead of ``__getattr__``'s ``Any``
(the shape of Optuna's ``optuna/__init__.py``: ``if TYPE_CHECKING: from optuna import dashboard`` beside the lazy
module object).

A face is a package ``__init__.py`` with a module-level ``__getattr__`` over a table (a dict literal from public
name to the module that defines it). Read with ``ast``; the laziness is checked in a fresh interpreter.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FACES = {"advisor": "_LAZY", "advisor.memory": "_HOMES", "advisor.calibrate": "_HOMES", "advisor.metrics": "_LAZY",
         "sweeps": "_EXPORTS"}


def _init(face: str) -> Path:
    return REPO.joinpath(*face.split("."), "__init__.py")


def _every_face() -> list[str]:
    """The packages of advisor/ and sweeps/ whose ``__init__.py`` defines a module-level ``__getattr__``."""
    found = []
    for root in ("advisor", "sweeps"):
        for init in sorted((REPO / root).rglob("__init__.py")):
            tree = ast.parse(init.read_text())
            if any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body):
                found.append(".".join(init.parent.relative_to(REPO).parts))
    return found


def _table(tree: ast.Module, name: str) -> dict[str, str]:
    """public name -> module of the face's lazy table (values are a module or a (module, name) pair)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            table = ast.literal_eval(node.value)
            return {k: v[0] if isinstance(v, tuple) else v for k, v in table.items()}
    raise AssertionError(f"no table {name}")


def _type_checking_names(tree: ast.Module) -> dict[str, str]:
    """name bound under ``if TYPE_CHECKING:`` -> the module it is imported from (relative as written)."""
    names = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom), ast.dump(imp)
                for alias in imp.names:
                    names[alias.asname or alias.name] = "." * imp.level + (imp.module or "")
    return names


def _all(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = ast.literal_eval(node.value)  # a literal list: mypy reads __all__ only when it is one
            assert isinstance(value, list)
            return value
    raise AssertionError("no __all__")


def test_every_lazy_face_is_listed() -> None:
    assert sorted(_every_face()) == sorted(FACES)


@pytest.mark.parametrize("face", sorted(FACES))
def test_face_names_every_lazy_name_for_the_type_checker(face: str) -> None:
    tree = ast.parse(_init(face).read_text())
    table = _table(tree, FACES[face])
    typed = _type_checking_names(tree)
    assert sorted(typed) == sorted(table), "the TYPE_CHECKING imports and the lazy table name different things"
    for name, module in table.items():  # ... and from the same module
        written = typed[name]
        absolute = f"{face}{written}" if written.startswith(".") else written
        assert absolute.rstrip(".") in (module, f"{face}.{module.lstrip('.')}"), (name, written, module)
    assert set(table) <= set(_all(tree))


def test_faces_stay_lazy_and_resolve_every_name() -> None:
    """Importing the faces loads none of their lazy modules (besides those advisor.load, which ``advisor``
    imports eagerly for load_config, loads itself); each public name then resolves."""
    faces = sorted(FACES)
    lazy = sorted({f"{face}.{m.lstrip('.')}" if not m.startswith(("advisor.", "sweeps.")) else m
                   for face in faces for m in _table(ast.parse(_init(face).read_text()), FACES[face]).values()})
    code = ("import importlib, json, sys\n"
            "import advisor.load\n"
            "eager = set(sys.modules)\n"
            f"faces = [importlib.import_module(f) for f in {faces!r}]\n"
            f"loaded = [m for m in {lazy!r} if m in sys.modules and m not in eager and m not in {faces!r}]\n"
            "missing = [f'{f.__name__}.{n}' for f in faces for n in f.__all__ if f.__name__ != 'advisor.calibrate'"
            " and getattr(f, n, None) is None]\n"
            "print(json.dumps({'loaded': loaded, 'missing': missing}))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          check=True, timeout=120)
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["loaded"] == [], seen["loaded"]
    assert seen["missing"] == []


def test_advisor_check_is_exported() -> None:
    import advisor
    from advisor.checks import CheckReport, check

    assert advisor.check is check and advisor.CheckReport is CheckReport
    assert "check(config) -> CheckReport" in (advisor.__doc__ or "")


SNIPPET = """\
import advisor
import advisor.memory
import sweeps

reveal_type(advisor.suggest_run)
reveal_type(advisor.check)
reveal_type(advisor.memory.estimate_memory)
reveal_type(sweeps.run_sweep)
"""


def test_faces_main_functions_are_not_any_to_mypy(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    snippet = tmp_path / "faces_snippet.py"
    snippet.write_text(SNIPPET)
    cache = Path(tempfile.gettempdir()) / f"verl-advisor-mypy-{os.getuid() if hasattr(os, 'getuid') else 0}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache), "--config-file",
                           str(REPO / "pyproject.toml"), str(snippet)], cwd=REPO, env=env, capture_output=True,
                          text=True, check=False, timeout=600)
    revealed = [line.split("Revealed type is ", 1)[1] for line in proc.stdout.splitlines()
                if "Revealed type is" in line]
    assert len(revealed) == 4, proc.stdout[-3000:] + proc.stderr[-1000:]
    for face, text in zip(("suggest_run", "check", "estimate_memory", "run_sweep"), revealed, strict=True):
        assert text.startswith('"def ('), (face, text)  # a function's signature ...
        assert text.rsplit("->", 1)[1].strip(' "') not in ("Any", "None"), (face, text)  # ... returning a type
    assert "advisor.playbook._suggest.Suggestion" in revealed[0]
    assert "advisor.checks._report.CheckReport" in revealed[1]
    assert "advisor.memory._results.MemoryEstimate" in revealed[2]
    assert "sweeps._result.SweepResult" in revealed[3]
