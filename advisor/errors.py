"""Errors for input the advisor cannot read.

A diagnosed problem in a config or a run is a :class:`~advisor.Finding`, never an exception.
An exception means the advisor could not read its input; the CLI prints ``str(error)`` as one line
and exits 2. Each error carries fields as well as text so ``--format json`` can report them.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The ``advisor`` command's exit status (as ruff's): every command and the MCP server's exit_code use these."""

    OK = 0  # ran and found no error
    FOUND = 1  # ran and found errors (or an out-of-memory verdict; verify: keep the baseline)
    BAD_INPUT = 2  # could not run: unreadable input, bad arguments, input past a size or depth limit
    INTERNAL = 3  # an internal error of the advisor (a bug)
    ALERT = 4  # advisor watch --exit-on: an alert at that level
    OUTPUT_FAILED = 74  # the output could not be written (stdout closed, disk full): sysexits.h EX_IOERR
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as a shell reports it)
    BROKEN_PIPE = 141  # the reader of stdout went away (`| head -1`): 128 + SIGPIPE, as a shell reports it


def install_hint(extra: str) -> str:
    """How to install an optional extra. verl-advisor is not on the package index: it is installed from its
    checkout (``pip install -e .``), so the extra is too."""
    return f"pip install -e '.[{extra}]' (from the verl-advisor checkout)"


class AdvisorError(Exception):
    """Base class: input the advisor could not read.

    ``str(error)`` is one line: ``<path>[:<where>]: <what is wrong>[; <what to do>]``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        where: str | int | None = None,
        key: str | None = None,
        suggestion: str | None = None,
    ) -> None:
        self.message = message
        self.path = path
        self.where = where
        self.key = key
        self.suggestion = suggestion
        super().__init__(self._line())

    def _line(self) -> str:
        location = self.path or ""
        if self.where is not None and location:
            location = f"{location}:{self.where}"
        text = f"{location}: {self.message}" if location else self.message
        if self.suggestion:
            text = f"{text}; {self.suggestion}"
        # one line, whatever the message holds
        return " ".join(text.split())

    def to_dict(self) -> dict[str, object]:
        return {
            "type": type(self).__name__,
            "message": str(self),
            "path": self.path,
            "where": self.where,
            "key": self.key,
            "suggestion": self.suggestion,
        }


class ConfigError(AdvisorError, ValueError):
    """A config, launch script or override could not be read."""


class MetricsError(AdvisorError, ValueError):
    """A metrics file or directory could not be read."""


class PlaybookError(AdvisorError, ValueError):
    """A rule file in knowledge/ is malformed."""


class SweepError(AdvisorError, RuntimeError):
    """A sweep could not be set up or run."""
