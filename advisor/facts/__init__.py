"""What verl will do with a config: the four batch-size layers, the mode and where the KL sits.

The one reading of the batch keys (train_batch_size, rollout.n, the mini and micro batches) and of the parallel
layout: checks, memory and the playbook take them from :class:`BatchPlan` (or :func:`rollout_n`), never by key
(tests/advisor_tests/facts/test_one_reading.py).

Worked out the way verl's workers and trainers do it (each function cites the verl code it mirrors).
"""

from __future__ import annotations

from ._batch import (
    GROUP_ESTIMATORS,
    MAX_SIZE,
    MICRO_PASSES,
    N_KEY,
    SIZE_KEYS,
    BatchPlan,
    ForwardLayer,
    MicroSetting,
    UpdateLayer,
    as_int,
    as_size,
    batch_plan,
    clip_bounds,
    is_megatron,
    kl_in_reward,
    micro_setting,
    mistyped_keys,
    rollout_n,
    ulysses_size,
    unresolved_sizes,
    uses_critic,
    uses_reference,
    uses_v1_trainer,
    v1_padded_batch,
    world_size,
)

__all__ = [
    "GROUP_ESTIMATORS",
    "MAX_SIZE",
    "MICRO_PASSES",
    "N_KEY",
    "SIZE_KEYS",
    "BatchPlan",
    "ForwardLayer",
    "MicroSetting",
    "UpdateLayer",
    "as_int",
    "as_size",
    "batch_plan",
    "clip_bounds",
    "is_megatron",
    "kl_in_reward",
    "micro_setting",
    "mistyped_keys",
    "rollout_n",
    "ulysses_size",
    "unresolved_sizes",
    "uses_critic",
    "uses_reference",
    "uses_v1_trainer",
    "v1_padded_batch",
    "world_size",
]
