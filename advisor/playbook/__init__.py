"""The diagnosis playbook: rule files, the signals they read, diagnoses, and ``suggest``.

- ``_rule_loader``: the rule files under ``knowledge/rules/<tree>/``, validated at load (the closed sets of values:
  ``_rule_schema``; the message placeholders: ``_message``);
- ``_conditions``: the condition tests, each one record of its arguments with its ``holds()``;
- ``_signals``: what each metric did over the recent window, and facts about the config;
- ``_diagnose``: rules x (config, signals) -> diagnoses;
- ``_bands``: a metric far outside its healthy band is always reported;
- ``_suggest``: from a run's config and metrics to the one or two keys to change;
- ``_explain``: one metric's verl source, formula, healthy range and the rules that read it;
- ``_reading``: one rule read on one run (does the run show the problem?), for ``advisor verify``'s trials.
"""

from __future__ import annotations

from ._diagnose import Diagnosis
from ._explain import Explanation, explain_metric, render_explanation
from ._reading import RuleReading, describe_condition, read_rule
from ._rule_loader import PERFORMANCE_KEY, PERFORMANCE_TREES, TREES, Condition, Rule, load_playbook, playbook_without
from ._rule_schema import Safety
from ._signals import RunFacts, rolling_median
from ._suggest import Suggestion, config_errors, normalized_for, suggest, suggest_frame, suggest_run, validated

__all__ = [
    "PERFORMANCE_KEY",
    "PERFORMANCE_TREES",
    "TREES",
    "Condition",
    "Diagnosis",
    "Explanation",
    "Rule",
    "RuleReading",
    "RunFacts",
    "Safety",
    "Suggestion",
    "config_errors",
    "describe_condition",
    "explain_metric",
    "load_playbook",
    "normalized_for",
    "playbook_without",
    "read_rule",
    "render_explanation",
    "rolling_median",
    "suggest",
    "suggest_frame",
    "suggest_run",
    "validated",
]
