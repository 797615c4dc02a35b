"""When a diagnosis becomes an alert: hysteresis over steps, so one noisy step neither alerts nor clears.

- A diagnosis at or above the alert level alerts once it has been found at every evaluation over a
  confirmation span of ``confirm`` steps (the step it was first found counts as the first).
- A diagnosis of a rule that tests for NaN/inf (``nonfinite``) alerts at the first step it is found: every
  step after it is lost.
- An alerted diagnosis alerts again only when it gets worse: a higher severity, or ``strength`` (how far
  past its thresholds, advisor/playbook/_conditions.py) at least ``WORSE_FACTOR`` times what it was at its last alert.
- It clears once it has been absent for ``confirm`` steps; the clearing is reported too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor.playbook import Diagnosis, Rule

SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}
WORSE_FACTOR = 2.0


@dataclass
class Event:
    kind: str  # "alert" | "worse" | "cleared"
    step: int
    onset_step: int  # the first step the diagnosis was found at (this time)
    diagnosis: Diagnosis | None  # None for "cleared"
    diagnosis_id: str
    severity: str


@dataclass
class _Track:
    first_step: int
    last_seen: int
    alerted: bool = False
    severity: str = "info"
    strength: float = 0.0
    absent_since: int | None = None


def uses_nonfinite(rule: Rule) -> bool:
    """The rule tests for NaN/inf in one of its conditions."""
    stack = list(rule.conditions)
    while stack:
        cond = stack.pop()
        if cond.test == "nonfinite" and not cond.negate:
            return True
        stack.extend(c for group in cond.any_of for c in group)
    return False


@dataclass
class AlertState:
    level: str = "warning"
    confirm: int = 3
    tracks: dict[str, _Track] = field(default_factory=dict)

    def update(self, step: int, diagnoses: list[Any]) -> list[Event]:
        """The events of one evaluation at ``step`` (``diagnoses`` as suggest ranks them)."""
        events: list[Event] = []
        threshold = SEVERITY_RANK[self.level]
        found = {d.id: d for d in diagnoses if SEVERITY_RANK[d.severity] >= threshold}
        for did, d in found.items():
            track = self.tracks.get(did)
            if track is None:
                track = self.tracks[did] = _Track(first_step=step, last_seen=step)
            track.last_seen, track.absent_since = step, None
            immediate = uses_nonfinite(d.rule)
            if not track.alerted:
                if immediate or step - track.first_step + 1 >= self.confirm:
                    track.alerted, track.severity, track.strength = True, d.severity, d.strength
                    events.append(Event("alert", step, track.first_step, d, did, d.severity))
            elif self._worse(track, d):
                track.severity, track.strength = d.severity, d.strength
                events.append(Event("worse", step, track.first_step, d, did, d.severity))
        for did in [t for t in self.tracks if t not in found]:
            track = self.tracks[did]
            if not track.alerted:
                del self.tracks[did]  # not confirmed: the span starts again when it is found again
                continue
            if track.absent_since is None:
                track.absent_since = step
            if step - track.absent_since + 1 >= self.confirm:
                events.append(Event("cleared", step, track.first_step, None, did, track.severity))
                del self.tracks[did]
        return events

    @staticmethod
    def _worse(track: _Track, d: Diagnosis) -> bool:
        if SEVERITY_RANK[d.severity] > SEVERITY_RANK[track.severity]:
            return True
        if not (math.isfinite(d.strength) and math.isfinite(track.strength)):
            return False
        return track.strength > 0 and d.strength >= WORSE_FACTOR * track.strength

    @property
    def active(self) -> list[str]:
        return [did for did, t in self.tracks.items() if t.alerted]
