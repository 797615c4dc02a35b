"""Rules the differential harness (bench/bench_verl_oracle.py) found the checks disagreeing with verl on.

Each expected outcome is the cited verl (or vLLM) rule written out as arithmetic on the case's numbers.
"""

from __future__ import annotations

from advisor import load_config
from advisor.checks import run_checks

A = "actor_rollout_ref.actor"
R = "actor_rollout_ref.rollout"


def _ids(overrides: list[str], version: str) -> set[str]:
    cfg = load_config(None, overrides, verl_version=version)
    return {f.id for f in run_checks(cfg, verify_fixes=False) if f.severity.value == "error"}


# 100 prompts × n=1 = 100 responses over 8 GPUs: 100 % 8 = 4, with dynamic batching on
DYNAMIC_ON_8 = [f"{R}.name=vllm", "data.train_batch_size=100", f"{R}.n=1", f"{A}.ppo_mini_batch_size=100",
                f"{A}.use_dynamic_bsz=true", "trainer.n_gpus_per_node=8", "trainer.nnodes=1",
                f"{R}.log_prob_micro_batch_size_per_gpu=4", "algorithm.adv_estimator=grpo"]


def test_real_train_batch_divisible_with_dynamic_batching_before_0_6() -> None:
    # 0.4.1 verl/trainer/ppo/ray_trainer.py:363-377 and 0.5.0 :391-416 assert B×n % GPUs with no
    # use_dynamic_bsz guard; 0.6.1 verl/utils/config.py:89 put the rule under `if not use_dynamic_bsz`
    assert 100 * 1 % 8 != 0
    assert "B001" in _ids(DYNAMIC_ON_8, "0.4.1")
    assert "B001" in _ids(DYNAMIC_ON_8, "0.5.0")
    assert "B001" not in _ids(DYNAMIC_ON_8, "0.6.1")
    assert "B001" not in _ids(DYNAMIC_ON_8, "0.9.1")


CRITIC_SP = [f"{R}.name=vllm", "algorithm.adv_estimator=gae", "critic.ulysses_sequence_parallel_size=2",
             "critic.model.use_remove_padding=false"]


def test_critic_remove_padding_is_cited_where_each_version_checks_it() -> None:
    # 0.7.1 verl/workers/config/critic.py:210 checks it when validate_config builds the critic's config; 0.9.1's
    # critic config no longer does, its FSDP engine does at start-up (engine/fsdp/transformer_impl.py:148-152)
    def source(version: str) -> str:
        cfg = load_config(None, CRITIC_SP, verl_version=version)
        (found,) = [f for f in run_checks(cfg, verify_fixes=False)
                    if f.id == "A007" and f.keys[0] == "critic.ulysses_sequence_parallel_size"]
        return found.source or ""

    assert "verl/workers/config/critic.py" in source("0.7.1")
    assert "transformer_impl.py" in source("0.9.1") and "config/critic.py" not in source("0.9.1")
