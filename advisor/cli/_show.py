"""A job's result on stdout: ``text`` through the command's renderer, ``json`` its document, and for a result with
changes (check, suggest) the changes alone as Hydra overrides, yaml or a diff; ``--write`` edits the file."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from advisor.errors import AdvisorError, ExitCode
from advisor.plural import counted
from advisor.verl import render_value

from ._app import State
from ._jobs import ChangeResult, JobResult

if TYPE_CHECKING:
    from rich.console import Console


def make_console() -> Console:
    from ._render import get_console

    return get_console(width=State.width)


def _print_overrides(result: ChangeResult) -> None:
    click.echo("\n".join(f"    {c.override()} \\" for c in result.changes))


def _print_yaml(result: ChangeResult) -> None:
    edit = result.edit
    if edit is not None and result.cfg.kind == "yaml" and not edit.overrides:
        click.echo(edit.after, nl=False)
    else:
        click.echo(result.cfg.with_changes(result.changes).to_yaml(), nl=False)


def _print_diff(result: ChangeResult) -> None:
    edit = result.edit
    if edit is not None and edit.changed:
        click.echo(edit.diff(), nl=False)
    rest = result.changes if edit is None else edit.overrides
    if rest:
        click.echo("advisor: not in the file; pass as overrides: " + " ".join(c.override() for c in rest), err=True)


# --format overrides / yaml / diff: the changes alone, ready for a script, a file or `patch`
CHANGE_RENDERERS: dict[str, Callable[[ChangeResult], None]] = {
    "overrides": _print_overrides, "yaml": _print_yaml, "diff": _print_diff}
CHANGE_FORMATS = ["text", "json", *CHANGE_RENDERERS]


def show(result: JobResult, fmt: str, text: Callable[[], None]) -> None:
    """Render a job's result: ``json`` its document, ``text`` through ``text()``, a change format (a result with
    changes) the changes alone."""
    if fmt == "json":
        from ._render import print_json

        print_json(result.document())
    elif fmt == "text":
        text()
    else:
        assert isinstance(result, ChangeResult)  # only check and suggest offer the change formats
        CHANGE_RENDERERS[fmt](result)


def write_and_recheck(result: ChangeResult, overrides: list[str], verl_version: str | None, fmt: str) -> ExitCode:
    """--write: edit CONFIG in place (CONFIG.bak keeps the original), then check the written file again."""
    from advisor.checks import check as run_check
    from advisor.load import load_config

    cfg, edit = result.cfg, result.edit
    def say(text: str) -> None:  # with --format json/diff/... stdout holds the document alone
        click.echo(text, err=fmt != "text")

    if not result.changes:
        say("nothing to write: no change proposed")
        return ExitCode.OK
    if edit is None:
        raise AdvisorError(f"--write edits a YAML config or a launch script, not a {cfg.kind} config",
                           path=cfg.path, suggestion="pass the proposed overrides instead")
    _refuse_moves(result, overrides)
    if not edit.in_file:
        say("nothing written: " + ("; ".join(why for _, why in edit.refused) if edit.refused
                                   else "no change is an edit of the file"))
        if edit.overrides:
            say("pass as overrides: " + " ".join(c.override() for c in edit.overrides))
        return ExitCode(getattr(result, "exit_code", ExitCode.OK))
    backup = edit.write()
    after = run_check(load_config(edit.path, overrides, verl_version=verl_version,
                                  script_vars=cfg.launch.variables if cfg.launch is not None else None))
    say(f"wrote {edit.path} ({counted(len(edit.in_file), 'change')}; the original is {backup}); re-checked: "
        f"{counted(len(after.errors), 'error')}, {counted(len(after.warnings), 'warning')}")
    if edit.overrides:
        say("not in the file; pass as overrides: " + " ".join(c.override() for c in edit.overrides))
    return ExitCode(after.exit_code)


def _refuse_moves(result: ChangeResult, overrides: list[str]) -> None:
    """Read the edited text back before writing it: an edit that moves any key besides its own is refused."""
    from advisor.diff import unintended_moves

    edit = result.edit
    assert edit is not None  # write_and_recheck refused a config that is not a file first
    moved = unintended_moves(result.cfg, edit.after, edit.in_file, overrides)
    if moved:
        shown = "; ".join(f"{k}: {render_value(a)} -> {render_value(b)}" for k, (a, b) in sorted(moved.items())[:5])
        raise AdvisorError(f"the edit would change {counted(len(moved), 'other key')} besides the ones it names "
                           f"({shown}); not written", path=edit.path,
                           suggestion="apply the proposed overrides by hand instead")
