"""The program's entry point (``advisor``, ``python -m advisor``): the one place an error becomes an exit code.

Exit codes (as ruff; :class:`advisor.errors.ExitCode`): 0 ran and found no error; 1 ran and found errors (or an
out-of-memory verdict); 2 could not run (unreadable input, bad arguments, input past a size or depth limit); 3
an internal error of the advisor (a bug: one line naming it and the inputs, and a hint to rerun with
``--debug`` for the traceback); 4 ``advisor watch --exit-on``: an alert at that level; 74 the output could not be
written (stdout closed, a full disk); 141 the reader of stdout went away (a broken pipe: quietly, :mod:`._output`);
130 interrupted (Ctrl-C). Errors are one line on stderr; a traceback only with ``--debug``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from advisor.errors import AdvisorError, ExitCode

from ._app import State, app, bad_input

_NO_ARGS: type[Exception] = getattr(click.exceptions, "NoArgsIsHelpError", type("_Never", (Exception,), {}))


def main() -> None:
    """Run the group: the one error boundary, where each error the group passes on becomes its exit code."""
    from ._output import OutputFailed, is_output_error, output_failed, stdout_closed

    if stdout_closed():
        output_failed(None)
    try:
        code = app.main(prog_name="advisor", standalone_mode=False)
        sys.stdout.flush()  # a write error of the output shows here, while it can still be told from a read's
    except _NO_ARGS as err:  # `advisor` alone: the help
        click.echo(err.format_message() if isinstance(err, click.ClickException) else str(err), err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except OutputFailed as failed:
        output_failed(failed.err)
    except click.UsageError as err:  # one line, as for bad input, instead of Click's usage block
        where = err.ctx.command_path if err.ctx else "advisor"
        click.echo(f"{where}: {err.format_message()} (see '{where} --help')", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except click.ClickException as err:
        click.echo(f"advisor: {err.format_message()}", err=True)
        sys.exit(err.exit_code)
    except click.Abort:
        click.echo("advisor: aborted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except AdvisorError as err:  # raised outside a command (Commands.invoke turns those)
        bad_input(err)
    except OSError as err:  # a path the OS refuses (a name over 255 bytes, a permission) is the input's problem
        if is_output_error(err):  # ... but a broken pipe or a full disk is the output's
            output_failed(err)
        if State.debug:
            raise
        name = str(err.filename) if err.filename is not None else _inputs()
        name = name if len(name) <= 80 else f"{name[:60]}... ({len(name):,} characters)"
        click.echo(f"advisor: {name}: cannot read ({err.strerror or type(err).__name__})", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except (RecursionError, MemoryError) as err:  # input past a limit no reader caught: still the input's problem
        if State.debug:
            raise
        what = "nested too deeply" if isinstance(err, RecursionError) else "too large to hold in memory"
        click.echo(f"advisor: {_inputs()}: input {what} to read", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except Exception as err:  # a bug of the advisor, not of the input: its own exit code
        if State.debug:
            raise
        detail = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        click.echo(f"advisor: internal error ({detail}) while reading {_inputs()}; rerun with --debug for the "
                   "traceback and report it", err=True)
        sys.exit(EXIT_INTERNAL)
    sys.exit(code if isinstance(code, int) else ExitCode.OK)


EXIT_INTERNAL = ExitCode.INTERNAL  # documented in the module docstring and README.md


def run() -> NoReturn:
    """The program's entry point (the ``advisor`` script, ``python -m advisor``): :func:`main`, then exit without
    the interpreter's teardown when nothing is left to clean up.

    Freeing every object of the ~240 modules ``advisor check`` loads took ~25 ms on the 2-core development machine
    (2026-12-06: a process importing what check imports took 0.135 s ended by ``os._exit``, 0.162 s by a normal
    exit; medians of 15) and does nothing a finished command needs, so when no thread is still running and no exit
    handler is registered (no logging, Optuna, Ray or coverage in the process), the output is flushed and the
    process ends with ``os._exit``. Otherwise, and whenever flushing fails (a closed pipe), Python exits as usual.
    In-process callers (tests, the MCP server) call :func:`main`.

    The cyclic garbage collector is off from the start: the objects start-up makes live to the end, and walking
    them again and again cost ~7 ms of ``advisor check`` (paired median of 60 runs, 2026-12-06). It stays off only
    for the commands of ``SMALL_INPUT``; resolving any other command turns it back on.
    """
    import gc

    gc.disable()
    try:
        main()
    except SystemExit as done:
        _exit_now(done)
    raise AssertionError("main() always exits")  # pragma: no cover


def _exit_now(done: SystemExit) -> NoReturn:
    import atexit
    import os

    threads = sys.modules.get("threading")
    registered = getattr(atexit, "_ncallbacks", None)  # CPython's count of exit handlers
    if registered is None or registered() or (threads is not None and threads.active_count() > 1):
        raise done
    code = done.code
    if code is not None and not isinstance(code, int):  # sys.exit("message"): Python prints it, exit 1
        raise done
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: the descriptor was closed before Python started
                stream.flush()
    except BrokenPipeError:
        from ._output import output_failed

        try:
            output_failed(None if sys.stdout is None else BrokenPipeError())
        except SystemExit as broken:
            raise broken from None
    except (OSError, ValueError):
        raise done from None
    os._exit(code or 0)


def _inputs() -> str:
    """The files the command was given (from argv), to name them in a last-resort message."""
    paths = [arg for arg in sys.argv[1:] if not arg.startswith("-") and "=" not in arg and _exists(arg)]
    return ", ".join(paths[:3]) or "the input"


def _exists(arg: str) -> bool:
    try:
        return len(arg) < 4096 and Path(arg).exists()
    except (OSError, ValueError):
        return False


