"""advisor suggest: from diagnoses to one diff.

The seeds' three worked log examples (001 §11.4) are tests here, with the seeds' own advice as the
expected answer; the bundled examples each have the diagnosis they were built for.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor import load_config
from advisor.checks import run_checks
from advisor.errors import MetricsError
from advisor.metrics import LOGGED_NAN
from advisor.playbook._diagnose import Diagnosis
from advisor.playbook._rule_loader import PERFORMANCE_TREES, Fix, load_playbook
from advisor.playbook._suggest import suggest, suggest_run, validated

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"

# verl's PPO defaults on 8 GPUs (B=1024 > M=256: not on-policy), as the seeds' examples ran
PPO = ["actor_rollout_ref.rollout.name=vllm", "critic.ppo_micro_batch_size_per_gpu=8",
       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16", "data.filter_overlong_prompts=true"]


def frame(rows: dict[int, dict[str, float]]) -> pd.DataFrame:
    return pd.DataFrame.from_dict(rows, orient="index").sort_index()


def read_jsonl(path: Path) -> pd.DataFrame:
    rows = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        rows[record["step"]] = {k: LOGGED_NAN if v is None else v for k, v in record["data"].items()}
    return frame(rows)


def test_seed_example_1_healthy_start_needs_no_change() -> None:
    # seed 001 §11.4 example 1 (step 0 of a healthy PPO run, names as logged then)
    run = frame({0: {"critic/vf_loss": 14.947, "critic/vf_clipfrac": 0.0, "critic/vpred_mean": -2.056,
                     "critic/grad_norm": 1023.278, "actor/entropy": 0.433, "actor/pg_loss": -0.005,
                     "actor/pg_clipfrac": 0.0, "actor/ppo_kl": 0.0, "actor/grad_norm": 1.992,
                     "critic/score/mean": 0.004, "critic/score/max": 1.0, "critic/score/min": 0.0,
                     "response_length/mean": 239.133, "response_length/max": 256.0}})
    result = suggest(load_config(None, PPO), run)
    assert result.verdict == "no change"
    assert result.changes == []


def test_seed_example_2_learning_rate_too_high() -> None:
    # seed 001 §11.4 example 2: clipfrac 0.850, ppo_kl 0.125, grad_norm 1.000 -> lr 1e-6 to 5e-7
    run = frame({5: {"actor/pg_loss": 0.523, "actor/pg_clipfrac": 0.850, "actor/ppo_kl": 0.125,
                     "actor/grad_norm": 1.000, "critic/score/mean": 0.003, "critic/score/max": 1.0}})
    result = suggest(load_config(None, PPO), run)
    assert result.decided_by is not None and result.decided_by.id == "CF001"
    assert [(c.key, c.old, c.new) for c in result.changes] == [("actor_rollout_ref.actor.optim.lr", 1e-6, 5e-7)]


def test_seed_example_3_critic_under_trained() -> None:
    # seed 001 §11.4 example 3: vf_explained_var -0.234, vf_loss 45.23 -> critic lr 1e-5 to 5e-5
    run = frame({50: {"critic/vf_loss": 45.23, "critic/vf_explained_var": -0.234, "critic/vpred_mean": 0.123,
                      "critic/returns/mean": 5.678, "actor/pg_loss": -0.002, "critic/score/mean": 0.256,
                      "critic/score/max": 1.0}})
    result = suggest(load_config(None, PPO), run)
    assert result.decided_by is not None and result.decided_by.id == "CR002"
    assert [(c.key, c.old, c.new) for c in result.changes] == [("critic.optim.lr", 1e-5, 5e-5)]
    assert ["critic.ppo_epochs"] in [[c.key for c in alt] for alt in result.alternatives]


EXPECTED = {
    "healthy_grpo": (None, []),
    "reward_all_zero": ("RW001", []),
    "truncation": ("RL001", ["data.max_response_length"]),
    "kl_spike_loss": ("KL001", ["actor_rollout_ref.actor.optim.lr"]),
    "kl_spike_reward": ("KL002", ["actor_rollout_ref.actor.optim.lr"]),
    "entropy_collapse": ("EN001", ["actor_rollout_ref.actor.optim.lr"]),
    "grpo_flat_groups": ("AD001", ["actor_rollout_ref.rollout.temperature"]),
    "ppo_critic_not_learning": ("CR002", ["critic.optim.lr"]),
    "generation_bound": ("TP001", ["actor_rollout_ref.rollout.tensor_model_parallel_size"]),
    "lr_too_high": ("CF001", ["actor_rollout_ref.actor.optim.lr"]),
    "healthy_ppo": (None, []),
    "healthy_generation_heavy": (None, []),  # generation is ~75% of the step: where time goes, not a fault
    "no_kl_collapse": ("KL007", ["actor_rollout_ref.actor.use_kl_loss",
                                 "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"]),
}
H100_GIB = 81559 / 1024  # knowledge/gpus.yaml: H100-80GB as nvidia-smi reports it


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bundled_example_gets_its_diagnosis(name: str) -> None:
    cfg = load_config(EXAMPLES / name / "run.sh")
    # the reader, normalisation and all; on the GPU the examples are written for, so a speed change can be
    # checked against the memory model
    result = suggest_run(cfg, EXAMPLES / name / "metrics.jsonl", gpu_memory_gib=H100_GIB)
    rule, keys = EXPECTED[name]
    assert (result.decided_by.id if result.decided_by else None) == rule
    assert [c.key for c in result.changes] == keys
    if result.changes:  # the patched config is still valid
        patched = cfg.with_changes(result.changes)
        assert not [f for f in run_checks(patched, verify_fixes=False) if f.severity == "error"]
        assert len(result.changes) <= 2


def test_examples_are_current() -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "make_examples.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize(("version", "diagnoses"), [
    # B == M and one epoch: the legacy actor makes pg_clipfrac and ppo_kl exactly 0 (v0.7.1 dp_actor.py:543,590-594)
    ("0.7.1", ["CF004"]),
    # the engine workers of 0.8.0+ have no shortcut (0.9.1 verl/workers/utils/losses.py:95); CF004 does not apply
    ("0.9.1", []),
])
def test_zero_by_construction_is_no_change(version: str, diagnoses: list[str]) -> None:
    cfg = load_config(None, [*PPO, "data.train_batch_size=256", "actor_rollout_ref.actor.ppo_mini_batch_size=256"],
                      verl_version=version)
    steps = range(1, 61)
    run = frame({s: {"actor/pg_clipfrac": 0.0, "actor/ppo_kl": 0.0, "critic/score/mean": 0.2 + 0.005 * s,
                     "critic/score/max": 1.0, "critic/vf_explained_var": 0.8} for s in steps})
    result = suggest(cfg, run)
    assert result.verdict == "no change"
    assert [d.id for d in result.diagnoses] == diagnoses


def test_convergence_problem_never_gets_a_memory_knob() -> None:
    cfg = load_config(None, PPO)
    kl_rule = next(r for r in load_playbook() if r.tree == "kl")
    from advisor.findings import Change

    micro = (Change("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 8, 4),)
    assert validated(cfg, micro, kl_rule, set()) is None
    memory_rule = next(r for r in load_playbook() if r.tree in PERFORMANCE_TREES)
    assert validated(cfg, micro, memory_rule, set()) == micro


def test_a_change_verl_would_reject_gets_one_dependent_memory_key() -> None:
    # B=512, M=128, micro 40, 8 GPUs: n=5 gives mini' = 128*5/8 = 80 (40 divides it); n=4 gives 64, which
    # 40 does not divide -> verl asserts (fsdp_workers.py:254-262); the valid completion adjusts the micro batch
    cfg = load_config(EXAMPLES / "grpo_flat_groups" / "run.sh",
                      ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=40"])
    rule = next(r for r in load_playbook() if r.id == "AD001")
    from advisor.findings import Change

    result = validated(cfg, (Change("actor_rollout_ref.rollout.n", 5, 4),), rule,
                       {(f.id, f.keys) for f in run_checks(cfg) if f.severity == "error"})
    assert result is not None and len(result) == 2
    dependent = result[1]
    assert dependent.key == "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"
    assert (128 * 4 // 8) % dependent.new == 0 and dependent.new <= 40


def test_json_shape() -> None:
    cfg = load_config(EXAMPLES / "lr_too_high" / "run.sh")
    data = suggest(cfg, read_jsonl(EXAMPLES / "lr_too_high" / "metrics.jsonl")).to_dict()
    for key in ("verl_version", "mode", "window", "diagnoses", "changes", "alternatives", "overrides"):
        assert key in data
    assert data["mode"] == {"estimator": "grpo", "critic": False, "kl_placement": "loss"}
    diag = data["diagnoses"][0]
    assert set(diag) >= {"id", "area", "severity", "summary", "evidence", "sources"}
    assert all(set(e) >= {"metric", "value", "healthy"} for e in diag["evidence"])
    assert data["overrides"] == ["actor_rollout_ref.actor.optim.lr=1e-06"]


def test_metrics_the_playbook_does_not_know_is_an_error() -> None:
    run = frame({1: {"my/custom": 1.0}, 2: {"my/custom": 2.0}})
    with pytest.raises(MetricsError, match="none of its 1 metric is"):
        suggest(load_config(None, PPO), run)


def test_window_option_changes_the_window() -> None:
    cfg = load_config(EXAMPLES / "healthy_grpo" / "run.sh")
    run = read_jsonl(EXAMPLES / "healthy_grpo" / "metrics.jsonl")
    assert suggest(cfg, run).window.size == math.ceil(0.25 * 301)  # 25% of 301 records (step 0..300) > 20
    assert suggest(cfg, run, window=10).window.first_step == 291


def test_ranking_puts_errors_and_earlier_trees_first() -> None:
    cfg = load_config(EXAMPLES / "lr_too_high" / "run.sh")
    result = suggest(cfg, read_jsonl(EXAMPLES / "lr_too_high" / "metrics.jsonl"))
    order = [(d.severity, d.rule.tree) for d in result.diagnoses]
    severities = [{"error": 0, "warning": 1, "info": 2}[s] for s, _ in order]
    assert severities == sorted(severities)


def _diagnosis_ids(result) -> list[str]:
    return [d.id for d in result.diagnoses if isinstance(d, Diagnosis)]


def test_nan_onset_fires_numerics_first() -> None:
    cfg = load_config(EXAMPLES / "healthy_grpo" / "run.sh")
    run = read_jsonl(EXAMPLES / "healthy_grpo" / "metrics.jsonl")
    onset = run.index >= 250  # logged as NaN, not absent (an array: pandas makes a scalar NaN a plain one)
    run.loc[onset, "actor/pg_loss"] = np.full(int(onset.sum()), LOGGED_NAN)
    result = suggest(cfg, run)
    assert _diagnosis_ids(result)[0] == "NU001"
    assert result.changes[0].key == "actor_rollout_ref.actor.optim.lr"


def test_fix_is_needs_sweep_marked() -> None:
    rule = next(r for r in load_playbook() if r.id == "AD001")
    assert all(isinstance(f, Fix) and f.safety == "needs-sweep" for f in rule.fixes)


def test_speed_change_needs_the_gpu_to_pass_the_memory_model() -> None:
    cfg = load_config(EXAMPLES / "generation_bound" / "run.sh")
    result = suggest_run(cfg, EXAMPLES / "generation_bound" / "metrics.jsonl")
    assert result.changes == [] and any("--gpu" in n for n in result.notes)
    assert [d.id for d in result.performance] == ["TP001"] and result.learning == []


def test_speed_change_that_would_not_fit_is_not_proposed() -> None:
    # 8 GiB cards: the memory model cannot fit a 7B replica at TP 4
    cfg = load_config(EXAMPLES / "generation_bound" / "run.sh")
    result = suggest_run(cfg, EXAMPLES / "generation_bound" / "metrics.jsonl", gpu_memory_gib=8)
    assert result.changes == []
    assert any("predicts OOM" in n for n in result.notes)


def test_generation_heavy_healthy_run_reports_tp001_as_info_only() -> None:
    cfg = load_config(EXAMPLES / "healthy_generation_heavy" / "run.sh")
    result = suggest_run(cfg, EXAMPLES / "healthy_generation_heavy" / "metrics.jsonl", gpu_memory_gib=H100_GIB)
    (tp001,) = result.performance
    assert tp001.id == "TP001" and tp001.severity == "info" and not tp001.harmful
    assert result.verdict == "no change"
    data = result.to_dict()
    assert [d["id"] for d in data["performance"]] == ["TP001"] and data["performance"][0]["kind"] == "performance"
    assert all(d["kind"] == "learning" for d in data["diagnoses"])


def test_learning_problem_outranks_a_speed_symptom() -> None:
    # the generation-bound run with a collapsed entropy: the learning diagnosis decides, TP001 is reported apart
    cfg = load_config(EXAMPLES / "generation_bound" / "run.sh")
    run = read_jsonl(EXAMPLES / "generation_bound" / "metrics.jsonl")
    t = np.linspace(0, 1, len(run))
    run["actor/entropy"] = 0.02 + 0.58 * np.exp(-18 * t)
    result = suggest(cfg, run, gpu_memory_gib=H100_GIB)
    assert result.decided_by is not None and result.decided_by.id == "EN001"
    assert "TP001" in [d.id for d in result.performance]
    assert all("tensor_model_parallel_size" not in c.key for c in result.changes)


def test_sandbox_like_blind_spot_yields_a_diagnosis() -> None:
    # GRPO, lr 1e-4: kl_loss ~2.5 (25x the 0.1 ceiling) and entropy 0.07 with the score flat at 0.8; no trend
    # rule's whole pattern need match, but the run is not "healthy on every metric"
    cfg = load_config(None, ["algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=5",
                             "actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.optim.lr=1e-4",
                             *PPO])
    steps = range(1, 51)
    run = frame({s: {"actor/kl_loss": 2.5, "actor/entropy": 0.07, "critic/score/mean": 0.8,
                     "critic/score/max": 1.0, "actor/ppo_kl": 0.004} for s in steps})
    result = suggest(cfg, run)
    assert result.diagnoses, "a metric 25x its ceiling must be reported"
    assert "actor/kl_loss" in {e.metric for d in result.diagnoses for e in d.evidence}


def test_clipfrac_and_ppo_kl_high_lower_the_lr_before_ppo_epochs() -> None:
    # pg_clipfrac 0.4 and ppo_kl 0.06 with 4 epochs: the actor lr first (torchrl's KLAdaptiveLR; the PPO
    # paper's clip bounds the step the lr takes), ppo_epochs only as an alternative
    cfg = load_config(None, [*PPO, "actor_rollout_ref.actor.ppo_epochs=4"])
    steps = range(1, 61)
    run = frame({s: {"actor/pg_clipfrac": 0.4, "actor/ppo_kl": 0.06, "critic/score/mean": 0.3,
                     "critic/score/max": 1.0, "critic/vf_explained_var": 0.6} for s in steps})
    result = suggest(cfg, run)
    assert [c.key for c in result.changes] == ["actor_rollout_ref.actor.optim.lr"]
    assert ["actor_rollout_ref.actor.ppo_epochs"] in [[c.key for c in alt] for alt in result.alternatives]


@pytest.mark.parametrize("estimator, key", [("grpo", "actor_rollout_ref.actor.use_kl_loss"),
                                            ("gae", "algorithm.use_kl_in_reward")])
def test_no_kl_collapse_adds_the_kl_where_verl_puts_it_for_the_mode(estimator: str, key: str) -> None:
    # docs/algo/grpo.md:45 (use_kl_loss for GRPO), best_practices.rst:169-170 @1dda039b (use_kl_in_reward for PPO)
    cfg = load_config(None, [*PPO, f"algorithm.adv_estimator={estimator}", "actor_rollout_ref.rollout.n=5",
                             "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16"])
    t = np.linspace(0, 1, 100)
    score = np.interp(t, [0, 0.5, 1], [0.2, 0.8, 0.3])
    run = frame({i + 1: {"critic/score/mean": float(v), "critic/score/max": 1.0, "critic/vf_explained_var": 0.6}
                 for i, v in enumerate(score)})
    result = suggest(cfg, run)
    assert result.decided_by is not None and result.decided_by.id == "KL007"
    assert result.changes[0].key == key and result.changes[0].new is True


def test_no_kl_collapse_leaves_dapos_clip_higher_run_without_a_kl() -> None:
    # DAPO's recipe drops the KL on purpose (best_practices.rst:168-171 @1dda039b: use_kl_loss False for DAPO) and
    # clips higher (clip_ratio_high 0.28 over clip_ratio_low 0.2): the same collapse gets KL007's lr fix instead
    cfg = load_config(None, [*PPO, "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=5",
                             "actor_rollout_ref.actor.clip_ratio_high=0.28",
                             "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16"])
    t = np.linspace(0, 1, 100)
    score = np.interp(t, [0, 0.5, 1], [0.2, 0.8, 0.3])
    run = frame({i + 1: {"critic/score/mean": float(v), "critic/score/max": 1.0} for i, v in enumerate(score)})
    result = suggest(cfg, run)
    assert result.decided_by is not None and result.decided_by.id == "KL007"
    lr = float(cfg.get("actor_rollout_ref.actor.optim.lr"))
    assert [(c.key, c.new) for c in result.changes] == [("actor_rollout_ref.actor.optim.lr", pytest.approx(lr / 2))]
    assert not any("kl" in c.key for alt in result.alternatives for c in alt)


def test_kl_rising_from_zero_while_the_score_climbs_is_no_change() -> None:
    # the sandbox's healthy GRPO run: kl_loss 0.002 -> 1.7 while the score climbs 0.2 -> 0.83, ppo_kl ~0
    cfg = load_config(None, [*PPO, "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=5",
                             "actor_rollout_ref.actor.use_kl_loss=true",
                             "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16"])
    t = np.linspace(0, 1, 50)
    run = frame({i + 1: {"actor/kl_loss": 0.002 + 1.7 * v ** 1.3, "critic/score/mean": 0.2 + 0.63 * v,
                         "critic/score/max": 1.0, "actor/ppo_kl": 0.0005, "actor/entropy": 2.08 - 0.4 * v}
                 for i, v in enumerate(t)})
    result = suggest(cfg, run)
    assert result.verdict == "no change"
    kl001 = next(d for d in result.diagnoses if d.id == "KL001")
    assert kl001.severity == "info" and not kl001.harmful


def test_a_cause_ranks_ahead_of_the_symptom_it_explains() -> None:
    # PPO with the in-reward KL penalty eating the reward (KL003, warning) and the critic unable to fit the
    # rewritten returns (CR002): the penalty is the cause (KL003 explains CR002), so it decides
    cfg = load_config(None, [*PPO, "algorithm.use_kl_in_reward=true", "algorithm.kl_ctrl.kl_coef=3.0",
                             "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16"])
    steps = range(1, 61)
    run = frame({s: {"critic/score/mean": 0.27, "critic/rewards/mean": 0.16, "critic/score/max": 1.0,
                     "critic/vf_explained_var": -0.05, "actor/ppo_kl": 0.001} for s in steps})
    result = suggest(cfg, run)
    assert [d.id for d in result.diagnoses[:2]] == ["KL003", "CR002"]
    assert result.changes[0].key == "algorithm.kl_ctrl.kl_coef"


def test_a_validation_only_last_row_is_not_a_nan(tmp_path: Path) -> None:
    # verl <= 0.3 logged its final validation on a step of its own (the AMD PPO baseline linked from
    # docs/algo/baseline.md:41 ends `step:1120 - val/test_score/openai/gsm8k:0.701`): the training metrics
    # that row lacks are absent, not NaN
    lines = (EXAMPLES / "healthy_ppo" / "metrics.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])["step"]
    log = tmp_path / "metrics.jsonl"
    log.write_text("\n".join([*lines, json.dumps({"step": last + 1, "data": {"val-core/openai/gsm8k/reward/mean@1":
                                                                               0.701}})]) + "\n")
    cfg = load_config(EXAMPLES / "healthy_ppo" / "run.sh")
    result = suggest_run(cfg, log)
    assert not {"NU001", "NU002"} & set(_diagnosis_ids(result))
    # the same row with the loss logged as null (orjson's NaN) is a NaN
    log.write_text("\n".join([*lines, json.dumps({"step": last + 1, "data": {"actor/pg_loss": None}})]) + "\n")
    assert "NU001" in _diagnosis_ids(suggest_run(cfg, log))


def test_a_console_log_ending_on_a_validation_step_is_not_a_nan(tmp_path: Path) -> None:
    # the console logger (verl <= 0.4.1 prints `{value:.3f}`): a row of validation only, then `nan` printed
    rows = [json.loads(line) for line in (EXAMPLES / "healthy_ppo" / "metrics.jsonl").read_text().splitlines()]
    text = [f"step:{r['step']} - " + " - ".join(f"{k}:{v:.3f}" for k, v in r["data"].items() if v is not None)
            for r in rows]
    last = rows[-1]["step"]
    log = tmp_path / "run.log"
    log.write_text("\n".join([*text, f"step:{last + 1} - val/test_score/openai/gsm8k:0.701"]) + "\n")
    cfg = load_config(EXAMPLES / "healthy_ppo" / "run.sh")
    assert not {"NU001", "NU002"} & set(_diagnosis_ids(suggest_run(cfg, log)))
    log.write_text("\n".join([*text, f"step:{last + 1} - actor/pg_loss:nan"]) + "\n")
    assert "NU001" in _diagnosis_ids(suggest_run(cfg, log))


def _smallest_gpu_that_fits(cfg) -> float:
    """The GPU size (GiB, to 1/8) from which the memory model stops predicting OOM for ``cfg`` (bisection)."""
    from advisor.memory import estimate_memory

    low, high = 1.0, 1024.0
    while high - low > 0.125:
        mid = (low + high) / 2
        low, high = (mid, high) if estimate_memory(cfg, gpu_memory_gib=mid).verdict == "oom" else (low, mid)
    return high


def test_a_learning_change_that_would_not_fit_is_proposed_and_says_so() -> None:
    # RL001 doubles data.max_response_length: on a card between the memory model's limits for the run's config and
    # for the patched one, the change stays (it answers the learning problem) and a note says it would not fit.
    # Without gradient checkpointing the actor update's activations, which grow with the response, bind (with it,
    # the generate phase does, the same for either length)
    no_checkpointing = "actor_rollout_ref.model.enable_gradient_checkpointing=False"
    cfg = load_config(EXAMPLES / "truncation" / "run.sh", [no_checkpointing])
    metrics = EXAMPLES / "truncation" / "metrics.jsonl"
    change = suggest_run(cfg, metrics).changes
    assert [c.override() for c in change] == ["data.max_response_length=512"]
    fits_run = _smallest_gpu_that_fits(cfg)
    fits_patched = _smallest_gpu_that_fits(cfg.with_changes(tuple(change)))
    assert fits_patched > fits_run
    between = (fits_run + fits_patched) / 2
    result = suggest_run(cfg, metrics, gpu_memory_gib=between)
    assert [c.override() for c in result.changes] == ["data.max_response_length=512"]
    [note] = [n for n in result.notes if "predicts OOM" in n]
    assert note.startswith("data.max_response_length=512: the memory model predicts OOM in ")
    assert f"at {between:g} GiB of GPU memory, where the run's own config fits" in note
    # where both fit, or neither does, nothing is said
    for gib in (fits_patched + 1, fits_run - 1):
        assert not [n for n in suggest_run(cfg, metrics, gpu_memory_gib=gib).notes if "predicts OOM" in n]
