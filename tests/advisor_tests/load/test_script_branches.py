"""Launch scripts read as bash runs them: defaults, and branches on a variable the user passes (--set-var)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from click.testing import CliRunner

from advisor import load_config
from advisor.checks import check
from advisor.cli import app
from advisor.load._script import parse_launch_script

MAIN = Path(__file__).resolve().parents[2] / "fixtures" / "verl_main" / "examples"
QWEN3_8B = MAIN / "grpo_trainer" / "run_qwen3_8b_fsdp.sh"


def _run(text: str, variables: dict[str, str] | None = None) -> list[str]:
    return parse_launch_script(textwrap.dedent(text), "run.sh", variables).overrides


def test_defaults_resolve_as_bash_does() -> None:
    assert _run("""
        B=${TRAIN_BATCH_SIZE:-1024}
        : ${N:=5}
        M=${M:=8}
        python3 -m verl.trainer.main_ppo data.train_batch_size=$B actor_rollout_ref.rollout.n=${N} x.m=$M
    """) == ["data.train_batch_size=1024", "actor_rollout_ref.rollout.n=5", "x.m=8"]


def test_branches_that_agree_give_the_value_and_a_branch_that_exits_is_not_followed() -> None:
    # bash: every DEVICE the script goes on with sets TP=2; 'npu' exits before verl starts
    assert _run("""
        case "${DEVICE}" in
            gpu) TP=2 ;;
            cuda) TP=2 ;;
            npu) echo "no" >&2; exit 1 ;;
            *) TP=2 ;;
        esac
        python3 -m verl.trainer.main_ppo x.tp=$TP
    """) == ["x.tp=2"]


def test_branches_that_differ_stay_unknown_and_say_what_decides() -> None:
    cmd = parse_launch_script(textwrap.dedent("""
        if [ "$DEVICE" = npu ]; then
            TP=4
        else
            TP=2
        fi
        python3 -m verl.trainer.main_ppo x.tp=$TP
    """), "run.sh")
    assert cmd.overrides == ["x.tp=$TP"]
    assert cmd.undecided == {"DEVICE": 2}
    assert any("--set-var DEVICE=VALUE" in note for note in cmd.notes)
    # what the user says the environment holds picks the branch, as `DEVICE=npu bash run.sh` would
    assert _run("""
        if [ "$DEVICE" = npu ]; then
            TP=4
        else
            TP=2
        fi
        python3 -m verl.trainer.main_ppo x.tp=$TP
    """, {"DEVICE": "npu"}) == ["x.tp=4"]


def test_an_array_the_branches_append_to_keeps_what_they_share() -> None:
    cmd = parse_launch_script(textwrap.dedent("""
        EXTRA=(model_engine=megatron)
        if [ "$DEVICE" = npu ]; then
            EXTRA+=(trainer.n_gpus_per_node=16)
        fi
        python3 -m verl.trainer.main_ppo "${EXTRA[@]}"
    """), "run.sh")
    assert cmd.overrides == ["model_engine=megatron"]
    assert cmd.maybe_set == {"trainer.n_gpus_per_node": 3}


def test_verl_mains_flagship_grpo_script_checks_with_values_on_gpu() -> None:
    # DEVICE is what the script's header says to export (gpu|npu); on gpu its defaults hold: TRAIN_BATCH_SIZE
    # 1024, NGPUS_PER_NODE 8 (the gpu branch's `*)` arm), ROLLOUT_N 5, PPO_MINI_BATCH_SIZE 256
    cfg = load_config(QWEN3_8B, script_vars={"DEVICE": "gpu"})
    report = check(cfg)
    assert not report.errors and not [f for f in cfg.findings if f.id == "L008"]
    # the one warning: 1,024 x 5 responses over 4 vLLM replicas (8 GPUs / TP 2) = 1,280 each, above verl 0.9's
    # max_num_seqs default of 256 (rollout.yaml:84 in 0.9.1; 1024 in 0.8.0), which the script leaves unset
    assert [f.id for f in report.warnings] == ["R104"] and "1,280" in report.warnings[0].message
    assert cfg.get("data.train_batch_size") == 1024
    assert cfg.get("trainer.n_gpus_per_node") == 8
    assert cfg.get("actor_rollout_ref.actor.fsdp_config.param_offload") is False
    from advisor.facts import batch_plan

    plan = batch_plan(cfg)
    assert plan.gpus == 8 and plan.responses_per_step == 1024 * 5


def test_the_cli_takes_set_var_and_never_prints_zero_gpus() -> None:
    runner = CliRunner()
    with_var = runner.invoke(app, ["check", str(QWEN3_8B), "--set-var", "DEVICE=gpu"])
    assert with_var.exit_code == 0, with_var.output
    assert "L008" not in with_var.stdout and "1,024 prompts" in with_var.stdout and "on 8 GPUs" in with_var.stdout
    without = runner.invoke(app, ["check", str(QWEN3_8B)])
    assert "--set-var DEVICE=VALUE" in without.stdout
    assert " 0 data-parallel" not in without.stdout and "on 0 GPUs" not in without.stdout
    bad = runner.invoke(app, ["check", str(QWEN3_8B), "--set-var", "not a name=1"])
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_the_mcp_check_tool_takes_set_vars() -> None:
    from advisor.cli._mcp import call_tool

    document, code = call_tool("check", {"config": str(QWEN3_8B), "set_vars": ["DEVICE=gpu"]},
                               roots=[MAIN.parents[2]])
    assert code == 0 and not [f for f in document["warnings"] if f["id"] == "L008"]
    assert document["batch"]["gpus"] == 8
