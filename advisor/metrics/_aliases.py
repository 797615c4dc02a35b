"""Metric names across verl versions: rename old names, and date a log by the names it holds.

The table is data, ``knowledge/metric_aliases.yaml``; this module only compiles and applies it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from advisor.datafiles import load_knowledge
from advisor.errors import PlaybookError
from advisor.verl import VERSION_ALIASES, version_key

from ._frame import VersionHint

if TYPE_CHECKING:
    from packaging.version import Version

_TABLE = "metric_aliases.yaml"
_SPEC_RE = re.compile(r"^\s*(>=|<)\s*([0-9][0-9A-Za-z.]*)\s*$")


@dataclass(frozen=True)
class Alias:
    """One rule of the alias table."""

    pattern: re.Pattern[str]
    template: str
    scale_group: str | None
    verl: str
    example: tuple[str, str]
    """(a logged old name, the current name it becomes)"""
    source: tuple[tuple[str, str], ...]
    """(``<tag>:<file>``, a string verl's file holds there verbatim)"""
    unless_logged: str | None = None
    """a name whose presence in the same log means a newer verl wrote the old name with another meaning"""


@dataclass(frozen=True)
class Renamed:
    """What one logged name became."""

    new: str
    scale: float  # multiply the logged values by this
    rule: Alias


@dataclass(frozen=True)
class _Range:
    lower: str | None  # inclusive
    upper: str | None  # exclusive


def _parse_range(spec: str, *, where: str) -> _Range:
    lower: str | None = None
    upper: str | None = None
    for part in spec.split(","):
        match = _SPEC_RE.match(part)
        if match is None:
            raise PlaybookError(f"version range '{spec}' is not '>=X', '<X' or both", path=_TABLE, where=where)
        op, version = match.groups()
        try:
            version_key(version)
        except ValueError as err:
            raise PlaybookError(str(err), path=_TABLE, where=where) from err
        if op == ">=" and (lower is None or version_key(version) > version_key(lower)):
            lower = version
        if op == "<" and (upper is None or version_key(version) < version_key(upper)):
            upper = version
    return _Range(lower, upper)


def _compile(pattern: str, *, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as err:
        raise PlaybookError(f"bad regular expression {pattern!r} ({err})", path=_TABLE, where=where) from err


_Marker = tuple[re.Pattern[str], _Range, str, str | None]  # (pattern, range, the range as written, unless_logged)


@lru_cache(maxsize=1)
def _table() -> tuple[tuple[Alias, ...], tuple[_Marker, ...], dict[str, tuple[_Range, str]]]:
    data: Any = load_knowledge(_TABLE)
    if not isinstance(data, Mapping) or data.get("schema") != 1:
        raise PlaybookError("expected a mapping with 'schema: 1'", path=_TABLE)
    aliases = []
    for i, entry in enumerate(data.get("aliases") or ()):
        where = f"aliases[{i}]"
        missing = [k for k in ("match", "to", "verl", "example", "source") if k not in entry]
        if missing:
            raise PlaybookError(f"missing {', '.join(missing)}", path=_TABLE, where=where)
        pattern = _compile(str(entry["match"]), where=where)
        scale = entry.get("scale")
        if scale is not None and scale not in pattern.groupindex:
            raise PlaybookError(f"scale group '{scale}' is not a named group of match", path=_TABLE, where=where)
        _parse_range(str(entry["verl"]), where=where)
        try:
            example = (str(entry["example"][0]), str(entry["example"][1]))
            source = tuple((str(ref["at"]), str(ref["contains"])) for ref in entry["source"])
        except (IndexError, KeyError, TypeError) as err:
            raise PlaybookError(
                "example must be [old, new] and source a list of {at, contains}", path=_TABLE, where=where
            ) from err
        unless = entry.get("unless_logged")
        aliases.append(Alias(pattern, str(entry["to"]), scale, str(entry["verl"]), example, source,
                             str(unless) if unless else None))
    markers = []
    for i, entry in enumerate(data.get("version_markers") or ()):
        where = f"version_markers[{i}]"
        unless = entry.get("unless_logged")
        markers.append(
            (_compile(str(entry["match"]), where=where), _parse_range(str(entry["verl"]), where=where),
             str(entry["verl"]), str(unless) if unless else None)
        )
    formats = {
        str(name): (_parse_range(str(entry["verl"]), where=f"format_markers.{name}"), str(entry["verl"]))
        for name, entry in (data.get("format_markers") or {}).items()
    }
    return tuple(aliases), tuple(markers), formats


def aliases() -> tuple[Alias, ...]:
    """The alias rules, in the order they are tried."""
    return _table()[0]


@lru_cache(maxsize=8192)
def rename(name: str) -> Renamed | None:
    """The current name for an old metric name, or None when ``name`` is current (or unknown)."""
    for rule in aliases():
        match = rule.pattern.fullmatch(name)
        if match is None:
            continue
        scale = float(match.group(rule.scale_group)) if rule.scale_group else 1.0
        return Renamed(match.expand(rule.template), scale, rule)
    return None


def rename_in(name: str, logged: Iterable[str] | set[str]) -> Renamed | None:
    """:func:`rename`, for a name read from a log that also holds ``logged``.

    A rule with ``unless_logged`` does not apply when that name is in the same log: a newer verl
    writes both, and the old name then means something else (``actor/entropy_loss`` since 0.8.0).
    """
    renamed = rename(name)
    if renamed is None or renamed.rule.unless_logged is None:
        return renamed
    return None if renamed.rule.unless_logged in logged else renamed


def canonical_metric_name(name: str) -> str:
    """The name the catalog gives the metric logged as ``name`` (``timing/gen`` -> ``timing_s/gen``)."""
    renamed = rename(name)
    return renamed.new if renamed else name


def version_hint(names: Iterable[str], features: Iterable[str] = ()) -> VersionHint | None:
    """The verl versions that could have written a log holding ``names`` (raw, before renaming).

    ``features`` are format markers a reader saw (``console_three_decimals``, ``jsonl_file_logger``...).
    Returns None when nothing in the log dates it.
    """
    _, markers, formats = _table()
    seen = list(dict.fromkeys(names))
    present = set(seen)
    evidence: list[str] = []
    ranges: list[_Range] = []
    first_hit: dict[int, str] = {}
    for name in seen:
        for index in _markers_of(name):
            first_hit.setdefault(index, name)
    for index in sorted(first_hit):
        _, rng, spec, unless = markers[index]
        if unless is not None and unless in present:
            continue
        evidence.append(f"{first_hit[index]}: {spec}")
        ranges.append(rng)
    for feature in sorted(features):  # a set: in a fixed order, so two reads of one file say the same
        if feature in formats:
            rng, spec = formats[feature]
            evidence.append(f"{feature}: {spec}")
            ranges.append(rng)
    if not ranges:
        return None
    lowers = [r.lower for r in ranges if r.lower is not None]
    uppers = [r.upper for r in ranges if r.upper is not None]
    lower = max(lowers, key=version_key) if lowers else None
    upper = min(uppers, key=version_key) if uppers else None
    consistent = lower is None or upper is None or version_key(lower) < version_key(upper)
    return VersionHint(lower=lower, upper=upper, consistent=consistent, evidence=tuple(evidence))


@lru_cache(maxsize=8192)
def _markers_of(name: str) -> tuple[int, ...]:
    return tuple(i for i, (pattern, *_) in enumerate(_table()[1]) if pattern.search(name))


def parse_version(text: str) -> Version:
    """Sortable key for a user's verl version (``0.7.0``, ``v0.6.1``, ``main``), in advisor.verl._version's order."""
    raw = text.strip().lower().lstrip("v")
    return version_key(VERSION_ALIASES.get(raw, raw))
