"""Render a pattern case (bench/patterns/cases.yaml) as a verl run: a config and a metric series of verl's metric set.

A mode (``modes:`` in the cases file) is a config plus the healthy course of every metric verl logs for it, shaped
like published runs (each curve cites its source). A case overrides some curves with its symptom. Every series
then gets seeded relative noise, so one case is scored on several noise seeds.

Curves: a number (constant); ``{from, to}`` (linear); ``{points: [[fraction, value], ...]}`` (piecewise linear);
``{exp: [start, end]}`` (log-linear: a constant doubling time); ``{every: k}`` on any curve logs it every k-th step
(validation); ``{noise: x}`` overrides the relative noise (0: exact). ``{like: metric}`` copies another curve
(critic/rewards/* equal critic/score/* when no KL sits in the reward).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from advisor.metrics import LOGGED_NAN

CASES = Path(__file__).resolve().parent / "cases.yaml"
NOISE = 0.03  # relative noise per step (3%) unless a curve says otherwise
UNIT = ("critic/score/mean", "val-core/", "response_length/clip_ratio", "prompt_length/clip_ratio",
        "actor/pg_clipfrac", "response/aborted_ratio")  # shares and 0/1 rates stay in [0, 1]


def load(path: Path = CASES) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def curve(spec: Any, steps: int, rng: np.random.Generator) -> np.ndarray:
    t = np.linspace(0.0, 1.0, steps)
    if isinstance(spec, (int, float)):
        values, noise = np.full(steps, float(spec)), NOISE
    else:
        noise = float(spec.get("noise", NOISE))
        if "points" in spec:
            xs, ys = zip(*spec["points"], strict=True)
            values = np.interp(t, np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))
        elif "exp" in spec:
            start, end = (float(v) for v in spec["exp"])
            values = start * (end / start) ** t
        elif "from" in spec:
            values = float(spec["from"]) + (float(spec["to"]) - float(spec["from"])) * t
        else:
            values = np.full(steps, float(spec["value"]))
    values = values * (1.0 + rng.normal(0.0, noise, steps)) if noise else values.copy()
    # a NaN the curve itself reaches (``.nan`` points) is a value the run logged as NaN; a step the metric is not
    # logged at (``every``) is a gap: the advisor's frames tell the two apart (LOGGED_NAN vs plain NaN)
    values[np.isnan(values)] = LOGGED_NAN
    if isinstance(spec, dict) and "every" in spec:
        logged = np.zeros(steps, dtype=bool)
        logged[int(spec["every"]) - 1:: int(spec["every"])] = True
        values[~logged] = np.nan
    return values


def render(case: dict[str, Any], mode_name: str, seed: int, data: dict[str, Any]) -> tuple[list[str], pd.DataFrame]:
    """The run's overrides and its metrics (one row per step) for one case in one mode on one noise seed."""
    mode = data["modes"][mode_name]
    steps = int(case.get("steps", data.get("steps", 200)))
    specs = {**mode["metrics"], **(case.get("metrics") or {})}
    specs = {k: v for k, v in specs.items() if v is not None}  # a case may drop a metric (null)
    rng = np.random.default_rng(seed)
    columns: dict[str, np.ndarray] = {}
    for name, spec in specs.items():
        if isinstance(spec, dict) and "like" in spec:
            continue
        values = curve(spec, steps, rng)
        if name.startswith(UNIT):
            values = np.clip(values, 0.0, 1.0)
        columns[name] = values
    for name, spec in specs.items():
        if isinstance(spec, dict) and "like" in spec:
            columns[name] = columns[spec["like"]].copy()
    overrides = [*data["common"], *mode["config"], *(case.get("config") or []),
                 f"trainer.total_training_steps={case.get('total_steps', steps)}"]
    return overrides, pd.DataFrame(columns, index=pd.Index(np.arange(1, steps + 1), name="step"))
