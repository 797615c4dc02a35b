"""The key verl reads for a setting in a given version, where its YAML still ships an older, unread one.

From ``knowledge/read_keys.yaml``: e.g. ``actor.grad_clip`` is in verl 0.9.1's ``dp_actor.yaml`` but only
``actor.optim.clip_grad`` reaches the engine's gradient clipping. A change to the unread key would cost the
user a run and change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from advisor.datafiles import load_knowledge

from ._version import in_range


@dataclass(frozen=True)
class UnreadKey:
    """A key verl ``verl`` accepts and never reads, the key it reads instead, and where that was read."""

    key: str  # a trailing ".*" stands for any key under it
    read_as: str
    verl: str
    source: str
    strategies: tuple[str, ...] = ()  # only under these actor strategies (empty: any)
    except_entry: str | None = None  # an entry point (module path part) that still reads it


@cache
def _table() -> tuple[UnreadKey, ...]:
    return tuple(UnreadKey(e["key"], e["read_as"], e["verl"], e["source"], tuple(e.get("strategies", ())),
                           e.get("except_entry")) for e in load_knowledge("read_keys.yaml"))


def _match(pattern: str, key: str) -> str | None:
    """What a trailing '*' of ``pattern`` matched in ``key`` ('' for an exact match; None: no match)."""
    if pattern.endswith(".*"):
        head = pattern[:-1]
        return key[len(head):] if key.startswith(head) and len(key) > len(head) else None
    return "" if key == pattern else None


def unread_key(key: str, version: str | None) -> tuple[UnreadKey, str] | None:
    """The table's entry for ``key`` in ``version`` and the key verl reads instead (None: verl reads ``key``)."""
    if version is None:
        return None
    for entry in _table():
        rest = _match(entry.key, key)
        if rest is not None and in_range(version, entry.verl):
            return entry, entry.read_as[:-1] + rest if entry.read_as.endswith(".*") else entry.read_as
    return None


def read_key(key: str, version: str | None) -> str:
    """The key verl ``version`` reads for ``key`` (``key`` itself unless the table names another)."""
    found = unread_key(key, version)
    return found[1] if found is not None else key
