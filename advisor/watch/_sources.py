"""What ``advisor watch`` follows: a metrics file being written, a TensorBoard run directory, or a Ray job.

Every source answers :meth:`poll` with the step records that arrived since the last call, as
``(step, {metric: value})`` in the order they were written, and says when it has ``ended`` (a Ray job that
finished; a file never ends, ``--idle-stop`` decides that). Lines are parsed by the same code as
``advisor suggest``'s readers (``advisor.metrics.parse_metrics_line``).
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Protocol

from advisor.metrics import FORMAT_RECORDS, LINE_FORMATS, LineSplitter, parse_metrics_line

from ._tail import MAX_LINE

Record = tuple[int, dict[str, float]]
RAY_SCHEME = "ray://"


class Source(Protocol):
    name: str
    fmt: str | None  # the metrics format once known (jsonl, flat-jsonl, console, tensorboard)
    ended: bool

    def poll(self) -> list[Record]: ...

    def close(self) -> list[Record]:
        """Stop following; the records still held back (a last line without its newline)."""
        ...


def detect_line_format(line: bytes) -> tuple[str, Record] | None:
    """The format of the first line that is a step record: verl JSONL, flat JSON lines or console."""
    json = line.lstrip().startswith(b"{")
    for fmt in (f for f in LINE_FORMATS if (FORMAT_RECORDS[f].json_object is not None) == json):
        record = parse_metrics_line(line, fmt)
        if record is not None and record[1]:
            return fmt, record
    return None


class LineSource:
    """Step records from lines (a followed file, or a Ray job's log stream)."""

    def __init__(self, lines: Any, *, name: str, fmt: str | None = None) -> None:
        self.lines = lines  # has poll() -> list[bytes], partial, close()
        self.name = name
        self.fmt = fmt
        self.ended = False
        self.skipped = 0  # lines that looked like records and could not be read

    def poll(self) -> list[Record]:
        out = self._parse(self.lines.poll())
        self.ended = bool(getattr(self.lines, "ended", False))
        return out

    def close(self) -> list[Record]:
        tail = self.lines.partial  # a last line without its newline: a finished run's file may end so
        self.lines.close()
        return self._parse([tail]) if tail.strip() else []

    def _parse(self, lines: list[bytes]) -> list[Record]:
        out: list[Record] = []
        for line in lines:
            if not line.strip():
                continue
            if self.fmt is None:
                found = detect_line_format(line)
                if found is None:
                    continue
                self.fmt, first = found
                out.append(first)
                continue
            record = parse_metrics_line(line, self.fmt)
            if record is None:
                if self.fmt != "console":  # a console log is mostly other output
                    self.skipped += 1
                continue
            out.append(record)
        return out


class TextStream:
    """Lines from text chunks pushed by another thread (a Ray job's log stream)."""

    def __init__(self) -> None:
        self.queue: queue.Queue[str | None] = queue.Queue()
        self._lines = LineSplitter(MAX_LINE)
        self.ended = False
        self.error: str | None = None
        self.lock = threading.Lock()

    @property
    def partial(self) -> bytes:
        return self._lines.partial

    def push(self, text: str | None) -> None:
        self.queue.put(text)

    def poll(self) -> list[bytes]:
        lines: list[bytes] = []
        while True:
            try:
                chunk = self.queue.get_nowait()
            except queue.Empty:
                return lines
            if chunk is None:
                self.ended = True
                return lines
            lines += self._lines.feed(chunk.encode("utf-8", errors="replace"))

    def close(self) -> None:
        self.ended = True
