"""Locate and read the data files shipped in the ``knowledge`` package.

Parsing the YAML is most of what a short command such as ``advisor check`` spends after its imports, so
each parsed file is kept in a cache keyed by a hash of the file's bytes (``$XDG_CACHE_HOME/verl-advisor``,
else ``~/.cache/verl-advisor``): built on first use, never stale (a changed file has another key), and
skipped silently when the folder cannot be written or ``ADVISOR_NO_CACHE`` is set. Values are stored with
``marshal`` (plain data only, no code runs on load); a file holding other types (dates) is not cached.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from .errors import PlaybookError

try:  # the C loader is ~10x faster; fall back where libyaml is absent
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader

_CACHE_FORMAT = f"m{marshal.version}"  # a new marshal format writes new entries


def knowledge_dir() -> Path:
    import knowledge  # the data package itself: its folder (importlib.resources would cost 5 ms to import)

    return Path(knowledge.__file__).parent


def cache_dir() -> Path | None:
    """Where parsed knowledge files are kept, or None when caching is off."""
    if os.environ.get("ADVISOR_NO_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verl-advisor" / "knowledge"


@cache
def load_knowledge(relative: str) -> Any:
    """Parse a YAML file under knowledge/ (cached; treat the result as read-only)."""
    path = knowledge_dir() / relative
    try:
        data = path.read_bytes()
    except OSError as err:
        raise PlaybookError(f"cannot read knowledge file ({err.strerror})", path=str(path)) from err
    entry = _entry(data)
    if entry is not None:
        try:
            return marshal.loads(entry.read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            pass  # absent or unreadable: parse and write it again
    try:
        value = yaml.load(data, Loader=_Loader)
    except yaml.YAMLError as err:
        raise PlaybookError(f"malformed YAML ({err})", path=str(path)) from err
    if entry is not None:
        _store(entry, value)
    return value


def _entry(data: bytes) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    return folder / f"{hashlib.blake2b(data, digest_size=16).hexdigest()}.{_CACHE_FORMAT}"


def _store(entry: Path, value: Any) -> None:
    try:
        blob = marshal.dumps(value)
    except ValueError:  # a type marshal does not take (a YAML date): this file is parsed every time
        return
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
