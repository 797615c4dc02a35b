"""knowledge/check_thresholds.yaml parsed once into typed settings: each number in the file, with its source."""

from __future__ import annotations

import copy

import pytest
import yaml

from advisor.checks._thresholds import CheckThresholds, check_thresholds, parse_thresholds
from advisor.datafiles import knowledge_dir
from advisor.errors import PlaybookError

RAW = yaml.safe_load((knowledge_dir() / "check_thresholds.yaml").read_text())


def test_the_file_parses_into_typed_sections_each_with_its_source() -> None:
    t = check_thresholds()
    assert isinstance(t, CheckThresholds)
    assert t.learning_rate.actor_full.high == RAW["learning_rate"]["actor_full"]["high"] == 5.0e-5
    assert t.group_defaults.rollout_n == tuple(RAW["group_defaults"]["rollout_n"])
    assert t.response_length.thinking_models == tuple(RAW["response_length"]["thinking_models"])
    assert set(RAW) == {"learning_rate", "dynamic_token_budget", "rollout", "response_length", "group_defaults",
                        "lora", "clip_ratio", "group_sampling"}
    assert all(getattr(t, section).source == RAW[section]["source"] for section in RAW)
    assert check_thresholds() is t  # parsed once


def _broken(edit) -> str:
    data = copy.deepcopy(RAW)
    edit(data)
    with pytest.raises(PlaybookError) as info:
        parse_thresholds(data)
    text = str(info.value)
    assert text.startswith("knowledge/check_thresholds.yaml: ") and "\n" not in text
    return text


@pytest.mark.parametrize("edit, expected", [
    (lambda d: d["lora"].update(min_actr_lr=d["lora"].pop("min_actor_lr")),
     "lora.min_actr_lr: unknown field for lora (its fields: min_actor_lr, source); did you mean 'min_actor_lr'?"),
    (lambda d: d["rollout"].pop("max_num_batched_tokens_floor"),
     "rollout.max_num_batched_tokens_floor: rollout needs 'max_num_batched_tokens_floor'"),
    (lambda d: d["learning_rate"]["critic"].update(high="1e-3"), "learning_rate.critic.high: must be a number"),
    (lambda d: d["group_defaults"].update(rollout_n=[5, 4.5]), "group_defaults.rollout_n[1]: must be an integer"),
    (lambda d: d.pop("clip_ratio"), "clip_ratio: check_thresholds.yaml needs 'clip_ratio'"),
    (lambda d: d.update(group_sampled=d.pop("group_sampling")), "did you mean 'group_sampling'?"),
])
def test_a_broken_entry_is_one_line_naming_the_field(edit, expected: str) -> None:
    assert expected in _broken(edit)
