"""Interval bounds: the one reader of a ``(lo, hi)`` pair and of ``lo <= y <= hi``.

Rows with ``lo > hi`` are invalid (never counted as covered nor as a negative width).

Several outputs: ``y``, ``lo`` and ``hi`` may each be a list of columns, one
per output (the same length, ``y`` distinct).  A row is then *covered* when
every output is inside its interval (joint coverage), its *width* is the
volume of the box, the product of the outputs' widths; a missing value or
``lo > hi`` in any output makes the row invalid.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import reduce
from typing import Any

import narwhals.stable.v2 as nw

from conformal_frames._validate import FIELD_CHECKS, Check, check_column, fail
from conformal_frames.engine import Query, indicator

__all__ = [
    "MULTI_OUTPUT",
    "Columns",
    "check_outputs",
    "covered_row",
    "interval_bounds",
    "interval_outputs",
    "miss_column_row",
    "one_output",
    "output_covered_rows",
    "output_width_rows",
    "swapped_hint",
    "width_row",
]

#: one column (one output) or a tuple of columns (one per output)
Columns = str | tuple[str, ...]
#: the metrics that take lists of columns for ``y``, ``lo``, ``hi`` (several outputs)
MULTI_OUTPUT = ("coverage", "width", "coverage_test", "coverage_gap", "worst_slab_coverage")


def _is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _role_check(name: str) -> Check:
    """The check of one column of role ``name`` (``y``, ``lo``, ``hi``): the vocabulary's check."""
    return FIELD_CHECKS.get(name, check_column)


def check_outputs(value: Any, name: str) -> Any:
    """A field check: one column, or a list of columns (one per output) as a tuple.

    Each element is checked as a single column of the role (the error names
    its position, e.g. ``y[1]``).
    """
    if not _is_list(value):
        return _role_check(name)(value, name)
    if not value:
        fail(ValueError, name, "a column name or a non-empty list of column names (one per output)", value)
    return tuple(_role_check(name)(v, f"{name}[{i}]") for i, v in enumerate(value))


def one_output(metric: str) -> Check:
    """A field check of a metric that takes one output: a list gets a message naming those that take lists."""

    def check(value: Any, name: str) -> Any:
        if _is_list(value):
            msg = (
                f"{metric} takes one output: {name} must be one column, got {list(value)!r}; lists of columns "
                f"(several outputs, joint coverage) are taken by {', '.join(MULTI_OUTPUT)}"
            )
            raise TypeError(msg)
        return _role_check(name)(value, name)

    return check


def interval_outputs(metric: str, **roles: Any) -> int | None:
    """The number of outputs of ``roles`` (e.g. ``y=, lo=, hi=``): ``None`` for single columns.

    All single columns or all lists of the same length; the ``y`` columns are
    distinct (each names an output).
    """
    lists = {k: v for k, v in roles.items() if _is_list(v)}
    if not lists:
        return None
    shown = ", ".join(f"{k}={list(v) if _is_list(v) else v!r}" for k, v in roles.items())
    if len(lists) < len(roles):
        single = ", ".join(f"{k}=" for k in roles if k not in lists)
        msg = (
            f"{metric}: {', '.join(f'{k}=' for k in roles)} are all single columns (one output) or all lists of "
            f"columns (one per output); {single} is a single column ({shown})"
        )
        raise TypeError(msg)
    sizes = {k: len(v) for k, v in lists.items()}
    if len(set(sizes.values())) > 1:
        counts = ", ".join(f"{n} {k}" for k, n in sizes.items())
        msg = f"{metric}: the lists need one column per output, the same length; got {counts} columns ({shown})"
        raise ValueError(msg)
    y = roles.get("y")
    if y is not None:
        repeated = sorted({str(c) for c in y if list(y).count(c) > 1})
        if repeated:
            msg = f"{metric}: each output has its own y column; {', '.join(map(repr, repeated))} repeated in y={list(y)!r}"
            raise ValueError(msg)
    return next(iter(sizes.values()))


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


def _inside(q: Query, y: str, lo: str, hi: str) -> nw.Expr:
    lo_e, hi_e = interval_bounds(q, lo, hi)
    y_e = q.number(y)
    return (lo_e <= y_e) & (y_e <= hi_e)


def covered_row(q: Query, y: Columns, lo: Columns, hi: Columns) -> str:
    """Row column: 1.0 where ``lo <= y <= hi``, else 0.0.

    Several outputs (tuples): 1.0 where every output is inside its interval
    (joint coverage); one output in a list is that output's row.
    """
    if isinstance(y, tuple) and isinstance(lo, tuple) and isinstance(hi, tuple):
        if len(y) == 1:
            return covered_row(q, y[0], lo[0], hi[0])
        inside = reduce(operator.and_, [_inside(q, *out) for out in zip(y, lo, hi, strict=True)])
        return q.row(("covered", y, lo, hi), indicator(inside))
    assert isinstance(y, str) and isinstance(lo, str) and isinstance(hi, str)
    return q.row(("covered", y, lo, hi), indicator(_inside(q, y, lo, hi)))


def output_covered_rows(q: Query, y: Sequence[str], lo: Sequence[str], hi: Sequence[str]) -> list[str]:
    """Row columns: the covered indicator of each output."""
    return [covered_row(q, *out) for out in zip(y, lo, hi, strict=True)]


def width_row(q: Query, lo: Columns, hi: Columns) -> str:
    """Row column: ``hi - lo``; several outputs (tuples): the box volume, the product of the widths."""
    if isinstance(lo, tuple) and isinstance(hi, tuple):
        if len(lo) == 1:
            return width_row(q, lo[0], hi[0])
        bounds = [interval_bounds(q, a, b) for a, b in zip(lo, hi, strict=True)]
        return q.row(("volume", lo, hi), reduce(operator.mul, [hi_e - lo_e for lo_e, hi_e in bounds]))
    assert isinstance(lo, str) and isinstance(hi, str)
    lo_e, hi_e = interval_bounds(q, lo, hi)
    return q.row(("width", lo, hi), hi_e - lo_e)


def output_width_rows(q: Query, lo: Sequence[str], hi: Sequence[str]) -> list[str]:
    """Row columns: the width of each output."""
    return [width_row(q, a, b) for a, b in zip(lo, hi, strict=True)]


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
