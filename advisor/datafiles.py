"""Locate and read the data files shipped in the ``knowledge`` package.

Parsing the YAML is most of what a short command such as ``advisor check`` spends after its imports, so
each parsed file is kept in a cache keyed by a hash of the file's bytes (``$XDG_CACHE_HOME/verl-advisor``,
else ``~/.cache/verl-advisor``): built on first use, never stale (a changed file has another key), and
skipped silently when the folder cannot be written or ``ADVISOR_NO_CACHE`` is set. Values are stored with
``marshal`` (plain data only, no code runs on load); a file holding other types (dates) is not cached.

What is computed from the parsed files (every key of a version's defaults) can be kept the same way with
:func:`derived`: the entry records the hash of each knowledge file read while computing it and the code that
computed it, and is rebuilt when either changes.
"""

from __future__ import annotations

import marshal
import os

try:  # the builtin BLAKE2: importing hashlib loads OpenSSL's _hashlib first (~2.5 ms of check's start-up)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b
from collections.abc import Callable, Hashable
from functools import cache, update_wrapper
from pathlib import Path
from typing import Any, Generic, TypeVar

from .errors import PlaybookError

_CACHE_FORMAT = f"m{marshal.version}s"  # a new marshal format writes new entries (s: entries carry their sum)
T = TypeVar("T")
_DIGESTS: dict[str, str] = {}  # knowledge file -> hash of its bytes, for the files read by this process
_RECORDERS: list[dict[str, str]] = []  # the files each derived() computation in progress has read


@cache
def knowledge_dir() -> Path:
    import knowledge  # the data package itself: its folder (importlib.resources would cost 5 ms to import)

    return Path(knowledge.__file__).parent


def cache_dir() -> Path | None:
    """Where parsed knowledge files are kept, or None when caching is off."""
    env = os.environ
    return _cache_dir(env.get("ADVISOR_NO_CACHE"), env.get("XDG_CACHE_HOME"), env.get("HOME"))


@cache
def _cache_dir(no_cache: str | None, xdg_cache_home: str | None, home: str | None) -> Path | None:
    """cache_dir for these environment values (asked ~40 times by one check: the paths are built once)."""
    if no_cache:
        return None
    # the XDG Base Directory spec: "If an implementation encounters a relative path in any of these variables it
    # should consider the path invalid and ignore it" (a relative one would write the cache into the current folder)
    if xdg_cache_home and os.path.isabs(xdg_cache_home):
        base = xdg_cache_home
    else:
        base = str((Path(home) if home else Path.home()) / ".cache")
    return Path(base) / "verl-advisor" / "knowledge"


def load_knowledge(relative: str) -> Any:
    """Parse a YAML file under knowledge/ (cached; treat the result as read-only)."""
    value = _load(relative)
    for recorder in _RECORDERS:
        recorder[relative] = _DIGESTS[relative]
    return value


@cache
def _load(relative: str) -> Any:
    path = knowledge_dir() / relative
    data = _read(path)
    _DIGESTS[relative] = _digest(data)
    entry = _entry(data)
    if entry is not None:
        found, value = _read_entry(entry)
        if found:
            return value
    import yaml  # only on a cache miss: the parsed files are cached, and importing yaml costs ~15 ms

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader is ~10x faster where libyaml exists
    try:
        value = yaml.load(data, Loader=loader)
    except yaml.YAMLError as err:
        raise PlaybookError(f"malformed YAML ({err})", path=str(path)) from err
    if entry is not None:
        _store(entry, value)
    return value


def derived(name: str, build: Callable[[], T], code: str) -> T:
    """``build()``, kept in the cache under ``name`` until a knowledge file it read or the file ``code`` (the
    module that computes it) changes. The value must be plain data ``marshal`` takes (sets and tuples are)."""
    folder = cache_dir()
    if folder is None:
        return build()
    try:
        stamp = Path(code).stat()
    except OSError:
        return build()
    code_key = f"{stamp.st_size}:{stamp.st_mtime_ns}"
    # the module's whole path: two installs of the advisor (a checkout, a release) keep an entry each, instead of
    # each replacing the other's on every run
    entry = folder / f"derived-{_digest((name + code).encode())}.{_CACHE_FORMAT}"
    found, stored = _read_entry(entry)
    if found and _derived_shape(stored):  # else absent, unreadable or of another shape: build it again
        stored_code, reads, stamps, value = stored
        if stored_code == code_key and all(_unchanged(rel, digest, stamps.get(rel)) for rel, digest in reads.items()):
            for recorder in _RECORDERS:  # an enclosing derivation depends on these files too
                recorder.update(reads)
            return value  # type: ignore[no-any-return]
    _RECORDERS.append({})
    try:
        value = build()
    finally:
        reads = _RECORDERS.pop()
    for recorder in _RECORDERS:
        recorder.update(reads)
    _store(entry, (code_key, reads, {rel: _stamp(rel) for rel in reads}, value))
    return value


