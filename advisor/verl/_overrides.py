"""Hydra command-line overrides: parse with Hydra's own grammar, render values back.

verl is launched as ``python3 -m verl.trainer.main_ppo key=value +key=value ~key ...``. We parse
those with ``hydra.core.override_parser`` so quoting, lists, interpolations and escapes behave
exactly as they do for verl, and render proposed changes in the same syntax so they can be pasted
into a launch script.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from advisor.errors import ConfigError


class OverrideKind(str, Enum):
    CHANGE = "change"  # key=value: the key must exist
    ADD = "add"  # +key=value: the key must not exist
    FORCE_ADD = "force_add"  # ++key=value: add or change
    DELETE = "delete"  # ~key or ~key=value


@dataclass(frozen=True)
class Override:
    """One parsed override. ``value`` is a plain Python value (str, int, float, bool, None, list, dict)."""

    kind: OverrideKind
    key: str
    value: Any
    text: str
    # a config-group choice placed at a package (``actor@actor_rollout_ref.actor=mlite_actor``): the group
    # ("actor"); ``key`` is then the package path and ``value`` the option
    group: str | None = None


_KINDS = {1: OverrideKind.CHANGE, 2: OverrideKind.ADD, 3: OverrideKind.FORCE_ADD, 4: OverrideKind.DELETE}


def _parser() -> Any:
    # Hydra's grammar is an ANTLR parser; building it costs ~20 ms, so build it once on first use.
    global _PARSER
    if _PARSER is None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        _PARSER = OverridesParser.create()
    return _PARSER


_PARSER: Any = None


# Most launch-script overrides are `key=<number|bool|null|plain word>`. Those are read with a regex
# that gives exactly what Hydra's grammar gives (tests/advisor_tests/verl/test_overrides.py checks the two
# agree); anything else goes to Hydra's ANTLR parser, whose import and per-line cost (~0.1 s + ~2 ms)
# would otherwise dominate `advisor check` (bench/bench_check_startup.py).
_SIMPLE = re.compile(r"^(?P<prefix>\+\+|\+|~)?(?P<key>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
                     r"(?:=(?P<value>[^\\{}()=:#]*))?$")
_QUOTED = re.compile(r"""^(?:'([^'\\$]*)'|"([^"\\$]*)")$""")
_INT = re.compile(r"^[+-]?(?:0|[1-9][0-9]*)$")
# Hydra's FLOAT token: the integer part has no leading zeros (OverrideLexer.g4 INT_UNSIGNED)
_FLOAT = re.compile(r"^[+-]?(?:(?:0|[1-9][0-9]*)?\.[0-9]+|(?:0|[1-9][0-9]*)\.)(?:[eE][+-]?[0-9]+)?$"
                    r"|^[+-]?(?:0|[1-9][0-9]*)[eE][+-]?[0-9]+$")
_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-./]*$")
# a path that starts with a shell variable the launch script did not define (`$HOME/data/train.parquet`):
# Hydra reads `$` not followed by `{` as a plain character
_ENV_PATH = re.compile(r"^\$[A-Za-z_][A-Za-z0-9_]*(?:/[A-Za-z0-9_\-./]*)?$")
_SPECIAL_WORDS = {"true", "false", "null", "inf", "nan"}
_PREFIX_KIND = {None: OverrideKind.CHANGE, "+": OverrideKind.ADD, "++": OverrideKind.FORCE_ADD,
                "~": OverrideKind.DELETE}


_NOT_SIMPLE = object()


def _simple_scalar(raw: str) -> Any:
    lowered = raw.lower()
    if _INT.match(raw):
        return int(raw) if len(raw) <= 4300 else _NOT_SIMPLE  # Hydra's parser gives the error past Python's limit
    if _FLOAT.match(raw):
        return float(raw)
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "null":
        return None
    if _WORD.match(raw) and lowered not in _SPECIAL_WORDS and not raw.endswith((".", "-", "/")):
        return raw
    if _ENV_PATH.match(raw):
        return raw
    if any(c.isspace() for c in raw) and not raw.startswith(("'", '"')):
        return _NOT_SIMPLE
    quoted = _QUOTED.match(raw)
    if quoted and (quoted.group(1) or quoted.group(2) or "").strip() == (quoted.group(1) or quoted.group(2) or ""):
        return quoted.group(1) if quoted.group(1) is not None else quoted.group(2)
    return _NOT_SIMPLE


