"""Keys verl renamed, deprecated or removed between versions (``knowledge/deprecated_keys.yaml``).

A key the user set is looked up for the verl version V the config is read as:

- verl V still reads the key (its defaults or its config dataclasses have it) and an entry marked
  ``still_read`` applies (newest ``since`` not after V): a deprecation, with that entry's successor;
- the key is in V's defaults otherwise: nothing (V has the key, whatever a later verl did to it);
- the key is not in V's defaults: its history is replayed from the newest verl before V that had it.
  Each step takes the first entry matching the current name whose ``since`` is after that point and
  not after V, renames (or drops) the key, and moves the point to that ``since``: a verl 0.2 key
  renamed in 0.3 whose new name moved again in 0.8 ends at its 0.8 name, and an entry for keys that
  moved in 0.8 never applies to a key that was already gone in 0.3.

"In V's defaults" means in the default YAML tree (or under one of its free-form mappings), the keys a
plain ``key=value`` override may set; a dataclass field the YAML lacks does not count.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import Any

from advisor.datafiles import derived, load_knowledge
from advisor.wildcard import matches, wildcard

from ._defaults import (
    _PASS_THROUGH,
    config_base,
    default_tree_view,
    flatten_leaves,
    iter_paths,
    key_index,
    knowledge_only,
    version_names,
)
from ._version import at_least, version_key

_MAX_HOPS = 8  # a history longer than this is a cycle in the table


@dataclass(frozen=True)
class Hop:
    """One step of a key's history: `entry` renamed the key to `to` (None: removed it)."""

    entry: Mapping[str, Any]
    to: str | None


@dataclass(frozen=True)
class Deprecation:
    """What the table says about one key in one verl version."""

    key: str
    hops: tuple[Hop, ...]  # oldest first; one hop for a deprecation
    removed: bool  # the key is not in the version's defaults (verl rejects a plain override)
    last_version: str | None  # newest supported verl before the version whose defaults have the key

    @property
    def entry(self) -> Mapping[str, Any]:
        """The entry that moved the user's key (the first step)."""
        return self.hops[0].entry

    @property
    def replacement(self) -> str | None:
        """The key holding the setting in the version checked; None when nothing took it over."""
        return self.hops[-1].to


def entries() -> Sequence[Mapping[str, Any]]:
    return load_knowledge("deprecated_keys.yaml")["keys"]  # type: ignore[no-any-return]


def fill(replacement: str, key: str, pattern: str) -> str:
    """The replacement for one concrete key: each ``*`` takes the text its ``*`` matched in the key,
    ``{parent}`` the key without its last segment."""
    match = wildcard(pattern).fullmatch(key)
    groups = iter(match.groups() if match else ())
    out = re.sub(r"\*", lambda _: next(groups, "*"), replacement)
    return out.replace("{parent}", key.rsplit(".", 1)[0])


@cache
def _tree_nodes(version: str, config_name: str) -> tuple[frozenset[str], frozenset[str]]:
    """(every node of the default YAML tree, the nodes that take free-form sub-keys). The keys of
    knowledge/extra_keys.yaml (read with ``.get``, set with ``+``) count as nodes of every tree. Kept in the
    knowledge cache like key_index."""
    if not knowledge_only(version):  # an installed verl's own tree: not a knowledge file, so not cached
        return _tree_nodes_data(version, config_name)
    return derived(f"tree_nodes/{version}/{config_name}", lambda: _tree_nodes_data(version, config_name), __file__)


def _tree_nodes_data(version: str, config_name: str) -> tuple[frozenset[str], frozenset[str]]:
    paths: set[str] = set()
    open_paths: set[str] = {entry["key"] for entry in load_knowledge("extra_keys.yaml")["keys"]}
    for path, value in iter_paths(default_tree_view(version, config_name)):  # read only: no copy
        paths.add(path)
        if value is None or (isinstance(value, Mapping) and (not value or _PASS_THROUGH.search(path))):
            open_paths.add(path)
    return frozenset(paths | open_paths), frozenset(open_paths)


def in_defaults(key: str, version: str, config_name: str) -> bool:
    """Whether `key` is in the version's default YAML tree (or under a free-form mapping of it, or an
    extra key)."""
    paths, open_paths = _tree_nodes(version, config_name)
    if key in paths:
        return True
    parts = key.split(".")
    return any(".".join(parts[:i]) in open_paths for i in range(len(parts) - 1, 0, -1))


def last_version_with(key: str, before: str, config_name: str) -> str | None:
    """The newest supported verl before `before` whose defaults have `key`."""
    older = [v for v in version_names() if not at_least(v, before)]
    for v in reversed(older):
        if in_defaults(key, v, config_name):
            return v
    return None


def _candidates(key: str, config_name: str) -> Iterator[Mapping[str, Any]]:
    yield from _matching_entries(key, config_base(config_name)[0])


@cache
def _entries_by_key(base: str) -> tuple[dict[str, list[int]], list[int]]:
    """Positions in :func:`entries` of the entries for ``base``: by exact key, and those with a ``*``."""
    exact: dict[str, list[int]] = {}
    patterns: list[int] = []
    for i, entry in enumerate(entries()):
        if entry.get("config", base) == base:
            if "*" in entry["key"]:
                patterns.append(i)
            else:
                exact.setdefault(entry["key"], []).append(i)
    return exact, patterns


