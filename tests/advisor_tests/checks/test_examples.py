"""verl's own launch scripts: every one is read and checked (exit 0 or 1, never 2).

The few that exit 1 are broken or outdated as written; each is named here with the reason, which
the test checks against the findings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor import load_config
from advisor.checks._report import check
from advisor.errors import ConfigError

SCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "verl_scripts"
ALL = sorted(SCRIPTS.rglob("*.sh"))

# script -> (finding ids that must be among the errors, why the script is broken at verl main)
BROKEN = {
    "run_deepseek7b_llm_pfppo.sh": ({"L011"}, "'\\  # [...]' after a continuation ends the command early"),
    "run_deepseek671b_math_megatron_80gb.sh": ({"L011"}, "template placeholder <path_to_dsv3_config>"),
    "test_dapo_dspk_671b_megatron_96gb.sh": ({"L011"}, "template placeholders <path_to_...>"),
    "run_qwen3_4b_grpo_vllm_1k_npu.sh": ({"L011"}, "stray '}' in trainer.experiment_name"),
    # read as verl 0.8.0 (the release after this January copy of main); its keys fit verl 0.5.0 only, which
    # is what detection reads it as
    "run_gptoss_20b.sh": ({"L006", "L001"}, "'+' on existing fsdp_config.model_dtype; engine_kwargs key without '+'",
                          "0.8.0"),
    "test_dapo_8b_megatron_fp8train.sh": ({"L004"}, "rollout mode 'sync' was removed in verl 0.7.0"),
    # LoRA tuning scripts (docs/perf/device_tuning.rst, 06/2025): B x n is not a multiple of the 8 agent-loop
    # workers the async rollout (default since v0.7.0) splits the batch over, on the legacy trainer (read as
    # 0.8.0); verl 0.9's V1 trainer splits unevenly (0.9.1 verl/trainer/ppo/v1/agent_loop_tq.py:251-256)
    "qwen2-0.5b_grpo-lora_1_h100_fsdp_vllm.sh": ({"B008"}, "1 prompt x n=1 over 8 agent workers", "0.8.0"),
    "qwen2-3b_grpo-lora_1_h100_fsdp_vllm.sh": ({"B008"}, "62 x 5 = 310 responses over 8 agent workers", "0.8.0"),
    "qwen2-14b_grpo-lora_2_h100_fsdp_vllm.sh": ({"B008"}, "116 x 5 = 580 responses over 8 agent workers", "0.8.0"),
    "qwen2-32b_grpo-lora_4_h100_fsdp_vllm.sh": ({"B008"}, "180 x 5 = 900 responses over 8 agent workers", "0.8.0"),
}
NOT_LAUNCH_SCRIPTS = {"prepare_dapo_data.sh"}  # downloads data; runs no verl command


def test_fixtures_are_all_there() -> None:
    assert len(ALL) == 111


@pytest.mark.parametrize("script", ALL, ids=lambda p: p.name)
def test_every_example_is_read_and_checked(script: Path) -> None:
    if script.name in NOT_LAUNCH_SCRIPTS:
        with pytest.raises(ConfigError, match="no verl command found"):
            load_config(script)
        return
    expected, why, version = (*BROKEN[script.name], None)[:3] if script.name in BROKEN else (set(), "", None)
    report = check(load_config(script, verl_version=version))
    error_ids = {f.id for f in report.errors}
    if script.name in BROKEN:
        assert expected <= error_ids, why
    else:
        assert not error_ids, [f.message for f in report.errors]
        assert report.exit_code == 0
