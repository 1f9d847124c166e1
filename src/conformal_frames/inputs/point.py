"""Point forecasts: an observed value ``y``, a point forecast ``yhat`` and a per-row ``scale``.

The point-error family (:mod:`~conformal_frames.metrics.point`) and the
report read these roles here:

- :func:`error_row`: the forecast error ``yhat - y`` as a Float64 row (both
  columns checked as numbers: missing, NaN and infinite values are invalid
  rows);
- :func:`scale_row`: a scale column of scaled errors (MASE, RMSSE, scaled
  pinball), checked as a number and positive: a zero scale (a constant
  training series) or a negative one is an invalid row, counted and
  reported, never a silent infinity.
"""

from __future__ import annotations

import narwhals.stable.v2 as nw

from conformal_frames.engine import Query
from conformal_frames.errors import ColumnNotFoundError
from conformal_frames.inputs.forecasts import value_row

__all__ = ["error_row", "scale_row"]


def error_row(q: Query, y: str, yhat: str) -> str:
    """Row column of the forecast error ``yhat - y``."""
    a, b = value_row(q, y), value_row(q, yhat)
    return q.row(("point_error", a, b), nw.col(b) - nw.col(a), inputs=[a, b])


def scale_row(q: Query, scale: str) -> str:
    """Row column of a positive scale; zero or negative scales are invalid rows."""
    try:
        s = q.number(scale)
    except ColumnNotFoundError as exc:
        msg = (
            f"{exc}. A scaled error reads each series' scale from a column: cf.naive_scale(train, y, by=..., "
            "order_by=...) computes naive_mae (mase, scaled_pinball) and naive_mse (rmsse) from the training "
            "rows; join it to these rows on the series columns"
        )
        raise ColumnNotFoundError(msg) from None
    q.check(
        f"scale column {scale!r} (scale=) has zero or negative values in {{rows}}; a scaled error needs a "
        "positive scale (a zero naive scale means a constant training series)",
        s <= 0.0,
        example=s,
    )
    return q.row(("value", scale), s)
