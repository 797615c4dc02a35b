"""The diagnosis playbook: rule files under ``knowledge/rules/<tree>/<ID>-<name>.yaml``, validated.

A rule says which runs it applies to (mode, KL placement, verl version, config), the conditions on
metric signals that make it fire, the healthy ranges it judges against (with their source), the verl
source of every metric it reads, why it matters, and ordered candidate fixes of at most two keys.
Conditions use a small, fixed vocabulary of tests (``_diagnose.TESTS``); a new rule needs review of
its data only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from advisor.datafiles import knowledge_dir, load_knowledge
from advisor.errors import ConfigError, PlaybookError

TREES = ("numerics", "reward", "kl", "advantage", "critic", "clipfrac", "entropy", "response_length",
         "validation", "memory", "throughput")
# the investigation order: samples and rewards first, then how rewards are rewritten (KL), advantages
# (and the critic behind them), the policy update (clipfrac, ppo_kl, entropy), then lengths (a policy that
# degenerates also rambles into the length limit), and performance last; NaN/inf break everything, so first.
TREE_PRIORITY = {tree: i for i, tree in enumerate(TREES)}
PERFORMANCE_TREES = frozenset({"memory", "throughput"})
SEVERITIES = ("error", "warning", "info")
STATUSES = ("stable", "preview", "deprecated", "removed")
MODES = ("ppo", "grpo", "other")
KL_PLACEMENTS = ("reward", "loss", "both", "none")
CONFIG_OPS = ("eq", "ne", "gt", "ge", "lt", "le", "in", "not_in")
_ID = re.compile(r"^[A-Z]{2,3}\d{3}$")
_FIX_EXPR = re.compile(r"^\{current\}\s*[*/]\s*[0-9.eE+-]+$")
# keys that only shape memory and speed (perf_tuning.rst: "performance-related parameters");
# a convergence diagnosis must never propose them
PERFORMANCE_KEY = re.compile(
    r"(micro_batch_size|max_token_len|use_dynamic_bsz|gpu_memory_utilization|_offload|offload_policy|"
    r"enable_gradient_checkpointing|enable_activation_offload|max_num_seqs|max_num_batched_tokens|enforce_eager|"
    r"tensor_model_parallel_size|free_cache_engine|entropy_from_logits_with_chunking|entropy_checkpointing|"
    r"fsdp_size|model_dtype|use_remove_padding|cudagraph_capture_sizes|agent\.num_workers)"
)


@dataclass(frozen=True)
class Condition:
    test: str
    metric: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    any_of: tuple[tuple[Condition, ...], ...] = ()  # for {any: [[...], [...]]}
    negate: bool = False  # `not: true`: the condition holds when the test does not


@dataclass(frozen=True)
class ConfigCondition:
    key: str
    op: str
    value: Any


@dataclass(frozen=True)
class Fix:
    set: dict[str, Any]
    reason: str = ""
    when: tuple[Condition, ...] = ()
    when_config: tuple[ConfigCondition, ...] = ()
    safety: str = "safe"  # safe | needs-sweep


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
    tree: str
    status: str
    severity: str
    summary: str
    modes: tuple[str, ...]
    kl: tuple[str, ...]
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
            stack.extend(c for group in cond.any_of for c in group)
        return names


def _err(path: Path, message: str) -> PlaybookError:
    return PlaybookError(message, path=str(path))


def _condition(raw: Any, path: Path, where: str, tests: set[str]) -> Condition:
    if not isinstance(raw, dict):
        raise _err(path, f"{where} must be a mapping")
    if "any" in raw:
        groups = raw["any"]
        if not isinstance(groups, list) or not groups:
            raise _err(path, f"{where}.any must be a non-empty list of condition lists")
        return Condition("any", any_of=tuple(
            tuple(_condition(c, path, f"{where}.any[{i}]", tests) for c in (g if isinstance(g, list) else [g]))
            for i, g in enumerate(groups)))
    test = raw.get("test")
    if test not in tests:
        raise _err(path, f"{where} has unknown test {test!r}; known: {', '.join(sorted(tests))}")
    metric = raw.get("metric")
    if metric is not None and not isinstance(metric, str):
        raise _err(path, f"{where}.metric must be a metric name")
    negate = raw.get("not", False)
    if not isinstance(negate, bool):
        raise _err(path, f"{where}.not must be true or false")
    args = {k: v for k, v in raw.items() if k not in ("test", "metric", "not")}
    return Condition(test, metric, args, negate=negate)


def _config_conditions(raw: Any, path: Path, where: str) -> tuple[ConfigCondition, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _err(path, f"{where} must be a list of {{key, op, value}}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or "key" not in item:
            raise _err(path, f"{where}[{i}] needs a key")
        op = item.get("op", "eq")
        if op not in CONFIG_OPS:
            raise _err(path, f"{where}[{i}] has unknown op {op!r}; known: {', '.join(CONFIG_OPS)}")
        out.append(ConfigCondition(str(item["key"]), op, item.get("value")))
    return tuple(out)


def parse_rule(data: Any, path: Path, tests: set[str]) -> Rule:
    """Validate one rule file's data; raise PlaybookError naming the file and the problem."""
    if not isinstance(data, dict):
        raise _err(path, "a rule file must be a mapping")
    missing = [k for k in ("id", "name", "tree", "severity", "summary", "conditions", "message", "rationale",
                           "sources") if k not in data]
    if missing:
        raise _err(path, f"missing {', '.join(missing)}")
    rid = str(data["id"])
    if not _ID.match(rid):
        raise _err(path, f"id {rid!r} must look like KL001")
    if not path.name.startswith(f"{rid}-"):
        raise _err(path, f"file name must start with the rule id '{rid}-'")
    if data["tree"] not in TREES or path.parent.name != data["tree"]:
        raise _err(path, f"tree {data['tree']!r} must be one of {', '.join(TREES)} and match the folder")
    if data["severity"] not in SEVERITIES:
        raise _err(path, f"severity must be one of {', '.join(SEVERITIES)}")
    status = data.get("status", "stable")
    if status not in STATUSES:
        raise _err(path, f"status must be one of {', '.join(STATUSES)}")
    applies = data.get("applies_to") or {}
    modes = tuple(applies.get("mode", MODES))
    kl = tuple(applies.get("kl", KL_PLACEMENTS))
    if not set(modes) <= set(MODES) or not set(kl) <= set(KL_PLACEMENTS):
        raise _err(path, "applies_to.mode / applies_to.kl name unknown values")
    conditions = tuple(_condition(c, path, f"conditions[{i}]", tests) for i, c in enumerate(data["conditions"]))
    if not conditions:
        raise _err(path, "a rule needs at least one condition")
    fixes = []
    for i, raw in enumerate(data.get("fixes") or []):
        if not isinstance(raw, dict) or not isinstance(raw.get("set"), dict) or not raw["set"]:
            raise _err(path, f"fixes[{i}] needs a non-empty 'set' mapping")
        if len(raw["set"]) > 2:
            raise _err(path, f"fixes[{i}] sets {len(raw['set'])} keys; a fix may set at most 2")
        for key, value in raw["set"].items():
            if isinstance(value, str) and "{current}" in value and not _FIX_EXPR.match(value):
                raise _err(path, f"fixes[{i}].set.{key}: only a literal, '{{current}} * k' or '{{current}} / k'")
            if data["tree"] not in PERFORMANCE_TREES and PERFORMANCE_KEY.search(key):
                raise _err(path, f"fixes[{i}] changes '{key}', a memory/speed knob, to fix a convergence problem")
        fixes.append(Fix(
            set=dict(raw["set"]), reason=str(raw.get("reason", "")),
            when=tuple(_condition(c, path, f"fixes[{i}].when[{j}]", tests)
                       for j, c in enumerate(raw.get("when") or [])),
            when_config=_config_conditions(raw.get("when_config"), path, f"fixes[{i}].when_config"),
            safety=str(raw.get("safety", "safe")),
        ))
    harm = _harm(data.get("harm"), path, tests)
    if fixes and data["severity"] != "info" and harm is None:
        raise _err(path, "a rule that proposes a change needs a 'harm' (what hurts the run, and when)")
    healthy = data.get("healthy") or {}
    if not isinstance(healthy, dict) or not all(isinstance(v, dict) for v in healthy.values()):
        raise _err(path, "healthy must map metric -> {low, high, source}")
    for metric, band in healthy.items():
        if "source" not in band:
            raise _err(path, f"healthy.{metric} needs a source")
    return Rule(
        id=rid, name=str(data["name"]), tree=str(data["tree"]), status=status, severity=str(data["severity"]),
        summary=str(data["summary"]), modes=modes, kl=kl, verl=applies.get("verl"),
        config=_config_conditions(applies.get("config"), path, "applies_to.config"),
        facts=dict(applies.get("facts") or {}), conditions=conditions,
        evidence=tuple(data.get("evidence") or ()), healthy={k: dict(v) for k, v in healthy.items()},
        message=str(data["message"]), rationale=" ".join(str(data["rationale"]).split()),
        checks=tuple(str(c) for c in data.get("checks") or ()), fixes=tuple(fixes),
        sources=tuple(str(s) for s in data["sources"]), path=str(path), harm=harm,
        fix_order=str(data.get("fix_order", "")),
        explains=tuple(str(x) for x in data.get("explains") or ()),
    )


def _harm(raw: Any, path: Path, tests: set[str]) -> Harm | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("text"), str) or not raw["text"].strip():
        raise _err(path, "harm must be a mapping with a 'text' (and optionally 'any': condition groups)")
    groups = raw.get("any") or []
    if not isinstance(groups, list):
        raise _err(path, "harm.any must be a list of condition lists")
    any_of = tuple(tuple(_condition(c, path, f"harm.any[{i}]", tests) for c in (g if isinstance(g, list) else [g]))
                   for i, g in enumerate(groups))
    return Harm(" ".join(raw["text"].split()), any_of)


@cache
def load_playbook() -> tuple[Rule, ...]:
    """Every rule under knowledge/rules (cached), sorted by tree priority then id."""
    from ._diagnose import TESTS

    root = knowledge_dir() / "rules"
    rules = []
    seen: dict[str, str] = {}
    for path in sorted(root.glob("*/*.yaml")):
        rule = parse_rule(load_knowledge(str(path.relative_to(knowledge_dir()))), path, set(TESTS))
        if rule.id in seen:
            raise _err(path, f"duplicate rule id {rule.id} (also in {seen[rule.id]})")
        seen[rule.id] = str(path)
        if rule.status != "removed":
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
