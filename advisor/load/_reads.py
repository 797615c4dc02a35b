"""Which config keys a stage reads: recorded while it runs, so a note about a key is shown only when some
check depends on that key (an undefined ``$HOME`` in ``data.train_files`` matters to nobody)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_READS: ContextVar[set[str] | None] = ContextVar("advisor_config_reads", default=None)


def note_read(key: str) -> None:
    """Record a read of ``key`` (a no-op unless a ``recording_reads`` block is open)."""
    reads = _READS.get()
    if reads is not None:
        reads.add(key)


@contextmanager
def recording_reads() -> Iterator[set[str]]:
    """Collect every key read through ``VerlConfig.get``/``has`` inside the block (nested blocks share one set)."""
    outer = _READS.get()
    reads: set[str] = set() if outer is None else outer
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def was_read(key: str, reads: Iterable[str]) -> bool:
    """Whether ``key`` or a section holding it (``actor_rollout_ref.actor`` read whole) was read."""
    return any(key == r or key.startswith(r + ".") or not r for r in reads)
