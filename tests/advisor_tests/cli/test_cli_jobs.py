"""The CLI's shape (issue 28): exit codes from one enum, one job per command that the CLI and the MCP server both
render, each MCP tool argument a parameter of its job."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from advisor.cli import _entry, _jobs
from advisor.errors import ExitCode

REPO = Path(__file__).resolve().parents[3]
CLI = sorted((REPO / "advisor" / "cli").glob("*.py"))


def test_the_exit_codes_are_the_documented_ones() -> None:
    # advisor/cli/_entry.py's docstring and the README: 0 no error, 1 errors found, 2 could not run, 3 a bug,
    # 4 watch --exit-on; 130 is a shell's code for Ctrl-C (128 + SIGINT 2)
    assert [int(c) for c in (ExitCode.OK, ExitCode.FOUND, ExitCode.BAD_INPUT, ExitCode.INTERNAL, ExitCode.ALERT,
                             ExitCode.INTERRUPTED)] == [0, 1, 2, 3, 4, 130]
    assert _entry.EXIT_INTERNAL is ExitCode.INTERNAL


def test_no_command_exits_with_a_literal_number() -> None:
    literal = re.compile(r"\b(?:sys|ctx)\.exit\(\s*\d")
    found = [f"{p.name}:{n}" for p in CLI for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if literal.search(line)]
    assert not found, found


def test_every_mcp_tool_is_a_registered_job() -> None:
    pytest.importorskip("jsonschema")
    from advisor.cli._mcp import TOOLS

    assert set(_jobs.JOBS) == set(TOOLS)


@pytest.mark.parametrize("tool", sorted(_jobs.JOBS))
def test_every_tool_argument_is_a_parameter_of_its_job(tool: str) -> None:
    """The schema a client reads and the job it calls agree: an argument the job lacks would be a TypeError."""
    from advisor.cli._mcp import schema

    job = _jobs.JOBS[tool]
    parameters = set(inspect.signature(job.run).parameters)
    arguments = set(schema(tool, "input")["properties"])
    assert arguments - parameters <= {"overrides"} and set(job.positional) <= arguments
    assert job.overrides == ("overrides" in arguments)


def test_a_job_gives_the_cli_s_path_and_the_mcp_tool_s_string_one_document() -> None:
    """The CLI hands a job a Path, the MCP server a string: both read the same input the same way."""
    config = REPO / "examples" / "lr_too_high" / "run.sh"
    result = _jobs.check_job(config)
    assert result.document() == _jobs.check_job(str(config)).document()
    assert result.exit_code == result.report.exit_code and result.changes == result.report.changes
