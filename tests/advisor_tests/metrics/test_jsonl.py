"""verl's file-logger JSONL and W&B's wandb-history.jsonl (advisor/metrics/_jsonl.py)."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from verl_logs import assert_frame_matches, expected_values, jsonl_line, run_records, write_lines

from advisor.metrics import is_logged_nan, load_metrics


def test_reads_every_value_verl_0_7_wrote_including_nan_tokens(fixtures):
    frame = load_metrics(fixtures / "file_logger_v070.jsonl")

    assert frame.format == "jsonl"
    assert_frame_matches(frame.data, expected_values("file_logger_v070.jsonl"))
    assert math.isnan(frame["actor/grad_norm"][3])
    assert is_logged_nan(frame.table.column("actor/grad_norm"))[frame.steps == 3].all()  # logged, not absent
    assert frame["actor/grad_norm"][4] == math.inf  # json.dumps wrote the bare token Infinity
    assert frame.lines_read == 7 and frame.records == 7 and frame.lines_skipped == 0
    assert "jsonl_nan_tokens: <0.8.0" in frame.version_hint.evidence


def test_reads_orjson_style_lines_with_null_as_nan(fixtures):
    frame = load_metrics(fixtures / "file_logger_head.jsonl")

    assert_frame_matches(frame.data, expected_values("file_logger_head.jsonl"))
    assert math.isnan(frame["actor/grad_norm"][4])  # orjson wrote inf as null
    assert is_logged_nan(frame.table.column("actor/grad_norm"))[frame.steps == 4].all()  # logged, not absent
    assert not any(e.startswith("jsonl_nan_tokens") for e in frame.version_hint.evidence)


def test_frame_is_indexed_by_unique_sorted_int_steps_with_float_columns(fixtures):
    frame = load_metrics(fixtures / "file_logger_v070.jsonl")

    assert frame.data.index.name == "step"
    assert frame.data.index.dtype == np.int64
    assert frame.data.index.is_monotonic_increasing and frame.data.index.is_unique
    assert set(frame.data.dtypes) == {np.dtype("float64")}
    assert frame["global_seqlen/min"].dtype == np.float64  # written as ints


def test_validation_only_step_zero_stays_a_row(fixtures):
    frame = load_metrics(fixtures / "file_logger_v070.jsonl")

    first = frame.data.loc[0]
    assert first["val-core/openai/gsm8k/reward/mean@1"] == pytest.approx(
        expected_values("file_logger_v070.jsonl")[0]["val-core/openai/gsm8k/reward/mean@1"]
    )
    assert math.isnan(first["actor/pg_loss"])


def test_cut_last_line_loses_only_that_line(fixtures, tmp_path):
    text = (fixtures / "file_logger_v070.jsonl").read_text()
    cut = text[: text.rindex("actor/pg_loss")]  # the run was killed while writing step 6
    path = tmp_path / "run.jsonl"
    path.write_text(cut)

    frame = load_metrics(path)

    expected = expected_values("file_logger_v070.jsonl")
    del expected[6]
    assert_frame_matches(frame.data, expected)
    assert frame.lines_skipped == 1
    assert frame.skipped_examples == ((7, "cut last line (file still being written?)"),)


def test_complete_last_line_without_newline_is_kept(fixtures, tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text((fixtures / "file_logger_v070.jsonl").read_text().rstrip("\n"))

    frame = load_metrics(path)

    assert frame.data.index[-1] == 6 and frame.lines_skipped == 0


@pytest.mark.parametrize(
    ("garbage", "reason"),
    [
        pytest.param("Traceback (most recent call last):", "not JSON", id="traceback"),
        pytest.param('{"step": 9, "data": {"actor/pg_loss": 0.1', "not JSON", id="half-line"),
        pytest.param('\x00\x01\x02garbage\xff', "not JSON", id="binary-junk"),
        pytest.param('[1, 2, 3]', "JSON but not an object", id="array"),
        pytest.param('{"step": "x", "data": {}}', "no integer 'step'", id="string-step"),
        pytest.param('{"step": 3.5, "data": {}}', "no integer 'step'", id="float-step"),
        pytest.param('{"step": 4, "data": 7}', "no 'data' object", id="data-not-object"),
    ],
)
def test_garbage_line_is_skipped_and_counted(fixtures, tmp_path, garbage, reason):
    lines = (fixtures / "file_logger_v070.jsonl").read_text().splitlines()
    lines.insert(3, garbage)
    path = tmp_path / "run.jsonl"
    write_lines(path, lines)

    frame = load_metrics(path)

    assert_frame_matches(frame.data, expected_values("file_logger_v070.jsonl"))
    assert frame.skip_reasons == {reason: 1}
    assert frame.skipped_examples == ((4, reason),)


def test_valid_json_lines_without_step_are_skipped_with_their_line_numbers(tmp_path):
    records = run_records(4, seed=3)
    lines = [jsonl_line(s, d) for s, d in records]
    lines.insert(2, "")  # a blank line shifts the line numbers of what follows
    lines.insert(3, json.dumps({"data": {"actor/pg_loss": 1.0}}))
    lines.insert(5, json.dumps({"step": 2, "data": None}))
    path = tmp_path / "run.jsonl"
    write_lines(path, lines)

    frame = load_metrics(path)

    assert frame.data.index.tolist() == [0, 1, 2, 3, 4]
    assert [line for line, _ in frame.skipped_examples] == [4, 6]
    assert frame.lines_skipped == 2


def test_one_garbage_line_in_a_long_log_keeps_every_other_record(tmp_path):
    records = run_records(600, seed=5)
    lines = [jsonl_line(s, d) for s, d in records]
    lines.insert(333, "(TaskRunner pid=1) oops, stdout went to the metrics file")
    path = tmp_path / "run.jsonl"
    write_lines(path, lines)

    frame = load_metrics(path)

    assert frame.data.shape[0] == 601
    assert frame.skipped_examples == ((334, "not JSON"),)
    want = float(records[450][1]["actor/ppo_kl"])
    assert frame["actor/ppo_kl"][450] == want


def test_value_whose_type_changes_between_lines_is_still_read(tmp_path):
    path = tmp_path / "run.jsonl"
    write_lines(path, [
        json.dumps({"step": 1, "data": {"flag": True, "actor/pg_loss": 0.5}}),
        json.dumps({"step": 2, "data": {"flag": 3.5, "actor/pg_loss": 0.25}}),
        json.dumps({"step": 3, "data": {"flag": "text", "actor/pg_loss": 0.125}}),
    ])

    frame = load_metrics(path)

    assert frame["flag"].tolist()[:2] == [1.0, 3.5] and math.isnan(frame["flag"][3])
    assert frame["actor/pg_loss"].tolist() == [0.5, 0.25, 0.125]


def test_non_numeric_metrics_are_dropped_and_listed(tmp_path):
    path = tmp_path / "run.jsonl"
    write_lines(path, [json.dumps({"step": s, "data": {"note": "hi", "nested": {"a": 1}, "x": s}}) for s in (1, 2)])

    frame = load_metrics(path)

    assert frame.metrics == ["x"]
    assert frame.dropped_columns == ("nested", "note")


def test_restarted_run_keeps_the_later_segment_and_earlier_history(tmp_path):
    first = run_records(8, seed=1, test_freq=4)  # steps 0..8
    second = run_records(10, seed=2, test_freq=4)  # a relaunch resumed from global_step_5
    # verl validates the checkpoint before training again, logged at the checkpoint's step
    resumed = [(5, {"val-core/openai/gsm8k/reward/mean@1": 0.61, "actor/ppo_kl": 0.5}), *second[6:]]
    path = tmp_path / "run.jsonl"
    write_lines(path, [jsonl_line(s, d) for s, d in first + resumed])

    frame = load_metrics(path)

    assert frame.data.index.tolist() == list(range(11))
    assert frame["actor/ppo_kl"][4] == float(first[4][1]["actor/ppo_kl"])
    assert frame["actor/entropy"][5] == float(first[5][1]["actor/entropy"])  # step 5's training values kept
    assert frame["val-core/openai/gsm8k/reward/mean@1"][5] == 0.61  # the resumed run's validation added
    assert frame["actor/ppo_kl"][5] == 0.5  # and where both logged a metric, the later value wins
    assert frame["actor/ppo_kl"][7] == float(second[7][1]["actor/ppo_kl"])  # re-run steps replaced
    assert len(frame.restarts) == 1
    restart = frame.restarts[0]
    assert (restart.line, restart.from_step, restart.to_step, restart.rows_replaced) == (10, 8, 5, 3)


def test_reads_wandb_history_jsonl(fixtures):
    frame = load_metrics(fixtures / "wandb-history.jsonl")

    assert frame.format == "wandb-jsonl"
    assert frame.data.index.tolist() == [1, 2, 3]
    assert frame["actor/ppo_kl"].tolist() == [0.00012, 0.00015, 0.00021]
    assert math.isnan(frame["actor/pg_loss"][3])
    assert "_runtime" not in frame and "_timestamp" not in frame
    assert frame.dropped_columns == ("val/generations",)


def test_file_logger_path_with_another_extension_is_read_by_content(fixtures, tmp_path):
    path = tmp_path / "metrics.txt"
    shutil.copy(fixtures / "file_logger_v070.jsonl", path)

    assert load_metrics(path).format == "jsonl"


def test_step_beyond_int64_is_skipped(tmp_path):
    path = tmp_path / "run.jsonl"
    write_lines(path, [json.dumps({"step": 2**63 + 5, "data": {"a": 1}}), json.dumps({"step": 3, "data": {"a": 2}})])

    frame = load_metrics(path)

    assert frame.data.index.tolist() == [3]
    assert frame.skipped_examples == ((1, "no integer 'step'"),)


def _flatten_file_logger(source, path):
    """The same run as flat JSON lines: {"step": N, metric: value, ...} (what exporters write)."""
    lines = []
    for line in source.read_text().splitlines():
        record = json.loads(line)
        lines.append(json.dumps({"step": record["step"], **record["data"]}))
    write_lines(path, lines)


def test_reads_flat_json_lines_like_the_file_logger_it_was_flattened_from(fixtures, tmp_path):
    path = tmp_path / "export.jsonl"
    _flatten_file_logger(fixtures / "file_logger_v070.jsonl", path)

    frame = load_metrics(path)

    assert frame.format == "flat-jsonl"
    assert_frame_matches(frame.data, expected_values("file_logger_v070.jsonl"))
    assert "step" not in frame


def test_flat_json_lines_cut_and_garbage_lines_are_skipped(fixtures, tmp_path):
    path = tmp_path / "export.jsonl"
    _flatten_file_logger(fixtures / "file_logger_v070.jsonl", path)
    lines = path.read_text().splitlines()
    lines.insert(2, '{"actor/pg_loss": 0.5}')  # a JSON object without a step
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:25])  # killed while writing the last line

    frame = load_metrics(path)

    expected = expected_values("file_logger_v070.jsonl")
    del expected[max(expected)]
    assert_frame_matches(frame.data, expected)
    assert sorted(frame.skipped_examples) == [(3, "no integer 'step'"),
                                              (len(lines), "cut last line (file still being written?)")]


@pytest.mark.parametrize("nan", ["null", "NaN"])
def test_a_metric_a_row_lacks_is_missing_and_one_logged_as_null_or_nan_is_a_logged_nan(tmp_path, nan):
    log = tmp_path / "m.jsonl"
    log.write_text('{"step": 1, "data": {"a": 1.0, "b": 2.0}}\n'
                   f'{{"step": 2, "data": {{"a": {nan}, "v": 0.5}}}}\n'
                   '{"step": 3, "data": {"v": 0.7}}\n')
    frame = load_metrics(log)
    a, b = frame.table.column("a"), frame.table.column("b")
    assert list(is_logged_nan(a)) == [False, True, False] and math.isnan(a[2])
    assert not is_logged_nan(b).any() and np.isnan(b[1:]).all()
