"""The plain-dict resolver must resolve exactly as OmegaConf does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from advisor.verl._defaults import default_container, flatten_leaves, version_names
from advisor.verl._tree import MissingKey, Resolver, Unresolvable, copy_tree, update

CONFIGS = [(v, c) for v in version_names() for c in ("ppo_trainer", "ppo_megatron_trainer", "dapo_trainer")]


@pytest.mark.parametrize("version, config_name", CONFIGS)
def test_resolves_every_default_tree_like_omegaconf(version: str, config_name: str) -> None:
    tree = default_container(version, config_name)
    expected = OmegaConf.to_container(OmegaConf.create(tree), resolve=True, throw_on_missing=False)
    resolver = Resolver(tree)
    assert {k: resolver.value(k) for k in tree} == expected


SOURCES = ["actor_rollout_ref.rollout.n", "actor_rollout_ref.actor.ppo_mini_batch_size",
           "actor_rollout_ref.actor.ppo_max_token_len_per_gpu", "actor_rollout_ref.actor.use_dynamic_bsz",
           "critic.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.model.path", "trainer.project_name",
           "data.max_prompt_length", "actor_rollout_ref.actor.strategy"]


@settings(max_examples=60, deadline=None)
@given(changes=st.dictionaries(st.sampled_from(SOURCES),
                               st.one_of(st.integers(1, 4096), st.booleans(), st.none(),
                                         st.sampled_from(["fsdp2", "x/y"])), max_size=4))
def test_links_follow_changed_sources_like_omegaconf(changes: dict[str, object]) -> None:
    tree = default_container("0.10.0.dev", "ppo_trainer")
    for key, value in changes.items():
        update(tree, key, value)
    expected = flatten_leaves(OmegaConf.to_container(OmegaConf.create(tree), resolve=True, throw_on_missing=False))
    resolver = Resolver(tree)
    assert flatten_leaves({k: resolver.value(k) for k in tree}) == expected


def test_a_plain_link_to_a_missing_value_fails_like_omegaconf() -> None:
    tree = {"a": "???", "b": "${a}", "c": "${oc.select:a,7}"}
    with pytest.raises(MissingKey):
        Resolver(tree).value("b")
    with pytest.raises(Exception, match="Missing mandatory value"):
        OmegaConf.to_container(OmegaConf.create(tree), resolve=True)
    assert Resolver(tree).value("c") == OmegaConf.create(tree).c == 7


def test_other_resolvers_are_left_to_omegaconf() -> None:
    with pytest.raises(Unresolvable):
        Resolver({"a": "${oc.env:HOME}"}).value("a")
    with pytest.raises(Unresolvable):
        Resolver({"a": "${oc.select:b,${oc.env:HOME}}"}).value("a")


def test_a_nested_select_fallback_resolves_like_omegaconf() -> None:
    # verl >= 0.9 chains fallbacks: ${oc.select:actor...precision_debugger.config_path,${oc.select:global_profiler...}}
    tree = {"a": "${oc.select:b,${oc.select:c,7}}", "c": 1, "d": "${oc.select:b,${oc.select:e,7}}"}
    expected = OmegaConf.to_container(OmegaConf.create(tree), resolve=True)
    assert Resolver(tree).value("a") == expected["a"] == 1
    assert Resolver(tree).value("d") == expected["d"] == 7


def _containers(value: object) -> list[object]:
    """Every dict and list inside ``value`` (itself included)."""
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in _containers(v))]
    if isinstance(value, list):
        return [value, *(c for v in value for c in _containers(v))]
    return []


@pytest.mark.parametrize("version", version_names())
def test_copy_tree_is_a_deep_copy(version: str) -> None:
    """copy_tree (a fix's variant of the config is one) equals copy.deepcopy's copy and shares no dict or list
    with the original; values of other types go to copy.deepcopy."""
    import copy

    original = default_container(version, "ppo_trainer")
    original["extra"] = {"a set": {1, 2}, "nested": [[1, {"x": None}], (3, [4])]}
    copied = copy_tree(original)
    assert copied == copy.deepcopy(original)
    ours = {id(c) for c in _containers(original)}
    assert not ours & {id(c) for c in _containers(copied)}
    assert copied["extra"]["a set"] is not original["extra"]["a set"]
    assert copied["extra"]["nested"][1][1] is not original["extra"]["nested"][1][1]  # a list in a tuple
