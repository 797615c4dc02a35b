"""A new value written the way the file already spells the old one.

A diff that turns ``lr=1e-4`` into ``lr=1e-06`` or ``use_kl_loss: False`` into ``use_kl_loss: true`` changes
more than the value: the reader has to check that nothing else moved. So a number keeps the notation of the
literal it replaces (``1e-4`` -> ``1e-6``, ``0.0001`` -> ``0.000001``, ``1E-4`` -> ``1E-6``) and a boolean its
case (``False`` -> ``True``). Each spelling reads back as the same value in Hydra's and OmegaConf's YAML.
"""

from __future__ import annotations

import math
import re
from typing import Any

_EXPONENT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")
_DECIMAL = re.compile(r"^[+-]?(\d+\.\d*|\.\d+)$")


def respell(value: Any, old: str) -> str | None:
    """``value`` spelled like the literal ``old``, or None when ``old`` sets no style to follow."""
    old = old.strip().strip("'\"")
    if isinstance(value, bool):
        if old in ("True", "False"):
            return str(value)
        if old in ("TRUE", "FALSE"):
            return str(value).upper()
        return None
    if not isinstance(value, float) or not math.isfinite(value):
        return None
    if _EXPONENT.match(old):
        mantissa, exponent = _scientific(value)
        text = f"{mantissa}e{int(exponent)}"
        return text.upper() if "E" in old else text
    if _DECIMAL.match(old):
        from decimal import Decimal  # lazy: 1 ms of import on every check, needed only for a float literal

        text = f"{Decimal(repr(value)):f}"
        return text if "." in text else text + ".0"
    return None


def _scientific(value: float) -> tuple[str, str]:
    """Mantissa and exponent of ``value`` in the shortest scientific form that reads back exactly."""
    from decimal import Decimal

    text = f"{Decimal(repr(value)):e}"  # '5.000E-6' style from Decimal keeps every digit repr has
    mantissa, exponent = text.lower().split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return mantissa, exponent
