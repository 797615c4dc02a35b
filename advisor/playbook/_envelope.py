"""Where a run sits among published, healthy verl runs: the envelope of knowledge/published_envelope.yaml.

That file (written by scripts/published_envelope.py from bench/published_runs/) keeps, per published run, metric
and decile of run progress, the run's median and its highest step there. A run is compared at its own progress
(the last logged step over trainer.total_training_steps) when the config states the total; otherwise against every
decile after the first (the start of a run is not its steady state), since its progress is unknown. Where the
published runs split by a config key (``by``: rollout.n, one response per prompt vs a group), the run is compared
with the runs on its side only (``config``: the run's lr, kl_coef, n and response_cap, as the script reads them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.datafiles import load_knowledge
from advisor.facts import rollout_n

from ._median import median

if TYPE_CHECKING:
    from advisor.load import VerlConfig

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
        runs = "the one published verl run that logs it" if self.runs == 1 else (
            f"the {in_words(self.runs)} published verl runs that log it")
        where = self.where.replace("their", "its") if self.runs == 1 else self.where
        return f"{metric} {level:.3g} is at p{self.percentile:.0f} of {runs} {where} ({ENVELOPE})"


_UNITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def in_words(n: int) -> str:
    """A count in words (up to 99; digits beyond), so a message's figures stay the run's own."""
    if 0 <= n < 20:
        return _UNITS[n]
    if n < 100:
        tens, unit = divmod(n, 10)
        return _TENS[tens - 2] + (f"-{_UNITS[unit]}" if unit else "")
    return str(n)


MIN_RUNS = 3  # as scripts/published_envelope.py: a split needs this many runs on the run's side


def _side(key: str, value: float, other: float | None) -> bool:
    """A published run's value ``other`` is on the same side of the split on ``key`` as the run's ``value``."""
    if other is None:
        return False
    if key == "n":  # one response per prompt (a critic's advantage) vs a group
        return (value > 1) == (other > 1)
    return bool(other == value)


def _members(config: dict[str, float | None] | None) -> list[str]:
    """The published runs to compare with: all, narrowed by each key the published runs split on (``by``) where
    the run's value has a side with at least MIN_RUNS runs."""
    data = _data()
    runs = data.get("runs") or {}
    members = list(runs)
    for key in data.get("by") or {}:
        value = (config or {}).get(key)
        if value is None:
            continue
        side = [name for name in members if _side(key, value, runs[name]["config"].get(key))]
        if len(side) >= MIN_RUNS:
            members = side
    return members


def place(metric: str, level: float, progress: float | None,
          config: dict[str, float | None] | None = None) -> Place | None:
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
    for name in _members(config):
        entry = (runs[name].get("metrics") or {}).get(metric)
        if not entry:
            continue
        meds = [entry["median"][d] for d in picks if entry["median"][d] is not None]
        top = [entry["max"][d] for d in picks if entry["max"][d] is not None]
        if meds:
            medians.append(float(median(meds)))
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


def config_of(cfg: VerlConfig) -> dict[str, float | None]:
    """The config values the envelope may split on, read as scripts/published_envelope.py reads them."""

    def number(key: str) -> float | None:
        value = cfg.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    if cfg.get("actor_rollout_ref.actor.use_kl_loss"):
        kl = number("actor_rollout_ref.actor.kl_loss_coef")
    elif cfg.get("algorithm.use_kl_in_reward") or cfg.get("algorithm.adv_estimator") == "gae":
        kl = number("algorithm.kl_ctrl.kl_coef")
    else:
        kl = 0.0
    n = rollout_n(cfg)  # the one reading of rollout.n (advisor.facts)
    return {"lr": number("actor_rollout_ref.actor.optim.lr"), "kl_coef": kl, "n": None if n is None else float(n),
            "response_cap": number("data.max_response_length")}
