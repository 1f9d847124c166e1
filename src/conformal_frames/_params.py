"""Validation of metric parameters (one place, clear messages)."""

from __future__ import annotations

import math
from decimal import Decimal
from numbers import Real
from typing import TYPE_CHECKING, Any

import narwhals.stable.v2 as nw

if TYPE_CHECKING:
    from conformal_frames.core import Query


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


def check_level(value: Any) -> float | str:
    """A target level in (0, 1), or the name of a ``by=`` column holding it."""
    if isinstance(value, str):
        return value
    return check_probability(value, "confidence_level")


def level_row(q: Query, level: float | str) -> str | None:
    """Row column of the target level when it is a column (must be a ``by=`` key).

    ``None`` for a float level.  The one place where a metric's
    ``confidence_level=`` column is checked: it must be a ``by=`` key (so the
    target is constant within each group), numeric and inside (0, 1) (rows
    outside are invalid).  The row is Float64.
    """
    if not isinstance(level, str):
        return None
    if level not in q.keys:
        if level not in q.schema:
            q.column(level)  # the usual "not found" message
        msg = (
            f"confidence_level={level!r} names a column: it must also be a by= column, "
            "so that the target is constant within each group (e.g. by=[..., 'level'])"
        )
        raise ValueError(msg)
    if not q.schema[level].is_numeric():
        msg = f"confidence_level column {level!r} must be numeric, found dtype {q.schema[level]}"
        raise TypeError(msg)
    t = nw.col(level).cast(nw.Float64)
    q.check(f"confidence_level column {level!r} has values outside (0, 1)", ~((t > 0.0) & (t < 1.0)))
    return q.row(("target_level", level), t)
