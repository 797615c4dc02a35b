"""``numpy.median``'s answer without its first-call cost: numpy's median asks ``np.ma.isMaskedArray``, which
imports ``numpy.ma`` (~10 ms, a thirtieth of ``advisor suggest``'s start-up: bench/bench_suggest.py).

The same steps as numpy 2's ``_median`` (numpy/lib/_function_base_impl.py) and its ``_median_nancheck``:
partition at the middle index (or the two middle ones) and at the last (a NaN sorts there), numpy's mean of the
middle, the last value where it is NaN. The results are numpy's to the bit
(tests/advisor_tests/playbook/test_median.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike


@overload
def median(values: ArrayLike, axis: None = None) -> np.floating[Any]: ...


@overload
def median(values: ArrayLike, axis: int) -> np.ndarray: ...


def median(values: ArrayLike, axis: int | None = None) -> np.floating[Any] | np.ndarray:
    """``np.median(values, axis=axis)``: a numpy scalar for ``axis=None``, else an array; NaN for an empty input,
    as numpy gives (without its warning)."""
    import numpy as np

    a = np.asarray(values)
    size = a.size if axis is None else a.shape[axis]
    if size == 0:
        empty: np.ndarray = np.full(() if axis is None else a.shape[:axis] + a.shape[axis + 1 :], np.nan)
        return np.float64(np.nan) if empty.ndim == 0 else empty
    kth = [size // 2 - 1, size // 2] if size % 2 == 0 else [(size - 1) // 2]
    nans = bool(np.issubdtype(a.dtype, np.inexact))
    if nans:
        kth.append(-1)  # a NaN sorts last
    part = np.partition(a, kth, axis=axis)
    along = 0 if axis is None else axis
    index = part.shape[along] // 2
    indexer: list[slice] = [slice(None)] * part.ndim
    indexer[along] = slice(index, index + 1) if part.shape[along] % 2 == 1 else slice(index - 1, index + 1)
    result: np.floating[Any] | np.ndarray = np.mean(part[tuple(indexer)], axis=along)  # as numpy's median: same bits
    if not nans:
        return result
    last: np.floating[Any] | np.ndarray = part.take(-1, axis=along)
    where = np.isnan(last)
    if not where.any():
        return result
    if isinstance(result, np.generic):
        return last
    np.copyto(result, last, where=where)
    return result
