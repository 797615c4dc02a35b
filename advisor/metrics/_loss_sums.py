"""Put verl's logged losses on one scale across versions: the mean mini-batch loss of one optimizer step.

What the FSDP actor and critic (``verl/workers/actor/dp_actor.py``, ``verl/workers/critic/dp_critic.py``)
log as ``actor/pg_loss``, ``actor/kl_loss`` and ``critic/vf_loss`` changed twice, and the engine workers
that replaced them in 0.8.0 changed it back. With ``K`` optimizer steps per training step
(``ppo_epochs x ceil(B / M)``) of ``GA`` micro-batches each:

- up to v0.5.x: each micro-batch's loss is appended and ``reduce_metrics`` takes the mean:
  the mean micro-batch loss, L (v0.5.0:dp_actor.py:462,474; dp_critic.py:244);
- v0.6.0 to v0.6.1: the appended value is ``loss x loss_scale_factor`` with ``loss_scale_factor = 1/GA``
  (``micro_bsz / mini_bsz`` with dynamic batch size): L / GA (v0.6.1:dp_actor.py:434-436,509,522;
  dp_critic.py:239-249);
- v0.7.0 on: ``metrics[key] += loss x loss_scale_factor`` over every micro-batch of every mini-batch and
  epoch: the sum over optimizer steps of the mini-batch loss, about K x L (v0.7.0:dp_actor.py:434-436,
  536,549; dp_critic.py:195-196,256; unchanged at b178a3cd, 0.8.0.dev of January 2026);
- v0.8.0 on: the legacy workers are gone; the engine workers (``verl/workers/engine_workers.py``, FSDP and
  Megatron alike) log each loss as a ``Metric`` that sums the micro-batches' parts of the globally
  normalised mini-batch loss (mean over data-parallel ranks), one value per mini-batch, and the trainer
  takes the mean over mini-batches and epochs: L again (0.9.1:workers/utils/losses.py:73-81,119,141,
  176,200; engine_workers.py:326-334; utils/metric/utils.py:150-154 ``Metric.aggregate_dp``, 55-56;
  trainer/ppo/v1/trainer_base.py:1861-1863 ``reduce_metrics``. 0.8.0's critic logs the plain
  micro-batch mean, losses.py:180: also L).

The Megatron actor and critic append each micro-batch's unscaled loss in every version
(megatron_actor.py ``stats["actor/pg_loss"] = pg_loss``; megatron_critic.py), so they always log L.
"""

from __future__ import annotations

import dataclasses

from advisor.verl import at_least

from ._aliases import parse_version
from ._frame import MetricFrame

ACTOR_LOSSES = ("actor/pg_loss", "actor/kl_loss")
CRITIC_LOSSES = ("critic/vf_loss",)
STRATEGIES = ("fsdp", "fsdp2", "megatron")
_SCALE_CHANGED = "0.6.0"  # losses logged times loss_scale_factor
_SUMMED = "0.7.0"  # losses summed over micro-batches, mini-batches and epochs
_ENGINE_MEAN = "0.8.0"  # engine workers only: the mean mini-batch loss again
_NOTE = "loss sums: "


