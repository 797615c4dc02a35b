"""advisor mcp (issue #38 item 7, #40 item 2): every request read before end of input is answered; every path a
tool reads is confined to the roots (a samples folder, a script's --config-path, a config's model folder, links
followed); the client's roots are asked again on notifications/roots/list_changed; suggest takes a log alone.

Each escape case puts a canary outside the root: the tool must fail with the one-line "outside" error and the
canary must not come back in any answer.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytest.importorskip("jsonschema")

REPO = Path(__file__).resolve().parents[3]
LOG = REPO / "examples" / "published_log" / "gemma-2-2b-it-ppo.log"
RUN = REPO / "examples" / "kl_spike_loss"
CANARY = "canary-7f3a91"
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "advisor-tests", "version": "0"}}


def _message(message_id: int | None, method: str, params: dict | None = None) -> str:
    body: dict = {"jsonrpc": "2.0", "method": method}
    if message_id is not None:
        body["id"] = message_id
    if params is not None:
        body["params"] = params
    return json.dumps(body)


def _piped(root: Path, *calls: tuple[str, dict]) -> dict[int, dict]:
    """Every request written at once, then stdin closed: the answers by id (the server must exit 0)."""
    lines = [_message(1, "initialize", INIT), _message(None, "notifications/initialized"),
             _message(2, "tools/list")]
    lines += [_message(3 + i, "tools/call", {"name": name, "arguments": args}) for i, (name, args) in enumerate(calls)]
    done = subprocess.run([sys.executable, "-m", "advisor", "mcp"], input="\n".join(lines) + "\n", text=True,
                          capture_output=True, cwd=root, timeout=240, env=_env())
    assert done.returncode == 0, done.stderr
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines()) if "id" in m}
    assert set(answers) == set(range(1, 3 + len(calls))), (sorted(answers), done.stderr)
    return answers


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(REPO)}


def _tool_text(answer: dict) -> str:
    return answer["result"]["content"][0]["text"]


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(root, outside): the server runs in root; outside holds the canaries."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    shutil.copy(RUN / "run.sh", root / "run.sh")
    shutil.copy(RUN / "metrics.jsonl", root / "metrics.jsonl")
    return root, outside


def test_requests_piped_then_end_of_input_are_all_answered(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    shutil.copy(LOG, root / "run.log")
    answers = _piped(root, ("suggest", {"metrics": "run.log"}), ("explain", {"metric": "actor/ppo_kl"}))
    assert {t["name"] for t in answers[2]["result"]["tools"]} >= {"suggest", "check"}
    # suggest on a log alone: its printed config, the document `advisor suggest LOG --format json` prints
    cli = subprocess.run([sys.executable, "-m", "advisor", "suggest", "run.log", "--format", "json"], cwd=root,
                         capture_output=True, text=True, env=_env(), timeout=120)
    assert not answers[3]["result"].get("isError"), _tool_text(answers[3])
    assert answers[3]["result"]["structuredContent"] == json.loads(cli.stdout)
    assert not answers[4]["result"].get("isError")


def test_samples_folder_outside_the_root_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    samples = outside / "samples"
    samples.mkdir()
    (samples / "1.jsonl").write_text(json.dumps({"input": CANARY, "output": CANARY, "score": 1.0, "step": 1}) + "\n")
    (root / "linked").symlink_to(samples)  # inside by name, outside once the link is followed
    base = {"config": "run.sh", "metrics": "metrics.jsonl"}
    answers = _piped(root, ("suggest", {**base, "samples": str(samples)}), ("suggest", {**base, "samples": "linked"}))
    for i in (3, 4):
        assert answers[i]["result"]["isError"] and "outside the folders" in _tool_text(answers[i])
        assert CANARY not in json.dumps(answers[i])


def test_a_scripts_config_path_outside_the_root_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    (outside / "secret.yaml").write_text(f"trainer:\n  project_name: {CANARY}\n")
    (root / "job.sh").write_text("python3 -m verl.trainer.main_ppo --config-path=../outside --config-name=secret "
                                 "data.train_batch_size=64\n")
    answers = _piped(root, ("check", {"config": "job.sh"}))
    assert answers[3]["result"]["isError"] and "outside the folders" in _tool_text(answers[3])
    assert CANARY not in json.dumps(answers[3])
    # the same script, its config folder inside the root, is read (the refusal is the root's, not the script's)
    (root / "conf").mkdir()
    shutil.copy(outside / "secret.yaml", root / "conf" / "secret.yaml")
    (root / "job.sh").write_text("python3 -m verl.trainer.main_ppo --config-path=conf --config-name=secret "
                                 "data.train_batch_size=64\n")
    answers = _piped(root, ("check", {"config": "job.sh"}))
    assert not answers[3]["result"].get("isError"), _tool_text(answers[3])


def test_a_configs_model_folder_outside_the_root_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    model = outside / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": [CANARY], "hidden_size": 1024,
                                                   "num_hidden_layers": 8, "num_attention_heads": 8,
                                                   "vocab_size": 32000, "intermediate_size": 4096}))
    (root / "run.yaml").write_text(f"actor_rollout_ref:\n  model:\n    path: {model}\n")
    answers = _piped(root, ("check", {"config": "run.yaml", "gpu": "H100-80GB"}),
                     ("check", {"config": "run.yaml", "model_config": str(model / "config.json")}))
    for i in (3, 4):
        assert answers[i]["result"]["isError"] and "outside the folders" in _tool_text(answers[i])
        assert CANARY not in json.dumps(answers[i])


class RootsClient:
    """A client that declares roots and answers the server's roots/list from ``self.roots``."""

    def __init__(self, cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "advisor", "mcp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=_env())
        self.watchdog = threading.Timer(180, self.proc.kill)
        self.watchdog.start()
        self.roots: list[Path] = []
        self.roots_asked = 0

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def request(self, message_id: int, method: str, params: dict | None = None) -> dict:
        self.send(_message(message_id, method, params))
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, self.proc.stderr.read() if self.proc.stderr else ""
            message = json.loads(line)
            if message.get("method") == "roots/list":
                self.roots_asked += 1
                roots = [{"uri": r.as_uri(), "name": r.name} for r in self.roots]
                self.send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": roots}}))
            elif message.get("id") == message_id:
                return message

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        self.watchdog.cancel()
        return code


def test_roots_are_asked_again_after_list_changed_and_a_removed_root_is_no_longer_read(tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "cwd"
    project.mkdir()
    elsewhere.mkdir()
    shutil.copy(RUN / "run.sh", project / "run.sh")
    shutil.copy(RUN / "metrics.jsonl", project / "metrics.jsonl")
    client = RootsClient(elsewhere)  # the server's own folder holds nothing: the project is readable as a root only
    client.roots = [project]
    init = {**INIT, "capabilities": {"roots": {"listChanged": True}}}
    assert "result" in client.request(1, "initialize", init)
    client.send(_message(None, "notifications/initialized"))
    paths = {"config": str(project / "run.sh"), "metrics": str(project / "metrics.jsonl")}
    args = {"name": "suggest", "arguments": paths}
    first = client.request(2, "tools/call", args)
    assert not first["result"].get("isError"), first
    client.roots = []  # the user closed the project
    client.send(_message(None, "notifications/roots/list_changed"))
    second = client.request(3, "tools/call", args)
    assert second["result"]["isError"] and "outside the folders" in second["result"]["content"][0]["text"]
    assert client.roots_asked == 2
    assert client.close() == 0
