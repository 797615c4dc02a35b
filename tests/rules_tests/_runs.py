"""Build synthetic runs (config + metrics frame) from the compact fixture specs in fixtures/<ID>.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from advisor import load_config
from advisor.metrics import LOGGED_NAN

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GRPO = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.rollout.n=5"]


def curve(spec: Any, steps: int, rng: np.random.Generator) -> np.ndarray:
    """A metric's values over `steps` steps from a fixture spec (see knowledge/rules/README.md)."""
    t = np.linspace(0.0, 1.0, steps)
    if isinstance(spec, (int, float)):
        return np.full(steps, float(spec))
    if "points" in spec:  # piecewise linear through [fraction of the run, value] pairs
        xs, ys = zip(*spec["points"], strict=True)
        values = np.interp(t, np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))
    elif "from" in spec:
        start, end = float(spec["from"]), float(spec["to"])
        values = np.where(t < spec["at"], start, end) if "at" in spec else start + (end - start) * t
    else:
        values = np.full(steps, float(spec["value"]))
    if "noise" in spec:
        values = values + rng.normal(0.0, float(spec["noise"]), steps)
    if "spike_at" in spec:
        values[int(spec["spike_at"] * (steps - 1))] = float(spec["spike"])
    if "nan_from" in spec:
        values[int(spec["nan_from"] * (steps - 1)):] = LOGGED_NAN  # logged as NaN (not: absent)
    if "inf_at" in spec:
        values[int(spec["inf_at"] * (steps - 1))] = np.inf
    if "inf_from" in spec:
        values[int(spec["inf_from"] * (steps - 1)):] = np.inf
    if "every" in spec:  # logged only every k-th step (like validation with test_freq=k)
        logged = np.zeros(steps, dtype=bool)
        logged[int(spec["every"]) - 1 :: int(spec["every"])] = True
        values[~logged] = np.nan
    return values


def build_run(case: dict[str, Any]):
    steps = int(case.get("steps", 100))
    rng = np.random.default_rng(int(case.get("seed", 0)))
    frame = pd.DataFrame({name: curve(spec, steps, rng) for name, spec in (case.get("metrics") or {}).items()},
                         index=pd.Index(np.arange(1, steps + 1), name="step"))
    overrides = list(case.get("config") or [])
    cfg = load_config(None, ["actor_rollout_ref.rollout.name=vllm", *overrides], verl_version=case.get("verl"))
    return cfg, frame


def load_fixture(rule_id: str) -> dict[str, list[dict[str, Any]]]:
    path = FIXTURES / f"{rule_id}.yaml"
    if not path.exists():
        return {}
    return yaml.safe_load(path.read_text()) or {}
