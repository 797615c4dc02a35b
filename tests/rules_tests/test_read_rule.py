"""``read_rule``: one rule read on a run's metrics file, as ``advisor verify`` reads it on every trial.

The expected answers are the rule fixtures' own labels (``fixtures/<ID>.yaml``: ``fires``, ``quiet``, ``trend``,
written by hand from each rule's thresholds), here read back from a metrics file in verl's ``file`` logger
format instead of an in-memory frame.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from advisor.playbook import describe_condition, load_playbook, read_rule

from ._runs import build_run, load_fixture

RULES = load_playbook()


def _write_jsonl(case, frame, path: Path) -> Path:
    """verl's file logger: one {"step": N, "data": {...}} per step. A metric logged every few steps is absent
    from the others; a value that turned NaN or inf is written as one (json's NaN/Infinity)."""
    sparse = {name for name, spec in case["metrics"].items() if isinstance(spec, dict) and "every" in spec}
    with path.open("w") as fh:
        for step, row in frame.iterrows():
            data = {k: float(v) for k, v in row.items() if not (k in sparse and math.isnan(v))}
            if data:
                fh.write(json.dumps({"step": int(step), "data": data}) + "\n")
    return path


def _cases(kind: str):
    for rule in RULES:
        for case in load_fixture(rule.id).get(kind, []):
            yield pytest.param(rule, case, id=f"{rule.id}-{case['name']}")


def _read(rule, case, tmp_path: Path):
    cfg, frame = build_run(case)
    path = _write_jsonl(case, frame, tmp_path / "metrics.jsonl")
    return read_rule(rule, cfg, path, window=case.get("window"), gpu_memory_gib=case.get("gpu_memory_gib"))


@pytest.mark.parametrize("rule, case", list(_cases("fires")))
def test_a_run_the_rule_fires_on_shows_it(rule, case, tmp_path: Path) -> None:
    reading = _read(rule, case, tmp_path)
    assert reading.applies and reading.fired and reading.harmful and reading.shows
    assert reading.unmet is None


@pytest.mark.parametrize("rule, case", list(_cases("quiet")))
def test_a_quiet_run_does_not_show_it_and_says_which_condition_failed(rule, case, tmp_path: Path) -> None:
    reading = _read(rule, case, tmp_path)
    assert not reading.shows
    assert reading.unmet  # the config does not apply, a condition failed, or the harm did not hold


@pytest.mark.parametrize("rule, case", list(_cases("trend")))
def test_a_trend_without_harm_fires_but_does_not_show_the_problem(rule, case, tmp_path: Path) -> None:
    reading = _read(rule, case, tmp_path)
    assert reading.fired and not reading.harmful and not reading.shows
    assert reading.unmet is not None and rule.harm is not None and rule.harm.text in reading.unmet


def test_the_unmet_condition_and_the_levels_are_the_rules_own(tmp_path: Path) -> None:
    # AD001's first condition is written `{metric: critic/advantages/max, test: below, value: 0.05}`; a healthy
    # GRPO group of 5 with one right answer has advantage (1 - 0.2) / std([1,0,0,0,0], ddof=1) = 0.8 / 0.4472
    ad001 = next(r for r in RULES if r.id == "AD001")
    healthy = next(c for c in load_fixture("AD001")["quiet"] if c["name"] == "healthy spread")
    reading = _read(ad001, healthy, tmp_path)
    assert reading.unmet == "critic/advantages/max below 0.05"
    assert reading.levels["critic/advantages/max"] == pytest.approx(healthy["metrics"]["critic/advantages/max"])
    assert reading.steps == 25  # suggest's window: the larger of 20 steps and 25% of a 100-step run


def test_a_rule_that_does_not_apply_says_so(tmp_path: Path) -> None:
    ad001 = next(r for r in RULES if r.id == "AD001")
    ppo = next(c for c in load_fixture("AD001")["quiet"] if c["name"] == "PPO run")
    reading = _read(ad001, ppo, tmp_path)
    assert not reading.applies and reading.unmet == "the rule does not apply to this config"


def test_describe_condition_names_the_test_and_its_arguments() -> None:
    ad005 = next(r for r in RULES if r.id == "AD005")  # `{metric: critic/advantages/max, test: falls, factor: 0.7}`
    assert describe_condition(ad005.conditions[0]) == "critic/advantages/max falls (factor=0.7)"
