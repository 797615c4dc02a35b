"""The key verl reads for a setting in a given version, where its YAML still ships an older, unread one.

From ``knowledge/read_keys.yaml``: e.g. ``actor.grad_clip`` is in verl 0.9.1's ``dp_actor.yaml`` but only
``actor.optim.clip_grad`` reaches the engine's gradient clipping. A change to the unread key would cost the
user a run and change nothing.
"""

from __future__ import annotations

from functools import cache

from advisor.datafiles import load_knowledge

from ._version import in_range


@cache
def _table() -> tuple[tuple[str, str, str], ...]:
    return tuple((e["key"], e["read_as"], e["verl"]) for e in load_knowledge("read_keys.yaml"))


def read_key(key: str, version: str | None) -> str:
    """The key verl ``version`` reads for ``key`` (``key`` itself unless the table names another)."""
    if version is None:
        return key
    for old, new, spec in _table():
        if key == old and in_range(version, spec):
            return new
    return key
