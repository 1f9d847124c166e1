"""Validation of metric parameters (one place, clear messages)."""

from __future__ import annotations

import math
from decimal import Decimal
from numbers import Real
from typing import Any


def check_probability(value: Any, name: str) -> float:
    """A number strictly inside (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < float(value) < 1:
        msg = f"{name} must be a number strictly between 0 and 1, got {value!r}"
        raise ValueError(msg)
    return float(value)


def complement(level: float) -> float:
    """``1 - level`` as the decimal the user wrote: ``complement(0.9) == 0.1``.

    Float subtraction gives ``1 - 0.9 == 0.09999999999999998``; a p-value of
    exactly 0.1 must compare as with the significance level 0.1 itself.  The
    difference is taken on the shortest decimal form of ``level`` and rounded
    once to the nearest double.
    """
    return float(Decimal(1) - Decimal(repr(float(level))))


def check_bins(value: Any, name: str = "n_bins") -> int:
    """A positive integer (not a bool, not a float)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{name} must be a positive integer, got {value!r}"
        raise ValueError(msg)
    return int(value)


def check_finite(value: Any, name: str) -> float:
    """Any finite real number."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        msg = f"{name} must be a finite number, got {value!r}"
        raise ValueError(msg)
    return float(value)


def check_positive_pair(value: Any, name: str) -> tuple[float, float]:
    """Two strictly positive finite numbers."""
    try:
        a, b = value
    except (TypeError, ValueError):
        msg = f"{name} must be two positive numbers, got {value!r}"
        raise ValueError(msg) from None
    out = []
    for v in (a, b):
        if isinstance(v, bool) or not isinstance(v, Real) or not (0 < float(v) < math.inf):
            msg = f"{name} must be two positive numbers, got {value!r}"
            raise ValueError(msg)
        out.append(float(v))
    return out[0], out[1]
