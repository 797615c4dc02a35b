"""Bounded-memory reads (issue #18): the file streams in blocks, only the columns asked for keep their values,
and what is read is what a whole read of the file gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from verl_logs import console_line, jsonl_line, run_records, write_lines

from advisor import load_config
from advisor.metrics import MetricFrame, _jsonl, load_metrics
from advisor.playbook._suggest import suggest_run

REPO = Path(__file__).resolve().parents[3]
KEEP = {"actor/pg_loss", "critic/score/mean", "actor/entropy", "timing_s/gen", "val-core/*"}


def _lines(fmt: str) -> list[str]:
    """A 60-step verl 0.7 run with what a whole read has to get right across block boundaries: garbage lines,
    a metric that first appears at step 40, one that is never finite, an old name (``timing/gen``), a string."""
    lines = []
    for step, data in run_records(60):
        data = dict(data)
        if step:
            data["custom/never_finite"] = float("nan")
            data["timing/gen"] = data.pop("timing_s/gen", 70.0)
        if step >= 40:
            data["custom/late"] = step / 10
        if fmt == "jsonl":
            data["custom/text"] = "not a number"
            lines.append(jsonl_line(step, data))
        else:
            lines.append(f"(TaskRunner pid=42) {console_line(step, data)}")
        if step in (9, 33):
            lines.append('{"step": 5, "data": {' if fmt == "jsonl" else "step:7 - nothing here")
    return lines


@pytest.fixture(params=["jsonl", "console"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / ("run.jsonl" if request.param == "jsonl" else "run.log")
    write_lines(path, _lines(request.param))
    return path


def _same_frames(a: MetricFrame, b: MetricFrame) -> None:
    assert a.to_dict() == b.to_dict()
    assert a.metrics == b.metrics
    assert np.array_equal(a.steps, b.steps)
    assert np.array_equal(a.table.values, b.table.values, equal_nan=True)


def test_small_blocks_read_as_the_whole_file(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = load_metrics(log)
    monkeypatch.setattr(_jsonl, "_CHUNK_BYTES", 1500)  # a few lines a block: records cut at every boundary
    _same_frames(load_metrics(log), whole)
    assert "custom/late" in whole.metrics and whole.lines_skipped >= 1


def test_kept_columns_hold_the_values_of_a_full_read_and_the_rest_is_listed(log: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    full = load_metrics(log)
    monkeypatch.setattr(_jsonl, "_CHUNK_BYTES", 1500)
    part = load_metrics(log, columns=KEEP)
    kept = [m for m in full.metrics if m in KEEP or m.startswith("val-core/")]
    assert part.metrics == kept and "timing_s/gen" in kept  # logged as timing/gen: kept by its current name
    assert np.array_equal(part.table.values, full.table.block(kept), equal_nan=True)
    assert part.all_metrics == full.metrics  # the names of the others, in the order they were logged
    assert part.to_dict() == full.to_dict()  # counts, all-NaN columns, aliases, version hint, skipped lines
    assert "custom/never_finite" in part.all_nan_columns


def test_a_line_past_the_limit_is_skipped_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [jsonl_line(step, data) for step, data in run_records(20)]
    longest = max(len(line) for line in lines)
    lines.insert(7, '{"step": 7, "data": {"x": "' + "y" * 3 * longest + '"}}')
    path = tmp_path / "run.jsonl"
    write_lines(path, lines)
    monkeypatch.setattr(_jsonl, "_CHUNK_BYTES", 1024)
    monkeypatch.setattr(_jsonl, "_MAX_LINE_BYTES", 2 * longest)
    frame = load_metrics(path)
    assert frame.skipped_examples == ((8, f"line longer than {2 * longest:,} bytes"),)
    assert frame.steps.tolist() == list(range(21))  # every other line read, line numbers after it right
    assert load_metrics(path, columns=KEEP).steps.tolist() == list(range(21))


@pytest.mark.parametrize("example", ["healthy_grpo", "lr_too_high", "healthy_ppo", "truncation"])
def test_suggest_reading_the_playbook_columns_only_says_what_a_full_read_says(example: str, tmp_path: Path) -> None:
    # the example's log with two metrics no rule reads added (one never finite): the uncatalogued note, the
    # all-NaN count and the metadata come from the names, so they are the same
    source = REPO / "examples" / example / "metrics.jsonl"
    out = tmp_path / "metrics.jsonl"
    with source.open() as src, out.open("w") as dst:
        for line in src:
            record = json.loads(line)
            record["data"].update({"custom/extra": 1.0, "custom/nan": None})
            dst.write(json.dumps(record) + "\n")
    cfg = load_config(REPO / "examples" / example / "run.sh")
    projected = suggest_run(cfg, out)
    full = suggest_run(cfg, out, every_column=True)
    assert projected.to_dict() == full.to_dict()
    assert len(projected.metrics.table.names) < len(full.metrics.table.names)
    assert any("custom/extra" in note for note in projected.notes)


def test_pyarrow_parsing_in_many_blocks_reads_as_in_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pyarrow's block size decides how many chunks each column comes in (one block a core now): a table of many
    # chunks must convert to the frame one chunk gives
    path = tmp_path / "run.jsonl"
    write_lines(path, [jsonl_line(step, data) for step, data in run_records(200)])
    whole = load_metrics(path)
    monkeypatch.setattr(_jsonl, "_MIN_BLOCK_BYTES", 4096)
    monkeypatch.setattr(_jsonl.os, "cpu_count", lambda: 64)  # size // 64 < 4 KiB: blocks of 4 KiB
    assert _jsonl._pyarrow_read(_pa_buffer(path)).column(0).num_chunks > 1
    _same_frames(load_metrics(path), whole)


def _pa_buffer(path: Path):  # pyarrow imported lazily, as the reader does
    import pyarrow as pa

    return pa.py_buffer(path.read_bytes())
