"""Reproducers of the third hostile-input campaign (issue 38): the exit path, restarts, values verl skips, bounded
work, ``--write`` and ``--max``.

Each test builds its input from a verl log shape and asserts what a user sees: the exit code, the one line on
stderr, the verdict.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.errors import ExitCode

REPO = Path(__file__).resolve().parents[3]
CHECK = str(REPO / "examples" / "check" / "grpo_qwen2.5-7b_gsm8k.sh")  # a clean check: exit 0
SCRIPT = str(REPO / "examples" / "lr_too_high" / "run.sh")
METRICS = str(REPO / "examples" / "lr_too_high" / "metrics.jsonl")


def _advisor(*args: str, stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "advisor", *args], env=env, stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120)


# --- 5. the exit path --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("check", CHECK), ("suggest", SCRIPT, METRICS), ("rule", "CF001"),
                                  ("suggest", SCRIPT, METRICS, "--format", "json")])
def test_a_broken_pipe_ends_quietly_with_141(args: tuple[str, ...]) -> None:
    # the reader went away before the first write (`| head -1` after its line): every write is EPIPE
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = _advisor(*args, stdout=write_end)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (ExitCode.BROKEN_PIPE, "")


def test_a_full_disk_is_an_output_error_not_the_inputs() -> None:
    with open("/dev/full", "w") as full:
        done = _advisor("check", CHECK, stdout=full)
    assert done.returncode == ExitCode.OUTPUT_FAILED, done.stderr
    assert done.stderr.strip().splitlines() == ["advisor: cannot write the output (No space left on device)"]


def test_a_closed_stdout_is_an_output_error() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(["bash", "-c", f"'{sys.executable}' -m advisor check '{CHECK}' >&-"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == ExitCode.OUTPUT_FAILED, done.stderr
    assert done.stderr.strip().splitlines() == ["advisor: cannot write the output (standard output is closed)"]


# --- 8. --write and --max -------------------------------------------------------------------------------------


def _write_copy(tmp_path: Path) -> Path:
    path = tmp_path / "run.sh"
    path.write_bytes(Path(SCRIPT).read_bytes())
    return path


def test_write_keeps_a_hard_link(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from advisor.cli import app

    path = _write_copy(tmp_path)
    other = tmp_path / "also-run.sh"
    os.link(path, other)
    result = CliRunner().invoke(app, ["suggest", str(path), METRICS, "--write"])
    assert result.exit_code in (0, 1), result.output
    assert path.read_bytes() != Path(SCRIPT).read_bytes()  # edited...
    assert other.read_bytes() == path.read_bytes()  # ... and both names still see the one file
    assert os.stat(path).st_ino == os.stat(other).st_ino
    assert (tmp_path / "run.sh.bak").read_bytes() == Path(SCRIPT).read_bytes()


def test_a_save_during_the_analysis_is_not_overwritten(tmp_path: Path) -> None:
    from advisor import load_config
    from advisor.checks._report import check
    from advisor.diff._edit import edit_for
    from advisor.errors import ConfigError

    path = _write_copy(tmp_path)
    cfg = load_config(path)  # the analysis reads the file ...
    saved = Path(SCRIPT).read_bytes() + b"# the user's own save\n"
    path.write_bytes(saved)  # ... the user saves while it runs ...
    edit = edit_for(cfg, list(check(cfg).changes))  # ... and the edit is made after the save
    assert edit is not None and edit.changed
    with pytest.raises(ConfigError, match="changed since it was read"):
        edit.write()
    assert path.read_bytes() == saved
    assert not (tmp_path / "run.sh.bak").exists()


def test_max_gives_an_integer_keys_values_as_integers() -> None:
    import json

    from click.testing import CliRunner

    from advisor.cli import app

    result = CliRunner().invoke(app, ["check", CHECK, "--gpu", "H100", "--max", "--format", "json"])
    rows = json.loads(result.stdout)["max"]
    counts = [r for r in rows if not r["key"].endswith("gpu_memory_utilization")]
    assert counts, rows
    for row in counts:  # micro batches and token budgets are ints in verl's config: 80, never 80.0
        for name in ("current", "largest", "limit", "typical"):
            assert row[name] is None or type(row[name]) is int, (row["key"], name, row[name])
    ratio = next(r for r in rows if r["key"].endswith("gpu_memory_utilization"))
    assert isinstance(ratio["largest"], float)


# --- 3. bounded work --------------------------------------------------------------------------------------------

_QWEN2_7B = {"model_type": "qwen2", "hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
             "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
             "max_position_embeddings": 32768}  # Qwen/Qwen2.5-7B-Instruct's config.json (its sizes)


@pytest.mark.parametrize(("key", "value", "words"), [
    ("num_attention_heads", 0, "at least 1"),
    ("num_hidden_layers", 0, "at least 1"),
    ("hidden_size", "Infinity", "not a whole number"),
    ("vocab_size", "1" * 400, "400 digits"),
    ("num_hidden_layers", 10**12, "at most"),
    ("hidden_size", -3584, "at least 1"),
    ("num_key_value_heads", "NaN", "not a whole number"),
])
def test_a_model_config_with_a_size_no_model_has_is_one_line_and_exit_2(tmp_path: Path, key: str, value: object,
                                                                        words: str) -> None:
    import json

    from click.testing import CliRunner

    from advisor.cli import app

    text = json.dumps({**_QWEN2_7B, key: 0})
    literal = value if isinstance(value, str) else json.dumps(value)  # Infinity, NaN and long ints as JSON spells them
    (tmp_path / "config.json").write_text(text.replace(f'"{key}": 0', f'"{key}": {literal}'))
    result = CliRunner().invoke(app, ["check", CHECK, "--gpu", "H100", "--model-config",
                                      str(tmp_path / "config.json")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and words in lines[0] and "config.json" in lines[0], lines


def _printed(tree: dict, prefix: str = "(TaskRunner pid=101) ") -> list[str]:
    import pprint

    return [prefix + line for line in pprint.pformat(tree).splitlines()]  # verl/trainer/main_ppo.py's print


_TREE = {"actor_rollout_ref": {"actor": {"optim": {"lr": 1e-06}, "ppo_mini_batch_size": 64},
                               "model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"}, "rollout": {"n": 5}},
         "algorithm": {"adv_estimator": "grpo"}, "data": {"train_batch_size": 256, "max_response_length": 512}}


def test_3000_crafted_printed_dict_lines_are_searched_in_linear_time(tmp_path: Path) -> None:
    from advisor.load import find_printed_config

    # every line opens a config and closes a nested dict: the old search parsed each start up to 4,000 lines on,
    # at every closing brace (no answer in 100 s); a linear search reads each line a bounded number of times
    crafted = ["(TaskRunner pid=101) {'actor_rollout_ref': {'a': {'b': 1}}" for _ in range(3000)]
    counted = {"calls": 0}
    import ast

    real = ast.literal_eval

    def counting(text: str) -> object:
        counted["calls"] += 1
        return real(text)

    lines = [*crafted, *_printed(_TREE)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ast, "literal_eval", counting)
        found = find_printed_config(lines)
    assert found is not None and found.tree is not None
    assert found.tree["data"]["train_batch_size"] == 256
    assert counted["calls"] <= len(lines)  # at most one parse per candidate start, never one per closing brace


def test_a_log_appended_across_a_relaunch_takes_the_last_printed_config(tmp_path: Path) -> None:
    from advisor.load import load_config_from_log

    second = {**_TREE, "actor_rollout_ref": {**_TREE["actor_rollout_ref"],
                                             "actor": {"optim": {"lr": 5e-07}, "ppo_mini_batch_size": 64}}}
    steps = [f"(TaskRunner pid=101) step:{s} - actor/pg_loss:0.1 - critic/score/mean:0.5" for s in range(1, 6)]
    log = tmp_path / "run.log"
    log.write_text("\n".join([*_printed(_TREE), *steps, *_printed(second, "(TaskRunner pid=202) "), *steps]) + "\n")
    cfg = load_config_from_log(log)
    assert cfg.get("actor_rollout_ref.actor.optim.lr") == 5e-07  # the relaunch's own, not the first run's 1e-06
    assert cfg.from_log.line == len(_printed(_TREE)) + len(steps) + 1


def test_a_relaunch_config_past_the_head_of_a_long_log_is_found(tmp_path: Path, monkeypatch) -> None:
    from advisor.load import _from_log, load_config_from_log

    monkeypatch.setattr(_from_log, "_HEAD_BYTES", 4096)  # a small head stands for 16 MiB
    monkeypatch.setattr(_from_log.limits, "LOG_SCAN_CHUNK", 1000)  # a start split across chunks too
    second = {**_TREE, "data": {"train_batch_size": 128, "max_response_length": 512}}
    filler = [f"(TaskRunner pid=101) step:{s} - actor/pg_loss:0.1" for s in range(1, 400)]
    log = tmp_path / "run.log"
    lines = [*_printed(_TREE), *filler, *_printed(second, "(TaskRunner pid=202) "), *filler[:3]]
    log.write_text("\n".join(lines) + "\n")
    cfg = load_config_from_log(log)
    assert cfg.get("data.train_batch_size") == 128
    assert cfg.from_log.line == len(_printed(_TREE)) + len(filler) + 1


def test_a_long_last_line_of_a_console_log_is_read_in_bounded_pieces(tmp_path: Path) -> None:
    import resource

    from advisor.metrics import load_metrics

    log = tmp_path / "run.log"
    steps = [f"(TaskRunner pid=101) step:{s} - actor/pg_loss:0.1 - critic/score/mean:0.5" for s in range(1, 1001)]
    log.write_text("\n".join(steps) + "\n")  # more than the 64 KiB the format is told from
    tail = 256 << 20  # logrotate's NUL run under a writer that kept its offset, with no newline after it
    with log.open("ab") as fh:
        fh.truncate(log.stat().st_size + tail)  # sparse: no disk used
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    frame = load_metrics(str(log))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert len(frame.steps) == 1000
    assert grown_mib < 64, grown_mib  # reading the line whole would hold all 256 MiB (and its decoded copy)


# --- 2. restarts are first-class ---------------------------------------------------------------------------------


def _suggest_json(*args: str) -> dict:
    import json

    from click.testing import CliRunner

    from advisor.cli import app

    result = CliRunner().invoke(app, ["suggest", *args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _ids(doc: dict) -> set[str]:
    return {d["id"] for d in doc["diagnoses"] if d["severity"] == "error"}


def test_a_relaunchs_validation_only_row_appended_keeps_the_runs_verdict(tmp_path: Path) -> None:
    # issue 38: the CF001 run turned into "No change", judged on a 1-step window, after a relaunch appended its
    # trainer.val_before_train row (step 0, validation metrics only) to the metrics file
    metrics = tmp_path / "metrics.jsonl"
    original = Path(METRICS).read_bytes()
    first_row = original.split(b"\n", 1)[0]  # the run's own step-0 validation row: the same shape verl appends
    metrics.write_bytes(original + first_row + b"\n")
    before, after = _suggest_json(SCRIPT, METRICS), _suggest_json(SCRIPT, str(metrics))
    assert "CF001" in _ids(before)
    assert _ids(after) == _ids(before)
    assert [c["key"] for c in after["changes"]] == [c["key"] for c in before["changes"]]


def _steps_frame(steps: list[int], tmp_path: Path, name: str = "m.jsonl"):
    import json

    from advisor.metrics import load_metrics

    path = tmp_path / name
    path.write_text("".join(json.dumps({"step": s, "data": {"actor/pg_loss": float(i)}}) + "\n"
                            for i, s in enumerate(steps)))
    return load_metrics(str(path))


def test_a_step_counter_that_starts_over_is_a_new_run_judged_alone(tmp_path: Path) -> None:
    frame = _steps_frame([*range(1, 301), *range(1, 51)], tmp_path)
    assert frame.steps.tolist() == list(range(1, 51))  # the relaunch alone, not 300 steps of another run
    assert frame.table.column("actor/pg_loss")[0] == 300.0  # its own first value (the 301st line)
    (restart,) = frame.restarts
    assert (restart.kind, restart.earlier_first_step, restart.from_step, restart.to_step) == ("relaunch", 1, 300, 1)
    lines = [w for w in frame.warnings if "segments" in w]
    assert len(lines) == 1 and "steps 1-300" in lines[0], frame.warnings


def test_a_resume_from_a_checkpoint_keeps_the_runs_history(tmp_path: Path) -> None:
    frame = _steps_frame([*range(1, 121), *range(101, 151)], tmp_path)
    assert frame.steps.tolist() == list(range(1, 151))
    assert frame.table.column("actor/pg_loss")[100] == 120.0  # step 101 as the resumed run logged it
    assert [r.kind for r in frame.restarts] == ["resume"]


def test_a_console_log_appended_across_a_relaunch_is_judged_on_its_last_run_and_config(tmp_path: Path) -> None:
    import json

    lines = [json.loads(x) for x in Path(METRICS).read_text().splitlines()]

    def console(rows: list[dict], pid: int) -> list[str]:
        return [f"(TaskRunner pid={pid}) step:{r['step']} - " +
                " - ".join(f"{k}:{v}" for k, v in r["data"].items() if v is not None) for r in rows]

    tree = _TREE
    second = {**tree, "data": {"train_batch_size": 128, "max_response_length": 512}}
    log = tmp_path / "run.log"
    log.write_text("\n".join([*_printed(tree), *console(lines[:200], 101), *_printed(second, "(TaskRunner pid=202) "),
                              *console(lines[:40], 202)]) + "\n")
    doc = _suggest_json(str(log))
    notes = " ".join(doc["notes"] + doc["warnings"])
    assert "segments" in notes and "steps 0-199" in notes, notes
    assert doc["window"]["last_step"] == 39  # the relaunch's own 40 steps


# --- 1. transient is not fatal -----------------------------------------------------------------------------------

HEALTHY = REPO / "examples" / "healthy_grpo"


def _with_grad_norm(tmp_path: Path, spelling: str, steps: range, console: bool) -> Path:
    """The healthy GRPO example with actor/grad_norm written as ``spelling`` on ``steps``."""
    import json

    rows = [json.loads(x) for x in (HEALTHY / "metrics.jsonl").read_text().splitlines()]
    if console:
        path = tmp_path / "run.log"
        path.write_text("".join(
            f"(TaskRunner pid=7) step:{r['step']} - " + " - ".join(
                f"{k}:{spelling if k == 'actor/grad_norm' and r['step'] in steps else v}"
                for k, v in r["data"].items() if v is not None) + "\n" for r in rows))
        return path
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": r["step"], "data": {
        k: (f"@{spelling}@" if k == "actor/grad_norm" and r["step"] in steps else v)
        for k, v in r["data"].items()}}).replace('"@', "").replace('@"', "") + "\n" for r in rows))
    return path


@pytest.mark.parametrize(("spelling", "console"), [("Infinity", False), ("NaN", False), ("null", False),
                                                   ("inf", True), ("nan", True), ("NaN", True), ("Infinity", True)])
def test_one_nonfinite_grad_norm_that_verl_skipped_is_a_note_not_an_error(tmp_path: Path, spelling: str,
                                                                         console: bool) -> None:
    # issue 38: one inf grad norm on one step of a healthy 300-step run was "error NU001 ... every step after it is
    # lost" with lr / 10; spelled NaN in a console log it was ignored instead. verl skipped that step and the
    # values after it are finite: a note, the same for every spelling and reader
    metrics = _with_grad_norm(tmp_path, spelling, range(137, 138), console)
    doc = _suggest_json(str(HEALTHY / "run.sh"), str(metrics))
    assert not [d for d in doc["diagnoses"] if d["id"] == "NU001"]
    assert doc["changes"] == []
    notes = [n for n in doc["notes"] if n.startswith("actor/grad_norm was NaN/inf")]
    assert len(notes) == 1 and "first at step 137" in notes[0] and "dp_actor.py" in notes[0], doc["notes"]


@pytest.mark.parametrize("console", [False, True])
def test_a_grad_norm_that_stays_nonfinite_is_still_an_error(tmp_path: Path, console: bool) -> None:
    metrics = _with_grad_norm(tmp_path, "NaN", range(137, 10**6), console)
    doc = _suggest_json(str(HEALTHY / "run.sh"), str(metrics))
    assert [d["severity"] for d in doc["diagnoses"] if d["id"] == "NU001"] == ["error"]


# --- 2 (first bullet). a change starts from what the run used -----------------------------------------------------

TRUNCATION = REPO / "examples" / "truncation"  # GRPO cut at max_response_length=256 (clip ratio ~0.8)


def test_a_cap_below_the_runs_lengths_never_gets_a_change_to_the_cap_that_was_truncating(tmp_path: Path) -> None:
    # the config says 128, but the run cut every long response at 256 (response_length/max = 256 on every step that
    # cut one): doubling the config's 128 would "change" it to 256, the very cap that truncated the run
    script = tmp_path / "run.sh"
    script.write_text((TRUNCATION / "run.sh").read_text().replace("data.max_response_length=256",
                                                                   "data.max_response_length=128"))
    doc = _suggest_json(str(script), str(TRUNCATION / "metrics.jsonl"))
    caps = [c["to"] for c in doc["changes"] if c["key"] == "data.max_response_length"]
    assert caps == [512], doc["changes"]  # the run's 256 x 2 (RL001's fix), from the user's 128
    assert any("256" in w and "128" in w for w in doc["warnings"]), doc["warnings"]


def test_a_ranked_alternative_never_moves_a_value_back_past_what_the_user_set() -> None:
    from advisor.findings import Change
    from advisor.playbook._crosscheck import CrossCheck

    class _Cfg:
        def get(self, key: str) -> float:
            return {"actor_rollout_ref.actor.optim.lr": 2e-6, "kl": 0.01}[key]

    from types import SimpleNamespace

    # the run logged lr 1e-5; the user already lowered it to 2e-6; an alternative at 5e-6 moves it back up
    result = SimpleNamespace(warnings=[], notes=[], decided_by=None, changes=[Change("kl", 0.01, 0.02, "x")],
                             alternatives=[[Change("actor_rollout_ref.actor.optim.lr", 1e-5, 5e-6, "x")],
                                           [Change("actor_rollout_ref.actor.optim.lr", 1e-5, 1e-6, "x")]])

    check = CrossCheck()
    check.used["actor_rollout_ref.actor.optim.lr"] = 1e-5
    check.apply(result, _Cfg())  # type: ignore[arg-type]
    assert [[(c.key, c.old, c.new) for c in alt] for alt in result.alternatives] == [
        [("actor_rollout_ref.actor.optim.lr", 2e-6, 1e-6)]]


def test_a_log_with_two_set_x_traces_takes_the_relaunchs(tmp_path: Path) -> None:
    from advisor.load import load_config_from_log

    steps = [f"(TaskRunner pid=1) step:{s} - actor/pg_loss:0.1" for s in range(1, 4)]
    log = tmp_path / "run.log"
    log.write_text("\n".join([
        "+ python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=256", *steps,
        "+ python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=64", *steps]) + "\n")
    cfg = load_config_from_log(log)
    assert (cfg.from_log.source, cfg.from_log.line, cfg.get("data.train_batch_size")) == ("trace", 5, 64)


def test_a_file_that_goes_back_on_every_row_is_split_in_linear_work(tmp_path: Path) -> None:
    from advisor import limits

    # 20,000 restarts: each described one by one would be 20,000 scans of the rows before it
    steps = [s for i in range(20_000) for s in (10_000 + i, i)]
    frame = _steps_frame(steps, tmp_path)
    assert len(frame.restarts) == limits.RESTARTS_NAMED  # described up to the cap, counted past it
    assert frame.steps.tolist()[-1] == 19_999


def test_a_relaunch_that_printed_its_config_and_only_validated_does_not_lend_its_config(tmp_path: Path) -> None:
    from advisor.load import load_config_from_log

    second = {**_TREE, "data": {"train_batch_size": 32, "max_response_length": 512}}
    steps = [f"(TaskRunner pid=101) step:{s} - actor/pg_loss:0.1 - critic/score/mean:0.5" for s in range(1, 6)]
    log = tmp_path / "run.log"
    log.write_text("\n".join([*_printed(_TREE), *steps, *_printed(second, "(TaskRunner pid=202) "),
                              "(TaskRunner pid=202) step:0 - val-core/openai/gsm8k/reward/mean@1:0.4"]) + "\n")
    cfg = load_config_from_log(log)  # the metrics judged are the first run's (the relaunch's row is set aside)
    assert cfg.get("data.train_batch_size") == 256 and cfg.from_log.line == 1
