"""A verl config as plain nested dicts, with OmegaConf's interpolation semantics for verl's forms.

verl's configs use three interpolation forms: ``${a.b}``, ``${.sibling}`` and
``${oc.select:a.b,default}`` (plus string concatenation such as ``checkpoints/${a}/${b}``). Building an
OmegaConf tree costs ~30 ms and resolving it ~35 ms; the advisor builds many variants of one config
while it verifies fixes, so it keeps plain dicts and resolves those forms itself. Anything else
(other resolvers, nested interpolations in defaults) falls back to OmegaConf. Tests compare this
resolver with OmegaConf's on every default tree (tests/advisor_tests/verl/test_tree.py).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, TypeVar

MISSING_VALUE = "???"
_SELECT = re.compile(r"^oc\.select:\s*([\w.\-]+)\s*(?:,(.*))?$", re.S)
_PATH = re.compile(r"^\.*[\w\-]+(?:\.[\w\-]+)*$")


class Unresolvable(Exception):
    """An interpolation this resolver does not model (the caller falls back to OmegaConf)."""


class MissingKey(Exception):
    """An interpolation points at a key that is absent or '???'."""


_ATOMS = (str, int, float, bool, type(None))
T = TypeVar("T")


def copy_tree(value: T) -> T:
    """A deep copy of plain config data (dicts, lists, scalars): what ``copy.deepcopy`` gives, several times
    faster on verl's trees (the advisor copies one per verified fix); anything else goes to ``copy.deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {k: copy_tree(v) for k, v in value.items()}  # type: ignore[attr-defined, return-value]
    if kind is list:
        return [copy_tree(v) for v in value]  # type: ignore[attr-defined, return-value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def exists(tree: Mapping[str, Any], key: str) -> bool:
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def lookup(tree: Mapping[str, Any], key: str) -> Any:
    """The raw (unresolved) value at a dotted key; KeyError when absent."""
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


def update(tree: dict[str, Any], key: str, value: Any, *, merge: bool = True) -> None:
    """Set a dotted key, creating parents; a mapping value merges into an existing mapping."""
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    leaf = parts[-1]
    if merge and isinstance(value, Mapping) and isinstance(node.get(leaf), dict):
        deep_merge(node[leaf], value)
    else:
        node[leaf] = copy_tree(value)


def delete(tree: dict[str, Any], key: str) -> None:
    parent_key, _, leaf = key.rpartition(".")
    parent = lookup(tree, parent_key) if parent_key else tree
    del parent[leaf]


def deep_merge(dst: dict[str, Any], src: Mapping[str, Any]) -> None:
    """OmegaConf.merge semantics for plain data: mappings merge, everything else replaces."""
    for key, value in src.items():
        if isinstance(value, Mapping) and isinstance(dst.get(key), dict):
            deep_merge(dst[key], value)
        else:
            dst[key] = copy_tree(value)


def _parse_default(text: str) -> Any:
    """A default of ``oc.select``: the primitive forms verl's YAMLs use."""
    raw = text.strip()
    lowered = raw.lower()
    if lowered == "null":
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    if raw in ("{}", "[]"):
        return {} if raw == "{}" else []
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"" and "\\" not in raw:
        return raw[1:-1]
    if re.fullmatch(r"[+-]?\d+", raw):
        return int(raw)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", raw):
        return float(raw)
    if re.fullmatch(r"[\w\-./~]+", raw):
        return raw
    raise Unresolvable(text)