def normalize_loss_sums(
    frame: MetricFrame,
    *,
    verl_version: str,
    optimizer_steps_per_step: int,
    strategy: str,
    critic_optimizer_steps_per_step: int | None = None,
    grad_accum_steps: int | None = None,
    critic_grad_accum_steps: int | None = None,
    use_dynamic_bsz: bool = False,
) -> MetricFrame:
    """Rescale ``actor/pg_loss``, ``actor/kl_loss`` and ``critic/vf_loss`` to the mean mini-batch loss.

    That is what verl <= 0.5 logged, so values compare across versions and against ranges written for
    them. Returns a new frame; what was done (or why not) is appended to ``normalizations``.

    Args:
        frame: what :func:`load_metrics` returned.
        verl_version: the verl that wrote the log (``0.7.0``, ``v0.6.1``, ``main``).
        optimizer_steps_per_step: actor optimizer steps per training step,
            ``actor.ppo_epochs x ceil(data.train_batch_size / actor.ppo_mini_batch_size)``; at least 1.
        strategy: ``actor.strategy`` (``fsdp``, ``fsdp2`` or ``megatron``).
        critic_optimizer_steps_per_step: the same for the critic (``critic.ppo_epochs``,
            ``critic.ppo_mini_batch_size``); defaults to the actor's.
        grad_accum_steps: micro-batches per actor mini-batch on one GPU
            (``ppo_mini_batch_size x rollout.n / dp / ppo_micro_batch_size_per_gpu``); needed for
            v0.6.x logs only.
        critic_grad_accum_steps: the same for the critic; defaults to ``grad_accum_steps``.
        use_dynamic_bsz: ``actor.use_dynamic_bsz``; v0.6.x logs cannot be rescaled with it on.

    Raises:
        ValueError: a step count below 1, an unknown strategy, or a version that does not parse.
    """
    if optimizer_steps_per_step < 1:
        raise ValueError(f"optimizer_steps_per_step must be at least 1 but got {optimizer_steps_per_step}.")
    for name, value in (
        ("critic_optimizer_steps_per_step", critic_optimizer_steps_per_step),
        ("grad_accum_steps", grad_accum_steps),
        ("critic_grad_accum_steps", critic_grad_accum_steps),
    ):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1 but got {value}.")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)} but got {strategy!r}.")
    version = str(parse_version(verl_version))  # main -> its snapshot's version; text that is none raises
    if any(note.startswith(_NOTE) for note in frame.normalizations):
        return frame  # already done; rescaling twice would be wrong
    present = [m for m in (*ACTOR_LOSSES, *CRITIC_LOSSES) if m in frame.table]
    if not present:
        return frame
    shown = ", ".join(present)
    if strategy == "megatron":
        return _noted(frame, f"{shown}: left as logged (Megatron logs the mean micro-batch loss in every version)")
    if not at_least(version, _SCALE_CHANGED):
        return _noted(frame, f"{shown}: left as logged (verl {verl_version} logs the mean micro-batch loss)")
    if at_least(version, _ENGINE_MEAN):
        return _noted(frame, f"{shown}: left as logged (verl {verl_version}'s engine workers log the mean "
                             "mini-batch loss)")

    critic_steps = critic_optimizer_steps_per_step or optimizer_steps_per_step
    critic_accum = critic_grad_accum_steps or grad_accum_steps
    if at_least(version, _SUMMED):
        factors = {m: 1.0 / optimizer_steps_per_step for m in ACTOR_LOSSES}
        factors.update({m: 1.0 / critic_steps for m in CRITIC_LOSSES})
        why = "verl >= 0.7.0 sums it over micro-batches of all mini-batches and epochs"
    else:
        if use_dynamic_bsz:
            return _noted(
                frame,
                f"{shown}: NOT rescaled; verl {verl_version} logs loss x micro_bsz/mini_bsz per micro-batch "
                "with dynamic batch size, which cannot be undone from the config",
            )
        if grad_accum_steps is None:
            return _noted(
                frame,
                f"{shown}: NOT rescaled; verl {verl_version} logs the micro-batch loss / grad_accum_steps, "
                "and grad_accum_steps was not given",
            )
        factors = {m: float(grad_accum_steps) for m in ACTOR_LOSSES}
        factors.update({m: float(critic_accum or grad_accum_steps) for m in CRITIC_LOSSES})
        why = "verl 0.6.x logs the micro-batch loss x 1/grad_accum_steps"
    notes = [f"{metric} x {factors[metric]:.6g}" for metric in present]
    table = frame.table.scaled({metric: factors[metric] for metric in present})
    return _noted(dataclasses.replace(frame, table=table), f"{'; '.join(notes)} ({why})")


def _noted(frame: MetricFrame, note: str) -> MetricFrame:
    return dataclasses.replace(frame, normalizations=(*frame.normalizations, f"{_NOTE}{note}"))
