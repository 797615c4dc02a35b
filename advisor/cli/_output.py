"""When the output cannot be written: a reader that went away, a closed stdout, a full disk.

None of these is the input's fault, and none is "errors found" (exit 1). A broken pipe (``advisor check | head
-1``) ends quietly with 141, what a shell reports for a process that SIGPIPE ended (Python ignores SIGPIPE and
raises ``BrokenPipeError`` instead: https://docs.python.org/3/library/signal.html#note-on-sigpipe). A closed
stdout (``>&-``) or a full disk (``> /dev/full``) is one line on stderr and exit 74, sysexits.h's ``EX_IOERR``.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import NoReturn

import click

from advisor.errors import ExitCode

# errors of a write, never of a read: where one has no file name it is the output's
_WRITE_ERRNOS = frozenset({errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EBADF})


class OutputFailed(Exception):
    """An output error carried past Click, which turns a broken pipe into exit 1 (click/core.py ``main``: ``except
    OSError as e: if e.errno != errno.EPIPE: raise``, then exits with 1)."""

    def __init__(self, err: OSError) -> None:
        super().__init__(str(err))
        self.err = err


def is_output_error(err: OSError) -> bool:
    """``err`` came from writing the output (stdout), not from reading an input."""
    return isinstance(err, BrokenPipeError) or (err.errno in _WRITE_ERRNOS and err.filename is None)


def stdout_closed() -> bool:
    """Python sets ``sys.stdout`` to None when descriptor 1 was closed before it started (``advisor ... >&-``)."""
    return sys.stdout is None


def output_failed(err: OSError | None) -> NoReturn:
    """End for an output that could not be written: quietly with 141 for a broken pipe, else one line and 74."""
    if isinstance(err, BrokenPipeError) or (err is not None and err.errno == errno.EPIPE):
        _silence_stdout()
        sys.exit(ExitCode.BROKEN_PIPE)
    why = "standard output is closed" if err is None else (err.strerror or type(err).__name__)
    _silence_stdout()
    click.echo(f"advisor: cannot write the output ({why})", err=True)
    sys.exit(ExitCode.OUTPUT_FAILED)


def _silence_stdout() -> None:
    """Point descriptor 1 at /dev/null, so that the interpreter's last flush of what is still buffered neither
    fails again nor prints "Exception ignored" (the recipe of Python's signal docs)."""
    stream = sys.stdout
    try:
        fd = stream.fileno() if stream is not None else 1
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != fd:  # with descriptor 1 closed, the lowest free one is 1 itself
            os.dup2(devnull, fd)
            os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # an in-process caller's stdout (a test's StringIO) has no descriptor: nothing to silence
