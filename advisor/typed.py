"""Typed objects from the mappings of a knowledge file: a record per shape, checked field by field.

A field without a default is required; an unknown field is a typo and fails with a "did you mean"
(``advisor.spelling``); a value is checked against the field's type (a number, an integer, a name, an enum member, a
nested dataclass, a tuple of those, or None where the type allows it). The rule files (``_rule_loader``) and the
check thresholds (``_thresholds``) are read through it.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from collections.abc import Iterable
from functools import cache
from typing import Any, TypeVar

from advisor.spelling import closest

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10
    class StrEnum(str, enum.Enum):
        """A closed set of names whose members are those strings (compare, hash and format as them)."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, format_spec: str) -> str:
            return str.__format__(self, format_spec)


class SchemaError(ValueError):
    """One field is wrong: ``field`` names it (``conditions[0].factor``), ``suggestion`` is the "did you mean"."""

    def __init__(self, field: str, message: str, suggestion: str | None = None) -> None:
        self.field, self.message, self.suggestion = field, message, suggestion
        super().__init__(f"{field}: {message}" + (f"; {suggestion}" if suggestion else ""))


def did_you_mean(word: object, choices: Iterable[str]) -> str | None:
    close = closest(str(word), choices, limit=1)
    return f"did you mean '{close[0]}'?" if close else None


E = TypeVar("E", bound=enum.Enum)
T = TypeVar("T")


def enum_value(kind: type[E], value: Any, field: str) -> E:
    """The member of ``kind`` spelt ``value``; SchemaError listing the members and the closest one."""
    try:
        return kind(value)
    except (ValueError, TypeError):
        known = [str(m.value) for m in kind]
        raise SchemaError(field, f"{value!r} is not one of {', '.join(known)}", did_you_mean(value, known)) from None


_NAMES = {float: "a number", int: "an integer", str: "a name"}


def _value(value: Any, hint: Any, field: str) -> Any:
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None:
        if type(None) in options:
            return None
        raise SchemaError(field, "must not be null")
    for kind in options:
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            return enum_value(kind, value, field)
        if _is_record(kind):
            return build(kind, value, field)
        if typing.get_origin(kind) is tuple:
            if not isinstance(value, list) or not value:
                raise SchemaError(field, f"must be a non-empty list, not {value!r}")
            item = typing.get_args(kind)[0]
            return tuple(_value(v, item, f"{field}[{i}]") for i, v in enumerate(value))
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind is str and isinstance(value, str) and value:
            return value
    wanted = " or ".join(_NAMES.get(k, getattr(k, "__name__", str(k))) for k in options if k is not type(None))
    raise SchemaError(field, f"must be {wanted}, not {value!r}")


def _is_record(kind: Any) -> bool:
    """A dataclass or a NamedTuple (the shapes ``build`` fills)."""
    return isinstance(kind, type) and (dataclasses.is_dataclass(kind) or (issubclass(kind, tuple)
                                                                         and hasattr(kind, "_fields")))


@cache
def _required(cls: type) -> dict[str, bool]:
    """Each field of a record, and whether it has no default."""
    if dataclasses.is_dataclass(cls):
        return {f.name: f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                for f in dataclasses.fields(cls)}
    return {name: name not in cls._field_defaults for name in cls._fields}  # type: ignore[attr-defined]


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)  # evaluates the annotations: once a class


def build(cls: type[T], raw: Any, where: str, *, kind: str = "field", owner: str | None = None) -> T:
    """``cls`` (a dataclass or a NamedTuple) from the mapping ``raw`` found at ``where``; SchemaError for an unknown,
    missing or mistyped field.

    ``kind`` and ``owner`` word the errors: "unknown argument for test 'rises' (its arguments: factor, ...)".
    """
    owner = owner or where
    record: type = cls  # the caches key on the class (mypy cannot see that a ``type[T]`` hashes)
    if not isinstance(raw, dict):
        raise SchemaError(where, f"must be a mapping, not {raw!r}")
    fields = _required(record)
    for name in raw:
        if name not in fields:
            raise SchemaError(f"{where}.{name}" if where else str(name),
                              f"unknown {kind} for {owner} (its {kind}s: {', '.join(fields) or 'none'})",
                              did_you_mean(name, fields))
    hints = _hints(record)
    values = {}
    for name, required in fields.items():
        here = f"{where}.{name}" if where else name
        if name not in raw:
            if required:
                raise SchemaError(here, f"{owner} needs '{name}'")
            continue
        values[name] = _value(raw[name], hints[name], here)
    return cls(**values)
