"""Which source a SOURCE argument names: ``ray://JOB_ID``, a TensorBoard run directory, or a file being written.

Apart from the sources themselves, so that each source module builds on ``_sources`` and none imports back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import ConfigError, MetricsError
from advisor.metrics import parse_metrics_line
from advisor.plural import plural

from ._sources import RAY_SCHEME, LineSource, Source
from ._tail import FileTail

if TYPE_CHECKING:
    from advisor.load import VerlConfig


def open_source(spec: str, *, address: str | None = None) -> Source:
    """``ray://JOB_ID`` (with ``address``, else $RAY_ADDRESS), a TensorBoard run directory, or a file."""
    if spec.startswith(RAY_SCHEME):
        job = spec[len(RAY_SCHEME):].strip("/")
        if not job:
            raise MetricsError("no job id after ray://", path=spec, suggestion="write ray://<submission id>")
        from ._ray import RayJobSource

        return RayJobSource(job, address or os.environ.get("RAY_ADDRESS") or "http://127.0.0.1:8265")
    path = Path(spec)
    if path.is_dir():
        from ._tensorboard import TensorBoardSource

        return TensorBoardSource(path)
    return LineSource(FileTail(path), name=str(path))


def config_of_log(path: Path, overrides: Sequence[str] = (), *, verl_version: str | None = None,
                  idle_stop_minutes: float | None = None, poll_s: float = 0.2,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> VerlConfig:
    """``advisor watch LOG``: the config the log printed at start-up, read as ``advisor suggest LOG`` reads it
    (``advisor.load.load_config``), waiting while the log does not exist yet or has not printed it.

    verl prints its config (or ``set -x`` its launch command) before the first step, so once a step line is
    written without one, waiting longer cannot help: that is the input's error, as it is for ``suggest LOG``.

    Raises:
        ConfigError: the log reached its first step (or idled ``idle_stop_minutes``) with no config printed.
    """
    from advisor.load import load_config

    start = clock()
    while True:
        if path.is_file():
            try:
                return load_config(path, list(overrides), verl_version=verl_version)
            except ConfigError:
                if _has_step_line(path):
                    raise
        if idle_stop_minutes is not None and clock() - start >= idle_stop_minutes * 60:
            raise ConfigError(f"no config printed in {idle_stop_minutes:g} {plural('minute', idle_stop_minutes)}",
                              path=str(path), suggestion="pass the launch script too: advisor watch CONFIG LOG")
        sleep(poll_s)


def _has_step_line(path: Path) -> bool:
    """Whether the log's head already holds a step record (the config, if any, was printed before it)."""
    from advisor.load import read_log_head

    return any(parse_metrics_line(line, "console") is not None for line in read_log_head(path))
