"""verl-advisor: a config advisor and auto-tuner for verl RL post-training runs.

Public API (everything else is private and may change):

    load_config(source, overrides=(), verl_version=None) -> VerlConfig
    check(config) -> CheckReport                 pre-launch validation + batch layers (+ memory)
    Finding, Change                              what the advisor reports
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
from typing import Any

from ._config import VerlConfig, load_config
from ._findings import Change, Finding
from .errors import AdvisorError, ConfigError, MetricsError, PlaybookError, SweepError

# public name -> (module, its name there), imported on first use so `advisor check` stays fast
_LAZY = {
    "Suggestion": ("._suggest", "Suggestion"),
    "suggest_run": ("._suggest", "suggest_run"),
    "config_errors": ("._suggest", "_errors"),
    "validated_changes": ("._suggest", "validated"),
    "TREES": ("._playbook", "TREES"),
    "PERFORMANCE_KEY": ("._playbook", "PERFORMANCE_KEY"),
    "load_catalog": ("._catalog", "load_catalog"),
    "knowledge_dir": ("._knowledge", "knowledge_dir"),
    "load_knowledge": ("._knowledge", "load_knowledge"),
    "estimate_memory": (".memory", "estimate_memory"),
    "parse_override": ("._overrides", "parse_override"),
}

__all__ = [
    "PERFORMANCE_KEY",
    "TREES",
    "AdvisorError",
    "Change",
    "ConfigError",
    "Finding",
    "MetricsError",
    "PlaybookError",
    "Suggestion",
    "SweepError",
    "VerlConfig",
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
    value = getattr(importlib.import_module(module, __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
