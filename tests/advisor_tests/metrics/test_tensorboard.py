"""TensorBoard run directories as verl's tensorboard backend writes them (advisor/metrics/_tensorboard.py)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from verl_logs import run_records

from advisor.errors import MetricsError
from advisor.metrics import load_metrics

pytest.importorskip("tensorboard")
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter


def write_like_torch(run_dir: Path, records, *, start: float | None = None) -> None:
    """One event per (step, key) with a float32 ``simple_value``, as ``SummaryWriter.add_scalar`` does.

    ``start`` names the file as a launch at that unix time (``events.out.tfevents.<time>.<host>...``).
    """
    before = set(run_dir.iterdir())
    writer = EventFileWriter(str(run_dir))
    wall = start if start is not None else time.time()
    for step, data in records:
        for key, value in data.items():
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=key, simple_value=float(value))])
            writer.add_event(event_pb2.Event(wall_time=wall, step=step, summary=summary))
    writer.close()
    if start is not None:
        (written,) = set(run_dir.iterdir()) - before
        written.rename(run_dir / f"events.out.tfevents.{int(start)}.node-1.2793.0")


def float32(value: object) -> float:
    return float(np.float32(float(value)))  # type: ignore[arg-type]


def test_nested_run_directory_written_like_verl(tmp_path):
    records = run_records(8, seed=21)
    run = tmp_path / "tensorboard_log" / "gsm8k" / "qwen2.5-3b-grpo"
    run.mkdir(parents=True)
    write_like_torch(run, records)

    frame = load_metrics(tmp_path / "tensorboard_log")

    assert frame.format == "tensorboard"
    assert frame.path == str(run)
    assert frame.data.index.tolist() == list(range(9))
    for step, data in records:
        for key, value in data.items():
            got = frame.data.at[step, key]
            assert (math.isnan(got) and math.isnan(float(value))) or got == float32(value), (step, key)
    assert math.isnan(frame["actor/pg_loss"][0])  # step 0 holds only validation
    assert frame.records == 9


def test_scalars_from_tensorboards_own_writer(tmp_path):
    import tensorboard.summary as tb_summary

    writer = tb_summary.Writer(str(tmp_path))
    for step in range(1, 4):
        writer.add_scalar("actor/ppo_kl", 0.001 * step, step=step)
        writer.add_scalar("critic/score/mean", 0.25 * step, step=step)
    writer.close()

    frame = load_metrics(tmp_path)

    assert frame["actor/ppo_kl"].tolist() == [float32(0.001 * s) for s in range(1, 4)]
    assert frame["critic/score/mean"].tolist() == [0.25, 0.5, 0.75]


def test_single_event_file_can_be_passed(tmp_path):
    write_like_torch(tmp_path, [(1, {"a": 1.5}), (2, {"a": 2.5})])
    event_file = next(tmp_path.iterdir())

    assert load_metrics(event_file)["a"].tolist() == [1.5, 2.5]


def test_restarted_run_in_a_second_event_file(tmp_path):
    first = [(s, {"actor/ppo_kl": 0.01 * s}) for s in range(1, 7)]
    second = [(s, {"actor/ppo_kl": 0.5 + 0.01 * s}) for s in range(4, 9)]
    write_like_torch(tmp_path, second, start=1_700_000_500.0)  # written first, launched later
    write_like_torch(tmp_path, first, start=1_700_000_000.0)

    frame = load_metrics(tmp_path)

    assert frame.data.index.tolist() == list(range(1, 9))
    assert frame["actor/ppo_kl"][3] == float32(0.03)
    assert frame["actor/ppo_kl"][5] == float32(0.55)
    assert [(r.from_step, r.to_step, r.rows_replaced) for r in frame.restarts] == [(6, 4, 2)]


def test_event_file_cut_mid_record_loses_only_that_record(tmp_path):
    write_like_torch(tmp_path, [(s, {"a": float(s)}) for s in range(1, 6)])
    event_file = next(tmp_path.iterdir())
    event_file.write_bytes(event_file.read_bytes()[:-9])

    frame = load_metrics(tmp_path)

    assert frame["a"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert frame.lines_skipped == 1
    assert next(iter(frame.skip_reasons)).startswith("cut record at the end of the file")


def test_directory_with_two_runs_is_refused(tmp_path):
    for name in ("exp-a", "exp-b"):
        (tmp_path / "proj" / name).mkdir(parents=True)
        write_like_torch(tmp_path / "proj" / name, [(1, {"a": 1.0})])

    with pytest.raises(MetricsError, match=r"holds 2 TensorBoard runs \(proj/exp-a, proj/exp-b\); pass one"):
        load_metrics(tmp_path)


def test_events_without_scalars_only(tmp_path):
    writer = EventFileWriter(str(tmp_path))
    writer.add_event(event_pb2.Event(wall_time=1.0, step=1, summary=summary_pb2.Summary(value=[
        summary_pb2.Summary.Value(tag="text", metadata=summary_pb2.SummaryMetadata())])))
    writer.close()

    with pytest.raises(MetricsError, match="no scalar summaries found"):
        load_metrics(tmp_path)
