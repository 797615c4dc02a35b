"""The advisor CLI: exit codes, JSON shape, one-line errors."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli import app

SCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "verl_scripts" / "examples"
QWEN3 = str(SCRIPTS / "grpo_trainer" / "run_qwen3-8b.sh")
LR_TOO_HIGH = Path(__file__).resolve().parents[3] / "examples" / "lr_too_high"


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_check_json_has_the_documented_shape() -> None:
    result = run("check", QWEN3, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("verl_version", "errors", "warnings", "batch", "changes", "overrides"):
        assert key in data
    assert data["verl_version"] == "0.9.1"
    assert data["batch"]["responses_per_step"] == 1024 * 5


def test_errors_exit_1_with_a_verified_diff() -> None:
    result = run("check", QWEN3, "data.train_batch_size=1001", "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert "B001" in {e["id"] for e in data["errors"]}
    for error in data["errors"]:
        assert set(error) >= {"id", "message", "keys", "source"}
    # applying the proposed overrides gives a config without errors
    fixed = run("check", QWEN3, "data.train_batch_size=1001", *data["overrides"], "--format", "json")
    assert fixed.exit_code == 0, fixed.output
    assert json.loads(fixed.stdout)["errors"] == []


def test_text_output_mentions_batch_layers_and_changes() -> None:
    result = run("check", QWEN3, "actor_rollout_ref.rollout.n=1")
    assert result.exit_code == 0
    assert "Batch layers" in result.stdout
    assert "actor_rollout_ref.rollout.n=5" in result.stdout  # the proposed fix for GRPO with n=1


@pytest.mark.parametrize("name, content", [
    ("bad.yaml", b"data: [1, 2\n"), ("empty.yaml", b""), ("bin.yaml", b"\x00\xff\x00"),
    ("noverl.sh", b"echo hi\n"), ("m.jsonl", b'{"step": 1, "data": {}}\n'),
])
def test_unreadable_input_exits_2_with_one_line_and_no_traceback(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "advisor", "check", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("advisor: ") and str(path) in lines[0]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_missing_file_and_bad_version_exit_2(tmp_path: Path) -> None:
    assert run("check", str(tmp_path / "none.yaml")).exit_code == 2
    assert run("check", QWEN3, "--verl-version", "9.9").exit_code == 2


def _modules_loaded_by_check() -> set[str]:
    """The modules a fresh process holds after ``advisor check QWEN3 -f json``."""
    code = (f"import sys; from advisor.cli import main; sys.argv=['advisor','check',{QWEN3!r},'-f','json']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('MODULES:' + repr(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "MODULES:" in proc.stderr, proc.stderr
    return set(ast.literal_eval(proc.stderr.rsplit("MODULES:", 1)[1]))


def test_check_never_imports_heavy_libraries_nor_other_commands() -> None:
    loaded = _modules_loaded_by_check()
    assert loaded & {"optuna", "ray", "matplotlib", "plotly", "pandas", "torch", "mcp"} == set()
    commands = {m for m in loaded if m.startswith("advisor.cli.") and not m.startswith("advisor.cli._")}
    assert commands == {"advisor.cli.check"}


def test_help_lists_every_command() -> None:
    from advisor.cli._app import COMMANDS

    listed = [line.split()[0] for line in run("--help").stdout.split("Commands:")[1].splitlines() if line.strip()]
    modules = sorted(p.stem for p in (Path(__file__).resolve().parents[3] / "advisor" / "cli").glob("[!_]*.py"))
    assert listed == sorted(COMMANDS) == modules


def _entry_point(args: list[str], prelude: str = "") -> subprocess.CompletedProcess[str]:
    """``advisor ARGS`` as the installed script runs it (advisor.cli.run), with ``prelude`` run first."""
    code = f"import sys\n{prelude}\nfrom advisor.cli import run\nsys.argv = ['advisor', *{args!r}]\nrun()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


@pytest.mark.parametrize("prelude", [
    "",
    "import atexit; atexit.register(lambda: print('last words'))",
    "import threading, time; threading.Thread(target=lambda: (time.sleep(1.0), print('last words'))).start()",
], ids=["nothing-left", "exit-handler", "running-thread"])
def test_the_entry_point_exits_with_the_commands_code_and_whole_output(prelude: str) -> None:
    """run() skips the interpreter's teardown only when nothing is left to do (an exit handler runs, a thread
    finishes); either way the piped output is whole and the exit code is the command's (1: errors; 2: no input)."""
    found = _entry_point(["check", QWEN3, "data.train_batch_size=1001", "-f", "json"], prelude)
    assert found.returncode == 1
    assert found.stdout.endswith("last words\n") is bool(prelude)
    assert "B001" in {e["id"] for e in json.loads(found.stdout.removesuffix("last words\n"))["errors"]}
    missing = _entry_point(["check", "/nonexistent.yaml"], prelude)
    assert missing.returncode == 2 and missing.stderr.startswith("advisor: /nonexistent.yaml")


@pytest.mark.parametrize(("args", "collecting"), [
    (["check", QWEN3, "-f", "json"], False),
    (["explain", "actor/ppo_kl", "-f", "json"], False),
    (["suggest", str(LR_TOO_HIGH / "run.sh"), str(LR_TOO_HIGH / "metrics.jsonl"), "-f", "json"], True),
], ids=["check", "explain", "suggest"])
def test_the_collector_is_off_only_for_small_input_commands(args: list[str], collecting: bool) -> None:
    """run() turns the cyclic garbage collector off; a command that may read a long log or run for hours (suggest,
    watch, sweep, ...) turns it back on, check, explain and rule keep it off."""
    done = _entry_point(args, "import atexit, gc; atexit.register(lambda: print('collecting', gc.isenabled()))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(f"collecting {collecting}\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["sweep", "run.sh", "--param", "data.seed", "--values", "1"],
                     "advisor sweep: Missing option '--steps'. (see 'advisor sweep --help')", id="missing-option"),
        pytest.param(["check", "--gpus", "H100", "x.yaml"],
                     "advisor check: No such option '--gpus'. Did you mean '--gpu'? (see 'advisor check --help')",
                     id="misspelt-option"),
        pytest.param(["chek", "x.yaml"], "advisor: No such command 'chek'. Did you mean 'check'? "
                     "(see 'advisor --help')", id="misspelt-command"),
        pytest.param(["check", "x.yaml", "--format", "xml"], "advisor check: Invalid value for '--format' / '-f': "
                     "'xml' is not one of 'text', 'json', 'overrides', 'yaml', 'diff'. (see 'advisor check --help')",
                     id="bad-choice"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr == message + "\n" and proc.stdout == ""


def test_help_and_version_still_exit_0() -> None:
    for args in (["--version"], ["check", "--help"]):
        proc = subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stdout and proc.stderr == ""


def test_mcp_without_the_extra_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a))
    result = CliRunner().invoke(app, ["mcp"])
    assert result.exit_code == 2
    assert result.stderr == "advisor: advisor mcp needs the 'mcp' package, which is not installed; " \
        "pip install -e '.[mcp]' (from the verl-advisor checkout)\n"
