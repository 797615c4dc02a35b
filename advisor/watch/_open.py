"""Which source a SOURCE argument names: ``ray://JOB_ID``, a TensorBoard run directory, or a file being written.

Apart from the sources themselves, so that each source module builds on ``_sources`` and none imports back.
"""

from __future__ import annotations

import os
from pathlib import Path

from advisor.errors import MetricsError

from ._sources import RAY_SCHEME, LineSource, Source
from ._tail import FileTail


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
