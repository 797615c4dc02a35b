"""`advisor verify` with the CPU sandbox as the trial command runs it at the sandbox's own scale (issue #38 item 6),
unless the user says otherwise, and says so in the plan; a sandbox run's memory is capped by the sandbox itself.

The expected sizes come from the rule in knowledge/verify.yaml (`sandbox_scale`): every batch size divided by
the smallest factor that brings data.train_batch_size to `prompts` or below and divides them all.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from advisor import load_config
from advisor.playbook import suggest_run
from sweeps._settings import RunSettings
from sweeps.verify import VerifySettings, plan_verify

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
SANDBOX = "python -m sweeps.sandbox"
SCALE = yaml.safe_load((REPO / "knowledge" / "verify.yaml").read_text())["sandbox_scale"]
GRPO_BATCH_KEYS = ("data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size",
                   "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
                   "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                   "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu")


def _plan(name: str, overrides: tuple[str, ...] = (), command: str | None = SANDBOX, **settings):
    cfg = load_config(EXAMPLES / name / "run.sh", list(overrides))
    run = RunSettings(command=command, overrides=overrides)
    return cfg, plan_verify(suggest_run(cfg, EXAMPLES / name / "metrics.jsonl"), VerifySettings(run=run, **settings))


def _set(plan) -> dict[str, str]:
    return dict(o.split("=", 1) for o in plan.trial_overrides)


def test_the_sandbox_runs_at_its_own_scale_and_the_plan_says_so() -> None:
    cfg, plan = _plan("lr_too_high")
    sizes = {k: cfg.get(k) for k in GRPO_BATCH_KEYS}
    factor = next(f for f in range(-(-sizes["data.train_batch_size"] // SCALE["prompts"]), 10**6)
                  if all(v % f == 0 for v in sizes.values()))
    got = _set(plan)
    assert {k: int(got[k]) for k in GRPO_BATCH_KEYS} == {k: v // factor for k, v in sizes.items()}
    assert int(got["data.train_batch_size"]) <= SCALE["prompts"]
    assert int(got["data.max_response_length"]) == SCALE["max_response_length"] < cfg.get("data.max_response_length")
    assert not any(k.startswith("critic.") for k in got)  # GRPO builds no critic
    assert plan.steps <= SCALE["steps"]
    assert any("own scale" in n and "--own-scale" in n for n in plan.notes)
    assert "actor_rollout_ref.actor.optim.lr" not in got  # the swept key is the sweep's


def test_own_scale_user_keys_and_steps_are_the_users() -> None:
    _, own = _plan("lr_too_high", own_scale=True)
    assert not any(k.startswith(("data.train", "data.max_response")) for k in _set(own))
    assert own.steps > SCALE["steps"]  # the run's own length (epoch-bound), not the cap
    _, user = _plan("lr_too_high", ("data.train_batch_size=256",))
    assert "data.train_batch_size" not in _set(user)  # the user's batch: no batch key is rescaled around it
    assert "actor_rollout_ref.actor.ppo_mini_batch_size" not in _set(user)
    assert _set(user)["data.max_response_length"] == str(SCALE["max_response_length"])
    _, steps = _plan("lr_too_high", steps=SCALE["steps"] + 5)
    assert steps.steps == SCALE["steps"] + 5


def test_a_swept_length_is_not_capped_and_a_verl_command_is_never_rescaled() -> None:
    _, truncation = _plan("truncation")
    assert truncation.params[0].key == "data.max_response_length"
    assert "data.max_response_length" not in _set(truncation)
    _, verl = _plan("lr_too_high", command="python3 -m verl.trainer.main_ppo")
    assert "data.train_batch_size" not in _set(verl) and not any("own scale" in n for n in verl.notes)


def test_the_sandbox_fails_cleanly_past_its_memory_cap(tmp_path: Path) -> None:
    # the example's own 7B-run sizes (512 prompts x 5, 1,024-token responses): ~220 MB of RSS from a ~60 MB start
    # on the log-linear policy, so a 0.05 GiB cap is passed, and without a cap the same run finishes
    args = [a for a in (EXAMPLES / "lr_too_high" / "run.sh").read_text().split() if "=" in a and "$" not in a
            and "logger" not in a]

    def sandbox(cap: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "sweeps.sandbox", *args, "trainer.total_training_steps=3",
                               f"+sandbox.max_memory_gib={cap}"], capture_output=True, text=True, cwd=tmp_path,
                              timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                                "SANDBOX_POLICY": "loglinear"})

    capped = sandbox("0.05")
    assert capped.returncode == 1, capped.stderr[-2000:]
    assert "Traceback" not in capped.stderr
    assert capped.stderr.strip().splitlines()[-1].startswith("sweeps.sandbox: the run needed more than its memory cap")
    assert sandbox("0").returncode == 0
