"""verl versions: one ordering (PEP 440, as the package index orders verl's releases) for every module.

``0.8.0.dev`` (unreleased main before 0.8.0) < ``0.8.0`` < ``0.8.0.post1``; ``0.10.0.dev`` > ``0.9.1``.
"""

from __future__ import annotations

from functools import lru_cache

from packaging.version import InvalidVersion, Version

from advisor.operators import COMPARISONS, compare


@lru_cache(maxsize=512)
def version_key(version: str) -> Version:
    """A sortable key for a verl version string (``0.9.1``, ``0.10.0.dev``, ``v0.7.0``)."""
    try:
        return Version(version.strip().lower().lstrip("v"))
    except InvalidVersion:
        raise ValueError(f"verl version must look like '0.9.1' but got {version!r}") from None


def is_version(text: str) -> bool:
    try:
        version_key(text)
    except ValueError:
        return False
    return True


def at_least(version: str | None, release: str) -> bool:
    """Whether verl ``version`` is ``release`` or newer: every "since verl X" decision asks this.

    The one rule for a version the advisor does not know (None, empty, or text that is no version): it counts
    as the newest release, so it is at least every release. That is the reading ``detect_version`` gives a
    config with no telling key (ties go to the newest release), and the release a user most likely runs.
    ``not at_least(v, "0.8.0.dev")`` is "before 0.8" (main's 0.8.0.dev already has 0.8's code).
    """
    if not version or not is_version(version):
        return True
    return version_key(version) >= version_key(release)


_SYMBOLS = sorted(COMPARISONS, key=len, reverse=True)  # ">=" before ">"


@lru_cache(maxsize=512)
def _bounds(spec: str) -> tuple[tuple[str, Version], ...]:
    out = []
    for part in spec.split(","):
        part = part.strip()
        op = next((o for o in _SYMBOLS if part.startswith(o)), None)
        if op is None:
            raise ValueError(f"version range must look like '>=0.7.0,<0.9' but got {spec!r}")
        out.append((op, version_key(part[len(op):])))
    return tuple(out)


def in_range(version: str, spec: str | None) -> bool:
    """Whether a version satisfies a range such as ``>=0.7.0,<0.9``, in plain version order: a rule for
    ``<0.8.0`` applies to ``0.8.0.dev``, which comes before 0.8.0 (PEP 440 specifiers would exclude it)."""
    if not spec:
        return True
    key = version_key(version)
    return all(compare(op, key, bound) for op, bound in _bounds(spec))


def validate_range(spec: str) -> None:
    """Raise ValueError when a version range does not parse (rule and check loaders call this)."""
    _bounds(spec)
