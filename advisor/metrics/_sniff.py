"""Tell which metrics format a file or directory holds, by its content (never by its name's extension)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from advisor import limits
from advisor.errors import MetricsError
from advisor.inputfile import binary_kind, open_regular, utf16_bom

from ._formats import FORMAT_LIST, head_is
from ._frame import MetricsFormat

_HEAD_BYTES = 1 << 16
_LONG_LINE_BYTES = limits.SNIFF_LONG_LINE_BYTES  # read this far when the head holds no line break
_JSON_PROBE_LINES = 20
_MAX_DEPTH = 6  # how deep to look in a directory for event files or a W&B history
_WANDB_HISTORY = "wandb-history.jsonl"
_TEXT_CONTROL = bytes(sorted(set(range(0x20)) - {0x09, 0x0A, 0x0C, 0x0D, 0x1B}))
# top-level sections of verl's trainer config (ppo_trainer.yaml); two of them at column 0 = a config
_VERL_CONFIG_RE = re.compile(
    r"^(actor_rollout_ref|algorithm|trainer|data|critic|reward_model|custom_reward_function|ray_kwargs)\s*:",
    re.MULTILINE,
)
_LAUNCH_RE = re.compile(r"verl\.trainer\.main_\w+|\bmain_ppo\b")


def detect_format(path: str | os.PathLike[str]) -> tuple[MetricsFormat, Path]:
    """The format of the metrics at ``path`` and the file or run directory to read.

    A directory must hold exactly one TensorBoard run (event files in one folder, possibly nested as
    ``tensorboard_log/{project}/{experiment}``) or one W&B ``wandb-history.jsonl``.

    Raises:
        MetricsError: missing, empty, binary or unrecognised input (one line naming the file).
    """
    target = Path(path)
    if target.is_dir():
        return _detect_dir(target)
    if not target.exists():
        raise MetricsError("no such file or directory", path=str(target))
    fd = open_regular(target, MetricsError)  # a FIFO would block, /dev/zero never ends
    try:
        with os.fdopen(fd, "rb") as fh:
            head = fh.read(_HEAD_BYTES)
            if b"\n" not in head and len(head) == _HEAD_BYTES:
                head += fh.read(_LONG_LINE_BYTES)
    except OSError as err:
        raise MetricsError(f"cannot read ({err.strerror or err})", path=str(target)) from err
    _refuse_shape(head, target)
    if head and not head.strip(b"\x00"):
        raise MetricsError("starts with a run of NUL bytes and nothing else in its first KiBs (logrotate's "
                           "copytruncate leaves one under a writer that kept its offset)", path=str(target),
                           suggestion="pass the rotated file, or strip the NULs: tr -d '\\000'")
    return _detect_bytes(head.lstrip(b"\x00"), target), target


def _refuse_shape(head: bytes, path: Path) -> None:
    """Name the text shapes the readers do not take: UTF-16 (PowerShell's ``>``) and CR-only line ends. A run of
    NUL bytes at the start (logrotate's ``copytruncate`` under a writer that kept its offset) is read past."""
    if utf16_bom(head):
        raise MetricsError("is UTF-16 text (PowerShell's '>' writes it); the metrics readers take UTF-8",
                           path=str(path), suggestion=f"convert it: iconv -f UTF-16 -t UTF-8 {path} > metrics.log")
    if b"\r" in head and b"\n" not in head and len(head.split(b"\r")) > 2:
        raise MetricsError("has CR-only line ends (\\r, no \\n)", path=str(path),
                           suggestion=f"convert them: tr '\\r' '\\n' < {path} > metrics.log")


def _detect_dir(root: Path) -> tuple[MetricsFormat, Path]:
    from ._tensorboard import EVENT_FILE_RE

    event_dirs: set[Path] = set()
    histories: list[Path] = []
    wandb_binary = False
    for folder, dirs, files in os.walk(root):
        depth = len(Path(folder).relative_to(root).parts)
        if depth >= _MAX_DEPTH:
            dirs[:] = []
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if any(EVENT_FILE_RE.match(f) for f in files):
            event_dirs.add(Path(folder))
        if _WANDB_HISTORY in files:
            histories.append(Path(folder) / _WANDB_HISTORY)
        wandb_binary = wandb_binary or any(f.endswith(".wandb") for f in files)
    if len(event_dirs) == 1:
        return "tensorboard", event_dirs.pop()
    if len(event_dirs) > 1:
        runs = sorted(str(d.relative_to(root)) or "." for d in event_dirs)
        shown = ", ".join(runs[:3]) + (", ..." if len(runs) > 3 else "")
        raise MetricsError(
            f"holds {len(runs)} TensorBoard runs ({shown})", path=str(root), suggestion="pass one run's directory"
        )
    if len(histories) == 1:
        return "wandb-jsonl", histories[0]
    if len(histories) > 1:
        raise MetricsError(
            f"holds {len(histories)} W&B runs", path=str(root), suggestion="pass one run's wandb-history.jsonl"
        )
    if wandb_binary:
        raise MetricsError(
            "directory holds a W&B run only as a binary .wandb file",
            path=str(root),
            suggestion="export the run's history as CSV (W&B UI or API) and pass that",
        )
    raise MetricsError(
        "directory holds no TensorBoard event files and no W&B wandb-history.jsonl",
        path=str(root),
        suggestion="pass the metrics file itself (verl JSONL, console log or W&B CSV)",
    )


def _detect_bytes(head: bytes, path: Path) -> MetricsFormat:
    if not head.strip():
        raise MetricsError("file is empty", path=str(path), suggestion="was the run started with a metrics logger?")
    if head_is("tensorboard", head):
        return "tensorboard"
    if (what := binary_kind(head)) is not None:
        raise MetricsError(f"file is {what}", path=str(path))
    lines = head.removeprefix(b"\xef\xbb\xbf").split(b"\n", _JSON_PROBE_LINES * 2)
    json_kind = _json_kind(lines[: _JSON_PROBE_LINES * 2])
    if json_kind is not None:
        return json_kind  # even with a few junk bytes further on: those lines are skipped
    if _looks_binary(head[:4096]):
        raise MetricsError("binary data, not a metrics log", path=str(path), suggestion=_KINDS)
    if head_is("wandb-csv", lines[0]):
        return "wandb-csv"
    return "console"


_KINDS = ("expected a verl JSONL or console log, TensorBoard event files, a W&B CSV / wandb-history.jsonl, or flat "
          "JSON lines with a 'step'")


def _looks_binary(sample: bytes) -> bool:
    """More than 1% control characters or invalid UTF-8: a text log has (almost) none."""
    control = len(sample) - len(sample.translate(None, _TEXT_CONTROL))
    invalid = sample.decode("utf-8", errors="replace").count("\ufffd")
    return (control + invalid) * 100 > len(sample)


def _json_kind(lines: list[bytes]) -> MetricsFormat | None:
    """verl JSONL, W&B history JSONL or flat JSON lines, from the first lines that parse as JSON objects."""
    probed = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if not line.startswith(b"{"):
            probed += 1
            if probed >= _JSON_PROBE_LINES:
                return None
            continue
        probed += 1
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            if probed >= _JSON_PROBE_LINES:
                return None
            continue
        if isinstance(obj, dict):  # the first JSON-lines format whose objects look like this one
            kind = next((f.name for f in FORMAT_LIST if f.json_object is not None and f.json_object(obj)), None)
            if kind is not None:
                return kind
        if probed >= _JSON_PROBE_LINES:
            return None
    return None


def _is_yaml_mapping(text: str) -> bool:
    import yaml

    try:
        return isinstance(yaml.safe_load(text), dict)
    except yaml.YAMLError:
        return False


def not_metrics_reason(path: Path) -> str | None:
    """Why a text file with no step records is not metrics at all (a verl config, a launch script)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    sections = _VERL_CONFIG_RE.findall(head)
    if len(sections) >= 2 or (sections and _is_yaml_mapping(head)):
        return "looks like a verl config, not metrics"
    if _LAUNCH_RE.search(head):
        return "looks like a verl launch script, not metrics"
    return None
