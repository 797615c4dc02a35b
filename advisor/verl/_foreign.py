"""Keys that exist outside verl's releases: a verl-recipe recipe's own, or a verl commit's between releases.

From ``knowledge/foreign_keys.yaml`` (``scripts/generate_foreign_keys.py``, each key with where it was read). Such
a key is not a typo: "did you mean" never renames it onto a verl key (GPG's ``use_gpg_loss`` is not
``use_kl_loss``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from advisor.datafiles import load_knowledge


@dataclass(frozen=True)
class ForeignKey:
    """A key defined outside verl's releases: who defines it, and where it was read."""

    key: str
    owner: str
    source: str


@cache
def _table() -> dict[str, ForeignKey]:
    entries = load_knowledge("foreign_keys.yaml")["keys"]
    return {e["key"]: ForeignKey(e["key"], e["owner"], e["source"]) for e in entries}


def foreign_key(key: str) -> ForeignKey | None:
    """The recipe or verl commit that defines ``key`` when no release does (None: no record of it)."""
    return _table().get(key)
