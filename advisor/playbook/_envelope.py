"""Where a run sits among published, healthy verl runs: the envelope of knowledge/published_envelope.yaml.

That file (written by scripts/published_envelope.py from bench/published_runs/) keeps, per published run, metric
and decile of run progress, the run's median and its highest step there. A run is compared at its own progress
(the last logged step over trainer.total_training_steps) when the config states the total; otherwise against every
decile after the first (the start of a run is not its steady state), since its progress is unknown. Where the
published runs split by a config key (``by``: rollout.n, one response per prompt vs a group), the run is compared
with the runs on its side only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from advisor.datafiles import load_knowledge

ENVELOPE = "knowledge/published_envelope.yaml"
ORDINALS = ("the first", "the second", "the third", "the fourth", "the fifth", "the sixth", "the seventh",
            "the eighth", "the ninth", "the last")


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = load_knowledge("published_envelope.yaml")
    return data


@dataclass(frozen=True)
class Place:
    """A level's place among the published runs at the same progress."""

    percentile: float  # share of runs whose median there is below the level (ties count half), 0..100
    runs: int
    top: float  # the highest single step any of those runs logged there
    where: str  # "in the fifth tenth of their steps" or "after the first tenth of their steps"

    def text(self, metric: str, level: float) -> str:
        # the figures beside the run's own level are in words or the JSON (``published_runs``): a message's numbers
        # are the run's
        return f"{metric} {level:.3g} is at p{self.percentile:.0f} of the published verl runs {self.where} ({ENVELOPE})"


def _members(n: int | None) -> list[str]:
    data = _data()
    runs = data.get("runs") or {}
    if n is not None and "n" in (data.get("by") or {}):
        side = [name for name, r in runs.items() if ((r["config"].get("n") or 1) > 1) == (n > 1)]
        if side:
            return side
    return list(runs)


def place(metric: str, level: float, progress: float | None, n: int | None = None) -> Place | None:
    """The level's percentile among published runs' medians of ``metric`` (None: no run logs it, or no level)."""
    if not math.isfinite(level):
        return None
    deciles = int(_data().get("deciles", 10))
    if progress is not None and 0 <= progress <= 1:
        d = min(int(progress * deciles), deciles - 1)
        picks, where = [d], f"in the same tenth of their steps ({ORDINALS[d]})"
    else:
        picks, where = list(range(1, deciles)), "after the first tenth of their steps (this run's progress is unknown)"
    runs = _data().get("runs") or {}
    medians, tops = [], []
    for name in _members(n):
        entry = (runs[name].get("metrics") or {}).get(metric)
        if not entry:
            continue
        meds = [entry["median"][d] for d in picks if entry["median"][d] is not None]
        top = [entry["max"][d] for d in picks if entry["max"][d] is not None]
        if meds:
            medians.append(float(np.median(meds)))
            tops.append(max(top))
    if not medians:
        return None
    values = np.array(medians)
    pct = 100.0 * (float((values < level).sum()) + 0.5 * float((values == level).sum())) / values.size
    return Place(pct, int(values.size), max(tops), where)


def progress_of(last_step: int, planned: int | None) -> float | None:
    """The run's progress (last logged step / planned total), None when the config does not state the total."""
    if not planned or planned <= 0:
        return None
    return min(max(last_step / planned, 0.0), 1.0)
