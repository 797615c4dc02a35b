"""The README's Quick start and test command work on a fresh Debian/Ubuntu (PEP 668: a virtual environment),
and .ci/run runs exactly the README's test command."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def quick_start() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return bash_blocks(section)


def test_quick_start_makes_and_uses_a_virtual_environment() -> None:
    install, tests = quick_start()
    for line in (install, tests):
        assert "\n" not in line
        assert line.startswith("python3 -m venv .venv && .venv/bin/pip install ")
        assert "python3 -m pip" not in line and "sudo" not in line
    assert ".venv/bin/advisor suggest examples/" in install
    paths = re.findall(r"examples/\S+", install)
    assert paths and all((REPO / p).exists() for p in paths)


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    _, tests = quick_start()
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert script[-1] == tests
    assert "python3-venv" in "\n".join(script)  # Debian's python3 has no ensurepip without it
