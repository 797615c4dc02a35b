"""Config against metrics: does this config describe the run that logged these metrics?

A diff is only as good as the config it edits. When the metrics contradict the config (another run's config, or
the config after ``--write`` next to the metrics of the run before it), the advisor says so, naming both values,
and computes its change from what the run used, not from what the file says now:

- the mode: ``critic/*`` losses logged by a run whose config trains no critic (or none by one that does);
  ``actor/kl_loss`` logged while ``use_kl_loss`` is off (verl logs it only with the KL loss on:
  verl/workers/utils/losses.py:132-142 at main 1dda039b; dp_actor.py ``if self.config.use_kl_loss`` in 0.7.1);
- logged hyper-parameters: ``actor/lr`` and ``critic/lr`` (the optimizer's current lr: engine_workers.py:214-215),
  ``actor/kl_coef`` (the KL loss coefficient, losses.py:142), ``actor/reward_kl_penalty_coeff`` (the in-reward KL
  coefficient; a fixed controller keeps ``algorithm.kl_ctrl.kl_coef``), ``response_length/max`` against
  ``data.max_response_length`` (verl cuts every response at the cap, so with ``response_length/clip_ratio`` above 0
  the longest response is the cap the run used);
- the batch: every step trains ``data.train_batch_size`` × ``rollout.n`` responses (ray_trainer.py:1540 repeats each
  prompt n times), and ``perf/total_num_tokens`` is the sum of their prompt and response tokens
  (ray_trainer.py:1553 ``global_token_num``, metric_utils.py:679) while ``prompt_length/mean`` and
  ``response_length/mean`` are their means (metric_utils.py:589, 573; all @1dda039b), so
  total ÷ (prompt mean + response mean) is the number of responses the run trained on a step;
- ``rollout.n`` under GRPO: an advantage is (score − group mean) / (group std + 1e-6) with torch's unbiased std
  (core_algos.py:321, 326 @1dda039b), and by Samuelson's inequality no member of a group of n lies more than
  (n−1)/√n standard deviations from its mean, so ``critic/advantages/max`` and ``/min`` bound n from below (a
  group with one response right and the rest wrong reaches the bound);
- ``prompt_length/max`` against ``data.max_prompt_length`` when ``data.filter_overlong_prompts`` drops every prompt
  longer than the cap (rl_dataset.py:269 @1dda039b);
- the verl version the metric names date the log to, against the version the config was read as.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.facts import N_KEY, as_size, v1_padded_batch
from advisor.findings import Change
from advisor.metrics import as_table
from advisor.verl import render_value, version_key

from ._median import median

if TYPE_CHECKING:
    import pandas as pd

    from advisor.load import VerlConfig
    from advisor.metrics import MetricFrame, StepTable, VersionHint

    from ._signals import RunFacts

_ACTOR_LR = "actor_rollout_ref.actor.optim.lr"
_CRITIC_LR = "critic.optim.lr"
_KL_LOSS_COEF = "actor_rollout_ref.actor.kl_loss_coef"
_KL_CTRL_COEF = "algorithm.kl_ctrl.kl_coef"
_CAP = "data.max_response_length"
_PROMPT_CAP = "data.max_prompt_length"
_BATCH = "data.train_batch_size"
_N = N_KEY
_COUNT_TOL = 0.01  # the responses per step, from console-rounded means, within 1% of a whole number of prompts
_STEADY = 0.9  # the share of steps that must train the same number of responses
_ADV_TOL = 0.002  # printed advantages (3-4 significant digits) against (n-1)/sqrt(n)
_REL_TOL = 0.05  # a logged float32 lr (1e-6 -> 9.99999997e-07) is the same value

# metric -> the key whose value the run used (read back into an as-run config)
LOGGED_KEYS: dict[str, str] = {
    "actor/lr": _ACTOR_LR,
    "critic/lr": _CRITIC_LR,
    "actor/kl_coef": _KL_LOSS_COEF,
    "actor/reward_kl_penalty_coeff": _KL_CTRL_COEF,
}
_TOKENS = ("perf/total_num_tokens", "prompt_length/mean", "response_length/mean")
_ADVANTAGES = ("critic/advantages/max", "critic/advantages/min")
CROSSCHECK_METRICS = (*LOGGED_KEYS, "critic/vf_loss", "actor/pg_loss", "actor/kl_loss", "response_length/max",
                      "response_length/clip_ratio", "prompt_length/max", *_TOKENS, *_ADVANTAGES)


@dataclass
class CrossCheck:
    """What the metrics say against the config: warnings, and the values the run used where they differ."""

    warnings: list[str] = field(default_factory=list)
    used: dict[str, float | int] = field(default_factory=dict)
    """config key -> the value the run logged, where the config says otherwise"""

    def as_run(self, cfg: VerlConfig) -> VerlConfig:
        """``cfg`` with the hyper-parameters the run logged (what a diff must start from)."""
        if not self.used:
            return cfg
        return cfg.with_changes([Change(k, cfg.get(k), v, "logged by the run") for k, v in self.used.items()])

    def _predates(self, change: Change, cfg: VerlConfig) -> bool:
        """The user's config is already past the run's value toward ``change.new``: the metrics predate it."""
        return change.key in self.used and _already_past(self.used[change.key], change.new, cfg.get(change.key))

    def apply(self, result: Any, cfg: VerlConfig) -> None:
        """Map the changes computed on the as-run config back onto the user's: a change the user's config already
        holds is dropped (the metrics predate it); the others keep the user's current value as ``old``.
        ``result``: a Suggestion."""
        result.warnings[:0] = self.warnings
        if not self.used:
            return
        kept = []
        for change in result.changes:
            current = cfg.get(change.key)
            if self._predates(change, cfg):
                result.warnings.append(
                    f"the metrics predate the change: {change.key} is already {render_value(current)} in the config "
                    f"(this run's metrics call for {render_value(change.new)}), while the run logged "
                    f"{self.used[change.key]:g}; "
                    "rerun with the new config before judging it again")
                continue
            kept.append(replace(change, old=current))  # the user's current value as ``old``
        dropped = len(kept) < len(result.changes)
        result.changes = kept
        # a ranked alternative obeys the same rule: never back toward what the run used, past the user's value
        result.alternatives = [[replace(c, old=cfg.get(c.key)) for c in changes] for changes in result.alternatives
                               if not any(self._predates(c, cfg) for c in changes)]
        if not kept:
            result.alternatives = []
            if dropped and result.decided_by is not None:  # the reason the text gives for proposing nothing
                result.notes.insert(0, f"{result.decided_by.rule.id}: the config already holds the change this run's "
                                       "metrics call for; they predate it")


def _already_past(used: Any, new: Any, current: Any) -> bool:
    """The config already holds the change, or goes further the same way: the run used ``used``, its metrics
    call for ``new``, and the config says ``current`` (lr 1e-5 logged, 5e-6 proposed, 2e-6 set: already past).
    A proposal must never move the user's value back toward what the run used."""
    if _same(current, new):
        return True
    numbers = [used, new, current]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers):
        return False
    return bool((new - used) * (current - new) > 0)  # current lies beyond new, on the side away from used


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=_REL_TOL)
    return bool(a == b)


