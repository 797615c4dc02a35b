"""One record at a time, for a reader that follows a run as it is written (``advisor watch``).

The batch readers parse a whole file; these wrap the same per-line and per-event parsing (a line: its format's
record in ``_formats``), and build a :class:`MetricFrame` from rows a follower kept, with the same renaming as
:func:`load_metrics`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ._formats import LINE_FORMATS, parse_metrics_line
from ._frame import MetricFrame, MetricsFormat, ReadLog
from ._records import Records

if TYPE_CHECKING:
    import numpy as np

__all__ = ["LINE_FORMATS", "event_scalars", "frame_from_rows", "parse_metrics_line"]


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
