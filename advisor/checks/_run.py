"""Pre-launch validation: every rule verl applies, plus what it never checks but users trip on.

``run_checks(cfg)`` returns findings sorted by severity. Each error or warning carries a fix of one
or two keys that was verified: applying it clears the finding and introduces no new error.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from advisor.facts import batch_plan
from advisor.findings import Change, Finding, Severity, sort_findings
from advisor.load import VerlConfig

from . import algorithm, batch, rollout, values  # noqa: F401  (importing them registers the checks)
from ._registry import CHECKS, Check, CheckContext, Issue
from ._thresholds import check_thresholds

__all__ = ["CHECKS", "Check", "changes_that_hold", "run_checks"]

_MAX_FIX_KEYS = 2
_MAX_DEPENDENT_FIXES = 2


def _evaluate(cfg: VerlConfig, model: Any | None) -> list[tuple[Check, Issue]]:
    ctx = CheckContext(cfg, batch_plan(cfg), model, check_thresholds())
    # a recipe with its own rollout worker (dance_grpo) never builds verl's rollout: the R rules do not apply
    skip_rollout = cfg.entry is not None and cfg.entry.own_rollout
    return [(chk, issue) for chk in CHECKS
            if chk.applies_to(cfg.version) and not (skip_rollout and chk.id.startswith("R"))
            for issue in chk.fn(ctx)]


def _signature(chk: Check, issue: Issue) -> tuple[str, tuple[str, ...]]:
    return chk.id, issue.keys


def _verified_fix(cfg: VerlConfig, chk: Check, issue: Issue, before: set[tuple[str, tuple[str, ...]]],
                  model: Any | None) -> tuple[Change, ...]:
    """The first candidate (fewest keys first) that clears this issue and raises nothing new."""
    for candidate in sorted(issue.fixes, key=len):
        if not candidate or len(candidate) > _MAX_FIX_KEYS:
            continue
        changes = tuple(Change(k, cfg.get(k), v, _reason(chk, issue), add=not cfg.has(k)) for k, v in candidate.items())
        if all(c.old == c.new for c in changes):
            continue
        patched = cfg.with_changes(changes)
        after = _evaluate(patched, model)
        still = any(_signature(c, i) == _signature(chk, issue) for c, i in after)
        new_problems = [c for c, i in after if (i.severity or c.severity) != Severity.INFO and not c.trap
                        and _signature(c, i) not in before]
        load_errors = [f for f in patched.findings if f.severity == Severity.ERROR]
        if not still and not new_problems and \
                len(load_errors) <= len([f for f in cfg.findings if f.severity == Severity.ERROR]):
            return changes
    return ()


def _reason(chk: Check, issue: Issue) -> str:
    """Why a fix helps, one line: the issue's own reason, else the rule the check mirrors (its summary)."""
    return issue.reason or chk.summary


def _maybe_set_elsewhere(cfg: VerlConfig, keys: tuple[str, ...]) -> tuple[str, int] | None:
    """(key, line) when a launch script may set one of these keys in a block that is not evaluated."""
    maybe = cfg.launch.maybe_set if cfg.launch is not None else {}
    return next(((k, maybe[k]) for k in keys if k in maybe), None)


def run_checks(cfg: VerlConfig, *, model: Any | None = None, verify_fixes: bool = True) -> list[Finding]:
    """All findings for a config: load-time ones first, then every registered check.

    Args:
        cfg: the loaded config.
        model: architecture facts when the model is known (enables head-divisibility checks).
        verify_fixes: search each issue's candidate fixes for one that passes validation.
    """
    results = _evaluate(cfg, model)
    before = {_signature(c, i) for c, i in results}
    findings = list(cfg.findings)
    for chk, issue in results:
        fix = _verified_fix(cfg, chk, issue, before, model) if verify_fixes and issue.fixes else ()
        # a candidate that clears this issue only together with another key: a later fix may supply it
        first = () if fix or not issue.fixes else tuple(
            Change(k, cfg.get(k), v, _reason(chk, issue), add=not cfg.has(k))
            for k, v in sorted(issue.fixes, key=len)[0].items())
        severity, message = issue.severity or chk.severity, issue.message
        unsure = _maybe_set_elsewhere(cfg, issue.keys)
        if severity == Severity.ERROR and unsure:
            # the script may give verl another value in a block the reader does not evaluate: not certain
            severity = Severity.WARNING
            message += (f" (the script may set {unsure[0]} at line {unsure[1]}, in a block that depends on the "
                        "environment)")
        findings.append(Finding(
            id=chk.id, name=chk.name, severity=severity, message=message,
            keys=issue.keys, source=issue.source or chk.source_for(cfg.version), fix=fix,
            where=cfg.where(issue.keys[0]) if issue.keys else None,
            details={"needs_more": first} if first else {},
        ))
    return sort_findings(findings)


def changes_that_hold(cfg: VerlConfig, changes: list[Change], before: set[tuple[str, tuple[str, ...]]], *,
                      model: Any | None = None, cause: str | None = None) -> list[Change] | None:
    """The changes, applied together and re-checked as one, plus the dependent keys they need; or None.

    A finding the changes raise that was not there before (``before``: (id, keys) of the findings of
    the config as it is) is answered with its own verified fix (kl_loss_coef set while use_kl_loss is
    false: use_kl_loss=true too), at most twice; an error or warning that has no fix rejects the set.
    A new informational finding without a fix is kept: it reports, it does not hurt. ``cause``: the key whose
    change the dependent keys answer, named in their reason (default: the first change).
    """
    chosen = list(changes)
    cause = cause or chosen[0].key
    for _ in range(_MAX_DEPENDENT_FIXES + 1):
        patched = cfg.with_changes(chosen)
        quick = run_checks(patched, model=model, verify_fixes=False)
        if not any((f.id, f.keys) not in before for f in quick):
            return chosen
        new = [f for f in run_checks(patched, model=model) if (f.id, f.keys) not in before]
        keys = {c.key for c in chosen}
        dependent = next((f for f in new if _fix_of(f) and not any(c.key in keys for c in _fix_of(f))), None)
        if dependent is None:
            traps = {c.id for c in CHECKS if c.trap}
            return chosen if all(f.severity == Severity.INFO or f.id in traps for f in new) else None
        chosen.extend(replace(c, reason=f"{cause} needs it ({dependent.id}: {dependent.message})")
                      for c in _fix_of(dependent))
        cause = _fix_of(dependent)[0].key  # a further dependent key is needed by this one
    return None


def _fix_of(finding: Finding) -> tuple[Change, ...]:
    return finding.fix or finding.details.get("needs_more", ())