@cache
def _matching_entries(key: str, base: str) -> tuple[Mapping[str, Any], ...]:
    """The entries whose pattern matches ``key``, in the table's order (a config is read once per verl version,
    and every version asks for the same keys: worked out once per key)."""
    exact, patterns = _entries_by_key(base)
    table = entries()
    hits = exact.get(key, []) + [i for i in patterns if matches(key, table[i]["key"])]
    return tuple(table[i] for i in sorted(hits))


def _specificity(entry: Mapping[str, Any]) -> tuple[int, int]:
    return (-entry["key"].count("*"), len(entry["key"]))


def _next_hop(key: str, after: str | None, version: str, config_name: str) -> Hop | None:
    """The first entry that moved `key` after verl `after` (None: from the start), up to `version`;
    of two with the same ``since`` the more specific pattern."""
    applicable = [e for e in _candidates(key, config_name)
                  if at_least(version, e["since"]) and (after is None or not at_least(after, e["since"]))]
    if not applicable:
        return None
    best = min(applicable, key=lambda e: (version_key(e["since"]), *(-x for x in _specificity(e))))
    return Hop(best, fill(best["replacement"], key, best["key"]) if best.get("replacement") else None)


def history(key: str, after: str | None, version: str, config_name: str) -> tuple[Hop, ...]:
    """The renames and removals `key` went through after verl `after`, up to `version`."""
    hops: list[Hop] = []
    current: str | None = key
    for _ in range(_MAX_HOPS):
        if current is None:
            break
        hop = _next_hop(current, after, version, config_name)
        if hop is None:
            break
        hops.append(hop)
        current, after = hop.to, str(hop.entry["since"])
    return tuple(hops)


def _deprecation_in_place(key: str, version: str, config_name: str) -> Mapping[str, Any] | None:
    """The newest ``still_read`` entry for a key the version still has."""
    applicable = [e for e in _candidates(key, config_name)
                  if e.get("still_read") and at_least(version, e["since"])]
    return max(applicable, key=lambda e: (version_key(e["since"]), *_specificity(e)), default=None)


def lookup(key: str, version: str, config_name: str) -> Deprecation | None:
    """The deprecation or removal that `key` meets when a config is read as verl `version`; None when
    the table has nothing for it there (see the module docstring)."""
    if key.rsplit(".", 1)[-1] == "_target_":
        return None  # verl's own class path, never a user's setting
    last = last_version_with(key, version, config_name)
    index = key_index(version, config_name)
    in_place = _deprecation_in_place(key, version, config_name) if index.knows(key) else None
    if in_place is not None:  # verl still reads it (a YAML key or a dataclass field) and warns
        first = Hop(in_place, fill(in_place["replacement"], key, in_place["key"]) if in_place.get("replacement")
                    else None)
        rest = history(first.to, str(in_place["since"]), version, config_name) if first.to else ()
        return Deprecation(key, (first, *rest), removed=False, last_version=last)
    if in_defaults(key, version, config_name):
        return None
    hops = history(key, last, version, config_name)
    if not hops or (last is None and "*" in hops[0].entry["key"] and not index.knows(key)):
        return None  # no verl had this key: a typo under a moved subtree, not a key of an old verl
    return Deprecation(key, hops, removed=True, last_version=last)


def removed_by(key: str, version: str, config_name: str) -> bool:
    """Whether `version` removed `key`: verl rejects a plain override of it there (:func:`lookup`'s ``removed``).
    A key in the version's defaults was not removed, which spares the history walk for almost every key."""
    if in_defaults(key, version, config_name):
        return False
    found = lookup(key, version, config_name)
    return found is not None and found.removed


def successor(key: str, version: str, config_name: str) -> str | None:
    """The key that holds `key`'s setting in `version`; None when the table says nothing took it over
    (or has no entry for it)."""
    found = lookup(key, version, config_name)
    return found.replacement if found else None


# --- the keys each release lost (scripts/list_key_changes.py and the table's completeness test) ----


@dataclass(frozen=True)
class LostKey:
    """A leaf of ``older``'s defaults that ``newer`` does not know (:func:`lost_keys`)."""

    config: str
    older: str
    newer: str
    key: str


def lost_keys(config_name: str) -> Iterator[LostKey]:
    """Every leaf of a version's defaults that the next version does not know, oldest pair first.

    "Does not know": neither a node of its tree nor a dataclass field nor under a free-form mapping
    (``KeyIndex.knows``). ``_target_`` leaves are skipped (verl's class paths; no user sets them).
    """
    for older, newer in pairwise(version_names()):
        index = key_index(newer, config_name)
        for key in sorted(flatten_leaves(default_tree_view(older, config_name))):
            if key.rsplit(".", 1)[-1] != "_target_" and not index.knows(key):
                yield LostKey(config_name, older, newer, key)


def not_renamed(key: str, older: str, newer: str) -> Mapping[str, Any] | None:
    """The ``not_renamed`` entry for a key lost between two versions that no rename or removal explains."""
    for entry in load_knowledge("deprecated_keys.yaml").get("not_renamed", []):
        if matches(key, entry["key"]) and list(entry["between"]) == [older, newer]:
            return entry  # type: ignore[no-any-return]
    return None
