"""Fuzzing the boundary contract: every reader, the script interpreter, override parsing, the rule loader and
the sweep tail either read their input or raise the advisor's one-line error; through the CLI, exit 0, 1 or 2
and, for 2, exactly one line on stderr; never a traceback.

Hypothesis runs derandomized (a fixed seed: CI sees the same examples every run) with a bounded number of
examples per target, so the whole file takes seconds. Inputs mix random text with fragments of real verl
configs, scripts and logs, so that they reach past the first syntax check.
"""

from __future__ import annotations

import copy
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.errors import AdvisorError

REPO = Path(__file__).resolve().parents[3]
FUZZ = settings(derandomize=True, deadline=None, max_examples=60, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
FEW = settings(FUZZ, max_examples=15)  # targets that run a whole `advisor check` per example

KEYS = ["data.train_batch_size", "actor_rollout_ref.rollout.n", "actor_rollout_ref.actor.ppo_mini_batch_size",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.actor.optim.lr",
        "actor_rollout_ref.model.path", "trainer.n_gpus_per_node", "data.max_response_length",
        "actor_rollout_ref.rollout.name", "algorithm.adv_estimator", "trainer.logger",
        "actor_rollout_ref.actor.use_dynamic_bsz", "actor_rollout_ref.rollout.tensor_model_parallel_size"]
VALUES = ["0", "-1", "1", "7", "1e-6", "1e308", "-1e308", "nan", "inf", "true", "null", "'x'", "[1,2]",
          "{a: 1}", "$T", "${T}", "${oc.env:HOME}", "${oc.select:x,1}", "${oc.dict.values:data}", "${data}",
          "9" * 30, "9" * 5000, "a" * 300, "[" * 100, "\\", "'", '"', "${", "}", "%", "~", ""]
VALUE = st.one_of(st.sampled_from(VALUES), st.text(max_size=20))
OVERRIDE = st.builds(lambda prefix, key, value: f"{prefix}{key}={value}",
                     st.sampled_from(["", "+", "++", "~"]), st.sampled_from(KEYS), VALUE)


def _contract(code: int, err: str) -> None:
    assert code in (0, 1, 2), err
    assert "Traceback" not in err, err
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err


def _cli(*args: str) -> tuple[int, str]:
    """``advisor ARGS`` through main(), in this process; (exit code, stderr)."""
    import contextlib
    import io

    from advisor.cli import main

    err = io.StringIO()
    argv = sys.argv
    sys.argv = ["advisor", *args]
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                main()
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 0
    finally:
        sys.argv = argv
    return code, err.getvalue()


# -- overrides -----------------------------------------------------------------------------------------------------

@FUZZ
@given(st.one_of(OVERRIDE, st.text(max_size=60)))
def test_override_parsing_reads_or_raises_config_error(text: str) -> None:
    from advisor.verl._overrides import parse_override

    try:
        parse_override(text, path="command line")
    except AdvisorError as err:
        assert "\n" not in str(err)


# -- the script interpreter ----------------------------------------------------------------------------------------

SCRIPT_LINES = ["T=4", "A=$A$A", "A=${A:-x}", "X=$((T*2))", "X=$((1<<(1<<34)))", "X=$(($T > 2 ? 1 : 0))",
                "if [ $T -gt 3 ]; then A=1; fi", "if [[ $U -lt $T ]]; then A=2; else A=3; fi",
                "case $T in 1) A=1;; *) A=2;; esac", "arr=(a b $T)", "arr+=(${arr[@]})", "echo ${arr[1]}",
                "export B=${T:=5}", "unset T", "X=$(date)", "X=`hostname`", "set -x", "for i in 1 2; do A=$i; done",
                "while [ $T -lt 3 ]; do T=$((T+1)); done", "X=$((T/0))", "X=$((T%0))", "X=$((2**-1))",
                "source ./env.sh", "A='quoted $T'", 'A="dq $T ${arr[@]}"', "cat <<EOF\nbody $T\nEOF", "\\", "'", '"',
                "$((", "${", "[[", "fi", "then", "((T++))", "X=${#A}", "X=${A:?unset}", "X=${A/x/y}"]
VERL = "python3 -m verl.trainer.main_ppo"


@st.composite
def scripts(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.one_of(st.sampled_from(SCRIPT_LINES), st.text(max_size=30)), max_size=8))
    overrides = draw(st.lists(OVERRIDE, max_size=4))
    return "#!/bin/bash\n" + "\n".join(lines) + f"\n{VERL} " + " ".join(f"'{o}'" for o in overrides) + " $@\n"


