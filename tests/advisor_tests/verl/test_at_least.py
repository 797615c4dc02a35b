"""``advisor.verl.at_least``: one ordering and one rule for an unknown verl version (it counts as the newest
release, the reading detect_version gives a config with no telling key), shared by every "since verl X" decision."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from advisor import load_config
from advisor.facts import kl_in_reward, uses_v1_trainer
from advisor.memory import resolve_model
from advisor.memory._constants import constants
from advisor.memory._engines import ENGINES
from advisor.memory._read import read_workload
from advisor.memory._verl_paths import engine_max_model_len, sync_order, temperature_path
from advisor.verl import at_least, newest_release, version_names

REPO = Path(__file__).resolve().parents[3]
SOURCES = sorted([*(REPO / "advisor").rglob("*.py"), *(REPO / "sweeps").rglob("*.py")])
UNKNOWN = (None, "", "not-a-version")
OVERRIDES = [
    "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
    "actor_rollout_ref.rollout.name=vllm",
    "data.max_prompt_length=512",
    "data.max_response_length=1024",
]


class _AsVersion:
    """A loaded config read as another verl version (``version`` None: a config whose version is unknown)."""

    def __init__(self, cfg: Any, version: str | None) -> None:
        self._cfg, self.version = cfg, version

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cfg, name)


@pytest.fixture(scope="module")
def cfg() -> Any:
    return load_config(None, verl_version=newest_release(), overrides=OVERRIDES)


def test_at_least_is_pep_440_order_with_main_s_dev_builds_before_their_release() -> None:
    assert at_least("0.9.1", "0.9.1") and at_least("v0.9.1", "0.9") and at_least("0.10.0.dev", "0.9.1")
    assert not at_least("0.7.1", "0.8.0") and not at_least("0.8.0.dev", "0.8.0")
    assert at_least("0.8.0.dev", "0.8.0.dev") and at_least("0.8.0", "0.8.0.dev")


@pytest.mark.parametrize("unknown", UNKNOWN)
def test_an_unknown_version_is_at_least_every_release(unknown: str | None) -> None:
    assert all(at_least(unknown, v) for v in version_names())


@pytest.mark.parametrize("unknown", UNKNOWN)
def test_every_version_decision_reads_an_unknown_version_as_the_newest_release(cfg: Any, unknown: str | None) -> None:
    newest = newest_release()
    assert sync_order(unknown) == sync_order(newest)
    assert temperature_path(unknown, 0.7, False) == temperature_path(newest, 0.7, False)
    assert engine_max_model_len(unknown, None, 1536) == engine_max_model_len(cfg.version, None, 1536)
    for engine in ENGINES.values():
        for flag in (False, True):
            assert engine.keeps_weights_asleep(unknown, flag) == engine.keeps_weights_asleep(newest, flag)
            assert engine.restores_kv_with_weights(unknown, flag) == engine.restores_kv_with_weights(newest, flag)
    assert kl_in_reward(_AsVersion(cfg, unknown)) == kl_in_reward(cfg)
    assert uses_v1_trainer(_AsVersion(cfg, unknown)) == uses_v1_trainer(cfg)
    # the workload the memory model sizes, whole: the legacy-worker and vLLM start-up-check decisions among it
    spec, consts = resolve_model(cfg), constants()
    assert read_workload(_AsVersion(cfg, unknown), spec, consts) == read_workload(cfg, spec, consts)


def test_the_workload_does_tell_an_old_version_from_the_newest(cfg: Any) -> None:
    """The test above could not pass by ignoring the version: verl 0.7.1 runs the legacy workers."""
    spec, consts = resolve_model(cfg), constants()
    old = read_workload(_AsVersion(cfg, "0.7.1"), spec, consts)
    assert old.actor.legacy and not read_workload(cfg, spec, consts).actor.legacy


# a version compared by hand: version_key(a) < version_key(b), a tuple of the version's parts, packaging's Version
_HAND_COMPARISON = re.compile(r"version_key\([^()]*\)\s*[<>]=?\s*version_key|_version_tuple|\bVersion\(")
# where the ordering itself lives: advisor.verl (the version module, detection, deprecations, recipes) and the
# metric-alias table, whose ranges are intervals of versions, not "since verl X" decisions
_HOMES = ("advisor/verl/", "advisor/metrics/_aliases.py")


def test_every_since_verl_x_decision_asks_at_least() -> None:
    """Outside advisor.verl, no module orders versions itself: each asks at_least (and so gets its one rule for
    an unknown version)."""
    found = [f"{p.relative_to(REPO)}:{n}" for p in SOURCES if not str(p.relative_to(REPO)).startswith(_HOMES)
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if _HAND_COMPARISON.search(line)]
    assert not found, found
