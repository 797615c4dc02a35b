"""Every number a rule prints is the run's own, and a factor its text states is the diff's factor.

Each rule's message is rendered on its own `fires` fixtures (tests/rules_tests/fixtures/<ID>.yaml). A figure in
the message must be a value of the run (a metric's window level, early level, last, min, max, relative change, or
the window's steps) or a threshold the rule itself tests (its conditions, its healthy band). A figure with a decimal
point in the rationale (which is not templated) must be a threshold, a band, a fix's value, or sit beside the
citation it comes from. A factor the text states for the change ("5x larger", "halving") must be the diff's.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml

from advisor.playbook._conditions import given_args
from advisor.playbook._diagnose import Diagnosis, diagnose
from advisor.playbook._rule_loader import load_playbook
from advisor.playbook._signals import Signals, run_facts

from ._runs import build_run, load_fixture

RULES = [r for r in load_playbook() if load_fixture(r.id).get("fires")]
_NUMBER = re.compile(r"(?<![\w/@.:-])(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)(%?)(?![\w/@]|\.\d)")
# a citation: file:line, a version, an issue or arXiv number, a section
_CITATION = re.compile(r"\S+\.(?:py|rst|md|yaml|sh)(?::[\d,\-]+)?|\bv?\d+\.\d+\.\d+\S*|#\d+|arXiv:\S+|§\S+|"
                       r"\b(?:in|since|after|before|from) v?\d+\.\d+\b")
# "critic/vf_explained_var is -0.16", "actor/entropy (0.457)", "critic/score/mean fell to 0.421": that metric's value
_NAMED = re.compile(r"([\w@.-]+/[\w/@.-]*\w) (?:is|is flat at|stays at|fell to|rose to|\(|reach|reaches)\s?"
                    r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)")
_FACTOR = re.compile(r"(\d+(?:\.\d+)?)x (?:larger|smaller|higher|lower|bigger)|\b(halv\w*|doubl\w*)")


def _thresholds(rule) -> set[float]:
    out: set[float] = set()

    def walk(conds) -> None:
        for c in conds:
            out.update(float(v) for v in given_args(c.params).values() if isinstance(v, (int, float)))
            for group in c.any_of or ():
                walk(group)

    walk(rule.conditions)
    if rule.harm is not None:
        for group in rule.harm.any_of:
            walk(group)
    for band in rule.healthy.values():
        out.update(float(band[k]) for k in ("low", "high") if band.get(k) is not None)
    out.update([v * 100 for v in out])  # "over 60% of each step" for a fraction 0.6
    for fix in rule.fixes:
        out.update(float(v) for v in fix.set.values() if isinstance(v, (int, float)) and not isinstance(v, bool))
        out.update(float(c.value) for c in fix.when_config if isinstance(c.value, (int, float)))
    return out


def _config_values(cfg, rule) -> set[float]:
    """The config's values of the keys the rule reads or changes ("rollout.n is 1", "the clip (1.0)")."""
    keys = [c.key for c in rule.config] + [k for f in rule.fixes for k in f.set]
    keys += [c.key for f in rule.fixes for c in f.when_config]
    values = (cfg.get(k) for k in keys)
    return {float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _warmup_figures(cfg) -> set[float]:
    """The warm-up arithmetic a learning-rate rule may print, from verl's schedule: num_warmup_steps W is
    lr_warmup_steps when positive, else int(lr_warmup_steps_ratio x T) (fsdp_workers.py:652-660 @0.7.1), the rate of
    step k is lr x min(1, k / W) (torch_functional.py:778-781 @0.7.1), so its mean over T steps is lr x that mean."""
    optim = "actor_rollout_ref.actor.optim."
    lr, total = cfg.get(optim + "lr"), cfg.get("trainer.total_training_steps")
    if not isinstance(lr, (int, float)) or not isinstance(total, int) or total <= 0:
        return set()
    steps = cfg.get(optim + "lr_warmup_steps")
    ratio = float(cfg.get(optim + "lr_warmup_steps_ratio") or 0)
    warmup = steps if isinstance(steps, int) and steps > 0 else int(ratio * total)
    if warmup <= 0:
        return set()
    factor = sum(min(1.0, k / warmup) for k in range(total)) / total
    return {float(lr), float(warmup), float(total), factor, lr * factor}


# a healthy bound one rule cites (``ppo_kl`` <= 0.01, arXiv:1707.06347) may be quoted by another
_BANDS = {float(b[k]) for r in load_playbook() for b in r.healthy.values() for k in ("low", "high")
          if b.get(k) is not None}


ENVELOPE = Path(__file__).resolve().parents[2] / "knowledge" / "published_envelope.yaml"


def _stats(s) -> tuple[float, ...]:
    return (s.level, s.early_level, s.last, s.min, s.max, s.peak)


def _bernoulli_figures(signals: Signals, config: set[float]) -> set[float]:
    """The flat-group arithmetic a group-estimator rule may print, from its formula: with success rate p (the
    score's level) and n responses a prompt, p^n groups are all right and (1-p)^n all wrong
    (advisor/playbook/_derived.py's docstring; verl's GRPO advantage is zero for such a group)."""
    if not signals.has("critic/score/mean"):
        return set()
    p = signals["critic/score/mean"].level
    out = {p, 1 - p}
    for n in (int(v) for v in config if float(v).is_integer() and 2 <= v <= 1024):
        out |= {p**n, (1 - p) ** n, (p**n + (1 - p) ** n) * 100}
    return out


def _run_values(signals: Signals, rule, config: set[float] = frozenset()) -> set[float]:
    out = {float(signals.window.first_step), float(signals.window.last_step)}
    out.update(float(step) for step in signals.table.steps)  # a step the run logged ("not improved since step 51")
    names = {c.metric for c in rule.conditions if c.metric} | set(rule.evidence)
    harm = [c for group in rule.harm.any_of for c in group] if rule.harm is not None else []
    names |= {c.metric for c in harm if c.metric and "*" not in c.metric}
    for c in harm:  # "has stalled since step 51 (0.448 -> ...)": the level where the stall is measured from
        if c.test == "stalled" and c.metric in names and signals[c.metric].all_values.size:
            out.add(signals[c.metric].level_at(float(given_args(c.params).get("since", 0.0))))
    out.update(_bernoulli_figures(signals, config))
    for name in names:
        s = signals[name]
        out.update(v for v in _stats(s) if math.isfinite(v))
        if math.isfinite(s.relative_change):
            out.add(s.relative_change * 100)
        if math.isfinite(s.level):
            out.add(s.level * 100)  # {level:.1%}
    return out


def _published_tops() -> set[float]:
    """The ceilings ``beyond_published`` may print: the highest step any published run logged in one tenth of its
    steps, or after its first tenth, per metric (knowledge/published_envelope.yaml, read here, not through the code
    under test)."""
    runs = yaml.safe_load(ENVELOPE.read_text())["runs"].values()
    out: set[float] = set()
    metrics = {m for r in runs for m in r["metrics"]}
    for metric in metrics:
        tops = [r["metrics"][metric]["max"] for r in runs if metric in r["metrics"]]
        for d in range(10):
            out.update({max(x[d] for x in tops if x[d] is not None)} if any(x[d] is not None for x in tops) else set())
        out.add(max(v for x in tops for v in x[1:] if v is not None))
    return out


def _matches(text: str, candidates: set[float]) -> bool:
    value = float(text)
    decimals = len(text.split(".")[1]) if "." in text and "e" not in text else 0
    tolerance = 0.5 * 10 ** -decimals
    return any(abs(c - value) <= tolerance * (1 + 1e-9) or (value and abs(c - value) <= 5e-3 * abs(value))
               for c in candidates)


def _fired(rule) -> list[tuple[str, Diagnosis, Signals, set[float]]]:
    out = []
    for case in load_fixture(rule.id)["fires"]:
        cfg, frame = build_run(case)
        signals = Signals(frame, case.get("window"), gpu_memory_gib=case.get("gpu_memory_gib"))
        d = diagnose(rule, cfg, run_facts(cfg), signals)
        assert d is not None, f"{rule.id}: {case['name']} should fire"
        out.append((case["name"], d, signals, _config_values(cfg, rule) | _warmup_figures(cfg)))
    return out


_PUBLISHED_TOPS = _published_tops()


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_every_figure_in_a_message_is_the_runs_or_a_threshold_the_rule_tests(rule) -> None:
    allowed = _thresholds(rule)
    for name, d, signals, config in _fired(rule):
        assert "?" not in d.summary, f"{rule.id} ({name}): a field the template names is missing: {d.summary}"
        candidates = allowed | config | _run_values(signals, rule, config) | _PUBLISHED_TOPS
        for text, _percent in _NUMBER.findall(_CITATION.sub("", d.summary)):
            assert _matches(text, candidates), f"{rule.id} ({name}): {text} in {d.summary!r} is not the run's"
        for metric, text in _NAMED.findall(d.summary):
            if metric in signals.metrics or "*" in metric:
                own = {v for v in _stats(signals[metric]) if math.isfinite(v)}
                assert _matches(text, own), f"{rule.id} ({name}): {text} in {d.summary!r} is not {metric}'s value"


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_a_rationale_quotes_no_figure_of_its_own(rule) -> None:
    allowed = _thresholds(rule) | _BANDS
    for sentence in re.split(r"(?<=\.)\s+", rule.rationale):
        for part in re.split(r"[()]", sentence):
            if _CITATION.search(part) or "default" in part:
                continue  # a figure beside its source
            for text, _percent in _NUMBER.findall(part):
                if "." not in text and "e" not in text:
                    continue  # counts and small integers ("one epoch", "2-6 units") are not measurements
                assert _matches(text, allowed), f"{rule.id}: {text} in its rationale is no threshold of the rule"


def _factor(d: Diagnosis) -> float | None:
    """The factor of the diff's first numeric change (new/old or old/new, whichever is >= 1)."""
    for _fix, changes in d.fixes[:1]:
        for change in changes:
            old, new = change.old, change.new
            if isinstance(old, (int, float)) and isinstance(new, (int, float)) and old and new:
                return max(new / old, old / new)
    return None


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_a_factor_the_text_states_is_the_diffs(rule) -> None:
    for name, d, _signals, _config in _fired(rule):
        for number, word in _FACTOR.findall(f"{d.summary} {rule.rationale}"):
            stated = float(number) if number else 2.0
            factor = _factor(d)
            assert factor is not None and math.isclose(stated, factor, rel_tol=0.01), (
                f"{rule.id} ({name}): the text states {number or word} but the change is "
                f"{'none' if factor is None else f'{factor:g}x'}")


def test_cr002_prints_the_explained_variance_and_no_fixed_factor() -> None:
    # the run: explained variance -0.16 while critic/score/mean is 0.269; the diff raises lr 100x
    rule = next(r for r in load_playbook() if r.id == "CR002")
    case = {"config": ["critic.optim.lr=1e-7"], "metrics": {
        "critic/vf_explained_var": -0.16, "critic/score/mean": 0.269, "actor/ppo_kl": 0.001, "critic/vf_loss": 0.5}}
    cfg, frame = build_run(case)
    d = diagnose(rule, cfg, run_facts(cfg), Signals(frame))
    assert d is not None and "-0.16" in d.summary and "0.269" not in d.summary
    assert _factor(d) == pytest.approx(100)  # 1e-7 -> verl's default 1e-5
    assert not _FACTOR.search(rule.rationale)


def test_cf001_quotes_the_runs_clipfrac() -> None:
    rule = next(r for r in load_playbook() if r.id == "CF001")
    case = {"config": ["actor_rollout_ref.actor.optim.lr=1e-4", "actor_rollout_ref.actor.ppo_mini_batch_size=64"],
            "metrics": {"actor/pg_clipfrac": 0.62, "actor/ppo_kl": 0.08, "critic/score/mean": 0.3}}
    cfg, frame = build_run(case)
    d = diagnose(rule, cfg, run_facts(cfg), Signals(frame))
    assert d is not None and "0.62" in d.summary
    assert "0.85" not in rule.rationale and "0.125" not in rule.rationale
    assert _factor(d) == pytest.approx(100)  # 1e-4 -> 1e-6 (best_practices.rst:214-221 @1dda039b), not "halving"
