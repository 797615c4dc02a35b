"""``advisor mcp``: the advisor's commands as Model Context Protocol tools, served over stdio.

Tools check, suggest, explain, report and verify take the JSON inputs of advisor/schemas/<tool>.input.json
and return, as structured content, the document ``advisor <tool> --format json`` prints (the same
advisor.cli._jobs function builds both; advisor/schemas/<tool>.output.json describes it). Input the
advisor cannot read is a tool error whose text is the CLI's one-line message.

Needs the ``mcp`` extra (``pip install -e '.[mcp]'`` from the checkout); imported only by this verb.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

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
    return json.loads(files("advisor").joinpath("schemas", f"{tool}.{kind}.json").read_text(encoding="utf-8"))


def call_tool(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Run one tool on its (validated) arguments: the --format json document and the CLI's exit code."""
    import jsonschema

    if name not in TOOLS:
        raise AdvisorError(f"unknown tool '{name}'", suggestion="tools: " + ", ".join(TOOLS))
    try:
        jsonschema.validate(arguments, schema(name, "input"))
    except jsonschema.ValidationError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "arguments"
        raise AdvisorError(f"invalid {where} for {name}: {err.message}") from None
    args = dict(arguments)
    if name == "explain":
        return _jobs.explain_job(args["metric"])
    positional = [args.pop("config")] + ([args.pop("metrics")] if name != "check" else [])
    return getattr(_jobs, f"{name}_job")(*positional, args.pop("overrides", []), **args)


def serve() -> None:
    """Serve the tools on stdin/stdout until the client closes the stream."""
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    from advisor import __version__

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=name, title=f"advisor {name}", description=text, input_schema=schema(name, "input"),
                       output_schema=schema(name, "output"))
            for name, text in TOOLS.items()])

    async def run_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            document, code = await anyio.to_thread.run_sync(call_tool, params.name, dict(params.arguments or {}))
        except AdvisorError as err:
            return types.CallToolResult(content=[types.TextContent(text=f"advisor: {err}")], is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(document, indent=2))],
                                    structured_content=document, meta={"verl-advisor/exit_code": code})

    server: Server[Any] = Server("verl-advisor", version=__version__, on_list_tools=list_tools,
                                 on_call_tool=run_tool, get_tool_input_schema=lambda name: schema(name, "input")
                                 if name in TOOLS else None)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
