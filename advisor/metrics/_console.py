"""verl's console logger: ``step:N - key:value - key:value ...`` lines in a driver's stdout.

``concat_dict_to_str`` (verl/utils/logger/aggregate_logger.py) prints ``step:{step}`` and, for each
value that is a ``numbers.Number``, ``{key}:{value:.3f}`` (v0.1-v0.4.1) or ``{key}:{pprint.pformat(value)}``
(v0.5.0 on: ``0.0123``, ``1e-06``, ``nan``, ``True``, and with numpy >= 2 ``np.float64(0.0123)``),
joined by `` - ``. The trainer runs in a Ray actor, so the captured stdout adds ``(TaskRunner pid=...)``
prefixes, ANSI colours, other processes' lines in between and sometimes their text glued onto a line.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from ._frame import ReadLog
from ._records import INT64_MAX, RecordBuilder, Records

_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# `step:N` not preceded by a name character: skips `global_step:3`, `timing_s/step:1.5`, `time_per_step:`
_STEP_RE = re.compile(r"(?<![\w/.@-])step:(\d+)(?= - |\s*$)")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)|True|False"
# one ` - key:value` item; the key is greedy so a key holding ':' keeps all but the last one
_ITEM = rf" - (\S+):(?:np\.\w+\(({_NUMBER})\)|({_NUMBER}))(?= - |\s*$)"
_ITEM_RE = re.compile(_ITEM)
_CLEAN_RE = re.compile(rf"(?:{_ITEM})*\s*")
# slow path, one item at a time: value, then whatever follows it (other output glued on)
_LOOSE_ITEM_RE = re.compile(rf"(\S+):(?:np\.\w+\(({_NUMBER})\)|({_NUMBER}))(.*)", re.DOTALL)
_THREE_DECIMALS_RE = re.compile(r"-?\d+\.\d{3}|-?nan|-?inf")
_FORMAT_SAMPLE_LINES = 50  # step lines looked at to tell `.3f` values from full reprs
_GLUED = "other output glued onto a step line (the rest of that line was ignored)"
_BAD_VALUE = "a value that is not a number (item ignored)"


def read_console(path: Path, *, log: ReadLog) -> Records:
    """Read the ``step:N - key:value`` records of a console log; everything else counts as other output."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    lines = text.split("\n")
    unterminated = not text.endswith("\n")
    if not unterminated:
        lines.pop()  # the empty string after the final newline
    builder = RecordBuilder()
    partial: Counter[str] = Counter()
    first_partial: dict[str, int] = {}
    sampled = 0
    three_decimals = full_repr = False
    in_record = False  # the previous line was a step record (for wrapped ` - key:value` continuations)
    cut_line = len(lines) if unterminated else 0
    for number, raw in enumerate(lines, start=1):
        continuation = in_record and raw.lstrip().startswith("- ")
        if "step:" not in raw and not continuation:
            log.other_lines += 1
            in_record = False
            continue
        line = _ANSI_RE.sub("", raw) if "\x1b" in raw else raw
        match = None if continuation else _STEP_RE.search(line)
        rest = " - " + line.lstrip()[2:] if continuation else line[match.end() :] if match else ""
        if not rest.strip():  # no step record here, or a bare `step:5` that is someone else's output
            log.other_lines += 1
            in_record = False
            continue
        log.lines_read += 1
        if number == cut_line:
            log.skip(number, "cut last line (no newline at the end; file still being written?)")
            break
        items = _items(rest, partial, first_partial, number)
        if not items:
            log.skip(number, "step line without key:value pairs")
            in_record = False
            continue
        if match is not None:
            step = int(match.group(1))
            if step > INT64_MAX:
                log.skip(number, "step out of range")
                in_record = False
                continue
            log.records += 1
            builder.start(step, number)
        for key, value in items:
            builder.add(key, value)
        in_record = True
        if match is not None and sampled < _FORMAT_SAMPLE_LINES:
            sampled += 1
            values = [m.group(2) or m.group(3) for m in _ITEM_RE.finditer(rest)]
            if "np." in rest or any(_THREE_DECIMALS_RE.fullmatch(v) is None for v in values):
                full_repr = True
            elif values:
                three_decimals = True
    if full_repr:
        log.features.add("console_full_repr")
    elif three_decimals:
        log.features.add("console_three_decimals")
    for reason, count in partial.items():
        log.warnings.append(f"{count} line(s) with {reason}; first at line {first_partial[reason]}")
    return builder.build()


def _items(
    rest: str, partial: Counter[str], first_partial: dict[str, int], number: int
) -> list[tuple[str, float]]:
    """The (key, value) pairs of ``rest`` (the text after ``step:N``, starting with `` - ``)."""
    if _CLEAN_RE.fullmatch(rest):
        return [(key, _float(wrapped or plain)) for key, wrapped, plain in _ITEM_RE.findall(rest)]
    items: list[tuple[str, float]] = []
    for chunk in rest.split(" - ")[1:]:
        match = _LOOSE_ITEM_RE.match(chunk)
        if match is None:
            if chunk.strip():
                _note(partial, first_partial, _BAD_VALUE, number)
            continue
        key, wrapped, plain, trailing = match.groups()
        items.append((key, _float(wrapped or plain)))
        if trailing.strip():
            _note(partial, first_partial, _GLUED, number)
            break
    return items


def _note(partial: Counter[str], first: dict[str, int], reason: str, number: int) -> None:
    partial[reason] += 1
    first.setdefault(reason, number)


def _float(text: str) -> float:
    if text == "True":
        return 1.0
    if text == "False":
        return 0.0
    return float(text)
