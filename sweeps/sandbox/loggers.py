"""LOGGERS (verl/utils/tracking.py, verl/utils/logger/aggregate_logger.py): console and file, as verl writes them."""

from __future__ import annotations

import json
import math
import numbers
import os
import pprint
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .args import Args


def console_line(data: dict[str, Any], step: int) -> str:
    """aggregate_logger.concat_dict_to_str: 'step:N - key:pformat(value) - ...', numbers only."""
    parts = [f"step:{step}"]
    parts += [f"{k}:{pprint.pformat(v)}" for k, v in data.items() if isinstance(v, numbers.Number)]
    return " - ".join(parts)


def _json_value(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (numbers.Integral, np.integer)):
        return int(v)
    if isinstance(v, (numbers.Real, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None  # orjson writes NaN and +-inf as null
    return v


def jsonl_line(data: dict[str, Any], step: int) -> str:
    """tracking.FileLogger: one compact JSON object per log call."""
    payload = {"step": step, "data": {k: _json_value(v) for k, v in data.items()}}
    return json.dumps(payload, separators=(",", ":"), allow_nan=False)


def file_logger_path(project_name: str, experiment_name: str) -> Path:
    """tracking.FileLogger: $VERL_FILE_LOGGER_PATH, else $VERL_FILE_LOGGER_ROOT (or .)/project/experiment.jsonl."""
    explicit = os.environ.get("VERL_FILE_LOGGER_PATH")
    if explicit:
        return Path(explicit)
    root = Path(os.path.expanduser(os.environ.get("VERL_FILE_LOGGER_ROOT", ".")))
    return root / project_name / f"{experiment_name}.jsonl"


class Tracking:
    """The backends the sandbox can write: console (stdout) and file (JSONL). Others are skipped with a note."""

    def __init__(self, args: Args, echo: bool) -> None:
        backends = list(args.logger)
        self.console = echo and "console" in backends
        self.fp = None
        if "file" in backends or os.environ.get("VERL_FILE_LOGGER_PATH"):
            path = file_logger_path(args.project_name, args.experiment_name)
            path.parent.mkdir(parents=True, exist_ok=True)
            if echo and not os.environ.get("VERL_FILE_LOGGER_PATH"):  # verl says so only for a derived path
                print(f"Creating file logger at {path}", file=sys.stderr)
            self.fp = path.open("w", encoding="utf-8")
        skipped = [b for b in backends if b not in ("console", "file")]
        if skipped and echo:
            print(f"sandbox: logger backend(s) {', '.join(skipped)} are not available in the sandbox; skipped",
                  file=sys.stderr)
        self.history: list[tuple[int, dict[str, Any]]] = []

    def log(self, data: dict[str, Any], step: int) -> None:
        self.history.append((step, data))
        if self.console:
            print(console_line(data, step), flush=True)
        if self.fp is not None:
            self.fp.write(jsonl_line(data, step) + "\n")
            self.fp.flush()

    def finish(self) -> None:
        if self.fp is not None:
            self.fp.close()