def _finite(table: StepTable, name: str) -> np.ndarray:
    if name not in table:
        return np.array([])
    column = table.column(name)
    finite: np.ndarray = column[np.isfinite(column)]
    return finite


def cross_check(cfg: VerlConfig, metrics: StepTable | MetricFrame | pd.DataFrame, facts: RunFacts, *,
                version_hint: VersionHint | None = None) -> CrossCheck:
    """Compare ``cfg`` with what ``metrics`` (a StepTable, MetricFrame or DataFrame) logged."""
    table = as_table(metrics)
    scaled: dict[str, float] = dict(getattr(metrics, "scaled", None) or {})
    out = CrossCheck()

    def logged_value(metric: str) -> float | None:
        values = _finite(table, metric)
        return float(np.max(values)) if values.size else None

    vf_loss = _finite(table, "critic/vf_loss")
    if vf_loss.size and not facts.critic:
        out.warnings.append(f"the metrics hold critic/vf_loss on {vf_loss.size} steps (a critic was trained) but the "
                            f"config trains none (algorithm.adv_estimator={facts.estimator}): is this the run's "
                            "config?")
    elif facts.critic and not vf_loss.size and _finite(table, "actor/pg_loss").size >= 5:
        out.warnings.append("the config trains a critic (algorithm.adv_estimator=gae) but the metrics hold no "
                            "critic/vf_loss: is this the run's config?")
    kl_loss = _finite(table, "actor/kl_loss")
    if kl_loss.size and not cfg.get("actor_rollout_ref.actor.use_kl_loss"):
        out.warnings.append(f"the metrics hold actor/kl_loss on {kl_loss.size} steps, which verl logs only with the KL "
                            "loss on, but the config has actor_rollout_ref.actor.use_kl_loss=False")

    # verl <= 0.4.1's console logger prints `{value:.3f}` (aggregate_logger.py): an lr of 1e-6 reads 0.000
    coarse = version_hint is not None and any(e.startswith("console_three_decimals") for e in version_hint.evidence)
    for metric, key in LOGGED_KEYS.items():
        value, configured = logged_value(metric), cfg.get(key)
        if value is None or not isinstance(configured, (int, float)) or isinstance(configured, bool):
            continue
        if coarse and abs(value - configured) <= 5e-4 * scaled.get(metric, 1.0):
            continue  # the same within the three decimals printed (of `actor/lr(1e-4)`: its scaled value's)
        if metric == "actor/reward_kl_penalty_coeff" and cfg.get("algorithm.kl_ctrl.type") != "fixed":
            continue  # an adaptive controller moves it
        if metric.endswith("/lr") and value < configured and _warms_up(cfg, key):
            continue  # still warming up (or decayed): the peak lr may not have been reached
        if not _same(value, configured):
            out.warnings.append(f"{metric} logged {value:g} (the run's peak) but the config has {key}={configured:g}: "
                                f"the change below starts from the run's {value:g}")
            out.used[key] = value

    longest, cap = logged_value("response_length/max"), cfg.get(_CAP)
    clipped, run_cap = _run_cap(table)
    if longest is not None and isinstance(cap, int) and longest > cap:
        # the run's cap is at least its longest response (exactly it when the cut steps agree): a change starts
        # there, never *to* the cap that was already truncating
        used_cap = run_cap if run_cap is not None and run_cap >= longest else math.ceil(longest)
        out.warnings.append(f"response_length/max reached {longest:g} but the config caps responses at "
                            f"{_CAP}={cap}: verl cuts every response there, so the run used a larger cap; "
                            f"the change below starts from the run's {used_cap}")
        out.used[_CAP] = used_cap
    elif run_cap is not None and isinstance(cap, int) and run_cap < cap:
        # after --write raised the cap, these metrics are the old run's
        out.warnings.append(f"response_length/clip_ratio reached {clipped:g}, so responses were cut at the run's cap, "
                            f"{run_cap} tokens (response_length/max on every step that cut one), but the config has "
                            f"{_CAP}={cap}: the change below starts from the run's {run_cap}")
        out.used[_CAP] = run_cap

    _check_batch(cfg, table, facts, out)
    _check_prompt_cap(cfg, table, out)

    if version_hint is not None and version_hint.consistent and _releases_apart(cfg.version, version_hint):
        out.warnings.append(f"the metric names date the log to verl {version_hint.spec} "
                            f"({', '.join(version_hint.evidence[:2])}) but the config is read as verl {cfg.version}; "
                            "pass --verl-version if that is wrong")
    return out


