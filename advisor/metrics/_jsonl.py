"""JSON-lines metric logs: verl's ``file`` logger, W&B's ``wandb-history.jsonl`` and flat JSON lines.

verl's ``FileLogger`` (verl/utils/tracking.py, since v0.6.0) writes one line per ``log`` call::

    {"step": 12, "data": {"actor/pg_loss": -0.004, "timing_s/gen": 71.3, ...}}

v0.6.0-v0.7.0 use ``json.dumps`` (NaN/inf as the bare tokens ``NaN``/``Infinity``, text mode, buffered:
a killed run leaves its last line cut); later versions use orjson (NaN/inf as ``null``). W&B's history
file holds one flat object per step with ``_step``, ``_runtime``, ``_timestamp`` and the metrics. Flat JSON
lines (``{"step": 12, "actor/pg_loss": -0.004, ...}``, as metric exporters and hand-written loggers write them)
are read the same way, with ``step`` as the step.

The whole file goes through ``pyarrow.json`` (multi-threaded, C++). When pyarrow rejects it (a garbage
line, a value whose type changes), the lines are bisected: halves pyarrow accepts stay on the fast
path, and only the bad neighbourhood is parsed line by line with :mod:`json`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._frame import ReadLog
from ._records import INT64_MAX, INT64_MIN, RecordBuilder, Records, concat_records

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

Layout = Literal["verl", "wandb", "flat"]
_STEP_KEY: dict[str, str] = {"verl": "step", "wandb": "_step", "flat": "step"}
_CUT_LINE = "cut last line (file still being written?)"
_LEAF_LINES = 64  # below this many lines, parse line by line instead of bisecting further
_MIN_BLOCK_BYTES = 1 << 20  # pyarrow's default block size
_MAX_BLOCK_BYTES = 1 << 24


def read_jsonl(path: Path, *, layout: Layout, log: ReadLog) -> Records:
    """Read a verl file-logger (``layout="verl"``), W&B history (``"wandb"``) or flat (``"flat"``) JSON-lines
    file."""
    import pyarrow as pa

    buffer = pa.memory_map(str(path)).read_buffer()
    body = _without_cut_tail(buffer, layout, log)
    if layout == "verl":
        log.features.add("jsonl_file_logger")
    try:
        records = _from_table(_pyarrow_read(body), layout, log, lambda: _nonblank_lines(body))
    except (pa.ArrowException, ValueError):  # ValueError: also a key that is not UTF-8 (UnicodeDecodeError)
        records = None
    if records is None:
        records = _read_bisecting(body, layout, log)
    return records


def _pyarrow_read(body: pa.Buffer) -> pa.Table:
    import pyarrow as pa
    import pyarrow.json as pj

    # pyarrow parses blocks in parallel; its 1 MiB default makes hundreds of chunks on a big log, and each
    # chunk costs again when the columns are flattened and converted. Aim at ~4 blocks per core.
    per_block = body.size // (4 * (os.cpu_count() or 1))
    block_size = min(max(per_block, _MIN_BLOCK_BYTES), _MAX_BLOCK_BYTES)
    return pj.read_json(
        pa.BufferReader(body),
        read_options=pj.ReadOptions(block_size=block_size),
        parse_options=pj.ParseOptions(newlines_in_values=False),
    )


def _without_cut_tail(buffer: pa.Buffer, layout: Layout, log: ReadLog) -> pa.Buffer:
    """Drop a last line that has no newline and is not a complete record (a run still writing)."""
    size = buffer.size
    if size == 0 or buffer[size - 1] == 0x0A:  # b"\n"
        return buffer
    tail_start = _last_newline(buffer) + 1
    tail = buffer.slice(tail_start).to_pybytes()
    if not tail.strip() or _parse_line(tail, layout) is not None:
        return buffer
    # line number: only computed now that it is needed
    log.lines_read += 1
    log.skip(_count_lines(buffer.slice(0, tail_start)) + 1, _CUT_LINE)
    return buffer.slice(0, tail_start)


def _last_newline(buffer: pa.Buffer) -> int:
    """Offset of the last b"\\n" in ``buffer``, or -1."""
    end = buffer.size
    window = 1 << 16
    while end > 0:
        start = max(0, end - window)
        found = buffer.slice(start, end - start).to_pybytes().rfind(b"\n")
        if found >= 0:
            return start + found
        end = start
        window *= 4
    return -1


def _count_lines(buffer: pa.Buffer) -> int:
    import numpy as np

    return int(np.count_nonzero(np.frombuffer(buffer, dtype=np.uint8) == 0x0A))


def _nonblank_lines(body: pa.Buffer) -> np.ndarray:
    """1-based numbers of the non-blank lines (pyarrow's rows), computed only when a line number is needed."""
    import numpy as np

    lines = body.to_pybytes().split(b"\n")
    return np.array([i + 1 for i, line in enumerate(lines) if line.strip()], dtype=np.int64)


def _from_table(
    table: pa.Table, layout: Layout, log: ReadLog, row_lines: Callable[[], np.ndarray]
) -> Records | None:
    """Records from a table pyarrow parsed; None when its shape needs the line-by-line reader."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    _decode_names(table.schema)  # before anything is counted: a key that is not UTF-8 sends the lines to json
    step_key = _STEP_KEY[layout]
    if step_key not in table.column_names or not pa.types.is_integer(table.schema.field(step_key).type):
        return None
    try:
        step_column = table.column(step_key).cast(pa.int64())  # uint64 beyond int64: line by line
    except pa.ArrowInvalid:
        return None
    if layout == "verl":
        if "data" not in table.column_names or not pa.types.is_struct(table.schema.field("data").type):
            return None
        valid = pc.and_(pc.is_valid(step_column), pc.is_valid(table.column("data")))
    else:
        valid = pc.is_valid(step_column)
    lines_cache: list[np.ndarray] = []

    def lines_of(rows: np.ndarray) -> np.ndarray:
        if not lines_cache:
            lines_cache.append(row_lines())
        return lines_cache[0][rows]

    log.lines_read += table.num_rows
    n_valid = pc.sum(valid.cast(pa.int64())).as_py() or 0
    if n_valid < table.num_rows:
        valid_rows = _as_numpy(valid, np.bool_)
        bad = np.flatnonzero(~valid_rows)
        reason = f"no integer '{step_key}'" if layout != "verl" else "no integer 'step' or no 'data' object"
        for line in lines_of(bad):
            log.skip(int(line), reason)
        kept_rows = np.flatnonzero(valid_rows)
        table = table.filter(valid)
        step_column = step_column.filter(valid)
        row_map: Callable[[np.ndarray], np.ndarray] = lambda idx: lines_of(kept_rows[idx])  # noqa: E731
    else:
        row_map = lines_of
    log.records += table.num_rows

    # one chunk per column: converting ~150 columns chunk by chunk costs more than this copy
    table = table.combine_chunks()
    if layout == "verl":
        flat = table.select(["data"]).flatten()
        prefix = len("data.")
    else:
        flat = table.drop_columns([c for c in table.column_names if c.startswith("_") or c == step_key])
        prefix = 0
    arrays = []
    names = []
    for name, column in zip(flat.column_names, flat.columns, strict=True):
        kind = column.type
        if pa.types.is_float64(kind):
            arrays.append(column)
        elif pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind) or (
            pa.types.is_null(kind)
        ):
            arrays.append(column.cast(pa.float64(), safe=False))  # ints beyond 2**53 round, as in json
        else:  # strings, nested objects (W&B tables/histograms), lists
            log.dropped_columns.add(name[prefix:])
            continue
        names.append(name[prefix:])
    steps = _as_numpy(step_column, np.int64)
    # one float64 column per metric (nulls become NaN), Fortran order: a metric is contiguous
    values = np.empty((len(steps), len(arrays)), dtype=np.float64, order="F")
    for j, column in enumerate(arrays):
        values[:, j] = _as_numpy(column, np.float64)
    if layout == "verl" and values.size:
        # pyarrow reads a bare NaN token as a NaN double and null as a null: more NaNs than nulls
        # means json.dumps wrote the file (verl <= 0.7.0), not orjson
        nan_counts = np.count_nonzero(np.isnan(values), axis=0)
        if np.any(nan_counts > np.array([a.null_count for a in arrays])):
            log.features.add("jsonl_nan_tokens")
    return Records(steps, names, values, line_of=row_map)


def _decode_names(schema: Any) -> None:
    """Read every field name (pyarrow keeps a key's bytes; reading one that is not UTF-8 raises ValueError)."""
    stack = list(schema)
    while stack:
        field = stack.pop()
        _ = field.name
        stack.extend(field.type.fields if hasattr(field.type, "fields") else ())


def _as_numpy(column: pa.ChunkedArray, dtype: type) -> np.ndarray:
    """A fixed-width (or boolean) column as numpy, nulls as NaN, read from its buffers.

    pyarrow's own ``to_numpy()`` imports pandas on first use (~0.25 s of CPU, half of what
    ``advisor suggest`` may take on a 1,000-step log: bench/bench_suggest.py).
    """
    import numpy as np
    import pyarrow as pa

    parts = []
    for chunk in column.chunks:
        n, buffers = len(chunk), chunk.buffers()
        data = buffers[1] if len(buffers) > 1 else None
        if data is None:  # a column of nulls only
            parts.append(np.full(n, np.nan))
            continue
        if pa.types.is_boolean(chunk.type):
            values = _bits(data, chunk.offset, n)
        else:
            width = np.dtype(dtype).itemsize
            values = np.frombuffer(data, dtype=dtype, count=n, offset=chunk.offset * width)
        if chunk.null_count:
            values = values.astype(np.float64)  # a copy: the buffer is read-only
            values[~_bits(buffers[0], chunk.offset, n)] = np.nan
        parts.append(values)
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def _bits(buffer: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """Arrow's bit-packed (least significant bit first) booleans as a numpy bool array."""
    import numpy as np

    bits = np.unpackbits(np.frombuffer(buffer, dtype=np.uint8), bitorder="little")
    return bits[offset : offset + n].astype(bool)


def _read_bisecting(body: pa.Buffer, layout: Layout, log: ReadLog) -> Records:
    """Parse what pyarrow rejected: bisect to the bad lines, keep everything else on pyarrow."""
    import numpy as np
    import pyarrow as pa

    raw = body.to_pybytes()
    physical = raw.split(b"\n")
    nonblank = [i for i, line in enumerate(physical) if line.strip()]
    parts: list[Records] = []

    def parse(lo: int, hi: int) -> None:
        if hi - lo > _LEAF_LINES:
            chunk = b"\n".join(physical[i] for i in nonblank[lo:hi]) + b"\n"
            line_numbers = np.array(nonblank[lo:hi], dtype=np.int64) + 1
            try:
                part = _from_table(_pyarrow_read(pa.py_buffer(chunk)), layout, log, lambda: line_numbers)
            except (pa.ArrowException, ValueError):  # ValueError: a key that is not UTF-8
                part = None
            if part is not None:
                parts.append(part)
                return
            mid = (lo + hi) // 2
            parse(lo, mid)
            parse(mid, hi)
            return
        builder = RecordBuilder()
        for i in nonblank[lo:hi]:
            log.lines_read += 1
            parsed = _parse_line(physical[i], layout)
            if isinstance(parsed, str) or parsed is None:
                log.skip(i + 1, parsed or "not JSON")
                continue
            step, values = parsed
            log.records += 1
            builder.start(step, i + 1)
            for name, value in values.items():
                number = _number(value)
                if number is None:
                    log.dropped_columns.add(name)
                    continue
                if layout == "verl" and value is not None and not math.isfinite(number):
                    log.features.add("jsonl_nan_tokens")
                builder.add(name, number)
        parts.append(builder.build())

    parse(0, len(nonblank))
    records = concat_records(parts) if parts else RecordBuilder().build()
    log.dropped_columns.difference_update(records.names)
    return records


def _parse_line(line: bytes, layout: Layout) -> tuple[int, dict[str, Any]] | str | None:
    """(step, {name: value}) for a good line; a reason string for a bad one; None for non-JSON."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return "JSON but not an object"
    step_key = _STEP_KEY[layout]
    step = obj.get(step_key)
    if isinstance(step, float) and step.is_integer():
        step = int(step)
    if not isinstance(step, int) or isinstance(step, bool) or not INT64_MIN <= step <= INT64_MAX:
        return f"no integer '{step_key}'"
    if layout == "verl":
        data = obj.get("data")
        if not isinstance(data, dict):
            return "no 'data' object"
        return step, data
    return step, {k: v for k, v in obj.items() if not (isinstance(k, str) and (k.startswith("_") or k == step_key))}


def _number(value: Any) -> float | None:
    if value is None:
        return math.nan
    if isinstance(value, (bool, int, float)):
        try:
            return float(value)
        except OverflowError:  # an int beyond float range
            return math.inf if value > 0 else -math.inf
    return None
