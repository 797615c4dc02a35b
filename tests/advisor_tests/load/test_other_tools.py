"""Other tools' configs given to `check` (TRL, DeepSpeed, Accelerate, OpenRLHF): one line naming the tool, exit 2,
the file untouched (knowledge/other_tools.yaml, each tool's keys with their source)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor import load_config
from advisor.cli import app

# TRL's GRPO quick start config keys (https://huggingface.co/docs/trl/grpo_trainer: GRPOConfig / TrainingArguments)
TRL_YAML = """\
model_name_or_path: Qwen/Qwen2-0.5B-Instruct
dataset_name: trl-lib/tldr
output_dir: Qwen2-0.5B-GRPO
learning_rate: 1.0e-6
per_device_train_batch_size: 4
num_generations: 8
use_vllm: true
"""
# https://www.deepspeed.ai/docs/config-json/
DEEPSPEED = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
             "zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}
# what `accelerate config` writes (https://huggingface.co/docs/accelerate/package_reference/cli)
ACCELERATE = ("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmixed_precision: bf16\n"
              "num_processes: 8\n")
# OpenRLHF/OpenRLHF examples/scripts/train_ppo_llama_ray.sh, shortened
OPENRLHF = ("set -x\nray job submit --address=http://127.0.0.1:8265 -- python3 -m openrlhf.cli.train_ppo_ray \\\n"
            "   --pretrain OpenRLHF/Llama-3-8b-sft-mixture --reward_pretrain OpenRLHF/Llama-3-8b-rm-mixture\n")


@pytest.mark.parametrize(("name", "text", "tool"), [
    ("grpo.yaml", TRL_YAML, "TRL"),
    ("ds_config.json", json.dumps(DEEPSPEED), "DeepSpeed"),
    ("default_config.yaml", ACCELERATE, "Accelerate"),
    ("train_ppo.sh", OPENRLHF, "OpenRLHF"),
])
def test_another_tools_config_gets_one_line_and_exit_2(tmp_path: Path, name: str, text: str, tool: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    result = CliRunner().invoke(app, ["check", str(path), "--write"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and tool in lines[0] and str(path) in lines[0] and "verl" in lines[0], result.stderr
    assert "Traceback" not in result.output and result.stdout == ""
    assert path.read_text() == text and not (tmp_path / (name + ".bak")).exists()


def test_a_verl_config_with_a_key_another_tool_uses_is_still_verl(tmp_path: Path) -> None:
    # verl's own sections decide: a verl YAML is never taken for another tool's
    path = tmp_path / "ppo.yaml"
    path.write_text("data:\n  train_batch_size: 256\ntrainer:\n  n_gpus_per_node: 8\noutput_dir: x\nlearning_rate: 1\n")
    cfg = load_config(path, verl_version="0.9.1")
    assert cfg.get("data.train_batch_size") == 256
