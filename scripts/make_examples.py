"""Write the bundled `advisor suggest` examples: examples/<scenario>/{run.sh, metrics.jsonl[, rollout/]}.

Each example is a verl launch script and a synthetic run of a few hundred steps in verl's `file`
logger format (`{"step": N, "data": {...}}`, NaN as null), with the full metric set verl logs for that
mode (verl-internals §4.2). The curves are shaped after real verl runs: magnitudes and healthy
ranges from verl's docs (quickstart logs) and published verl runs; every scenario changes only the curves its
pathology changes. They are synthetic and say so (examples/README.md); the sandbox scenario suite
(bench/scenarios) checks the advisor against real dynamics.

    python scripts/make_examples.py            # rewrite every example (deterministic)
    python scripts/make_examples.py --check    # exit 1 if a committed example differs
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _generated import write_or_check

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "examples"


# --- launch scripts ---------------------------------------------------------------------------------------

SCRIPT = """#!/usr/bin/env bash
# {title}
# Synthetic example for `advisor suggest` (see examples/README.md). Written like verl's examples.
set -x

python3 -m verl.trainer.main_ppo \\
{args}    trainer.logger='["console","file"]' \\
    trainer.project_name=advisor_examples \\
    trainer.experiment_name={name} \\
    trainer.n_gpus_per_node=8 \\
    trainer.nnodes=1 \\
    trainer.test_freq=10 \\
    trainer.total_epochs=15 $@
