"""Build metric logs the way verl writes them, from values the test chooses (the expected values).

The renderers follow verl's formats, checked against verl's source:

- console, v0.1-v0.4.1: ``f"{k}:{v:.3f}"`` joined by `` - `` after ``step:{step}``
  (verl/utils/logger/aggregate_logger.py ``concat_dict_to_str``), numbers only;
- console, v0.5.0 on: ``f"{k}:{pprint.pformat(v)}"`` (numpy >= 2 scalars print as ``np.float64(...)``);
- file logger, v0.6.0-v0.7.0: ``json.dumps({"step": s, "data": d})`` (NaN as the bare token NaN);
- file logger after v0.7.0: orjson, compact, NaN as null (verl/utils/tracking.py ``FileLogger``).
"""

from __future__ import annotations

import json
import math
import numbers
import pprint
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

METRICS_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "metrics"

# (name, level, noise, kind) in verl 0.7's insertion order (research notes §4.2). kind says what type
# verl hands the logger: "np" a numpy float from reduce_metrics, "py" a Python float, "int" a Python int,
# "npint" a numpy int.
CATALOGUE: list[tuple[str, float, float, str]] = [
    ("global_seqlen/min", 41_000, 0.05, "int"),
    ("global_seqlen/max", 53_000, 0.05, "int"),
    ("global_seqlen/minmax_diff", 12_000, 0.05, "int"),
    ("global_seqlen/balanced_min", 46_800, 0.01, "int"),
    ("global_seqlen/balanced_max", 46_900, 0.01, "int"),
    ("global_seqlen/mean", 46_850.0, 0.01, "py"),
    ("actor/entropy", 0.62, 0.05, "py"),
    ("perf/mfu/actor_infer", 0.0, 0.0, "int"),
    ("training/rollout_probs_diff_valid", 1, 0.0, "int"),
    ("training/rollout_probs_diff_max", 0.71, 0.1, "py"),
    ("training/rollout_probs_diff_mean", 0.0031, 0.1, "py"),
    ("training/rollout_probs_diff_std", 0.012, 0.1, "py"),
    ("training/rollout_actor_probs_pearson_corr", 0.998, 0.001, "py"),
    ("rollout_corr/kl", 0.0008, 0.1, "py"),
    ("rollout_corr/k3_kl", 0.0007, 0.1, "py"),
    ("rollout_corr/training_ppl", 1.31, 0.02, "py"),
    ("rollout_corr/rollout_ppl", 1.31, 0.02, "py"),
    ("rollout_corr/ppl_ratio", 1.0004, 0.0001, "py"),
    ("actor/pg_loss", -0.004, 1.0, "np"),
    ("actor/kl_loss", 0.0021, 0.2, "np"),
    ("actor/pg_clipfrac", 0.0032, 0.3, "np"),
    ("actor/ppo_kl", 0.00012, 0.5, "np"),
    ("actor/pg_clipfrac_lower", 0.0, 0.0, "np"),
    ("actor/kl_coef", 0.001, 0.0, "np"),
    ("actor/grad_norm", 0.21, 0.3, "np"),
    ("perf/mfu/actor", 0.31, 0.03, "np"),
    ("perf/max_memory_allocated_gb", 61.4, 0.01, "np"),
    ("perf/max_memory_reserved_gb", 72.9, 0.01, "np"),
    ("perf/cpu_memory_used_gb", 214.0, 0.02, "np"),
    ("actor/lr", 1e-06, 0.0, "py"),
    ("training/global_step", 0, 0.0, "int"),
    ("training/epoch", 0, 0.0, "int"),
    ("critic/score/mean", 0.45, 0.1, "py"),
    ("critic/score/max", 1.0, 0.0, "py"),
    ("critic/score/min", 0.0, 0.0, "py"),
    ("critic/rewards/mean", 0.45, 0.1, "py"),
    ("critic/rewards/max", 1.0, 0.0, "py"),
    ("critic/rewards/min", 0.0, 0.0, "py"),
    ("critic/advantages/mean", 0.0, 0.0, "py"),
    ("critic/advantages/max", 1.79, 0.05, "py"),
    ("critic/advantages/min", -1.79, 0.05, "py"),
    ("critic/returns/mean", 0.0, 0.0, "py"),
    ("critic/returns/max", 1.79, 0.05, "py"),
    ("critic/returns/min", -1.79, 0.05, "py"),
    ("response_length/mean", 212.6, 0.05, "py"),
    ("response_length/max", 1024.0, 0.0, "py"),
    ("response_length/min", 38.0, 0.1, "py"),
    ("response_length/clip_ratio", 0.021, 0.2, "py"),
    ("response_length_non_aborted/mean", 212.6, 0.05, "py"),
    ("response_length_non_aborted/max", 1024.0, 0.0, "py"),
    ("response_length_non_aborted/min", 38.0, 0.1, "py"),
    ("response_length_non_aborted/clip_ratio", 0.021, 0.2, "py"),
    ("response/aborted_ratio", 0.0, 0.0, "py"),
    ("prompt_length/mean", 104.5, 0.05, "py"),
    ("prompt_length/max", 201.0, 0.0, "py"),
    ("prompt_length/min", 61.0, 0.0, "py"),
    ("prompt_length/clip_ratio", 0.0, 0.0, "py"),
    ("num_turns/min", 2, 0.0, "npint"),
    ("num_turns/max", 2, 0.0, "npint"),
    ("num_turns/mean", 2.0, 0.0, "np"),
    ("timing_s/start_profile", 1.2e-05, 0.1, "py"),
    ("timing_s/agent_loop/generate_sequences/min", 3.1, 0.1, "np"),
    ("timing_s/agent_loop/generate_sequences/max", 31.0, 0.1, "np"),
    ("timing_s/agent_loop/generate_sequences/mean", 12.2, 0.1, "np"),
    ("timing_s/agent_loop/slowest/response_length", 1024, 0.0, "npint"),
    ("timing_s/gen", 35.3, 0.1, "py"),
    ("timing_s/reward", 0.0021, 0.1, "py"),
    ("timing_s/old_log_prob", 6.4, 0.1, "py"),
    ("timing_s/ref", 5.8, 0.1, "py"),
    ("timing_s/adv", 0.31, 0.1, "py"),
    ("timing_s/update_actor", 15.7, 0.1, "py"),
    ("timing_s/update_weights", 2.1, 0.1, "py"),
    ("timing_s/step", 66.2, 0.1, "py"),
    ("timing_s/stop_profile", 9.8e-06, 0.1, "py"),
    ("timing_per_token_ms/gen", 0.056, 0.1, "py"),
    ("timing_per_token_ms/ref", 0.012, 0.1, "py"),
    ("timing_per_token_ms/adv", 0.0003, 0.1, "py"),
    ("timing_per_token_ms/update_actor", 0.033, 0.1, "py"),
    ("perf/total_num_tokens", 374_800, 0.05, "int"),
    ("perf/time_per_step", 66.2, 0.1, "py"),
    ("perf/throughput", 707.7, 0.1, "py"),
]
VAL_CATALOGUE: list[tuple[str, float, float, str]] = [
    ("val-core/openai/gsm8k/reward/mean@1", 0.52, 0.05, "np"),
    ("val-aux/num_turns/min", 2, 0.0, "npint"),
    ("val-aux/num_turns/max", 2, 0.0, "npint"),
    ("val-aux/num_turns/mean", 2.0, 0.0, "np"),
]

