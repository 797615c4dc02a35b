"""``advisor explain METRIC``: one metric's verl source, formula, healthy range and the rules that read it.

A name resolves in this order: a catalogued metric or family (``knowledge/metrics.yaml``), an old name
renamed through the metric-alias table (``knowledge/metric_aliases.yaml``, when the metrics readers
that own it are installed), a name some guide describes that verl never logs. Anything else is an
unknown metric: a one-line error with the closest catalog names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor.errors import MetricsError
from advisor.metrics import Catalog, HealthyRange, MetricInfo, NotLogged, load_catalog
from advisor.wildcard import matches

from ._rule_loader import Rule

if TYPE_CHECKING:
    from rich.console import Console


@dataclass(frozen=True)
class Renaming:
    """An old metric name and the current one it maps to."""

    old: str
    new: str
    verl: str  # the versions that wrote the old name
    note: str = ""
    scale: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"old": self.old, "new": self.new, "verl": self.verl, "note": self.note, "scale": self.scale}


@dataclass(frozen=True)
class RuleRef:
    """A playbook rule that reads the metric, with the range it judges it against (if it has one)."""

    id: str
    name: str
    tree: str
    summary: str
    healthy: HealthyRange | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "tree": self.tree, "summary": self.summary,
                "healthy": self.healthy.to_dict() if self.healthy else None}


@dataclass(frozen=True)
class Explanation:
    query: str
    name: str  # the current name (after renaming)
    verl_version: str  # the release the catalog's sources cite
    before_commit: str = ""  # the commit its source_before lines cite
    info: MetricInfo | None = None
    renamed: Renaming | None = None
    not_logged: NotLogged | None = None
    rules: tuple[RuleRef, ...] = field(default_factory=tuple)

    @property
    def kind(self) -> str:
        if self.info is None:
            return "not_logged"
        return "pattern" if self.info.is_pattern else "metric"

    def to_dict(self) -> dict[str, Any]:
        info = self.info
        return {
            "query": self.query,
            "name": self.name,
            "kind": self.kind,
            "pattern": info.name if info is not None and info.is_pattern else None,
            "renamed": self.renamed.to_dict() if self.renamed else None,
            "source": info.source if info else None,
            "formula": info.formula if info else None,
            "meaning": info.meaning if info else None,
            "healthy": info.healthy.to_dict() if info and info.healthy else None,
            "since": info.since if info else None,
            "when": info.when if info else None,
            "notes": info.notes if info else None,
            "known": [info.expand(k) for k in info.known] if info and info.is_pattern else [],
            "not_logged": self.not_logged.to_dict() if self.not_logged else None,
            "source_before": info.source_before if info else None,
            "until": info.until if info else None,
            "verl_version": self.verl_version,
            "before_commit": self.before_commit,
            "rules": [r.to_dict() for r in self.rules],
        }


def rename_metric(name: str) -> Renaming | None:
    """``name`` renamed through the metric-alias table, or None (current name, or no table installed)."""
    try:
        from advisor.metrics import rename  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # the metrics readers (and their alias table) are not part of this install
        return None
    renamed = rename(name)
    if renamed is None:
        return None
    note = _alias_note(renamed.rule.pattern.pattern)
    unless = getattr(renamed.rule, "unless_logged", None)
    if unless:
        note = f"{note} Not applied to a log that also holds '{unless}'.".strip()
    return Renaming(old=name, new=renamed.new, verl=renamed.rule.verl, note=note, scale=renamed.scale)


def _alias_note(match: str) -> str:
    from advisor.datafiles import load_knowledge

    for entry in load_knowledge("metric_aliases.yaml").get("aliases") or ():
        if entry.get("match") == match:
            return " ".join(str(entry.get("note") or "").split())
    return ""


def _rules_reading(name: str, info: MetricInfo | None, rules: Iterable[Rule]) -> tuple[RuleRef, ...]:
    wanted = {name} | ({info.name} if info is not None else set())
    out = []
    for rule in rules:
        read = rule.metrics
        hit = bool(read & wanted)
        if not hit and info is not None and info.is_pattern and name == info.name:
            hit = any(matches(m, info.name) for m in read)  # explaining the family itself
        if not hit:
            continue
        band = rule.healthy.get(name) or (rule.healthy.get(info.name) if info is not None else None)
        healthy = None
        if band is not None and (band.get("low") is not None or band.get("high") is not None):
            healthy = HealthyRange(band.get("low"), band.get("high"), str(band.get("source", "")))
        out.append(RuleRef(rule.id, rule.name, rule.tree, rule.summary, healthy))
    return tuple(sorted(out, key=lambda r: r.id))


def explain_metric(name: str, *, rules: Iterable[Rule] | None = None,
                   catalog: Catalog | None = None) -> Explanation:
    """Explain one metric name.

    Args:
        name: a metric as verl logs it now, an older name, or a member of a family (``val-core/...``).
        rules: the playbook to search for rules that read it (default: every rule in knowledge/rules).
        catalog: the metric catalog (default: knowledge/metrics.yaml).

    Raises:
        MetricsError: the name is neither catalogued, renamed by the alias table, nor a known non-verl
            name; the message suggests the closest catalog names.
    """
    catalog = catalog or load_catalog()
    query = name.strip()
    if rules is None:
        from ._rule_loader import load_playbook

        rules = load_playbook()
    info = catalog.lookup(query)
    renamed = rename_metric(query)
    current = query
    if renamed is not None and (info is None or info.is_pattern):
        current = renamed.new
        info = catalog.lookup(current) or info
    if info is not None:
        return Explanation(query, current, catalog.verl_version, catalog.before_commit, info=info,
                           renamed=renamed, rules=_rules_reading(current, info, rules))
    not_logged = catalog.lookup_not_logged(query)
    if not_logged is not None:
        return Explanation(query, query, catalog.verl_version, catalog.before_commit, not_logged=not_logged)
    close = catalog.closest(query)
    hint = "did you mean " + ", ".join(f"'{c}'" for c in close) + "?" if close else \
        "run 'advisor explain' with a name as verl logs it, e.g. 'actor/ppo_kl'"
    raise MetricsError(f"unknown metric '{query}'", key=query, suggestion=hint)


def render_explanation(expl: Explanation, console: Console) -> None:
    """The explanation as labelled lines for people."""
    from rich.markup import escape
    from rich.table import Table

    console.print(f"[bold]{escape(expl.name)}[/bold]" + (
        f"  [dim](family {escape(expl.info.name)})[/dim]" if expl.info is not None and expl.info.is_pattern
        and expl.info.name != expl.name else ""))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="dim")
    grid.add_column(overflow="fold")

    def row(label: str, text: str | None) -> None:
        if text:
            grid.add_row(label, escape(text))

    if expl.renamed is not None:
        r = expl.renamed
        scaled = f"; values x {r.scale:g}" if r.scale != 1.0 else ""
        if expl.name == r.old:  # a current name that older verl used for something else
            row("older logs", f"in verl {r.verl} logs '{r.old}' is what is now '{r.new}'{scaled}. {r.note}".strip())
        else:
            row("renamed", f"'{r.old}' is what verl {r.verl} logs; read as '{r.new}'{scaled}. {r.note}".strip())
    if expl.not_logged is not None:
        nl = expl.not_logged
        row("not logged", f"verl does not log this name (described in {nl.seen_in}). {nl.note}")
        row("instead", ", ".join(nl.instead) or None)
    info = expl.info
    if info is not None:
        row("source", f"{info.source}  [verl {expl.verl_version or 'HEAD'}]")
        if info.source_before:
            row("earlier", f"{info.source_before}  [verl {expl.before_commit[:8] or 'HEAD'}]")
        row("formula", info.formula)
        row("meaning", info.meaning)
        if info.healthy is not None:
            scope = f", {info.healthy.scope}" if info.healthy.scope else ""
            row("healthy", f"{info.healthy.describe()}{scope}  ({info.healthy.source})")
        else:
            row("healthy", "no published range")
        row("logged", f"since verl {info.since}" + (f", until {info.until}" if info.until else "")
            + (f"; only when {info.when}" if info.when else ""))
        row("notes", info.notes)
        if info.is_pattern and info.known:
            row("members", ", ".join(info.expand(k) for k in info.known))
        if expl.rules:
            lines = []
            for rule in expl.rules:
                line = f"{rule.id} {rule.name} ({rule.tree}): {rule.summary}"
                if rule.healthy is not None:
                    line += f" [judges {rule.healthy.describe()}]"
                lines.append(line)
            row("rules", "\n".join(lines))
        else:
            row("rules", "no playbook rule reads it")
    console.print(grid)