class Resolver:
    """Resolve values of one tree the way OmegaConf would."""

    def __init__(self, tree: Mapping[str, Any], *, inert: bool = False) -> None:
        self.tree = tree
        self.inert = inert  # a string using a resolver other than oc.select reads as written (inert_resolvers)

    def value(self, key: str) -> Any:
        """The resolved value at a dotted key (KeyError when absent, MissingKey when '???')."""
        return self._resolve(lookup(self.tree, key), key, depth=0)

    def _resolve(self, raw: Any, path: str, depth: int) -> Any:
        """Resolve ``raw``, the value stored at ``path``."""
        if depth > 32:
            raise Unresolvable("interpolation cycle")
        if isinstance(raw, str):
            return self._string(raw, parent_of(path), depth)
        if isinstance(raw, Mapping):
            return {k: self._resolve(v, f"{path}.{k}" if path else k, depth) for k, v in raw.items()}
        if isinstance(raw, list):
            return [self._resolve(v, path, depth) for v in raw]
        return raw

    def _string(self, raw: str, parent: str, depth: int) -> Any:
        if "${" not in raw:
            return raw  # '???' stays as it is, like OmegaConf.to_container(throw_on_missing=False)
        if self.inert and _unsafe(raw):
            return raw
        spans = _interpolation_spans(raw)
        if len(spans) == 1 and spans[0][0] == 0 and spans[0][1] == len(raw):
            return self._interpolate(raw[2:-1], parent, depth)
        out, last = [], 0
        for start, end in spans:  # string concatenation: every part becomes text
            out.append(raw[last:start])
            out.append(str(self._interpolate(raw[start + 2 : end - 1], parent, depth)))
            last = end
        out.append(raw[last:])
        return "".join(out)

    def _interpolate(self, inner: str, parent: str, depth: int) -> Any:
        inner = inner.strip()
        select = _SELECT.match(inner)
        if select:
            path, default_text = select.group(1), select.group(2)
            try:
                return self._follow(path, parent, depth)
            except (KeyError, MissingKey):
                if default_text is None:
                    return None
                if default_text.strip().startswith("${"):  # a nested fallback: ${oc.select:a,${oc.select:b,x}}
                    return self._string(default_text.strip(), parent, depth + 1)
                return _parse_default(default_text)
        if ":" in inner or not _PATH.match(inner):
            raise Unresolvable(inner)
        try:
            return self._follow(inner, parent, depth)
        except KeyError as err:
            raise MissingKey(inner) from err

    def _follow(self, path: str, parent: str, depth: int) -> Any:
        if path.startswith("."):
            dots = len(path) - len(path.lstrip("."))
            base = parent.split(".") if parent else []
            base = base[: len(base) - (dots - 1)] if dots > 1 else base
            path = ".".join([*base, path[dots:]]) if base else path[dots:]
        raw = lookup(self.tree, path)
        if raw == MISSING_VALUE:
            raise MissingKey(path)
        return self._resolve(raw, path, depth + 1)


def _interpolation_spans(raw: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level ``${...}`` (braces inside, such as a ``{}`` default, balance)."""
    spans: list[tuple[int, int]] = []
    i = 0
    while (start := raw.find("${", i)) >= 0:
        depth, j = 0, start + 1
        while j < len(raw):
            if raw[j] == "{":
                depth += 1
            elif raw[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if depth != 0 or ("${" in raw[start + 2 : j] and not _SELECT.match(raw[start + 2 : j])):
            raise Unresolvable(raw)  # unbalanced, or nested other than as an oc.select fallback
        spans.append((start, j + 1))
        i = j + 1
    return spans


_RESOLVER = re.compile(r"\$\{\s*([A-Za-z_][\w.\-]*)\s*:")
SAFE_RESOLVERS = frozenset({"oc.select"})  # the only resolver verl's own config YAMLs use (0.2 to 0.10)


def inert_resolvers(tree: Any) -> Any:
    """A copy of ``tree`` in which OmegaConf resolves no resolver but ``oc.select``: a string using any other
    (``oc.env`` reads the environment, a secret; ``oc.dict.values`` of its own parent never ends; ``oc.decode``,
    ``oc.create``, a recipe's own) is escaped, so it reads as the text the user wrote."""
    if isinstance(tree, Mapping):
        return {k: inert_resolvers(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [inert_resolvers(v) for v in tree]
    if isinstance(tree, str) and _unsafe(tree):
        return tree.replace("\\${", "${").replace("${", "\\${")
    return tree


def _unsafe(text: str) -> bool:
    return "${" in text and any(m.group(1) not in SAFE_RESOLVERS for m in _RESOLVER.finditer(text))


def parent_of(key: str) -> str:
    return key.rsplit(".", 1)[0] if "." in key else ""
