"""The launch-script reader: a bash subset, read without running anything."""

from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor import load_config
from advisor.errors import ConfigError
from advisor.load._script import arith_eval, parse_launch_script


def overrides(script: str) -> list[str]:
    return parse_launch_script(textwrap.dedent(script), "run.sh").overrides


def test_continuations_comments_and_quotes() -> None:
    got = overrides(r"""
        set -x
        # a comment
        python3 -m verl.trainer.main_ppo \
            data.train_batch_size=1024 \
            trainer.logger='["console","wandb"]' \
            trainer.project_name="my project" \
            actor_rollout_ref.model.path=Qwen/Qwen3-8B $@ 2>&1 | tee log.txt
    """)
    assert got == ["data.train_batch_size=1024", 'trainer.logger=["console","wandb"]',
                   "trainer.project_name=my project", "actor_rollout_ref.model.path=Qwen/Qwen3-8B"]


def test_variables_defaults_export_and_arithmetic() -> None:
    got = overrides("""
        export NNODES=${NNODES:-2}
        max_prompt_length=$((1024 * 2))
        max_response_length=$(( 1024 * 20 ))
        total=$((max_prompt_length + max_response_length))
        half=$(( total / 3 ))
        gen_tp=${GEN_TP:-4}
        python3 -m verl.trainer.main_ppo trainer.nnodes=${NNODES} data.max_prompt_length=${max_prompt_length} \\
            actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$total x.half=$half \\
            actor_rollout_ref.rollout.tensor_model_parallel_size=$gen_tp
    """)
    # bash: 1024*2 = 2048, 2048 + 20480 = 22528, 22528 / 3 truncates to 7509
    assert got == ["trainer.nnodes=2", "data.max_prompt_length=2048",
                   "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=22528", "x.half=7509",
                   "actor_rollout_ref.rollout.tensor_model_parallel_size=4"]


def test_undefined_variable_is_reported_not_guessed() -> None:
    cmd = parse_launch_script(
        "python3 -m verl.trainer.main_ppo data.train_files=$HOME/data/train.parquet trainer.nnodes=$NNODES\n",
        "run.sh")
    assert cmd.overrides == ["data.train_files=$HOME/data/train.parquet", "trainer.nnodes=$NNODES"]
    assert cmd.unresolved == {"HOME": ["data.train_files"], "NNODES": ["trainer.nnodes"]}


def test_taint_follows_variables_and_command_substitutions() -> None:
    cmd = parse_launch_script(textwrap.dedent("""
        NOW=$(date +%Y%m%d)
        DATA_HOME=${DATA_HOME:-"${HOME}/verl"}
        MODEL_PATH=${MODEL_PATH:-"${DATA_HOME}/models/Qwen2.5-32B"}
        python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path="${MODEL_PATH}" trainer.experiment_name=run-${NOW}
    """), "run.sh")
    # the path keeps its text (the basename still names the model); nothing is split at the space in $(date ...)
    assert cmd.overrides == ["actor_rollout_ref.model.path=$HOME/verl/models/Qwen2.5-32B",
                             "trainer.experiment_name=run-$(date +%Y%m%d)"]
    assert cmd.unresolved == {"HOME": ["actor_rollout_ref.model.path"], "$(...)": ["trainer.experiment_name"]}


SPLIT_SCRIPT = """
    ROOT=${ROOT:-$PWD}
    NOW=$(date +%Y%m%d)
    ACTOR="
        actor_rollout_ref.actor.optim.lr=1e-6 \\
        actor_rollout_ref.model.path=$ROOT/models/Qwen3-8B
        trainer.experiment_name=run-$NOW"
    python3 -m verl.trainer.main_ppo $ACTOR trainer.nnodes=1
"""


def test_unquoted_variable_with_an_undefined_part_still_splits_into_overrides() -> None:
    # verl's examples/gspo_trainer/run_qwen30b_gspo.sh builds its overrides this way; the unquoted
    # $ACTOR splits on blanks and newlines, the undefined $PWD and the unrun $(date ...) included
    cmd = parse_launch_script(textwrap.dedent(SPLIT_SCRIPT), "run.sh")
    assert cmd.overrides == ["actor_rollout_ref.actor.optim.lr=1e-6",
                             "actor_rollout_ref.model.path=$PWD/models/Qwen3-8B",
                             "trainer.experiment_name=run-$(date +%Y%m%d)", "trainer.nnodes=1"]
    # only the fields that hold the unknown text depend on it
    assert cmd.unresolved == {"PWD": ["actor_rollout_ref.model.path"], "$(...)": ["trainer.experiment_name"]}


