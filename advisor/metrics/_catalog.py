"""The metric catalog: where each verl metric comes from, what it computes and its healthy range.

The data is ``knowledge/metrics.yaml``; this module validates it, resolves a name to its entry (a
metric, or the most specific pattern of a family such as ``val-core/*``) and suggests the closest
names for a typo. Used by ``advisor explain`` and by the playbook tests ("every metric a rule reads
is one verl logs").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from advisor.datafiles import load_knowledge
from advisor.errors import PlaybookError
from advisor.spelling import closest
from advisor.wildcard import matches

_FILE = "metrics.yaml"
_REQUIRED = ("source", "formula", "meaning", "since")
_OPTIONAL = ("healthy", "when", "notes", "source_before", "until")
_PATTERN_ONLY = ("known",)


@dataclass(frozen=True)
class HealthyRange:
    """A published healthy range; either bound may be open."""

    low: float | None
    high: float | None
    source: str
    # for whom the figures hold when they are not general ("a 7B model"): shown with the range, never
    # shaded on a chart, since a run of another model or GPU is not unhealthy for falling outside it
    scope: str = ""

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{self.low:g} to {self.high:g}"
        if self.low is not None:
            return f">= {self.low:g}"
        return f"<= {self.high:g}"

    def to_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "source": self.source,
                **({"scope": self.scope} if self.scope else {})}


@dataclass(frozen=True)
class MetricInfo:
    """One catalog entry: a metric name, or a pattern (``*`` = any characters) for a family."""

    name: str
    source: str
    formula: str
    meaning: str
    since: str
    healthy: HealthyRange | None = None
    when: str | None = None
    notes: str | None = None
    is_pattern: bool = False
    known: tuple[str, ...] = ()  # for patterns: the suffixes verl writes at the catalogued version
    source_before: str | None = None  # the source at the catalog's before_commit, where it differs
    until: str | None = None  # the last verl release that logs it; None while current verl does

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "pattern": self.is_pattern, "source": self.source, "formula": self.formula,
            "meaning": self.meaning, "healthy": self.healthy.to_dict() if self.healthy else None,
            "since": self.since, "until": self.until, "when": self.when, "notes": self.notes,
            "source_before": self.source_before,
        }
        if self.is_pattern:
            out["known"] = [self.expand(k) for k in self.known]
        return out

    def expand(self, suffix: str) -> str:
        """The concrete name for one of ``known`` (the pattern's trailing ``*`` replaced)."""
        return self.name[:-1] + suffix if self.name.endswith("*") else self.name


@dataclass(frozen=True)
class NotLogged:
    """A name some guide describes that verl never writes, and what to read instead."""

    name: str
    seen_in: str
    note: str
    instead: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "seen_in": self.seen_in, "note": self.note, "instead": list(self.instead)}


def _literal_chars(pattern: str) -> int:
    return len(pattern.replace("*", ""))


@dataclass(frozen=True)
class Catalog:
    verl_version: str
    """the verl release every entry's ``source`` cites"""
    before_commit: str
    """the verl commit ``source_before`` cites"""
    metrics: dict[str, MetricInfo]
    patterns: dict[str, MetricInfo]
    not_logged: dict[str, NotLogged]

    def lookup(self, name: str) -> MetricInfo | None:
        """The entry for ``name``: its own, else the matching pattern with the most literal characters."""
        if name in self.metrics:
            return self.metrics[name]
        if name in self.patterns:
            return self.patterns[name]
        hits = [p for key, p in self.patterns.items() if matches(name, key)]
        return max(hits, key=lambda p: _literal_chars(p.name)) if hits else None

    def is_known(self, name: str) -> bool:
        """Whether verl logs ``name`` (a catalogued metric or a member of a catalogued family)."""
        return self.lookup(name) is not None

    def lookup_not_logged(self, name: str) -> NotLogged | None:
        for key, entry in self.not_logged.items():
            if matches(name, key):
                return entry
        return None

    def names(self) -> list[str]:
        """Every concrete name the catalog knows: metrics plus each pattern's known members."""
        out = list(self.metrics)
        for pattern in self.patterns.values():
            out.extend(pattern.expand(k) for k in pattern.known)
        return list(dict.fromkeys(out))

    def closest(self, name: str, n: int = 3) -> list[str]:
        """Catalog names closest to ``name``: same last segment first, then by spelling (``advisor.spelling``)."""
        names = self.names()
        leaf = name.rstrip("/").rsplit("/", 1)[-1]
        same_leaf = [c for c in names if c.rsplit("/", 1)[-1] == leaf]
        close = closest(name, names, limit=n)
        return list(dict.fromkeys(same_leaf + close))[:n]


