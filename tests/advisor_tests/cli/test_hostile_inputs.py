"""Odd and hostile input in every input slot: one clear line and exit 1/2, never a hang, a memory blow-up or an
internal error (exit 3).

Reproducer shapes from the second hostile-input campaign: a FIFO or ``/dev/zero`` as the config, the metrics
file, the report's input or ``--model-config``; a 310-digit lr; an emoji key written as a JSON surrogate pair; a
UTF-16 ``config.json``; ``--gpu-memory-gib inf``/``nan``; ``rollout.temperature=$T`` with ``$T`` undefined; a
billion-laughs YAML saved as ``.json``; a wide YAML of unknown keys; UTF-16, CR-only and NUL-run metrics logs.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from advisor import codes
from advisor.cli import app
from advisor.errors import ConfigError, MetricsError
from advisor.inputfile import read_capped, read_text
from advisor.load import load_config
from advisor.metrics import load_metrics

REPO = Path(__file__).resolve().parents[3]
SCRIPT = str(REPO / "examples" / "lr_too_high" / "run.sh")
METRICS = str(REPO / "examples" / "lr_too_high" / "metrics.jsonl")
LR = "actor_rollout_ref.actor.optim.lr"


def _findings(output: str) -> list[dict[str, Any]]:
    data = json.loads(output)
    return [*data["errors"], *data["warnings"], *data["infos"]]


def run(*args: str, timeout: float = 120) -> Any:
    """The CLI in this process, on a daemon thread: a call that blocks (a FIFO opened) fails the test, not the
    suite."""
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(result=CliRunner().invoke(app, list(args))), daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"advisor {' '.join(args)} did not return in {timeout} s"
    return box["result"]


def _one_line_exit_2(result: Any, *words: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert all(w in lines[0] for w in words), lines[0]


@pytest.fixture
def fifo(tmp_path: Path) -> str:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return str(path)


SPECIAL = ["fifo", "/dev/zero"]


def _special(name: str, fifo: str) -> str:
    return fifo if name == "fifo" else name


@pytest.mark.parametrize("name", SPECIAL)
def test_a_special_file_as_the_config_of_check_and_suggest(name: str, fifo: str) -> None:
    path = _special(name, fifo)
    kind = "FIFO" if name == "fifo" else "character device"
    _one_line_exit_2(run("check", path), path, kind, "not a regular file")
    _one_line_exit_2(run("suggest", path, METRICS), path, kind)


@pytest.mark.parametrize("name", SPECIAL)
def test_a_special_file_as_the_metrics_of_suggest_and_report(name: str, fifo: str, tmp_path: Path) -> None:
    path = _special(name, fifo)
    _one_line_exit_2(run("suggest", SCRIPT, path), path, "not a regular file")
    with pytest.raises(MetricsError, match="not a regular file"):
        load_metrics(path, fmt="jsonl")
    result = run("report", SCRIPT, path, "-o", str(tmp_path / "r.html"))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.parametrize("name", SPECIAL)
def test_a_special_file_as_the_model_config(name: str, fifo: str) -> None:
    path = _special(name, fifo)
    _one_line_exit_2(run("check", SCRIPT, "--gpu", "H100-80GB", "--model-config", path), path,
                     "not a regular file")


def test_the_byte_cap_holds_whatever_st_size_says(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"a" * 1001)
    assert read_capped(path, 1001) == b"a" * 1001
    with pytest.raises(ConfigError, match=r"far smaller \(the limit is"):
        read_capped(path, 1000)


@pytest.mark.parametrize("data", [
    "\ufeffa: 1\r\nb: 2\r\n".encode("utf-16-le"),  # PowerShell's '>'
    "\ufeffa: 1\nb: 2\n".encode("utf-16-be"),
    b"a: 1\rb: 2\r",  # CR-only
    b"\xef\xbb\xbfa: 1\r\nb: 2\r\n",  # UTF-8 with a BOM, CRLF
])
def test_text_is_read_by_its_bom_with_plain_line_ends(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_bytes(data)
    assert read_text(path, 1 << 20) == "a: 1\nb: 2\n"


def test_a_310_digit_lr_is_a_finding_not_an_internal_error(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/bash\npython3 -m verl.trainer.main_ppo {LR}={'1' * 310} data.train_batch_size=64\n")
    result = run("check", str(script), "--format", "json")
    assert result.exit_code in (0, 1), result.output
    found = [f for f in _findings(result.output) if LR in f["keys"]]
    assert found and "310-digit integer" in found[0]["message"]


def test_an_emoji_key_written_as_a_json_surrogate_pair(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"trainer": {"\\ud83d\\ude00": 1, "lone": "\\ud83d"}}')
    result = run("check", str(path), "--format", "json")
    assert result.exit_code in (0, 1), result.output
    messages = " ".join(f["message"] for f in _findings(result.output))
    assert "trainer.\U0001F600" in messages


def test_a_utf16_config_json_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(json.dumps({"actor_rollout_ref": {"actor": {"optim": {"lr": 3e-6}}}}).encode("utf-16"))
    assert load_config(path).get(LR) == 3e-6


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_non_finite_gpu_memory_is_refused(value: str) -> None:
    result = run("check", SCRIPT, "--gpu-memory-gib", value)
    assert result.exit_code == 2 and "not a finite number" in result.output


def test_temperature_from_an_undefined_variable_is_no_internal_error(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\npython3 -m verl.trainer.main_ppo "
                      "actor_rollout_ref.rollout.val_kwargs.do_sample=True "
                      "actor_rollout_ref.rollout.temperature=$T data.train_batch_size=64\n")
    result = run("check", str(script), "--format", "json")
    assert result.exit_code in (0, 1), result.output
    ids = {f["id"] for f in _findings(result.output)}
    assert "A009" not in ids  # the temperature is unknown, not 0
    assert codes.WRONG_TYPE.id in ids


def test_a_billion_laughs_yaml_saved_as_json_is_one_error_fast(tmp_path: Path) -> None:
    laughs = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        laughs += f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n"
    path = tmp_path / "config.json"
    path.write_text(laughs)
    started = time.monotonic()
    result = run("check", str(path))
    assert time.monotonic() - started < 30
    _one_line_exit_2(result, "expands to more than")


def test_unknown_keys_beyond_the_cap_are_summarised(tmp_path: Path) -> None:
    path = tmp_path / "wide.yaml"
    path.write_text("trainer:\n" + "".join(f"  unknown_key_{i}: {i}\n" for i in range(1500)))
    cfg = load_config(path)
    unknown = [f for f in cfg.findings if f.id == codes.UNKNOWN_KEY.id]
    assert len(unknown) == 201  # 200 one by one, then one line for the rest
    assert unknown[-1].message.startswith("1,300 more keys are not in verl")


def _console(n: int = 12) -> str:
    return "".join(f"step:{s} - actor/entropy:0.5 - critic/score/mean:{s / 10:.3f}\n" for s in range(1, n + 1))


def _jsonl(n: int = 12) -> str:
    return "".join(json.dumps({"step": s, "data": {"actor/entropy": 0.5, "critic/score/mean": s / 10}}) + "\n"
                   for s in range(1, n + 1))


@pytest.mark.parametrize("body", [_console(), _jsonl()])
def test_a_nul_run_left_by_copytruncate_is_read_past(body: str, tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    path.write_bytes(b"\x00" * 5000 + body.encode())
    frame = load_metrics(path)
    assert list(frame.steps) == list(range(1, 13))


@pytest.mark.parametrize(("data", "named"), [
    (("\ufeff" + _console().replace("\n", "\r\n")).encode("utf-16-le"), "UTF-16"),
    (_console().replace("\n", "\r").encode(), "CR-only line ends"),
    (b"\x00" * 70000, "NUL bytes"),
])
def test_log_shapes_the_readers_do_not_take_are_named(data: bytes, named: str, tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    path.write_bytes(data)
    with pytest.raises(MetricsError, match=named):
        load_metrics(path)


@pytest.mark.parametrize("name", SPECIAL)
def test_a_special_file_followed_by_watch_is_one_line(name: str, fifo: str) -> None:
    path = _special(name, fifo)
    _one_line_exit_2(run("watch", SCRIPT, path, "--idle-stop", "0.05"), path, "not a regular file")


def test_watch_still_waits_for_a_file_to_appear(tmp_path: Path) -> None:
    result = run("watch", SCRIPT, str(tmp_path / "not-yet.jsonl"), "--idle-stop", "0.02")
    assert result.exit_code == 0, result.output
