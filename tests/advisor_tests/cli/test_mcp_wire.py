"""advisor mcp against a hostile client: every request with an id is answered, paths stay in the server's folders,
non-finite numbers are refused, and the server exits when its stdin closes.

Reproducer shapes: ``check {"config": "../kubeconfig"}``; a batch; a request without ``jsonrpc``; array
``params``; a lone surrogate; a 5,000-deep object; ``gpu_memory_gib: NaN``; a client that closes stdin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytest.importorskip("jsonschema")

from advisor.cli._mcp import call_tool
from advisor.cli._mcp_wire import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, screen
from advisor.errors import AdvisorError

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "examples" / "lr_too_high" / "run.sh"


def _answer(line: bytes | str) -> dict:
    raw = line.encode() if isinstance(line, str) else line
    passed, answers = screen(raw)
    assert passed is None and len(answers) == 1, (passed, answers)
    return json.loads(answers[0])


@pytest.mark.parametrize(("line", "code", "id_"), [
    ('[{"jsonrpc": "2.0", "id": 7, "method": "ping"}]', INVALID_REQUEST, 7),
    ('{"id": 7, "method": "ping"}', INVALID_REQUEST, 7),
    ('{"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": [1, 2]}', INVALID_PARAMS, "a"),
    ('{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": "\\ud800"}}', INVALID_PARAMS, 7),
    ('{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": ' + '{"a": ' * 5000 + "1" + "}" * 5001, INVALID_REQUEST,
     7),
    ('{"jsonrpc": "2.0", "method": "ping", "id": 7, "params": ' + "[" * 5000 + "]" * 5000 + "}", INVALID_REQUEST, 7),
    ("{not json", PARSE_ERROR, None),
    (b'{"jsonrpc": "2.0", "id": 7, "method": "\xff"}', PARSE_ERROR, None),
    ("[]", INVALID_REQUEST, None),
])
def test_every_malformed_request_gets_an_error_with_its_id(line: str | bytes, code: int, id_: object) -> None:
    answer = _answer(line)
    assert answer["jsonrpc"] == "2.0" and answer["id"] == id_ and answer["error"]["code"] == code


def test_a_malformed_notification_gets_no_answer_and_a_good_line_passes() -> None:
    assert screen(b'{"method": "notifications/x", "params": [1]}') == (None, [])
    good = '{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    assert screen(good.encode()) == (good, [])


def test_tool_paths_stay_under_the_roots(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    secret = tmp_path / "kubeconfig"
    secret.write_text("token: s3cr3t\n")
    (project / "escape.yaml").symlink_to(secret)
    for config in (str(secret), str(project / ".." / "kubeconfig"), str(project / "escape.yaml"), "/dev/zero"):
        with pytest.raises(AdvisorError, match="outside the folders") as err:
            call_tool("check", {"config": config}, roots=[project])
        assert "s3cr3t" not in str(err.value)
    with pytest.raises(AdvisorError, match="outside the folders"):
        call_tool("report", {"config": str(SCRIPT), "metrics": str(SCRIPT), "out": str(tmp_path / "r.html")},
                  roots=[SCRIPT.parent])
    with pytest.raises(AdvisorError, match="not a regular file"):  # inside a root, still never read
        call_tool("check", {"config": "/dev/zero"}, roots=[Path("/dev")])
    document, code = call_tool("check", {"config": str(SCRIPT)}, roots=[REPO])
    assert code in (0, 1) and document["config"]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_numbers_are_refused(value: float) -> None:
    with pytest.raises(AdvisorError, match="not a finite number"):
        call_tool("check", {"config": str(SCRIPT), "gpu_memory_gib": value})


def test_the_server_answers_every_request_and_exits_when_stdin_closes(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "advisor", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        [{"jsonrpc": "2.0", "id": 2, "method": "ping"}],
        {"id": 3, "method": "ping"},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "check", "arguments": {"config": "../kubeconfig"}}},
        {"jsonrpc": "2.0", "id": 5, "method": "ping"},
    ]
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for line in lines:
            proc.stdin.write((json.dumps(line) + "\n").encode())
        proc.stdin.flush()
        answers = {}
        while len(answers) < 5:
            message = json.loads(proc.stdout.readline())
            answers[message["id"]] = message
        assert answers[2]["error"]["code"] == answers[3]["error"]["code"] == INVALID_REQUEST
        assert answers[4]["result"]["isError"] and "outside the folders" in answers[4]["result"]["content"][0]["text"]
        assert answers[5]["result"] == {}
        started = time.monotonic()
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert time.monotonic() - started < 30
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_a_tool_call_in_flight_is_cancelled_when_stdin_closes_and_its_trials_stopped(tmp_path: Path) -> None:
    """A verify whose trial hangs: closing stdin ends the server within its grace period, and the trial (in its
    own session) is stopped with it."""
    import shutil

    pytest.importorskip("optuna")

    from sweeps._liveness import pid_alive

    example = REPO / "examples" / "lr_too_high"
    for name in ("run.sh", "metrics.jsonl"):
        shutil.copy(example / name, tmp_path / name)
    proc = subprocess.Popen([sys.executable, "-m", "advisor", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    watchdog = threading.Timer(180, proc.kill)
    watchdog.start()
    hang = f"{sys.executable} -c 'import time; time.sleep(300)'"
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for line in [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "verify", "arguments": {"config": "run.sh", "metrics": "metrics.jsonl", "steps": 10,
                                                        "seeds": 2, "command": hang, "out": "sweep"}}},
        ]:
            proc.stdin.write((json.dumps(line) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(tmp_path.glob("sweep/trials/*/lease.json")):
            time.sleep(0.1)
        leases = list(tmp_path.glob("sweep/trials/*/lease.json"))
        assert leases, proc.stderr.read1(10_000) if hasattr(proc.stderr, "read1") else ""
        handle = json.loads(leases[0].read_text())["handle"]
        assert pid_alive(handle["pid"], handle["start_ticks"])
        started = time.monotonic()
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert time.monotonic() - started < 30
        deadline = time.monotonic() + 10
        while pid_alive(handle["pid"], handle["start_ticks"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_alive(handle["pid"], handle["start_ticks"])
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
