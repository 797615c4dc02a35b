"""Reading a running trial's metrics: verl's file-logger JSONL and console lines, incrementally."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeps._tail import MetricsTail, parse_console_line, parse_jsonl_line
from sweeps.sandbox import console_line, jsonl_line

SCORE = "critic/score/mean"


def _write(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as fp:
        fp.write(text)


def test_jsonl_tail_reads_only_complete_lines_and_continues(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    tail = MetricsTail(path, "jsonl", [SCORE])
    assert tail.poll() is False  # not created yet
    line1 = json.dumps({"step": 1, "data": {SCORE: 0.25, "actor/lr": 1e-6}}) + "\n"
    line2 = json.dumps({"step": 2, "data": {SCORE: 0.5}})
    _write(path, line1 + line2[:10])  # the writer is half-way through line 2
    assert tail.poll() is True
    assert tail.values(SCORE) == [0.25]
    _write(path, line2[10:] + "\n")
    assert tail.poll() is True
    assert tail.values(SCORE) == [0.25, 0.5] and tail.last_step == 2
    assert "actor/lr" in tail.seen


def test_jsonl_tail_starts_over_when_the_file_is_truncated(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    tail = MetricsTail(path, "jsonl", [SCORE])
    _write(path, "".join(json.dumps({"step": s, "data": {SCORE: s / 10}}) + "\n" for s in (1, 2, 3)))
    tail.poll()
    path.write_text(json.dumps({"step": 1, "data": {SCORE: 0.9}}) + "\n")  # verl reopened it with "wb"
    tail.poll()
    assert tail.values(SCORE) == [0.9]


def test_null_values_and_step_zero_are_not_objective_values(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _write(path, '{"step":0,"data":{"critic/score/mean":0.1}}\n{"step":1,"data":{"critic/score/mean":null}}\n'
                 '{"step":2,"data":{"critic/score/mean":0.3}}\nnot json\n')
    tail = MetricsTail(path, "jsonl", [SCORE])
    tail.poll()
    assert tail.values(SCORE) == [None, 0.3]
    assert tail.steps(SCORE) == [1, 2]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param("step:3 - critic/score/mean:np.float64(0.4375) - actor/lr:1e-06 - training/epoch:np.int64(0)",
                     (3, {SCORE: 0.4375, "actor/lr": 1e-6, "training/epoch": 0.0}), id="numpy-reprs"),
        pytest.param("\x1b[36m(TaskRunner pid=1234)\x1b[0m step:7 - critic/score/mean:0.5 - x/flag:True",
                     (7, {SCORE: 0.5, "x/flag": 1.0}), id="ray-prefix-ansi"),
        pytest.param("step:2 - actor/pg_loss:nan - val-core/openai/gsm8k/reward/mean@1:0.125",
                     (2, {"actor/pg_loss": None, "val-core/openai/gsm8k/reward/mean@1": 0.125}), id="nan-and-at"),
        pytest.param("step:4 - critic/score/mean:0.250", (4, {SCORE: 0.25}), id="v0.4-format"),
    ],
)
def test_console_lines(line: str, expected: tuple[int, dict[str, float | None]]) -> None:
    assert parse_console_line(line) == expected


@pytest.mark.parametrize("line", ["", "Creating file logger at x", "(WorkerDict pid=3) step is slow", "steps:3 - a:1"])
def test_console_non_metric_lines_are_skipped(line: str) -> None:
    assert parse_console_line(line) is None


def test_the_sandbox_output_formats_parse_back() -> None:
    import numpy as np

    data = {SCORE: np.float64(0.375), "actor/lr": 1e-6, "response_length/mean": np.float32(9.5)}
    assert parse_console_line(console_line(data, 5)) == (5, {SCORE: 0.375, "actor/lr": 1e-6,
                                                             "response_length/mean": 9.5})
    assert parse_jsonl_line(jsonl_line(data, 5)) == (5, {SCORE: 0.375, "actor/lr": 1e-6,
                                                         "response_length/mean": 9.5})
