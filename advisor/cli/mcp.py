"""``advisor mcp``: serve check, suggest, explain, report and verify as Model Context Protocol ..."""

from __future__ import annotations

from pathlib import Path

import click

from advisor.errors import AdvisorError, install_hint

from ._app import app


@app.command()
@click.option("--root", "roots", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              metavar="DIR", help="Also let tools read and write under DIR (default: the working folder and the "
                                  "roots the client declares). Repeatable.")
def mcp(roots: tuple[Path, ...]) -> None:
    """Serve check, suggest, explain, report and verify as Model Context Protocol tools over stdio.

    For coding agents: each tool takes the JSON inputs of advisor/schemas/<tool>.input.json and returns
    what `advisor <tool> --format json` prints (advisor/schemas/<tool>.output.json). Tool paths must lie
    under the working folder, a --root DIR or a root the client declares. The server exits when its stdin
    closes. Needs the 'mcp' extra: pip install -e '.[mcp]' from the checkout. Exit 2 when it is not installed.
    """
    import importlib.util

    if importlib.util.find_spec("mcp") is None or importlib.util.find_spec("jsonschema") is None:
        raise AdvisorError("advisor mcp needs the 'mcp' package, which is not installed",
                           suggestion=install_hint("mcp"))
    from ._mcp import serve

    serve(roots)

