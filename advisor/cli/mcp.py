"""``advisor mcp``: serve check, suggest, explain, report and verify as Model Context Protocol ..."""

from __future__ import annotations

from advisor.errors import AdvisorError, install_hint

from ._app import app, fail


@app.command()
def mcp() -> None:
    """Serve check, suggest, explain, report and verify as Model Context Protocol tools over stdio.

    For coding agents: each tool takes the JSON inputs of advisor/schemas/<tool>.input.json and returns
    what `advisor <tool> --format json` prints (advisor/schemas/<tool>.output.json). Needs the 'mcp'
    extra: pip install -e '.[mcp]' from the checkout. Exit 2 when it is not installed.
    """
    import importlib.util

    if importlib.util.find_spec("mcp") is None or importlib.util.find_spec("jsonschema") is None:
        fail(AdvisorError("advisor mcp needs the 'mcp' package, which is not installed",
                           suggestion=install_hint("mcp")))
    from ._mcp import serve

    serve()

