"""Follow a file that another process is writing: only the bytes appended since the last poll are read.

The file may not exist yet (the run has not created its logger), may be truncated (verl's ``FileLogger``
opens its file with ``"w"``, so a restarted run starts it over) or rotated (moved away and created again,
as logrotate or a launcher that keeps ``run.log.1`` does). A last line without its newline is a line still
being written: it is kept until the rest arrives. Only a regular file is followed: a FIFO or a device at the
path is an error (:func:`advisor.inputfile.open_regular`; opening a FIFO would block, a device never ends).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from advisor.errors import MetricsError
from advisor.inputfile import kind_of, open_regular
from advisor.metrics import LineSplitter

MAX_LINE = 1 << 20  # bytes in one metrics line; verl's longest (every metric of a step) is a few KiB
READ_CHUNK = 8 << 20  # bytes read per poll at most, so a file written in one burst is taken in pieces
_HEAD = 64  # first bytes kept to tell a file truncated and rewritten past the offset between two polls


class FileTail:
    """Complete lines appended to ``path`` since the last :meth:`poll`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._ino: tuple[int, int] | None = None
        self._offset = 0
        self._lines = LineSplitter(MAX_LINE)
        self.rotations = 0
        self.truncations = 0
        self._cut = 0  # last lines cut off by a rotation or truncation
        self._head = b""  # the file's first bytes: they change when it is truncated and rewritten past our offset
        self.bytes_read = 0

    @property
    def partial(self) -> bytes:
        """The last line read so far without its newline (a line being written, or a cut last line)."""
        return self._lines.partial

    @property
    def dropped_lines(self) -> int:
        """Lines over MAX_LINE, or cut off by a rotation or truncation."""
        return self._lines.dropped + self._cut

    def poll(self) -> list[bytes]:
        lines: list[bytes] = []
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._fd is not None:  # moved away, its successor not created yet: finish the old one
                lines += self._drain()
            return lines
        if not stat.S_ISREG(st.st_mode):
            raise MetricsError(f"is {kind_of(st.st_mode)}, not a regular file", path=str(self.path),
                               suggestion="follow the file the run writes")
        ino = (st.st_dev, st.st_ino)
        if self._fd is not None and ino != self._ino:  # rotated: read the old file to its end, then switch
            lines += self._drain()
            self._close()
            self.rotations += 1
        if self._fd is None:
            try:
                self._fd = open_regular(self.path, MetricsError)
            except MetricsError:
                if not self.path.exists():  # gone between the stat and the open
                    return lines
                raise
            self._ino = (os.fstat(self._fd).st_dev, os.fstat(self._fd).st_ino)
            self._offset = 0
        size = os.fstat(self._fd).st_size
        if size < self._offset or (self._head and os.pread(self._fd, len(self._head), 0) != self._head):
            # truncated: the writer started over (and may have written more than we had read already)
            self.truncations += 1
            self._restart()
        lines += self._read(min(size, self._offset + READ_CHUNK))
        return lines

    def close(self) -> None:
        self._close()

    def _drain(self) -> list[bytes]:
        assert self._fd is not None
        lines = self._read(os.fstat(self._fd).st_size)
        if self._lines.partial:  # the rotated file's last line never got its newline
            self._cut += 1
        self._lines.reset()
        self._close()
        return lines

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._ino, self._head = None, None, b""

    def _restart(self) -> None:
        if self._lines.partial:
            self._cut += 1
        self._offset, self._head = 0, b""
        self._lines.reset()

    def _read(self, end: int) -> list[bytes]:
        assert self._fd is not None
        if end <= self._offset:
            return []
        chunk = os.pread(self._fd, end - self._offset, self._offset)
        if len(self._head) < _HEAD and self._offset == len(self._head):
            self._head += chunk[:_HEAD - len(self._head)]
        self._offset += len(chunk)
        self.bytes_read += len(chunk)
        return self._lines.feed(chunk)
