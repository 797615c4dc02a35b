"""Which RUNNING trials still have a live driver, and which were orphaned by a killed one.

Optuna's heartbeat only works with ``study.optimize`` (not with ask/tell, which a sweep uses), so each
trial carries its own lease:

- the trial's user attribute ``driver`` names the driving process (host, pid, and the pid's start time,
  so a recycled pid is not mistaken for the driver);
- ``<trial dir>/lease.json`` names the trial's process (local: pid, process group and start time; Ray:
  the address and submission id), and its modification time is refreshed every few seconds while the
  driver lives.

A RUNNING trial is orphaned when its driver is on this host and no longer runs, or when its lease has not
been refreshed for ``stale_after_s`` (a driver on another host sharing the storage). A RUNNING trial with
no driver attribute (its driver died right after ``ask``) is orphaned when every other driver the study has
seen (its ``drivers`` attribute) is dead on this host, or once it is that old.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HEARTBEAT_S = 5.0
"""how often a driver refreshes the leases of its running trials"""
STALE_AFTER_S = 120.0
"""a lease not refreshed for this long belongs to a dead driver"""


def process_start_ticks(pid: int) -> int | None:
    """The start time of a process in clock ticks since boot (``/proc/<pid>/stat`` field 22); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its closing ')'
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int, start_ticks: int | None) -> bool:
    """The process with this pid runs and (where known) started at this time."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = process_start_ticks(pid)
    if now is None:
        return Path(f"/proc/{pid}").exists() or not Path("/proc/self/stat").exists()
    return start_ticks is None or now == start_ticks


@dataclass(frozen=True)
class DriverIdentity:
    """The sweep driver process that owns a trial."""

    host: str
    pid: int
    start_ticks: int | None

    @classmethod
    def current(cls) -> DriverIdentity:
        return cls(socket.gethostname(), os.getpid(), process_start_ticks(os.getpid()))

    @classmethod
    def from_dict(cls, data: Any) -> DriverIdentity | None:
        if not isinstance(data, dict) or "host" not in data or "pid" not in data:
            return None
        return cls(str(data["host"]), int(data["pid"]), data.get("start_ticks"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def alive(self) -> bool | None:
        """True/False for a driver on this host; None for one on another host (only its lease can tell)."""
        if self.host != socket.gethostname():
            return None
        return pid_alive(self.pid, self.start_ticks)


class Lease:
    """``<trial dir>/lease.json``: how to find a trial's process again, refreshed while its driver lives."""

    def __init__(self, trial_dir: Path) -> None:
        self.path = Path(trial_dir) / "lease.json"

    def write(self, driver: DriverIdentity, handle: dict[str, Any]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"driver": driver.to_dict(), "handle": handle}))
        os.replace(tmp, self.path)

    def refresh(self) -> None:
        with contextlib.suppress(OSError):
            os.utime(self.path)

    def read(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def age_s(self) -> float | None:
        try:
            return time.time() - self.path.stat().st_mtime
        except OSError:
            return None


def is_orphaned(driver_attr: Any, lease: Lease | None, started_s_ago: float | None,
                stale_after_s: float = STALE_AFTER_S, other_drivers: list[Any] | None = None) -> bool:
    """Whether a RUNNING trial has lost its driver (see the module docstring).

    ``other_drivers``: the study's other drivers (its ``drivers`` attribute); a trial that names no driver
    belongs to one of them, and is orphaned at once when none of them runs on this host any more.
    """
    driver = DriverIdentity.from_dict(driver_attr)
    if driver is None:
        if other_drivers is not None and all(
                (d := DriverIdentity.from_dict(o)) is not None and d.alive() is False for o in other_drivers):
            return True
        return started_s_ago is None or started_s_ago > stale_after_s
    alive = driver.alive()
    if alive is not None:
        return not alive
    age = lease.age_s() if lease is not None else None
    return age is None or age > stale_after_s
