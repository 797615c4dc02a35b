"""Do ``advisor verify``'s trials show the problem it was asked to fix?

A fix is judged on trials, and trials are not the run that showed the problem: fewer steps, another seed, a
stand-in trainer (the CPU sandbox runs a toy model under the run's config). So after the sweep the diagnosed
rule is read on every trial's own metrics, as ``suggest`` read it on the run (``advisor.playbook.read_rule``:
the same window, conditions and harm). Where the baseline's trials do not show it, the sweep cannot refute the
fix: a value that does no better on trials without the problem says nothing about the problem
(``_verdict.with_reproduction``). Where they do, the reading of the proposal's trials says whether the
fix made it go away.

A value's trials show the problem when the rule fires with its harm on more than half of the seeds whose
metrics could be read.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError
from advisor.load import VerlConfig
from advisor.playbook import RuleReading, read_rule

from .._result import TrialRecord
from .._space import format_value, same_point

UNREAD_STATES = ("interrupted", "waiting", "running")


@dataclass
class ValueSymptom:
    """The rule read on each seed's trial of one value."""

    role: str  # baseline | proposed | third
    values: dict[str, Any]
    readings: dict[int, RuleReading] = field(default_factory=dict)  # seed -> reading
    unread: dict[int, str] = field(default_factory=dict)  # seed -> why its metrics could not be read

    @property
    def shown(self) -> list[int]:
        return sorted(seed for seed, r in self.readings.items() if r.shows)

    @property
    def shows(self) -> bool | None:
        """On more than half of the seeds read; None when no seed could be read."""
        if not self.readings:
            return None
        return 2 * len(self.shown) > len(self.readings)

    def count(self) -> str:
        return f"{len(self.shown)}/{len(self.readings)} seeds" if self.readings else "not read"

    def levels(self) -> dict[str, float]:
        """Each condition metric's window level, the median over the seeds read."""
        names = dict.fromkeys(m for r in self.readings.values() for m in r.levels)
        return {m: statistics.median(r.levels[m] for r in self.readings.values() if m in r.levels) for m in names}

    def unmet(self) -> str | None:
        """The condition most often unmet on the seeds that do not show the problem."""
        misses = [r.unmet for r in self.readings.values() if not r.shows and r.unmet]
        return statistics.mode(misses) if misses else None

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "values": self.values, "shows": self.shows, "seeds_showing": self.shown,
                "seeds": {str(s): r.to_dict() for s, r in sorted(self.readings.items())},
                "unread": {str(s): why for s, why in sorted(self.unread.items())}}


@dataclass
class Reproduction:
    """The diagnosed rule read on the trials of every value."""

    rule_id: str
    run_window: tuple[int, int]  # the steps over which the run showed it
    values: list[ValueSymptom]

    def role(self, role: str) -> ValueSymptom | None:
        return next((v for v in self.values if v.role == role), None)

    @property
    def reproduced(self) -> bool | None:
        """The baseline's trials show the problem (None: none of them could be read)."""
        baseline = self.role("baseline")
        return None if baseline is None else baseline.shows

    def describe(self) -> str:
        """``AD001 on the trials: baseline 0/3 seeds, proposed 0/3 seeds, third 0/3 seeds``."""
        parts = [f"{v.role} {v.count()}" for v in self.values]
        return f"{self.rule_id} on the trials: " + ", ".join(parts)

    def why_not(self) -> str:
        """What the baseline's trials showed instead: the unmet condition and where its metrics stood."""
        baseline = self.role("baseline")
        if baseline is None or not baseline.readings:
            reasons = sorted(set(baseline.unread.values())) if baseline is not None else []
            return "none of the baseline's trials could be read" + (f" ({'; '.join(reasons)})" if reasons else "")
        levels = ", ".join(f"{m} {format_value(float(f'{v:.3g}'))}" for m, v in baseline.levels().items())
        unmet = baseline.unmet()
        text = f"{self.rule_id} needs {unmet}" if unmet else f"{self.rule_id} does not fire"
        return text + (f"; the baseline's trials had {levels}" if levels else "")

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule_id, "reproduced": self.reproduced, "run_window": list(self.run_window),
                "values": [v.to_dict() for v in self.values]}


def read_trials(rule: Any, configs: dict[str, VerlConfig], roles: Sequence[tuple[str, dict[str, Any]]],
                records: Sequence[TrialRecord], run_window: tuple[int, int], *,
                gpu_memory_gib: float | None = None) -> Reproduction:
    """Read ``rule`` on every trial of every role (``configs[role]`` is the config its trials ran; a memory rule
    reads ``gpu_memory_gib``)."""
    values = []
    for role, point in roles:
        symptom = ValueSymptom(role, dict(point))
        for record in sorted(records, key=lambda r: r.number):
            if record.seed is None or record.state in UNREAD_STATES or not same_point(record.values, point):
                continue
            path = metrics_path(record)
            if path is None or not path.is_file():
                symptom.unread[record.seed] = "it logged no metrics"
                continue
            try:
                symptom.readings[record.seed] = read_rule(rule, configs[role], path, gpu_memory_gib=gpu_memory_gib)
            except AdvisorError as err:
                symptom.unread[record.seed] = err.message
        values.append(symptom)
    return Reproduction(rule.id, run_window, values)


def metrics_path(record: TrialRecord) -> Path | None:
    """Where a trial's metrics are: the path its ``cmd.json`` names (the file logger's JSONL, or the console
    stream for Ray jobs and old verl), else ``metrics.jsonl`` in its directory."""
    if record.dir is None:
        return None
    trial_dir = Path(record.dir)
    try:
        named = json.loads((trial_dir / "cmd.json").read_text(encoding="utf-8")).get("metrics_path")
    except (OSError, ValueError, AttributeError):
        named = None
    return Path(named) if isinstance(named, str) and named else trial_dir / "metrics.jsonl"
