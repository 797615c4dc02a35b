"""The ``advisor`` group: its own options, and each command registered when it is asked for.

A command is a module ``advisor/cli/<name>.py`` that registers itself on :data:`app` and is named in
:data:`COMMANDS`; the options several commands take are in :mod:`._options` (a sweep's and verify's in
:mod:`._sweep_options`), the rendering of a job's result in :mod:`._show`, and the program's entry point, which
turns every error into its exit code, in :mod:`._entry`. Input a command cannot read (an
:class:`~advisor.errors.AdvisorError`, raised anywhere under it) is one line on stderr and exit 2, turned so by
:meth:`Commands.invoke`, for ``advisor`` and for an in-process caller of :data:`app` alike.

Built on Click rather than Typer: Typer 0.29 builds pydantic adapters for every parameter, which
alone costs ~0.1 s of the 0.4 s start-up budget of ``advisor check`` (bench/bench_check_startup.py).
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from advisor.errors import AdvisorError, ExitCode


class State:
    debug = False
    width: int | None = None  # --width: wrap text output at this many columns
    verbose = False  # -v: also the notes that change no answer


EVERY_COMMAND_EXITS = (f"Every command also exits {int(ExitCode.BAD_INPUT)} on bad arguments, "
                       f"{int(ExitCode.INTERNAL)} on an internal error of the advisor (a bug: the message asks you "
                       f"to report it), {int(ExitCode.OUTPUT_FAILED)} when the output cannot be written (stdout "
                       f"closed, disk full), {int(ExitCode.BROKEN_PIPE)} on a broken pipe and "
                       f"{int(ExitCode.INTERRUPTED)} when interrupted (Ctrl-C).")


def bad_input(err: AdvisorError) -> NoReturn:
    """Input that cannot be read: one line naming it, exit 2 (its traceback only with --debug)."""
    if State.debug:
        raise err
    click.echo(f"advisor: {err}", err=True)
    sys.exit(ExitCode.BAD_INPUT)


COMMANDS = ("calibrate", "check", "explain", "mcp", "report", "rule", "suggest", "sweep", "verify", "watch")
# Commands whose input is capped small (a config, a metric name, a finding id): they read, print and end, and run()
# keeps the cyclic garbage collector off for them (every other command turns it back on when it is resolved).
SMALL_INPUT = frozenset({"check", "explain", "rule"})


class Commands(click.Group):
    """The ``advisor`` group, loading each command's module (``advisor.cli.<name>``, which registers it) when the
    command is asked for: ``advisor check`` does not import the other nine (Click's lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            import importlib

            importlib.import_module(f"advisor.cli.{cmd_name}")
        command = super().get_command(ctx, cmd_name)
        if command is not None and not command.epilog:  # the codes main() returns for every command
            command.epilog = EVERY_COMMAND_EXITS
        return command

    def invoke(self, ctx: click.Context) -> Any:
        from ._output import OutputFailed, is_output_error

        try:
            return super().invoke(ctx)
        except AdvisorError as err:  # a command's input it cannot read (its options' too: parsed in here)
            bad_input(err)
        except OSError as err:
            if is_output_error(err):
                raise OutputFailed(err) from err
            raise

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in COMMANDS:  # not a command: load them all, for Click's "Did you mean"
            for known in COMMANDS:
                self.get_command(ctx, known)
        name, command, rest = super().resolve_command(ctx, args)
        if name not in SMALL_INPUT:
            import gc

            gc.enable()  # a long log, a sweep or a server: collect reference cycles as Python always does
        return name, command, rest


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for unreadable input.")
@click.version_option(package_name="verl-advisor", prog_name="advisor")
def app(debug: bool) -> None:
    """Config advisor and auto-tuner for verl RL post-training runs."""
    State.debug = debug
    State.width = None  # each command's --width sets it again
    State.verbose = False  # and its -v: an in-process caller's earlier -v does not carry over
