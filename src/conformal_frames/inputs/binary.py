"""Binary labels and scores: a 0/1 label column (numeric or Boolean) and a score in [0, 1]."""

from __future__ import annotations

from typing import Literal

import narwhals.stable.v2 as nw

from conformal_frames._validate import FIELD_CHECKS
from conformal_frames.engine import Plan, Query

__all__ = ["Precision", "binary_inputs", "binary_row", "score_precision", "score_row"]

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


def binary_inputs(
    lf: nw.LazyFrame, y: str, score: str, keys: list[str], *, weights: str | None = None, counts: str | None = None
) -> Plan:
    """The checks of a 0/1 label, a score (and weights, counts) grouped by ``keys``: those of the binary calibration metrics.

    For functions of a frame, which apply the invalid-row policy with
    :meth:`~conformal_frames.engine.Plan.apply_policy`.  The column names
    are checked as the metrics' fields are.
    """
    for field, value in (("y", y), ("score", score), ("weights", weights), ("counts", counts)):
        FIELD_CHECKS[field](value, field)

    def read(q: Query) -> None:
        binary_row(q, y)
        score_row(q, score)
        q.weighting(weights, counts=counts)

    return Plan.inputs(lf.collect_schema(), keys, read)
