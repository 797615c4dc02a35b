"""One reader for every file the advisor is given: a config, a metrics file, a report's input, a model config.

An input must be a regular file. That is checked with ``os.stat`` *before* opening it, since opening a FIFO
blocks until a writer comes, and ``/dev/zero`` or ``/dev/urandom`` never end (their ``st_size`` is 0, so a
size check alone lets them through). It is then opened with ``O_NONBLOCK`` and checked again on the open
descriptor (a path swapped for a FIFO between the two calls still does not block), and read with a byte cap:
``cap + 1`` bytes are read, and one more than the cap is refused, whatever ``st_size`` said.

Text is decoded as UTF-8, or UTF-16 when it starts with a byte-order mark (PowerShell's ``>`` writes
UTF-16LE with one). Line ends are normalised: ``\\r\\n`` and a lone ``\\r`` (old Mac tools, some progress
bars) become ``\\n``. (A run of NUL bytes, what logrotate's ``copytruncate`` leaves where the file was
emptied under a writer that kept its offset, is read past by the metrics readers: ``advisor.metrics``.)
"""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

from advisor.errors import AdvisorError, ConfigError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


# (magic prefix, what it is) for binary files people pass by mistake, named in their one-line error
KNOWN_BINARY: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip-compressed; decompress it first (gunzip -k)"),
    (b"PK\x03\x04", "a zip archive; extract the file first"),
    (b"PAR1", "a Parquet file"),
    (b"SQLite format 3\x00", "an SQLite database (an MLflow store?)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed; decompress it first"),
    (b"BZh", "bzip2-compressed; decompress it first"),
    (b"\xfd7zXZ\x00", "xz-compressed; decompress it first"),
    (b":W&B", "a W&B binary run file (.wandb); export the history with the W&B API or UI as CSV"),
)


def binary_kind(head: bytes) -> str | None:
    """What a file starting with ``head`` is, when it is one of the binary formats people pass by mistake."""
    return next((what for magic, what in KNOWN_BINARY if head.startswith(magic)), None)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    return next((word for test, word in _KINDS if test(mode)), "not a regular file")


def require_regular(path: str | os.PathLike[str], error: type[AdvisorError] = ConfigError) -> os.stat_result:
    """``os.stat`` of ``path`` when it is a regular file (links followed).

    Raises:
        error: it does not exist, cannot be read, or is a FIFO, device, socket or directory.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError as err:
        raise error("file not found", path=str(path)) from err
    except (OSError, ValueError) as err:  # ValueError: a NUL in the name
        raise error(f"cannot read ({getattr(err, 'strerror', None) or err})", path=str(path)) from err
    if not stat.S_ISREG(st.st_mode):
        raise error(f"is {kind_of(st.st_mode)}, not a regular file", path=str(path),
                    suggestion="pass a file (the advisor does not read pipes or devices)")
    return st


def open_regular(path: str | os.PathLike[str], error: type[AdvisorError] = ConfigError) -> int:
    """A read-only descriptor of ``path``, a regular file (checked before and after opening)."""
    require_regular(path, error)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise error(f"cannot read ({err.strerror})", path=str(path)) from err
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # swapped between the stat and the open
        os.close(fd)
        raise error(f"is {kind_of(st.st_mode)}, not a regular file", path=str(path))
    return fd


def read_capped(path: str | os.PathLike[str], cap: int, error: type[AdvisorError] = ConfigError,
                what: str = "file") -> bytes:
    """The bytes of regular file ``path``; ``error`` when it holds more than ``cap`` bytes."""
    fd = open_regular(path, error)
    limit = f"(the limit is {cap / 2**20:,.0f} MiB)"
    size = os.fstat(fd).st_size
    if size > cap:  # before reading it: a 2 GB file is not a config
        os.close(fd)
        raise error(f"is {size / 2**20:,.0f} MiB; a {what} is far smaller {limit}", path=str(path))
    try:
        chunks: list[bytes] = []
        left = cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as err:
        raise error(f"cannot read ({err.strerror})", path=str(path)) from err
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > cap:
        raise error(f"holds more than {cap / 2**20:,.0f} MiB; a {what} is far smaller {limit}", path=str(path))
    return data


def utf16_bom(data: bytes) -> str | None:
    """"utf-16-le" or "utf-16-be" when ``data`` starts with that byte-order mark."""
    if data.startswith(codecs.BOM_UTF16_LE) and not data.startswith(codecs.BOM_UTF32_LE):
        return "utf-16-le"
    if data.startswith(codecs.BOM_UTF16_BE):
        return "utf-16-be"
    return None


def decode_text(data: bytes, path: str | os.PathLike[str], error: type[AdvisorError] = ConfigError,
                what: str = "text") -> str:
    """UTF-8 (a BOM dropped) or, by its BOM, UTF-16 -> str with ``\\n`` line ends."""
    encoding = utf16_bom(data)
    try:
        text = data[2:].decode(encoding) if encoding else data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise error(f"is not UTF-8 or UTF-16 {what}", path=str(path)) from err
    return normalize_newlines(text)


def normalize_newlines(text: str) -> str:
    """``\\r\\n`` and a lone ``\\r`` -> ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text




def read_text(path: str | os.PathLike[str], cap: int, error: type[AdvisorError] = ConfigError,
              what: str = "text file") -> str:
    """A regular file of at most ``cap`` bytes, decoded by :func:`decode_text`."""
    return decode_text(read_capped(path, cap, error, what), Path(path), error, what)
