"""advisor.playbook._median.median answers as numpy.median does, to the bit (numpy is the oracle)."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.metrics import LOGGED_NAN
from advisor.playbook._median import median


def _same(ours: object, numpy: object) -> bool:
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(numpy, dtype=np.float64)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 8, 9, 100, 101])
@pytest.mark.parametrize("seed", range(5))
def test_median_of_a_vector_is_numpys(size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(size) * 10.0 ** rng.integers(-8, 8)
    values[rng.random(size) < 0.2] = 0.0  # ties
    assert _same(median(values), np.median(values))
    assert type(median(values)) is type(np.median(values))


@pytest.mark.parametrize("values", [[3, 1, 2], [4, 1, 2, 3], [0.0, -0.0, 1.0], [-0.0, -0.0], [1.0, np.nan, 2.0],
                                    [LOGGED_NAN, 1.0], [np.inf, 1.0], [-np.inf, np.inf]])
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf - inf, in both
def test_median_edge_values_are_numpys(values: list[float]) -> None:
    assert _same(median(values), np.median(values))


def test_median_of_nothing_is_nan() -> None:
    with pytest.warns(RuntimeWarning):
        expected = np.median(np.array([]))
    assert np.isnan(median(np.array([]))) and np.isnan(expected)


@pytest.mark.parametrize("width", [1, 4, 9])
def test_median_along_rows_is_numpys(width: int) -> None:
    rng = np.random.default_rng(width)
    values = rng.standard_normal((50, width))
    values[3, 0] = np.nan
    assert _same(median(values, axis=1), np.median(values, axis=1))
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(values[:, 0], 4, mode="edge"), 9)
    assert _same(median(windows, axis=1), np.median(windows, axis=1))
