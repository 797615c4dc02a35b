"""The CLI's boundary: bad or hostile input is one line naming the file and exit 2, never a traceback.

Each case is a minimised input from issue 18's fuzzing that once ended in a Python traceback, a hang or a
multi-gigabyte blow-up.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from advisor.cli import EXIT_INTERNAL, main

REPO = Path(__file__).resolve().parents[3]
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
    started = time.monotonic()
    code, _, err = advisor(monkeypatch, capsys, "check", str(path))
    assert time.monotonic() - started < 10  # it once ran past 60 s
    assert "expands to more than 1,000,000 values" in one_line_error(code, err, str(path))


def test_hydra_overrides_file_nested_too_deep(tmp_path: Path, monkeypatch, capsys) -> None:
    hydra = tmp_path / "run" / ".hydra"
    hydra.mkdir(parents=True)
    (hydra / "config.yaml").write_text("trainer:\n  total_epochs: 1\n")
    (hydra / "overrides.yaml").write_text("- " + "[" * 2000 + "\n")
    code, _, err = advisor(monkeypatch, capsys, "check", str(tmp_path / "run"))
    one_line_error(code, err, "overrides.yaml:1")


@pytest.mark.parametrize("size", [17 * 2**20, 2 * 2**30], ids=["17MiB", "2GiB"])
def test_config_past_the_size_limit_is_refused_before_reading(size: int, tmp_path: Path, monkeypatch,
                                                              capsys) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as fh:  # sparse: the size without writing it
        fh.truncate(size)
    started = time.monotonic()
    code, _, err = advisor(monkeypatch, capsys, "check", str(path))
    assert time.monotonic() - started < 10
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
    import advisor.checks as check_report

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


SCRIPT_CASES = {
    # body: what the one line says (None: the script reads, exit 0 or 1)
    "X=$((1<<(1<<34)))": None,  # 64-bit arithmetic, as bash: 1 << (2**34 mod 64) = 1, not a 2 GiB integer
    "A=xxxxxxxxxx\n" + "A=$A$A\n" * 40: "a word grows past 1 MiB",
    "A=x\n" + "A+=$A\n" * 40: "a word grows past 1 MiB",
    "A=(x y)\n" + "A=(${A[@]} ${A[@]})\n" * 40: "an array grows past 100,000 elements",
    "V0=1\n" + "".join(f"V{i}=$((V{i - 1}+V{i - 1}))\n" for i in range(1, 80)): None,  # wraps, as bash's does
}


@pytest.mark.parametrize("body", sorted(SCRIPT_CASES), ids=range(len(SCRIPT_CASES)))
def test_script_variables_and_arithmetic_are_bounded(body: str, tmp_path: Path, monkeypatch, capsys) -> None:
    path = tmp_path / "run.sh"
    path.write_text(f"#!/bin/bash\n{body}\npython3 -m verl.trainer.main_ppo trainer.total_epochs=1\n")
    code, _, err = advisor(monkeypatch, capsys, "check", str(path))
    says = SCRIPT_CASES[body]
    if says is None:
        assert code in (0, 1) and "Traceback" not in err, err
    else:
        assert says in one_line_error(code, err, str(path))


@pytest.mark.parametrize("body", [
    "python3 -m verl.trainer.main_ppo data.train_batch_size=$T actor_rollout_ref.actor.ppo_mini_batch_size=$T",
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=$T "
    "actor_rollout_ref.rollout.n=${T}",
    "X=$(($T > 2 ? 1 : 0))\nif [ $T -gt 2 ]; then N=4; fi\n"
    "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$N data.train_batch_size=$((T*2))",
], ids=["sizes", "micro-batch-and-n", "compared"])
def test_an_undefined_variable_where_a_number_is_compared_is_not_a_crash(body: str, tmp_path: Path, monkeypatch,
                                                                          capsys) -> None:
    # `$T` never set: the checks that compare or divide sizes once raised TypeError on the unresolved text
    path = tmp_path / "run.sh"
    path.write_text(f"#!/bin/bash\n{body}\n")
    code, out, err = advisor(monkeypatch, capsys, "check", str(path))
    assert code in (0, 1), err
    assert "Traceback" not in err and "$T" in out


def test_bash_arithmetic_wraps_at_64_bits() -> None:
    from advisor.load._script import arith_eval

    # bash 5 on x86-64: echo $((1<<(1<<34))) $((2**64)) $((9223372036854775807+1)) $((-7/2)) $((1<<-1))
    assert [arith_eval(e, {}) for e in ("1<<(1<<34)", "2**64", "9223372036854775807+1", "-7/2", "1<<-1")] == \
        [1, 0, -2**63, -3, -2**63]


def test_self_referencing_resolver_does_not_hang(monkeypatch, capsys) -> None:
    started = time.monotonic()
    code, out, err = advisor(monkeypatch, capsys, "check", SCRIPT, "data.train_batch_size=${oc.dict.values:data}")
    assert time.monotonic() - started < 10
    assert code == 1 and "'data.train_batch_size' is '${oc.dict.values:data}'" in out, err


@pytest.mark.parametrize("fmt", ["text", "json", "yaml", "overrides"])
def test_no_environment_value_reaches_check_output(fmt: str, monkeypatch, capsys) -> None:
    canary = "canary-b41d-do-not-print"
    monkeypatch.setenv("ADVISOR_TEST_CANARY", canary)
    code, out, err = advisor(monkeypatch, capsys, "check", SCRIPT, "--format", fmt,
                             "actor_rollout_ref.actor.optim.lr=${oc.env:ADVISOR_TEST_CANARY}",
                             "data.train_batch_size=${oc.env:ADVISOR_TEST_CANARY,512}",
                             "trainer.experiment_name=x_${oc.env:ADVISOR_TEST_CANARY}")
    assert code in (0, 1), err
    assert canary not in out + err


def test_no_environment_value_reaches_suggest_output(tmp_path: Path, monkeypatch, capsys) -> None:
    canary = "canary-9e2c-do-not-print"
    monkeypatch.setenv("ADVISOR_TEST_CANARY", canary)
    metrics = REPO / "examples" / "lr_too_high" / "metrics.jsonl"
    for fmt in ("text", "json"):
        code, out, err = advisor(monkeypatch, capsys, "suggest", str(REPO / "examples" / "lr_too_high" / "run.sh"),
                                 str(metrics), "--format", fmt,
                                 "actor_rollout_ref.actor.optim.lr=${oc.env:ADVISOR_TEST_CANARY}",
                                 "trainer.experiment_name=${oc.env:ADVISOR_TEST_CANARY}")
        assert code == 0, err
        assert canary not in out + err


def test_a_jsonl_key_that_is_not_utf8_skips_its_line(tmp_path: Path, monkeypatch, capsys) -> None:
    metrics = tmp_path / "metrics.jsonl"
    good = b"".join(b'{"step": %d, "data": {"actor/entropy": 0.5, "critic/score/mean": 0.5}}\n' % i
                    for i in range(1, 100))
    metrics.write_bytes(good + b'{"step": 100, "data": {"actor/pg\xff_loss": 0.1}}\n')
    code, out, err = advisor(monkeypatch, capsys, "suggest", SCRIPT, str(metrics))
    assert code == 0, err
    assert "skipped 1 unreadable line (1 not JSON)" in out


def test_hostile_lines_in_a_metrics_file_are_skipped(tmp_path: Path, monkeypatch, capsys) -> None:
    # 1,000 and 100,000 '[' (json's RecursionError once), a step past int64 with a value no real step has
    lines = [b'{"step": %d, "data": {"actor/entropy": 0.5, "critic/score/mean": 0.5}}' % i for i in range(1, 60)]
    huge_step = b'{"step": 99999999999999999999, "data": {"critic/score/mean": 1e308}}'
    lines[10:10] = [b"[" * 1000, b"[" * 100_000, huge_step]
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_bytes(b"\n".join(lines) + b"\n")
    log = tmp_path / "train.log"
    log.write_text("".join(f"step:{i} - actor/entropy:0.5 - critic/score/mean:0.5\n" for i in range(1, 60))
                   + "step:99999999999999999999 - critic/score/mean:1e308\nstep:60 - " + "[" * 1000 + "\n")
    for path, says in ((metrics, "skipped 3 unreadable lines (2 not JSON, 1 no integer 'step')"),
                       (log, "skipped 2 unreadable lines (1 step out of range, 1 step line without key:value")):
        started = time.monotonic()
        code, out, err = advisor(monkeypatch, capsys, "suggest", SCRIPT, str(path), "-f", "json")
        assert time.monotonic() - started < 30
        assert code == 0, err
        data = json.loads(out)
        assert says in " ".join(data["notes"])
        assert data["metrics"]["last_step"] == 59  # the out-of-range step is not the run's last


def test_a_console_step_past_python_int_limit_is_skipped(tmp_path: Path, monkeypatch, capsys) -> None:
    log = tmp_path / "train.log"
    log.write_text("".join(f"step:{i} - actor/entropy:0.5 - critic/score/mean:0.5\n" for i in range(1, 50))
                   + "step:" + "9" * 5000 + " - actor/entropy:0.1\n")
    code, out, err = advisor(monkeypatch, capsys, "suggest", SCRIPT, str(log))
    assert code == 0, err
    assert "1 step out of range" in out


def test_metrics_the_playbook_does_not_read_name_the_file(tmp_path: Path, monkeypatch, capsys) -> None:
    metrics = tmp_path / "other.jsonl"
    metrics.write_text('{"step": 1, "data": {"foo/bar": 1.0}}\n{"step": 2, "data": {"foo/bar": 2.0}}\n')
    code, _, err = advisor(monkeypatch, capsys, "suggest", SCRIPT, str(metrics))
    assert "is one the playbook reads" in one_line_error(code, err, f"{metrics}:")
