"""The sandbox trainer end to end: the CLI, verl's output formats, and training dynamics that must be real.

Each dynamics test pairs the fault with a control run, so it fails if the effect comes from anywhere else.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sweeps import sandbox as sb

# A small GRPO setup: 32 prompts x 4 responses on 2 emulated ranks, 4 optimizer steps per training step.
SMALL = [
    "data.train_batch_size=32",
    "actor_rollout_ref.rollout.n=4",
    "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "trainer.n_gpus_per_node=2",
    "data.max_response_length=32",
    "+sandbox.train_size=512",
    "+sandbox.val_size=64",
    "trainer.logger=[]",
    "trainer.val_before_train=false",
    "+sandbox.deterministic_timing=true",
]
# The same with PPO: a critic, GAE, n = 1.
SMALL_PPO = [o for o in SMALL if not o.startswith(("algorithm.adv_estimator", "actor_rollout_ref.rollout.n"))]


def run(*overrides: str, steps: int = 10, base: list[str] = SMALL) -> list[tuple[int, dict[str, Any]]]:
    return sb.run([*base, f"trainer.total_training_steps={steps}", *overrides])


def series(history: list[tuple[int, dict[str, Any]]], key: str) -> np.ndarray:
    return np.array([float(m[key]) for step, m in history if step > 0 and key in m])


# ----------------------------------------------------------------------------------------------------------------
# the CLI


def test_typo_key_exits_2_with_a_did_you_mean_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = sb.main(["actor_rollout_ref.actor.optim.lrr=1e-6"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert "'actor_rollout_ref.actor.optim.lrr'" in lines[0]
    assert "did you mean 'actor_rollout_ref.actor.optim.lr'" in lines[0]
    assert "Traceback" not in err


def test_typo_in_a_sandbox_knob_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert sb.main(["+sandbox.sed=3"]) == 2
    assert "did you mean 'sandbox.seed'?" in capsys.readouterr().err


def test_sandbox_knobs_need_no_plus() -> None:
    args, _ = sb.parse_args(["sandbox.seed=7", "+sandbox.train_size=4096"])
    assert (args.seed, args.train_size) == (7, 4096)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        pytest.param("algorithm.adv_estimator=remax", "not modelled by the sandbox", id="unmodelled-estimator"),
        pytest.param("actor_rollout_ref.actor.loss_agg_mode=token-sum", "Invalid loss_agg_mode: token-sum",
                     id="bad-agg-mode"),
        pytest.param("actor_rollout_ref.actor.clip_ratio_c=0.5", "should be greater than 1.0", id="dual-clip-c"),
        pytest.param("data.train_batch_size=12", "real_train_batch_size (12) must be divisible by minimal possible "
                     "batch size (8)", id="batch-vs-ranks"),
        pytest.param("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3",
                     "normalized ppo_mini_batch_size 32 should be divisible by ppo_micro_batch_size_per_gpu 3",
                     id="mini-vs-micro"),
        pytest.param("actor_rollout_ref.actor.optim.lr=fast", "is 'fast' but verl expects a number", id="wrong-type"),
    ],
)
def test_configs_verl_refuses_exit_2(override: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert sb.main([override]) == 2
    assert message in capsys.readouterr().err


def test_memory_emulation_without_the_memory_model_exits_2(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "advisor.memory", None)  # makes `import advisor.memory` fail
    code = sb.main([*SMALL, "+sandbox.emulate_model=Qwen2.5-7B", "+sandbox.emulate_gpu=H100-80GB"])
    err = capsys.readouterr().err
    assert code == 2
    assert "advisor.memory" in err and len(err.strip().splitlines()) == 1


def _fake_memory_model(verdict: str) -> types.ModuleType:
    """A stand-in for advisor.memory with the interface the sandbox relies on (the real one is tested by its
    owner): estimate_memory(cfg, model=, gpu=) -> .verdict and .stages with stage/peak_gib/capacity_gib/risk."""
    module = types.ModuleType("advisor.memory")
    stages = [types.SimpleNamespace(stage="rollout", peak_gib=60.0, capacity_gib=80.0, risk="ok"),
              types.SimpleNamespace(stage="update_actor", peak_gib=95.5, capacity_gib=80.0, risk=verdict)]

    def estimate_memory(cfg: object, *, model: str, gpu: str) -> types.SimpleNamespace:
        assert (model, gpu) == ("Qwen2.5-7B", "H100-80GB")
        return types.SimpleNamespace(verdict=verdict, stages=stages)

    module.estimate_memory = estimate_memory  # type: ignore[attr-defined]
    return module


def test_memory_emulation_fails_like_a_cuda_oom(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "advisor.memory", _fake_memory_model("oom"))
    code = sb.main([*SMALL, "trainer.total_training_steps=2", "+sandbox.emulate_model=Qwen2.5-7B",
                    "+sandbox.emulate_gpu=H100-80GB"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 15.50 GiB.")
    assert "update_actor" in err


def test_memory_emulation_reports_the_peak_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "advisor.memory", _fake_memory_model("ok"))
    history = run("+sandbox.emulate_model=Qwen2.5-7B", "+sandbox.emulate_gpu=H100-80GB", steps=2)
    assert [m["perf/max_memory_allocated_gb"] for _, m in history] == [95.5, 95.5]


def test_memory_emulation_needs_both_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert sb.main(["+sandbox.emulate_model=Qwen2.5-7B"]) == 2
    assert "go together" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------------------------
# verl's output formats (tracking.FileLogger, aggregate_logger.concat_dict_to_str)

CONSOLE_LINE = re.compile(r"^step:(\d+)( - [^ :]+:\S+)+$")


def test_console_and_file_logger_write_verl_formats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    code = sb.main([*SMALL, "trainer.total_training_steps=3", "trainer.logger=[console,file]",
                    "trainer.val_before_train=true", "trainer.test_freq=2"])
    out = capsys.readouterr().out
    assert code == 0
    console = out.strip().splitlines()
    assert all(CONSOLE_LINE.match(line) for line in console), console[0][:200]
    assert [int(CONSOLE_LINE.match(line).group(1)) for line in console] == [0, 1, 2, 3]  # type: ignore[union-attr]
    assert "actor/pg_loss:np.float64(" in console[1]  # reduced worker metrics are numpy scalars (verl >= 0.5)

    raw = path.read_text().splitlines()
    assert raw[1].startswith('{"step":1,"data":{')  # orjson's compact form
    records = [json.loads(line) for line in raw]
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    assert set(records[0]["data"]) == {"val-core/sandbox/add/reward/mean@1"}  # step 0: validation only
    assert "val-core/sandbox/add/reward/mean@1" in records[2]["data"]  # test_freq 2
    assert "val-core/sandbox/add/reward/mean@1" in records[3]["data"]  # and the last step
    assert "val-core/sandbox/add/reward/mean@1" not in records[1]["data"]
    for line, record in zip(console, records, strict=True):
        keys = [part.rsplit(":", 1)[0] for part in line.split(" - ")[1:]]
        assert keys == list(record["data"])  # same metrics, same order


def test_file_logger_default_path_follows_verl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path))
    sb.run([*SMALL, "trainer.total_training_steps=1", "trainer.logger=[file]", "trainer.project_name=proj",
            "trainer.experiment_name=exp1"])
    lines = (tmp_path / "proj" / "exp1.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1]


def test_jsonl_writes_nan_and_inf_as_null() -> None:
    line = sb.jsonl_line({"a": float("nan"), "b": np.float64("inf"), "c": np.int64(3), "d": 0.5}, step=4)
    assert line == '{"step":4,"data":{"a":null,"b":null,"c":3,"d":0.5}}'


def test_console_line_prints_numbers_only_with_pformat() -> None:
    line = sb.console_line({"x": np.float64(0.1), "y": 1e-06, "name": "skip", "n": 3}, step=2)
    assert line == "step:2 - x:np.float64(0.1) - y:1e-06 - n:3"


def test_same_seed_gives_byte_identical_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def write(name: str, seed: int) -> bytes:
        monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / name))
        sb.run([*SMALL, "trainer.total_training_steps=4", "trainer.logger=[file]", f"+sandbox.seed={seed}"])
        return (tmp_path / name).read_bytes()

    first = write("a.jsonl", 3)
    assert write("b.jsonl", 3) == first
    assert write("c.jsonl", 4) != first


# ----------------------------------------------------------------------------------------------------------------
# metrics: names and formulas (verl/trainer/ppo/metric_utils.py)

ALWAYS = [
    "global_seqlen/min", "global_seqlen/max", "global_seqlen/minmax_diff", "global_seqlen/balanced_min",
    "global_seqlen/balanced_max", "global_seqlen/mean", "actor/entropy",
    "actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower",
    "actor/grad_norm", "actor/lr", "training/global_step", "training/epoch",
    "critic/score/mean", "critic/score/max", "critic/score/min", "critic/rewards/mean", "critic/rewards/max",
    "critic/rewards/min", "critic/advantages/mean", "critic/advantages/max", "critic/advantages/min",
    "critic/returns/mean", "critic/returns/max", "critic/returns/min",
    "response_length/mean", "response_length/max", "response_length/min", "response_length/clip_ratio",
    "response_length_non_aborted/mean", "response/aborted_ratio",
    "prompt_length/mean", "prompt_length/max", "prompt_length/min", "prompt_length/clip_ratio",
    "timing_s/gen", "timing_s/reward", "timing_s/old_log_prob", "timing_s/adv", "timing_s/update_actor",
    "timing_s/update_weights", "timing_s/step", "timing_per_token_ms/gen", "timing_per_token_ms/adv",
    "timing_per_token_ms/update_actor", "perf/total_num_tokens", "perf/time_per_step", "perf/throughput",
]
CRITIC = ["critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "critic/grad_norm", "critic/lr",
          "critic/values/mean", "critic/values/max", "critic/values/min", "critic/vf_explained_var",
          "timing_s/values", "timing_s/update_critic", "timing_per_token_ms/values"]
REFERENCE = ["timing_s/ref", "timing_per_token_ms/ref"]


def test_ppo_run_logs_verl_metric_names() -> None:
    (_, metrics), = run(steps=1, base=SMALL_PPO)
    assert set(ALWAYS + CRITIC) <= set(metrics)
    assert not set(REFERENCE) & set(metrics)
    assert "actor/kl_loss" not in metrics  # only with the KL loss on (verl/workers/utils/losses.py:132-142)
    assert "actor/reward_kl_penalty" not in metrics and "actor/kl_coef" not in metrics


def test_grpo_with_kl_logs_reference_metrics_and_no_critic_ones() -> None:
    (_, metrics), = run("actor_rollout_ref.actor.use_kl_loss=true", "algorithm.use_kl_in_reward=true", steps=1)
    assert set(ALWAYS + REFERENCE + ["actor/kl_loss", "actor/kl_coef", "actor/reward_kl_penalty",
                                     "actor/reward_kl_penalty_coeff"]) <= set(metrics)
    assert not set(CRITIC) & set(metrics)


def test_timing_and_throughput_follow_verl_formulas() -> None:
    (_, m), = run(steps=1, base=[o for o in SMALL if "deterministic_timing" not in o])
    n_responses = 32 * 4
    response_tokens = m["response_length/mean"] * n_responses
    all_tokens = response_tokens + m["prompt_length/mean"] * n_responses
    assert m["perf/total_num_tokens"] == round(all_tokens)
    assert m["perf/time_per_step"] == m["timing_s/step"]
    assert m["perf/throughput"] == pytest.approx(all_tokens / (m["timing_s/step"] * 2), rel=1e-12)  # 2 GPUs
    assert m["timing_per_token_ms/gen"] == pytest.approx(m["timing_s/gen"] * 1000 / response_tokens, rel=1e-9)
    assert m["timing_per_token_ms/update_actor"] == pytest.approx(m["timing_s/update_actor"] * 1000 / all_tokens,
                                                                  rel=1e-9)
    inner = sum(m[f"timing_s/{k}"] for k in ("gen", "reward", "old_log_prob", "adv", "update_actor"))
    assert inner <= m["timing_s/step"]


def test_lr_warmup_is_stepped_once_per_training_step() -> None:
    history = run("actor_rollout_ref.actor.optim.lr_warmup_steps=4", "actor_rollout_ref.actor.optim.lr=2e-6",
                  steps=6)
    # get_constant_schedule_with_warmup: lr * step / 4 for the first 4 scheduler steps, then lr
    np.testing.assert_allclose(series(history, "actor/lr"), [0, 5e-7, 1e-6, 1.5e-6, 2e-6, 2e-6], rtol=1e-12)


def test_adaptive_reward_kl_coefficient_follows_the_controller() -> None:
    history = run("algorithm.use_kl_in_reward=true", "algorithm.kl_ctrl.type=adaptive",
                  "algorithm.kl_ctrl.kl_coef=0.05", "algorithm.kl_ctrl.horizon=1000",
                  "algorithm.kl_ctrl.target_kl=0.01",
                  "actor_rollout_ref.actor.optim.lr=1e-5", steps=5)
    beta, kl = series(history, "actor/reward_kl_penalty_coeff"), series(history, "actor/reward_kl_penalty")
    for t in range(len(beta) - 1):  # beta_{t+1} = beta_t (1 + clip(kl_t / target - 1, +-0.2) * 128 / 1000)
        expected = beta[t] * (1 + np.clip(kl[t] / 0.01 - 1, -0.2, 0.2) * 128 / 1000)
        assert beta[t + 1] == pytest.approx(expected, rel=1e-12)
    assert beta[0] == 0.05


# ----------------------------------------------------------------------------------------------------------------
# the dynamics are real


def test_higher_lr_gives_larger_ppo_kl_and_faster_entropy_change() -> None:
    slow = run("actor_rollout_ref.actor.optim.lr=1e-6", steps=8)
    fast = run("actor_rollout_ref.actor.optim.lr=1e-5", steps=8)
    assert np.mean(np.abs(series(fast, "actor/ppo_kl"))) > 3 * np.mean(np.abs(series(slow, "actor/ppo_kl")))
    assert series(fast, "actor/pg_clipfrac").mean() > series(slow, "actor/pg_clipfrac").mean()

    def entropy_drop(history: list[tuple[int, dict[str, Any]]]) -> float:
        entropy = series(history, "actor/entropy")
        return float(entropy[0] - entropy[-1])

    assert entropy_drop(fast) > 2 * entropy_drop(slow) > 0


def test_the_policy_learns() -> None:
    history = run("actor_rollout_ref.actor.optim.lr=1e-5", steps=15)
    score = series(history, "critic/score/mean")
    assert score[-3:].mean() > score[:3].mean() + 0.2


def test_grpo_with_n_1_has_no_baseline() -> None:
    # core_algos.compute_grpo_outcome_advantage: a group of one gets mean 0 and std 1, so advantage = score
    history = run("actor_rollout_ref.rollout.n=1", steps=3)
    for _, m in history:
        assert m["critic/advantages/min"] == 0.0  # wrong answers: no push down
        assert m["critic/advantages/max"] == pytest.approx(m["critic/score/max"] / (1 + 1e-6), rel=1e-12)
    control = run(steps=3)
    assert all(m["critic/advantages/min"] < 0 for _, m in control)


def test_identical_responses_in_a_group_give_zero_advantages() -> None:
    # greedy rollouts make all n responses of a prompt the same, so every group's score is constant
    history = run("actor_rollout_ref.rollout.do_sample=false", steps=2)
    for _, m in history:
        assert m["critic/advantages/max"] == 0.0 and m["critic/advantages/min"] == 0.0
        assert m["actor/pg_loss"] == 0.0
        assert 0 < m["critic/score/mean"] < 1  # there was reward to learn from, just no contrast


def test_too_short_max_response_length_truncates_and_zeroes_the_score() -> None:
    # "#### d<eos>" needs at least 3 tokens: with 2, every response is cut or ends without an answer
    short = run("data.max_response_length=2", steps=3)
    for _, m in short:
        assert m["response_length/clip_ratio"] > 0.9
        assert m["critic/score/max"] == 0.0
    control = run(steps=3)
    for _, m in control:
        assert m["response_length/clip_ratio"] < 0.1 and m["critic/score/max"] == 1.0


def test_reward_side_kl_puts_rewards_below_score() -> None:
    history = run("algorithm.use_kl_in_reward=true", "algorithm.kl_ctrl.kl_coef=0.5",
                  "actor_rollout_ref.actor.optim.lr=1e-5", steps=6)
    first = history[0][1]
    # step 1: the actor still is the reference, so KL is exactly 0 and rewards equal scores
    assert first["actor/reward_kl_penalty"] == 0.0
    assert first["critic/rewards/mean"] == first["critic/score/mean"]
    for _, m in history[2:]:
        assert m["actor/reward_kl_penalty"] > 0
        assert m["critic/rewards/mean"] < m["critic/score/mean"]
    for _, m in run("actor_rollout_ref.actor.optim.lr=1e-5", steps=6):
        assert m["critic/rewards/mean"] == m["critic/score/mean"]


def test_vf_explained_var_rises_as_the_critic_learns() -> None:
    # verl's default PPO sizes (1024 responses a step): the value head needs data
    default = ["trainer.logger=[]", "trainer.val_before_train=false", "+sandbox.deterministic_timing=true"]
    explained = series(run(steps=10, base=default), "critic/vf_explained_var")
    # step 1: the value head starts at 0, so 1 - Var(R - 0) / (Var(R) + 1e-5) is ~0
    assert abs(explained[0]) < 1e-3
    assert explained[-3:].mean() > 0.15
    frozen = series(run("critic.optim.lr=0", steps=10, base=default), "critic/vf_explained_var")
    assert np.all(np.abs(frozen) < 1e-3)


def test_micro_batch_size_does_not_change_training() -> None:
    runs = [run(f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}", steps=4) for micro in (1, 16)]
    for key in ("critic/score/mean", "actor/pg_loss", "actor/grad_norm", "actor/entropy", "response_length/mean"):
        np.testing.assert_allclose(series(runs[0], key), series(runs[1], key), rtol=1e-9, err_msg=key)


def test_entropy_is_the_pre_update_value_unless_requested() -> None:
    plain = run(steps=1)[0][1]["actor/entropy"]
    during_update = run("actor_rollout_ref.actor.calculate_entropy=true", steps=1)[0][1]["actor/entropy"]
    assert isinstance(plain, float) and isinstance(during_update, np.floating)  # trainer vs reduced worker value
    assert plain != during_update  # measured on the policy as it moves through 4 mini-batches


def test_critic_warmup_skips_the_actor_update() -> None:
    history = run("trainer.critic_warmup=2", steps=3, base=SMALL_PPO)
    assert ["actor/pg_loss" in m for _, m in history] == [False, True, True]  # updates while 2 <= step
    assert all("critic/vf_loss" in m for _, m in history)


# ----------------------------------------------------------------------------------------------------------------
# speed


def test_default_fifty_step_run_takes_under_ten_seconds() -> None:
    start = time.perf_counter()
    history = sb.run(["trainer.total_training_steps=50", "trainer.logger=[]"])
    elapsed = time.perf_counter() - start
    assert [step for step, _ in history][-1] == 50
    assert elapsed < 10.0
    assert math.isfinite(history[-1][1]["critic/score/mean"])


# ----------------------------------------------------------------------------------------------------------------
# the advisor reads what the sandbox writes


def test_the_advisors_metrics_reader_reads_sandbox_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from advisor.metrics import load_metrics

    jsonl = tmp_path / "run.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(jsonl))
    assert sb.main([*SMALL, "trainer.total_training_steps=3", "trainer.logger=[console,file]",
                    "trainer.val_before_train=true"]) == 0
    console = tmp_path / "run.log"
    console.write_text(capsys.readouterr().out)
    records = {r["step"]: r["data"] for r in map(json.loads, jsonl.read_text().splitlines())}
    for path in (jsonl, console):
        frame = load_metrics(path).data
        assert sorted(frame.index) == [0, 1, 2, 3], path.name
        assert float(frame.loc[2, "actor/pg_loss"]) == pytest.approx(records[2]["actor/pg_loss"], rel=1e-9)
        assert float(frame.loc[0, "val-core/sandbox/add/reward/mean@1"]) == pytest.approx(
            records[0]["val-core/sandbox/add/reward/mean@1"])
