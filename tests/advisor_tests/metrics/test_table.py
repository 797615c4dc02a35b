"""StepTable: the numpy form of a run's metrics, checked against pandas doing the same thing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.metrics._table import StepTable, as_table, merge_repeated_steps

REPO = Path(__file__).resolve().parents[3]


@st.composite
def logged_rows(draw):  # sorted steps with repeats, values with NaN and inf
    n = draw(st.integers(1, 30))
    steps = np.sort(np.array(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)), dtype=np.int64))
    cells = st.one_of(st.floats(allow_nan=False, width=64), st.just(np.nan), st.just(np.inf))
    values = np.array(draw(st.lists(st.lists(cells, min_size=3, max_size=3), min_size=n, max_size=n)))
    return steps, values.reshape(n, 3)


@settings(max_examples=300, deadline=None)
@given(logged_rows())
def test_repeated_steps_merge_like_pandas_groupby_last(rows) -> None:
    steps, values = rows
    merged_steps, merged = merge_repeated_steps(steps, values)
    expected = pd.DataFrame(values, index=steps).groupby(level=0, sort=False).last()
    assert np.array_equal(merged_steps, expected.index.to_numpy())
    assert np.array_equal(merged, expected.to_numpy(), equal_nan=True)


def test_round_trip_through_pandas() -> None:
    frame = pd.DataFrame({"a": [1.0, np.nan, 3.0], "b": [0.5, 0.25, np.inf]}, index=[3, 1, 2])
    table = as_table(frame)
    assert table.steps.tolist() == [1, 2, 3] and table.names == ("a", "b")
    assert np.array_equal(table.column("a"), [np.nan, 3.0, 1.0], equal_nan=True)
    assert table.to_pandas().equals(frame.sort_index().rename_axis("step"))
    assert table.scaled({"b": 2.0}).column("b").tolist() == [0.5, np.inf, 1.0]
    assert table.column("b").tolist() == [0.25, np.inf, 0.5]  # scaled() copies


def test_shape_is_checked() -> None:
    try:
        StepTable(np.arange(2), ("a",), np.zeros((3, 1)))
    except ValueError as err:
        assert "3" in str(err)
    else:
        raise AssertionError("a table whose values do not match its steps was accepted")


def test_suggest_on_a_jsonl_log_never_imports_pandas() -> None:
    # pandas' import alone would take most of suggest's 0.3 s budget (bench/bench_suggest.py)
    code = ("import sys; from advisor import load_config; from advisor.playbook._suggest import suggest_run;"
            "suggest_run(load_config('examples/lr_too_high/run.sh'), 'examples/lr_too_high/metrics.jsonl');"
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"
