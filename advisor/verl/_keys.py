"""The config sections of verl's roles: one home for the key prefixes every stage uses.

verl's PPO trainer config (``verl/trainer/config/ppo_trainer.yaml`` of every release) places the actor,
its rollout engine and the reference model under ``actor_rollout_ref``; the critic and the reward model
are top-level sections.
"""

from __future__ import annotations

ACTOR = "actor_rollout_ref.actor"
ROLLOUT = "actor_rollout_ref.rollout"
REF = "actor_rollout_ref.ref"
CRITIC = "critic"
REWARD_MODEL = "reward_model"
