"""The table of renamed and removed keys (knowledge/deprecated_keys.yaml) against verl's default trees,
and how the keys of configs written for an old verl are reported."""

from __future__ import annotations

from functools import cache

import pytest

from advisor.datafiles import load_knowledge
from advisor.load._config import load_config
from advisor.verl._defaults import BASE_CONFIGS, key_index, version_names
from advisor.verl._deprecated import entries, in_defaults, lookup, lost_keys, not_renamed, removed_by
from advisor.verl._version import version_key

# --- the table cannot fall behind the trees ---------------------------------------------------------


@cache
def _lost() -> tuple:
    return tuple(lost for config in BASE_CONFIGS for lost in lost_keys(config))


# Keys users set under a node whose default is null or free-form, which no default tree lists.
UNDER_FREE_FORM = ("actor_rollout_ref.ref.model.path",)


@cache
def _tree_keys(config: str) -> frozenset[str]:
    """Every key of every supported version's defaults and config dataclasses (no ``_target_``)."""
    keys: set[str] = set()
    for v in version_names():
        keys.update(k for k in key_index(v, config).paths if not k.endswith("._target_"))
    return frozenset(keys)


@cache
def _keys_ever(config: str) -> frozenset[str]:
    """The keys above, the table's concrete keys (some from releases older than the trees) and
    UNDER_FREE_FORM."""
    return _tree_keys(config) | {e["key"] for e in entries() if "*" not in e["key"]} | set(UNDER_FREE_FORM)


def test_every_key_a_release_lost_has_an_entry_or_is_listed_as_not_renamed() -> None:
    uncovered = [f"{lost.config} {lost.older} -> {lost.newer}: {lost.key}" for lost in _lost()
                 if lookup(lost.key, lost.newer, lost.config) is None
                 and not_renamed(lost.key, lost.older, lost.newer) is None]
    assert not uncovered, "keys lost without an entry in knowledge/deprecated_keys.yaml:\n" + "\n".join(uncovered)


def test_the_entry_for_a_lost_key_is_dated_between_the_two_versions() -> None:
    """A key lost between two releases is explained by an entry whose `since` lies after the older and
    not after the newer: the table's dates agree with verl's trees."""
    wrong = []
    for lost in _lost():
        found = lookup(lost.key, lost.newer, lost.config)
        if found is not None and not (
                version_key(lost.older) < version_key(found.entry["since"]) <= version_key(lost.newer)):
            wrong.append(f"{lost.config} {lost.older} -> {lost.newer}: {lost.key} (since {found.entry['since']})")
    assert not wrong, "\n".join(wrong)


def test_not_renamed_lists_only_keys_still_lost() -> None:
    for entry in load_knowledge("deprecated_keys.yaml")["not_renamed"]:
        assert any(not_renamed(lost.key, lost.older, lost.newer) is entry for lost in _lost()), entry["key"]


def test_every_successor_is_a_key_of_the_version_it_is_named_for() -> None:
    """For each key any verl had and each version where the table speaks of it, the successor it names
    is in that version's defaults: the advice can be followed as written."""
    wrong = []
    for config in BASE_CONFIGS:
        for key in _keys_ever(config):
            for v in version_names():
                found = lookup(key, v, config)
                if found is not None and found.replacement and not in_defaults(found.replacement, v, config):
                    wrong.append(f"{config} {v}: {key} -> {found.replacement}")
    assert not wrong, "\n".join(sorted(wrong))


def test_every_entry_applies_somewhere() -> None:
    used = set()
    for config in BASE_CONFIGS:
        for key in _keys_ever(config):
            for v in version_names():
                found = lookup(key, v, config)
                if found is not None:
                    used.update(id(h.entry) for h in found.hops)
    unused = [e["key"] + " since " + str(e["since"]) for e in entries() if id(e) not in used]
    assert not unused, unused


