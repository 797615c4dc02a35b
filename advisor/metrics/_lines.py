"""Complete lines out of bytes appended to a log being written, in bounded memory.

The last, unterminated piece of what was read waits for its newline; a line longer than ``max_line`` is
dropped whole, and its bytes are not kept while it grows (a trainer writing one endless line costs nothing).
Used by ``advisor watch``'s file follower and by the sweep driver's tail of a trial's metrics file.
"""

from __future__ import annotations


class LineSplitter:
    """Feed appended bytes, get the complete lines of at most ``max_line`` bytes (without their newline)."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self.partial = b""  # the unterminated end of what was fed
        self.dropped = 0  # lines dropped for being longer than max_line
        self._overlong = False  # inside a line past max_line: drop bytes up to its end

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        if self._overlong and lines:
            lines.pop(0)  # the end of the over-long line
            self._overlong = False
        if len(self.partial) > self.max_line:
            self.partial, self._overlong = b"", True
            self.dropped += 1
        kept = [line for line in lines if len(line) <= self.max_line]
        self.dropped += len(lines) - len(kept)
        return kept

    def reset(self) -> None:
        """The file started over (truncated or replaced): forget the unterminated piece."""
        self.partial, self._overlong = b"", False
