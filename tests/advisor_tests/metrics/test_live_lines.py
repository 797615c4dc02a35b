"""The one-record-at-a-time readers a follower uses agree with the whole-file readers on the same log."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from advisor.metrics import frame_from_rows, load_metrics, parse_metrics_line


def _sandbox_records() -> list[tuple[int, dict]]:
    from sweeps.sandbox import run

    return run(["trainer.total_training_steps=4", "data.train_batch_size=64", "actor_rollout_ref.rollout.n=2",
                "actor_rollout_ref.actor.ppo_mini_batch_size=32", "+sandbox.seed=2"])


def _rows(records: list[tuple[int, dict[str, float]]]) -> tuple[np.ndarray, list[str], np.ndarray]:
    names = sorted({k for _, values in records for k in values})
    values = np.full((len(records), len(names)), np.nan)
    for i, (_, row) in enumerate(records):
        for k, v in row.items():
            values[i, names.index(k)] = v
    return np.array([s for s, _ in records]), names, values


def test_line_by_line_equals_load_metrics_for_jsonl_and_console(tmp_path: Path) -> None:
    from sweeps.sandbox import console_line, jsonl_line

    records = _sandbox_records()
    for fmt, write in (("jsonl", jsonl_line), ("console", console_line)):
        path = tmp_path / f"run.{fmt}"
        path.write_text("".join(write(data, step) + "\n" for step, data in records))
        whole = load_metrics(path)
        parsed = [parse_metrics_line(line, fmt) for line in path.read_bytes().splitlines()]
        assert all(p is not None for p in parsed)
        steps, names, values = _rows(parsed)  # type: ignore[arg-type]
        live = frame_from_rows(steps, names, values, fmt=whole.format, path=str(path))
        assert sorted(live.table.names) == sorted(whole.table.names)
        assert np.array_equal(live.table.steps, whole.table.steps)
        for name in whole.table.names:
            np.testing.assert_array_equal(live.table.column(name), whole.table.column(name), err_msg=name)


def test_frame_from_rows_renames_old_metric_names_as_load_metrics_does() -> None:
    frame = frame_from_rows(np.array([1, 2]), ["timing/gen"], np.array([[1.0], [2.0]]), fmt="jsonl", path="x")
    assert frame.metrics == ["timing_s/gen"] and frame.aliases == {"timing/gen": "timing_s/gen"}


def test_lines_that_are_not_records() -> None:
    assert parse_metrics_line(b'{"step": 1, "da', "jsonl") is None  # cut
    assert parse_metrics_line(b"[1, 2]", "jsonl") is None
    assert parse_metrics_line("Training Progress: 3%", "console") is None
    assert parse_metrics_line('{"step": 3, "loss": 0.5}', "flat-jsonl") == (3, {"loss": 0.5})