def _parse_simple(text: str) -> Override | None:
    m = _SIMPLE.match(text)
    if not m:
        return None
    kind, key, raw = _PREFIX_KIND[m.group("prefix")], m.group("key"), m.group("value")
    if raw is None:
        return Override(kind, key, None, text) if kind is OverrideKind.DELETE else None
    value: Any
    if raw != raw.strip():
        return None
    if raw.startswith("[") and raw.endswith("]") and raw.count("[") == 1 and raw.count("]") == 1:
        inner = raw[1:-1]
        items = [item for item in inner.split(",")] if inner else []
        value = [_simple_scalar(item) for item in items]
        if any(v is _NOT_SIMPLE for v in value) or "" in items:
            return None
    elif "[" in raw or "]" in raw or "," in raw:  # a bare comma makes a sweep
        return None
    else:
        value = _simple_scalar(raw)
        if value is _NOT_SIMPLE:
            return None
    return Override(kind, key, value, text)


def parse_override(text: str, *, path: str | None = None, where: str | int | None = None) -> Override:
    """Parse one override line such as ``actor_rollout_ref.actor.optim.lr=1e-6``.

    Raises:
        ConfigError: the text is not a valid Hydra override, or it is a sweep (``a=1,2``) or a
            config-group choice, which a single verl run cannot take.
    """
    simple = _parse_simple(text)
    if simple is not None:
        return simple
    return parse_override_with_hydra(text, path=path, where=where)


def _clip(text: str, limit: int = 80) -> str:
    """An override quoted in a message: long ones cut, with their length."""
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text):,} characters)"


def parse_override_with_hydra(text: str, *, path: str | None = None, where: str | int | None = None) -> Override:
    """Parse with Hydra's own grammar (the authority the fast path is tested against)."""
    from hydra.errors import HydraException

    try:
        parsed = _parser().parse_override(text)
    except HydraException as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else "syntax error"
        raise ConfigError(
            f"'{_clip(text)}' is not a valid Hydra override ({_clip(reason, 160)})", path=path, where=where
        ) from err
    except Exception as err:  # ANTLR can raise its own errors on odd bytes; int() past 4,300 digits; deep nesting
        cause = err.__cause__ or err.__context__ or err
        reason = f" ({_clip(str(cause).split(';')[0], 120)})" if isinstance(cause, ValueError) else ""
        if isinstance(cause, RecursionError) or isinstance(err, RecursionError):
            reason = " (nested too deeply)"
        raise ConfigError(f"'{_clip(text)}' is not a valid Hydra override{reason}", path=path, where=where) from err
    if parsed.package is not None:
        if parsed.is_sweep_override() or not isinstance(parsed.value(), str) or not parsed.package:
            raise ConfigError(f"'{text}' is not a config-group choice verl can take", path=path, where=where)
        # Hydra composes the group's option file at that package (verl's defaults list does the same:
        # actor@actor_rollout_ref.actor: dp_actor)
        return Override(kind=OverrideKind.FORCE_ADD, key=parsed.package, value=parsed.value(), text=text,
                        group=parsed.key_or_group)
    if parsed.is_sweep_override():
        raise ConfigError(
            f"'{text}' is a sweep (several values); give one value per key",
            path=path,
            where=where,
            suggestion="use 'advisor sweep' to try several values",
        )
    kind = _KINDS[parsed.type.value]
    value = None if kind is OverrideKind.DELETE and parsed.value() is None else parsed.value()
    return Override(kind=kind, key=parsed.key_or_group, value=value, text=text)


_BARE_STRING = re.compile(r"^[A-Za-z_/][\w./\-+@:]*$")
_NEEDS_QUOTES = re.compile(r"^(true|false|null|nan|inf|-inf|\+inf)$", re.IGNORECASE)


def render_value(value: Any) -> str:
    """Render a Python value as the right-hand side of a Hydra override.

    ``parse_override(f"k={render_value(v)}").value == v`` for every str, int, float, bool, None and
    (nested) list or dict of those.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text
    if isinstance(value, str):
        if _BARE_STRING.match(value) and not _NEEDS_QUOTES.match(value) and not _looks_numeric(value):
            return value
        # Hydra: inside quotes a backslash escapes only a quote or a backslash run before a quote/the end
        escaped = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, value).replace("'", "\\'")
        return f"'{escaped}'"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(render_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ",".join(f"{k}:{render_value(v)}" for k, v in value.items())
        return "{" + items + "}"
    raise TypeError(f"cannot render {type(value).__name__} as a Hydra override value")


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def render_override(key: str, value: Any, *, add: bool = False) -> str:
    """``key=value`` (or ``++key=value`` for a key the base config does not have)."""
    prefix = "++" if add else ""
    return f"{prefix}{key}={render_value(value)}"