def test_a_removal_is_dated_when_the_key_left() -> None:
    """A concrete key an entry removes is in the defaults just before its `since` and not just after,
    in at least one trainer config (its `since` matches verl's trees)."""
    versions = version_names()
    wrong = []
    for entry in entries():
        key, since = entry["key"], version_key(entry["since"])
        if "*" in key or entry.get("still_read") or not any(key in _tree_keys(c) for c in BASE_CONFIGS):
            continue
        before = [v for v in versions if version_key(v) < since]
        after = [v for v in versions if version_key(v) >= since]
        configs = [entry["config"]] if entry.get("config") else BASE_CONFIGS
        if not any((not before or in_defaults(key, before[-1], c)) and not in_defaults(key, after[0], c)
                   for c in configs):
            wrong.append(f"{key} since {entry['since']}")
    assert not wrong, wrong


# --- configs written for an old verl ------------------------------------------------------------------

# verl keys of real fork launch scripts on verl 0.1-0.3 (the forks' own keys left out), both Apache-2.0:
# Jiayi-Pan/TinyZero @ 95df88f scripts/train_tiny_zero.sh, with the FSDP offload flags of its
# examples/ppo_trainer/run_deepseek7b_llm.sh:16,30; PeterGriffinJin/Search-R1 @ 19efcf7 train_ppo.sh.
TINYZERO = [
    "data.train_batch_size=256", "data.val_batch_size=1312", "data.max_prompt_length=256",
    "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B", "actor_rollout_ref.model.use_remove_padding=True",
    "actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.actor.ppo_mini_batch_size=64",
    "actor_rollout_ref.actor.ppo_micro_batch_size=8", "actor_rollout_ref.rollout.log_prob_micro_batch_size=8",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "actor_rollout_ref.ref.log_prob_micro_batch_size=4",
    "critic.model.path=Qwen/Qwen2.5-3B", "critic.ppo_micro_batch_size=8", "algorithm.kl_ctrl.kl_coef=0.001",
    "+trainer.val_before_train=False", "trainer.n_gpus_per_node=2", "trainer.nnodes=1",
    "actor_rollout_ref.actor.fsdp_config.grad_offload=False", "critic.model.fsdp_config.grad_offload=False",
]
SEARCH_R1 = [
    "data.train_batch_size=512", "data.val_batch_size=256", "algorithm.adv_estimator=gae",
    "actor_rollout_ref.model.path=meta-llama/Llama-3.2-3B", "actor_rollout_ref.actor.ppo_mini_batch_size=256",
    "actor_rollout_ref.actor.ppo_micro_batch_size=64", "actor_rollout_ref.actor.fsdp_config.grad_offload=true",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size=128", "actor_rollout_ref.ref.log_prob_micro_batch_size=128",
    "critic.model.path=meta-llama/Llama-3.2-3B", "critic.ppo_micro_batch_size=8",
    "critic.model.fsdp_config.param_offload=true", "critic.model.fsdp_config.grad_offload=true",
    "critic.model.fsdp_config.optimizer_offload=true", "trainer.n_gpus_per_node=4", "trainer.nnodes=1",
]
# verl v0.3.0.post1 examples/ppo_trainer/run_qwen2-7b_rm.sh (reward-model keys).
V03_REWARD_MODEL = [
    "reward_model.enable=True", "reward_model.model.path=sfairXC/FsfairX-LLaMA3-RM-v0.1",
    "reward_model.model.use_remove_padding=True", "reward_model.model.fsdp_config.param_offload=True",
    "reward_model.micro_batch_size_per_gpu=32", "critic.model.fsdp_config.param_offload=False",
]


def _by_key(cfg, fid: str) -> dict[str, str]:
    return {f.keys[0]: f.message for f in cfg.findings if f.id == fid}


