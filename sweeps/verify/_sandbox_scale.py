"""The CPU sandbox's own scale for ``advisor verify``'s trials (``knowledge/verify.yaml`` ``sandbox_scale``).

A run's config is sized for its GPUs: 512 prompts x 5 responses of up to 1,024 tokens. The sandbox trains a
73k-parameter model on one CPU thread, where that size costs seconds a step and, once a high learning rate
makes the policy ramble toward the response cap, gigabytes (issue #38: 13.6 GB at step 42). So when the trial
command is the sandbox, every trial gets the sandbox's scale, unless the user says otherwise (``--own-scale``,
``--steps``, or the key set as KEY=VALUE):

- every batch size (``data.train_batch_size``, the mini- and micro-batches of actor, critic, rollout and
  reference) divided by one factor, the smallest that brings ``data.train_batch_size`` to ``prompts`` or below
  and divides each of them, so the mini-batches per step and the micro-batch layout keep their ratios;
- ``data.max_response_length`` capped;
- the trial's steps capped, when ``--steps`` was not given.

A key the sweep moves (or a fix applied to every trial) is left as it is: the sweep is about it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from advisor.datafiles import knowledge_dir, load_knowledge
from advisor.errors import PlaybookError
from advisor.findings import Change
from advisor.load import VerlConfig
from advisor.verl import parse_override

TRAIN_BATCH = "data.train_batch_size"
RESPONSE_LENGTH = "data.max_response_length"
BATCH_KEYS = (
    TRAIN_BATCH,
    "actor_rollout_ref.actor.ppo_mini_batch_size",
    "critic.ppo_mini_batch_size",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
    "critic.ppo_micro_batch_size_per_gpu",
    "reward_model.micro_batch_size_per_gpu",
)


@dataclass(frozen=True)
class SandboxScale:
    """What the sandbox's scale changes for every trial: the changes, the steps cap, and the plan's line."""

    changes: tuple[Change, ...] = ()
    steps: int | None = None  # the trials' steps when the user gave no --steps
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def overrides(self) -> list[str]:
        return [c.override() for c in self.changes]


def load_scale() -> dict[str, int]:
    raw = load_knowledge("verify.yaml").get("sandbox_scale")
    keys = ("prompts", "max_response_length", "steps")
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), int) and raw[k] > 0 for k in keys):
        raise PlaybookError(f"sandbox_scale needs positive integers {', '.join(keys)}",
                            path=str(knowledge_dir() / "verify.yaml"))
    return {k: int(raw[k]) for k in keys}


def _int(cfg: VerlConfig, key: str) -> int | None:
    value = cfg.get(key) if cfg.has(key) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _used(cfg: VerlConfig, key: str) -> bool:
    """Whether the run has the role ``key`` sizes (no critic without GAE, no reward model unless enabled)."""
    from advisor.facts import uses_critic

    if key.startswith("critic."):
        return uses_critic(cfg)
    if key.startswith("reward_model."):
        return bool(cfg.get("reward_model.enable")) if cfg.has("reward_model.enable") else False
    return True


def _factor(batch: int, target: int, sizes: Iterable[int]) -> int:
    """The smallest factor >= batch / target that divides ``batch`` and every size; 1 when none does."""
    sizes = list(sizes)
    for factor in range(-(-batch // target), batch + 1):
        if all(s % factor == 0 for s in sizes):
            return factor
    return 1


def sandbox_scale(cfg: VerlConfig, user_overrides: Sequence[str], kept: Iterable[str],
                  steps_given: bool) -> SandboxScale:
    """The sandbox's scale for trials of ``cfg``.

    Args:
        user_overrides: the KEY=VALUE the user passed (a key set there is the user's, never rescaled).
        kept: keys the sweep moves or applies to every trial (left as they are).
        steps_given: the user chose the trials' steps (--steps): no steps cap.
    """
    scale = load_scale()
    user = {parse_override(o).key.lstrip("+") for o in user_overrides if "=" in o}
    kept = set(kept)
    changes: list[Change] = []
    notes: list[str] = []
    batch = _int(cfg, TRAIN_BATCH)
    present = {k: v for k in BATCH_KEYS if (v := _int(cfg, k)) is not None and _used(cfg, k)}
    if batch is not None and batch > scale["prompts"] and not (set(present) & (user | kept)):
        factor = _factor(batch, scale["prompts"], present.values())
        if factor > 1:
            changes += [Change(k, v, v // factor, "the sandbox's scale") for k, v in present.items()]
    if changes:
        from advisor.playbook import config_errors

        if config_errors(cfg.with_changes(changes)) - config_errors(cfg):  # a layout verl would refuse: keep it
            notes.append(f"the batch sizes stay the config's: divided by {factor} they break verl's batch rules")
            changes = []
    length = _int(cfg, RESPONSE_LENGTH)
    if length is not None and length > scale["max_response_length"] and not {RESPONSE_LENGTH} & (user | kept):
        changes.append(Change(RESPONSE_LENGTH, length, scale["max_response_length"], "the sandbox's scale"))
    steps = None if steps_given else scale["steps"]
    if changes or steps is not None:
        what = ", ".join(f"{c.key}={c.new} (the config's {c.old})" for c in changes)
        parts = [what] if what else []
        if steps is not None:
            parts.append(f"at most {steps} steps")
        notes.append("the trials run the CPU sandbox at its own scale (knowledge/verify.yaml sandbox_scale): "
                     + "; ".join(parts) + "; --own-scale runs it at the config's sizes")
    return SandboxScale(tuple(changes), steps, tuple(notes))
