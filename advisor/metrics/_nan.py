"""A logged NaN is not a missing value: one float64 column holds both, told apart by the NaN's bits.

verl's file logger writes a non-finite value as ``null`` (orjson, verl/utils/tracking.py ``FileLogger``) or as
a bare ``NaN`` token (``json.dumps``, verl <= 0.7.0); the console logger prints ``nan``. A row that lacks a metric
(a validation-only step, a worker's line in between) did not log it at all. The frame keeps float columns
(numpy computes on them), so the readers write :data:`LOGGED_NAN`, a quiet NaN with a payload of its own, where a
metric was logged as non-finite, and a plain NaN where it is absent. Copies, slices and ``np.where`` keep the
payload; the rules that look for NaN (``nonfinite``) count only this one.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

_BITS = 0x7FF8_0000_0000_0BAD  # quiet NaN, payload 0xBAD; numpy's and Python's nan are 0x7FF8_0000_0000_0000
_NO_SIGN = 0x7FFF_FFFF_FFFF_FFFF  # a negation flips only the sign bit
LOGGED_NAN: float = struct.unpack("<d", struct.pack("<Q", _BITS))[0]


def is_logged_nan(values: np.ndarray) -> np.ndarray:
    """Where ``values`` (float64) hold a logged NaN (as opposed to NaN for "not logged")."""
    import numpy as np

    values = np.asarray(values, dtype=np.float64)
    found: np.ndarray = (values.view(np.uint64) & np.uint64(_NO_SIGN)) == np.uint64(_BITS)
    return found


def is_missing(values: np.ndarray) -> np.ndarray:
    """Where ``values`` hold no logged value at all (a plain NaN)."""
    import numpy as np

    missing: np.ndarray = np.isnan(values) & ~is_logged_nan(values)
    return missing


def logged(value: float) -> float:
    """``value`` as the frame stores a logged value: a NaN becomes :data:`LOGGED_NAN`."""
    return LOGGED_NAN if value != value else value


def mark_logged(values: np.ndarray) -> np.ndarray:
    """``values`` (logged values, a fresh writable array) with every NaN made :data:`LOGGED_NAN`, in place."""
    import numpy as np

    nan = np.isnan(values)
    if nan.any():
        values[nan] = LOGGED_NAN
    return values


_NONFINITE_WORDS = {"nan": float("nan"), "inf": float("inf"), "infinity": float("inf")}


def nonfinite_text(text: str) -> float | None:
    """A non-finite value in any spelling a logger writes (``nan``, ``NaN``, ``-nan``, ``inf``, ``Infinity``,
    ``-Infinity``, ``+INF`` ...: Python's, JavaScript's, numpy's and C's) as the frame stores it (a NaN is
    :data:`LOGGED_NAN`); None for any other text. Every reader reads these words the same way."""
    word = text.strip().lower()
    sign = -1.0 if word.startswith("-") else 1.0
    value = _NONFINITE_WORDS.get(word.lstrip("+-")) if len(word) <= 9 else None
    if value is None:
        return None
    return LOGGED_NAN if value != value else sign * value
