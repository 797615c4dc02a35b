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

from .errors import ConfigError


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

    def render(self) -> str:
        return self.text


_KINDS = {1: OverrideKind.CHANGE, 2: OverrideKind.ADD, 3: OverrideKind.FORCE_ADD, 4: OverrideKind.DELETE}


def _parser() -> Any:
    # Hydra's grammar is an ANTLR parser; building it costs ~20 ms, so build it once on first use.
    global _PARSER
    if _PARSER is None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        _PARSER = OverridesParser.create()
    return _PARSER


_PARSER: Any = None


def parse_override(text: str, *, path: str | None = None, where: str | int | None = None) -> Override:
    """Parse one override line such as ``actor_rollout_ref.actor.optim.lr=1e-6``.

    Raises:
        ConfigError: the text is not a valid Hydra override, or it is a sweep (``a=1,2``) or a
            config-group choice, which a single verl run cannot take.
    """
    from hydra.errors import HydraException

    try:
        parsed = _parser().parse_override(text)
    except HydraException as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else "syntax error"
        raise ConfigError(
            f"'{text}' is not a valid Hydra override ({reason})", path=path, where=where
        ) from err
    except Exception as err:  # ANTLR can raise its own errors on odd bytes
        raise ConfigError(f"'{text}' is not a valid Hydra override", path=path, where=where) from err
    if parsed.package is not None:
        raise ConfigError(
            f"'{text}' selects a config-group package, which verl's trainer config does not use",
            path=path,
            where=where,
        )
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


def parse_overrides(lines: list[str], *, path: str | None = None) -> list[Override]:
    return [parse_override(line, path=path) for line in lines]


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
        escaped = value.replace("\\", "\\\\").replace("'", "\\'")
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
