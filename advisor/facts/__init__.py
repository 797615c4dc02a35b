"""What verl will do with a config: the four batch-size layers, the mode and where the KL sits.

Worked out the way verl's workers and trainers do it (each function cites the verl code it mirrors).
"""

from __future__ import annotations

from ._batch import (
    GROUP_ESTIMATORS,
    MAX_SIZE,
    BatchPlan,
    ForwardLayer,
    UpdateLayer,
    as_int,
    as_size,
    batch_plan,
    is_megatron,
    kl_in_reward,
    ulysses_size,
    uses_critic,
    uses_reference,
    uses_v1_trainer,
    v1_padded_batch,
    world_size,
)

__all__ = [
    "GROUP_ESTIMATORS",
    "MAX_SIZE",
    "BatchPlan",
    "ForwardLayer",
    "UpdateLayer",
    "as_int",
    "as_size",
    "batch_plan",
    "is_megatron",
    "kl_in_reward",
    "ulysses_size",
    "uses_critic",
    "uses_reference",
    "uses_v1_trainer",
    "v1_padded_batch",
    "world_size",
]
