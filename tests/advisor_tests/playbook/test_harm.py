"""Harm that does not wait for the damage (issue 24): a stall, a level beyond published runs, acceleration; and the
config-derived quantities (flat groups, padding waste) checked against hand arithmetic.

Each harm kind has a run it fires on and one it must stay quiet on. Expected numbers are formulas written here
(p^n + (1-p)^n, 1 - real tokens / padded tokens, ln 2 / growth rate), never read back from the code under test.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from advisor import load_config
from advisor.playbook import suggest
from advisor.playbook._derived import attach, flat_group_share
from advisor.playbook._harm import (
    Accelerating,
    BeyondPublished,
    Stalled,
    accelerating,
    beyond_published,
    doubling_steps,
    stalled,
)
from advisor.playbook._signals import Signals, run_facts

GRPO = ["actor_rollout_ref.rollout.name=vllm", "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.rollout.n=5"]
ENVELOPE = Path(__file__).resolve().parents[3] / "knowledge" / "published_envelope.yaml"


def _signals(steps: int = 100, **series: np.ndarray | float) -> Signals:
    index = pd.Index(np.arange(1, steps + 1), name="step")
    frame = pd.DataFrame({k.replace("__", "/"): (np.full(steps, v) if np.isscalar(v) else v)
                          for k, v in series.items()}, index=index)
    return Signals(frame)


# -- stall ------------------------------------------------------------------------------------------------------


def test_a_score_flat_since_the_start_is_a_stall() -> None:
    rng = np.random.default_rng(0)
    s = _signals(critic__score__mean=0.62 + rng.normal(0, 0.01, 100))["critic/score/mean"]
    result = stalled(s, Stalled())
    assert result.holds and "has stalled" in result.text


@pytest.mark.parametrize("shape", ["climbing", "saturated after a climb (the published healthy shape)"])
def test_a_score_that_climbed_is_not_a_stall(shape: str) -> None:
    t = np.linspace(0, 1, 100)
    score = 0.3 + 0.5 * t if shape == "climbing" else np.interp(t, [0, 0.3, 1], [0.05, 0.7, 0.72])
    assert not stalled(_signals(critic__score__mean=score)["critic/score/mean"], Stalled()).holds


# -- beyond published runs --------------------------------------------------------------------------------------


def test_a_level_far_beyond_published_runs_fires_and_one_within_does_not() -> None:
    # progress unknown (no total_training_steps): the highest step any published run logged after its first 10%
    runs = yaml.safe_load(ENVELOPE.read_text())["runs"].values()
    top = max(m for e in runs if "actor/grad_norm" in e["metrics"] for m in e["metrics"]["actor/grad_norm"]["max"][1:])
    far_signals = _signals(actor__grad_norm=3.5 * top)
    far = beyond_published(far_signals["actor/grad_norm"], BeyondPublished(factor=3), far_signals)
    assert far.holds and far.distance == pytest.approx(3.5) and "published" in far.text
    near = _signals(actor__grad_norm=2.5 * top)
    assert not beyond_published(near["actor/grad_norm"], BeyondPublished(factor=3), near).holds


def test_a_metric_published_runs_do_not_log_is_judged_against_the_rules_ceiling() -> None:
    # training/rollout_probs_diff_std: no rule reads it, so the envelope does not keep it; 1.59 is 16x a 0.1 ceiling
    name = "training__rollout_probs_diff_std"
    high, within = _signals(**{name: 1.59}), _signals(**{name: 0.3})
    metric = name.replace("__", "/")
    result = beyond_published(high[metric], BeyondPublished(factor=5, high=0.1), high)
    assert result.holds and result.distance == pytest.approx(15.9)
    assert not beyond_published(within[metric], BeyondPublished(factor=5, high=0.1), within).holds
    assert not beyond_published(high[metric], BeyondPublished(factor=5), high).holds


# -- acceleration -----------------------------------------------------------------------------------------------


def test_a_kl_doubling_every_8_steps_is_projected_across_the_clamp() -> None:
    steps = np.arange(1, 81)
    kl = 0.001 * 2.0 ** (steps / 8)  # ~1000x in 80 steps (2^10)
    s = _signals(80, actor__kl_loss=kl)["actor/kl_loss"]
    assert doubling_steps(s) == pytest.approx(8.0, rel=1e-6)
    remaining = 200 - 80
    result = accelerating(s, Accelerating(limit=10, min_doublings=2), remaining, True)
    last = float(np.median(kl[-3:]))
    assert result.holds and result.text.startswith("projection:")
    assert f"~{8 * math.log2(10 / last):.0f} steps" in result.text


def test_a_linear_drift_or_a_crossing_beyond_the_run_is_not_acceleration() -> None:
    linear = _signals(actor__kl_loss=np.linspace(0.02, 0.3, 100))["actor/kl_loss"]
    assert not accelerating(linear, Accelerating(limit=10, min_doublings=2), 100, True).holds
    slow = _signals(actor__kl_loss=0.001 * 2.0 ** (np.arange(1, 101) / 8))["actor/kl_loss"]
    # doubling every 8 steps from ~5.6 reaches 10 in ~7 steps: inside 100 steps, outside 5
    assert accelerating(slow, Accelerating(limit=10, min_doublings=2), 100, True).holds
    assert not accelerating(slow, Accelerating(limit=100, min_doublings=2), 5, True).holds


@pytest.mark.parametrize(("total", "remaining"), [(None, 80), (200, 120), (80, 0), (60, 0)])
def test_the_projection_horizon_is_what_is_left_of_the_planned_run(total: int | None, remaining: int) -> None:
    # a run that logged 80 steps: with no total, as many more; with a total, the total less 80, and none once the run
    # reached (or passed) it: a finished run's projection cannot hurt it
    from advisor.playbook._harm import remaining_steps

    signals = _signals(80, actor__kl_loss=0.001 * 2.0 ** (np.arange(1, 81) / 8))
    signals.planned_steps = total
    assert remaining_steps(signals) == (remaining, total is not None)


def test_a_finished_run_whose_kl_did_not_reach_the_clamp_has_no_projected_harm() -> None:
    steps = np.arange(1, 81)
    kl = 0.001 * 2.0 ** (steps / 8)  # 1.0 at step 80, would reach 10 in ~27 more steps
    frame = pd.DataFrame({"actor/kl_loss": kl, "critic/score/mean": np.linspace(0.3, 0.7, 80), "actor/entropy": 0.5},
                         index=pd.Index(steps, name="step"))
    live = suggest(load_config(None, [*GRPO, "trainer.total_training_steps=200"]), frame)
    finished = suggest(load_config(None, [*GRPO, "trainer.total_training_steps=80"]), frame)
    projected = [d for d in live.diagnoses if d.id == "KL001" and d.harmful]
    assert projected and "the run's remaining 120 steps" in projected[0].harm_held
    assert not [d for d in finished.diagnoses if d.id == "KL001" and d.harmful]


# -- the issue's runs, through suggest ---------------------------------------------------------------------------


def test_kl_growing_1000x_in_80_steps_with_the_score_stalled_gets_a_change() -> None:
    cfg = load_config(None, [*GRPO, "trainer.total_training_steps=200"])
    steps = np.arange(1, 81)
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"actor/kl_loss": 0.0005 * 2.0 ** (steps / 8),
                          "critic/score/mean": 0.4 + rng.normal(0, 0.01, 80),
                          "actor/entropy": 0.5, "actor/ppo_kl": 0.002, "actor/pg_clipfrac": 0.002},
                         index=pd.Index(steps, name="step"))
    result = suggest(cfg, frame)
    assert result.decided_by is not None and result.decided_by.id == "KL001"
    assert "actor_rollout_ref.actor.optim.lr" in [c.key for c in result.changes]


# -- config-derived quantities -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("p", "n", "expected"), [(0.18, 2, 0.18**2 + 0.82**2), (0.93, 4, 0.93**4 + 0.07**4)])
def test_the_flat_group_share_is_p_to_the_n_plus_its_complement(p: float, n: int, expected: float) -> None:
    assert flat_group_share(p, n) == pytest.approx(expected)
    cfg = load_config(None, [*GRPO[:3], f"actor_rollout_ref.rollout.n={n}"])
    signals = _signals(critic__score__mean=p)
    q = attach(signals, cfg, run_facts(cfg)).flat_groups(signals)
    assert q is not None and q.value == pytest.approx(expected)
    assert f"{expected:.0%}" in q.text


def test_the_issue_examples_flat_shares() -> None:
    assert round(flat_group_share(0.18, 2), 2) == 0.70  # issue 24: "~70% of groups"
    assert round(0.93**4, 2) == 0.75  # "75% of groups all-correct"


def test_padding_waste_is_one_minus_real_over_padded_tokens() -> None:
    cfg = load_config(None, [*GRPO, "data.max_prompt_length=1024", "data.max_response_length=2048",
                             "actor_rollout_ref.model.use_remove_padding=false"])
    signals = _signals(prompt_length__mean=200.0, response_length__mean=600.0)
    q = attach(signals, cfg, run_facts(cfg)).padding_waste(signals)
    assert q is not None and q.value == pytest.approx(1 - (200 + 600) / (1024 + 2048))
    assert "74%" in q.text
    packed = load_config(None, [*GRPO, "actor_rollout_ref.model.use_remove_padding=true"])
    signals = _signals(prompt_length__mean=200.0, response_length__mean=600.0)
    assert attach(signals, packed, run_facts(packed)).padding_waste(signals) is None  # no pad tokens computed


def _update_bound_run(steps: int = 60) -> pd.DataFrame:
    return pd.DataFrame({"timing_s/update_actor": 60.0, "timing_s/step": 100.0, "timing_s/gen": 25.0,
                         "response_length/mean": 300.0, "prompt_length/mean": 150.0, "response_length/max": 2048.0,
                         "critic/score/mean": np.linspace(0.2, 0.6, steps), "actor/entropy": 0.5},
                        index=pd.Index(np.arange(1, steps + 1), name="step"))


def test_a_slow_padded_update_gets_remove_padding_without_a_gpu() -> None:
    cfg = load_config(None, [*GRPO, "data.max_prompt_length=1024", "data.max_response_length=2048",
                             "actor_rollout_ref.model.use_remove_padding=false",
                             "actor_rollout_ref.actor.use_dynamic_bsz=false"])
    result = suggest(cfg, _update_bound_run())
    assert result.decided_by is not None and result.decided_by.id == "TP002"
    assert [c.key for c in result.changes] == ["actor_rollout_ref.model.use_remove_padding"]
    assert not any("none of its fixes" in n for n in result.notes)
    assert "padding" in result.decided_by.summary and "1 - (prompt 150 + response 300)" in result.decided_by.summary


def test_generation_waves_without_a_gpu_name_the_flag() -> None:
    cfg = load_config(None, [*GRPO, "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
                             "actor_rollout_ref.rollout.tensor_model_parallel_size=4", "trainer.n_gpus_per_node=8"])
    frame = _update_bound_run().assign(**{"timing_s/gen": 77.0, "timing_s/update_actor": 15.0})
    result = suggest(cfg, frame)
    assert any("--gpu" in n for n in result.notes)
    assert not any("none of its fixes" in n for n in result.notes)


def test_the_cli_names_the_missing_flag_when_a_speed_fix_needs_the_gpu(tmp_path: Path) -> None:
    # packed already (remove-padding on), so the remaining fixes change memory: they need --gpu to be checked
    from click.testing import CliRunner

    from advisor.cli import app

    run_sh = tmp_path / "run.sh"
    run_sh.write_text("python3 -m verl.trainer.main_ppo " + " ".join(
        [*GRPO, "actor_rollout_ref.actor.use_dynamic_bsz=false",
         "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "data.max_response_length=2048"]) + "\n")
    metrics = tmp_path / "metrics.jsonl"
    frame = _update_bound_run()
    metrics.write_text("".join(f'{{"step": {step}, "data": {row.to_json()}}}\n' for step, row in frame.iterrows()))
    result = CliRunner().invoke(app, ["suggest", str(run_sh), str(metrics)])
    assert result.exit_code == 0, result.output
    assert "TP002" in result.output and "pass --gpu NAME" in result.output
    assert "none of its fixes" not in result.output and "outside the config" not in result.output


def _kl_plateau(level: float) -> pd.DataFrame:
    steps = np.arange(1, 101)
    return pd.DataFrame({"actor/kl_loss": np.interp(steps, [1, 40, 100], [0.002, level, level]),
                         "critic/score/mean": np.interp(steps, [1, 40, 100], [0.3, 0.7, 0.7])},
                        index=pd.Index(steps, name="step"))


def test_severity_follows_distance_and_persistence() -> None:
    # 16x the 0.1 ceiling on every step of the window: an order of magnitude past the 5x threshold's base, persistent
    cfg = load_config(None, GRPO)
    far = next(d for d in suggest(cfg, _kl_plateau(1.6)).diagnoses if d.id == "KL001")
    assert far.severity == "error" and "16x" in far.harm_detail
    near = next(d for d in suggest(cfg, _kl_plateau(0.6)).diagnoses if d.id == "KL001")
    assert near.severity == "warning" and "6x" in near.harm_detail