@FUZZ
@given(scripts())
def test_the_script_interpreter_reads_or_raises_config_error(text: str) -> None:
    from advisor.load._script import parse_launch_script

    try:
        parse_launch_script(text, "run.sh")
    except AdvisorError as err:
        assert "\n" not in str(err)


@FEW
@given(scripts())
def test_check_on_a_fuzzed_script_keeps_the_contract(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.sh"
        path.write_text(text)
        _contract(*_cli("check", str(path)))


# -- the YAML config reader ----------------------------------------------------------------------------------------

YAML_PIECES = ["trainer:\n  total_epochs: 1\n", "data:\n  train_batch_size: 0\n", "a: &x [*x]\n", "b: !!float x\n",
               "c: !!timestamp 2001-12-14\n", "d: !!binary aGk=\n", "e: !!set {a, b}\n", "f: " + "[" * 80 + "\n",
               "g: " + "9" * 5000 + "\n", "defaults:\n  - ppo_trainer\n  - _self_\n", "hydra:\n  run: x\n",
               "actor_rollout_ref:\n  rollout:\n    n: ${oc.env:HOME}\n", "x: !!python/object/apply:os.system [ls]\n",
               "- 1\n- 2\n", "k: {a: 1, a: 2}\n", "? [1, 2]\n: v\n", "\t: tab\n", "%YAML 1.1\n---\n", "...\n"]


@FEW
@given(st.lists(st.one_of(st.sampled_from(YAML_PIECES), st.text(max_size=40)), min_size=1, max_size=5))
def test_check_on_a_fuzzed_yaml_keeps_the_contract(pieces: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text("".join(pieces))
        _contract(*_cli("check", str(path)))


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(YAML_PIECES), st.text(max_size=40)), min_size=1, max_size=5))
def test_the_bounded_yaml_loader_reads_or_raises_config_error(pieces: list[str]) -> None:
    from advisor.load._safe_yaml import load_yaml

    try:
        load_yaml("".join(pieces), path="config.yaml")
    except AdvisorError as err:
        assert "\n" not in str(err)


# -- the metrics readers -------------------------------------------------------------------------------------------

JSONL_PIECES = [b'{"step": 1, "data": {"actor/entropy": 0.5}}', b'{"step": 2, "data": {"actor/entropy": NaN}}',
                b'{"step": 99999999999999999999, "data": {}}', b'{"step": -1, "data": {"x": 1}}', b"[" * 1000,
                b'{"step": 3, "data": {"k\xff": 1}}', b'{"step": ' + b"9" * 5000 + b"}", b'{"step": 1.5}',
                b'{"step": 4, "data": {"actor/entropy": "str"}}', b'{"step": 5, "data": {"a": {"b": [1, 2]}}}',
                b'{"_step": 1, "actor/entropy": 0.1}', b'{"step": 1, "actor/entropy": 1e999}', b"", b"\x00\x01"]
CONSOLE_PIECES = [b"step:1 - actor/entropy:0.5 - critic/score/mean:np.float64(0.25)",
                  b"step:" + b"9" * 5000 + b" - a:1",
                  b"(TaskRunner pid=1) step:2 - actor/entropy:nan", b"\x1b[32mstep:3 - x:1e999\x1b[0m",
                  b"  - continuation:1", b"step:4 - " + b"k:v - " * 200, b"random output", b"step:5 - a:\xff"]
