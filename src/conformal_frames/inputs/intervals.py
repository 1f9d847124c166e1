"""Interval bounds: the one reader of a ``(lo, hi)`` pair and of ``lo <= y <= hi``.

Rows with ``lo > hi`` are invalid (never counted as covered nor as a negative width).
"""

from __future__ import annotations

import narwhals.stable.v2 as nw

from conformal_frames.engine import Query, indicator

__all__ = ["covered_row", "interval_bounds", "miss_column_row", "swapped_hint", "width_row"]


def swapped_hint(lo: str, hi: str) -> str:
    """The likely fix when ``lo > hi`` in most rows: the bounds were given in the wrong order."""
    return f"are lo and hi swapped? (lo={lo!r}, hi={hi!r})"


# ---------------------------------------------------------------------------
# shared row-level statistics
# ---------------------------------------------------------------------------
def interval_bounds(q: Query, lo: str, hi: str) -> tuple[nw.Expr, nw.Expr]:
    """Validated bounds; rows with ``lo > hi`` are invalid."""
    lo_e, hi_e = q.number(lo), q.number(hi)
    q.check(f"column {lo!r} is greater than column {hi!r}", lo_e > hi_e, hint=swapped_hint(lo, hi))
    return lo_e, hi_e


def covered_row(q: Query, y: str, lo: str, hi: str) -> str:
    """Row column: 1.0 where ``lo <= y <= hi``, else 0.0."""
    lo_e, hi_e = interval_bounds(q, lo, hi)
    y_e = q.number(y)
    return q.row(("covered", y, lo, hi), indicator((lo_e <= y_e) & (y_e <= hi_e)))


def width_row(q: Query, lo: str, hi: str) -> str:
    """Row column: ``hi - lo``."""
    lo_e, hi_e = interval_bounds(q, lo, hi)
    return q.row(("width", lo, hi), hi_e - lo_e)


def miss_column_row(q: Query, miss: str) -> str:
    """Row column: a 0/1 miss indicator given as a column (``miss=``, e.g. a VaR hit), as Float64.

    Numeric 0/1 or Boolean; missing, NaN, infinite and other values are
    invalid rows (never remapped).
    """
    if miss in q.schema and q.schema[miss] == nw.Boolean:
        col = q.column(miss)
        q.check(f"column {miss!r} (miss=) has missing values", col.is_null())
        value = col.cast(nw.Float64)
    else:
        value = q.number(miss)
    q.check(f"column {miss!r} (miss=) has values other than 0 and 1", (value != 0.0) & (value != 1.0))
    return q.row(("miss_column", miss), value)
