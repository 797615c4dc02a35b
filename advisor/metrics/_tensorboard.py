"""TensorBoard event files, as verl's ``tensorboard`` backend writes them.

``_TensorboardAdapter`` (verl/utils/tracking.py) opens ``SummaryWriter($TENSORBOARD_DIR or
tensorboard_log/{project}/{experiment})`` and calls ``add_scalar(key, value, step)`` for every metric, so a
run directory holds ``events.out.tfevents.<time>.<host>.<pid>.<n>`` files (a new one per launch) whose
scalars are one event each. The files are TFRecords (length, CRC, ``Event`` proto, CRC); the protos are
decoded with tensorboard's own classes, so reading needs the ``tensorboard`` extra.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from advisor.errors import MetricsError, install_hint
from advisor.inputfile import require_regular

from ._frame import ReadLog
from ._records import RecordBuilder, Records

EVENT_FILE_RE = re.compile(r"events\.out\.tfevents\.")
_HEADER = struct.Struct("<QI")  # record length, masked CRC32C of the length
_FOOTER_BYTES = 4  # masked CRC32C of the data
_MAX_RECORD_BYTES = 1 << 30
_CUT = "cut record at the end of the file (still being written?)"


def event_files(run_dir: Path) -> list[Path]:
    """The event files of one run directory, oldest launch first."""
    files = [p for p in run_dir.iterdir() if p.is_file() and EVENT_FILE_RE.match(p.name)]
    return sorted(files, key=_launch_time)


def _launch_time(path: Path) -> tuple[float, str]:
    # events.out.tfevents.<unix time>.<host>...: the writer's start time
    parts = path.name.split(".")
    try:
        return float(parts[3]), path.name
    except (IndexError, ValueError):
        return math.inf, path.name


def read_tensorboard(files: Sequence[Path], *, log: ReadLog) -> Records:
    """Read the scalar summaries of ``files`` (one run, in launch order) as step records."""
    try:
        from google.protobuf.message import DecodeError
        from tensorboard.compat.proto import event_pb2
    except ImportError as err:
        raise MetricsError(
            "reading TensorBoard event files needs the tensorboard package",
            path=str(files[0].parent) if files else None,
            suggestion=install_hint("tensorboard"),
        ) from err

    builder = RecordBuilder()
    number = 0
    current: int | None = None
    for path in files:
        for offset, data in _tfrecords(path):
            number += 1
            if data is None:
                log.lines_read += 1
                log.skip(number, f"{_CUT} ({path.name} at byte {offset})")
                break
            try:
                event = event_pb2.Event.FromString(data)
            except DecodeError:
                log.lines_read += 1
                log.skip(number, f"undecodable event record ({path.name} at byte {offset})")
                continue
            scalars = [(v.tag, _scalar(v)) for v in event.summary.value] if event.HasField("summary") else []
            scalars = [(tag, value) for tag, value in scalars if value is not None]
            if not scalars:
                log.other_lines += 1  # file version, graphs, histograms, text
                continue
            log.lines_read += 1
            if event.step != current:
                builder.start(event.step, number)
                log.records += 1
                current = event.step
            for tag, value in scalars:
                builder.add(tag, value)  # type: ignore[arg-type]
    return builder.build()


def _tfrecords(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """(offset, event bytes) per record; (offset, None) for a last record that is cut short."""
    require_regular(path, MetricsError)  # an event file that is a FIFO would block
    data = path.read_bytes()
    offset = 0
    end = len(data)
    while offset < end:
        if offset + _HEADER.size > end:
            yield offset, None
            return
        length, _ = _HEADER.unpack_from(data, offset)
        stop = offset + _HEADER.size + length + _FOOTER_BYTES
        if length > _MAX_RECORD_BYTES or stop > end:
            yield offset, None
            return
        yield offset, data[offset + _HEADER.size : stop - _FOOTER_BYTES]
        offset = stop


def _scalar(value: Any) -> float | None:
    """The number in a summary value: ``simple_value`` (torch's SummaryWriter) or a scalar tensor."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor":
        return None
    tensor = value.tensor
    if any(dim.size != 1 for dim in tensor.tensor_shape.dim):
        return None
    for field in ("float_val", "double_val", "int_val", "int64_val", "bool_val"):
        items = getattr(tensor, field)
        if len(items) == 1:
            return float(items[0])
    if tensor.tensor_content:
        import numpy as np

        dtypes = {1: "<f4", 2: "<f8", 3: "<i4", 9: "<i8", 10: "?", 19: "<f2"}  # tensorflow DataType enum
        dtype = dtypes.get(tensor.dtype)
        if dtype is not None and len(tensor.tensor_content) == np.dtype(dtype).itemsize:
            return float(np.frombuffer(tensor.tensor_content, dtype=dtype)[0])
    if len(tensor.half_val) == 1:
        import numpy as np

        return float(np.array([tensor.half_val[0]], dtype=np.uint16).view(np.float16)[0])
    return None
