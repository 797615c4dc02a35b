"""The ``advisor`` command line: one module per command (``check``, ``suggest``, ...), each registering
itself on the group of ``_app`` when that command is first asked for (``_app.COMMANDS``); the options several
commands share in ``_options`` (a sweep's in ``_sweep_options``); ``_jobs`` runs each command and returns the
result it renders (``_show``; shared with the MCP server, ``_mcp``); ``_entry`` is the program's entry point,
which documents the exit codes. No diagnosis logic here.
"""

from __future__ import annotations

from ._app import app
from ._entry import EXIT_INTERNAL, main, run

__all__ = ["EXIT_INTERNAL", "app", "main", "run"]
