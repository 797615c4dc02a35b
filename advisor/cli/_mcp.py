"""``advisor mcp``: the advisor's commands as Model Context Protocol tools, served over stdio.

Tools check, suggest, explain, report and verify take the JSON inputs of advisor/schemas/<tool>.input.json
and return, as structured content, the document ``advisor <tool> --format json`` prints (the same
advisor.cli._jobs function builds both; advisor/schemas/<tool>.output.json describes it). Input the
advisor cannot read is a tool error whose text is the CLI's one-line message.

A path argument must lie under the server's working folder, a ``--root`` folder, or a root the client declares
(links followed): a client cannot make the server read ``../kubeconfig`` and hand its lines back. Every request
that carries an id is answered, a malformed one with a JSON-RPC error (``_mcp_wire``). When stdin closes, the
server answers every request it read before (requests piped, then end of input), then exits. Every other path a
job reads (a script's --config-path, a config's model folder) is held to the same folders (``_mcp_roots``), and
the client's roots are asked again after ``notifications/roots/list_changed``.

Needs the ``mcp`` extra (``pip install -e '.[mcp]'`` from the checkout); imported only by this verb.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import warnings
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote, urlparse

from advisor.errors import AdvisorError, install_hint

from . import _jobs

INSTALL_HINT = install_hint("mcp")
TOOLS: dict[str, str] = {
    "check": "Pre-launch check of a verl config (YAML, Hydra run dir or launch script): what verl would reject, "
             "what is legal but wrong, the four batch-size layers, memory per phase with a GPU, and one combined "
             "diff that holds together (as an edit of the user's file when it is one).",
    "suggest": "Diagnose a verl run from its config and metrics and answer with the one or two config keys to "
               "change (or 'no change'), with evidence, verl sources and ranked alternatives.",
    "explain": "Where a verl metric comes from (file:line), its formula, healthy range and the rules that read it.",
    "report": "Write one self-contained offline HTML page of a run (charts with healthy bands, diagnoses, the "
              "diff); returns what was written. Needs the 'report' extra.",
    "verify": "Test suggest's diff before a long run: sweep the suggested key over the baseline, the proposed "
              "value and one step beyond on several seeds, and return the verdict. dry_run returns the plan "
              "only; a real run trains (it can take long). Needs the 'sweeps' extra.",
}


@cache
def schema(tool: str, kind: str) -> dict[str, Any]:
    """advisor/schemas/<tool>.<kind>.json (kind: input or output)."""
    text = files("advisor").joinpath("schemas").joinpath(f"{tool}.{kind}.json").read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


PATH_ARGUMENTS = ("config", "metrics", "model_config", "samples", "out", "png_dir", "storage")
"""tool arguments that name a file or folder: each must lie under an allowed root (and every other path a job
reads, e.g. a script's --config-path, is held to the same roots by ``_mcp_roots.READ_GUARD``)"""
GRACE_S = 20.0
"""seconds the requests read before stdin closed get to be answered; one still running then (a verify sweep) is
cancelled and answered with an error"""


def _finite(value: Any, where: str, name: str) -> None:
    """JSON's NaN and Infinity (Python's json reads them) pass a schema's "type": "number"; no argument takes one."""
    if isinstance(value, float) and not math.isfinite(value):
        raise AdvisorError(f"invalid {where} for {name}: {value} is not a finite number")
    if isinstance(value, dict):
        for key, item in value.items():
            _finite(item, f"{where}/{key}" if where != "arguments" else str(key), name)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _finite(item, f"{where}/{i}", name)


def _confined(name: str, key: str, value: str, roots: Sequence[Path]) -> None:
    """``value`` (a path, or an sqlite:/// storage URL) resolves under one of ``roots``, links followed."""
    if key == "storage" and "://" in value:
        if not value.startswith("sqlite:///"):
            return  # a database server: no file of this machine
        value = value.removeprefix("sqlite:///")
    try:
        resolved = Path(os.path.realpath(value))
    except (OSError, ValueError) as err:
        raise AdvisorError(f"invalid {key} for {name}: {err}") from None
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        shown = ", ".join(str(r) for r in roots)
        raise AdvisorError(f"{key} '{value}' is outside the folders this server may read ({shown})",
                           suggestion="start advisor mcp in the project's folder, or widen it with --root DIR")


def call_tool(name: str, arguments: dict[str, Any], roots: Sequence[Path] | None = None) -> tuple[dict[str, Any], int]:
    """Run one tool on its (validated) arguments: the --format json document and the CLI's exit code.

    ``roots``: the folders a path argument may name (resolved, links followed); None: any (a caller in this
    process, which can read anything anyway).
    """
    import jsonschema

    if name not in TOOLS:
        raise AdvisorError(f"unknown tool '{name}'", suggestion="tools: " + ", ".join(TOOLS))
    _finite(arguments, "arguments", name)
    try:
        jsonschema.validate(arguments, schema(name, "input"))
    except jsonschema.ValidationError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "arguments"
        raise AdvisorError(f"invalid {where} for {name}: {err.message}") from None
    if roots is None:
        result = _jobs.JOBS[name].call(arguments)
        return result.document(), int(result.exit_code)
    for key in PATH_ARGUMENTS:
        if isinstance(arguments.get(key), str):
            _confined(name, key, arguments[key], roots)
    from ._mcp_roots import READ_GUARD

    with READ_GUARD.only(roots):  # and every path the job reads on its own
        result = _jobs.JOBS[name].call(arguments)
        return result.document(), int(result.exit_code)


def serve(roots: Sequence[str | os.PathLike[str]] = ()) -> None:
    """Serve the tools on stdin/stdout until the client closes stdin; then exit (a call still running after
    GRACE_S is cancelled).

    ``roots``: folders, besides the working folder and the roots the client declares, that tool paths may name.
    """
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    from advisor import __version__

    from ._mcp_wire import SERVER_ENV, UNFINISHED, Ledger, Screened, Wire, claim_stdio, error, stop_marked

    token = os.urandom(8).hex()
    os.environ[SERVER_ENV] = token  # inherited by whatever a tool starts (a verify trial in its own session)
    allowed = [Path(os.path.realpath(r)) for r in [os.getcwd(), *roots]]
    ledger = Ledger()  # the requests read and not yet answered; the roots' generation
    client_roots: list[Path] | None = None
    roots_read_at = -1

    async def declared_roots(ctx: Any) -> list[Path]:
        """The file:// roots the client declares (asked again after each notifications/roots/list_changed; none
        when it declares no roots capability)."""
        nonlocal client_roots, roots_read_at
        if client_roots is None or roots_read_at != ledger.roots_changed:
            roots_read_at = ledger.roots_changed
            client_roots = []
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                capabilities = getattr(getattr(ctx.session, "client_params", None), "capabilities", None)
                if getattr(capabilities, "roots", None) is not None:
                    with anyio.fail_after(2):
                        listed = await ctx.session.list_roots()
                    client_roots = [Path(os.path.realpath(unquote(urlparse(str(r.uri)).path))) for r in listed.roots
                                    if str(r.uri).startswith("file://")]
        return client_roots

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=name, title=f"advisor {name}", description=text, input_schema=schema(name, "input"),
                       output_schema=schema(name, "output"))
            for name, text in TOOLS.items()])

    async def run_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            where = [*allowed, *await declared_roots(ctx)]
            document, code = await anyio.to_thread.run_sync(call_tool, params.name, dict(params.arguments or {}),
                                                            where, abandon_on_cancel=True)
        except AdvisorError as err:
            return types.CallToolResult(content=[types.TextContent(text=f"advisor: {err}")], is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(document, indent=2))],
                                    structured_content=document, meta={"verl-advisor/exit_code": code})

    server: Server[Any] = Server("verl-advisor", version=__version__, on_list_tools=list_tools,
                                 on_call_tool=run_tool, get_tool_input_schema=lambda name: schema(name, "input")
                                 if name in TOOLS else None)

    async def main() -> None:
        wire_in, wire_out = claim_stdio()
        closed = anyio.Event()
        wire = Wire(wire_out, closed, ledger)
        async with anyio.create_task_group() as tg:
            async def run() -> None:
                # Screened and Wire stand in for anyio's AsyncFile: they have what stdio_server calls on it
                stdin, stdout = cast(Any, Screened(wire_in, wire, closed, ledger)), cast(Any, wire)
                async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
                    await server.run(read, write, server.create_initialization_options())
                tg.cancel_scope.cancel()

            tg.start_soon(run)
            await closed.wait()  # stdin closed (or stdout broke): answer every request read, then stop
            with anyio.move_on_after(GRACE_S):
                while ledger.pending and not wire.broken:
                    await anyio.sleep(0.02)
            for left in ledger.unanswered():  # still running after GRACE_S: cancelled, and said so
                await wire.write(error(left, UNFINISHED, f"cancelled: stdin closed and the request ran past "
                                                        f"{GRACE_S:g} s"))
            tg.cancel_scope.cancel()

    anyio.run(main)
    from ._mcp_roots import READ_GUARD

    READ_GUARD.stop()  # a cancelled call may still hold it; the server itself reads /proc next
    # a cancelled tool call may still run in its worker thread (a verify sweep): stop what it started, do not wait
    stop_marked(token)
    sys.stderr.flush()
    os._exit(0)
