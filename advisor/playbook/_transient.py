"""A NaN or inf that did not last: a note, never a diagnosis.

verl checks the gradient norm before each optimizer step and, when it is not finite, prints "grad_norm is not
finite", zeroes the gradients and skips the step; the run trains on from the same weights. The check, by the
release that first has it in the file that does it (found in verl's tagged sources):

- 0.4.0 to 0.7.x, the FSDP actor and critic: verl/workers/actor/dp_actor.py:245-250 @ v0.4.0, :282-287 @ v0.4.1
  and v0.5.0, :297-306 @ v0.6.1, :323-332 @ v0.7.0, :405-414 @ v0.7.1; verl/workers/critic/dp_critic.py:134-139
  @ v0.4.0, :144-149 @ v0.7.0.
- 0.8.0 on, the engine workers: verl/workers/engine/fsdp/transformer_impl.py:698-704 @ v0.8.0, :793-798 @ v0.9.0.
- Megatron, every release: the optimizer returns ``update_successful`` and skips a step with inf/NaN gradients
  (verl/workers/actor/megatron_actor.py:383-385 @ v0.3.0.post1, :779-783 @ v0.7.0).
- Before 0.4.0 the FSDP actor stepped unconditionally (verl/workers/actor/dp_actor.py:161-169 @ v0.3.0.post1).

Either way the evidence is the run's own: a metric whose values are finite again after the non-finite one shows
weights that took no lasting harm (NaN weights make every later loss NaN). The rules that test ``nonfinite``
fire only when the value stays non-finite; a value that recovered is named here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from advisor.plural import counted
from advisor.verl import at_least

from ._signals import Signals

_SKIPS = ("verl skips an optimizer step whose gradient norm is not finite and trains on: "
          "verl/workers/engine/fsdp/transformer_impl.py:793-798 @ v0.9.0, verl/workers/actor/dp_actor.py:405-414 "
          "@ v0.7.1")
_NO_SKIP = ("verl before 0.4.0 steps its FSDP optimizer whatever the norm: verl/workers/actor/dp_actor.py:161-169 "
            "@ v0.3.0.post1")


def nonfinite_metrics(rules: Iterable[Any]) -> list[str]:
    """The metrics the playbook tests for NaN/inf, in rule order."""
    out: dict[str, None] = {}
    for rule in rules:
        stack = list(rule.conditions)
        while stack:
            cond = stack.pop()
            if cond.test == "nonfinite" and not cond.negate and cond.metric:
                out.setdefault(cond.metric)
            stack.extend(c for group in cond.any_of for c in group)
    return list(out)


def transient_notes(rules: Iterable[Any], signals: Signals, version: str | None) -> list[str]:
    """One note per metric that went NaN/inf and is finite again by its last logged step."""
    notes = []
    for metric in nonfinite_metrics(rules):
        s = signals[metric]
        if not s.recovered or s.first_nonfinite_step is None:
            continue
        why = _SKIPS if at_least(version, "0.4.0") or "grad_norm" not in metric else _NO_SKIP
        notes.append(f"{metric} was NaN/inf on {counted(s.nonfinite_steps, 'step')} (first at step "
                     f"{s.first_nonfinite_step}) and finite again after it, so the weights took no lasting harm: a "
                     f"transient, not a fault ({why})")
    return notes