def test_unquoted_split_matches_bash() -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not available")
    # bash runs the same script with python3 printing its arguments and a fixed PWD and date
    stub = 'python3() { shift 2; printf "%s\\n" "$@"; }\ndate() { echo 20260101; }\nPWD=/work\n'
    out = subprocess.run([bash, "-c", stub + textwrap.dedent(SPLIT_SCRIPT)], capture_output=True, text=True,
                         check=True).stdout.split("\n")[:-1]
    ours = overrides(SPLIT_SCRIPT)
    assert len(out) == len(ours)
    assert [o.replace("$PWD", "/work").replace("$(date +%Y%m%d)", "20260101") for o in ours] == out


def test_arrays_expand_one_argument_per_element() -> None:
    got = overrides("""
        DATA=(
            data.train_batch_size=128   # inline comment
            # a commented-out element
            data.train_files="['a.parquet', 'b.parquet']"
        )
        ACTOR=(actor_rollout_ref.actor.ppo_mini_batch_size=16)
        python3 -m verl.trainer.main_ppo --config-path=config --config-name='ppo_megatron_trainer.yaml' \\
            "${DATA[@]}" "${ACTOR[@]}" "${UNDEFINED_ARRAY[@]}"
    """)
    assert got[:3] == ["data.train_batch_size=128", "data.train_files=['a.parquet', 'b.parquet']",
                       "actor_rollout_ref.actor.ppo_mini_batch_size=16"]


def test_config_name_and_path_and_plus_tilde_prefixes() -> None:
    cmd = parse_launch_script(
        "python3 -m verl.trainer.main_ppo --config-path=config --config-name ppo_megatron_trainer.yaml "
        "+a.b=1 ++c.d=2 ~e.f\n", "run.sh")
    assert cmd.config_name == "ppo_megatron_trainer.yaml"
    assert cmd.config_path == "config"
    assert cmd.overrides == ["+a.b=1", "++c.d=2", "~e.f"]


def test_ray_job_submit_recipe_entry_point() -> None:
    cmd = parse_launch_script(
        'ray job submit --no-wait --working-dir "${PWD}" -- '
        'python3 -m recipe.dapo.main_dapo data.gen_batch_size=1536\n',
        "run.sh")
    assert cmd.entry_point == "recipe.dapo.main_dapo"
    assert cmd.overrides == ["data.gen_batch_size=1536"]


def test_if_tests_are_evaluated_when_decidable() -> None:
    got = overrides("""
        TP=${1:-4}
        mode="async"
        if [ $TP -eq 4 ]; then
            MAX=1024
        else
            MAX=384
        fi
        if [ "$mode" != "async" ]; then MAX=1; fi
        python3 -m verl.trainer.main_ppo x.max=$MAX
    """)
    assert got == ["x.max=1024"]


def test_if_depending_on_environment_applies_no_branch() -> None:
    cmd = parse_launch_script(textwrap.dedent("""
        if [ "$ROLLOUT" = "vllm" ]; then
            TP=2
        fi
        python3 -m verl.trainer.main_ppo x.tp=$TP
    """), "run.sh")
    assert cmd.overrides == ["x.tp=$TP"]
    assert any("if" in note for note in cmd.notes)


def test_heredoc_body_is_data() -> None:
    got = overrides("""
        cat > get_model.py << EOF
        python3 -m verl.trainer.main_ppo this.is=not_the_command
        EOF
        python3 -m verl.trainer.main_ppo the.real=command
    """)
    assert got == ["the.real=command"]


def test_escaped_space_before_comment_ends_the_command() -> None:
    # verl's run_deepseek7b_llm_pfppo.sh: `\  # [...]` leaves a one-space argument and ends the command
    got = overrides("""
        python3 -m verl.trainer.main_ppo \\
            algorithm.use_pf_ppo=True \\
            algorithm.pf_ppo.reweight_method=pow \\  # ["pow", "max_min"]
            data.train_batch_size=1024
    """)
    assert got == ["algorithm.use_pf_ppo=True", "algorithm.pf_ppo.reweight_method=pow", " "]


def test_trailing_backslash_at_end_of_file_is_ignored() -> None:
    assert overrides("python3 -m verl.trainer.main_ppo a.b=1 \\") == ["a.b=1"]


@pytest.mark.parametrize("text, message", [
    pytest.param("echo hello\n", "no verl command found", id="no-verl-command"),
    pytest.param("python3 -m verl.trainer.main_ppo a='unterminated\n", "unterminated single quote", id="quote"),
    pytest.param("x=$((1/0))\npython3 -m verl.trainer.main_ppo a=$x\n", "division by zero", id="div0"),
    pytest.param("\x00\x01binary", "binary", id="binary"),
])
def test_unreadable_scripts_raise_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_launch_script(text, "run.sh")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("run.sh")


