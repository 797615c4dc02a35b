"""No blind spots: a metric far outside the healthy band a rule cites is always reported.

The playbook's rules each judge a metric against a band (``healthy:`` in the rule file, with its
source). When a metric sits several times above its ceiling, or below its floor, and no rule at
warning level already names it, this adds an informational diagnosis: shown with its band and
source, never a diff (no rule says what caused it).
"""

from __future__ import annotations

import math
from dataclasses import replace

from advisor.codes import FAR_OUT_OF_BAND
from advisor.findings import Severity

from ._conditions import Outside
from ._diagnose import Diagnosis, Evidence
from ._harm import run_place
from ._rule_loader import Condition, Rule
from ._rule_schema import Status
from ._signals import RunFacts, Signals

FAR = 3.0  # "several times": above FAR x the ceiling, or below the floor / FAR
# zero is a normal level for these (an on-policy update, a frozen reference early on): their floor is no harm
NO_FLOOR = frozenset({"actor/pg_clipfrac", "actor/ppo_kl", "actor/kl_loss", "actor/grad_norm", "critic/score/max"})
ON_POLICY_ZERO = frozenset({"actor/pg_clipfrac", "actor/ppo_kl"})  # 0 by construction (dp_actor.py:543,590-594)


def bands(playbook: tuple[Rule, ...]) -> dict[str, tuple[float | None, float | None, Rule]]:
    """Per metric, the widest numeric band any rule cites, and the rule citing it (for tree and source)."""
    out: dict[str, tuple[float | None, float | None, Rule]] = {}
    for rule in playbook:
        for metric, band in rule.healthy.items():
            low, high = band.get("low"), band.get("high")
            if low is None and high is None:
                continue
            if metric in out:
                old_low, old_high, first = out[metric]
                low = low if old_low is None else (old_low if low is None else min(low, old_low))
                high = high if old_high is None else (old_high if high is None else max(high, old_high))
                out[metric] = (low, high, first)
            else:
                out[metric] = (low, high, rule)
    return out


def far_out_of_band(playbook: tuple[Rule, ...], facts: RunFacts, signals: Signals,
                    diagnoses: list[Diagnosis]) -> list[Diagnosis]:
    """An info diagnosis per metric far outside its band that no warning-level diagnosis names."""
    named = {e.metric for d in diagnoses if d.severity != "info" for e in d.evidence}
    found = []
    for metric, (low, high, rule) in sorted(bands(playbook).items()):
        if metric in named or not signals.has(metric) or (facts.on_policy and metric in ON_POLICY_ZERO):
            continue
        s = signals[metric]
        level = s.level
        if not math.isfinite(level):
            continue
        if high is not None and high > 0 and level > FAR * high:
            how, strength = f"{level / high:.0f}x its ceiling {high:g}", level / high
        elif low is not None and low > 0 and metric not in NO_FLOOR and level < low / FAR:
            how, strength = f"below its floor {low:g}", low / max(level, 1e-12)
        else:
            continue
        band = rule.healthy[metric]
        synthetic = replace(
            rule, id=FAR_OUT_OF_BAND.id, name=FAR_OUT_OF_BAND.name, severity=Severity.INFO, status=Status.STABLE,
            summary=f"{metric} is far outside its healthy band",
            conditions=(Condition("outside", metric, Outside(low=low, high=high)),), evidence=(metric,),
            message="", fixes=(), harm=None, checks=(f"find what moved {metric}: the rules that read it "
                                                    f"({rule.id}) did not fire on their other conditions",),
            rationale=f"{metric} sits {how} over the window; no rule's full pattern matched, so there is "
                      "no config change to propose, but a value this far out is rarely healthy.",
            sources=(str(band["source"]),),
        )
        text = f"{metric} is {level:.3g} in steps {signals.window.first_step}-{signals.window.last_step}, {how}"
        place = run_place(s, signals)  # where it sits among published runs, so a user can judge it
        if place is not None:
            text += f"; envelope: {place.text(metric, level)}"
        evidence = [Evidence(metric, level, _band_text(low, high), s.early_level,
                             (signals.window.first_step, signals.window.last_step), place)]
        found.append(Diagnosis(synthetic, text, evidence, strength))
    return found


def _band_text(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"{low:g}..{high:g}"
    return f">= {low:g}" if low is not None else f"<= {high:g}"



