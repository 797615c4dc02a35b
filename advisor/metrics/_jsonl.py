"""JSON-lines metric logs: verl's ``file`` logger, W&B's ``wandb-history.jsonl`` and flat JSON lines.

verl's ``FileLogger`` (verl/utils/tracking.py, since v0.6.0) writes one line per ``log`` call::

    {"step": 12, "data": {"actor/pg_loss": -0.004, "timing_s/gen": 71.3, ...}}

v0.6.0-v0.7.0 use ``json.dumps`` (NaN/inf as the bare tokens ``NaN``/``Infinity``, text mode, buffered:
a killed run leaves its last line cut); later versions use orjson (NaN/inf as ``null``). W&B's history
file holds one flat object per step with ``_step``, ``_runtime``, ``_timestamp`` and the metrics. Flat JSON
lines (``{"step": 12, "actor/pg_loss": -0.004, ...}``, as metric exporters and hand-written loggers write them)
are read the same way, with ``step`` as the step.

The file streams through ``pyarrow.json`` (multi-threaded, C++) in 64 MiB blocks cut at a line end; only the
columns asked for are kept (``advisor.metrics._columns``), so a 7 GB log is read in the memory of its frame.
When pyarrow rejects a block (a garbage line, a value whose type changes), its lines are bisected: halves
pyarrow accepts stay on the fast path, and only the bad neighbourhood is parsed line by line with :mod:`json`
(``_parse_line``: one line, reusable by a reader that tails a file).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from advisor import limits

from ._columns import ColumnStore, Keep
from ._frame import ReadLog
from ._nan import LOGGED_NAN, logged, nonfinite_text
from ._records import INT64_MAX, INT64_MIN, RecordBuilder, Records, concat_records

if TYPE_CHECKING:
    import threading

    import numpy as np
    import pyarrow as pa

Layout = Literal["verl", "wandb", "flat"]
_STEP_KEY: dict[str, str] = {"verl": "step", "wandb": "_step", "flat": "step"}
_NULL_RE = re.compile(rb"(?<![\w\"])null(?![\w\"])")  # a JSON null, not a key or text holding it
_CUT_LINE = "cut last line (file still being written?)"
_LEAF_LINES = 64  # below this many lines, parse line by line instead of bisecting further
_MIN_BLOCK_BYTES = 1 << 20  # pyarrow's default block size
_MAX_BLOCK_BYTES = 1 << 24
_CHUNK_BYTES = 1 << 25  # the file is read this much at a time (cut at a line end)
_MAX_LINE_BYTES = limits.METRICS_LINE_BYTES  # a longer line is skipped, read past in bounded pieces
_MIN_CAPACITY_ROWS = 1024
_WHITESPACE = tuple(b" \t\r\x0b\x0c")  # what bytes.strip() removes, besides the newline


def read_jsonl(path: Path, *, layout: Layout, log: ReadLog, keep: Keep | None = None) -> Records:
    """Read a verl file-logger (``layout="verl"``), W&B history (``"wandb"``) or flat (``"flat"``) JSON-lines
    file. ``keep``: whether a metric's values are kept (None: every metric's); the others are only listed.

    The file streams through in blocks of ``_CHUNK_BYTES`` cut at a line end, each parsed by pyarrow, so memory
    is that of the kept columns, not of the file.
    """
    import os as _os

    if layout == "verl":
        log.features.add("jsonl_file_logger")
    size = _os.path.getsize(path)
    read = 0

    def expected_rows(rows: int) -> int:  # from the bytes read so far: the columns grow once, to about their size
        return int(rows * size / max(read, 1) * 1.02) + _MIN_CAPACITY_ROWS

    if size <= _CHUNK_BYTES:
        return _read_small(path, layout, log, keep)
    store = ColumnStore(keep, expected_rows)
    line = 1  # number of the first line of the next block
    tail = b""  # a last line without its newline
    want = _CHUNK_BYTES
    with path.open("rb") as fh:
        while True:
            block = fh.read(want)
            if not block:
                break
            read = fh.tell()
            at_end = len(block) < want
            cut = block.rfind(b"\n") + 1
            if cut == 0:  # no line ends in the block
                if at_end:
                    tail = block
                elif want >= _MAX_LINE_BYTES:  # one line past the limit: skip it whole
                    line += _skip_long_line(fh, log, line)
                    want = _CHUNK_BYTES
                else:  # a line longer than the block: read it again, more at once
                    fh.seek(-len(block), os.SEEK_CUR)
                    want *= 2
                continue
            lines = block.count(b"\n", 0, cut)
            store.append(_read_block(memoryview(block)[:cut], layout, log, line, keep, lines))
            line += lines
            want = _CHUNK_BYTES
            if cut < len(block):  # the block ends inside a line: the next block starts with it (no copy here)
                if at_end:
                    tail = block[cut:]
                    break
                fh.seek(cut - len(block), os.SEEK_CUR)
    if tail.strip():
        if _parse_line(tail, layout) is None:  # no newline and not a whole record: a run still writing
            log.lines_read += 1
            log.skip(line, _CUT_LINE)
        else:
            store.append(_read_block(tail, layout, log, line, keep, 0))
    return store.build()


def _read_small(path: Path, layout: Layout, log: ReadLog, keep: Keep | None) -> Records:
    """A file of one block: memory-mapped (no copy: the page cache is the buffer) and parsed at once, its line
    numbers counted only if a skipped line or a restart needs one."""
    import pyarrow as pa

    if not path.stat().st_size:
        return _read_block(b"", layout, log, 1, keep, None)
    data = pa.memory_map(str(path)).read_buffer()
    if data[data.size - 1] == 0x0A:  # ends with a newline: no cut last line to look for
        return _read_block(data, layout, log, 1, keep, None)
    cut = _last_newline(data) + 1
    tail = data.slice(cut).to_pybytes()
    if tail.strip() and _parse_line(tail, layout) is None:  # no newline and not a whole record: still being written
        log.lines_read += 1
        log.skip(_count_newlines(data) + 1, _CUT_LINE)
        return _read_block(data.slice(0, cut), layout, log, 1, keep, None)
    return _read_block(data, layout, log, 1, keep, None)


def _last_newline(buffer: pa.Buffer) -> int:
    """Offset of the last newline in ``buffer``, or -1; read from the end, a growing window at a time."""
    end: int = buffer.size
    window = 1 << 16
    while end > 0:
        start = max(0, end - window)
        found: int = buffer.slice(start, end - start).to_pybytes().rfind(b"\n")
        if found >= 0:
            return start + found
        end, window = start, window * 4
    return -1


def _count_newlines(buffer: pa.Buffer) -> int:
    import numpy as np

    return int(np.count_nonzero(np.frombuffer(buffer, dtype=np.uint8) == 0x0A))


def _skip_long_line(fh: Any, log: ReadLog, line: int) -> int:
    """Read past the rest of a line longer than ``_MAX_LINE_BYTES``; returns the newlines consumed (0 or 1)."""
    log.lines_read += 1
    log.skip(line, f"line longer than {_MAX_LINE_BYTES:,} bytes")
    while True:
        block = fh.read(_CHUNK_BYTES)
        if not block:
            return 0
        end = block.find(b"\n")
        if end >= 0:
            fh.seek(end + 1 - len(block), os.SEEK_CUR)
            return 1


def _read_block(body: bytes | memoryview | pa.Buffer, layout: Layout, log: ReadLog, first_line: int, keep: Keep | None,
                newlines: int | None) -> Records:
    """The records of whole lines ``body`` (``newlines`` of them, None: not counted; from line ``first_line``):
    pyarrow, or bisected to the bad lines when pyarrow rejects it."""
    import numpy as np
    import pyarrow as pa

    buffer = body if isinstance(body, pa.Buffer) else pa.py_buffer(body)

    def row_lines(rows: int) -> np.ndarray:  # a row per line unless some are blank
        if rows == newlines:
            return np.arange(first_line, first_line + rows, dtype=np.int64)
        return _nonblank_lines(buffer) + (first_line - 1)

    scan = _NullScan(buffer)  # while pyarrow parses: both leave the GIL, and pyarrow's parse has serial spells
    try:
        table = _pyarrow_read(buffer)
        records = _from_table(table, layout, log, lambda: row_lines(table.num_rows), keep)
    except (pa.ArrowException, ValueError):  # ValueError: also a key that is not UTF-8 (UnicodeDecodeError)
        records = None
    if records is None:
        records = _read_bisecting(buffer, layout, log, first_line, keep)
    if scan.found():
        _mark_nulls(buffer, records, layout, first_line)
    return records


class _NullScan:
    """:func:`_holds_null` of a buffer, run on a second thread when the buffer is large enough to repay one."""

    _THREAD_BYTES = 1 << 20

    def __init__(self, buffer: pa.Buffer) -> None:
        self.buffer, self.result = buffer, False
        self.thread: threading.Thread | None = None
        if buffer.size >= self._THREAD_BYTES:
            import threading

            self.thread = threading.Thread(target=self._run, name="advisor-null-scan", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        self.result = _holds_null(self.buffer)

    def found(self) -> bool:
        if self.thread is None:
            return _holds_null(self.buffer)
        self.thread.join()
        return bool(self.result)


def _mark_nulls(buffer: pa.Buffer, records: Records, layout: Layout, first_line: int) -> None:
    """Write ``LOGGED_NAN`` where a line logged a metric as ``null`` (orjson's NaN/inf).

    pyarrow reads a key logged as null and a key the line lacks alike (a null), so the lines holding ``null``
    (none in a healthy run) are parsed again with :mod:`json` to tell them apart.
    """
    import numpy as np

    if not len(records) or not records.names:
        return
    raw = buffer.to_pybytes()
    data = np.frombuffer(raw, dtype=np.uint8)
    newlines = np.flatnonzero(data == 0x0A)
    hits = np.array([m.start() for m in _NULL_RE.finditer(raw)], dtype=np.int64)
    if not hits.size:
        return
    line_index = np.unique(np.searchsorted(newlines, hits))  # 0-based line of the block
    record_lines = records.lines(np.arange(len(records)))
    rows = np.searchsorted(record_lines, line_index + first_line)
    columns = {name: j for j, name in enumerate(records.names)}
    for index, row in zip(line_index, rows, strict=True):
        if row >= len(records) or record_lines[row] != index + first_line:
            continue  # a skipped line
        start = int(newlines[index - 1]) + 1 if index else 0
        end = int(newlines[index]) if index < len(newlines) else len(raw)
        parsed = _parse_line(raw[start:end], layout)
        if not isinstance(parsed, tuple):
            continue
        for name, value in parsed[1].items():
            if value is None and name in columns:
                records.values[row, columns[name]] = LOGGED_NAN


_NULL_WORD = int.from_bytes(b"null", "little")
_SCAN_BYTES = 1 << 19  # a stretch of the null scan: fits the L2 cache


def _holds_null(buffer: pa.Buffer) -> bool:
    """Whether the bytes ``null`` occur in ``buffer``: the buffer seen as 4-byte words at each of the 4 offsets,
    compared at once, a cache-sized stretch at a time (each stretch read from memory once for its 4 offsets). No copy
    of the buffer, and ~3x faster than ``b"null" in bytes`` on a metrics log, whose metric names make the bytes
    search skip little (bench/bench_metrics_read.py)."""
    import numpy as np

    size = buffer.size
    hits = np.empty(_SCAN_BYTES // 4, dtype=bool)
    for start in range(0, size, _SCAN_BYTES):
        end = min(size, start + _SCAN_BYTES + 3)  # a word starting in this stretch may end past it
        for offset in range(4):
            count = (end - start - offset) // 4
            if count <= 0:
                continue
            words = np.frombuffer(buffer, dtype="<u4", count=count, offset=start + offset)
            found = hits[:count]
            np.equal(words, _NULL_WORD, out=found)
            if found.any():
                return True
    return False


def _pyarrow_read(body: pa.Buffer) -> pa.Table:
    import pyarrow as pa
    import pyarrow.json as pj

    # pyarrow parses blocks in parallel; its 1 MiB default makes hundreds of chunks on a big log, and each
    # chunk costs again when the columns are flattened and converted. Aim at one block per core (the 1,000-step
    # file of bench/bench_suggest.py on 2 cores, best of 25 in one run: 4 blocks a core read at 0.81x pyarrow's
    # own reader, 2 at 0.90x, 1 at 1.01x; from ~32 MiB a core the 16 MiB cap decides, as before).
    per_block = body.size // (os.cpu_count() or 1)
    block_size = min(max(per_block, _MIN_BLOCK_BYTES), _MAX_BLOCK_BYTES)
    return pj.read_json(
        pa.BufferReader(body),
        read_options=pj.ReadOptions(block_size=block_size),
        parse_options=pj.ParseOptions(newlines_in_values=False),
    )


def _nonblank_lines(body: pa.Buffer) -> np.ndarray:
    """1-based numbers of the non-blank lines (pyarrow's rows), from the newline positions."""
    import numpy as np

    data = np.frombuffer(body, dtype=np.uint8)
    if not len(data):
        return np.zeros(0, dtype=np.int64)
    ends = np.flatnonzero(data == 0x0A)
    if data[-1] != 0x0A:
        ends = np.append(ends, len(data))
    starts = np.concatenate(([0], ends[:-1] + 1))
    empty = starts >= ends
    suspect = empty | np.isin(data[np.minimum(starts, len(data) - 1)], _WHITESPACE)
    nonblank = ~suspect
    for i in np.flatnonzero(suspect & ~empty):  # a line starting with a space: blank only if nothing else is there
        nonblank[i] = bool(bytes(data[starts[i] : ends[i]]).strip())
    return (np.flatnonzero(nonblank) + 1).astype(np.int64)


def _from_table(
    table: pa.Table, layout: Layout, log: ReadLog, row_lines: Callable[[], np.ndarray], keep: Keep | None = None
) -> Records | None:
    """Records from a table pyarrow parsed; None when its shape needs the line-by-line reader.

    Read from the columns' buffers with numpy, never through ``pyarrow.compute`` (a cast, a filter or a kernel
    imports it: ~25 ms of ``advisor suggest``'s start-up, bench/bench_suggest.py)."""
    import numpy as np
    import pyarrow as pa

    _decode_names(table.schema)  # before anything is counted: a key that is not UTF-8 sends the lines to json
    step_key = _STEP_KEY[layout]
    if step_key not in table.column_names:
        return None
    step_column = table.column(step_key)
    steps = _as_int64(step_column)  # uint64 beyond int64: line by line
    if steps is None:
        return None
    valid = _valid(step_column)
    if layout == "verl":
        if "data" not in table.column_names or not pa.types.is_struct(table.schema.field("data").type):
            return None
        valid &= _valid(table.column("data"))
    lines_cache: list[np.ndarray] = []

    def lines_of(rows: np.ndarray) -> np.ndarray:
        if not lines_cache:
            lines_cache.append(row_lines())
        lines: np.ndarray = lines_cache[0][rows]
        return lines

    log.lines_read += table.num_rows
    kept_rows: np.ndarray | None = None
    if not valid.all():
        bad = np.flatnonzero(~valid)
        reason = f"no integer '{step_key}'" if layout != "verl" else "no integer 'step' or no 'data' object"
        for line in lines_of(bad):
            log.skip(int(line), reason)
        kept_rows = np.flatnonzero(valid)
        steps = steps[kept_rows]
        row_map: Callable[[np.ndarray], np.ndarray] = lambda idx: lines_of(kept_rows[idx])  # noqa: E731
    else:
        row_map = lines_of
    log.records += len(steps)

    # one chunk per column: converting ~150 columns chunk by chunk costs more than this copy
    table = table.combine_chunks()
    if layout == "verl":
        flat = table.select(["data"]).flatten()
        prefix = len("data.")
    else:
        flat = table.drop_columns([c for c in table.column_names if c.startswith("_") or c == step_key])
        prefix = 0
    numeric = []
    for name, column in zip(flat.column_names, flat.columns, strict=True):
        kind = column.type
        if pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind) or (
            pa.types.is_null(kind)
        ):
            numeric.append((name[prefix:], column))
        else:  # strings, nested objects (W&B tables/histograms), lists
            log.dropped_columns.add(name[prefix:])
    # one float64 column per metric (nulls become NaN), Fortran order: a metric is contiguous
    values, valid, nan_tokens = _matrix([column for _, column in numeric], table.num_rows, kept_rows)
    # the metrics by the first row that holds them (pyarrow's multi-threaded reader orders fields by which block
    # finished first, so two reads of one file could list the metrics in two orders); the sort is stable
    first_row = np.where(valid.any(axis=0), valid.argmax(axis=0), len(steps)) if len(steps) else np.zeros(len(numeric))
    order = np.argsort(first_row, kind="stable").tolist()
    logged = [numeric[j][0] for j in order]
    chosen = order if keep is None else [j for j in order if keep(numeric[j][0])]
    names = [numeric[j][0] for j in chosen]
    unread: dict[str, bool] = {}
    if len(chosen) < len(order):  # listed, not kept: whether each held a finite value
        listed = set(order) - set(chosen)
        unread = {numeric[j][0]: bool(np.isfinite(values[:, j]).any()) if pa.types.is_floating(numeric[j][1].type)
                  else bool(valid[:, j].any()) for j in order if j in listed}
    if chosen != list(range(len(numeric))):
        values = np.asfortranarray(values[:, chosen])
    # pyarrow reads a bare NaN token as a NaN double and null as a null: a NaN where a line logged a value means
    # json.dumps wrote the file (verl <= 0.7.0), not orjson
    if layout == "verl" and nan_tokens:
        log.features.add("jsonl_nan_tokens")
    return Records(steps, names, values, line_of=row_map, unread=unread, logged=logged if unread else None)


def _valid(column: pa.ChunkedArray) -> np.ndarray:
    """Which rows of ``column`` hold a value (not null), from its validity bitmaps."""
    import numpy as np

    parts = [_bits(chunk.buffers()[0], chunk.offset, len(chunk)) if chunk.null_count
             else np.ones(len(chunk), dtype=bool) for chunk in column.chunks]
    return np.concatenate(parts) if parts else np.ones(0, dtype=bool)


def _as_int64(column: pa.ChunkedArray) -> np.ndarray | None:
    """An integer column as int64 (nulls as 0: the caller drops those rows); None when it is not an integer
    column or holds a value beyond int64."""
    import numpy as np
    import pyarrow as pa

    kind = column.type
    if not pa.types.is_integer(kind):
        return None
    dtype = _numpy_dtype(kind)
    parts = []
    for chunk in column.chunks:
        data = chunk.buffers()[1]
        raw = (np.frombuffer(data, dtype=dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize)
               if data is not None else np.zeros(len(chunk), dtype=dtype))
        if chunk.null_count:
            raw = np.where(_bits(chunk.buffers()[0], chunk.offset, len(chunk)), raw, 0)
        if dtype.kind == "u" and dtype.itemsize == 8 and raw.size and int(raw.max()) > INT64_MAX:
            return None
        parts.append(raw.astype(np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _decode_names(schema: Any) -> None:
    """Read every field name (pyarrow keeps a key's bytes; reading one that is not UTF-8 raises ValueError)."""
    stack = list(schema)
    while stack:
        field = stack.pop()
        _ = field.name
        stack.extend(field.type.fields if hasattr(field.type, "fields") else ())


def _matrix(columns: list[pa.ChunkedArray], rows: int,
            kept_rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, bool]:
    """Numeric, boolean or null columns of ``rows`` rows as one float64 matrix (Fortran order), read from their
    buffers, the rows ``kept_rows`` of it (None: all): (the matrix, with nulls as NaN and bare NaN tokens as logged
    NaNs; where it holds a value, not a null; whether a kept row holds a NaN token). Integers convert as a cast does
    (those beyond 2**53 round, as in json); booleans as 0/1.

    pyarrow's own ``to_numpy()`` imports pandas on first use (~0.25 s of CPU, half of what ``advisor suggest`` may
    take on a 1,000-step log: bench/bench_suggest.py), its ``cast`` pyarrow.compute; numpy's NaN test and marking
    run once on the whole matrix, not once per column.
    """
    import numpy as np
    import pyarrow as pa

    tensor = _tensor(columns, rows, kept_rows)
    if tensor is not None:
        return tensor
    values = np.empty((rows, len(columns)), dtype=np.float64, order="F")
    valid = np.ones((rows, len(columns)), dtype=bool, order="F")
    f64 = pa.float64()
    dtypes: dict[Any, np.dtype[Any]] = {}  # ~150 columns of one or two types: each dtype worked out once
    for j, column in enumerate(columns):
        chunks = column.chunks if column.num_chunks != 1 else (column.chunk(0),)
        at = 0
        for chunk in chunks:
            n, buffers, kind, offset = len(chunk), chunk.buffers(), chunk.type, chunk.offset
            data = buffers[1] if len(buffers) > 1 else None
            if data is None:  # a column of nulls only
                valid[at : at + n, j] = False
            else:
                if kind == f64:
                    values[at : at + n, j] = np.frombuffer(data, dtype=np.float64, count=n, offset=offset * 8)
                elif pa.types.is_boolean(kind):
                    values[at : at + n, j] = _unpacked(data, offset, n)
                else:
                    dtype = dtypes.get(kind) or dtypes.setdefault(kind, _numpy_dtype(kind))
                    values[at : at + n, j] = np.frombuffer(data, dtype=dtype, count=n, offset=offset * dtype.itemsize)
                if chunk.null_count:
                    valid[at : at + n, j] = _unpacked(buffers[0], offset, n)
            at += n
    nan = np.isnan(values)
    nan &= valid  # a NaN where a line logged a value: a bare NaN token (json.dumps), a logged NaN
    tokens = bool(nan.any()) if kept_rows is None else bool(nan[kept_rows].any())
    values[nan] = LOGGED_NAN
    values[~valid] = np.nan
    if kept_rows is not None:
        values, valid = np.asfortranarray(values[kept_rows]), np.asfortranarray(valid[kept_rows])
    return values, valid, tokens


def _tensor(columns: list[pa.ChunkedArray], rows: int,
            kept_rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """:func:`_matrix` for the common shape, one-chunk int64 and float64 columns, in one call of Arrow's C++
    (``RecordBatch.to_tensor``: nulls NaN, integers converted as a cast does); only a column holding more NaNs than
    nulls (bare NaN tokens, json.dumps) is read column-wise to tell them apart. None for any other shape
    (booleans, a column of nulls only, pyarrow < 16): the caller reads those column by column."""
    import numpy as np
    import pyarrow as pa

    if not columns or not rows or any(c.num_chunks != 1 for c in columns):
        return None
    f64, i64 = pa.float64(), pa.int64()
    if any(c.type != f64 and c.type != i64 for c in columns):
        return None
    batch = pa.RecordBatch.from_arrays([c.chunk(0) for c in columns], names=[str(j) for j in range(len(columns))])
    try:
        tensor = batch.to_tensor(null_to_nan=True, row_major=False)
    except (TypeError, AttributeError, pa.ArrowException):  # pyarrow < 16 has no null_to_nan
        return None
    values = np.array(tensor, dtype=np.float64, order="F")  # a copy: the frame writes logged NaNs into it
    nan = np.isnan(values)
    valid = ~nan
    nulls = np.array([c.null_count for c in columns])
    tokens = False
    for j in np.flatnonzero(np.count_nonzero(nan, axis=0) != nulls).tolist():  # NaN tokens in this column
        chunk = columns[j].chunk(0)
        if chunk.null_count:
            valid[:, j] = _unpacked(chunk.buffers()[0], chunk.offset, rows)
        else:
            valid[:, j] = True
        logged = nan[:, j] & valid[:, j]
        values[logged, j] = LOGGED_NAN
        tokens = tokens or bool(logged.any() if kept_rows is None else logged[kept_rows].any())
    if kept_rows is not None:
        values, valid = np.asfortranarray(values[kept_rows]), np.asfortranarray(valid[kept_rows])
    return values, valid, tokens


def _numpy_dtype(kind: pa.DataType) -> np.dtype[Any]:
    """numpy's dtype of an Arrow integer or floating-point type (little-endian, as Arrow's buffers are)."""
    import numpy as np
    import pyarrow as pa

    letter = "f" if pa.types.is_floating(kind) else "u" if pa.types.is_unsigned_integer(kind) else "i"
    return np.dtype(f"<{letter}{kind.bit_width // 8}")


def _bits(buffer: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """Arrow's bit-packed (least significant bit first) booleans as a numpy bool array."""
    return _unpacked(buffer, offset, n).astype(bool)


def _unpacked(buffer: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """Arrow's bit-packed booleans as numpy 0/1 bytes (for a bool or float column to take by assignment)."""
    import numpy as np

    return np.unpackbits(np.frombuffer(buffer, dtype=np.uint8), count=offset + n, bitorder="little")[offset:]


def _read_bisecting(body: pa.Buffer, layout: Layout, log: ReadLog, first_line: int = 1,
                    keep: Keep | None = None) -> Records:
    """Parse what pyarrow rejected (lines from ``first_line`` on): bisect to the bad lines, keep everything else
    on pyarrow."""
    import numpy as np
    import pyarrow as pa

    raw = body.to_pybytes()
    physical = raw.split(b"\n")
    nonblank = [i for i, line in enumerate(physical) if line.strip()]
    parts: list[Records] = []

    def parse(lo: int, hi: int) -> None:
        if hi - lo > _LEAF_LINES:
            chunk = b"\n".join(physical[i] for i in nonblank[lo:hi]) + b"\n"
            line_numbers = np.array(nonblank[lo:hi], dtype=np.int64) + first_line
            try:
                part = _from_table(_pyarrow_read(pa.py_buffer(chunk)), layout, log, lambda: line_numbers, keep)
            except (pa.ArrowException, ValueError):  # ValueError: a key that is not UTF-8
                part = None
            if part is not None:
                parts.append(part)
                return
            mid = (lo + hi) // 2
            parse(lo, mid)
            parse(mid, hi)
            return
        builder = RecordBuilder(keep)
        for i in nonblank[lo:hi]:
            log.lines_read += 1
            parsed = _parse_line(physical[i], layout)
            if isinstance(parsed, str) or parsed is None:
                log.skip(i + first_line, parsed or "not JSON")
                continue
            step, values = parsed
            log.records += 1
            builder.start(step, i + first_line)
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
    log.dropped_columns.difference_update(records.all_names)
    return records


def _parse_line(line: bytes, layout: Layout) -> tuple[int, dict[str, Any]] | str | None:
    """(step, {name: value}) for a good line; a reason string for a bad one; None for non-JSON."""
    try:
        obj = json.loads(line.lstrip(b"\x00"))  # NULs before a record: logrotate copytruncate's hole
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
    """A logged JSON value as a float (null and NaN: ``LOGGED_NAN``); None for a value that is not a number."""
    if value is None:
        return LOGGED_NAN
    if isinstance(value, (bool, int, float)):
        try:
            return logged(float(value))
        except OverflowError:  # an int beyond float range
            return math.inf if value > 0 else -math.inf
    if isinstance(value, str):  # "NaN", "Infinity" written as strings (a logger without JSON's NaN tokens)
        return nonfinite_text(value)
    return None


def parse_json_line(line: bytes | str, layout: Layout) -> tuple[int, dict[str, float]] | None:
    """One complete JSON line of a verl file logger (``layout="verl"``) or flat JSON lines (``"flat"``) ->
    (step, {metric: value}); None for a line that is not a step record. NaN and null are ``LOGGED_NAN``, inf stays
    inf; a value that is not a number is left out."""
    raw = line.encode("utf-8") if isinstance(line, str) else line
    parsed = _parse_line(raw, layout)
    if not isinstance(parsed, tuple):
        return None
    step, values = parsed
    out = {}
    for name, value in values.items():
        number = _number(value)
        if number is not None and isinstance(name, str):
            out[name] = number
    return step, out
