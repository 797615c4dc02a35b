"""Downsampling for display: a bounded number of points per series, and no spike lost."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.report.downsample import MAX_POINTS, downsample, minmax_indices


def _noisy(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 1.0 + 0.05 * rng.standard_normal(n)


def test_a_single_step_spike_in_100k_steps_survives_with_at_most_2000_points() -> None:
    n, spike_at = 100_000, 61_337
    steps = np.arange(1, n + 1)
    values = _noisy(n)
    values[spike_at] = 50.0  # one step, far above the noise
    values[12_345] = -40.0  # and one dip
    s, v = downsample(steps, values)
    assert len(s) <= MAX_POINTS
    assert v.max() == 50.0 and s[v.argmax()] == steps[spike_at]
    assert v.min() == -40.0 and s[v.argmin()] == steps[12_345]


def test_short_series_are_kept_whole_and_nonfinite_points_dropped() -> None:
    steps = np.arange(10)
    values = np.array([0.0, 1, np.nan, 3, np.inf, 5, 6, -np.inf, 8, 9])
    s, v = downsample(steps, values)
    finite = np.isfinite(values)
    assert list(s) == list(steps[finite]) and list(v) == list(values[finite])


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=5, max_value=30_000), max_points=st.integers(min_value=4, max_value=500),
       seed=st.integers(min_value=0, max_value=2**31))
def test_every_bucket_keeps_its_extremes(n: int, max_points: int, seed: int) -> None:
    values = np.random.default_rng(seed).standard_normal(n)
    idx = minmax_indices(values, max_points)
    assert len(idx) <= max_points
    assert np.all(np.diff(idx) > 0)  # in step order, no duplicates
    assert idx[0] == 0 and idx[-1] == n - 1
    if n <= max_points:
        assert len(idx) == n
        return
    # the same buckets the docstring describes: equal runs of consecutive points
    buckets = (max_points - 2) // 2
    kept = set(idx.tolist())
    for b in range(buckets):
        lo, hi = -(-b * n // buckets), -(-(b + 1) * n // buckets)  # ceil(b*n/buckets) .. ceil((b+1)*n/buckets)
        chunk = values[lo:hi]
        assert any(values[i] == chunk.max() for i in kept if lo <= i < hi)
        assert any(values[i] == chunk.min() for i in kept if lo <= i < hi)


@pytest.mark.parametrize("n", [MAX_POINTS, MAX_POINTS + 1, 3 * MAX_POINTS + 7])
def test_bound_holds_at_the_edges(n: int) -> None:
    assert len(minmax_indices(_noisy(n))) <= MAX_POINTS