Record = tuple[int, dict[str, object]]


def _value(level: float, noise: float, kind: str, rng: np.random.Generator) -> object:
    value = level * (1.0 + noise * rng.standard_normal()) if noise else level
    if kind == "int":
        return round(value)
    if kind == "npint":
        return np.int64(round(value))
    if kind == "np":
        return np.float64(value)
    return float(value)


def run_records(steps: int, *, seed: int = 0, test_freq: int = 5, val_before_train: bool = True) -> list[Record]:
    """Records of a verl 0.7 GRPO run: a step-0 validation record, then one per step (validation merged
    into every ``test_freq``-th step and the last one), as ``RayPPOTrainer.fit`` logs them."""
    rng = np.random.default_rng(seed)
    records: list[Record] = []
    if val_before_train:
        records.append((0, {n: _value(lv, sd, k, rng) for n, lv, sd, k in VAL_CATALOGUE}))
    for step in range(1, steps + 1):
        data = {n: _value(lv, sd, k, rng) for n, lv, sd, k in CATALOGUE}
        data["training/global_step"] = step
        if step % test_freq == 0 or step == steps:
            data.update({n: _value(lv, sd, k, rng) for n, lv, sd, k in VAL_CATALOGUE})
        records.append((step, data))
    return records


def console_line(step: int, data: dict[str, object], *, three_decimals: bool = False) -> str:
    """The line verl's console logger prints (no Ray prefix)."""
    parts = [f"step:{step}"]
    for key, value in data.items():
        if isinstance(value, numbers.Number):
            parts.append(f"{key}:{value:.3f}" if three_decimals else f"{key}:{pprint.pformat(value)}")
    return " - ".join(parts)


def jsonl_line(step: int, data: dict[str, object], *, writer: str = "json") -> str:
    """The line verl's file logger writes: ``json`` (v0.6.0-v0.7.0) or ``orjson`` (after v0.7.0)."""
    plain = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in data.items()}
    if writer == "json":
        return json.dumps({"step": step, "data": plain})
    compact = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in plain.items()}
    return json.dumps({"step": step, "data": compact}, separators=(",", ":"))


def expected_value(value: object, *, three_decimals: bool = False) -> float:
    """What a reader must return for ``value`` as it was written."""
    number = float(value)  # type: ignore[arg-type]
    return float(f"{number:.3f}") if three_decimals else number


def write_lines(path: Path, lines: Iterable[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def expected_values(name: str) -> dict[int, dict[str, float]]:
    """The values a generated fixture was written with (``<name>.expected.json``, see make_fixtures.py)."""
    raw = json.loads((METRICS_FIXTURES / f"{name}.expected.json").read_text())
    return {int(step): {k: float(v) for k, v in row.items()} for step, row in raw.items()}


def assert_frame_matches(data, expected: dict[int, dict[str, float]], *, rel: float = 0.0) -> None:
    """Every expected (step, metric) value is in the frame; NaN where NaN (or null) was written."""
    assert sorted(expected) == data.index.tolist()
    for step, row in expected.items():
        for metric, want in row.items():
            got = data.at[step, metric]
            if math.isnan(want):
                assert math.isnan(got), (step, metric, got)
            else:
                assert got == pytest.approx(want, rel=rel, abs=0.0), (step, metric)
