"""`advisor verify` a user can follow: the plan first, a line per trial on stderr when piped, the steps the trials
really run, which value to apply, the advisor's interpreter for the sandbox, and exit 2 when every trial failed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from advisor import load_config
from advisor.playbook._suggest import suggest_run
from sweeps import RunSettings
from sweeps._plan import _base_argv
from sweeps.verify import VerifySettings, plan_verify
from sweeps.verify._length import EPOCH_END, reached_note

REPO = Path(__file__).resolve().parents[3]
EX = REPO / "examples" / "lr_too_high"
PERF = ["--skip-tree", "throughput", "--skip-tree", "memory"]  # the sandbox's timings are not a GPU's
NO_NUMPY = "ModuleNotFoundError: No module named 'numpy'"


def _stub_python(directory: Path) -> Path:
    """A `python` and `python3` first on PATH that lack numpy: each fails at import, as the issue's did."""
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    for name in ("python", "python3"):
        stub = bin_dir / name
        stub.write_text(f"#!/bin/sh\necho \"Traceback (most recent call last):\" >&2\necho \"{NO_NUMPY}\" >&2\n"
                        "exit 1\n")
        stub.chmod(0o755)
    return bin_dir


def _verify(*args: object, cwd: Path, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`advisor verify ... 2>&1 | cat`: stdout and stderr as one pipe, in the order they were written."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if path is not None:
        env["PATH"] = f"{path}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([sys.executable, "-m", "advisor", "verify", *map(str, args)], cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)


# --- how long a trial runs -------------------------------------------------------------------------------------


def test_the_plan_states_the_steps_the_sandbox_trials_really_run() -> None:
    # lr_too_high: data.train_batch_size=512, trainer.total_epochs=15, the sandbox's 2048 prompts (sandbox.train_size
    # default): floor(2048 / 512) * 15 = 60 steps, where verl's loop ends too (ray_trainer.py:1440, v0.9.0); the
    # run's own last step, 300, is what was asked (at the config's own sizes: --own-scale)
    cfg = load_config(EX / "run.sh")
    settings = VerifySettings(run=RunSettings(command="python -m sweeps.sandbox"), own_scale=True)
    plan = plan_verify(suggest_run(cfg, EX / "metrics.jsonl"), settings)
    assert plan.steps == 2048 // 512 * 15 and plan.asked_steps == 300 and plan.steps_known
    assert plan.warmup >= 20  # a third of the 60 steps run, not of the 300 asked
    note = next(n for n in plan.notes if "not the 300 asked" in n)
    assert "each trial trains 60 steps" in note and "trainer.total_epochs=15 epochs of 4 steps" in note


def test_a_verl_trial_asked_past_the_runs_own_steps_may_stop_earlier_and_the_plan_says_so() -> None:
    cfg = load_config(EX / "run.sh")
    suggestion = suggest_run(cfg, EX / "metrics.jsonl")
    within = plan_verify(suggestion, VerifySettings(steps=300))  # the run itself reached step 300
    assert within.steps == 300 and within.steps_known
    beyond = plan_verify(suggestion, VerifySettings(steps=400))
    assert beyond.steps == 400 and not beyond.steps_known
    assert any("cannot count before a trial runs" in n and EPOCH_END in n for n in beyond.notes)
    note = reached_note(400, 210, 15)
    assert note is not None and "ended at step 210, not the planned 400" in note
    assert reached_note(400, 400, 15) is None


def test_planned_steps_is_where_the_sandbox_stops() -> None:
    from sweeps.sandbox import planned_steps, run

    small = ["+sandbox.train_size=64", "data.train_batch_size=16", "data.max_response_length=4",
             "actor_rollout_ref.actor.ppo_mini_batch_size=8", "critic.ppo_mini_batch_size=8",
             "trainer.val_before_train=false", "trainer.total_epochs=2"]
    # 64 / 16 = 4 steps an epoch, 2 epochs: 8 steps, though 50 were asked
    assert planned_steps([*small, "trainer.total_training_steps=50"]) == (8, 4)
    assert planned_steps([*small, "trainer.total_training_steps=5"]) == (5, 4)
    assert [step for step, _ in run([*small, "trainer.total_training_steps=50"])][-1] == 8


# --- the interpreter -------------------------------------------------------------------------------------------


def test_the_sandbox_runs_on_the_advisors_interpreter_and_other_commands_as_given() -> None:
    cfg = load_config(EX / "run.sh")
    assert _base_argv(cfg, "python -m sweeps.sandbox", [])[:3] == [sys.executable, "-m", "sweeps.sandbox"]
    assert _base_argv(cfg, "python3 -m sweeps.sandbox", [])[0] == sys.executable
    assert _base_argv(cfg, "/opt/py/bin/python3 -m sweeps.sandbox", [])[0] == "/opt/py/bin/python3"
    assert _base_argv(cfg, "python3 -m verl.trainer.main_ppo", [])[0] == "python3"
    assert _base_argv(cfg, "python -m sweeps.sandbox", [], local=False)[0] == "python"  # a Ray node's own


# --- end to end ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_verify_piped_prints_the_plan_then_a_line_per_trial_then_the_verdict(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    # the first python on PATH lacks numpy: the sandbox's trials still run, on the advisor's interpreter
    proc = _verify(EX / "run.sh", EX / "metrics.jsonl", *PERF, "--command", "python -m sweeps.sandbox",
                   "--steps", "4", "--seeds", "1", "--parallel", "2", "--out", tmp_path / "out",
                   cwd=tmp_path, path=_stub_python(tmp_path))
    assert proc.returncode in (0, 1), proc.stdout[-3000:]
    lines = proc.stdout.splitlines()
    plan = lines.index(next(x for x in lines if x.startswith("verify CF001")))
    trials = [i for i, x in enumerate(lines) if re.match(r"trial #\d+ lr=", x)]
    verdict = lines.index(next(x for x in lines if x.startswith("verify: ")))
    steps = next(i for i, x in enumerate(lines) if "4 steps a trial" in x)
    assert plan < steps < trials[0] and trials[-1] < verdict
    # one line as each of the 3 trials (one seed, three values) starts and one as it ends, each in order
    started = [x for x in lines if x.endswith(": started")]
    ended = [x for x in lines if re.search(r": (complete|pruned|stopped|failed|diverged)( at step \d+)?", x)]
    assert len(started) == len(ended) == 3
    for line in started:
        number = line.split()[1]
        end = next(i for i, x in enumerate(lines) if x.startswith(f"trial {number} ") and x not in started)
        assert lines.index(line) < end
    assert any("(baseline)" in x for x in started) and any("(proposed)" in x for x in started)
    assert all(re.search(r"val-core/\*/mean@\* [0-9.]+ \[\d/3 done\]$", x) for x in ended), ended
    assert NO_NUMPY not in proc.stdout


@pytest.mark.slow
def test_every_trial_failed_exits_2_with_the_first_trials_error_and_its_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    bin_dir = _stub_python(tmp_path)
    proc = _verify(EX / "run.sh", EX / "metrics.jsonl", *PERF, "--command", "python3 -m verl.trainer.main_ppo",
                   "--steps", "4", "--seeds", "1", "--out", tmp_path / "out", "-f", "json", cwd=tmp_path,
                   path=bin_dir)
    assert proc.returncode == 2, proc.stdout[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("advisor: verify: every trial failed (3); the first, #0 (")
    assert last.endswith(f"{NO_NUMPY}; the trials ran python3 ({bin_dir / 'python3'} on PATH)")
    assert "INSUFFICIENT EVIDENCE" not in proc.stdout  # no verdict on trials that never ran
    # -f json: the plan went to stderr as text before the trials, stdout is one JSON document
    head = proc.stdout.splitlines()[0]
    assert head.startswith("verify CF001")
    document = proc.stdout[proc.stdout.index("\n{") + 1: proc.stdout.rindex("\n}") + 2]
    result = json.loads(document)
    assert result["error"] == last.removeprefix("advisor: verify: ") and result["verdict"] is None


# --- which value to apply ----------------------------------------------------------------------------------------


def test_a_different_value_found_better_says_to_apply_it_and_why() -> None:
    from sweeps._verdict import Comparison, Pair
    from sweeps.verify import apply_sentence
    from sweeps.verify._verdict import DIFFERENT_VALUE, FIX_CONFIRMED, VerifyVerdict

    lr = "actor_rollout_ref.actor.optim.lr"
    plan = plan_verify(suggest_run(load_config(EX / "run.sh"), EX / "metrics.jsonl"), VerifySettings(steps=30))
    assert plan.roles["proposed"] == 1e-6 and plan.roles["third"] == 1e-5
    pairs = [Pair(seed, 30, 0.9, 0.83, 0.07) for seed in (42, 43, 44)]
    versus = Comparison({lr: 1e-5}, "better", "", pairs, mean_difference=0.07227, ci=(0.06836, 0.08008), level=0.95)
    found = VerifyVerdict(DIFFERENT_VALUE, "", {lr: 1e-5}, versus_proposal=versus)
    assert apply_sentence(plan, found) == (
        f"Apply {lr}=1e-05, not suggest's 1e-06: the trials measured it better than 1e-06 on val-core/*/mean@* "
        "(mean difference +0.07227, 95.0% interval [+0.06836, +0.08008] over 3 paired seeds); suggest's value is "
        "a first guess from the playbook's rule, made before any trial ran.")
    # the proposal did not beat the baseline and was not compared with the third value
    alone = VerifyVerdict(DIFFERENT_VALUE, "", {lr: 1e-5})
    assert "better than the baseline on val-core/*/mean@*, and 1e-06 not;" in (apply_sentence(plan, alone) or "")
    assert apply_sentence(plan, VerifyVerdict(FIX_CONFIRMED, "", {lr: 1e-6})) is None


# --- advisor sweep -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_sweep_whose_every_trial_failed_exits_2_with_the_first_error(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    from sweeps import Objective, Param, SweepSpec, run_sweep

    crash = [sys.executable, "-c", "import sys; sys.exit('RuntimeError: NCCL error: unhandled system error')"]
    spec = SweepSpec([Param.grid("actor_rollout_ref.actor.optim.lr", [1e-5])], Objective("critic/score/mean"),
                     steps=3, seeds=1)
    result = run_sweep(EX / "run.sh", spec, command=crash, out=tmp_path / "out", parallel=2)
    assert result.exit_code == 2
    failure = result.failure() or ""
    assert failure.startswith("every trial failed (2); the first, #0 (")
    assert failure.endswith("stderr.log): RuntimeError: NCCL error: unhandled system error")


TINY = """#!/usr/bin/env bash
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=2 data.train_batch_size=16 \\
    data.max_response_length=8 actor_rollout_ref.actor.ppo_mini_batch_size=8 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.name=vllm \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \\
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4 trainer.val_before_train=false \\
    trainer.n_gpus_per_node=1 trainer.total_epochs=1 +sandbox.train_size=64 $@
"""
# the sandbox behind a command verify cannot tell from verl's: the trial length is then known only as it runs
OPAQUE = (f"{sys.executable} -c 'import runpy, sys; sys.argv = [\"trainer\", *sys.argv[1:]]; "
          "runpy.run_module(\"sweeps.sandbox\", run_name=\"__main__\")'")


@pytest.mark.slow
def test_trials_that_end_before_the_planned_step_are_reported_and_compared_where_they_ended(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    from sweeps.sandbox import run

    run_sh = tmp_path / "run.sh"
    run_sh.write_text(TINY)
    metrics = tmp_path / "metrics.jsonl"
    records = run(list(load_config(run_sh).launch.overrides))
    metrics.write_text("".join(json.dumps({"step": s, "data": d}) + "\n" for s, d in records))
    # 64 prompts / 16 a step, one epoch: 4 steps, the run's and every trial's, though 8 are asked
    assert [s for s, _ in records][-1] == 64 // 16
    proc = _verify(run_sh, metrics, *PERF, "--command", OPAQUE, "--propose", "actor_rollout_ref.actor.optim.lr=1e-5",
                   "--steps", "8", "--seeds", "1", "--out", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stdout[-3000:]
    assert "up to 8 steps a trial" in proc.stdout and "cannot count before a trial runs" in proc.stdout
    assert "the trials ended at step 4, not the planned 8: a trial stops at the end of trainer.total_epochs=1 " \
           "epochs" in proc.stdout
    assert "the verdict compares them at step 4" in proc.stdout
    assert "or more steps" not in proc.stdout  # they were compared at the last step they could reach