def _stamp(relative: str) -> tuple[int, int] | None:
    """(size, mtime in ns) of a knowledge file: equal to the stored one, the file was not touched since."""
    try:
        stat = (knowledge_dir() / relative).stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _unchanged(relative: str, digest: str, stamp: tuple[int, int] | None) -> bool:
    """Whether a file a derived value read still holds the bytes it read: by its stamp when that is the same (no
    read: validating every version's trees by hash cost ~7 ms of check's start-up), else by the hash."""
    if relative not in _DIGESTS and stamp is not None and _stamp(relative) == tuple(stamp):
        return True
    return _file_digest(relative) == digest


class memo(Generic[T]):  # lower case: used as a decorator, like functools.cache
    """``functools.cache`` for a function that reads knowledge files: a call answered from memory still tells the
    :func:`derived` computations in progress which files the answer came from, so their cache entries are
    invalidated when one of those files changes."""

    def __init__(self, fn: Callable[..., T]) -> None:
        self._fn = fn
        self._store: dict[tuple[Hashable, ...], tuple[T, dict[str, str]]] = {}
        update_wrapper(self, fn)

    def __call__(self, *args: Hashable) -> T:
        hit = self._store.get(args)
        if hit is None:
            _RECORDERS.append({})
            try:
                value = self._fn(*args)
            finally:
                reads = _RECORDERS.pop()
            hit = self._store[args] = (value, reads)
        for recorder in _RECORDERS:
            recorder.update(hit[1])
        return hit[0]

    def cache_clear(self) -> None:
        self._store.clear()


def clear_memo() -> None:
    """Forget what this process has read (tests that change a knowledge file or the cache folder)."""
    _load.cache_clear()
    _DIGESTS.clear()


def _file_digest(relative: str) -> str | None:
    """The hash of a knowledge file's bytes now (None when it cannot be read)."""
    if relative in _DIGESTS:
        return _DIGESTS[relative]
    try:
        return _digest((knowledge_dir() / relative).read_bytes())
    except OSError:
        return None


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise PlaybookError(f"cannot read knowledge file ({err.strerror})", path=str(path)) from err


def _digest(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


def _entry(data: bytes) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    return folder / f"{_digest(data)}.{_CACHE_FORMAT}"


def _derived_shape(stored: Any) -> bool:
    return (isinstance(stored, tuple) and len(stored) == 4 and isinstance(stored[1], dict)
            and isinstance(stored[2], dict))


_SUM_BYTES = 16  # each entry starts with the BLAKE2b of the rest: a truncated, garbled or overwritten one is rebuilt


def _read_entry(entry: Path) -> tuple[bool, Any]:
    """(True, value) of a cache entry that is whole and names its own place; (False, None) for one that is absent,
    unreadable, cut short or overwritten (by another entry's bytes, a crash, a user): it is built again."""
    try:
        blob = entry.read_bytes()
    except OSError:
        return False, None
    payload = blob[_SUM_BYTES:]
    if len(blob) <= _SUM_BYTES or blake2b(payload, digest_size=_SUM_BYTES).digest() != blob[:_SUM_BYTES]:
        return False, None
    try:
        name, value = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return False, None
    return (True, value) if name == entry.name else (False, None)


def _store(entry: Path, value: Any) -> None:
    try:
        payload = marshal.dumps((entry.name, value))  # its own name: another entry's bytes copied here do not pass
    except ValueError:  # a type marshal does not take (a YAML date): this file is parsed every time
        return
    blob = blake2b(payload, digest_size=_SUM_BYTES).digest() + payload
    tmp = entry.parent / f".tmp-{os.getpid()}-{os.urandom(6).hex()}"  # not tempfile: it costs 10 ms to import
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return  # a read-only home: no cache, same answers
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, entry)  # atomic: a concurrent reader sees no entry or the whole entry
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk: no cache, same answers
