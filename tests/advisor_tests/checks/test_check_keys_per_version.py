"""Every key a check reads exists in the config tree of each verl version, or is read knowingly.

A key that a version does not have reads as None: a check that tests `not ctx.get(key)` then fires on every
config of that version (A007 once did, on verl 0.4.1's model-level use_remove_padding). Each absent key
below is one the check reads on purpose, with the reason.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from advisor import load_config
from advisor.checks import run_checks
from advisor.load._config import VerlConfig

VERSIONS = ["0.2.0.post2", "0.3.0.post1", "0.4.1", "0.5.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1",
            "main"]
EVERY = {*VERSIONS, "0.10.0.dev"}  # main resolves to its version number
A, R = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
BASE = [f"{R}.name=vllm", f"{A}.ppo_micro_batch_size_per_gpu=4", "critic.ppo_micro_batch_size_per_gpu=4",
        f"{R}.log_prob_micro_batch_size_per_gpu=4", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"]
VARIANTS = {
    "ppo": [],
    "grpo": ["algorithm.adv_estimator=grpo", f"{A}.use_kl_loss=true"],
    "ulysses": [f"{A}.ulysses_sequence_parallel_size=2", "critic.ulysses_sequence_parallel_size=2",
                "actor_rollout_ref.model.use_remove_padding=true", "critic.model.use_remove_padding=true"],
}
OLD = {"0.2.0.post2", "0.3.0.post1", "0.4.1", "0.5.0"}
GONE_IN_08 = {"0.8.0", "0.9.0", "0.9.1", "0.10.0.dev"}
KNOWINGLY_ABSENT = {
    # added in 0.6: the check also reads optim.warmup_style, the older key (A002)
    f"{A}.optim.lr_scheduler_type": OLD, "critic.optim.lr_scheduler_type": OLD,
    # added in 0.6: None means verl's older rule, a critic iff adv_estimator is gae
    "critic.enable": OLD,
    # added in 0.6 (critic; the actor had it already): None means no warm-up key to check (A011)
    "critic.optim.lr_warmup_steps": OLD,
    # rollout parallel sizes added in 0.6: None reads as 1, the only layout older versions had
    f"{R}.data_parallel_size": OLD, f"{R}.expert_parallel_size": OLD, f"{R}.pipeline_model_parallel_size": OLD,
    # added in 0.6/0.7: absent means the only worker implementation there was
    "trainer.use_legacy_worker_impl": {"0.2.0.post2", "0.3.0.post1", "0.4.1"},
    # optional keys a user adds with '+' (LoRA config group; DAPO's overlong buffer): never in the defaults
    "actor_rollout_ref.model.lora.rank": EVERY,
    "reward_model.overlong_buffer.enable": EVERY,
    "reward_model.reward_kwargs.overlong_buffer_cfg.enable": EVERY,
    "reward.reward_kwargs.overlong_buffer_cfg.enable": EVERY,
    # read with .get before 0.9 put it in the core config (ray_trainer.py dataloader); None means train_batch_size
    "data.gen_batch_size": EVERY - {"0.9.0", "0.9.1", "0.10.0.dev", "main"},
    # added in 0.8.0: 0.7.1 reads lora.get("merge", False) (verl/utils/config.py:195), so None is "not merged"
    "actor_rollout_ref.model.lora.merge": {"0.7.1"},
    # verl 0.2/0.3 (forks such as TinyZero): None means the feature did not exist yet, and the check is moot
    f"{A}.clip_ratio_c": {"0.2.0.post2", "0.3.0.post1"},  # dual-clip PPO (A003)
    f"{A}.loss_agg_mode": {"0.2.0.post2", "0.3.0.post1"},  # token-mean was the only mode (A001)
    f"{A}.optim.lr_warmup_steps": {"0.2.0.post2"},  # only the warm-up ratio existed (A011, W009)
    "actor_rollout_ref.model.lora_rank": {"0.2.0.post2", "0.3.0.post1"},  # no LoRA before 0.4
    f"{R}.max_model_len": {"0.2.0.post2"},  # the engine took prompt + response (R101)
    f"{R}.mode": {"0.2.0.post2", "0.3.0.post1"},  # sync rollout only (B008)
    f"{R}.val_kwargs.do_sample": {"0.2.0.post2"},  # validation was greedy (A009, R103)
}


@pytest.fixture
def absent_reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    reads: dict[str, set[str]] = defaultdict(set)
    original = VerlConfig.get

    def get(self: VerlConfig, key: str, default: object = None) -> object:
        if not self.has(key):
            reads[key].add(self.version)
        return original(self, key, default)

    monkeypatch.setattr(VerlConfig, "get", get)
    return reads


def test_checks_read_only_keys_their_version_has(absent_reads: dict[str, set[str]]) -> None:
    for version in VERSIONS:
        for extra in VARIANTS.values():
            run_checks(load_config(None, [*BASE, *extra], verl_version=version))
    unexpected = {k: sorted(v - KNOWINGLY_ABSENT.get(k, set())) for k, v in absent_reads.items()}
    assert {k: v for k, v in unexpected.items() if v} == {}
