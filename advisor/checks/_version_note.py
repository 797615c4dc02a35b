"""Why a config was read as the verl version it was, and whether the newest release would take it.

``advisor check`` on a laptop without verl reads a script as the version whose defaults best explain its keys
(advisor.verl.detect_version). The header says which keys ruled the newer versions out, and, when the
newest release is not that version, which keys it would reject: most users run the newest release.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from advisor.codes import CONFIG_GROUP_CHOICE
from advisor.verl import (
    OverrideKind,
    at_least,
    newest_release,
    removed_by,
    supported_versions,
    version_conflicts,
)

if TYPE_CHECKING:
    from advisor.load import VerlConfig

_SHOWN = 3  # keys named in a line; the rest are counted


@dataclass(frozen=True)
class VersionNote:
    """The evidence behind a detected version."""

    version: str
    newer_rejects: tuple[str, ...]  # keys the next newer version would not take (why it lost)
    newer_version: str | None  # that next newer version (None: the detected one is the newest)
    newest: str  # the newest release
    # keys the newest release would not take but the detected version does (empty when it is the detected one)
    newest_rejects: tuple[str, ...]

    @property
    def why(self) -> str:
        if self.newer_version is None:
            return "the newest version the advisor knows"
        if not self.newer_rejects:
            return f"verl {self.newer_version} fits these keys no better, and a tie goes to the newest release"
        return f"verl {self.newer_version} and later do not take {_keys(self.newer_rejects)}"

    @property
    def newest_line(self) -> str | None:
        if not self.newest_rejects:
            return None
        n = len(self.newest_rejects)
        return (f"verl {self.newest}, the newest release, would reject {n} key{'s' if n > 1 else ''} of this config: "
                f"{_keys(self.newest_rejects)} (--verl-version {self.newest} checks it as that release)")

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "why": self.why, "newer_version": self.newer_version,
                "newer_rejects": list(self.newer_rejects), "newest_release": self.newest,
                "newest_rejects": list(self.newest_rejects)}


def _keys(keys: tuple[str, ...]) -> str:
    shown = ", ".join(keys[:_SHOWN])
    return shown + (f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")


def version_note(cfg: VerlConfig) -> VersionNote | None:
    """The evidence for a detected version (None when the version was given or read from an installed verl)."""
    if not getattr(cfg, "version_detected", False) or getattr(cfg, "version_installed", None) \
            or cfg.kind not in ("script", "yaml"):
        return None
    unseen = tuple(f"{f.keys[0]}." for f in cfg.findings if f.id == CONFIG_GROUP_CHOICE.id and f.keys)
    settings = [s for s in cfg.settings if not s.key.startswith(("hydra.", *unseen))]
    keys = [s.key for s in settings if s.kind is not OverrideKind.DELETE]
    changed = [s.key for s in settings if s.kind is OverrideKind.CHANGE and cfg.kind == "script"]
    added = [s.key for s in settings if s.kind is OverrideKind.ADD]

    removed = partial(removed_by, config_name=cfg.config_name)

    def rejects(version: str) -> tuple[str, ...]:
        return version_conflicts(keys, cfg.config_name, version, changed=changed, added=added, removed=removed)

    own = set(rejects(cfg.version))  # keys no version takes (a typo) are the check's errors, not evidence

    def beyond_own(version: str) -> tuple[str, ...]:
        return tuple(k for k in rejects(version) if k not in own)

    newer = [v.version for v in supported_versions() if not at_least(cfg.version, v.version)]
    newer_version = newer[0] if newer else None
    newest = newest_release()
    newest_rejects = beyond_own(newest) if not at_least(cfg.version, newest) else ()
    return VersionNote(cfg.version, beyond_own(newer_version) if newer_version else (), newer_version, newest,
                       newest_rejects)
