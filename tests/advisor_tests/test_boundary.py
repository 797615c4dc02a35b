"""The CLI's boundary: bad or hostile input is one line naming the file and exit 2, never a traceback.

Each case is a minimised input from issue 18's fuzzing that once ended in a Python traceback, a hang or a
multi-gigabyte blow-up.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advisor.cli import EXIT_INTERNAL, main

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "examples" / "check" / "grpo_qwen2.5-7b_gsm8k.sh")


def advisor(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``advisor ARGS`` through main() (the boundary itself), in this process."""
    monkeypatch.setattr(sys, "argv", ["advisor", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    out, err = capsys.readouterr()
    code = exit_.value.code
    return (code if isinstance(code, int) else 0), out, err


def one_line_error(code: int, err: str, name: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert name in lines[0], lines[0]
    return lines[0]


YAML_CASES = {
    # name: (text, what the line says, the line number it names)
    "deep": ("a: " + "[" * 2000 + "]" * 2000 + "\n", "nested deeper than 64 levels", 1),
    "self_alias": ("trainer:\n  x: &a [*a]\n", "self-reference", 2),
    "big_int": ("trainer:\n  total_epochs: " + "9" * 5000 + "\n", "an integer of 5,000 digits", 2),
    "bad_float": ("trainer:\n  total_epochs: !!float x\n", "'x' is not a valid !!float", 2),
    "timestamp": ("trainer:\n  experiment_name: !!timestamp 2001-12-14t21:59:43.10-05:00\n", "!!timestamp", 2),
    "bad_timestamp": ("trainer:\n  experiment_name: !!timestamp xyz\n", "'xyz' is not a valid !!timestamp", 2),
}


@pytest.mark.parametrize("case", sorted(YAML_CASES))
def test_unreadable_yaml_is_one_line_naming_file_and_line(case: str, tmp_path: Path, monkeypatch, capsys) -> None:
    text, says, line = YAML_CASES[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    code, _, err = advisor(monkeypatch, capsys, "check", str(path))
    line_text = one_line_error(code, err, f"{path}:{line}:")
    assert says in line_text


def test_billion_laughs_is_refused_fast(tmp_path: Path, monkeypatch, capsys) -> None:
    """Nine levels of nine aliases (under 600 bytes) expand to 9^9 = 387,420,489 values."""
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    previous = "a"
    for name in "bcdefghi":
        text += f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]\n"
        previous = name
    assert len(text) < 600
    path = tmp_path / "laughs.yaml"
    path.write_text(text)
    code, _, err = advisor(monkeypatch, capsys, "check", str(path))
    assert "expands to more than 1,000,000 values" in one_line_error(code, err, str(path))


def test_hydra_overrides_file_nested_too_deep(tmp_path: Path, monkeypatch, capsys) -> None:
    hydra = tmp_path / "run" / ".hydra"
    hydra.mkdir(parents=True)
    (hydra / "config.yaml").write_text("trainer:\n  total_epochs: 1\n")
    (hydra / "overrides.yaml").write_text("- " + "[" * 2000 + "\n")
    code, _, err = advisor(monkeypatch, capsys, "check", str(tmp_path / "run"))
    one_line_error(code, err, "overrides.yaml:1")


def test_config_past_the_size_limit_is_refused_before_reading(tmp_path: Path, monkeypatch, capsys) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as fh:  # sparse: 17 MiB without writing them
        fh.truncate(17 * 2**20)
    code, _, err = advisor(monkeypatch, capsys, "check", str(path))
    assert "the limit is 16 MiB" in one_line_error(code, err, str(path))


def test_override_with_an_integer_past_python_limit(monkeypatch, capsys) -> None:
    code, _, err = advisor(monkeypatch, capsys, "check", SCRIPT, "trainer.total_epochs=" + "9" * 5000)
    line = one_line_error(code, err, "command line")
    assert "Exceeds the limit (4300 digits)" in line and len(line) < 300


@pytest.mark.parametrize("override", [
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=0",  # ZeroDivisionError in B006 once
    "actor_rollout_ref.actor.ppo_mini_batch_size=0",
    "actor_rollout_ref.rollout.n=0",  # ZeroDivisionError in B005 once
    "data.train_batch_size=-3",
    "trainer.n_gpus_per_node=0",
])
def test_a_zero_or_negative_size_is_an_error_finding(override: str, monkeypatch, capsys) -> None:
    code, out, err = advisor(monkeypatch, capsys, "check", SCRIPT, override)
    assert code == 1, err
    key, value = override.split("=")
    assert f"B012 {key} is {value}" in out


@pytest.mark.parametrize("override", ["data.train_batch_size=" + "9" * 4000, "data.max_response_length=" + "9" * 400])
def test_an_absurd_size_is_an_error_finding_and_the_memory_estimate_survives(override: str, monkeypatch,
                                                                            capsys) -> None:
    code, out, err = advisor(monkeypatch, capsys, "check", SCRIPT, "--gpu", "H100-80GB", override)
    assert code == 1, err
    assert f"B012 {override.split('=')[0]} is a number of" in out


def test_a_300_character_model_path_is_an_unknown_model(monkeypatch, capsys) -> None:
    """Path('a' * 300 + '/config.json').is_file() raises ENAMETOOLONG instead of answering False."""
    code, _, err = advisor(monkeypatch, capsys, "check", SCRIPT, "--gpu", "H100-80GB",
                           "actor_rollout_ref.model.path=" + "a" * 300)
    assert code in (0, 1), err
    assert "Traceback" not in err


def test_a_300_character_file_name_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    name = str(tmp_path / ("a" * 300 + ".yaml"))
    code, _, err = advisor(monkeypatch, capsys, "check", name)
    assert "File name too long" in one_line_error(code, err, "characters")


def test_an_internal_error_has_its_own_exit_code_and_a_debug_hint(monkeypatch, capsys) -> None:
    import advisor._check_report as check_report

    def broken(*args, **kwargs):
        raise ZeroDivisionError("integer modulo by zero")

    monkeypatch.setattr(check_report, "check", broken)
    code, _, err = advisor(monkeypatch, capsys, "check", SCRIPT)
    assert code == EXIT_INTERNAL == 3
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "internal error (ZeroDivisionError" in lines[0] and "--debug" in lines[0]
    assert SCRIPT in lines[0]
    with pytest.raises(ZeroDivisionError):  # --debug: the traceback
        monkeypatch.setattr(sys, "argv", ["advisor", "--debug", "check", SCRIPT])
        main()
