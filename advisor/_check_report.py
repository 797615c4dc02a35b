"""``advisor check``: validation findings, the batch layers and one combined, verified diff."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._batch import BatchPlan, batch_plan
from ._checks import run_checks
from ._config import VerlConfig
from ._findings import Change, Finding

SCHEMA_VERSION = 1


@dataclass
class CheckReport:
    config: VerlConfig
    findings: list[Finding]
    batch: BatchPlan
    changes: list[Change] = field(default_factory=list)
    memory: Any | None = None  # advisor.memory.MemoryEstimate when a GPU was given

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def infos(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "info"]

    @property
    def overrides(self) -> list[str]:
        return [c.override() for c in self.changes]

    @property
    def exit_code(self) -> int:
        memory_oom = self.memory is not None and getattr(self.memory, "verdict", "ok") == "oom"
        return 1 if self.errors or memory_oom else 0

    def to_dict(self) -> dict[str, Any]:
        cfg = self.config
        out: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "verl_version": cfg.version,
            "config": {"path": cfg.path, "kind": cfg.kind, "config_name": cfg.config_name,
                       "version_detected": cfg.version_detected},
            "errors": [f.to_dict() for f in self.errors],
            "warnings": [f.to_dict() for f in self.warnings],
            "infos": [f.to_dict() for f in self.infos],
            "batch": self.batch.to_dict(),
            "changes": [c.to_dict() for c in self.changes],
            "overrides": self.overrides,
        }
        if self.memory is not None:
            out["memory"] = self.memory.to_dict()
        return out


def combine_fixes(cfg: VerlConfig, findings: list[Finding], *, model: Any | None = None) -> list[Change]:
    """Merge the findings' verified fixes into one diff (errors first), keeping it valid as a whole.

    A later fix that touches a key an earlier one already changed is skipped; a fix is dropped if,
    together with the ones before it, it leaves or adds an error.
    """
    chosen: list[Change] = []
    touched: set[str] = set()
    for finding in findings:
        if finding.severity == "info" or not finding.fix:
            continue
        if any(c.key in touched for c in finding.fix):
            continue
        trial = chosen + list(finding.fix)
        patched = cfg.with_changes(trial)
        after = run_checks(patched, model=model, verify_fixes=False)
        before_errors = {(f.id, f.keys) for f in findings if f.severity == "error"}
        if any(f.severity == "error" and (f.id, f.keys) not in before_errors for f in after):
            continue
        chosen = trial
        touched.update(c.key for c in finding.fix)
    return chosen


def check(cfg: VerlConfig, *, model: Any | None = None, memory: Any | None = None) -> CheckReport:
    """Validate a config and explain its batch layers."""
    findings = run_checks(cfg, model=model)
    changes = combine_fixes(cfg, findings, model=model)
    return CheckReport(cfg, findings, batch_plan(cfg), changes, memory)