"""

GRPO_ARGS = {
    "algorithm.adv_estimator": "grpo",
    "data.train_files": "$HOME/data/gsm8k/train.parquet",
    "data.val_files": "$HOME/data/gsm8k/test.parquet",
    "data.train_batch_size": 512,
    "data.max_prompt_length": 512,
    "data.max_response_length": 1024,
    "data.filter_overlong_prompts": "True",
    "actor_rollout_ref.model.path": "Qwen/Qwen2.5-7B-Instruct",
    "actor_rollout_ref.model.use_remove_padding": "True",
    "actor_rollout_ref.model.enable_gradient_checkpointing": "True",
    "actor_rollout_ref.actor.optim.lr": "1e-6",
    "actor_rollout_ref.actor.ppo_mini_batch_size": 128,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 16,
    "actor_rollout_ref.actor.use_kl_loss": "True",
    "actor_rollout_ref.actor.kl_loss_coef": 0.001,
    "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
    "actor_rollout_ref.actor.entropy_coeff": 0,
    "actor_rollout_ref.rollout.name": "vllm",
    "actor_rollout_ref.rollout.n": 5,
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 2,
    "actor_rollout_ref.rollout.gpu_memory_utilization": 0.6,
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 32,
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 32,
    "actor_rollout_ref.ref.fsdp_config.param_offload": "True",
    "algorithm.use_kl_in_reward": "False",
}
PPO_ARGS = {
    **{k: v for k, v in GRPO_ARGS.items() if not k.startswith(("actor_rollout_ref.actor.kl_loss",
                                                                "actor_rollout_ref.ref."))},
    "algorithm.adv_estimator": "gae",
    "actor_rollout_ref.actor.use_kl_loss": "False",
    "actor_rollout_ref.rollout.n": 1,
    "data.train_batch_size": 1024,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 16,
    "critic.optim.lr": "1e-5",
    "critic.model.path": "Qwen/Qwen2.5-7B-Instruct",
    "critic.model.use_remove_padding": "True",
    "critic.model.enable_gradient_checkpointing": "True",
    "critic.ppo_micro_batch_size_per_gpu": 32,
    "trainer.critic_warmup": 0,
}


def render_script(title: str, name: str, args: dict[str, object]) -> str:
    lines = "".join(f"    {k}={v} \\\n" for k, v in args.items())
    return SCRIPT.format(title=title, name=name, args=lines)


# --- curves -------------------------------------------------------------------------------------------------


def ramp(t: np.ndarray, start: float, end: float, rate: float = 4.0) -> np.ndarray:
    """A saturating curve from start toward end (most of the change early, like training curves)."""
    return end + (start - end) * np.exp(-rate * t)


def linear(t: np.ndarray, start: float, end: float) -> np.ndarray:
    return start + (end - start) * t


@dataclass
class Run:
    """The knobs of one synthetic run; scenarios override what their pathology changes."""

    steps: int = 300
    mode: str = "grpo"  # grpo | ppo
    n: int = 5
    prompts: int = 512
    max_prompt: int = 512
    max_response: int = 1024
    lr: float = 1e-6
    critic_lr: float = 1e-5
    kl: str = "loss"  # loss | reward
    seed: int = 0
    curves: dict[str, Callable[[np.ndarray], np.ndarray]] = field(default_factory=dict)


def baseline(run: Run, t: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Healthy curves for the run's mode (values from the seeds' healthy examples)."""
    steps = len(t)

    def noisy(x: np.ndarray, scale: float) -> np.ndarray:
        return x + rng.normal(0.0, scale, steps)

    c: dict[str, np.ndarray] = {}
    score = np.clip(noisy(ramp(t, 0.15, 0.78, 3.0), 0.02), 0.0, 1.0)  # seed 001 §3.1: 14.5% -> 78.2% on GSM8K
    c["critic/score/mean"] = score
    c["critic/score/max"] = np.ones(steps)
    c["critic/score/min"] = np.zeros(steps)
    c["response_length/mean"] = noisy(ramp(t, 240.0, 310.0, 2.0), 6.0)
    c["response_length/clip_ratio"] = np.clip(noisy(np.full(steps, 0.012), 0.004), 0.0, 1.0)
    c["actor/entropy"] = noisy(ramp(t, 0.80, 0.42, 2.5), 0.01)  # seed 001 §1.5 healthy: 0.8 -> 0.4
    c["actor/ppo_kl"] = np.abs(noisy(np.full(steps, 0.003), 0.0008))  # 0.001-0.01
    c["actor/pg_clipfrac"] = np.clip(noisy(np.full(steps, 0.12), 0.02), 0.0, 1.0)  # 0.05-0.30
    c["actor/grad_norm"] = np.abs(noisy(ramp(t, 1.5, 0.6, 5.0), 0.08))
    c["actor/kl_loss"] = np.abs(noisy(ramp(t, 0.0005, 0.012, 1.5), 0.0005))
    c["prompt_length/clip_ratio"] = np.zeros(steps)
    c["response/aborted_ratio"] = np.zeros(steps)
    c["timing_s/gen"] = noisy(np.full(steps, 38.0), 2.0)
    c["timing_s/update_actor"] = noisy(np.full(steps, 21.0), 1.0)
    if run.mode == "ppo":
        c["critic/vf_explained_var"] = np.clip(noisy(ramp(t, -0.2, 0.82, 4.0), 0.03), -1, 1)  # seed 001 §2.4
        c["critic/vf_loss"] = np.abs(noisy(ramp(t, 14.9, 0.8, 4.0), 0.1))  # seed 001 §2.1
        c["critic/vf_clipfrac"] = np.clip(noisy(np.full(steps, 0.08), 0.02), 0, 1)
        c["critic/grad_norm"] = np.abs(noisy(ramp(t, 900.0, 1.0, 8.0), 2.0))  # seed 001 §2.5
        c["actor/reward_kl_penalty"] = np.abs(noisy(ramp(t, 0.0, 0.02, 2.0), 0.001))
    return c


