"""Thin a long series for display without hiding its spikes.

A 100,000-step run cannot be drawn point by point (the page would weigh tens of megabytes and the
browser would stall), but averaging buckets would flatten exactly the one-step spikes a reader looks
for. So each bucket of consecutive points keeps its minimum and its maximum (the classic min/max
decimation used by oscilloscopes): every extreme survives, and at most ``max_points`` remain.
"""

from __future__ import annotations

import numpy as np

MAX_POINTS = 2000  # per series; two per bucket (min and max)


def minmax_indices(values: np.ndarray, max_points: int = MAX_POINTS) -> np.ndarray:
    """Sorted positions to keep: the first and last point, and each bucket's min and max.

    ``values`` must be finite. Buckets hold equal numbers of consecutive points; at most
    ``max_points`` positions are returned (``max_points`` >= 4).
    """
    n = int(values.size)
    if n <= max_points:
        return np.arange(n)
    buckets = (max_points - 2) // 2  # room for the first and last point
    bucket_of = (np.arange(n) * buckets) // n  # 0 .. buckets-1, consecutive and near-equal
    order = np.lexsort((values, bucket_of))  # by bucket, then by value
    starts = np.searchsorted(bucket_of[order], np.arange(buckets), side="left")
    ends = np.append(starts[1:], n) - 1
    keep = np.concatenate(([0, n - 1], order[starts], order[ends]))
    return np.unique(keep)


def downsample(steps: np.ndarray, values: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """The finite points of a series, thinned to at most ``max_points`` with every bucket's extremes kept."""
    steps = np.asarray(steps)
    values = np.asarray(values, dtype=float)
    finite = np.isfinite(values)
    steps, values = steps[finite], values[finite]
    idx = minmax_indices(values, max_points)
    return steps[idx], values[idx]
