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
from collections.abc import Iterator
from pathlib import Path

from advisor import limits
from advisor.plural import counted

from ._columns import ColumnStore, Keep
from ._frame import ReadLog
from ._nan import LOGGED_NAN, logged
from ._records import INT64_MAX, Records

_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# `step:N` not preceded by a name character: skips `global_step:3`, `timing_s/step:1.5`, `time_per_step:`
_STEP_RE = re.compile(r"(?<![\w/.@-])step:(\d+)(?= - |\s*$)")
# nan, NaN, inf, Infinity, -INF ...: every spelling of a non-finite value is read alike (float() takes them all)
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?i:nan|inf(?:inity)?)|True|False"
# a key: no spaces; colons only where what follows is not a value (`val-core/hf:gsm8k/...`)
_KEY = r"[^\s:]+(?::[^\s:]+)*?"
# one ` - key:value` item whose value ends the item; numpy >= 2 reprs are unwrapped (np.float64(0.5))
_ITEM_RE = re.compile(rf" - ({_KEY}):(?:np\.\w+\()?({_NUMBER})\)?(?= - |\s*$)")
# slow path, one item at a time: value, then whatever follows it (other output glued on)
_LOOSE_ITEM_RE = re.compile(rf"({_KEY}):(?:np\.\w+\(({_NUMBER})\)|({_NUMBER}))(.*)", re.DOTALL)
_THREE_DECIMALS_RE = re.compile(r"-?\d+\.\d{3}|-?nan|-?inf")
_BOOLS = {"True": "1", "False": "0"}
_FORMAT_SAMPLE_LINES = 50  # step lines looked at to tell `.3f` values from full reprs
_GLUED = "other output glued onto a step line (the rest of that line was ignored)"
_BAD_VALUE = "a value that is not a number (item ignored)"
_CUT = "cut last line (no newline at the end; file still being written?)"


def _stream(path: Path) -> Iterator[tuple[str, bool, int, bool]]:
    """Each line (without its newline), whether it is a last line with no newline, the bytes read so far, and
    whether it was longer than ``limits.CONSOLE_LINE_BYTES`` (then its text is empty: the rest of it is read past
    in bounded pieces, never held; a 5 GB NUL tail costs no more memory than a short line), as the file streams."""
    cap = limits.CONSOLE_LINE_BYTES
    with path.open("rb") as fh:
        read = 0
        while raw := fh.readline(cap + 1):
            read += len(raw)
            if len(raw) > cap and not raw.endswith(b"\n"):
                while (rest := fh.readline(cap)) and not rest.endswith(b"\n"):
                    read += len(rest)
                read += len(rest)
                yield "", False, read, True
                continue
            cut = not raw.endswith(b"\n")
            yield (raw if cut else raw[:-1]).decode("utf-8", errors="replace"), cut, read, False


def read_console(path: Path, *, log: ReadLog, keep: Keep | None = None) -> Records:
    """Read the ``step:N - key:value`` records of a console log; everything else counts as other output.

    ``keep``: whether a metric's values are kept (None: every metric's). The lines stream by and each kept
    metric fills one float64 column, so memory is that of the frame (a Python string per key and value of a
    2 GB log would take several times the file).
    """
    size = path.stat().st_size
    read = 0

    def expected_rows(rows: int) -> int:  # from the bytes read so far: the columns grow once, to about their size
        return int(rows * size / max(read, 1) * 1.02) + 1024

    out = ColumnStore(keep, expected_rows)
    partial: Counter[str] = Counter()
    first_partial: dict[str, int] = {}
    sampled = 0
    three_decimals = full_repr = False
    in_record = False  # the previous line was a step record (for wrapped ` - key:value` continuations)
    for number, (raw, cut, read, overlong) in enumerate(_stream(path), start=1):  # noqa: B007 (read: expected_rows)
        if overlong:
            log.skip(number, f"line longer than {limits.CONSOLE_LINE_BYTES:,} bytes (no verl line comes near)")
            in_record = False
            continue
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
        if cut:
            log.skip(number, _CUT)
            break
        keys, texts = _items(rest, partial, first_partial, number)
        if not keys:
            log.skip(number, "step line without key:value pairs")
            in_record = False
            continue
        if match is not None:
            digits = match.group(1)  # past 19 digits it is out of range; past 4,300 int() refuses it
            step = int(digits) if len(digits) <= 19 else INT64_MAX + 1
            if step > INT64_MAX:
                log.skip(number, "step out of range")
                in_record = False
                continue
            log.records += 1
            out.start(step, number)
            if sampled < _FORMAT_SAMPLE_LINES:
                sampled += 1
                if "np." in rest or any(_THREE_DECIMALS_RE.fullmatch(t) is None for t in texts):
                    full_repr = True
                else:
                    three_decimals = True
        out.add_texts(keys, texts)
        in_record = True
    if full_repr:
        log.features.add("console_full_repr")
    elif three_decimals:
        log.features.add("console_three_decimals")
    for reason, count in partial.items():
        log.warnings.append(f"{counted(count, 'line')} with {reason}; first at line {first_partial[reason]}")
    return out.build()


def _items(
    rest: str, partial: Counter[str], first_partial: dict[str, int], number: int
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The keys and number texts of ``rest`` (the text after ``step:N``, starting with `` - ``)."""
    pairs = _ITEM_RE.findall(rest)
    if len(pairs) == rest.count(" - "):  # every item is `key:number`: nothing glued on, nothing odd
        keys, texts = zip(*pairs, strict=True) if pairs else ((), ())
    else:
        keys, texts = _loose_items(rest, partial, first_partial, number)
    if "True" in rest or "False" in rest:
        texts = tuple(_BOOLS.get(t, t) for t in texts)
    return keys, texts


def _loose_items(
    rest: str, partial: Counter[str], first_partial: dict[str, int], number: int
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    keys: list[str] = []
    texts: list[str] = []
    for chunk in rest.split(" - ")[1:]:
        match = _LOOSE_ITEM_RE.match(chunk)
        if match is None:
            if chunk.strip():
                _note(partial, first_partial, _BAD_VALUE, number)
            continue
        key, wrapped, plain, trailing = match.groups()
        keys.append(key)
        texts.append(wrapped or plain)
        if trailing.strip():
            _note(partial, first_partial, _GLUED, number)
            break
    return tuple(keys), tuple(texts)


def _note(partial: Counter[str], first: dict[str, int], reason: str, number: int) -> None:
    partial[reason] += 1
    first.setdefault(reason, number)


def parse_console_line(text: str) -> tuple[int, dict[str, float]] | None:
    """One console line -> (step, {metric: value}); None for a line that is not a step record. The one reading of
    verl's console grammar for a line at a time (``advisor watch``, the sweep's tail), with the whole-file
    reader's patterns: a non-finite value (``nan``, ``inf``) is ``LOGGED_NAN`` or +-inf."""
    if "step:" not in text:
        return None
    text = (_ANSI_RE.sub("", text) if "\x1b" in text else text).rstrip("\r\n")
    match = _STEP_RE.search(text)
    if match is None or len(match.group(1)) > 18:
        return None
    rest = text[match.end():]
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
