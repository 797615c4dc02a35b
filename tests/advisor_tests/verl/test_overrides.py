"""Hydra overrides: the fast path must agree with Hydra's grammar; rendering must round-trip."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from advisor.errors import ConfigError
from advisor.verl._overrides import (
    OverrideKind,
    _parse_simple,
    parse_override,
    parse_override_with_hydra,
    render_override,
    render_value,
)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and (a == b if not isinstance(a, list) else
                                    len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True)))


@pytest.mark.parametrize("text, kind, key, value", [
    pytest.param("a.b=1", OverrideKind.CHANGE, "a.b", 1, id="int"),
    pytest.param("a.b=1e-6", OverrideKind.CHANGE, "a.b", 1e-6, id="float:exp"),
    pytest.param("a.b=True", OverrideKind.CHANGE, "a.b", True, id="bool"),
    pytest.param("a.b=null", OverrideKind.CHANGE, "a.b", None, id="null"),
    pytest.param("+a.b=Qwen/Qwen3-8B", OverrideKind.ADD, "a.b", "Qwen/Qwen3-8B", id="add:path"),
    pytest.param("++a.b=2", OverrideKind.FORCE_ADD, "a.b", 2, id="force-add"),
    pytest.param("~a.b", OverrideKind.DELETE, "a.b", None, id="delete"),
    pytest.param("a.b=['console','wandb']", OverrideKind.CHANGE, "a.b", ["console", "wandb"], id="list:quoted"),
    pytest.param("a.b='x y'", OverrideKind.CHANGE, "a.b", "x y", id="quoted:space"),
    pytest.param("a.b=${c.d}", OverrideKind.CHANGE, "a.b", "${c.d}", id="interpolation"),
    pytest.param("a.b=1_000", OverrideKind.CHANGE, "a.b", 1000, id="int:underscore"),
])
def test_parse_examples(text: str, kind: OverrideKind, key: str, value: object) -> None:
    o = parse_override(text)
    assert (o.kind, o.key) == (kind, key)
    assert _same(o.value, value)


@pytest.mark.parametrize("text, message", [
    pytest.param("a.b=1,2", "sweep", id="sweep"),
    pytest.param("a.b=~/data", "not a valid Hydra override", id="tilde"),
    pytest.param("a.b=[1,", "not a valid Hydra override", id="unclosed-list"),
])
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_override(text, path="run.sh", where=3)


_ALPHABET = "abcxyz_ABC019.-/+~'\"[], =:$@eE"
_atoms = st.one_of(
    st.integers(min_value=-10**6, max_value=10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: f"{f:g}"),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.from_regex(r"\A[+-]?[0-9]{1,3}(\.[0-9]{0,3})?([eE][+-]?[0-9]{1,2})?\Z", fullmatch=True),
    st.sampled_from(["true", "False", "NULL", "null", "inf", "nan", "TRUE", "none", "1.", ".5", "01", "-0"]),
    st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_./-]{0,10}\Z", fullmatch=True),
    st.from_regex(r"\A\$[A-Za-z_$][A-Za-z0-9_./$-]{0,10}\Z", fullmatch=True),  # unexpanded $HOME/... paths
    st.from_regex(r"\A'[a-z0-9 ./-]{0,8}'\Z", fullmatch=True),
    st.from_regex(r'\A"[a-z0-9 .\'/-]{0,8}"\Z', fullmatch=True),
    st.text(alphabet=_ALPHABET, max_size=10),
)
_values = st.one_of(_atoms, st.lists(_atoms, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(key=st.from_regex(r"\A[a-z_][a-z0-9_]{0,6}(\.[a-z0-9_]{1,6}){0,2}\Z", fullmatch=True),
       prefix=st.sampled_from(["", "+", "++"]),
       value=_values)
def test_fast_path_agrees_with_hydra(key: str, prefix: str, value: str) -> None:
    text = f"{prefix}{key}={value}"
    fast = _parse_simple(text)
    assume(fast is not None)
    slow = parse_override_with_hydra(text)
    assert (fast.kind, fast.key) == (slow.kind, slow.key)
    assert _same(fast.value, slow.value), (text, fast.value, slow.value)


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10**12, max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=True, width=64),
    st.text(alphabet=st.characters(codec="ascii", exclude_categories=("Cc",)), max_size=20),
)


@settings(max_examples=400, deadline=None)
@given(value=st.one_of(scalars, st.lists(scalars, max_size=4)))
def test_render_round_trips(value: object) -> None:
    rendered = render_override("a.b", value)
    parsed = parse_override(rendered)
    assert _same(parsed.value, value), (rendered, parsed.value)


def test_render_marks_new_keys_with_double_plus() -> None:
    assert render_override("x.y", 5e-07, add=True) == "++x.y=5e-07"
    assert render_value([1, "a b"]) == "[1,'a b']"
