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

# A verl 0.9.1 GRPO run on the default V1 trainer (trainer.use_v1=true, trainer_mode=sync) over the engine
# workers, with actor.use_kl_loss=true, entropy_coeff=0 and the default rollout.calculate_log_probs=true,
# in the order verl 0.9.1 fills the logged dict (paths in the 0.9.1 wheel, verl/...). Every name is one
# `python scripts/verl_metric_names.py /work/wheels/x/verl-0.9.1` lists. The V1 trainer averages the
# per-iteration metrics of a step (trainer/ppo/v1/utils.py MetricsAggregator: Python floats), keeps the
# last training/rollout_probs_diff_valid, and writes training/global_step as an int.
CATALOGUE_V091: list[tuple[str, float, float, str]] = [
    # trainer/ppo/v1/trainer_base.py:1608-1631 _balance_batch -> utils/seqlen_balancing.py:295-302
    ("global_seqlen/min", 41_000, 0.05, "py"),
    ("global_seqlen/max", 53_000, 0.05, "py"),
    ("global_seqlen/minmax_diff", 12_000, 0.05, "py"),
    ("global_seqlen/balanced_min", 46_800, 0.01, "py"),
    ("global_seqlen/balanced_max", 46_900, 0.01, "py"),
    ("global_seqlen/mean", 46_850.0, 0.01, "py"),
    # trainer_base.py:1683-1684 (_compute_old_log_prob); perf/mfu/actor_infer is commented out at 1685
    ("actor/entropy", 0.62, 0.05, "py"),
    # trainer_base.py:1690-1691 -> utils/debug/metrics.py:115-121
    ("training/rollout_probs_diff_valid", 1, 0.0, "int"),
    ("training/rollout_probs_diff_max", 0.71, 0.1, "py"),
    ("training/rollout_probs_diff_mean", 0.0031, 0.1, "py"),
    ("training/rollout_probs_diff_std", 0.012, 0.1, "py"),
    ("training/rollout_actor_probs_pearson_corr", 0.998, 0.001, "py"),
    # trainer_base.py:1770-1772 -> trainer/ppo/rollout_corr_helper.py:904-1010 (compute_offpolicy_metrics),
    # prefixed at 888-894; rollout_is and rollout_rs are null by default, so no rollout_is_*/rollout_rs_*
    ("rollout_corr/training_ppl", 1.31, 0.02, "py"),
    ("rollout_corr/training_log_ppl", 0.27, 0.05, "py"),
    ("rollout_corr/kl", 0.0008, 0.1, "py"),
    ("rollout_corr/k3_kl", 0.0007, 0.1, "py"),
    ("rollout_corr/rollout_ppl", 1.31, 0.02, "py"),
    ("rollout_corr/rollout_log_ppl", 0.27, 0.05, "py"),
    ("rollout_corr/log_ppl_diff", 0.0006, 0.2, "py"),
    ("rollout_corr/log_ppl_abs_diff", 0.004, 0.1, "py"),
    ("rollout_corr/log_ppl_diff_max", 0.08, 0.1, "py"),
    ("rollout_corr/log_ppl_diff_min", -0.07, 0.1, "py"),
    ("rollout_corr/ppl_ratio", 1.0004, 0.0001, "py"),
    ("rollout_corr/chi2_token", 0.0017, 0.1, "py"),
    ("rollout_corr/chi2_seq", 0.41, 0.2, "py"),
    # trainer_base.py:1860-1864 (_update_actor): workers/utils/losses.py:114-119,141-142 (ppo_loss),
    # workers/engine_workers.py:212-221 (_postprocess_output), each prefixed actor/ by rename_dict;
    # actor/mfu renamed perf/mfu/actor at 1862
    ("actor/pg_clipfrac", 0.0032, 0.3, "np"),
    ("actor/ppo_kl", 0.00012, 0.5, "np"),
    ("actor/pg_clipfrac_lower", 0.0, 0.0, "np"),
    ("actor/pg_loss", -0.004, 1.0, "np"),
    ("actor/kl_loss", 0.0021, 0.2, "np"),
    ("actor/kl_coef", 0.001, 0.0, "np"),
    ("actor/loss", -0.004, 1.0, "np"),
    ("actor/grad_norm", 0.21, 0.3, "np"),
    ("actor/lr", 1e-06, 0.0, "np"),
    ("actor/perf/max_memory_allocated_gb", 61.4, 0.01, "np"),
    ("actor/perf/max_memory_reserved_gb", 72.9, 0.01, "np"),
    ("actor/perf/cpu_memory_used_gb", 214.0, 0.02, "np"),
    ("perf/mfu/actor", 0.31, 0.03, "np"),
    # trainer_base.py:1935 (_compute_metrics)
    ("training/global_step", 0, 0.0, "int"),
    ("training/epoch", 0, 0.0, "int"),
    # trainer_base.py:1944 -> trainer/ppo/metric_utils.py:554-606 (compute_data_metrics, no critic values)
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
    # metric_utils.py:595-600, from __num_turns__ the V1 trainer sets at trainer_base.py:1931-1932
    ("num_turns/min", 1, 0.0, "npint"),
    ("num_turns/max", 1, 0.0, "npint"),
    ("num_turns/mean", 1.0, 0.0, "np"),
    # trainer_base.py:1945 -> metric_utils.py:645-651 (compute_timing_metrics), one per marked_timer of
    # trainer_base.py:565-610 and trainer_sync.py:36 (the V1 trainer times no profiler and no agent loop)
    ("timing_s/gen", 35.3, 0.1, "py"),
    ("timing_s/old_log_prob", 6.4, 0.1, "py"),
    ("timing_s/ref", 5.8, 0.1, "py"),
    ("timing_s/adv", 0.31, 0.1, "py"),
    ("timing_s/update_actor", 15.7, 0.1, "py"),
    ("timing_s/update_weights", 2.1, 0.1, "py"),
    ("timing_s/step", 66.2, 0.1, "py"),
    ("timing_per_token_ms/gen", 0.056, 0.1, "py"),
    ("timing_per_token_ms/ref", 0.012, 0.1, "py"),
    ("timing_per_token_ms/adv", 0.0003, 0.1, "py"),
    ("timing_per_token_ms/update_actor", 0.033, 0.1, "py"),
    # trainer_base.py:1947 -> metric_utils.py:685-687 (compute_throughout_metrics)
    ("perf/total_num_tokens", 374_800, 0.05, "int"),
    ("perf/time_per_step", 66.2, 0.1, "py"),
    ("perf/throughput", 707.7, 0.1, "py"),
    # trainer_base.py:1954-1960
    ("training/num_turns/mean", 1.0, 0.0, "np"),
    ("training/num_turns/max", 1, 0.0, "npint"),
    ("training/num_turns/min", 1, 0.0, "npint"),
    # trainer_base.py:1981-1993 (off-policy staleness; the synchronous trainer: spans 1, staleness 0)
    ("training/off_policy/trajectory_spans/mean", 1.0, 0.0, "np"),
    ("training/off_policy/trajectory_spans/max", 1, 0.0, "npint"),
    ("training/off_policy/trajectory_spans/min", 1, 0.0, "npint"),
    ("training/off_policy/trajectory_staleness/mean", 0.0, 0.0, "np"),
    ("training/off_policy/trajectory_staleness/max", 0, 0.0, "npint"),
    ("training/off_policy/trajectory_staleness/min", 0, 0.0, "npint"),
    ("training/off_policy/trajectory_staleness_worst/mean", 0.0, 0.0, "np"),
    ("training/off_policy/trajectory_staleness_worst/max", 0, 0.0, "npint"),
    ("training/off_policy/trajectory_staleness_worst/min", 0, 0.0, "npint"),
]
# validation on test steps (trainer_base.py:494-500, _val_metrics_update at 1342-1377), timed as
# timing_s/testing; a save step adds timing_s/save_checkpoint (484-485)
VAL_CATALOGUE_V091: list[tuple[str, float, float, str]] = [
    ("val-core/openai/gsm8k/reward/mean@1", 0.52, 0.05, "np"),
    ("val-aux/num_turns/min", 1, 0.0, "npint"),
    ("val-aux/num_turns/max", 1, 0.0, "npint"),
    ("val-aux/num_turns/mean", 1.0, 0.0, "np"),
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


def run_records_v091(steps: int, *, seed: int = 0, test_freq: int = 5, save_freq: int = 5) -> list[Record]:
    """Records of a verl 0.9.1 GRPO run on the V1 trainer: step-0 validation (trainer_base.py:439-445),
    then one record per step with validation and checkpoint timing on their steps (trainer_base.py:467-514)."""
    rng = np.random.default_rng(seed)
    records: list[Record] = [(0, {n: _value(lv, sd, k, rng) for n, lv, sd, k in VAL_CATALOGUE_V091})]
    for step in range(1, steps + 1):
        data = {n: _value(lv, sd, k, rng) for n, lv, sd, k in CATALOGUE_V091}
        data["training/global_step"] = step
        extra: dict[str, object] = {}
        if step % save_freq == 0 or step == steps:
            extra["timing_s/save_checkpoint"] = _value(4.2, 0.1, "py", rng)
        if step % test_freq == 0 or step == steps:
            data.update({n: _value(lv, sd, k, rng) for n, lv, sd, k in VAL_CATALOGUE_V091})
            extra["timing_s/testing"] = _value(21.0, 0.1, "py", rng)
        # the timings sit with the others: compute_timing_metrics writes timing_raw in insertion order
        ordered = {}
        for key, value in data.items():
            ordered[key] = value
            if key == "timing_s/update_weights":
                ordered.update({k: v for k, v in extra.items() if k == "timing_s/save_checkpoint"})
            if key == "timing_s/step" and "timing_s/testing" in extra:
                ordered["timing_s/testing"] = extra["timing_s/testing"]
        records.append((step, ordered))
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
