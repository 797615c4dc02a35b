"""The README's Quick start and test command work on a fresh Debian/Ubuntu (PEP 668: a virtual environment),
and .ci/run runs exactly the README's test command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[3]


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


def test_torch_extras_resolve_to_the_cpu_wheel_not_a_newer_cuda_build() -> None:
    # These machines cap torch at 2.14.1 (/etc/xdg/pip/constraints.txt) and carry torch-2.13.0+cpu as a local
    # wheel; PyPI's 2.13.0 and 2.14.x are CUDA builds. A spec that admits 2.14.x makes pip take PyPI's 2.14.1
    # (`pip install --dry-run 'torch>=2.4'` says "Would install torch-2.14.1"); one capped at 2.13.0 takes the
    # local 2.13.0+cpu, which PEP 440 sorts above the plain 2.13.0.
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11 on")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for extra in ("sandbox", "test"):
        (spec,) = [Requirement(r).specifier for r in extras[extra] if Requirement(r).name == "torch"]
        assert spec.contains("2.13.0+cpu"), extra
        assert not spec.contains("2.14.0") and not spec.contains("2.14.1"), extra
        assert max(spec.filter(["2.12.1", "2.13.0", "2.13.0+cpu", "2.14.1"]), key=Version) == "2.13.0+cpu"
