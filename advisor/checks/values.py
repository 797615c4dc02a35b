"""Enumerated values: a value verl does not know, with "did you mean" (knowledge/verl_enums.yaml).

The lists are read from verl's source of each version by scripts/generate_verl_enums.py. A value
close to a known one is almost surely a typo: an error with the known value as the fix. A value far
from every known one may be a custom registration (register_adv_est, register_policy_loss): a warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypedDict

from advisor.datafiles import load_knowledge
from advisor.findings import Severity
from advisor.spelling import closest as nearest
from advisor.verl import at_least, version_key

from ._registry import CheckContext, Issue, check


class Enumeration(TypedDict):
    """One enumerated key of a verl version in knowledge/verl_enums.yaml."""

    key: str  # the config key (algorithm.adv_estimator)
    values: list[str]  # the values verl accepts
    source: str  # the verl file:line that lists them


def enumeration(version: str, name: str) -> Enumeration | None:
    """The {key, values, source} verl of this version accepts for one enumerated key (nearest older release)."""
    versions: dict[str, dict[str, Enumeration]] = load_knowledge("verl_enums.yaml").get("versions", {})
    if version in versions:
        return versions[version].get(name)
    older = [v for v in versions if at_least(version, v)]
    chosen = max(older, key=version_key) if older else min(versions, key=version_key, default=None)
    return versions[chosen].get(name) if chosen else None


def closest(value: str, known: list[str]) -> str | None:
    """The known value a typo most likely meant (edit distance within CPython's cut-off, ``advisor.spelling``):
    'grpoo' and 'vlm' are one edit from 'grpo' and 'vllm'; 'ppo' is two from 'gpg', past the cut-off of 1.5."""
    found = nearest(value, known, limit=1)
    return found[0] if found else None


def unknown_value(ctx: CheckContext, name: str, what: str, custom: str | None) -> Iterator[Issue]:
    """An Issue when the config's value of an enumerated key is not one verl's version knows."""
    enum = enumeration(ctx.cfg.version, name)
    if enum is None:
        return
    key, known = enum["key"], [str(v) for v in enum["values"]]
    value = ctx.get(key)
    if not isinstance(value, str) or value in known:
        return
    guess = closest(value, known)
    listed = ", ".join(known)
    if guess is not None:
        yield Issue(f"{what} '{value}' is not one verl {ctx.cfg.version} knows; did you mean '{guess}'? "
                    f"(known: {listed}; {enum['source']})", (key,), [{key: guess}],
                    f"'{value}' looks like a typo of '{guess}'", severity=Severity.ERROR)
    elif custom:
        yield Issue(f"{what} '{value}' is not built into verl {ctx.cfg.version} ({listed}); it must be registered "
                    f"with {custom} before training starts", (key,), severity=Severity.WARNING)
    else:
        yield Issue(f"{what} '{value}' is not one verl {ctx.cfg.version} knows ({listed}; {enum['source']})", (key,))


@check("A014", "unknown-policy-loss", Severity.WARNING, "verl/trainer/ppo/core_algos.py (register_policy_loss, "
       "get_policy_loss_fn raises for an unknown name); knowledge/verl_enums.yaml",
       sources={"<0.6.0": "verl/trainer/ppo/core_algos.py:34-54 (0.4.1) (register_policy_loss, get_policy_loss_fn); "
                          "knowledge/verl_enums.yaml",
                ">=0.6.0": "verl/trainer/ppo/core_algos.py:53-83 (0.6.1, 0.8.0, 0.9.1) (register_policy_loss, "
                           "get_policy_loss_fn); knowledge/verl_enums.yaml"},
       verl=">=0.4.0")  # verl 0.2/0.3 had one PPO loss (no loss_mode)
def policy_loss_known(ctx: CheckContext) -> Iterator[Issue]:
    """actor.policy_loss.loss_mode should be a policy loss verl registers (custom ones need register_policy_loss)."""
    yield from unknown_value(ctx, "policy_loss", "policy loss_mode", "register_policy_loss")


@check("R007", "unknown-rollout-name", Severity.ERROR,
       "verl/workers/rollout/base.py (_ROLLOUT_REGISTRY: get_rollout_class asserts the name); "
       "knowledge/verl_enums.yaml",
       sources={"<0.6.0": "verl/workers/fsdp_workers.py (_build_rollout: one branch per engine name); "
                          "knowledge/verl_enums.yaml",
                ">=0.6.0,<0.7.0": "verl/workers/rollout/base.py:81-99 (0.6.1) (get_rollout_class asserts the name); "
                                  "knowledge/verl_enums.yaml",
                ">=0.7.0,<0.9.0": "verl/workers/rollout/base.py:83-100 (0.7.1, 0.8.0) (get_rollout_class asserts the "
                                  "name); knowledge/verl_enums.yaml",
                ">=0.9.0": "verl/workers/rollout/base.py:89-106 (0.9.1) (get_rollout_class asserts the name); "
                           "knowledge/verl_enums.yaml"})
def rollout_name_known(ctx: CheckContext) -> Iterator[Issue]:
    """actor_rollout_ref.rollout.name must be an inference engine verl builds."""
    if ctx.get("actor_rollout_ref.rollout.name") in (None, "???"):
        return  # R001 reports a missing name
    entry = ctx.cfg.entry
    # a recipe may register its own engine (verl-recipe dynamo/register.py registers 'dynamo' in verl's registry)
    custom = "the recipe's own rollout registration" if entry is not None and entry.recipe is not None else None
    yield from unknown_value(ctx, "rollout_name", "rollout name", custom)