@pytest.mark.parametrize("overrides", [TINYZERO, SEARCH_R1], ids=["tinyzero", "search-r1"])
@pytest.mark.parametrize("version", ["0.2", "0.3"])
def test_fork_keys_read_as_their_verl_get_no_removed_or_unknown_key(overrides: list[str], version: str) -> None:
    cfg = load_config(None, overrides, verl_version=version)
    old_keys = {o.split("=", 1)[0].lstrip("+") for o in overrides}
    errors = [f.message for f in cfg.findings if f.id in ("L001", "L003") and f.keys[0] in old_keys]
    if version == "0.2":
        assert not errors
    else:  # verl 0.3.0 dropped grad_offload (PR #284): the one key of these scripts that verl rejects
        assert {f.keys[0] for f in cfg.findings if f.id in ("L001", "L003")} <= {
            "actor_rollout_ref.actor.fsdp_config.grad_offload", "critic.model.fsdp_config.grad_offload"}
        assert "L001" not in {f.id for f in cfg.findings}


def test_fork_keys_read_as_0_9_1_name_their_successor() -> None:
    cfg = load_config(None, SEARCH_R1, verl_version="0.9.1")
    removed = _by_key(cfg, "L003")
    assert "is from verl ≤ 0.2.0.post2" in removed["actor_rollout_ref.actor.fsdp_config.grad_offload"]
    assert removed["actor_rollout_ref.actor.fsdp_config.grad_offload"].endswith(
        "in verl 0.9.1 it is 'actor_rollout_ref.actor.fsdp_config.param_offload'")
    # renamed in 0.3 (PR #284), then moved with the critic's FSDP config in 0.8 (PR #5870)
    assert removed["critic.model.fsdp_config.grad_offload"].endswith("in verl 0.9.1 it is 'critic.fsdp.param_offload'")
    assert "verl 0.3.0 replaced it with 'critic.model.fsdp_config.param_offload'" in \
        removed["critic.model.fsdp_config.grad_offload"]
    assert removed["critic.model.fsdp_config.optimizer_offload"].endswith("it is 'critic.fsdp.optimizer_offload'")
    assert "L001" not in {f.id for f in cfg.findings}  # every old key is explained, none is "unknown"


def test_tinyzero_read_as_0_9_1() -> None:
    cfg = load_config(None, TINYZERO, verl_version="0.9.1")
    removed, deprecated = _by_key(cfg, "L003"), _by_key(cfg, "L002")
    assert set(removed) == {"actor_rollout_ref.actor.fsdp_config.grad_offload", "critic.model.fsdp_config.grad_offload"}
    # the global micro batch sizes of verl 0.1-0.3 are still read, divided by the data-parallel size
    assert deprecated["actor_rollout_ref.actor.ppo_micro_batch_size"].endswith(
        "use 'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu'")
    assert next(f for f in cfg.findings if f.id == "L002" and f.keys[0] == "critic.ppo_micro_batch_size"
                ).details["scale"] == "per_gpu"
    assert "L001" not in {f.id for f in cfg.findings}


def test_reward_model_keys_of_0_3_read_as_0_9_1() -> None:
    cfg = load_config(None, V03_REWARD_MODEL, verl_version="0.9.1")
    deprecated, removed = _by_key(cfg, "L002"), _by_key(cfg, "L003")
    # verl 0.7.1 and 0.8.0 move these under reward.* (reward_loop.py migrate_legacy_reward_impl, called at
    # main_ppo.py:47 in 0.8.0); verl 0.9's main_ppo no longer calls it: accepted, never read (W014, not L002)
    assert "reward_model.enable" not in deprecated and "reward_model.model.path" not in deprecated
    from advisor.checks import check

    unread = {f.keys[0]: f for f in check(cfg).warnings if f.id == "W014"}
    assert unread["reward_model.enable"].keys[1] == "reward.reward_model.enable"
    assert unread["reward_model.model.path"].keys[1] == "reward.reward_model.model_path"
    old = _by_key(load_config(None, V03_REWARD_MODEL, verl_version="0.8.0"), "L002")
    assert old["reward_model.enable"].endswith("use 'reward.reward_model.enable'")
    assert old["reward_model.model.path"].endswith("use 'reward.reward_model.model_path'")
    # the FSDP reward-model worker's own settings went with it (PR #5194)
    assert set(removed) >= {"reward_model.model.use_remove_padding", "reward_model.model.fsdp_config.param_offload",
                            "reward_model.micro_batch_size_per_gpu"}
    assert all(m.endswith("remove it") for k, m in removed.items() if k.startswith("reward_model."))
    assert removed["critic.model.fsdp_config.param_offload"].endswith("it is 'critic.fsdp.param_offload'")


