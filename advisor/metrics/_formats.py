"""One record per metrics source: how it is recognised, read whole, read a line at a time, and what an input
that holds none of its records is told.

Every reader of a run's metrics goes through these records: :func:`~._load.load_metrics` (the whole file),
:func:`~._sniff.detect_format` (which one a file holds), :func:`parse_metrics_line` (``advisor watch`` and the
sweep's tail, one line as it is written). A new source is one more :class:`Format` here; the modules that parse
each one are imported only when a file of that format is read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._frame import MetricsFormat, ReadLog

if TYPE_CHECKING:
    from ._columns import Keep
    from ._records import Records

Reader = Callable[[Path, ReadLog, "Keep | None"], "Records"]
LineParser = Callable[[bytes | str], "tuple[int, dict[str, float]] | None"]


@dataclass(frozen=True)
class Format:
    """One metrics source verl (or a tool around it) writes."""

    name: MetricsFormat
    title: str  # what it is, in words ("verl file logger (JSONL)")
    read: Reader  # the whole file (or run directory), each kept metric's values (``keep``: None keeps all)
    none_found: str  # what a file of this format without one record lacks
    hint: str = ""  # what to ask the user when it holds none (default: "read as <title>")
    parse_line: LineParser | None = None  # one complete line -> (step, {metric: value}); None: not line-based
    json_object: Callable[[dict[str, Any]], bool] | None = None  # a JSON-lines format: whether an object is its
    head: Callable[[bytes], bool] | None = None  # whether a file's first bytes are this format's (not JSON lines)

    @property
    def no_records_hint(self) -> str:
        return self.hint or f"read as {self.title}"


def _jsonl_reader(layout: str) -> Reader:
    def read(target: Path, log: ReadLog, keep: Keep | None) -> Records:
        from ._jsonl import read_jsonl

        return read_jsonl(target, layout=layout, log=log, keep=keep)  # type: ignore[arg-type]

    return read


def _jsonl_line(layout: str) -> LineParser:
    def parse(line: bytes | str) -> tuple[int, dict[str, float]] | None:
        from ._jsonl import parse_json_line

        return parse_json_line(line, layout)  # type: ignore[arg-type]

    return parse


def _read_console(target: Path, log: ReadLog, keep: Keep | None) -> Records:
    from ._console import read_console

    return read_console(target, log=log, keep=keep)


def _console_line(line: bytes | str) -> tuple[int, dict[str, float]] | None:
    from ._console import parse_console_line

    return parse_console_line(line if isinstance(line, str) else line.decode("utf-8", errors="replace"))


def _read_wandb_csv(target: Path, log: ReadLog, keep: Keep | None) -> Records:
    from ._columns import project
    from ._wandb import read_wandb_csv

    return project(read_wandb_csv(target, log=log), keep)


def _wandb_csv_head(head: bytes) -> bool:
    from ._wandb import looks_like_wandb_csv

    return looks_like_wandb_csv(head.split(b"\n", 1)[0].decode("utf-8", errors="replace"))


def _read_tensorboard(target: Path, log: ReadLog, keep: Keep | None) -> Records:
    from ._columns import project
    from ._tensorboard import event_files, read_tensorboard

    files = event_files(target) if target.is_dir() else [target]
    return project(read_tensorboard(files, log=log), keep)


# in the order detection tries the JSON-lines formats: verl's file logger, W&B's history, then any flat object
FORMAT_LIST: tuple[Format, ...] = (
    Format("jsonl", "verl file logger (JSONL)", _jsonl_reader("verl"), 'no {"step": N, "data": {...}} records',
           parse_line=_jsonl_line("verl"), json_object=lambda obj: "step" in obj and "data" in obj),
    Format("console", "verl console log", _read_console, "no 'step:N - key:value' lines",
           hint="is this the stdout of a verl run with trainer.logger including 'console'?",
           parse_line=_console_line),
    # an event file's first record is the file version event, its text "brain.Event:2" within the first bytes
    Format("tensorboard", "TensorBoard event files", _read_tensorboard, "no scalar summaries",
           head=lambda head: b"brain.Event:" in head[:128]),
    Format("wandb-csv", "W&B CSV export", _read_wandb_csv, "no rows with a step", head=_wandb_csv_head),
    Format("wandb-jsonl", "W&B wandb-history.jsonl", _jsonl_reader("wandb"), "no records with '_step'",
           json_object=lambda obj: "_step" in obj),
    # one flat object per step, as exporters and hand-written loggers write
    Format("flat-jsonl", 'flat JSON lines ({"step": N, "metric": value, ...})', _jsonl_reader("flat"),
           "no records with an integer 'step'", parse_line=_jsonl_line("flat"), json_object=lambda obj: "step" in obj),
)
FORMAT: Mapping[str, Format] = {f.name: f for f in FORMAT_LIST}
LINE_FORMATS: tuple[str, ...] = tuple(f.name for f in FORMAT_LIST if f.parse_line is not None)


def head_is(fmt: str, head: bytes) -> bool:
    """Whether a file's first bytes are ``fmt``'s, by its record's ``head`` test (False for a format without one)."""
    test = FORMAT[fmt].head
    return test is not None and test(head)


def parse_metrics_line(line: bytes | str, fmt: str) -> tuple[int, dict[str, float]] | None:
    """One complete line of a verl ``file`` logger JSONL (``jsonl``), flat JSON lines (``flat-jsonl``) or
    console log (``console``) -> (step, {metric: value}); None for a line that is not a step record.

    NaN and null (the file logger's NaN) are ``LOGGED_NAN``, inf stays inf; a value that is not a number is left out.
    """
    parse = FORMAT[fmt].parse_line if fmt in FORMAT else None
    if parse is None:
        raise ValueError(f"{fmt!r} is not a line-based metrics format ({', '.join(LINE_FORMATS)})")
    return parse(line)
