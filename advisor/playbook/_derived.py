"""Quantities the config and a few logged levels imply, which verl does not log: first-class signals for rules.

- Flat groups (group estimators): with a binary reward and success rate p (critic/score/mean), a group of
  n responses scores all alike with probability p^n + (1-p)^n (independent Bernoulli draws). Prompts differ
  in difficulty, and p^n + (1-p)^n is convex in p, so the real share is at least this (Jensen): a floor.
  Such a group has zero advantage (verl/trainer/ppo/core_algos.py compute_grpo_outcome_advantage: score
  minus the group mean).
- Padding waste: with use_remove_padding=False every sequence of a micro-batch is computed at
  max_prompt_length + max_response_length (the rollout pads prompts and responses to those lengths:
  verl/experimental/agent_loop/agent_loop.py:548-551 @1dda039b), so the share of computed tokens that are
  pad is 1 - (prompt mean + response mean) / (max prompt + max response). remove-padding packs real tokens.
- The actor's mean learning rate over the planned run under verl's warm-up: num_warmup_steps is lr_warmup_steps when
  positive, else int(lr_warmup_steps_ratio x total steps) (verl/workers/fsdp_workers.py:652-660 @0.7.1), and the
  constant schedule multiplies the rate by step / num_warmup_steps until that step (get_constant_schedule_with_warmup,
  verl/utils/torch_functional.py:778-781 @0.7.1; the cosine one ramps alike from its init_lr_ratio 0,
  torch_functional.py:749-753), so over T steps the rate averages lr x mean(min(1, k / W) for k < T): lr x (T - 1) / 2W
  when the warm-up outlasts the run.
- Sampling step: verl trains the policy at the rollout temperature (it divides the logits by
  ``rollout.temperature`` before the log-probs of the update: verl/workers/actor/dp_actor.py:368 and :513 @0.7.1),
  and Adam moves the weights, hence the logits, by about the learning rate whatever the gradient's scale; the
  sampled policy softmax(logits / T) then moves by about lr / T per step. At a cold temperature the same lr
  is a larger step on the policy the rollout samples from.
- Generation waves: the memory model (advisor.memory) sizes the inference engine's KV cache on the GPU;
  the sequences one replica runs at once are min(cache tokens / (prompt mean + response mean), max_num_seqs),
  and a step's responses per replica divided by that is how many waves generation takes.

Each quantity carries its arithmetic as text, shown with the diagnosis that reads it. The ``*_above`` condition
tests that read them are the records at the end (listed in ``_conditions.TESTS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from advisor.load import VerlConfig
from advisor.plural import counted

from ._signals import RunFacts, Signals

if TYPE_CHECKING:
    from advisor.memory import KvCapacity

REMOVE_PADDING = "actor_rollout_ref.model.use_remove_padding"
TEMPERATURE = "actor_rollout_ref.rollout.temperature"
ACTOR_LR = "actor_rollout_ref.actor.optim.lr"
DYNAMIC_BSZ = "actor_rollout_ref.actor.use_dynamic_bsz"
# changes that only remove computed pad tokens: never more memory, so they need no GPU to check they fit
MEMORY_SAFE = {REMOVE_PADDING: True}


@dataclass(frozen=True)
class Quantity:
    value: float
    text: str  # the arithmetic, with the run's own numbers


def _number(cfg: VerlConfig, key: str) -> float | None:
    """A config value that is a number (a bool is not one), else None."""
    value = cfg.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def planned_steps(cfg: VerlConfig) -> int | None:
    """trainer.total_training_steps when set (verl/trainer/ppo/ray_trainer.py:435-440 @1dda039b: else
    len(dataloader) x total_epochs, which needs the dataset's size)."""
    value = _number(cfg, "trainer.total_training_steps")
    return int(value) if value is not None and value > 0 else None


WARMUP_STEPS = "actor_rollout_ref.actor.optim.lr_warmup_steps"
WARMUP_RATIO = "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio"
SCHEDULER_TYPES = ("actor_rollout_ref.actor.optim.lr_scheduler_type", "actor_rollout_ref.actor.optim.warmup_style")


def warmup_steps(cfg: VerlConfig, total: int) -> int:
    """verl's num_warmup_steps for the actor: lr_warmup_steps when positive, else int(lr_warmup_steps_ratio x total)
    (verl/workers/fsdp_workers.py:652-660 @0.7.1)."""
    steps = _number(cfg, WARMUP_STEPS)
    if steps is not None and steps > 0:
        return int(steps)
    return int((_number(cfg, WARMUP_RATIO) or 0.0) * total)


def mean_warmup_factor(warmup: int, total: int) -> float:
    """The mean over optimizer-schedule steps 0..total-1 of min(1, step / warmup): verl's constant schedule with a
    linear warm-up (verl/utils/torch_functional.py:778-781 @0.7.1)."""
    if warmup <= 0 or total <= 0:
        return 1.0
    return sum(min(1.0, k / warmup) for k in range(total)) / total


def flat_group_share(p: float, n: int) -> float:
    """P(all n Bernoulli(p) rewards alike) = p^n + (1-p)^n."""
    return p**n + (1.0 - p) ** n


@dataclass
class Derived:
    cfg: VerlConfig
    facts: RunFacts
    gpu_memory_gib: float | None
    missing: list[str] = field(default_factory=list)  # the flag that would enable a derived quantity
    _kv: KvCapacity | None = None
    _kv_done: bool = False

    def flat_groups(self, signals: Signals) -> Quantity | None:
        n = self.facts.plan.n
        if self.facts.mode != "grpo" or not n or n < 2 or not signals.has("critic/score/mean"):
            return None
        p = signals["critic/score/mean"].level
        low = signals["critic/score/min"].min if signals.has("critic/score/min") else 0.0
        high = signals["critic/score/max"].max if signals.has("critic/score/max") else 1.0
        if not (0.0 <= p <= 1.0) or low < 0.0 or high > 1.0:  # not a 0/1 reward: the Bernoulli model does not apply
            return None
        share = flat_group_share(p, n)
        text = (f"at least {share:.0%} of groups score alike: p^n + (1-p)^n = {p:.3g}^{n} + {1 - p:.3g}^{n} = "
                f"{p**n:.3g} all right + {(1 - p) ** n:.3g} all wrong (Bernoulli, p = critic/score/mean "
                f"{p:.3g}, n = rollout.n {n})")
        return Quantity(share, text)

    def warmup_mean_lr(self, signals: Signals) -> Quantity | None:
        """The actor's mean learning rate over the planned run under verl's warm-up (None: no warm-up, no stated total
        of steps, or a warm-up that ends within a cosine schedule, whose decay this does not model)."""
        total, lr = planned_steps(self.cfg), _number(self.cfg, ACTOR_LR)
        if not total or not lr or lr <= 0:
            return None
        warmup = warmup_steps(self.cfg, total)
        cosine = any(self.cfg.get(key) == "cosine" for key in SCHEDULER_TYPES)
        if warmup <= 0 or (cosine and warmup < total):
            return None
        factor = mean_warmup_factor(warmup, total)
        text = (f"verl's warm-up ramps the rate over {warmup} steps of the run's {total} (step / warm-up steps until "
                f"then, torch_functional.py:778-781 @0.7.1): its mean over the run is lr {lr:.3g} x {factor:.3g} = "
                f"{lr * factor:.3g}")
        return Quantity(lr * factor, text)

    def sampling_step(self, signals: Signals) -> Quantity | None:
        """lr / temperature: the step on the sampled policy (the logged actor/lr, else the config's optim.lr)."""
        temperature = _number(self.cfg, TEMPERATURE)
        if temperature is None or temperature <= 0:
            return None  # temperature 0 is greedy decoding: verl does not divide by it
        logged = signals.has("actor/lr") and math.isfinite(signals["actor/lr"].level)
        lr = signals["actor/lr"].level if logged else _number(self.cfg, ACTOR_LR)
        if lr is None or not lr > 0:
            return None
        step = lr / temperature
        where = "actor/lr" if logged else "optim.lr"
        text = (f"the sampled policy moves by about lr / temperature per step: {where} {lr:.3g} / rollout.temperature "
                f"{temperature:g} = {step:.3g} (verl trains at the rollout temperature: dp_actor.py:368 @0.7.1)")
        return Quantity(step, text)

    def padding_waste(self, signals: Signals) -> Quantity | None:
        plan = self.facts.plan
        if self.cfg.get(REMOVE_PADDING) or not plan.max_response_tokens or not signals.has("response_length/mean"):
            return None
        response = signals["response_length/mean"].level
        max_prompt, max_response = plan.max_prompt_tokens or 0, plan.max_response_tokens
        if signals.has("prompt_length/mean") and max_prompt:
            prompt = signals["prompt_length/mean"].level
            real, padded = prompt + response, max_prompt + max_response
            what = f"(prompt {prompt:.0f} + response {response:.0f}) / ({max_prompt} + {max_response})"
        else:  # the prompt side unknown: the response side alone
            real, padded = response, max_response
            what = f"response {response:.0f} / max_response_length {max_response}"
        waste = 1.0 - real / padded
        micro = plan.actor.grad_accum_steps
        layout = f", {micro} micro-batches per mini-batch" if micro else ""
        text = (f"{waste:.0%} of the tokens the update computes are padding: 1 - {what} = {waste:.2f} "
                f"(use_remove_padding=False pads every sequence to max length{layout})")
        return Quantity(waste, text)

    def kv(self) -> KvCapacity | None:
        """The memory model's KV capacity on the GPU (None when it cannot say; ``missing`` says why)."""
        if self._kv_done:
            return self._kv
        self._kv_done = True
        if not self.gpu_memory_gib:
            self._note("generation waves need the GPU to size the KV cache: pass --gpu NAME")
            return None
        from advisor.errors import ConfigError
        from advisor.memory import estimate_memory

        try:
            self._kv = estimate_memory(self.cfg, gpu_memory_gib=self.gpu_memory_gib).kv
        except ConfigError as exc:
            self._note(f"generation waves not sized: the memory model cannot read the model ({exc})")
        return self._kv

    def generation_waves(self, signals: Signals) -> Quantity | None:
        return self._waves(signals, cache_only=False)

    def kv_bound(self, signals: Signals) -> Quantity | None:
        """How many times the waves at the engine's own cap the KV cache forces: min(max_num_seqs, responses per
        replica) / the sequences the cache holds (> 1: the cache, not max_num_seqs, limits generation)."""
        return self._waves(signals, cache_only=True)

    def _waves(self, signals: Signals, cache_only: bool) -> Quantity | None:
        per_replica = self.facts.plan.responses_per_replica
        if not per_replica:
            return None
        kv = self.kv()
        if kv is None:
            return None
        lengths = [signals[m].level for m in ("prompt_length/mean", "response_length/mean") if signals.has(m)]
        typical = sum(lengths) if len(lengths) == 2 else float(kv.sequence_tokens)
        by_cache = kv.tokens / typical if kv.tokens else kv.sequences
        concurrent = by_cache if cache_only else min(by_cache, float(kv.max_num_seqs))
        if concurrent <= 0:
            return None
        waves = per_replica / concurrent
        if cache_only:
            cap = min(float(kv.max_num_seqs), per_replica)
            return Quantity(cap / by_cache, f"the KV cache holds {by_cache:.0f} sequences, {cap / by_cache:.1f}x fewer "
                                            f"than the {cap:.0f} a replica would run at once (min(max_num_seqs "
                                            f"{kv.max_num_seqs}, {per_replica:.0f} responses per replica))")
        text = (f"generation takes {counted(math.ceil(waves), 'wave')}: {per_replica:.0f} responses per replica / "
                f"{concurrent:.0f} at once = {waves:.1f} (the {kv.engine} KV cache holds {kv.tokens:,.0f} tokens "
                f"per GPU = {by_cache:.0f} sequences of {typical:.0f} tokens; max_num_seqs {kv.max_num_seqs}; "
                "advisor.memory's model)")
        return Quantity(waves, text)

    def _note(self, note: str) -> None:
        if note not in self.missing:
            self.missing.append(note)


def attach(signals: Signals, cfg: VerlConfig, facts: RunFacts) -> Derived:
    """Give ``signals`` the config-derived context the harm and derived tests read (once per run)."""
    if signals.derived is None or signals.derived.cfg is not cfg:
        signals.derived = Derived(cfg, facts, signals.gpu_memory_gib)
        signals.planned_steps = planned_steps(cfg)
    derived: Derived = signals.derived
    return derived


def _exceeds(found: Quantity | None, value: float) -> tuple[bool, float]:
    if found is None or not math.isfinite(found.value):
        return False, 0.0
    return found.value > value, found.value


class FlatGroupsAbove(NamedTuple):
    """The expected share of groups whose responses all score alike, p^n + (1-p)^n with p the score mean (a 0/1
    reward) and n = rollout.n, is above ``value`` (the condition's metric: critic/score/mean)."""

    value: float

    def reads(self) -> tuple[str, ...]:
        """The metrics the quantity reads besides the condition's own."""
        return ("critic/score/mean", "critic/score/min", "critic/score/max")

    def quantity(self, signals: Signals) -> Quantity | None:
        return signals.derived.flat_groups(signals) if signals.derived is not None else None

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        return _exceeds(self.quantity(signals), self.value)


class SamplingStepAbove(NamedTuple):
    """lr / rollout.temperature, the step on the policy the rollout samples from (verl divides the logits by the
    temperature when it trains), is above ``value`` (the condition's metric: actor/lr; the config's optim.lr when
    the run does not log it)."""

    value: float

    def reads(self) -> tuple[str, ...]:
        """The metrics the quantity reads besides the condition's own."""
        return ("actor/lr",)

    def quantity(self, signals: Signals) -> Quantity | None:
        return signals.derived.sampling_step(signals) if signals.derived is not None else None

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        return _exceeds(self.quantity(signals), self.value)


class PaddingWasteAbove(NamedTuple):
    """With use_remove_padding=False, the share of the update's tokens that are padding, 1 - mean lengths / max
    lengths, is above ``value`` (the condition's metric: response_length/mean)."""

    value: float

    def reads(self) -> tuple[str, ...]:
        """The metrics the quantity reads besides the condition's own."""
        return ("response_length/mean", "prompt_length/mean")

    def quantity(self, signals: Signals) -> Quantity | None:
        return signals.derived.padding_waste(signals) if signals.derived is not None else None

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        return _exceeds(self.quantity(signals), self.value)


class GenerationWavesAbove(NamedTuple):
    """A step's responses per rollout replica over the sequences its KV cache runs at once (the memory model,
    only when --gpu names the GPU) is above ``value``."""

    value: float

    def reads(self) -> tuple[str, ...]:
        """The metrics the quantity reads besides the condition's own."""
        return ("response_length/mean", "prompt_length/mean")

    def quantity(self, signals: Signals) -> Quantity | None:
        return signals.derived.generation_waves(signals) if signals.derived is not None else None

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        return _exceeds(self.quantity(signals), self.value)


class KvBoundAbove(NamedTuple):
    """min(max_num_seqs, responses per replica) / the sequences the KV cache holds (the memory model, only with
    --gpu) is above ``value``: the cache, not the engine's cap, limits how many sequences generate at once."""

    value: float

    def reads(self) -> tuple[str, ...]:
        """The metrics the quantity reads besides the condition's own."""
        return ("response_length/mean", "prompt_length/mean")

    def quantity(self, signals: Signals) -> Quantity | None:
        return signals.derived.kv_bound(signals) if signals.derived is not None else None

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        return _exceeds(self.quantity(signals), self.value)


class WarmupMeanLrBelow(NamedTuple):
    """The actor's mean learning rate over the planned run (trainer.total_training_steps) under verl's linear warm-up,
    lr x mean(min(1, k / warm-up steps)), is below ``value`` (the condition's metric: actor/lr; quiet without a
    warm-up or a stated total of steps)."""

    value: float

    def reads(self) -> tuple[str, ...]:
        """The metrics the quantity reads besides the condition's own (none: it is the config's)."""
        return ()

    def quantity(self, signals: Signals) -> Quantity | None:
        return signals.derived.warmup_mean_lr(signals) if signals.derived is not None else None

    def holds(self, signals: Signals, metric: str) -> tuple[bool, float]:
        found = self.quantity(signals)
        if found is None or not math.isfinite(found.value):
            return False, 0.0
        return found.value < self.value, found.value


DerivedTest = (FlatGroupsAbove | SamplingStepAbove | PaddingWasteAbove | GenerationWavesAbove | KvBoundAbove
               | WarmupMeanLrBelow)
DERIVED_TESTS: dict[str, type[DerivedTest]] = {
    "flat_groups_above": FlatGroupsAbove, "sampling_step_above": SamplingStepAbove,
    "padding_waste_above": PaddingWasteAbove, "generation_waves_above": GenerationWavesAbove,
    "kv_bound_above": KvBoundAbove, "warmup_mean_lr_below": WarmupMeanLrBelow,
}
DERIVED_KINDS = (FlatGroupsAbove, SamplingStepAbove, PaddingWasteAbove, GenerationWavesAbove, KvBoundAbove,
                 WarmupMeanLrBelow)
