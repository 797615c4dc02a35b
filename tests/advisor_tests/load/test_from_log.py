"""A run's log alone is enough: the config verl printed, a `set -x` trace, or the command pasted at the top.

The logs here are written in the three shapes verl's console output takes (verl/trainer/main_ppo.py prints
``pprint(OmegaConf.to_container(config, resolve=True))`` in a Ray actor, so every line carries its
``(main_task pid=N)`` prefix, colours, and other workers' output in between); the step lines come from the bundled
healthy_ppo example. Expected values are the ones written into each log here.
"""

from __future__ import annotations

import json
import pprint
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor import load_config
from advisor.cli import app
from advisor.load import find_printed_config, load_config_from_log

REPO = Path(__file__).resolve().parents[3]
HEALTHY = REPO / "examples" / "healthy_ppo"
PREFIX = "\x1b[2m\x1b[36m(main_task pid=64899)\x1b[0m "
TREE = {
    "actor_rollout_ref": {"actor": {"optim": {"lr": 3e-06}, "ppo_mini_batch_size": 64, "strategy": "fsdp",
                                    "use_kl_loss": False},
                          "model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"}, "rollout": {"n": 1, "name": "vllm"}},
    "algorithm": {"adv_estimator": "gae", "gamma": 1.0},
    "critic": {"optim": {"lr": 2e-05}, "model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"}},
    "data": {"train_batch_size": 256, "max_response_length": 512, "max_prompt_length": 512},
    "trainer": {"n_gpus_per_node": 1, "nnodes": 1, "total_epochs": 15},
}


def _steps() -> list[str]:
    rows = [json.loads(line) for line in (HEALTHY / "metrics.jsonl").read_text().splitlines()]
    return [f"{PREFIX}step:{r['step']} - " + " - ".join(f"{k}:{v:.3f}" for k, v in r["data"].items()
                                                          if v is not None) for r in rows]


def _printed_log(tmp_path: Path) -> Path:
    printed = pprint.pformat(TREE).splitlines()
    lines = ["2024-12-10 06:50:29,276\tINFO worker.py:1752 -- Started a local Ray instance."]
    for i, line in enumerate(printed):
        lines.append(PREFIX + line)
        if i == 3:  # another worker's output in between, and one glued onto a line
            lines.append("\x1b[36m(WorkerDict pid=65860)\x1b[0m Flash Attention 2.0 only supports torch.float16")
    lines[-2] += "\x1b[36m(pid=934604)\x1b[0m "
    log = tmp_path / "run.log"
    log.write_text("\n".join([*lines, *_steps()]) + "\n")
    return log


def test_the_printed_config_is_read_safely_and_wins(tmp_path: Path) -> None:
    log = _printed_log(tmp_path)
    cfg = load_config_from_log(log)
    assert cfg.from_log.source == "printed" and cfg.from_log.line == 2
    assert cfg.get("actor_rollout_ref.actor.optim.lr") == 3e-06
    assert cfg.get("critic.optim.lr") == 2e-05
    assert cfg.get("data.train_batch_size") == 256
    assert load_config(log).get("actor_rollout_ref.actor.optim.lr") == 3e-06  # load_config routes a log here


def test_only_literals_are_read_never_code(tmp_path: Path) -> None:
    log = tmp_path / "evil.log"
    log.write_text(PREFIX + "{'actor_rollout_ref': __import__('os').system('touch " + str(tmp_path / "x") + "')}\n")
    assert find_printed_config([line for line in log.read_text().splitlines()]) is None
    assert not (tmp_path / "x").exists()


def test_a_set_x_trace_and_its_variables(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    log.write_text("commit:\nd60f843\n\n++ lr=2e-6\n"
                   "+ python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=128 "
                   "actor_rollout_ref.actor.optim.lr=2e-6 'data.train_files=['\\''a.parquet'\\'']' "
                   "actor_rollout_ref.rollout.n=5\n" + "\n".join(_steps()))
    cfg = load_config_from_log(log)
    assert cfg.from_log.source == "trace" and cfg.from_log.line == 5
    assert cfg.get("algorithm.adv_estimator") == "grpo" and cfg.get("actor_rollout_ref.rollout.n") == 5
    assert cfg.get("actor_rollout_ref.actor.optim.lr") == 2e-6
    assert cfg.get("data.train_files") == ["a.parquet"]  # bash's quoting in the trace, read as bash reads it


def test_a_pasted_command_with_the_variables_above_it(tmp_path: Path) -> None:
    log = tmp_path / "pasted.log"
    log.write_text("```\nMODEL_PATH=deepseek-ai/deepseek-llm-7b-chat\nTP_VALUE=2\n\n"
                   "python3 -m verl.trainer.main_ppo \\\n"
                   "    data.train_batch_size=1024 \\\n    actor_rollout_ref.model.path=$MODEL_PATH \\\n"
                   "    actor_rollout_ref.rollout.tensor_model_parallel_size=$TP_VALUE \\\n"
                   "    trainer.n_gpus_per_node=8\n```\n" + "\n".join(_steps()))
    cfg = load_config_from_log(log)
    assert cfg.from_log.source == "command" and cfg.from_log.line == 5
    assert cfg.get("actor_rollout_ref.rollout.tensor_model_parallel_size") == 2
    assert cfg.get("actor_rollout_ref.model.path") == "deepseek-ai/deepseek-llm-7b-chat"
    assert not [f for f in cfg.findings if f.id == "L008"]  # every variable resolved from the log


@pytest.mark.parametrize("command", ["suggest", "check"])
def test_the_cli_reads_a_log_alone_and_says_where_the_config_came_from(tmp_path: Path, command: str) -> None:
    log = _printed_log(tmp_path)
    result = CliRunner().invoke(app, [command, str(log), "--width", "200"])
    assert result.exit_code in (0, 1), result.output
    assert "config: the config verl printed at start-up (line 2)" in result.output


def test_a_log_without_a_config_asks_for_one(tmp_path: Path) -> None:
    log = tmp_path / "bare.log"
    log.write_text("\n".join(_steps()) + "\n")
    result = CliRunner().invoke(app, ["suggest", str(log)])
    assert result.exit_code == 2
    assert "holds no config" in result.output and "advisor suggest CONFIG METRICS" in result.output


@pytest.mark.parametrize("command", ["suggest", "check", "report"])
def test_a_gzipped_log_is_named_as_such_in_one_line(tmp_path: Path, command: str) -> None:
    # published logs are often kept gzipped: the answer says what the file is and what to do, exit 2
    import gzip

    log = tmp_path / "train.log.gz"
    log.write_bytes(gzip.compress(b"step:1 - critic/score/mean:0.5\n"))
    result = CliRunner().invoke(app, [command, str(log)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(log) in lines[0] and "gzip-compressed" in lines[0] and "gunzip" in lines[0]
