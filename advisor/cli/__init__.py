"""The ``advisor`` command line: parse arguments, call the API, render. No diagnosis logic here.

Exit codes (as ruff): 0 ran and found no error; 1 ran and found errors (or an out-of-memory
verdict); 2 could not run (unreadable input, bad arguments, input past a size or depth limit); 3 an
internal error of the advisor (a bug: one line naming it and the inputs, and a hint to rerun with
``--debug`` for the traceback); 4 ``advisor watch --exit-on``: an alert at that level. Errors are one line on
stderr; a traceback only with ``--debug``.

Built on Click rather than Typer: Typer 0.29 builds pydantic adapters for every parameter, which
alone costs ~0.1 s of the 0.4 s start-up budget of ``advisor check`` (bench/bench_check_startup.py).

One module per command (``check``, ``suggest``, ...), each registering itself on the group of
``_app``; ``_jobs`` builds each command's JSON document (shared with the MCP server, ``_mcp``).
"""

from __future__ import annotations

# importing each command's module registers it on the group
from . import calibrate, check, explain, mcp, report, rule, suggest, sweep, verify, watch  # noqa: F401
from ._app import EXIT_INTERNAL, app, main

__all__ = ["EXIT_INTERNAL", "app", "main"]
