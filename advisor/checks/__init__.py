"""Pre-launch findings: every rule verl applies, what it never checks but users trip on, and memory.

``run_checks(cfg)`` returns findings sorted by severity, each error or warning with a verified fix;
``check(cfg)`` adds the batch layers and the per-phase memory estimate (``advisor check``). Each check
is one ``@check(id, name, severity, source)`` function in ``algorithm``, ``batch``, ``rollout`` or
``values``.
"""

from __future__ import annotations

from ._citations import citations
from ._registry import CHECKS, Check, CheckContext, Issue
from ._report import CheckReport, check, model_facts
from ._run import changes_that_hold, run_checks

__all__ = [
    "CHECKS",
    "Check",
    "CheckContext",
    "CheckReport",
    "Issue",
    "changes_that_hold",
    "check",
    "citations",
    "model_facts",
    "run_checks",
]
