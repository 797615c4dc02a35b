"""advisor mcp: the MCP handshake over stdio, the tools and their schemas, and the same JSON as --format json."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("mcp")
jsonschema = pytest.importorskip("jsonschema")

from advisor.cli import _jobs  # noqa: E402
from advisor.cli._mcp import TOOLS, schema  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
RUNS = sorted(p.parent for p in EXAMPLES.glob("*/metrics.jsonl"))
CONFIGS = sorted(EXAMPLES.glob("check/*")) + [run / "run.sh" for run in RUNS]


class Client:
    """A bare JSON-RPC client over the server's stdin/stdout (newline-delimited, as MCP's stdio transport)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "advisor", "mcp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        self.watchdog = threading.Timer(180, self.proc.kill)
        self.watchdog.start()
        self.next_id = 0

    def notify(self, method: str, params: dict | None = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, **({"params": params} if params else {})})
        while True:
            line = self.proc.stdout.readline()
            assert line, f"the server closed its output: {self.proc.stderr.read()}"
            message = json.loads(line)
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message["result"]

    def _send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def close(self) -> int:
        self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        self.watchdog.cancel()
        return code


@pytest.fixture(scope="module")
def client():
    c = Client()
    init = c.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "advisor-tests", "version": "0"}})
    assert init["serverInfo"]["name"] == "verl-advisor" and "tools" in init["capabilities"]
    c.notify("notifications/initialized")
    yield c
    assert c.close() == 0


def cli_json(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "advisor", *args, "--format", "json"], capture_output=True,
                          text=True, cwd=REPO)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_lists_the_five_tools_with_their_published_schemas(client: Client) -> None:
    tools = {t["name"]: t for t in client.request("tools/list")["tools"]}
    assert set(tools) == {"check", "suggest", "explain", "report", "verify"} == set(TOOLS)
    for name, tool in tools.items():
        assert tool["inputSchema"] == schema(name, "input")
        assert tool["outputSchema"] == schema(name, "output")
        assert tool["description"]


def test_suggest_over_stdio_is_advisor_suggest_format_json(client: Client) -> None:
    run = EXAMPLES / "kl_spike_loss"
    args = {"config": "examples/kl_spike_loss/run.sh", "metrics": "examples/kl_spike_loss/metrics.jsonl"}
    result = client.request("tools/call", {"name": "suggest", "arguments": args})
    assert not result.get("isError")
    expected = cli_json("suggest", args["config"], args["metrics"])
    assert result["structuredContent"] == expected
    assert json.loads(result["content"][0]["text"]) == expected
    assert expected["overrides"] and run.is_dir()


def test_check_over_stdio_carries_the_exit_code(client: Client) -> None:
    result = client.request("tools/call", {"name": "check", "arguments": {"config": "examples/check/ppo_broken.yaml"}})
    assert result["structuredContent"] == cli_json("check", "examples/check/ppo_broken.yaml")
    assert result["_meta"]["verl-advisor/exit_code"] == 1  # errors found, as the CLI's exit code


def test_unreadable_input_and_bad_arguments_are_tool_errors(client: Client) -> None:
    missing = client.request("tools/call", {"name": "check", "arguments": {"config": "nope.yaml"}})
    assert missing["isError"] and missing["content"][0]["text"] == "advisor: nope.yaml: file not found"
    bad = client.request("tools/call", {"name": "explain", "arguments": {"metric": 3}})
    assert bad["isError"]


@pytest.mark.parametrize("kind", ["input", "output"])
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_schemas_are_valid_json_schema(tool: str, kind: str) -> None:
    jsonschema.Draft202012Validator.check_schema(schema(tool, kind))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_examples_check_json_follows_the_schema(config: Path) -> None:
    document = _jobs.check_job(str(config)).document()
    jsonschema.validate(document, schema("check", "output"))
    with_memory = _jobs.check_job(str(config), gpu="H100-80GB").document()
    jsonschema.validate(with_memory, schema("check", "output"))


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_examples_suggest_and_verify_plan_follow_the_schemas(run: Path) -> None:
    document = _jobs.suggest_job(str(run / "run.sh"), str(run / "metrics.jsonl")).document()
    jsonschema.validate(document, schema("suggest", "output"))
    if document["changes"]:
        pytest.importorskip("optuna")
        plan = _jobs.verify_job(str(run / "run.sh"), str(run / "metrics.jsonl"), dry_run=True).document()
        jsonschema.validate(plan, schema("verify", "output"))


def test_every_catalogued_metric_explains_to_the_schema() -> None:
    from advisor.metrics._catalog import load_catalog

    names = sorted(load_catalog().metrics)
    assert len(names) > 50
    for name in names:
        jsonschema.validate(_jobs.explain_job(name).document(), schema("explain", "output"))


def test_report_json_follows_the_schema(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    run = EXAMPLES / "lr_too_high"
    result = _jobs.report_job(str(run / "run.sh"), str(run / "metrics.jsonl"), out=str(tmp_path / "r.html"))
    document = result.document()
    jsonschema.validate(document, schema("report", "output"))
    assert (tmp_path / "r.html").is_file() and document["charts"] > 0