def _run_cap(table: StepTable) -> tuple[float, int | None]:
    """(the highest clip ratio, the response cap the run used) from the steps that cut a response.

    verl's ``response_length/clip_ratio`` is the share of responses exactly ``max_response_length`` long
    (metric_utils.py: ``torch.eq(response_length, max_response_length)``), so on a step that cut one,
    ``response_length/max`` is the cap. The cap is known when every such step agrees on it."""
    if "response_length/clip_ratio" not in table or "response_length/max" not in table:
        return 0.0, None
    clip, longest = table.column("response_length/clip_ratio"), table.column("response_length/max")
    cut = np.isfinite(clip) & (clip > 0) & np.isfinite(longest)
    if not cut.any():
        return 0.0, None
    caps = longest[cut]
    same = float(caps.max()) == float(caps.min()) and float(caps.max()).is_integer()
    return float(clip[cut].max()), int(caps.max()) if same else None


def _warms_up(cfg: VerlConfig, lr_key: str) -> bool:
    optim = lr_key.rsplit(".", 1)[0]
    ratio, steps = cfg.get(f"{optim}.lr_warmup_steps_ratio"), cfg.get(f"{optim}.lr_warmup_steps")
    return bool((isinstance(ratio, (int, float)) and ratio > 0) or (isinstance(steps, int) and steps > 0))


