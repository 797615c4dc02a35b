"""What the advisor reports: findings and the config changes that fix them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .typed import StrEnum


class Severity(StrEnum):
    """How bad a finding or diagnosis is (its members equal the strings "error", "warning", "info")."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class Change:
    """Set one config key: ``key`` goes ``old`` -> ``new`` (``new`` None with ``delete`` removes it)."""

    key: str
    old: Any
    new: Any
    reason: str = ""
    delete: bool = False
    add: bool = False  # the key is not in verl's defaults (rendered as ++key=value)
    renames: str | None = None  # a misspelt key this one replaces: in a file, that key is renamed

    def override(self) -> str:
        from advisor.verl import render_override

        if self.delete:
            return f"~{self.key}"
        return render_override(self.key, self.new, add=self.add)

    def to_dict(self) -> dict[str, Any]:
        out = {"key": self.key, "from": self.old, "to": None if self.delete else self.new, "reason": self.reason}
        if self.renames:
            out["rename_from"] = self.renames
        return out


@dataclass(frozen=True)
class Finding:
    """One diagnosed problem (never an exception: the input was readable).

    ``source`` names what the finding mirrors: a verl file:line for rules verl itself enforces, a
    doc page or the advisor's own reasoning for what verl never checks.
    """

    id: str
    name: str
    severity: Severity
    message: str
    keys: tuple[str, ...] = ()
    source: str = ""
    fix: tuple[Change, ...] = ()
    where: str | None = None  # file:line of the offending setting, when known
    details: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "message": self.message,
                               "keys": list(self.keys), "source": self.source}
        if self.where:
            out["where"] = self.where
        if self.fix:
            out["fix"] = [c.to_dict() for c in self.fix]
        return out


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.id))
