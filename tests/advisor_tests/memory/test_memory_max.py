"""``advisor check --max``: the largest value of each phase's knob that keeps the phase ok."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from memory_validation import GRPO_7B

from advisor import load_config
from advisor.memory import estimate_memory, largest_that_fits

GIB = 1024**3
H100_GIB = 81559 / 1024
BASE = list(GRPO_7B)


def cfg(*overrides: str):
    return load_config(None, verl_version="0.9.1", overrides=[*BASE, *overrides])


def _by_stage(limits):
    return {limit.stage: limit for limit in limits}


def test_largest_gpu_memory_utilization_is_the_last_with_a_full_margin_beside_the_pool():
    # Beside the pool: the fp32 actor shard and Adam (3 x 4 B x 7.62B / 8 = 10.64 GiB), CUDA graphs 1.0,
    # context 1.5, NCCL (688 + 544 MB) = 14.29 GiB; ok needs (1 - gmu) x 79.65 - 14.29 >= 1.0 GiB
    beside = 3 * 4 * 7_615_616_512 / 8 / GIB + 1.0 + 1.5 + (688 + 544) * 1e6 / GIB
    by_hand = max(g / 100 for g in range(5, 100) if (1 - g / 100) * H100_GIB - beside >= 1.0)
    limits = _by_stage(largest_that_fits(cfg(), {"gpu": "H100"}))
    assert limits["generate"].largest == pytest.approx(by_hand)
    assert limits["generate"].current == 0.5


@pytest.mark.parametrize("stage", ["old_log_prob", "actor_update"])
def test_largest_micro_batch_is_ok_at_max_length_and_the_next_divisor_is_not(stage):
    limits = _by_stage(largest_that_fits(cfg("actor_rollout_ref.rollout.n=8"), {"gpu": "H100"}))
    limit = limits[stage]
    assert limit.largest is not None and not limit.capped
    key = limit.key
    # data.train_batch_size 1024 (verl's default) x n 8 / 8 GPUs = 1024 responses per GPU; the update's mini batch
    # 256 x 8 / 8 = 256 per GPU: the micro batch divides the batch it splits
    per_gpu = 1024 if stage == "old_log_prob" else 256
    assert per_gpu % limit.largest == 0
    following = next(d for d in range(int(limit.largest) + 1, per_gpu + 1) if per_gpu % d == 0)
    max_len = 512 + 1024

    def risk(value: int) -> str:
        est = estimate_memory(cfg("actor_rollout_ref.rollout.n=8", f"{key}={value}"), gpu="H100",
                              sequence_tokens=max_len)
        return est.stage(stage).risk

    assert risk(int(limit.largest)) == "ok"
    assert risk(following) != "ok"
    # gsm8k's typical lengths (knowledge/memory.yaml) are far shorter: more fits there, and it is said beside
    assert limit.typical is not None and limit.typical > limit.largest and "gsm8k" in limit.typical_source


def test_check_max_needs_a_gpu_and_prints_the_table():
    script = "tests/fixtures/verl_main/examples/ppo_trainer/run_qwen3_8b_fsdp.sh"
    bad = subprocess.run([sys.executable, "-m", "advisor", "check", script, "--max"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--max needs --gpu" in bad.stderr
    good = subprocess.run([sys.executable, "-m", "advisor", "check", script, "--gpu", "H100", "--max"],
                          capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    assert "Largest value that fits" in good.stdout and "gpu_memory_utilization" in good.stdout


# verl example scripts whose every phase is ok as written on the card they are read with (--gpu H100-80GB)
FIVE = (
    "verl_scripts/examples/grpo_trainer/run_qwen3-8b.sh",
    "verl_main/examples/ppo_trainer/run_qwen3_8b_fsdp.sh",
    "verl_main/examples/rloo_trainer/run_qwen3_8b_fsdp.sh",
    "verl_main/examples/grpo_trainer/run_glm4_1v_9b_fsdp.sh",
    "verl_main/examples/grpo_trainer/run_mistral_nemo_12b_skyworkrm_fsdp.sh",
)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize("script", FIVE)
def test_check_max_values_applied_give_no_worst_case_memory_warning(script):
    from advisor.checks import check

    path = FIXTURES / script
    report = check(load_config(path), gpu="H100-80GB", largest=True)
    assert report.limits, "no --max answer"
    applied = [f"{limit.key}={limit.largest:g}" for limit in report.limits if limit.largest is not None]
    after = load_config(path, overrides=applied)
    max_len = int(after.get("data.max_prompt_length")) + int(after.get("data.max_response_length"))
    worst = check(after, gpu="H100-80GB", sequence_tokens=max_len)  # every sequence at its max length
    assert not [f for f in worst.findings if f.id in ("M001", "M002")], [f.message for f in worst.findings]
    assert not [f for f in worst.findings if f.severity == "error"], [f.message for f in worst.findings]


def test_check_max_on_qwen3_8b_answers_divisors_of_the_responses_per_gpu():
    # run_qwen3-8b.sh: 1024 prompts x n 5 on 8 GPUs = 640 responses per GPU, mini batch 256 x 5 / 8 = 160
    from advisor.checks import check

    report = check(load_config(FIXTURES / FIVE[0]), gpu="H100-80GB", largest=True)
    by_stage = _by_stage(report.limits)
    assert 640 % by_stage["old_log_prob"].largest == 0
    assert 160 % by_stage["actor_update"].largest == 0
    assert by_stage["old_log_prob"].typical > by_stage["old_log_prob"].largest  # gsm8k's short answers fit more


def test_a_phase_that_cannot_be_judged_says_why_instead_of_none_fits():
    from advisor.checks import check

    report = check(load_config(FIXTURES / "verl_main/examples/grpo_trainer/run_qwen3_4b_fsdp.sh"), gpu="H100-80GB",
                   largest=True)
    assert report.limits and all(limit.largest is None and limit.missing for limit in report.limits)
