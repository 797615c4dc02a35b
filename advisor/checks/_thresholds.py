"""The thresholds of ``advisor check`` (knowledge/check_thresholds.yaml), parsed once into typed settings.

Every section of the file is a record below (a NamedTuple: cheap to define on ``advisor check``'s start-up)
and every field is required: a number lives in the file, with its source, and nowhere else (no fallback
repeated in a check). A missing, misspelt or mistyped entry is one line naming the file and the field.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

from advisor.datafiles import load_knowledge
from advisor.errors import PlaybookError
from advisor.typed import SchemaError, build

FILE = "check_thresholds.yaml"


class Band(NamedTuple):
    low: float
    high: float


class LearningRates(NamedTuple):
    """W005: the learning rates verl's docs and examples use, per role."""

    actor_full: Band
    actor_lora: Band
    critic: Band
    source: str


class DynamicTokenBudget(NamedTuple):
    """B009, B104: ppo_max_token_len_per_gpu >= factor x (max_prompt_length + max_response_length)."""

    recommended_factor: int
    source: str


class Rollout(NamedTuple):
    """R102: the smallest max_num_batched_tokens verl's docs recommend."""

    max_num_batched_tokens_floor: int
    source: str


class ResponseLength(NamedTuple):
    """W007: reasoning models need long responses; a DAPO overlong buffer should not cover most of them."""

    thinking_models: tuple[str, ...]
    thinking_min_tokens: int
    overlong_buffer_max_fraction: float
    source: str


class GroupDefaults(NamedTuple):
    """W001: the rollout.n values to propose, first the one verl's examples use."""

    rollout_n: tuple[int, ...]
    source: str


class Lora(NamedTuple):
    """W011: the least learning rate of a LoRA actor."""

    min_actor_lr: float
    source: str


class ClipRatio(NamedTuple):
    """W012: DAPO's clip-higher bounds."""

    dapo: Band
    source: str


class GroupSampling(NamedTuple):
    """W013: the sampling temperature below which a group's answers agree."""

    min_rollout_temperature: float
    recommended_temperature: float
    source: str


class CheckThresholds(NamedTuple):
    learning_rate: LearningRates
    dynamic_token_budget: DynamicTokenBudget
    rollout: Rollout
    response_length: ResponseLength
    group_defaults: GroupDefaults
    lora: Lora
    clip_ratio: ClipRatio
    group_sampling: GroupSampling


def parse_thresholds(data: object) -> CheckThresholds:
    """Raise PlaybookError naming the field (with "did you mean") for anything the file does not say right."""
    try:
        return build(CheckThresholds, data, "", kind="section", owner=FILE)
    except SchemaError as err:
        raise PlaybookError(f"{err.field}: {err.message}", path=f"knowledge/{FILE}", key=err.field,
                            suggestion=err.suggestion) from None


@cache
def check_thresholds() -> CheckThresholds:
    """The thresholds (parsed once)."""
    return parse_thresholds(load_knowledge(FILE))
