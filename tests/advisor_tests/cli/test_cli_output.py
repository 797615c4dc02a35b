"""Text output that fits where it goes: piped output is not wrapped and has no trailing spaces; colour
only on a terminal (and never with NO_COLOR); --width wraps at N columns."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli import app

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
RUNS = sorted(p.parent for p in EXAMPLES.glob("*/metrics.jsonl"))
CONFIGS = sorted(EXAMPLES.glob("check/*")) + [run / "run.sh" for run in RUNS]
def _catalogued() -> list[str]:
    from advisor.metrics._catalog import load_catalog

    return [*sorted(load_catalog().metrics), "val-core/openai/gsm8k/reward/mean@1", "timing/gen"]


METRICS = _catalogued()


def invoke(*args: str) -> tuple[str, int]:
    result = CliRunner().invoke(app, list(args))  # CliRunner's stdout is not a terminal: piped output
    return result.stdout, result.exit_code


def assert_piped_layout(text: str, whole: list[str]) -> None:
    """No trailing space, no colour codes, and every message on one line (nothing broken inside a word)."""
    lines = text.splitlines()
    assert lines, "no output"
    assert [line for line in lines if line != line.rstrip()] == []
    assert "\x1b[" not in text
    for message in whole:
        assert any(message in line for line in lines), f"not on one line: {message!r}"


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_piped_check(config: Path) -> None:
    out, code = invoke("check", str(config))
    assert code in (0, 1)
    data = json.loads(invoke("check", str(config), "-f", "json")[0])
    found = data["errors"] + data["warnings"] + data["infos"]
    assert_piped_layout(out, [f["message"] for f in found] + data["batch"]["words"])


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_piped_suggest(run: Path) -> None:
    args = [str(run / "run.sh"), str(run / "metrics.jsonl")]
    out, code = invoke("suggest", *args)
    assert code == 0
    data = json.loads(invoke("suggest", *args, "-f", "json")[0])
    # an override's key is on one line (its value as the file spells it when shown as an edit: 5e-7, not 5e-07)
    # (a harm or an envelope place another finding already stated is pointed at, not repeated: the text before it is
    # what is compared)
    texts = [d["summary"].split("; harm: ")[0].split("; envelope: ")[0] for d in data["diagnoses"]]
    texts += [o.split("=", 1)[0] for o in data["overrides"]]
    assert_piped_layout(out, texts)


@pytest.mark.parametrize("metric", METRICS)
def test_piped_explain(metric: str) -> None:
    out, code = invoke("explain", metric)
    assert code == 0
    data = json.loads(invoke("explain", metric, "-f", "json")[0])
    assert_piped_layout(out, [t for t in (data["formula"], data["meaning"], data["notes"]) if t])


@pytest.mark.parametrize("args", [["check", str(EXAMPLES / "check" / "ppo_broken.yaml")],
                                  ["suggest", str(RUNS[0] / "run.sh"), str(RUNS[0] / "metrics.jsonl")],
                                  ["explain", "actor/ppo_kl"]], ids=lambda a: a[0])
def test_width_wraps_at_n_columns(args: list[str]) -> None:
    wide, _ = invoke(*args)
    narrow, _ = invoke(*args, "--width", "60")
    assert max(len(line) for line in wide.splitlines()) > 60  # so the limit below is a real one
    assert max(len(line) for line in narrow.splitlines()) <= 60
    assert [line for line in narrow.splitlines() if line != line.rstrip()] == []
    # the same words, only wrapped differently (a table too wide for N columns shortens its cells instead)
    def words(text: str) -> str:
        return "".join("".join(line.split()) for line in text.splitlines() if not set(line) & set("┃│━─"))

    assert words(wide) == words(narrow)


def test_paths_are_printed_as_written(tmp_path: Path) -> None:
    """A file name is neither rich markup nor an emoji code: '[red]' and ':fire:' stay as typed."""
    run = RUNS[0]
    config = tmp_path / "[red]run:fire:.sh"
    config.write_text((run / "run.sh").read_text())
    metrics = tmp_path / "[bold]metrics:fire:.jsonl"
    metrics.write_text((run / "metrics.jsonl").read_text())
    checked, _ = invoke("check", str(config))
    suggested, _ = invoke("suggest", str(config), str(metrics))
    assert checked.splitlines()[0].startswith(f"{config}  verl ")
    assert suggested.splitlines()[0] == f"{config} + {metrics}"
    assert "\N{FIRE}" not in checked + suggested


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("no_color", [False, True])
def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch, no_color: bool) -> None:
    from advisor.cli._render import get_console

    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    terminal = _Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    console = get_console()
    console.print("[red]error[/red] text")
    console.file.flush()
    assert ("\x1b[31m" in terminal.getvalue()) is not no_color
    piped = io.StringIO()
    monkeypatch.setattr("sys.stdout", piped)
    console = get_console()
    console.print("[red]error[/red] text")
    console.file.flush()
    assert piped.getvalue() == "error text\n"