_MINORS_APART = 2  # metric names that shifted one release either side (a dev build, a backport) are no contradiction


def _releases_apart(version: str, hint: VersionHint) -> bool:
    """The config's verl is at least two minor releases outside the range the metric names date the log to."""
    minor = version_key(version).release[:2]

    def apart(bound: str | None, below: bool) -> bool:
        if bound is None:
            return False
        other = version_key(bound).release[:2]
        gap = (other[0] - minor[0]) * 100 + other[1] - minor[1]
        return gap >= _MINORS_APART if below else -gap >= _MINORS_APART

    return apart(hint.lower, below=True) or apart(hint.upper, below=False)


def _per_step_responses(table: StepTable) -> tuple[float, int, tuple[float, float, float]] | None:
    """(responses trained per step, the steps it rests on, one median step's (tokens, prompt mean, response mean)):
    the median over steps of perf/total_num_tokens / (prompt_length/mean + response_length/mean)."""
    if not all(name in table for name in _TOKENS):
        return None
    total, prompt, response = (table.column(name) for name in _TOKENS)
    ok = np.isfinite(total) & np.isfinite(prompt) & np.isfinite(response) & (prompt + response > 0) & (total > 0)
    if not ok.any():
        return None
    ratio = total[ok] / (prompt[ok] + response[ok])
    typical = float(median(ratio))
    if np.mean(np.abs(ratio - typical) <= _COUNT_TOL * typical) < _STEADY:
        return None  # a batch that varies step to step (groups filtered and not refilled): no one count to compare
    middle = int(np.argsort(ratio)[len(ratio) // 2])
    shown = (float(total[ok][middle]), float(prompt[ok][middle]), float(response[ok][middle]))
    return typical, int(ok.sum()), shown


def _whole(x: float) -> int | None:
    k = round(x)
    return k if k >= 1 and abs(x - k) <= _COUNT_TOL * k else None


def samuelson_bound(n: int) -> float:
    """The largest |advantage| a GRPO group of n responses can give: (n-1)/sqrt(n) (Samuelson's inequality with
    the unbiased std; reached by one response apart from n-1 equal ones)."""
    return (n - 1) / math.sqrt(n)


def _group_size_from_advantages(cfg: VerlConfig, table: StepTable,
                                facts: RunFacts) -> tuple[float, int, int | None] | None:
    """(the run's largest |advantage|, the smallest n that allows it, n when it equals (n-1)/sqrt(n)), for verl's
    std-normalised GRPO only."""
    if facts.estimator != "grpo" or cfg.get("algorithm.norm_adv_by_std_in_grpo") is False:
        return None
    extremes = [np.abs(_finite(table, name)) for name in _ADVANTAGES]
    values = np.concatenate(extremes)
    if not values.size:
        return None
    largest = float(values.max())
    least = 2
    while samuelson_bound(least) < largest * (1 - _ADV_TOL) and least < 100_000:
        least += 1
    exact = least if abs(samuelson_bound(least) - largest) <= _ADV_TOL * largest else None
    return largest, least, exact


def _check_batch(cfg: VerlConfig, table: StepTable, facts: RunFacts, out: CrossCheck) -> None:
    """rollout.n and data.train_batch_size against the responses the run trained per step and its advantages."""
    batch, n = as_size(cfg.get(_BATCH)), facts.plan.n
    if not batch or not n:
        return
    advantages = _group_size_from_advantages(cfg, table, facts) if n >= 2 else None
    tokens = _per_step_responses(table)
    padded = v1_padded_batch(cfg, facts.plan.data_parallel)
    if padded is not None and padded[1] != padded[0]:
        tokens = None  # the V1 trainer's no-op samples are in perf/total_num_tokens: the count is not batch × n
    if tokens is not None:
        responses, steps, (total, prompt, response) = tokens
        arithmetic = (f"perf/total_num_tokens {total:,.0f} / (prompt_length/mean {prompt:.4g} + response_length/mean "
                      f"{response:.4g}) = {total / (prompt + response):,.1f} (the median over {steps} steps: "
                      f"{responses:,.1f})")
        configured = f"the config's {_BATCH} × {_N} is {batch} × {n} = {batch * n:,}"
        per_prompt, prompts = _whole(responses / batch), _whole(responses / n)
        # the advantages name the group size exactly when they reach (n-1)/sqrt(n): then n is the config's or not
        seen = advantages[2] if advantages is not None else None
        least = advantages[1] if advantages is not None else 1
        if (per_prompt is not None and per_prompt != n and seen in (None, per_prompt) and least <= per_prompt):
            out.warnings.append(
                f"the run trained {responses:,.0f} responses a step but {configured}: {arithmetic}, and "
                f"{responses:,.0f} / {batch} prompts = {responses / batch:.3f} responses each, so the run used "
                f"rollout.n={per_prompt}; the advice below starts from n={per_prompt}")
            out.used[_N] = per_prompt
            return
        if prompts is not None and prompts != batch and (per_prompt is None or seen == n):
            why = (f"critic/advantages reach (n-1)/√n = {samuelson_bound(n):.4g} for n={n}, so n is the config's, "
                   "and " if seen == n else "")
            out.warnings.append(
                f"the run trained {responses:,.0f} responses a step but {configured}: {arithmetic}; {why}"
                f"{responses:,.0f} / n={n} = {responses / n:,.1f} prompts, so the run used {_BATCH}={prompts}; "
                f"the advice below starts from {prompts}")
            out.used[_BATCH] = prompts
            return
    if advantages is not None and advantages[1] > n:
        largest, least, exact = advantages
        out.warnings.append(
            f"critic/advantages reached ±{largest:.4g}, but a GRPO group of {_N}={n} responses cannot give more "
            f"than (n-1)/√n = {samuelson_bound(n):.4g} (verl divides by the group's unbiased std: core_algos.py:321, "
            f"326), so the run's groups held at least {least} responses"
            + (f"; ±{largest:.4g} is (n-1)/√n for n={exact} (one response of the group apart from the rest), so "
               f"the advice below starts from n={exact}" if exact is not None else ""))
        if exact is not None:
            out.used[_N] = exact


def _check_prompt_cap(cfg: VerlConfig, table: StepTable, out: CrossCheck) -> None:
    """With data.filter_overlong_prompts, no prompt longer than max_prompt_length reaches the rollout."""
    longest, cap = _finite(table, "prompt_length/max"), cfg.get(_PROMPT_CAP)
    if (not longest.size or not isinstance(cap, int) or not cfg.get("data.filter_overlong_prompts")
            or cfg.get("actor_rollout_ref.rollout.multi_turn.enable")):
        return
    if float(longest.max()) > cap:
        out.warnings.append(
            f"prompt_length/max reached {float(longest.max()):g} but the config caps prompts at {_PROMPT_CAP}={cap} "
            "with data.filter_overlong_prompts=True, which drops every longer prompt before training "
            "(verl/utils/dataset/rl_dataset.py:269): the run used a larger cap")