CSV_PIECES = [b"_step,actor/entropy", b"1,0.5", b"2,nan", b"x,y", b"99999999999999999999,1", b'"a,b",1', b"3"]


@FUZZ
@given(st.sampled_from([(".jsonl", JSONL_PIECES), (".log", CONSOLE_PIECES), (".csv", CSV_PIECES)]).flatmap(
    lambda kind: st.tuples(st.just(kind[0]), st.lists(st.one_of(st.sampled_from(kind[1]), st.binary(max_size=30)),
                                                     min_size=1, max_size=12))))
def test_the_metrics_readers_read_or_raise_metrics_error(case: tuple[str, list[bytes]]) -> None:
    from advisor.metrics import load_metrics

    suffix, lines = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"metrics{suffix}"
        path.write_bytes(b"\n".join(lines) + b"\n")
        try:
            load_metrics(path)
        except AdvisorError as err:
            assert "\n" not in str(err)


@FEW
@given(st.lists(st.one_of(st.sampled_from(JSONL_PIECES + CONSOLE_PIECES), st.binary(max_size=30)), min_size=1,
                max_size=12))
def test_suggest_on_fuzzed_metrics_keeps_the_contract(lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "metrics.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        _contract(*_cli("suggest", str(REPO / "examples" / "lr_too_high" / "run.sh"), str(path)))


# -- the rule loader -----------------------------------------------------------------------------------------------

def _a_rule() -> dict:
    from advisor.datafiles import knowledge_dir, load_knowledge

    first = sorted((knowledge_dir() / "rules").glob("*/*.yaml"))[0]
    return copy.deepcopy(load_knowledge(str(first.relative_to(knowledge_dir()))))


JUNK = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10),
                 st.lists(st.text(max_size=5), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(),
                                                                            max_size=3))


@FUZZ
@given(st.data())
def test_the_rule_loader_reads_or_raises_playbook_error(data: st.DataObject) -> None:
    """A rule file with a field removed, retyped or nested wrongly is one PlaybookError naming the file."""
    from advisor.playbook._rule_loader import parse_rule

    rule = _a_rule()
    for _ in range(data.draw(st.integers(1, 3))):
        target = rule
        path = data.draw(st.lists(st.sampled_from(["applies_to", "when", "fixes", "healthy", "config", "0", "all"]),
                                  max_size=2))
        for part in path:
            if isinstance(target, dict) and part in target and isinstance(target[part], (dict, list)):
                target = target[part]
            elif isinstance(target, list) and target and part == "0" and isinstance(target[0], (dict, list)):
                target = target[0]
        if isinstance(target, dict) and target:
            key = data.draw(st.sampled_from(sorted(target, key=str)))
            if data.draw(st.booleans()):
                del target[key]
            else:
                target[key] = data.draw(JUNK)
        elif isinstance(target, list) and target:
            target[0] = data.draw(JUNK)
    try:
        parse_rule(rule, Path("knowledge/rules/x/X000-fuzz.yaml"))
    except AdvisorError as err:
        assert "X000-fuzz.yaml" in str(err) and "\n" not in str(err)


# -- the sweep tail ------------------------------------------------------------------------------------------------

@FUZZ
@given(st.sampled_from(["jsonl", "console"]),
       st.lists(st.one_of(st.sampled_from(JSONL_PIECES + CONSOLE_PIECES), st.binary(max_size=40)), max_size=12),
       st.integers(1, 5))
