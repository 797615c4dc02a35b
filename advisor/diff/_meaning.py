"""Whether an edit changes only the keys it names: the edited text read back and compared with the intent.

``--write`` reads its own result before it writes it: the edited file, loaded as ``check`` loads it, must give
the config the changes describe (the original with each change applied, as ``key=value`` would be), key for key
on the unresolved tree (an interpolation that follows a changed key, ``${data.max_response_length}``, is the
same text before and after). A key that moved besides (a second override of a key, an override lost to a
broken line continuation) refuses the edit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from advisor.findings import Change
from advisor.load import VerlConfig, load_config_text
from advisor.verl import flatten_leaves


def moved_keys(before: VerlConfig, after: VerlConfig) -> dict[str, tuple[Any, Any]]:
    """Keys whose value (unresolved) differs between two configs: key -> (before, after)."""
    a, b = flatten_leaves(before.container), flatten_leaves(after.container)
    return {k: (a.get(k, _ABSENT), b.get(k, _ABSENT)) for k in a.keys() | b.keys()
            if a.get(k, _ABSENT) != b.get(k, _ABSENT)}


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


def unintended_moves(cfg: VerlConfig, text: str, changes: Sequence[Change], overrides: Sequence[str] = ()
                     ) -> dict[str, tuple[Any, Any]]:
    """Keys ``text`` (the edited file) sets otherwise than ``cfg`` with ``changes`` applied: key -> (meant, got).
    Empty: the edit moves only its own keys."""
    meant = cfg.with_changes(changes)
    got = load_config_text(text, cfg.path or "config", overrides, verl_version=cfg.version,
                           script_vars=cfg.launch.variables if cfg.launch is not None else None)
    return moved_keys(meant, got)
