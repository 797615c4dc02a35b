"""Swept params, objectives and constraints: the CLI's text forms, and the tail statistic."""

from __future__ import annotations

import math
import re

import pytest

from advisor.errors import SweepError
from sweeps import Constraint, Objective, Param, parse_constraint, parse_objective, parse_param, tail_mean
from sweeps._space import same_value

LR = "actor_rollout_ref.actor.optim.lr"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param("1e-5,1e-4", (1e-5, 1e-4), id="floats"),
        pytest.param("2,4, 8", (2, 4, 8), id="ints:spaces"),
        pytest.param("true,false", (True, False), id="bools"),
        pytest.param("token-mean,seq-mean-token-sum", ("token-mean", "seq-mean-token-sum"), id="strings"),
        pytest.param("null,3", (None, 3), id="null"),
    ],
)
def test_values_parse_as_hydra_values(values: str, expected: tuple[object, ...]) -> None:
    p = parse_param(LR, values=values)
    assert p.is_grid and p.values == expected
    assert [type(v) for v in p.values or ()] == [type(v) for v in expected]


@pytest.mark.parametrize(
    ("text", "low", "high", "log", "is_int"),
    [
        pytest.param("1e-6:1e-4:log", 1e-6, 1e-4, True, False, id="float:log"),
        pytest.param("1:8", 1, 8, False, True, id="int"),
        pytest.param("0.1:0.3", 0.1, 0.3, False, False, id="float"),
    ],
)
def test_range_parses_bounds_and_scale(text: str, low: float, high: float, log: bool, is_int: bool) -> None:
    p = parse_param(LR, range_=text)
    assert (p.low, p.high, p.log, p.is_int_range) == (low, high, log, is_int)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"values": "1e-5,,1e-4"}, "empty item", id="values:empty-item"),
        pytest.param({"range_": "1e-4:1e-6"}, "LOW must be below HIGH", id="range:reversed"),
        pytest.param({"range_": "0:1:log"}, "log range needs LOW > 0", id="range:log-zero"),
        pytest.param({"range_": "1:2:lin"}, "is not LOW:HIGH or LOW:HIGH:log", id="range:bad-suffix"),
        pytest.param({"range_": "a:b"}, "is not a number", id="range:words"),
        pytest.param({}, "needs exactly one of", id="neither"),
        pytest.param({"values": "1", "range_": "1:2"}, "needs exactly one of", id="both"),
    ],
)
def test_bad_param_text_raises_sweep_error(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(SweepError, match=re.escape(message)):
        parse_param(LR, **kwargs)


def test_grid_puts_the_baseline_first_and_drops_duplicates() -> None:
    p = Param.grid(LR, [1e-5, 0.001, 1e-5])
    assert p.grid_values(1e-3) == [1e-3, 1e-5]
    assert p.grid_values(1e-6) == [1e-6, 1e-5, 0.001]


def test_same_value_compares_numbers_but_not_bools_with_ints() -> None:
    assert same_value(1e-3, 0.001) and same_value(1, 1.0)
    assert not same_value(True, 1) and not same_value(0, False)
    assert same_value(math.nan, math.nan) and not same_value("a", "b")


def test_categorical_distribution_includes_the_baseline() -> None:
    dist = Param.grid("actor_rollout_ref.actor.loss_agg_mode", ["seq-mean-token-sum"]).distribution("token-mean")
    assert list(dist.choices) == ["token-mean", "seq-mean-token-sum"]
    float_dist = Param.range(LR, 1e-6, 1e-4, log=True).distribution(1e-3)
    assert (float_dist.low, float_dist.high, float_dist.log) == (1e-6, 1e-4, True)


@pytest.mark.parametrize(
    ("text", "metric", "direction"),
    [
        pytest.param("critic/score/mean", "critic/score/mean", "maximize", id="default-max"),
        pytest.param("critic/score/mean:max", "critic/score/mean", "maximize", id="max"),
        pytest.param("actor/pg_clipfrac:min", "actor/pg_clipfrac", "minimize", id="min"),
        pytest.param("val-core/openai/gsm8k/reward/mean@1:maximize", "val-core/openai/gsm8k/reward/mean@1",
                     "maximize", id="val-metric"),
    ],
)
def test_objective_text(text: str, metric: str, direction: str) -> None:
    assert parse_objective(text) == Objective(metric, direction)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("actor/ppo_kl<0.02", Constraint("actor/ppo_kl", "<", 0.02), id="lt"),
        pytest.param("response_length/clip_ratio <= 0.1", Constraint("response_length/clip_ratio", "<=", 0.1),
                     id="le:spaces"),
        pytest.param("actor/entropy>0.5", Constraint("actor/entropy", ">", 0.5), id="gt"),
        pytest.param("critic/score/mean>=1e-2", Constraint("critic/score/mean", ">=", 0.01), id="ge:exp"),
    ],
)
def test_constraint_text(text: str, expected: Constraint) -> None:
    assert parse_constraint(text) == expected


@pytest.mark.parametrize("text", ["actor/ppo_kl", "actor/ppo_kl<", "<0.1", "actor/ppo_kl<abc", "actor/ppo_kl<inf"])
def test_bad_constraint_text_raises(text: str) -> None:
    with pytest.raises(SweepError):
        parse_constraint(text)


def test_constraint_holds_and_violation_follow_the_operator() -> None:
    lt = Constraint("m", "<", 0.1)
    assert lt.holds(0.05) is True and lt.violation(0.05) < 0
    assert lt.holds(0.1) is False and lt.violation(0.1) > 0  # on the bound of a strict inequality
    assert lt.holds(None) is None and lt.violation(None) == math.inf
    ge = Constraint("m", ">=", 0.5)
    assert ge.holds(0.5) is True and ge.violation(0.5) == 0
    assert ge.holds(0.4) is False and ge.violation(0.4) == pytest.approx(0.1)


def test_tail_mean_averages_the_last_fifth_of_finite_values() -> None:
    assert tail_mean([1.0] * 8 + [3.0, 5.0]) == 4.0  # 20% of 10 = the last 2
    assert tail_mean([1.0, 2.0, 3.0]) == 3.0  # at least one value
    assert tail_mean([1.0, math.nan, None, 2.0, 4.0]) == 4.0  # 3 finite values: the last 1
    assert tail_mean([None, math.inf]) is None
    assert tail_mean(list(range(1, 11)), fraction=0.5) == 8.0
