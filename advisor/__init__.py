"""verl-advisor: a config advisor and auto-tuner for verl RL post-training runs.

Public API (everything else is private and may change):

    load_config(source, overrides=(), verl_version=None) -> VerlConfig
    check(config) -> CheckReport                 pre-launch validation + batch layers (+ memory)
    Finding, Change                              what the advisor reports

The heavy parts (metrics, playbook, sweeps) are imported lazily so ``advisor check`` starts fast.
"""

from __future__ import annotations

from advisor.load import VerlConfig, load_config

from .errors import AdvisorError, ConfigError, MetricsError, PlaybookError, SweepError
from .findings import Change, Finding

__all__ = [
    "AdvisorError",
    "Change",
    "ConfigError",
    "Finding",
    "MetricsError",
    "PlaybookError",
    "SweepError",
    "VerlConfig",
    "load_config",
]
__version__ = "0.1.0"
