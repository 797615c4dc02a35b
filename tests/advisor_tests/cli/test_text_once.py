"""Every word said once (issue 40): over every bundled example's text output (`suggest` on each run, `check` on
each config), no sentence of ten or more words appears twice, and a verdict that proposes no change offers no
alternative change either."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli import app

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
RUNS = sorted(p.parent for p in EXAMPLES.glob("*/metrics.jsonl"))
SUGGEST = [pytest.param([str(d / "run.sh"), str(d / "metrics.jsonl")], id=f"suggest-{d.name}") for d in RUNS]
SUGGEST += [pytest.param([str(p)], id=f"suggest-{p.name}") for p in sorted(EXAMPLES.glob("published_log/*.log"))]
CHECK = [pytest.param(str(d / "run.sh"), id=f"check-{d.name}") for d in RUNS]
CHECK += [pytest.param(str(p), id=f"check-{p.name}") for p in sorted((EXAMPLES / "check").iterdir())]
SENTENCE_END = re.compile(r"(?<=[.;!?])\s+")  # a clause after ';' counts apart: "harm: ..." is its own


def _text(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--width", "1000"])  # one line per logical line: no wrapping
    assert result.exit_code in (0, 1), result.output
    return result.output


def _repeated(text: str) -> list[tuple[str, int]]:
    sentences = [s.strip() for line in text.splitlines() for s in SENTENCE_END.split(line)]
    long = [s for s in sentences if sum(bool(re.search(r"\w", w)) for w in s.split()) >= 10]
    return [(s, n) for s, n in collections.Counter(long).items() if n > 1]


@pytest.mark.parametrize("args", SUGGEST)
def test_suggest_says_each_sentence_once(args: list[str]) -> None:
    assert _repeated(_text("suggest", *args)) == []


@pytest.mark.parametrize("config", CHECK)
def test_check_says_each_sentence_once(config: str) -> None:
    assert _repeated(_text("check", config)) == []


@pytest.mark.parametrize("args", SUGGEST)
def test_no_config_change_offers_no_change(args: list[str]) -> None:
    text = _text("suggest", *args)
    if "No config change" in text or "No change" in text:
        assert "Alternatives" not in text and "Change (decided by" not in text, text
    document = json.loads(CliRunner().invoke(app, ["suggest", *args, "--format", "json"]).output)
    if document["verdict"] != "change":
        assert document["alternatives"] == [] and document["changes"] == []


def test_a_reward_that_is_all_zero_gets_no_config_change_and_nothing_else() -> None:
    # the issue's case: RW001's remedy is the reward function, so rollout.n=10 must not follow "No config change"
    ex = EXAMPLES / "reward_all_zero"
    text = _text("suggest", str(ex / "run.sh"), str(ex / "metrics.jsonl"))
    assert "No config change" in text and "rollout.n=" not in text.split("No config change", 1)[1]


def test_the_gpu_hint_is_said_once_where_it_decides() -> None:
    ex = EXAMPLES / "generation_bound"
    text = _text("suggest", str(ex / "run.sh"), str(ex / "metrics.jsonl"))
    assert "No config change" in text and text.count("pass --gpu NAME") == 1, text


def test_a_memory_share_not_known_is_shown_as_unknown_never_0_percent() -> None:
    # a phase whose risk the model cannot judge (an input missing) has no share of the GPU: unknown, not "0%"
    from types import SimpleNamespace

    from advisor.memory._results import MemoryEstimate, StageEstimate

    unknown = StageEstimate("generate", 88.6, 80.0, "unknown", {"weights": 88.6}, missing="pass --gpu NAME")
    known = StageEstimate("actor_update", 40.0, 80.0, "ok", {"weights": 40.0})
    rows = MemoryEstimate.rows(SimpleNamespace(stages=[unknown, known]))  # type: ignore[arg-type]
    assert rows[0]["percent"] is None and rows[1]["percent"] == round(100 * 40.0 / 80.0)


def test_batch_words_never_say_0_data_parallel_gpus() -> None:
    # a script whose GPU count is a variable the advisor cannot read: the count is unknown, not 0
    script = REPO / "tests" / "fixtures" / "verl_main" / "examples" / "grpo_trainer" / "run_qwen3_5_27b_fsdp.sh"
    text = _text("check", str(script))
    assert "of the 0 " not in text and "each data-parallel GPU (how many is unknown)" in text


def test_check_help_lists_every_exit_code() -> None:
    # check returns 0, 1 (errors), 2 (bad input), 3 (an internal error: main()), 74 and 141 (the output could not be
    # written, a broken pipe: advisor/cli/_output.py) and 130 (Ctrl-C: main())
    text = " ".join(CliRunner().invoke(app, ["check", "--help"]).output.split())
    for code in ("Exit 0", "1: errors found", "2: the input could not be read", "3 on an internal error",
                 "74 when the output cannot be written", "141 on a broken pipe", "130 when interrupted"):
        assert code in text, code


@pytest.mark.parametrize("command", ["calibrate", "check", "explain", "mcp", "report", "rule", "suggest", "sweep",
                                     "verify", "watch"])
def test_every_commands_help_lists_the_codes_main_returns(command: str) -> None:
    from advisor.errors import ExitCode

    text = " ".join(CliRunner().invoke(app, [command, "--help"]).output.split())
    for code in (ExitCode.BAD_INPUT, ExitCode.INTERNAL, ExitCode.INTERRUPTED):
        assert re.search(rf"\b{int(code)}\b", text), (command, int(code))


def test_the_home_note_is_off_unless_verbose() -> None:
    # $HOME is the user's home when the script runs: the note that the advisor read it literally changes no answer
    script = REPO / "tests" / "fixtures" / "verl_main" / "examples" / "grpo_trainer" / "run_qwen3_5_27b_fsdp.sh"
    assert "L009" not in _text("check", str(script))
    assert "variable 'HOME' is not defined" in _text("check", "-v", str(script))
    document = json.loads(CliRunner().invoke(app, ["check", str(script), "--format", "json"]).output)
    assert any(f["id"] == "L009" for f in document["infos"])  # the JSON keeps every finding
