"""The rule loader: rule files under ``knowledge/rules/<tree>/<ID>-<name>.yaml`` -> validated :class:`Rule` records.

A rule says which runs it applies to (mode, KL placement, verl version, config), the conditions on
metric signals that make it fire, the healthy ranges it judges against (with their source), the verl
source of every metric it reads, why it matters, and ordered candidate fixes of at most two keys.
Conditions use a small, fixed vocabulary of tests (the records of ``_conditions``, each declaring its
arguments and what it tests); a new rule needs review of its data only. Every field is checked at load: an
unknown or missing field or argument, a value outside its closed set (``_rule_schema``), a fix expression other
than a literal, ``{current} * k`` or ``{current} / k``, or a message placeholder that names no field
(``_message``) is one line naming the file, the rule and the field, with "did you mean".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from advisor.datafiles import knowledge_dir, load_knowledge
from advisor.errors import ConfigError, PlaybookError
from advisor.findings import Severity
from advisor.typed import SchemaError, did_you_mean, enum_value
from advisor.verl import validate_range

from ._conditions import TESTS, ConditionTest, build_args, given_args
from ._derived import DERIVED_KINDS
from ._harm import RANGE_KINDS
from ._message import message_problem
from ._rule_schema import ConfigOp, Fact, KlPlacement, Mode, Safety, Status, Tree

TREES = tuple(Tree)  # in investigation order (see Tree)
TREE_PRIORITY = {tree: i for i, tree in enumerate(TREES)}
PERFORMANCE_TREES = frozenset({Tree.MEMORY, Tree.THROUGHPUT})
SEVERITIES = tuple(Severity)
STATUSES = tuple(Status)
MODES = tuple(Mode)
KL_PLACEMENTS = tuple(KlPlacement)
CONFIG_OPS = tuple(ConfigOp)
_ID = re.compile(r"^[A-Z]{2,3}\d{3}$")
_FIX_EXPR = re.compile(r"^\{current\}\s*([*/])\s*(\S+)$")
# keys that only shape memory and speed (perf_tuning.rst: "performance-related parameters");
# a convergence diagnosis must never propose them
PERFORMANCE_KEY = re.compile(
    r"(micro_batch_size|max_token_len|use_dynamic_bsz|gpu_memory_utilization|_offload|offload_policy|"
    r"enable_gradient_checkpointing|enable_activation_offload|max_num_seqs|max_num_batched_tokens|enforce_eager|"
    r"tensor_model_parallel_size|free_cache_engine|entropy_from_logits_with_chunking|entropy_checkpointing|"
    r"fsdp_size|model_dtype|use_remove_padding|cudagraph_capture_sizes|agent\.num_workers)"
)
# the fields each part of a rule file may have (anything else is a typo: "did you mean")
_REQUIRED = ("id", "name", "tree", "severity", "summary", "conditions", "message", "rationale", "sources")
_FIELDS = (*_REQUIRED, "status", "applies_to", "evidence", "healthy", "harm", "fix_order", "explains", "checks",
           "fixes")
_APPLIES_FIELDS = ("mode", "kl", "verl", "config", "facts")
_FIX_FIELDS = ("set", "reason", "when", "when_config", "when_facts", "safety")
_HARM_FIELDS = ("text", "any")
_BAND_FIELDS = ("low", "high", "source", "text")
CATALOG = "catalog"  # `healthy: {metric: catalog}`: the metric's band as knowledge/metrics.yaml gives it


def _catalog_band(metric: str) -> dict[str, Any] | None:
    """A metric's healthy band from the metrics catalog, as a rule file writes one (None when it has none: the
    loader then says a band needs low/high and a source)."""
    from advisor.metrics import load_catalog

    info = load_catalog().metrics.get(metric)
    band = info.healthy if info is not None else None
    return None if band is None else {"low": band.low, "high": band.high, "source": band.source}
_CONFIG_FIELDS = ("key", "op", "value")
_CONDITION_KEYS = ("test", "metric", "not")  # beside the test's own arguments

E = TypeVar("E", bound=Enum)


@dataclass(frozen=True)
class Condition:
    test: str
    metric: str | None = None
    params: ConditionTest | None = None  # the test's record (``_conditions``), its arguments; None for ``any``
    any_of: tuple[tuple[Condition, ...], ...] = ()  # for {any: [[...], [...]]}
    negate: bool = False  # `not: true`: the condition holds when the test does not

    @property
    def args(self) -> dict[str, Any]:
        """The test's arguments by name (defaults included, unset optional ones left out)."""
        return given_args(self.params)


