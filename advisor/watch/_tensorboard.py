"""Follow a TensorBoard run directory: new event files and the records appended to each.

verl's tensorboard backend calls ``add_scalar(key, value, step)`` per metric (verl/utils/tracking.py), so
one step arrives as many events; a step is handed on once a later step starts (or the watch stops). Each
file is a sequence of TFRecords (length, CRC, event, CRC); a record still being written is read later.
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path

from advisor.errors import MetricsError, install_hint
from advisor.metrics import event_scalars

from ._sources import Record
from ._tail import READ_CHUNK

_HEADER = struct.Struct("<QI")
_FOOTER = 4
_EVENT_FILE = "events.out.tfevents."


class TensorBoardSource:
    def __init__(self, run_dir: Path) -> None:
        try:
            import tensorboard.compat.proto.event_pb2  # noqa: F401
        except ImportError as err:
            raise MetricsError("following TensorBoard event files needs the tensorboard package",
                               path=str(run_dir), suggestion=install_hint("tensorboard")) from err
        self.dir = run_dir
        self.name = str(run_dir)
        self.fmt: str | None = "tensorboard"
        self.ended = False
        self._offsets: dict[str, int] = {}
        self._pending: Record | None = None

    def _files(self) -> list[Path]:
        files = [p for p in self.dir.iterdir() if p.name.startswith(_EVENT_FILE) and p.is_file()]
        return sorted(files, key=lambda p: (p.name.split(".")[3:4], p.name))  # launch time, then name

    def poll(self) -> list[Record]:
        out: list[Record] = []
        for path in self._files():
            for data in self._records(path):
                parsed = event_scalars(data)
                if parsed is None:
                    continue
                step, values = parsed
                if self._pending is not None and self._pending[0] == step:
                    self._pending[1].update(values)
                    continue
                if self._pending is not None:
                    out.append(self._pending)
                self._pending = (step, dict(values))
        return out

    def _records(self, path: Path) -> list[bytes]:
        offset = self._offsets.get(path.name, 0)
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                return []  # an event file's name on a FIFO or a device: never opened
            with path.open("rb") as fp:
                fp.seek(offset)
                data = fp.read(READ_CHUNK)
        except FileNotFoundError:
            return []
        records, pos = [], 0
        while pos + _HEADER.size <= len(data):
            length, _ = _HEADER.unpack_from(data, pos)
            stop = pos + _HEADER.size + length + _FOOTER
            if stop > len(data):
                break  # still being written
            records.append(data[pos + _HEADER.size: stop - _FOOTER])
            pos = stop
        self._offsets[path.name] = offset + pos
        return records

    def close(self) -> list[Record]:
        pending, self._pending = self._pending, None
        return [pending] if pending is not None else []