def test_the_sweep_tail_never_raises(fmt: str, lines: list[bytes], polls: int) -> None:
    from sweeps._tail import MetricsTail

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "metrics"
        tail = MetricsTail(path, fmt, ["actor/entropy"], max_step=10)
        blob = b"\n".join(lines)
        step = max(1, len(blob) // polls)
        for start in range(0, len(blob) + 1, step):  # the trainer writes, the driver polls, in between
            with path.open("ab") as fh:
                fh.write(blob[start : start + step])
            tail.poll()
        assert all(0 <= s <= 10 for s in tail.steps("actor/entropy"))
        assert all(v is None or abs(v) < float("inf") for v in tail.values("actor/entropy"))


# -- special files in every input slot -----------------------------------------------------------------------------

def _special_file(kind: str, directory: Path) -> str:
    """A path of ``kind``: a FIFO, a device, a directory, a link to a device, a dangling link, a socket."""
    import os
    import socket

    path = directory / f"in-{kind}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    elif kind == "link-to-zero":
        path.symlink_to("/dev/zero")
    elif kind == "dangling":
        path.symlink_to(directory / "nowhere")
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    else:
        return kind  # /dev/zero, /dev/null, /dev/urandom
    return str(path)


SPECIAL_KINDS = ["fifo", "dir", "link-to-zero", "dangling", "socket", "/dev/zero", "/dev/null", "/dev/urandom"]
SLOTS = ["check CONFIG", "suggest CONFIG", "suggest METRICS", "check --model-config", "watch SOURCE"]


@FEW
@given(st.sampled_from(SPECIAL_KINDS), st.sampled_from(SLOTS))
def test_a_special_file_in_any_input_slot_is_one_line_and_no_hang(kind: str, slot: str) -> None:
    script = str(REPO / "examples" / "lr_too_high" / "run.sh")
    metrics = str(REPO / "examples" / "lr_too_high" / "metrics.jsonl")
    with tempfile.TemporaryDirectory() as tmp:
        path = _special_file(kind, Path(tmp))
        args = {"check CONFIG": ["check", path], "suggest CONFIG": ["suggest", path, metrics],
                "suggest METRICS": ["suggest", script, path],
                "check --model-config": ["check", script, "--gpu", "H100-80GB", "--model-config", path],
                "watch SOURCE": ["watch", script, path, "--idle-stop", "0.02"]}[slot]
        code, err = _cli(*args)
        _contract(code, err)
        if kind in ("fifo", "/dev/zero", "/dev/urandom", "link-to-zero", "socket") and slot != "check --model-config":
            assert code == 2, (args, err)


# -- MCP messages ---------------------------------------------------------------------------------------------------

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                      st.text(max_size=12))
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                              st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                          max_leaves=12)
MESSAGE = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "1.0", 2, None]), "id": st.one_of(st.integers(-5, 10**6), st.text(max_size=6),
                                                                          st.none(), st.lists(st.integers())),
    "method": st.sampled_from(["initialize", "ping", "tools/call", "tools/list", "x/y", ""]),
    "params": st.one_of(st.dictionaries(st.sampled_from(["name", "arguments", "x"]), JSON_VALUE, max_size=3),
                        st.lists(JSON_VALUE, max_size=3), JSON_LEAF),
    "result": JSON_VALUE, "error": JSON_VALUE})


def _mcp_line(draw: st.DrawFn) -> bytes:
    import json

    shape = draw(st.sampled_from(["message", "batch", "deep", "surrogate", "bytes", "text"]))
    if shape == "message":
        return json.dumps(draw(MESSAGE)).encode()
    if shape == "batch":
        return json.dumps(draw(st.lists(MESSAGE, max_size=4))).encode()
    if shape == "deep":
        n = draw(st.integers(50, 3000))
        return b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": ' + b'{"a": ' * n + b"1" + b"}" * (n + 1)
    if shape == "surrogate":
        return b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"x": "\\ud8' + \
            draw(st.sampled_from([b"00", b"3d", b"ff"])) + b'"}}'
    if shape == "bytes":
        return draw(st.binary(max_size=60))
    return draw(st.text(max_size=60)).encode("utf-8", "surrogatepass")


