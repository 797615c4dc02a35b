"""The ``advisor`` command line: one module per command (``check``, ``suggest``, ...), each registering
itself on the group of ``_app`` (which documents the exit codes); ``_jobs`` runs each command and returns the result
it renders (shared with the MCP server, ``_mcp``). No diagnosis logic here.
"""

from __future__ import annotations

# importing each command's module registers it on the group
from . import calibrate, check, explain, mcp, report, rule, suggest, sweep, verify, watch  # noqa: F401
from ._app import EXIT_INTERNAL, app, main

__all__ = ["EXIT_INTERNAL", "app", "main"]
