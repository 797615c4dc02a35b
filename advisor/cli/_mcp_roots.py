"""What an MCP tool call may read: the server's roots, and nothing else of the user's.

A tool's path arguments are checked before the job runs (``_mcp._confined``), but a job reads paths its
arguments only name indirectly: a launch script's ``--config-path=../outside`` and ``--config-name``, the
model path of a config (its ``config.json``), a Hydra run directory's files. Each reader would need its own
check, and a new reader would silently escape; so the check sits where every read of this process passes: a
PEP 578 audit hook (``sys.addaudithook``) on the ``open``, ``os.listdir`` and ``os.scandir`` events
(https://docs.python.org/3/library/audit_events.html), which refuses a read outside the allowed folders while
a tool call runs. Links are followed (``os.path.realpath``) before the test.

Allowed besides the roots: the program's own files (Python's prefixes, ``sys.path``, the ``knowledge``
package, the knowledge cache), a few system files no user writes (``/dev/null``, ``/dev/urandom``,
``/proc/self``, a process's ``/proc/PID/stat``, time zones), and what the call itself created (a verify
sweep's trial folders: an ``os.mkdir`` or a file opened for writing while guarded). Writes are not refused
here: the only paths a tool writes (``out``, ``png_dir``, ``storage``) are arguments, checked before the job.

The hook cannot be removed once added (PEP 578), so it is added once and is inert outside :meth:`ReadGuard.only`.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError

_SYSTEM = ("/dev/null", "/dev/urandom", "/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/etc/localtime",
           "/usr/share/zoneinfo", "/etc/timezone")
_READ_EVENTS = ("open", "os.listdir", "os.scandir")
_PROCESS_STATE = re.compile(r"/proc/\d+/(?:stat|status)")  # a verify trial's liveness (sweeps/_liveness.py)


class OutsideRoots(AdvisorError):
    """A tool call tried to read a path outside the server's roots."""


def _real(path: str | bytes | os.PathLike[Any]) -> Path:
    return Path(os.path.realpath(os.fsdecode(path)))


def _under(path: Path, folders: Sequence[Path]) -> bool:
    return any(path == folder or path.is_relative_to(folder) for folder in folders)


def _program_folders() -> list[Path]:
    """The folders of the program itself: Python, its imports, the advisor's data and cache."""
    from advisor.datafiles import cache_dir, knowledge_dir

    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *_SYSTEM,
             str(Path(__file__).resolve().parents[1]), str(knowledge_dir())]
    found += [entry for entry in sys.path if entry and os.path.isdir(entry)]
    cache = cache_dir()
    if cache is not None:
        found.append(str(cache))
    return [_real(p) for p in dict.fromkeys(found)]


class ReadGuard:
    """While :meth:`only` holds, a read outside the allowed folders raises :class:`OutsideRoots` in the reader."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._roots: list[Path] = []
        self._program: list[Path] = []
        self._made: list[Path] = []
        self._hooked = False
        self._stopped = False

    @contextmanager
    def only(self, roots: Sequence[Path]) -> Iterator[None]:
        """Reads limited to ``roots`` (resolved) and the program's own files, in every thread, until exit."""
        with self._lock:
            if not self._hooked:
                self._program = _program_folders()
                sys.addaudithook(self._hook)
                self._hooked = True
            self._roots = [_real(r) for r in roots]
            self._active += 0 if self._stopped else 1
        try:
            yield
        finally:
            with self._lock:
                self._active = max(0, self._active - 1)
                if not self._active:
                    self._made = []

    def stop(self) -> None:
        """Reads are free again, for good: the server is exiting (it reads /proc to stop what tools started),
        while an abandoned tool call may still hold :meth:`only` in its thread."""
        with self._lock:
            self._active = 0
            self._stopped = True

    def allowed(self, path: str | bytes | os.PathLike[Any]) -> bool:
        real = _real(path)
        if _PROCESS_STATE.fullmatch(str(real)):
            return True
        return _under(real, self._roots) or _under(real, self._program) or _under(real, self._made)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self._active or not (event in _READ_EVENTS or event == "os.mkdir"):
            return
        path = args[0] if args else None
        if event.startswith("os.") and path is None:
            path = "."  # os.listdir() / os.scandir(): the working folder
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # a file descriptor: what it reads was opened (and checked) before
        if event == "os.mkdir" or (event == "open" and _writes(args)):
            self._made.append(_real(path))  # the call's own output (a trial folder), readable back
            return
        if not self.allowed(path):
            shown = os.fsdecode(path)
            raise OutsideRoots(f"'{shown}' is outside the folders this server may read "
                               f"({', '.join(str(r) for r in self._roots)})",
                               suggestion="start advisor mcp in the project's folder, or widen it with --root DIR")


def _writes(args: tuple[Any, ...]) -> bool:
    """Whether an ``open`` event opens for writing (``open(path, mode, flags)``: mode for open(), flags for os.open)."""
    mode = args[1] if len(args) > 1 else None
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    return bool(flags & (os.O_WRONLY | os.O_RDWR))


READ_GUARD = ReadGuard()
