"""`advisor check` agrees with verl's own config validation on a fixed sample (issue 36, item 1).

The judge is verl's code, run in a test-only environment per release (scripts/install_verl_oracle.sh: the
release wheel and the few pure-Python packages its config path imports, no GPU packages). Where a release is not
installed the tests skip and say why; with VERL_ORACLE_INSTALL=1 (CI, .ci/run) the fixture installs it first
into $VERL_ORACLE_DIR (default .oracle/) and skips only when that fails (no network). The bench
(bench/bench_verl_oracle.py) runs the same comparison on 2,000 configs per release.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from verl_oracle import harness  # noqa: E402

SAMPLE = 24  # configs per release: the bench runs 2,000
SEED = 3601


def _release(version: str) -> Path:
    """The release's environment, installed now when VERL_ORACLE_INSTALL=1; skip with the reason otherwise."""
    if harness.installed(version) is None and os.environ.get("VERL_ORACLE_INSTALL") == "1":
        proc = subprocess.run(["bash", str(REPO / "scripts" / "install_verl_oracle.sh"), str(harness.ORACLE_DIR),
                               version], env={**os.environ, "PYTHON": sys.executable}, capture_output=True,
                              text=True, timeout=900, check=False)
        if proc.returncode != 0:
            pytest.skip(f"verl {version} could not be installed (no package index?): "
                        f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    target = harness.installed(version)
    if target is None:
        pytest.skip(f"verl {version} is not installed under {harness.ORACLE_DIR}: run "
                    f"scripts/install_verl_oracle.sh (or set VERL_ORACLE_INSTALL=1)")
    return target


@pytest.mark.slow
@pytest.mark.parametrize("version", harness.VERSIONS)
def test_check_agrees_with_verl_on_a_fixed_sample(version: str) -> None:
    _release(version)
    result = harness.compare(version, harness.draws(SEED, SAMPLE, version))
    verdicts = [r.verl["ok"] for r in result.rows]
    assert any(verdicts) and not all(verdicts), "the sample holds configs verl accepts and configs it rejects"
    wrong = [(r.outcome, r.verl.get("error", "accepts")[-200:], [e[0] for e in r.advisor.errors], r.config)
             for r in result.disagreements()]
    assert not wrong, result.line() + "\n" + "\n".join(map(str, wrong))


# verl 0.4.1 verl/trainer/ppo/ray_trainer.py:363-377 asserts B×n % GPUs with dynamic batching on too
DYNAMIC_NOT_DIVISIBLE = [("data.train_batch_size", 100), ("actor_rollout_ref.rollout.n", 1),
                         ("trainer.n_gpus_per_node", 8), ("trainer.nnodes", 1),
                         ("actor_rollout_ref.actor.ppo_mini_batch_size", 100),
                         ("actor_rollout_ref.actor.use_dynamic_bsz", True),
                         ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", 4),
                         ("actor_rollout_ref.rollout.name", "vllm"), ("algorithm.adv_estimator", "grpo")]


@pytest.mark.slow
@pytest.mark.parametrize(("version", "rejects"), [("0.4.1", True), ("0.9.1", False)])
def test_dynamic_batching_and_the_gpu_divisibility(version: str, rejects: bool) -> None:
    _release(version)
    (verl,) = harness.run_verl(version, [DYNAMIC_NOT_DIVISIBLE])
    assert verl["ok"] is not rejects  # 100 × 1 = 100 is not a multiple of 8
    row = harness.Row(DYNAMIC_NOT_DIVISIBLE, verl, harness.run_advisor(version, DYNAMIC_NOT_DIVISIBLE))
    assert row.outcome == "agree", (verl, row.advisor)


def test_outcome_rules() -> None:
    """How a pair of verdicts is scored (no verl needed)."""
    said = harness.AdvisorVerdict([("B004", ("actor_rollout_ref.actor.ppo_mini_batch_size",), "...")])
    none = harness.AdvisorVerdict()
    rejects = {"ok": False, "named": ["ppo_mini_batch_size", "train_batch_size"]}
    assert harness.Row([], {"ok": True}, none).outcome == "agree"
    assert harness.Row([], {"ok": True}, said).outcome == "reject"
    assert harness.Row([], rejects, said).outcome == "agree"
    assert harness.Row([], rejects, none).outcome == "miss"
    other = harness.AdvisorVerdict([("R001", ("actor_rollout_ref.rollout.name",), "...")])
    assert harness.Row([], rejects, other).outcome == "miss"  # rejects, but not for what verl named
    assert harness.Row([], {"ok": False, "named": []}, other).outcome == "agree"  # verl named no key
    # verl 0.4.1's message names 'actor_rollout_ref.actor.micro_batch_size' for ppo_micro_batch_size(_per_gpu)
    micro = harness.AdvisorVerdict([("B003", ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",), "...")])
    assert harness.Row([], {"ok": False, "named": ["micro_batch_size", "micro_batch_size_per_gpu"]},
                       micro).outcome == "agree"


def test_generator_is_seeded_and_varied() -> None:
    a, b = harness.draws(SEED, 50, "0.9.1"), harness.draws(SEED, 50, "0.9.1")
    assert a == b
    keys = {k for config in a for k, _ in config}
    for layer in ("data.train_batch_size", "actor_rollout_ref.rollout.n", "actor_rollout_ref.actor.ppo_mini_batch_size",
                  "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.actor.use_dynamic_bsz",
                  "trainer.nnodes", "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
                  "actor_rollout_ref.rollout.tensor_model_parallel_size", "algorithm.use_kl_in_reward"):
        assert layer in keys
    assert {v for config in a for k, v in config if k == "algorithm.adv_estimator"} >= {"grpo", "gae"}