@FUZZ
@given(st.composite(_mcp_line)())
def test_every_mcp_request_with_an_id_is_passed_on_or_answered(line: bytes) -> None:
    import json

    pytest.importorskip("mcp")
    import mcp_types as types

    from advisor.cli._mcp_wire import screen

    passed, answers = screen(line, lambda m: types.jsonrpc_message_adapter.validate_python(m, by_name=False))
    for answer in answers:
        reply = json.loads(answer)
        assert reply["jsonrpc"] == "2.0" and isinstance(reply["error"]["code"], int) and "id" in reply
    if passed is not None:
        assert not answers and isinstance(json.loads(passed), dict)
        return
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return  # not JSON (or too deep to read here): answered with a parse error or an error naming its id
    requests = message if isinstance(message, list) else [message]
    ids = [m["id"] for m in requests if isinstance(m, dict) and isinstance(m.get("id"), (int, str))
           and not isinstance(m.get("id"), bool)]
    answered = [json.loads(a)["id"] for a in answers]
    assert all(i in answered for i in ids), (line, answers)


@FEW
@given(st.dictionaries(st.sampled_from(["config", "metrics", "model_config", "gpu_memory_gib", "overrides", "gpu"]),
                       st.one_of(st.sampled_from(["../x", "/etc/passwd", "/dev/zero", "examples/lr_too_high/run.sh",
                                                  float("nan"), float("inf"), 1e308, ["a=b"], None]),
                                 st.text(max_size=10)), max_size=4),
       st.sampled_from(["check", "suggest", "explain", "nope"]))
def test_an_mcp_tool_call_answers_or_raises_the_advisors_error(arguments: dict, name: str) -> None:
    pytest.importorskip("mcp")
    pytest.importorskip("jsonschema")
    from advisor.cli._mcp import call_tool

    try:
        call_tool(name, arguments, roots=[REPO / "examples"])
    except AdvisorError as err:
        assert "\n" not in str(err) and "root:x:0" not in str(err)


# -- misbehaving trainers, as the sweep driver reads them -------------------------------------------------------------

TRAINER_ACTION = st.one_of(
    st.tuples(st.just("step"), st.sampled_from([0.5, 0.25, None, "NaN", "Infinity", "-Infinity", "text"])),
    st.tuples(st.just("truncate"), st.none()), st.tuples(st.just("rotate"), st.none()),
    st.tuples(st.just("nul"), st.integers(1, 5000)), st.tuples(st.just("garbage"), st.binary(max_size=40)),
    st.tuples(st.just("poll"), st.none()))


@FUZZ
@given(st.lists(TRAINER_ACTION, max_size=25))
def test_a_misbehaving_trainer_never_breaks_the_tail(actions: list) -> None:
    """Writes, truncations, renames, NUL runs and garbage, polled in between: the tail reads, never raises, keeps
    steps in range, and names a divergence only of the objective after it was finite."""
    import os

    from sweeps._tail import MetricsTail

    metric = "critic/score/mean"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "metrics.jsonl"
        tail = MetricsTail(path, "jsonl", [metric], max_step=10)
        step, finite_written, nonfinite_after_finite = 0, False, False
        for action, arg in actions:
            if action == "step":
                step = step % 10 + 1
                value = "null" if arg is None else arg if isinstance(arg, str) and arg != "text" else \
                    '"text"' if arg == "text" else repr(arg)
                finite = isinstance(arg, float)
                nonfinite_after_finite |= finite_written and arg in (None, "NaN", "Infinity", "-Infinity")
                finite_written |= finite
                with path.open("ab") as fh:
                    fh.write(f'{{"step": {step}, "data": {{"{metric}": {value}}}}}\n'.encode())
            elif action == "truncate" and path.exists():
                os.truncate(path, 0)
                step = 0
            elif action == "rotate" and path.exists():
                os.replace(path, path.with_suffix(".1"))
                step = 0
            elif action == "nul":
                with path.open("ab") as fh:
                    fh.write(b"\x00" * arg)
            elif action == "garbage":
                with path.open("ab") as fh:
                    fh.write(arg + b"\n")
            tail.poll()
        tail.close()
        assert all(1 <= s <= 10 for s in tail.steps(metric))
        assert all(v is None or abs(v) < float("inf") for v in tail.values(metric))
        if tail.diverged is not None:
            assert nonfinite_after_finite and tail.diverged.metric == metric


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
