"""``advisor rule ID`` / ``advisor rule --list``: what a finding id checks and where it lives (as ``ruff rule``)."""

from __future__ import annotations

from typing import Any

from ._code_table import CodeInfo, all_codes, lookup

_KINDS = {"load": "reading the config", "memory": "memory model (check --gpu)", "band": "playbook safety net",
          "check": "pre-launch check", "rule": "playbook rule (suggest)"}


def rule_document(code_id: str | None) -> dict[str, Any]:
    """The JSON document: one id (``rule``) or every id (``rules``). Raises AdvisorError for an unknown id."""
    if code_id is None:
        return {"rules": [info.to_dict() for info in all_codes().values()]}
    return {"rule": lookup(code_id).to_dict()}


def describe(info: CodeInfo) -> str:
    """One id as text: a title line, then what it checks, what it mirrors and where it is implemented."""
    lines = [f"{info.id} {info.name} ({info.severity}; {_KINDS[info.kind]})", "",
             f"  checks:       {info.summary}"]
    if "tree" in info.extra:
        lines.append(f"  tree:         {info.extra['tree']}")
    if "verl" in info.extra:
        lines.append(f"  verl:         {info.extra['verl']}")
    for i, source in enumerate(info.sources):
        lines.append(f"  {'source:' if i == 0 else '':<13} {source}")
    lines.append(f"  implemented:  {info.location}")
    return "\n".join(lines)


def listing() -> str:
    """Every id, one line each: id, severity, name, what it checks."""
    codes = all_codes().values()
    width = max(len(c.name) for c in codes)
    return "\n".join(f"{c.id:<6} {c.severity:<8} {c.name:<{width}}  {c.summary}" for c in codes)
