"""The layout issue 39 set: the group in advisor/cli/_app.py stays small, a command raises for input it cannot
read instead of handling the error itself (the group and the entry point do), and no sandbox module grows back
into the 1,821-line trainer it was split from."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "advisor" / "cli"


def test_the_group_module_stays_small() -> None:
    lines = len((CLI / "_app.py").read_text().splitlines())
    assert lines <= 200, f"advisor/cli/_app.py has {lines} lines: options go to _options.py, rendering to _show.py"


def test_no_command_catches_advisor_error() -> None:
    """No command module (``advisor/cli/<command>.py``) has ``except AdvisorError``: the group (_app) turns it into
    the one line and exit 2."""
    found = []
    for path in sorted(CLI.glob("[a-z]*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
                if "AdvisorError" in names:
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_no_sandbox_module_is_a_second_monolith() -> None:
    # issue 39: the sandbox trainer reads top to bottom in modules of at most 1,000 lines (it was one of 1,821)
    sandbox = CLI.parents[1] / "sweeps" / "sandbox"
    sizes = {path.name: len(path.read_text().splitlines()) for path in sandbox.glob("*.py")}
    assert sizes and max(sizes.values()) <= 1000, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
