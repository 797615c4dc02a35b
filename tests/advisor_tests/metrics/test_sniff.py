"""Format detection by content, not extension (advisor/metrics/_sniff.py)."""

from __future__ import annotations

import gzip
import re
import shutil

import pytest

from advisor.errors import MetricsError
from advisor.metrics import detect_format, load_metrics


@pytest.mark.parametrize(
    ("fixture", "disguise", "fmt"),
    [
        pytest.param("file_logger_v070.jsonl", "metrics.log", "jsonl", id="jsonl-as-log"),
        pytest.param("console_v070_ray.log", "metrics.jsonl", "console", id="console-as-jsonl"),
        pytest.param("wandb_api_export.csv", "history.txt", "wandb-csv", id="csv-as-txt"),
        pytest.param("wandb-history.jsonl", "history.csv", "wandb-jsonl", id="wandb-jsonl-as-csv"),
        pytest.param("console_v01_main_task.log", "run", "console", id="no-extension"),
    ],
)
def test_format_comes_from_content(fixtures, tmp_path, fixture, disguise, fmt):
    path = tmp_path / disguise
    shutil.copy(fixtures / fixture, path)

    assert detect_format(path) == (fmt, path)
    assert load_metrics(path).format == fmt


def test_forced_format_skips_detection(fixtures):
    frame = load_metrics(fixtures / "file_logger_v070.jsonl", fmt="jsonl")

    assert frame.format == "jsonl" and frame.data.shape[0] == 7


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"", "file is empty", id="empty"),
        pytest.param(b"\n\n  \n", "file is empty", id="blank"),
        pytest.param(gzip.compress(b'{"step": 1, "data": {}}\n'), "file is gzip-compressed; decompress it first",
                     id="gzip"),
        pytest.param(b"PK\x03\x04" + bytes(60), "file is a zip archive", id="zip"),
        pytest.param(bytes(range(256)) * 8, "binary data, not a metrics log", id="binary"),
        pytest.param(b":W&B\x00\x01\x02", "W&B binary run file", id="wandb-binary"),
    ],
)
def test_unreadable_files_raise_one_line_naming_the_file(tmp_path, content, message):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(content)

    with pytest.raises(MetricsError) as info:
        load_metrics(path)

    text = str(info.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text
    assert info.value.path == str(path)


def test_missing_file(tmp_path):
    with pytest.raises(MetricsError, match=r"nope\.jsonl: no such file or directory"):
        load_metrics(tmp_path / "nope.jsonl")


def test_directory_without_metrics(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")

    message = "holds no TensorBoard event files and no W&B wandb-history.jsonl"
    with pytest.raises(MetricsError, match=re.escape(message)):
        load_metrics(tmp_path)


def test_unknown_forced_format(fixtures):
    with pytest.raises(MetricsError, match="unknown metrics format 'parquet'; use one of jsonl, console"):
        load_metrics(fixtures / "file_logger_v070.jsonl", fmt="parquet")  # type: ignore[arg-type]


def test_wandb_run_directory_with_only_the_binary_file(tmp_path):
    run = tmp_path / "wandb" / "run-20250110_080000-3f9a1b2c"
    run.mkdir(parents=True)
    (run / "run-3f9a1b2c.wandb").write_bytes(b":W&B\x00\x01")

    with pytest.raises(MetricsError, match=re.escape("holds a W&B run only as a binary .wandb file; export")):
        load_metrics(tmp_path / "wandb")