@dataclass(frozen=True)
class ConfigCondition:
    key: str
    op: ConfigOp
    value: Any


@dataclass(frozen=True)
class Fix:
    set: dict[str, Any]
    reason: str = ""
    when: tuple[Condition, ...] = ()
    when_config: tuple[ConfigCondition, ...] = ()
    when_facts: dict[str, Any] = field(default_factory=dict)
    safety: Safety = Safety.SAFE


@dataclass(frozen=True)
class Harm:
    """What hurts the run, without which a diagnosis is only a trend (shown as info, no diff).

    ``any_of`` empty: the rule's conditions are themselves the harm (a NaN loss, no reward at all).
    """

    text: str
    any_of: tuple[tuple[Condition, ...], ...] = ()


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    tree: Tree
    status: Status
    severity: Severity
    summary: str
    modes: tuple[Mode, ...]
    kl: tuple[KlPlacement, ...]
    verl: str | None
    config: tuple[ConfigCondition, ...]
    facts: dict[str, Any]
    conditions: tuple[Condition, ...]
    evidence: tuple[str, ...]
    healthy: dict[str, dict[str, Any]]
    message: str
    rationale: str
    checks: tuple[str, ...]
    fixes: tuple[Fix, ...]
    sources: tuple[str, ...]
    path: str
    harm: Harm | None = None
    fix_order: str = ""  # where the order of `fixes` comes from (verl's docs, a paper)
    explains: tuple[str, ...] = ()  # rules whose symptoms this rule's cause produces: it ranks ahead of them

    @property
    def metrics(self) -> set[str]:
        """Every metric the rule reads (conditions, evidence, healthy ranges)."""
        names = set(self.evidence) | set(self.healthy)
        stack = list(self.conditions) + [c for f in self.fixes for c in f.when]
        if self.harm is not None:
            stack.extend(c for group in self.harm.any_of for c in group)
        while stack:
            cond = stack.pop()
            if cond.metric:
                names.add(cond.metric)
            if "other" in cond.args:
                names.add(cond.args["other"])
            if isinstance(cond.params, (*DERIVED_KINDS, *RANGE_KINDS)):  # these read more than their metric
                names.update(cond.params.reads())
            stack.extend(c for group in cond.any_of for c in group)
        return names


def fix_expression(expr: str) -> tuple[str, float] | None:
    """A fix value ``{current} * k`` or ``{current} / k`` as (operator, k), k a finite number above 0; None when it
    is not one (the loader rejects such a value when it holds a brace)."""
    match = _FIX_EXPR.match(expr.strip())
    if match is None:
        return None
    try:
        factor = float(match.group(2))
    except ValueError:
        return None
    return (match.group(1), factor) if math.isfinite(factor) and factor > 0 else None