def derived(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Every other metric verl logs, consistent with the scenario's main curves."""
    steps = len(t)
    responses = run.prompts * run.n
    gpus = 8
    out = dict(c)
    rl = out["response_length/mean"]
    out.setdefault("response_length/max", np.minimum(run.max_response, rl * 3.2))
    out.setdefault("response_length/min", np.maximum(1.0, rl * 0.18))
    for k in ("mean", "max", "min", "clip_ratio"):
        out[f"response_length_non_aborted/{k}"] = out[f"response_length/{k}"]
    out["prompt_length/mean"] = np.full(steps, 118.0) + rng.normal(0, 1.5, steps)
    out["prompt_length/max"] = np.full(steps, 254.0)
    out["prompt_length/min"] = np.full(steps, 64.0)
    tokens_per_response = out["prompt_length/mean"] + rl
    total_tokens = responses * tokens_per_response
    out["global_seqlen/mean"] = total_tokens / gpus
    out["global_seqlen/min"] = out["global_seqlen/mean"] * 0.93
    out["global_seqlen/max"] = out["global_seqlen/mean"] * 1.08
    out["global_seqlen/minmax_diff"] = out["global_seqlen/max"] - out["global_seqlen/min"]
    out["global_seqlen/balanced_min"] = out["global_seqlen/mean"] * 0.999
    out["global_seqlen/balanced_max"] = out["global_seqlen/mean"] * 1.001
    # rewards: with KL in the reward they are score - beta * KL
    if run.kl == "reward":
        coeff = out.get("actor/reward_kl_penalty_coeff", np.full(steps, 0.001))
        out["actor/reward_kl_penalty_coeff"] = coeff
        penalty = coeff * out["actor/reward_kl_penalty"] * rl
        out.setdefault("critic/rewards/mean", out["critic/score/mean"] - penalty)
    else:
        out["critic/rewards/mean"] = out["critic/score/mean"]
        out["actor/kl_coef"] = np.full(steps, 0.001)
    out["critic/rewards/max"] = out["critic/score/max"]
    out["critic/rewards/min"] = out["critic/score/min"] - (0.2 if run.kl == "reward" else 0.0)
    if run.mode == "grpo":
        spread = out.get("_adv_spread", np.full(steps, 1.8))
        out["critic/advantages/mean"] = rng.normal(0.0, 0.01, steps)
        # no GRPO advantage exceeds (n-1)/sqrt(n) (Samuelson's inequality: verl divides by the group's unbiased
        # std, core_algos.py:321, 326 @1dda039b); a group with one response apart from the rest reaches it
        bound = (run.n - 1) / np.sqrt(run.n) * (1.0 - 1e-6)
        out["critic/advantages/max"] = np.minimum(spread * (1.0 + 0.05 * rng.standard_normal(steps)), bound)
        out["critic/advantages/min"] = np.maximum(-spread * (1.0 + 0.05 * rng.standard_normal(steps)), -bound)
        for k in ("mean", "max", "min"):
            out[f"critic/returns/{k}"] = out[f"critic/advantages/{k}"]
    else:
        out["critic/advantages/mean"] = rng.normal(0.0, 0.02, steps)
        out["critic/advantages/max"] = np.full(steps, 2.4) + rng.normal(0, 0.1, steps)
        out["critic/advantages/min"] = np.full(steps, -2.3) + rng.normal(0, 0.1, steps)
        ret = out["critic/rewards/mean"]
        out["critic/returns/mean"], out["critic/returns/max"], out["critic/returns/min"] = ret, ret + 0.9, ret - 0.5
        ev = out["critic/vf_explained_var"]
        values = ret * np.clip(ev, 0, 1) + (1 - np.clip(ev, 0, 1)) * -2.0
        out["critic/values/mean"] = values
        out["critic/values/max"], out["critic/values/min"] = values + 1.1, values - 1.4
        out["critic/vpred_mean"] = values
        out["critic/lr"] = np.full(steps, run.critic_lr)
        out["perf/mfu/critic"] = np.full(steps, 0.31) + rng.normal(0, 0.01, steps)
        out["timing_s/values"] = np.full(steps, 6.1) + rng.normal(0, 0.3, steps)
        out["timing_s/update_critic"] = np.full(steps, 17.0) + rng.normal(0, 0.8, steps)
    out["actor/pg_loss"] = -0.004 * np.exp(-2 * t) + rng.normal(0, 0.002, steps)  # seed 001 §1.1
    out["actor/pg_clipfrac_lower"] = np.clip(0.02 * out["actor/pg_clipfrac"], 0, 1)
    out["actor/lr"] = np.full(steps, run.lr)
    out["perf/mfu/actor"] = np.full(steps, 0.34) + rng.normal(0, 0.01, steps)
    out["perf/mfu/actor_infer"] = np.zeros(steps)
    out["perf/max_memory_allocated_gb"] = np.full(steps, 45.2)
    out["perf/max_memory_reserved_gb"] = np.full(steps, 48.0)
    out["perf/cpu_memory_used_gb"] = np.full(steps, 128.5) + rng.normal(0, 0.5, steps)
    out["timing_s/reward"] = np.full(steps, 0.4) + rng.normal(0, 0.02, steps)
    out["timing_s/old_log_prob"] = np.full(steps, 5.2) + rng.normal(0, 0.2, steps)
    out["timing_s/ref"] = np.full(steps, 4.4) + rng.normal(0, 0.2, steps)
    out["timing_s/adv"] = np.full(steps, 0.11) + rng.normal(0, 0.005, steps)
    out["timing_s/update_weights"] = np.full(steps, 3.2) + rng.normal(0, 0.1, steps)
    stages = ["gen", "reward", "old_log_prob", "ref", "adv", "update_actor", "update_weights"]
    if run.mode == "ppo":
        stages += ["values", "update_critic"]
    out["timing_s/step"] = sum(out[f"timing_s/{s}"] for s in stages)
    response_tokens = responses * rl
    out["timing_per_token_ms/gen"] = out["timing_s/gen"] * 1000 / response_tokens
    for s in ("ref", "adv", "update_actor") + (("values", "update_critic") if run.mode == "ppo" else ()):
        out[f"timing_per_token_ms/{s}"] = out[f"timing_s/{s}"] * 1000 / total_tokens
    per_sample = out["timing_s/gen"] / 4.0
    for stat, factor in (("min", 0.08), ("max", 0.97), ("mean", 0.4)):
        out[f"timing_s/agent_loop/generate_sequences/{stat}"] = per_sample * factor
        out[f"timing_s/agent_loop/tool_calls/{stat}"] = np.zeros(steps)
        out.setdefault(f"timing_s/agent_loop/num_preempted/{stat}", np.zeros(steps))
    out["timing_s/agent_loop/slowest/generate_sequences"] = per_sample * 0.97
    out["timing_s/agent_loop/slowest/tool_calls"] = np.zeros(steps)
    out["timing_s/agent_loop/slowest/prompt_length"] = np.full(steps, 180.0)
    out["timing_s/agent_loop/slowest/response_length"] = out["response_length/max"]
    out["timing_s/agent_loop/slowest/num_preempted"] = out["timing_s/agent_loop/num_preempted/max"]
    out["perf/total_num_tokens"] = total_tokens
    out["perf/time_per_step"] = out["timing_s/step"]
    out["perf/throughput"] = total_tokens / (out["timing_s/step"] * gpus)
    out["training/global_step"] = np.arange(1, steps + 1, dtype=float)
    out["training/epoch"] = np.floor(np.arange(steps) * run.prompts / 7473.0)  # GSM8K train set: 7473 prompts
    return {k: v for k, v in out.items() if not k.startswith("_")}


INT_METRICS = ("global_seqlen/", "perf/total_num_tokens", "training/", "prompt_length/max", "prompt_length/min",
               "response_length/max", "response_length/min", "response_length_non_aborted/max",
               "response_length_non_aborted/min", "timing_s/agent_loop/slowest/prompt_length",
               "timing_s/agent_loop/slowest/response_length")
ORDER = ["global_seqlen/", "actor/entropy", "perf/mfu/actor_infer", "actor/reward_kl_penalty", "critic/vf",
         "critic/vpred", "critic/grad", "critic/lr", "perf/mfu/critic", "actor/", "perf/mfu/actor", "perf/max",
         "perf/cpu", "training/", "critic/", "response_length", "response/", "prompt_length", "timing_s", "timing_per",
         "perf/"]


def _order(name: str) -> tuple[int, str]:
    return next((i for i, p in enumerate(ORDER) if name.startswith(p)), len(ORDER)), name


def write_jsonl(run: Run, metrics: dict[str, np.ndarray], val: np.ndarray) -> str:
    """verl's file logger: one compact JSON object per step; NaN and inf as null (orjson)."""
    names = sorted(metrics, key=_order)
    lines = []

    def num(name: str, value: float) -> float | int | None:
        if not math.isfinite(value):
            return None
        if name.startswith(INT_METRICS):
            return round(value)
        return float(f"{value:.6g}")

    lines.append(json.dumps({"step": 0, "data": {"val-core/openai/gsm8k/reward/mean@1": num("v", val[0])}},
                            separators=(",", ":")))
    for i in range(run.steps):
        data = {name: num(name, float(metrics[name][i])) for name in names}
        step = i + 1
        if step % 10 == 0 or step == run.steps:
            data["val-core/openai/gsm8k/reward/mean@1"] = num("v", float(val[min(step, len(val) - 1)]))
            data["val-aux/num_turns/min"] = data["val-aux/num_turns/max"] = data["val-aux/num_turns/mean"] = 2
        lines.append(json.dumps({"step": step, "data": data}, separators=(",", ":")))
    return "\n".join(lines) + "\n"


# --- scenarios ------------------------------------------------------------------------------------------


@dataclass
class Scenario:
    name: str
    title: str
    run: Run
    args: dict[str, object]
    shape: Callable[[Run, dict[str, np.ndarray], np.ndarray, np.random.Generator], None]
    expect: str  # the rule the example is about (checked by tests/advisor_tests/playbook/test_suggest.py)
    rollout_dump: Callable[[Run], str] | None = None  # trainer.rollout_data_dir/<last step>.jsonl, if any


def _healthy(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    return None


def _reward_all_zero(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    # the scorer never finds an answer: every score 0, every GRPO group flat
    for k in ("mean", "max", "min"):
        c[f"critic/score/{k}"] = np.zeros(len(t))
    c["_adv_spread"] = np.zeros(len(t))
    c["actor/pg_clipfrac"] = np.zeros(len(t))
    c["actor/entropy"] = 0.8 + rng.normal(0, 0.01, len(t))


# Word problems of our own in GSM8K's style; the prompt asks for GSM8K's "#### <number>" line, which verl's
# gsm8k scorer requires (verl/utils/reward_score/gsm8k.py, strict format).
_PROBLEMS = (
    ("A baker fills 6 trays with 14 rolls each and sells all but 9. How many rolls does he sell?", 75,
     "6 trays of 14 rolls is 6*14 = 84 rolls. He keeps 9, so he sells 84-9 = 75 rolls."),
    ("Mia reads 23 pages a day for 5 days, then 40 pages on the sixth day. How many pages does she read?", 155,
     "In 5 days she reads 23*5 = 115 pages. Adding the sixth day gives 115+40 = 155 pages."),
    ("A bus carries 38 people. At the first stop 11 get off and 7 get on. How many are on the bus now?", 34,
     "After 11 get off there are 38-11 = 27 people. Then 7 get on, so 27+7 = 34 people."),
    ("Tom buys 3 notebooks at $4 each and a pen for $2. He pays with $20. How much change does he get?", 6,
     "The notebooks cost 3*4 = 12 dollars, plus 2 for the pen is 14. The change is 20-14 = 6 dollars."),
)
_INSTRUCTION = ' Let\'s think step by step and output the final answer after "####".'


def _rollout_without_marker(run: Run) -> str:
    """The dump of the last step: right answers, written as prose without the '####' line, all scored 0."""
    lines = []
    for question, answer, reasoning in _PROBLEMS:
        for k in range(run.n):
            ending = ("The answer is {a}.", "So the answer is {a}.", "Therefore, {a}.")[k % 3].format(a=answer)
            lines.append(json.dumps({"input": question + _INSTRUCTION, "output": f"{reasoning}\n{ending}",
                                     "gts": str(answer), "score": 0.0, "step": run.steps}))
    return "\n".join(lines) + "\n"


def _truncation(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    # max_response_length 256 for chain-of-thought answers: most responses end at the limit (seed 001 §4.1)
    c["response_length/mean"] = np.minimum(255.0, 238 + 16 * t + rng.normal(0, 1.0, len(t)))
    c["response_length/max"] = np.full(len(t), 256.0)
    c["response_length/clip_ratio"] = np.clip(0.62 + 0.2 * t + rng.normal(0, 0.03, len(t)), 0, 1)
    c["critic/score/mean"] = np.clip(0.08 + 0.05 * t + rng.normal(0, 0.015, len(t)), 0, 1)


def _kl_spike_loss(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    # lr 1e-5 (x10): the policy drifts from the reference; kl_loss climbs, then the score falls
    n = len(t)
    # the mean over the step's 4 optimizer steps, as verl >= 0.8 logs it (0.7 logged their sum)
    c["actor/kl_loss"] = np.abs(0.008 + 1.2 * t ** 1.5 + rng.normal(0, 0.01, n)) / 4
    c["actor/ppo_kl"] = np.abs(0.004 + 0.02 * t + rng.normal(0, 0.001, n))
    c["actor/pg_clipfrac"] = np.clip(0.15 + 0.12 * t + rng.normal(0, 0.02, n), 0, 1)
    c["critic/score/mean"] = np.clip(0.15 + 0.45 * np.sin(np.pi * t * 0.7) + rng.normal(0, 0.02, n), 0, 1)


def _kl_spike_reward(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    # PPO with KL in the reward: the KL the reward pays for keeps climbing, each step moves the policy far,
    # and the score turns down in the last third
    n = len(t)
    c["actor/reward_kl_penalty"] = np.abs(0.004 + 0.25 * t ** 1.3 + rng.normal(0, 0.003, n))
    c["actor/reward_kl_penalty_coeff"] = np.full(n, 0.001)
    c["actor/ppo_kl"] = np.abs(0.004 + 0.03 * t + rng.normal(0, 0.001, n))
    c["critic/score/mean"] = np.clip(np.where(t < 0.66, ramp(t, 0.15, 0.6, 3.0), 0.6 - 0.6 * (t - 0.66))
                                     + rng.normal(0, 0.015, n), 0, 1)


def _entropy_collapse(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    # seed 001 §1.5 scenario 2: entropy 0.6 -> 0.05 within a few dozen steps; score stalls (§11.2 problem 2)
    n = len(t)
    c["actor/entropy"] = np.abs(0.02 + 0.58 * np.exp(-18 * t) + rng.normal(0, 0.002, n))
    c["critic/score/mean"] = np.clip(0.15 + 0.25 * (1 - np.exp(-30 * t)) + rng.normal(0, 0.01, n), 0, 1)
    c["actor/ppo_kl"] = np.abs(0.0002 + rng.normal(0, 0.00005, n))
    c["_adv_spread"] = np.full(n, 0.9)


def _grpo_flat(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    # rollout temperature 0.3: five near-identical answers per prompt, groups flat, advantages ~0
    n = len(t)
    c["_adv_spread"] = np.abs(0.02 + rng.normal(0, 0.005, n))
    c["actor/entropy"] = np.abs(0.12 + rng.normal(0, 0.005, n))
    c["critic/score/mean"] = np.clip(0.42 + rng.normal(0, 0.01, n), 0, 1)
    c["actor/pg_clipfrac"] = np.abs(0.002 + rng.normal(0, 0.0005, n))


def _critic_not_learning(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    # seed 001 §11.4 example 3: critic lr far too small; explained variance stays negative
    n = len(t)
    c["critic/vf_explained_var"] = -0.25 + 0.1 * t + rng.normal(0, 0.02, n)
    c["critic/vf_loss"] = np.abs(48.0 - 5 * t + rng.normal(0, 1.0, n))
    c["critic/score/mean"] = np.clip(0.2 + 0.08 * t + rng.normal(0, 0.015, n), 0, 1)


def _generation_bound(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    # rollout TP 8 on 8 GPUs: one replica generates 2,560 responses; gen is ~80% of each step, and the one
    # engine's KV cache (gpu_memory_utilization 0.6) runs out: vLLM preempts sequences every step
    n = len(t)
    c["timing_s/gen"] = 165.0 + rng.normal(0, 6.0, n)
    c["timing_s/agent_loop/num_preempted/max"] = np.round(6.0 + rng.uniform(0, 4, n))
    c["timing_s/agent_loop/num_preempted/mean"] = c["timing_s/agent_loop/num_preempted/max"] / 40.0
    c["timing_s/agent_loop/num_preempted/min"] = np.zeros(n)


def _generation_heavy(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    # long chain-of-thought answers (max_response_length 4096): generation is ~75% of each step, as in most
    # RL post-training; no preemption, nothing waits: where the time goes, not a fault
    n = len(t)
    c["response_length/mean"] = ramp(t, 900.0, 1300.0, 2.0) + rng.normal(0, 20.0, n)
    c["timing_s/gen"] = 150.0 + 40.0 * t + rng.normal(0, 5.0, n)


def _no_kl_collapse(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    # GRPO with no KL anywhere at lr 3e-6: the score climbs to ~0.65 by mid-run, then the policy drifts away
    # and collapses (entropy falls with it); nothing pulls it back toward the reference
    n = len(t)
    c["critic/score/mean"] = np.clip(np.interp(t, [0, 0.45, 1.0], [0.15, 0.66, 0.22]) + rng.normal(0, 0.015, n),
                                     0, 1)
    c["actor/entropy"] = np.abs(np.interp(t, [0, 0.45, 1.0], [0.8, 0.45, 0.12]) + rng.normal(0, 0.01, n))
    c.pop("actor/kl_loss")  # verl logs no kl_loss without use_kl_loss


def _lr_too_high(run: Run, c: dict[str, np.ndarray], t: np.ndarray, rng: np.random.Generator) -> None:
    # seed 001 §11.4 example 2: clipfrac 0.85, ppo_kl 0.125, grad_norm pinned at the clip, score flat
    n = len(t)
    c["actor/pg_clipfrac"] = np.clip(0.8 + rng.normal(0, 0.03, n), 0, 1)
    c["actor/ppo_kl"] = np.abs(0.12 + rng.normal(0, 0.01, n))
    c["actor/grad_norm"] = np.full(n, 1.0) + np.abs(rng.normal(0, 0.3, n))
    c["critic/score/mean"] = np.clip(0.05 + rng.normal(0, 0.01, n), 0, 1)


def scenarios() -> list[Scenario]:
    grpo = dict(GRPO_ARGS)
    ppo_reward_kl = {**PPO_ARGS, "algorithm.use_kl_in_reward": "True", "algorithm.kl_ctrl.kl_coef": 0.001,
                     "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 32}
    no_kl = {**{k: v for k, v in grpo.items() if not k.startswith(("actor_rollout_ref.actor.kl_loss",
                                                                    "actor_rollout_ref.ref."))},
             "actor_rollout_ref.actor.use_kl_loss": "False", "actor_rollout_ref.actor.optim.lr": "3e-6"}
    return [
        Scenario("healthy_grpo", "GRPO on GSM8K, Qwen2.5-7B, 8 GPUs: a healthy run", Run(), grpo, _healthy, ""),
        Scenario("reward_all_zero", "GRPO whose reward function never finds an answer", Run(),
                 {**grpo, "trainer.rollout_data_dir": "./rollout"}, _reward_all_zero, "RW001",
                 rollout_dump=_rollout_without_marker),
        Scenario("truncation", "GRPO with max_response_length 256 for chain-of-thought answers",
                 Run(max_response=256), {**grpo, "data.max_response_length": 256}, _truncation, "RL001"),
        Scenario("kl_spike_loss", "GRPO with loss-side KL whose KL keeps climbing (lr 1e-5)",
                 Run(lr=1e-5), {**grpo, "actor_rollout_ref.actor.optim.lr": "1e-5"}, _kl_spike_loss, "KL001"),
        Scenario("kl_spike_reward", "PPO with reward-side KL whose KL keeps climbing",
                 Run(mode="ppo", n=1, prompts=1024, kl="reward"), ppo_reward_kl, _kl_spike_reward, "KL002"),
        Scenario("entropy_collapse", "GRPO whose policy entropy collapses early", Run(), grpo, _entropy_collapse,
                 "EN001"),
        Scenario("grpo_flat_groups", "GRPO sampling at temperature 0.3: groups are flat",
                 Run(), {**grpo, "actor_rollout_ref.rollout.temperature": 0.3}, _grpo_flat, "AD001"),
        Scenario("ppo_critic_not_learning", "PPO whose critic learns too slowly (critic lr 1e-7)",
                 Run(mode="ppo", n=1, prompts=1024, critic_lr=1e-7, kl="loss"),
                 {**PPO_ARGS, "critic.optim.lr": "1e-7"}, _critic_not_learning, "CR002"),
        Scenario("generation_bound", "GRPO with rollout TP 8: generation dominates every step",
                 Run(), {**grpo, "actor_rollout_ref.rollout.tensor_model_parallel_size": 8}, _generation_bound,
                 "TP001"),
        Scenario("healthy_ppo", "PPO with a critic on GSM8K, Qwen2.5-7B, 8 GPUs: a healthy run",
                 Run(mode="ppo", n=1, prompts=1024), dict(PPO_ARGS), _healthy, ""),
        Scenario("healthy_generation_heavy", "GRPO with 4k-token answers: generation is ~75% of each step, "
                 "healthy", Run(max_response=4096), {**grpo, "data.max_response_length": 4096},
                 _generation_heavy, ""),
        Scenario("no_kl_collapse", "GRPO with no KL anywhere: the score climbs, then collapses",
                 Run(lr=3e-6), no_kl, _no_kl_collapse, "KL007"),
        Scenario("lr_too_high", "GRPO with lr 1e-4: every update is clipped",
                 Run(lr=1e-4), {**grpo, "actor_rollout_ref.actor.optim.lr": "1e-4"}, _lr_too_high, "CF001"),
    ]


def build(s: Scenario) -> dict[Path, str]:
    run = s.run
    rng = np.random.default_rng(sum(map(ord, s.name)))  # a fixed seed per scenario
    t = np.linspace(0.0, 1.0, run.steps)
    curves = baseline(run, t, rng)
    s.shape(run, curves, t, rng)
    metrics = derived(run, curves, t, rng)
    if str(s.args.get("actor_rollout_ref.actor.use_kl_loss")) == "False":
        # verl logs kl_loss and kl_coef only with the KL loss on (verl/workers/utils/losses.py:132-143, main 1dda039b)
        for name in ("actor/kl_loss", "actor/kl_coef"):
            metrics.pop(name, None)
    val = np.clip(np.concatenate([[curves["critic/score/mean"][0] * 0.9], curves["critic/score/mean"] * 0.95]), 0, 1)
    folder = OUT / s.name
    files = {folder / "run.sh": render_script(s.title, s.name, s.args),
             folder / "metrics.jsonl": write_jsonl(run, metrics, val)}
    if s.rollout_dump is not None:
        files[folder / "rollout" / f"{run.steps}.jsonl"] = s.rollout_dump(run)
    return files


INDEX = """# Examples

Ready config + metrics pairs for `advisor suggest`, one per debug tree, written by
`scripts/make_examples.py` (do not edit by hand; `python scripts/make_examples.py --check` tells whether
they are current).

The metrics are **synthetic**: each run is {steps} steps of verl's `file` logger JSONL with the full metric set
verl logs for its mode, shaped after verl's docs and published verl runs; a scenario changes only the
curves its pathology changes. The sandbox scenario suite (`bench/scenarios/`) checks the advisor against
real training dynamics instead.

| example | what is wrong | diagnosis |
|---|---|---|
{rows}

Run one:

```bash
advisor suggest examples/lr_too_high/run.sh examples/lr_too_high/metrics.jsonl
advisor suggest examples/reward_all_zero/run.sh examples/reward_all_zero/metrics.jsonl \\
    --samples examples/reward_all_zero/rollout
```

`check/` holds inputs for `advisor check`: a real launch script (`grpo_qwen2.5-7b_gsm8k.sh`) and a partial
YAML with typical mistakes (`ppo_broken.yaml`).

`published_log/` holds a console log of a run verl's authors published (`docs/algo/baseline.md:21`, source in its
`SOURCE.md`): `advisor suggest examples/published_log/gemma-2-2b-it-ppo.log` reads the config from the log itself
and answers "no change".
"""


def index(all_scenarios: list[Scenario]) -> str:
    rows = "\n".join(f"| [`{s.name}/`]({s.name}/) | {s.title} | {s.expect or 'no change'} |" for s in all_scenarios)
    return INDEX.format(steps=Run().steps, rows=rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    files: dict[Path, str] = {OUT / "README.md": index(scenarios())}
    for s in scenarios():
        files.update(build(s))
    return write_or_check(files, REPO, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