@pytest.mark.parametrize("expr", ["1024 * 20", "(7 + 5) / 2", "-7 / 2", "7 % 3", "-7 % 3", "2 ** 10", "1 << 4",
                                  "(3 > 2) + (2 >= 3)"])
def test_arithmetic_matches_bash(expr: str) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not available")
    expected = int(subprocess.run([bash, "-c", f"echo $(({expr}))"], capture_output=True, text=True,
                                  check=True).stdout)
    assert arith_eval(expr, {}) == expected


def test_arithmetic_never_evaluates_python() -> None:
    with pytest.raises(ValueError):
        arith_eval("__import__('os').system('true')", {})


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abc =$(){}[]'\"\\#\n;|&<>!-+*/%0129x_.@`~:", max_size=120))
def test_reader_raises_only_config_error(text: str) -> None:
    try:
        parse_launch_script("python3 -m verl.trainer.main_ppo " + text, "run.sh")
        parse_launch_script(text, "run.sh")
    except ConfigError as err:
        assert "\n" not in str(err)


def test_case_branch_that_matches_is_run() -> None:
    text = (
        'VARIANT=${VARIANT:-ta}\n'
        'case "${VARIANT}" in\n'
        '    global)\n        target=verl.trainer.main_ppo\n        ;;\n'
        '    dynamo | ta)\n        target=recipe.dynamo.main_dynamo\n        ;;\n'
        '    *)\n        exit 2\n        ;;\n'
        'esac\n'
        'python3 -m "${target}" trainer.nnodes=1\n'
    )
    assert parse_launch_script(text).entry_point == "recipe.dynamo.main_dynamo"
    unknown = text.replace("VARIANT=${VARIANT:-ta}\n", "")
    with pytest.raises(ConfigError, match="no verl command"):
        parse_launch_script(unknown)  # the branch depends on the environment: none is run, $target stays unset


SCHEDULED = """#!/bin/bash
python3 -m verl.trainer.main_ppo \\
  data.train_batch_size=256 actor_rollout_ref.rollout.name=vllm \\
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 critic.ppo_micro_batch_size_per_gpu=4 \\
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \\
  trainer.n_gpus_per_node=$MLP_WORKER_GPU trainer.nnodes=$SLURM_JOB_NUM_NODES data.max_prompt_length=$PLEN
"""


def test_values_a_job_scheduler_supplies_are_not_errors(tmp_path) -> None:
    from advisor.checks import run_checks

    script = tmp_path / "run.sh"
    script.write_text(SCHEDULED)
    found = run_checks(load_config(script))
    at_launch = {f.keys for f in found if f.id == "L012"}
    assert at_launch == {("trainer.n_gpus_per_node",), ("trainer.nnodes",)}
    fed = {"trainer.nnodes", "trainer.n_gpus_per_node"}
    assert not [f for f in found if f.severity == "error" and set(f.keys) & fed]
    # a variable no scheduler sets is still the user's to define: its number is a type error
    assert any(f.id == "L008" and f.keys == ("data.max_prompt_length",) for f in found)
    # with the value given after the file, the checks run on it
    given = load_config(script, ["trainer.nnodes=2", "trainer.n_gpus_per_node=8", "data.max_prompt_length=512"])
    assert given.get("trainer.nnodes") == 2


def test_a_variable_set_in_a_block_not_evaluated_is_unknown_not_its_old_value(tmp_path) -> None:
    # verl main's run_qwen3_8b_fsdp.sh: rollout_tp=${ROLLOUT_TP:-}, then set again per device in a 'case'
    script = tmp_path / "run.sh"
    script.write_text(textwrap.dedent("""\
        rollout_tp=${ROLLOUT_TP:-}
        EXTRA=()
        case "${DEVICE}" in
            gpu) rollout_tp=2; EXTRA=(trainer.nnodes=1) ;;
            npu) rollout_tp=4 ;;
        esac
        python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.tensor_model_parallel_size=${rollout_tp} \\
            "${EXTRA[@]}"
    """))
    cfg = load_config(script)
    # the 'case' at line 3 gives it 2 or 4 (its branches are followed, and disagree)
    assert cfg.launch.unresolved == {"rollout_tp (branches at line 3)":
                                     ["actor_rollout_ref.rollout.tensor_model_parallel_size"]}
    wrong = [f for f in cfg.findings if f.id == "L008"]
    assert [f.severity for f in wrong] == ["warning"]  # known only when the script runs: not an error
    note = next(f for f in cfg.findings if f.id == "L009")
    assert "set differently by the branches of the block at line 3" in note.message
    assert not [f for f in cfg.findings if f.id == "L011"]  # the empty EXTRA expands to nothing
