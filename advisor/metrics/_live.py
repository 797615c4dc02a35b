"""One record at a time, for a reader that follows a run as it is written (``advisor watch``).

The batch readers parse a whole file; these wrap the same per-line and per-event parsing, and build a
:class:`MetricFrame` from rows a follower kept, with the same renaming as :func:`load_metrics`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from ._frame import MetricFrame, MetricsFormat, ReadLog
from ._nan import LOGGED_NAN, logged
from ._records import Records

if TYPE_CHECKING:
    import numpy as np

LINE_FORMATS = ("jsonl", "flat-jsonl", "console")


def parse_metrics_line(line: bytes | str, fmt: str) -> tuple[int, dict[str, float]] | None:
    """One complete line of a verl ``file`` logger JSONL (``jsonl``), flat JSON lines (``flat-jsonl``) or
    console log (``console``) -> (step, {metric: value}); None for a line that is not a step record.

    NaN and null (the file logger's NaN) are ``LOGGED_NAN``, inf stays inf; a value that is not a number is left out.
    """
    if fmt == "console":
        return _console_line(line if isinstance(line, str) else line.decode("utf-8", errors="replace"))
    from ._jsonl import _number, _parse_line

    raw = line.encode("utf-8") if isinstance(line, str) else line
    parsed = _parse_line(raw, "verl" if fmt == "jsonl" else "flat")
    if not isinstance(parsed, tuple):
        return None
    step, values = parsed
    out = {}
    for name, value in values.items():
        number = _number(value)
        if number is not None and isinstance(name, str):
            out[name] = number
    return step, out


def _console_line(text: str) -> tuple[int, dict[str, float]] | None:
    from ._console import _ANSI_RE, _STEP_RE, _items

    if "step:" not in text:
        return None
    text = _ANSI_RE.sub("", text) if "\x1b" in text else text
    match = _STEP_RE.search(text.rstrip("\r\n"))
    if match is None or len(match.group(1)) > 18:
        return None
    rest = text.rstrip("\r\n")[match.end():]
    keys, texts = _items(rest, Counter(), {}, 0)
    if not keys:
        return None
    values: dict[str, float] = {}
    for key, number in zip(keys, texts, strict=True):
        try:
            values[key] = logged(float(number))
        except ValueError:
            values[key] = LOGGED_NAN
    return int(match.group(1)), values


def event_scalars(record: bytes) -> tuple[int, dict[str, float]] | None:
    """One TensorBoard event record (the bytes inside a TFRecord) -> (step, {tag: value}); None when it holds
    no scalar (the file version event, histograms, text) or cannot be decoded."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2

    from ._tensorboard import _scalar

    try:
        event = event_pb2.Event.FromString(record)
    except DecodeError:
        return None
    if not event.HasField("summary"):
        return None
    scalars = {v.tag: s for v in event.summary.value if (s := _scalar(v)) is not None}
    return (int(event.step), scalars) if scalars else None


def frame_from_rows(steps: np.ndarray, names: list[str], values: np.ndarray, *, fmt: MetricsFormat,
                    path: str) -> MetricFrame:
    """A MetricFrame from rows a follower kept (``values[i, j]``: ``names[j]`` at ``steps[i]``), read as
    :func:`load_metrics` reads a file: repeated steps merged, old metric names renamed."""
    from ._load import _frame

    return _frame(Records(steps, list(names), values), fmt, Path(path), ReadLog())