def test_reward_model_keys_read_as_0_7_0_get_nothing() -> None:
    cfg = load_config(None, V03_REWARD_MODEL, verl_version="0.7.0")
    assert not [f for f in cfg.findings if f.id in ("L001", "L002", "L003")]


@pytest.mark.parametrize(("key", "version", "successor"), [
    # 0.7/0.8 -> 0.9: the moves today's users meet
    ("critic.model.fsdp_config.param_offload", "0.9.1", "critic.fsdp.param_offload"),
    ("reward_manager.name", "0.9.1", "reward.reward_manager.name"),
    ("reward_model.sandbox_fusion.url", "0.9.1", "reward.sandbox_fusion.url"),
    ("actor_rollout_ref.rollout.skip_rollout", "0.9.1", "skip.rollout.enable"),
    ("actor_rollout_ref.rollout.update_weights_bucket_megabytes", "0.9.1",
     "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes"),
    # verl 0.4 profiler flags, through 0.5's actor_rollout_ref.profiler and 0.6's per-tool config
    ("actor_rollout_ref.actor.profiler.discrete", "0.9.1",
     "actor_rollout_ref.actor.profiler.tool_config.nsys.discrete"),
    ("trainer.val_generations_to_log_to_wandb", "0.9.1", "trainer.log_val_generations"),
])
def test_moved_key_names_its_successor(key: str, version: str, successor: str) -> None:
    cfg = load_config(None, [f"{key}=1"], verl_version=version)
    finding = next(f for f in cfg.findings if f.keys == (key,) and f.id in ("L002", "L003"))
    assert finding.details["replacement"] == successor
    assert key_index(version, "ppo_trainer").knows(successor)


def test_key_a_later_verl_brought_back_is_fine_where_it_exists() -> None:
    # actor profiler ranks: per role in 0.4, under actor_rollout_ref.profiler in 0.5 only, per role again in 0.6
    key = "actor_rollout_ref.actor.profiler.all_ranks"
    assert lookup(key, "0.4.1", "ppo_trainer") is None
    assert lookup(key, "0.5.0", "ppo_trainer").replacement == "actor_rollout_ref.profiler.all_ranks"
    assert lookup(key, "0.6.1", "ppo_trainer") is None


def test_typo_under_a_moved_subtree_stays_an_unknown_key() -> None:
    cfg = load_config(None, ["reward_model.enabel=true"], verl_version="0.9.1")
    assert [f.id for f in cfg.findings if f.keys == ("reward_model.enabel",)] == ["L001"]


@pytest.mark.parametrize(("value", "accepted_until", "refused_from", "fix"), [
    ("sglang_async", "0.4.1", "0.5.0", "sglang"),  # v0.4.1 fsdp_workers.py:449-452; PR #2258
    ("hf", "0.7.1", "0.8.0", "vllm"),  # v0.8.0 workers/rollout/base.py:83-87 (vllm, sglang, trtllm only)
])
def test_rollout_name_verl_stopped_accepting(value: str, accepted_until: str, refused_from: str, fix: str) -> None:
    override = [f"actor_rollout_ref.rollout.name={value}"]
    assert "L004" not in {f.id for f in load_config(None, override, verl_version=accepted_until).findings}
    finding = next(f for f in load_config(None, override, verl_version=refused_from).findings if f.id == "L004")
    assert finding.fix[0].new == fix


@pytest.mark.parametrize("config", BASE_CONFIGS)
def test_removed_by_is_lookups_removal(config: str) -> None:
    """removed_by (version detection asks it for every key and version) skips the history walk for a key the
    version's defaults have; it answers what lookup's ``removed`` does for every key any verl or the table
    knows, in every version."""
    disagree = [(key, v) for v in version_names() for key in sorted(_keys_ever(config))
                if removed_by(key, v, config) != bool((found := lookup(key, v, config)) and found.removed)]
    assert disagree == []
