"""Binary labels and scores: a 0/1 label column (numeric or Boolean) and a score in [0, 1]."""

from __future__ import annotations

from typing import Literal

import narwhals.stable.v2 as nw

from conformal_frames.engine import Query

__all__ = ["Precision", "binary_row", "score_precision", "score_row"]

F64 = nw.Float64
Precision = Literal["float64", "float32"]


def score_row(q: Query, name: str) -> str:
    """Row column: a score / probability in [0, 1] as Float64 (checked)."""
    s = q.number(name)
    q.check(f"column {name!r} has values outside [0, 1]", (s < 0.0) | (s > 1.0))
    return q.row(("score", name), s)


def binary_row(q: Query, name: str) -> str:
    """Row column: a 0/1 label as Float64; other values are invalid, never remapped."""
    if name in q.schema and q.schema[name] == nw.Boolean:
        col = q.column(name)
        q.check(f"column {name!r} has missing (null/NaN) or infinite values", col.is_null())
        value = col.cast(F64)
    else:
        value = q.number(name)
    q.check(f"column {name!r} has labels other than 0 and 1", (value != 0.0) & (value != 1.0))
    return q.row(("binary", name), value)


def score_precision(q: Query, *names: str) -> Precision:
    """``"float32"`` when any of the score columns is single precision."""
    single = any(name in q.schema and q.schema[name] == nw.Float32 for name in names)
    return "float32" if single else "float64"
