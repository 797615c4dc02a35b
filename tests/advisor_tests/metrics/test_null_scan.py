"""The reader's scan for a logged ``null`` finds it at every byte offset, without copying the log."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from advisor.metrics import load_metrics
from advisor.metrics._jsonl import _holds_null
from advisor.metrics._nan import is_logged_nan, is_missing


@pytest.mark.parametrize("before", range(9))
@pytest.mark.parametrize("after", [0, 1, 2, 3, 7])
def test_null_is_found_at_every_alignment(before: int, after: int) -> None:
    text = b"x" * before + b"null" + b"y" * after
    assert _holds_null(pa.py_buffer(text))
    assert not _holds_null(pa.py_buffer(text.replace(b"null", b"nulL")))


@pytest.mark.parametrize("text", [b"", b"n", b"nu", b"nul", b"nnul", b"ull", b"nul l"])
def test_no_null_in_short_or_partial_text(text: bytes) -> None:
    assert not _holds_null(pa.py_buffer(text))


@pytest.mark.parametrize("pad", range(4))
def test_a_logged_null_at_any_offset_reads_as_logged_nan(tmp_path: Path, pad: int) -> None:
    # orjson (verl > 0.7.0) writes a non-finite value as null; a step that lacks the key did not log it
    lines = [json.dumps({"step": s, "data": {"a" * (1 + pad): 1.0, "m": None if s == 3 else float(s)}})
             for s in range(1, 6)]
    lines.append(json.dumps({"step": 6, "data": {"a" * (1 + pad): 1.0}}))
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    column = load_metrics(path)["m"].to_numpy()
    assert is_logged_nan(column).tolist() == [False, False, True, False, False, False]
    assert is_missing(column).tolist() == [False] * 5 + [True]


def test_a_logged_null_in_a_log_past_a_mebibyte_is_found(tmp_path: Path) -> None:
    # a buffer of 1 MiB or more is scanned on a second thread while pyarrow parses it
    lines = [json.dumps({"step": s, "data": {f"m{k}": float(s + k) for k in range(40)}}) for s in range(1, 2500)]
    lines.append(json.dumps({"step": 2500, "data": {"m0": None}}))
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert path.stat().st_size >= 1 << 20
    column = load_metrics(path)["m0"].to_numpy()
    assert is_logged_nan(column).tolist() == [False] * 2499 + [True]
    assert is_missing(load_metrics(path)["m1"].to_numpy()).tolist() == [False] * 2499 + [True]


@pytest.mark.parametrize("at", [(1 << 19) - 5, (1 << 19) - 3, (1 << 19) - 2, (1 << 19) - 1, 1 << 19, (1 << 20) + 7])
def test_null_is_found_across_the_scan_stretches(at: int) -> None:
    text = bytearray(b"x" * ((1 << 20) + 64))
    text[at : at + 4] = b"null"
    assert _holds_null(pa.py_buffer(bytes(text)))