class _Reader:
    """Reads one rule file's data; every error names the file, the rule and the field."""

    def __init__(self, path: Path) -> None:
        self.path, self.rule_id = path, ""

    def error(self, message: str, field: str | None = None, suggestion: str | None = None) -> PlaybookError:
        where = " ".join(p for p in (f"rule {self.rule_id}:" if self.rule_id else "",
                                     f"{field}:" if field else "") if p)
        return PlaybookError(f"{where} {message}" if where else message, path=str(self.path), key=field,
                             suggestion=suggestion)

    def schema(self, err: SchemaError) -> PlaybookError:
        return self.error(err.message, err.field, err.suggestion)

    def known_fields(self, raw: dict[str, Any], allowed: Iterable[str], where: str | None) -> None:
        allowed = tuple(allowed)
        for name in raw:
            if name not in allowed:
                field = f"{where}.{name}" if where else str(name)
                raise self.error(f"unknown field (the fields: {', '.join(allowed)})", field,
                                 did_you_mean(name, allowed))

    def mapping(self, raw: object, where: str) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise self.error("must be a mapping", where)
        return raw

    def listing(self, raw: object, where: str) -> list[Any]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise self.error("must be a list", where)
        return raw

    def names(self, raw: object, where: str) -> tuple[str, ...]:
        items = self.listing(raw, where)
        if not all(isinstance(x, str) and x for x in items):
            raise self.error("must be a list of names", where)
        return tuple(items)

    def enums(self, kind: type[E], raw: object, where: str) -> tuple[E, ...]:
        try:
            return tuple(enum_value(kind, v, f"{where}[{i}]") for i, v in enumerate(self.listing(raw, where)))
        except SchemaError as err:
            raise self.schema(err) from None

    def enum(self, kind: type[E], raw: object, where: str) -> E:
        try:
            return enum_value(kind, raw, where)
        except SchemaError as err:
            raise self.schema(err) from None

    def groups(self, raw: object, where: str) -> tuple[tuple[Condition, ...], ...]:
        return tuple(tuple(self.condition(c, f"{where}[{i}]") for c in (g if isinstance(g, list) else [g]))
                     for i, g in enumerate(self.listing(raw, where)))

    def condition(self, raw: object, where: str) -> Condition:
        if not isinstance(raw, dict):
            raise self.error(f"{where} must be a mapping")
        if "any" in raw:
            self.known_fields(raw, ("any",), where)
            if not isinstance(raw["any"], list) or not raw["any"]:
                raise self.error(f"{where}.any must be a non-empty list of condition lists")
            return Condition("any", any_of=self.groups(raw["any"], f"{where}.any"))
        test = raw.get("test")
        if test not in TESTS:
            known = sorted(TESTS)
            raise self.error(f"unknown test {test!r} (the tests: {', '.join(known)})", f"{where}.test",
                             did_you_mean(test, known))
        metric = raw.get("metric")
        if not isinstance(metric, str) or not metric:
            raise self.error("needs the name of the metric the test reads", f"{where}.metric")
        negate = raw.get("not", False)
        if not isinstance(negate, bool):
            raise self.error(f"{where}.not must be true or false")
        try:
            params = build_args(test, {k: v for k, v in raw.items() if k not in _CONDITION_KEYS}, where)
        except SchemaError as err:
            raise self.schema(err) from None
        return Condition(test, metric, params, negate=negate)

    def config_conditions(self, raw: object, where: str) -> tuple[ConfigCondition, ...]:
        if raw is not None and not isinstance(raw, list):
            raise self.error(f"{where} must be a list of {{key, op, value}}")
        out = []
        for i, item in enumerate(raw or ()):
            if not isinstance(item, dict) or "key" not in item:
                raise self.error(f"{where}[{i}] needs a key")
            self.known_fields(item, _CONFIG_FIELDS, f"{where}[{i}]")
            if "value" not in item:
                raise self.error("needs a value (null for an unset key)", f"{where}[{i}].value")
            op = self.enum(ConfigOp, item.get("op", ConfigOp.EQ), f"{where}[{i}].op")
            if op in (ConfigOp.IN, ConfigOp.NOT_IN) and not isinstance(item["value"], list):
                raise self.error(f"'{op}' needs a list", f"{where}[{i}].value")
            out.append(ConfigCondition(str(item["key"]), op, item["value"]))
        return tuple(out)

    def fix(self, raw: object, i: int, tree: Tree) -> Fix:
        if not isinstance(raw, dict) or not isinstance(raw.get("set"), dict) or not raw["set"]:
            raise self.error(f"fixes[{i}] needs a non-empty 'set' mapping")
        self.known_fields(raw, _FIX_FIELDS, f"fixes[{i}]")
        if len(raw["set"]) > 2:
            raise self.error(f"fixes[{i}] sets {len(raw['set'])} keys; a fix may set at most 2")
        for key, value in raw["set"].items():
            if isinstance(value, str) and ("{" in value or "}" in value) and fix_expression(value) is None:
                raise self.error(f"{value!r}: only a literal, '{{current}} * k' or '{{current}} / k' (k a number "
                                 "above 0)", f"fixes[{i}].set.{key}")
            if tree not in PERFORMANCE_TREES and PERFORMANCE_KEY.search(str(key)):
                raise self.error(f"fixes[{i}] changes '{key}', a memory/speed knob, to fix a convergence problem")
        return Fix(
            set={str(k): v for k, v in raw["set"].items()}, reason=str(raw.get("reason", "")),
            when=tuple(self.condition(c, f"fixes[{i}].when[{j}]")
                       for j, c in enumerate(self.listing(raw.get("when"), f"fixes[{i}].when"))),
            when_config=self.config_conditions(raw.get("when_config"), f"fixes[{i}].when_config"),
            when_facts=self.facts(raw.get("when_facts"), f"fixes[{i}].when_facts"),
            safety=self.enum(Safety, raw.get("safety", Safety.SAFE), f"fixes[{i}].safety"),
        )

    def harm(self, raw: object) -> Harm | None:
        if raw is None:
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("text"), str) or not raw["text"].strip():
            raise self.error("harm must be a mapping with a 'text' (and optionally 'any': condition groups)")
        self.known_fields(raw, _HARM_FIELDS, "harm")
        groups = raw.get("any") or []
        if not isinstance(groups, list):
            raise self.error("harm.any must be a list of condition lists")
        return Harm(" ".join(raw["text"].split()), self.groups(groups, "harm.any"))

    def healthy(self, raw: object) -> dict[str, dict[str, Any]]:
        healthy = {k: _catalog_band(k) if v == CATALOG else v for k, v in raw.items()} \
            if isinstance(raw, dict) else raw or {}
        if not isinstance(healthy, dict) or not all(isinstance(v, dict) for v in healthy.values()):
            raise self.error(f"healthy must map metric -> {{low, high, source}} or '{CATALOG}' (the band "
                             "knowledge/metrics.yaml gives the metric)")
        for metric, band in healthy.items():
            self.known_fields(band, _BAND_FIELDS, f"healthy.{metric}")
            if "source" not in band:
                raise self.error(f"healthy.{metric} needs a source")
            for end in ("low", "high"):
                value = band.get(end)
                if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                    raise self.error(f"must be a number, not {value!r}", f"healthy.{metric}.{end}")
        return {str(k): dict(v) for k, v in healthy.items()}

    def facts(self, raw: object, where: str = "applies_to.facts") -> dict[str, Any]:
        facts = self.mapping(raw or {}, where)
        for name in facts:
            self.enum(Fact, name, where)
        return {str(k): v for k, v in facts.items()}

    def rule(self, data: object) -> Rule:
        path = self.path
        if not isinstance(data, dict):
            raise self.error("a rule file must be a mapping")
        missing = [k for k in _REQUIRED if k not in data]
        if missing:
            raise self.error(f"missing {', '.join(missing)}")
        rid = str(data["id"])
        if not _ID.match(rid):
            raise self.error(f"id {rid!r} must look like KL001")
        self.rule_id = rid
        self.known_fields(data, _FIELDS, None)
        if not path.name.startswith(f"{rid}-"):
            raise self.error(f"file name must start with the rule id '{rid}-'")
        if data["tree"] not in TREES or path.parent.name != data["tree"]:
            raise self.error(f"tree {data['tree']!r} must be one of {', '.join(TREES)} and match the folder", "tree",
                             did_you_mean(data["tree"], TREES))
        tree = Tree(data["tree"])
        severity = self.enum(Severity, data["severity"], "severity")
        status = self.enum(Status, data.get("status", Status.STABLE), "status")
        applies = self.mapping(data.get("applies_to") or {}, "applies_to")
        self.known_fields(applies, _APPLIES_FIELDS, "applies_to")
        modes = self.enums(Mode, applies["mode"], "applies_to.mode") if "mode" in applies else MODES
        kl = self.enums(KlPlacement, applies["kl"], "applies_to.kl") if "kl" in applies else KL_PLACEMENTS
        verl = applies.get("verl")
        if verl is not None:
            try:
                validate_range(str(verl))
            except ValueError as err:
                raise self.error(str(err), "applies_to.verl") from None
        conditions = tuple(self.condition(c, f"conditions[{i}]")
                           for i, c in enumerate(self.listing(data["conditions"], "conditions")))
        if not conditions:
            raise self.error("a rule needs at least one condition")
        fixes = tuple(self.fix(raw, i, tree) for i, raw in enumerate(self.listing(data.get("fixes"), "fixes")))
        harm = self.harm(data.get("harm"))
        if fixes and severity != Severity.INFO and harm is None:
            raise self.error("a rule that proposes a change needs a 'harm' (what hurts the run, and when)")
        rule = Rule(
            id=rid, name=str(data["name"]), tree=tree, status=status, severity=severity,
            summary=str(data["summary"]), modes=modes, kl=kl, verl=None if verl is None else str(verl),
            config=self.config_conditions(applies.get("config"), "applies_to.config"),
            facts=self.facts(applies.get("facts")), conditions=conditions,
            evidence=self.names(data.get("evidence"), "evidence"), healthy=self.healthy(data.get("healthy")),
            message=str(data["message"]), rationale=" ".join(str(data["rationale"]).split()),
            checks=tuple(str(c) for c in self.listing(data.get("checks"), "checks")), fixes=fixes,
            sources=tuple(str(s) for s in self.listing(data["sources"], "sources")), path=str(path), harm=harm,
            fix_order=str(data.get("fix_order", "")),
            explains=self.names(data.get("explains"), "explains"),
        )
        problem = message_problem(rule.message, rule.metrics)
        if problem is not None:
            raise self.error(problem[0], "message", problem[1])
        return rule


