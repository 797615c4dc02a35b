"""``advisor check --max``: the largest value of each phase's knob that keeps the phase ok."""

from __future__ import annotations

import subprocess
import sys

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
def test_largest_micro_batch_is_ok_and_one_more_is_not(stage):
    limits = _by_stage(largest_that_fits(cfg("actor_rollout_ref.rollout.n=8"), {"gpu": "H100"}))
    limit = limits[stage]
    assert limit.largest is not None and not limit.capped
    key = limit.key

    def risk(value: int) -> str:
        return estimate_memory(cfg("actor_rollout_ref.rollout.n=8", f"{key}={value}"), gpu="H100").stage(stage).risk

    assert risk(int(limit.largest)) == "ok"
    assert risk(int(limit.largest) + 1) != "ok"


def test_check_max_needs_a_gpu_and_prints_the_table():
    script = "tests/fixtures/verl_main/examples/ppo_trainer/run_qwen3_8b_fsdp.sh"
    bad = subprocess.run([sys.executable, "-m", "advisor", "check", script, "--max"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--max needs --gpu" in bad.stderr
    good = subprocess.run([sys.executable, "-m", "advisor", "check", script, "--gpu", "H100", "--max"],
                          capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    assert "Largest value that fits" in good.stdout and "gpu_memory_utilization" in good.stdout
