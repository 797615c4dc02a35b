"""The ``advisor`` command line: one module per command (``check``, ``suggest``, ...), each registering
itself on the group of ``_app`` (which documents the exit codes) when that command is first asked for
(``_app.COMMANDS``); ``_jobs`` runs each command and returns the result it renders (shared with the MCP server,
``_mcp``). No diagnosis logic here.
"""

from __future__ import annotations

from ._app import EXIT_INTERNAL, app, main, run

__all__ = ["EXIT_INTERNAL", "app", "main", "run"]