def parse_rule(data: object, path: Path) -> Rule:
    """Validate one rule file's data; raise PlaybookError naming the file, the rule, the field and the problem."""
    return _Reader(path).rule(data)


@cache
def load_playbook() -> tuple[Rule, ...]:
    """Every rule under knowledge/rules (cached), sorted by tree priority then id.

    The rule files ship in the ``knowledge`` package (no option reads another folder), so a malformed one is
    the install's problem; it is still one line (PlaybookError, exit 2) naming the file, rule and field.
    """
    root = knowledge_dir() / "rules"
    rules = []
    seen: dict[str, str] = {}
    for path in sorted(root.glob("*/*.yaml")):
        rule = parse_rule(load_knowledge(str(path.relative_to(knowledge_dir()))), path)
        if rule.id in seen:
            raise PlaybookError(f"duplicate rule id {rule.id} (also in {seen[rule.id]})", path=str(path))
        seen[rule.id] = str(path)
        if rule.status != Status.REMOVED:
            rules.append(rule)
    return tuple(sorted(rules, key=lambda r: (TREE_PRIORITY[r.tree], r.id)))


def playbook_without(trees: Iterable[str]) -> tuple[Rule, ...]:
    """The playbook less the rules of ``trees`` (e.g. memory and throughput for a CPU sandbox's timings).

    Raises:
        ConfigError: a name that is not a tree.
    """
    skipped = set(trees)
    unknown = sorted(skipped - set(TREES))
    if unknown:
        raise ConfigError(f"unknown tree(s) {', '.join(unknown)}; the trees are {', '.join(TREES)}")
    return tuple(r for r in load_playbook() if r.tree not in skipped)
