"""verl-advisor: a config advisor and auto-tuner for verl RL post-training runs.

Public API (everything else is private and may change):

    load_config(source, overrides=(), verl_version=None) -> VerlConfig
    check(config) -> CheckReport                 pre-launch validation + batch layers (+ memory)
    CheckReport, Finding, Change                 what the advisor reports
    suggest_run(config, metrics, ...) -> Suggestion    diagnose a run and pick the diff
    config_errors(config)                        the error findings of a config, as (id, keys) pairs
    validated_changes(config, changes, rule, base_errors)  a diff (plus a dependent key) if verl accepts it
    TREES, PERFORMANCE_KEY                       the playbook's debug trees; the memory/speed key pattern
    load_catalog()                               the metrics catalog (healthy ranges, sources)
    knowledge_dir(), load_knowledge(name)        the knowledge/ files
    estimate_memory(config, gpu_memory_gib=...)  the memory model
    parse_override("key=value")                  one Hydra override (key, value, kind)

The heavy parts (metrics, playbook, sweeps) are imported lazily so ``advisor check`` starts fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from advisor.load import VerlConfig, load_config

from .errors import AdvisorError, ConfigError, MetricsError, PlaybookError, SweepError
from .findings import Change, Finding

if TYPE_CHECKING:  # what mypy and an IDE see; at run time __getattr__ imports each on first use (_LAZY)
    from advisor.checks import CheckReport, check
    from advisor.datafiles import knowledge_dir, load_knowledge
    from advisor.memory import estimate_memory
    from advisor.metrics import load_catalog
    from advisor.playbook import PERFORMANCE_KEY, TREES, Suggestion, config_errors, suggest_run
    from advisor.playbook import validated as validated_changes
    from advisor.verl import parse_override

# public name -> (module, its name there), imported on first use so `advisor check` stays fast
_LAZY = {
    "check": ("advisor.checks", "check"),
    "CheckReport": ("advisor.checks", "CheckReport"),
    "Suggestion": ("advisor.playbook", "Suggestion"),
    "suggest_run": ("advisor.playbook", "suggest_run"),
    "config_errors": ("advisor.playbook", "config_errors"),
    "validated_changes": ("advisor.playbook", "validated"),
    "TREES": ("advisor.playbook", "TREES"),
    "PERFORMANCE_KEY": ("advisor.playbook", "PERFORMANCE_KEY"),
    "load_catalog": ("advisor.metrics", "load_catalog"),
    "knowledge_dir": ("advisor.datafiles", "knowledge_dir"),
    "load_knowledge": ("advisor.datafiles", "load_knowledge"),
    "estimate_memory": ("advisor.memory", "estimate_memory"),
    "parse_override": ("advisor.verl", "parse_override"),
}

__all__ = [
    "PERFORMANCE_KEY",
    "TREES",
    "AdvisorError",
    "Change",
    "CheckReport",
    "ConfigError",
    "Finding",
    "MetricsError",
    "PlaybookError",
    "Suggestion",
    "SweepError",
    "VerlConfig",
    "check",
    "config_errors",
    "estimate_memory",
    "knowledge_dir",
    "load_catalog",
    "load_config",
    "load_knowledge",
    "parse_override",
    "suggest_run",
    "validated_changes",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'advisor' has no attribute '{name}'")
    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