def _entry(name: str, raw: Any, *, pattern: bool) -> MetricInfo:
    where = f"{'patterns' if pattern else 'metrics'}.{name}"
    if not isinstance(raw, dict):
        raise PlaybookError("an entry must be a mapping", path=_FILE, where=where)
    allowed = set(_REQUIRED) | set(_OPTIONAL) | (set(_PATTERN_ONLY) if pattern else set())
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise PlaybookError(f"unknown field(s) {', '.join(unknown)}", path=_FILE, where=where,
                            suggestion=f"fields are {', '.join(sorted(allowed))}")
    missing = [k for k in _REQUIRED if not isinstance(raw.get(k), str) or not raw[k].strip()]
    if missing:
        raise PlaybookError(f"missing or empty {', '.join(missing)}", path=_FILE, where=where)
    if pattern and "*" not in name:
        raise PlaybookError("a pattern needs a '*'", path=_FILE, where=where)
    if not pattern and "*" in name:
        raise PlaybookError("a metric name may not hold '*'; put families under patterns", path=_FILE, where=where)
    healthy = None
    if raw.get("healthy") is not None:
        band = raw["healthy"]
        if not isinstance(band, dict) or not isinstance(band.get("source"), str):
            raise PlaybookError("healthy must be {low, high, source}", path=_FILE, where=where)
        low, high = band.get("low"), band.get("high")
        if not all(v is None or isinstance(v, (int, float)) for v in (low, high)) or (low is None and high is None):
            raise PlaybookError("healthy needs a numeric low or high", path=_FILE, where=where)
        if low is not None and high is not None and low > high:
            raise PlaybookError(f"healthy low {low} is above high {high}", path=_FILE, where=where)
        healthy = HealthyRange(None if low is None else float(low), None if high is None else float(high),
                               band["source"], str(band.get("scope") or ""))
    known = raw.get("known") or ()
    if not isinstance(known, (list, tuple)) or not all(isinstance(k, str) for k in known):
        raise PlaybookError("known must be a list of names", path=_FILE, where=where)
    for key in ("source_before", "until"):
        if key in raw and not (isinstance(raw[key], str) and raw[key].strip()):
            raise PlaybookError(f"{key} must be a non-empty string", path=_FILE, where=where)
    return MetricInfo(
        name=name, source=" ".join(raw["source"].split()), formula=" ".join(raw["formula"].split()),
        meaning=" ".join(raw["meaning"].split()), since=raw["since"], healthy=healthy,
        when=raw.get("when"), notes=" ".join(raw["notes"].split()) if raw.get("notes") else None,
        is_pattern=pattern, known=tuple(known),
        source_before=" ".join(raw["source_before"].split()) if raw.get("source_before") else None,
        until=raw.get("until"),
    )


def parse_catalog(data: Any) -> Catalog:
    """Validate the catalog's data; raise PlaybookError naming the entry and the problem."""
    if not isinstance(data, dict) or data.get("schema") != 1:
        raise PlaybookError("expected a mapping with 'schema: 1'", path=_FILE)
    sections = {}
    for section in ("metrics", "patterns", "not_logged"):
        value = data.get(section) or {}
        if not isinstance(value, dict):
            raise PlaybookError(f"{section} must be a mapping of name -> entry", path=_FILE)
        sections[section] = value
    metrics = {name: _entry(name, raw, pattern=False) for name, raw in sections["metrics"].items()}
    patterns = {name: _entry(name, raw, pattern=True) for name, raw in sections["patterns"].items()}
    not_logged = {}
    for name, raw in sections["not_logged"].items():
        if not isinstance(raw, dict) or not raw.get("seen_in") or not raw.get("note"):
            raise PlaybookError("needs seen_in and note", path=_FILE, where=f"not_logged.{name}")
        not_logged[name] = NotLogged(name, str(raw["seen_in"]), " ".join(str(raw["note"]).split()),
                                     tuple(str(i) for i in raw.get("instead") or ()))
    return Catalog(str(data.get("verl_version", "")), str(data.get("before_commit", "")), metrics, patterns,
                   not_logged)


@cache
def load_catalog() -> Catalog:
    """The catalog in knowledge/metrics.yaml (cached)."""
    return parse_catalog(load_knowledge(_FILE))


