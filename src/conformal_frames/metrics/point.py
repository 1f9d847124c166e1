"""Point and scaled forecast errors: MAE, MSE, RMSE, MAPE, sMAPE, bias, MASE, RMSSE, scaled pinball, scaled CRPS.

Notation: a group of ``n`` rows, an observed value ``y_i``, a point forecast
``yhat_i`` and the error ``e_i = yhat_i - y_i``.  Every mean is weighted by
``weights=`` (``sum_i w_i x_i / sum_i w_i``, scikit-learn's
``sample_weight``) and counts ``counts=`` repeated rows.

Scaled errors divide by a per-row ``scale`` column (one value per series,
joined to the forecast rows): :func:`naive_scale` computes it from the
training rows, in-sample, as the mean absolute (``naive_mae``) and mean
squared (``naive_mse``) change of the (seasonal) naive forecast.
:func:`mase` and :func:`scaled_pinball` take ``naive_mae``; :func:`rmsse`
takes ``naive_mse`` (squared units, as the M5 competition and
utilsforecast's ``msse`` define it).  A zero or negative scale is an invalid
row (a constant training series has a zero naive scale).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

import narwhals.stable.v2 as nw

from conformal_frames import engine
from conformal_frames._roles import Column, role
from conformal_frames._validate import check_column, check_columns, check_positive_int, checked
from conformal_frames.engine import InvalidPolicy, Metric, Query, no_weights, sort_result, total
from conformal_frames.inputs.forecasts import (
    CrossingOutputs,
    Quantiles,
    check_crossing,
    check_level_column,
    check_long_crossing,
    check_long_form,
    check_quantiles,
    crossing_outputs,
    level_tau,
    quantile_levels,
    value_row,
)
from conformal_frames.inputs.point import error_row, scale_row
from conformal_frames.numerics.stats import ratio

__all__ = [
    "bias",
    "mae",
    "mape",
    "mase",
    "mse",
    "naive_scale",
    "rmse",
    "rmsse",
    "scaled_crps",
    "scaled_pinball",
    "smape",
]
METHODS = [name for name in __all__ if name != "naive_scale"]
FRAME_METHODS = ["naive_scale"]


def _column() -> Any:
    """A required column-name field (checked as a name when the metric is built)."""
    return checked(check_column)


# ---------------------------------------------------------------------------
# point errors: the weighted mean of one row column, maybe a square root
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class _PointError(Metric):
    y: str
    yhat: str = _column()
    weights: str | None = None
    counts: str | None = None
    #: the square root of the mean (RMSE, RMSSE)
    root: ClassVar[bool] = False

    def row(self, q: Query) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        mean = ratio(w.sum(self.row(q)), w.total)
        return {"": mean.sqrt() if self.root else mean}


def _abs_error(q: Query, y: str, yhat: str) -> str:
    e = error_row(q, y, yhat)
    return q.row(("abs", e), nw.col(e).abs(), inputs=[e])


def _squared_error(q: Query, y: str, yhat: str) -> str:
    e = error_row(q, y, yhat)
    return q.row(("square", e), nw.col(e) ** 2, inputs=[e])


@dataclass(frozen=True, kw_only=True)
class MAE(_PointError):
    default_name = "mae"

    def row(self, q: Query) -> str:
        return _abs_error(q, self.y, self.yhat)


@dataclass(frozen=True, kw_only=True)
class MSE(_PointError):
    default_name = "mse"

    def row(self, q: Query) -> str:
        return _squared_error(q, self.y, self.yhat)


@dataclass(frozen=True, kw_only=True)
class RMSE(MSE):
    default_name = "rmse"
    root = True


@dataclass(frozen=True, kw_only=True)
class Bias(_PointError):
    default_name = "bias"

    def row(self, q: Query) -> str:
        return error_row(q, self.y, self.yhat)


@dataclass(frozen=True, kw_only=True)
class MAPE(_PointError):
    default_name = "mape"

    def row(self, q: Query) -> str:
        y = q.number(self.y)
        q.check(
            f"column {self.y!r} (y) is 0 in {{rows}}, where the absolute percentage error is infinite (mape); "
            "use smape or mae there, or invalid='drop' to leave those rows out",
            y == 0.0,
        )
        e, v = _abs_error(q, self.y, self.yhat), value_row(q, self.y)
        expr = nw.col(e) / nw.when(nw.col(v) != 0.0).then(nw.col(v).abs())
        return q.row(("ape", e, v), expr, inputs=[e, v])


@dataclass(frozen=True, kw_only=True)
class SMAPE(_PointError):
    default_name = "smape"

    def row(self, q: Query) -> str:
        e, a, b = _abs_error(q, self.y, self.yhat), value_row(q, self.y), value_row(q, self.yhat)
        den = nw.col(a).abs() + nw.col(b).abs()
        expr = nw.when(den > 0.0).then(2.0 * nw.col(e) / den).otherwise(0.0)
        return q.row(("sape", e, a, b), expr, inputs=[e, a, b])


_DOC_PARAMS = """
    Parameters
    ----------
    y, yhat : str
        Columns of the observed value and of the point forecast.
    weights : str, optional
        Column of non-negative row weights: the weighted mean
        ``sum_i w_i x_i / sum_i w_i`` (scikit-learn's ``sample_weight``).
    counts : str, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows.
"""


def mae(y: Column, yhat: Column, *, weights: Column | None = None, counts: Column | None = None) -> MAE:
    """Mean absolute error ``(1/n) sum_i |yhat_i - y_i|``.

    Equal to scikit-learn's ``mean_absolute_error`` (with ``sample_weight=``
    for ``weights=``).
    {params}
    Returns
    -------
    MAE
        A metric object; a float from ``df.conformal.mae(...)`` on an eager
        frame without ``by=``, otherwise a frame with the keys, ``mae`` and ``n``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1.0, 2.0, 4.0], "f": [1.5, 2.0, 3.0]})
    >>> df.conformal.mae("y", "f")
    0.5
    """
    return MAE(y=role(y), yhat=role(yhat), weights=role(weights), counts=role(counts))


def mse(y: Column, yhat: Column, *, weights: Column | None = None, counts: Column | None = None) -> MSE:
    """Mean squared error ``(1/n) sum_i (yhat_i - y_i)^2``.

    Equal to scikit-learn's ``mean_squared_error``.
    {params}
    Returns
    -------
    MSE
        A metric object (output ``mse``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1.0, 2.0, 4.0], "f": [1.5, 2.0, 3.0]})
    >>> df.conformal.mse("y", "f")
    0.4166666666666667
    """
    return MSE(y=role(y), yhat=role(yhat), weights=role(weights), counts=role(counts))


def rmse(y: Column, yhat: Column, *, weights: Column | None = None, counts: Column | None = None) -> RMSE:
    """Root mean squared error ``sqrt((1/n) sum_i (yhat_i - y_i)^2)``.

    Equal to scikit-learn's ``root_mean_squared_error`` (the square root of
    the weighted mean with ``weights=``).
    {params}
    Returns
    -------
    RMSE
        A metric object (output ``rmse``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1.0, 2.0, 4.0], "f": [2.0, 2.0, 3.0]})
    >>> round(df.conformal.rmse("y", "f"), 6)
    0.816497
    """
    return RMSE(y=role(y), yhat=role(yhat), weights=role(weights), counts=role(counts))


def bias(y: Column, yhat: Column, *, weights: Column | None = None, counts: Column | None = None) -> Bias:
    """Mean error ``(1/n) sum_i (yhat_i - y_i)``: positive when the forecast is too high.

    The sign is utilsforecast's ``bias``.
    {params}
    Returns
    -------
    Bias
        A metric object (output ``bias``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1.0, 2.0, 4.0], "f": [1.5, 2.0, 3.0]})
    >>> round(df.conformal.bias("y", "f"), 6)
    -0.166667
    """
    return Bias(y=role(y), yhat=role(yhat), weights=role(weights), counts=role(counts))


def mape(y: Column, yhat: Column, *, weights: Column | None = None, counts: Column | None = None) -> MAPE:
    """Mean absolute percentage error ``(1/n) sum_i |yhat_i - y_i| / |y_i|``, a fraction.

    A row with ``y_i = 0`` is invalid (its percentage error is infinite): an
    error naming the row count on eager input, ``n_invalid`` on lazy input,
    left out with ``invalid="drop"``; never ``inf``.  Elsewhere equal to
    scikit-learn's ``mean_absolute_percentage_error`` (which divides by
    ``max(|y|, eps)`` instead and so returns about ``1e15`` on such a row).
    {params}
    Returns
    -------
    MAPE
        A metric object (output ``mape``, a fraction: 0.1 is 10 %).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1.0, 2.0, 4.0], "f": [1.5, 2.0, 3.0]})
    >>> df.conformal.mape("y", "f")
    0.25
    """
    return MAPE(y=role(y), yhat=role(yhat), weights=role(weights), counts=role(counts))


def smape(y: Column, yhat: Column, *, weights: Column | None = None, counts: Column | None = None) -> SMAPE:
    """Symmetric mean absolute percentage error (M4), a fraction in [0, 2].

    ``(1/n) sum_i 2 |yhat_i - y_i| / (|y_i| + |yhat_i|)``, a row with
    ``y_i = yhat_i = 0`` counting 0.  The M4 competition's sMAPE divided by
    100 %; twice utilsforecast's ``smape`` (which omits the 2).
    {params}
    Returns
    -------
    SMAPE
        A metric object (output ``smape``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1.0, 0.0, 4.0], "f": [3.0, 0.0, 4.0]})
    >>> df.conformal.smape("y", "f")
    0.3333333333333333
    """
    return SMAPE(y=role(y), yhat=role(yhat), weights=role(weights), counts=role(counts))


for _f in (mae, mse, rmse, bias, mape, smape):
    _f.__doc__ = (_f.__doc__ or "").replace("{params}", _DOC_PARAMS)


# ---------------------------------------------------------------------------
# scaled errors
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class MASE(_PointError):
    scale: str = _column()
    default_name = "mase"

    def row(self, q: Query) -> str:
        e, s = _abs_error(q, self.y, self.yhat), scale_row(q, self.scale)
        return q.row(("scaled", e, s), nw.col(e) / nw.col(s), inputs=[e, s])


@dataclass(frozen=True, kw_only=True)
class RMSSE(_PointError):
    scale: str = _column()
    default_name = "rmsse"
    root = True

    def row(self, q: Query) -> str:
        e, s = _squared_error(q, self.y, self.yhat), scale_row(q, self.scale)
        return q.row(("scaled", e, s), nw.col(e) / nw.col(s), inputs=[e, s])


def mase(
    y: Column, yhat: Column, *, scale: Column, weights: Column | None = None, counts: Column | None = None
) -> MASE:
    """Mean absolute scaled error ``(1/n) sum_i |yhat_i - y_i| / s_i``.

    ``s_i`` is the row's ``scale``: the in-sample mean absolute error of the
    (seasonal) naive forecast of its series, the column ``naive_mae`` of
    :func:`naive_scale` joined to the forecast rows (Hyndman and Koehler,
    2006).  Grouped by series (and cutoff) it equals utilsforecast's
    ``mase``; over several series it is the mean of the scaled errors.
    Zero or negative scales are invalid rows.

    Parameters
    ----------
    y, yhat : Column
        Columns of the observed value and of the point forecast.
    scale : Column
        Column of the naive mean absolute error of the row's series (> 0).
    weights, counts : Column, optional
        Row weights and frequency counts, as in :func:`mae`.

    Returns
    -------
    MASE
        A metric object (output ``mase``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> train = pl.DataFrame({"s": ["a"] * 4, "t": [1, 2, 3, 4], "y": [1.0, 3.0, 2.0, 4.0]})
    >>> test = pl.DataFrame({"s": ["a", "a"], "y": [5.0, 3.0], "f": [4.0, 4.0]})
    >>> scales = cf.naive_scale(train, "y", by="s", order_by="t")
    >>> test.join(scales, on="s").conformal.mase("y", "f", scale="naive_mae")
    0.6

    References
    ----------
    R. J. Hyndman and A. B. Koehler (2006), "Another look at measures of
    forecast accuracy", International Journal of Forecasting 22(4), 679-688.
    """
    return MASE(y=role(y), yhat=role(yhat), scale=role(scale), weights=role(weights), counts=role(counts))


def rmsse(
    y: Column, yhat: Column, *, scale: Column, weights: Column | None = None, counts: Column | None = None
) -> RMSSE:
    """Root mean squared scaled error ``sqrt((1/n) sum_i (yhat_i - y_i)^2 / s_i)``.

    ``s_i`` is the row's ``scale`` in **squared** units: the in-sample mean
    squared error of the (seasonal) naive forecast of its series, the column
    ``naive_mse`` of :func:`naive_scale` (the M5 competition's RMSSE;
    grouped by series it equals utilsforecast's ``rmsse``).  Zero or
    negative scales are invalid rows.

    Parameters
    ----------
    y, yhat : Column
        Columns of the observed value and of the point forecast.
    scale : Column
        Column of the naive mean squared error of the row's series (> 0).
    weights, counts : Column, optional
        Row weights and frequency counts, as in :func:`mae`.

    Returns
    -------
    RMSSE
        A metric object (output ``rmsse``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> train = pl.DataFrame({"s": ["a"] * 4, "t": [1, 2, 3, 4], "y": [1.0, 3.0, 2.0, 4.0]})
    >>> test = pl.DataFrame({"s": ["a", "a"], "y": [5.0, 3.0], "f": [4.0, 4.0]})
    >>> scales = cf.naive_scale(train, "y", by="s", order_by="t")
    >>> test.join(scales, on="s").conformal.rmsse("y", "f", scale="naive_mse")
    0.6
    """
    return RMSSE(y=role(y), yhat=role(yhat), scale=role(scale), weights=role(weights), counts=role(counts))


def _pinball_rows(
    q: Query, y: str, quantiles: Quantiles | str, quantile_level: str | None, crossing: str
) -> tuple[str, int]:
    """The row of the mean pinball loss over the levels of one forecast, and the number of levels."""
    v = value_row(q, y)
    rows = []
    for level in quantile_levels(q, quantiles, quantile_level, by_key=False, crossing=crossing):
        tau, extra = level_tau(level)
        d = nw.col(v) - nw.col(level.row)
        loss = tau * d.clip(lower_bound=0.0) + (1.0 - tau) * (-d).clip(lower_bound=0.0)
        rows.append(q.row(("pinball", v, level.row, level.tau), loss, inputs=[v, level.row, *extra]))
    mean = q.row(("pinball_mean", v, *rows), total(nw.col(r) for r in rows) / float(len(rows)), inputs=rows)
    return mean, len(rows)


def _check_quantiles_long(value: object, name: str) -> Quantiles | str:
    return check_quantiles(value, name, long=True)


@dataclass(frozen=True, kw_only=True)
class ScaledPinball(CrossingOutputs, Metric):
    y: str
    quantiles: Quantiles | str = checked(_check_quantiles_long)
    scale: str = _column()
    quantile_level: str | None = checked(check_level_column, None)
    weights: str | None = None
    counts: str | None = None
    crossing: str = checked(check_crossing, "score")
    default_name = "scaled_pinball"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_long_form(self.quantiles, self.quantile_level, "scaled_pinball")
        check_long_crossing(self.quantiles, self.crossing, "scaled_pinball")

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        loss, _ = _pinball_rows(q, self.y, self.quantiles, self.quantile_level, self.crossing)
        s = scale_row(q, self.scale)
        scaled = q.row(("scaled", loss, s), nw.col(loss) / nw.col(s), inputs=[loss, s])
        w = q.weighting(self.weights, counts=self.counts)
        crossing = crossing_outputs(self, q, self.quantiles, self.counts) if not isinstance(self.quantiles, str) else {}
        return {"": ratio(w.sum(scaled), w.total), **crossing}


def scaled_pinball(
    y: Column,
    *,
    quantiles: Mapping[float, Column] | Column,
    scale: Column,
    quantile_level: str | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
    crossing: Literal["score", "sort", "invalid"] = "score",
) -> ScaledPinball:
    """Scaled pinball (quantile) loss ``(1/n) sum_i rho(y_i, q_i) / s_i``.

    ``rho`` is the pinball loss of the row's quantile forecast (the mean over
    its levels), ``s_i`` the naive mean absolute error of the series
    (``naive_mae`` of :func:`naive_scale`).  With one level and the rows of
    one series this is utilsforecast's ``scaled_quantile_loss`` (the M5
    uncertainty competition's measure).  Crossing quantiles follow
    ``crossing`` (as in :func:`conformal_frames.pinball_loss`).

    Parameters
    ----------
    y : Column
        Observed value.
    quantiles : dict or Column
        ``{level: column}`` (wide), or the quantile column with
        ``quantile_level=`` (long form, one row per level).
    scale : Column
        Column of the naive mean absolute error of the row's series (> 0).
    quantile_level : str, optional
        The level column of the long form.
    weights, counts : Column, optional
        Row weights and frequency counts, as in :func:`mae`.
    crossing : {"score", "sort", "invalid"}, default "score"
        Crossing quantiles: scored as given, rearranged in increasing order
        first, or invalid rows (as in :func:`conformal_frames.pinball_loss`);
        with "score" and "sort" the output has ``<name>_n_crossing``.

    Returns
    -------
    ScaledPinball
        A metric object (output ``scaled_pinball``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1.0, 3.0], "q50": [2.0, 2.0], "s": [2.0, 2.0]})
    >>> df.conformal.scaled_pinball("y", quantiles={0.5: "q50"}, scale="s")
    0.25
    """
    return ScaledPinball(
        y=role(y),
        quantiles=_check_quantiles_long(quantiles, "quantiles"),
        scale=role(scale),
        quantile_level=quantile_level,
        weights=role(weights),
        counts=role(counts),
        crossing=crossing,
    )


@dataclass(frozen=True, kw_only=True)
class ScaledCRPS(CrossingOutputs, Metric):
    y: str
    quantiles: Quantiles = checked(check_quantiles)
    weights: str | None = None
    counts: str | None = None
    crossing: str = checked(check_crossing, "score")
    default_name = "scaled_crps"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        loss, _ = _pinball_rows(q, self.y, self.quantiles, None, self.crossing)
        v = value_row(q, self.y)
        size = q.row(("abs", v), nw.col(v).abs(), inputs=[v])
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(2.0 * w.sum(loss), w.sum(size)), **crossing_outputs(self, q, self.quantiles, self.counts)}


def scaled_crps(
    y: Column,
    *,
    quantiles: Mapping[float, Column],
    weights: Column | None = None,
    counts: Column | None = None,
    crossing: Literal["score", "sort", "invalid"] = "score",
) -> ScaledCRPS:
    """Scaled CRPS of quantile forecasts (Rangapuram et al., 2021), as utilsforecast defines it.

    ``2 sum_i rho_i / sum_i |y_i|``, with ``rho_i`` the pinball loss of row
    ``i``'s quantiles averaged over the levels with equal weights: twice the
    summed quantile loss relative to the summed absolute observations of the
    group.  Null where ``sum_i |y_i| = 0`` (utilsforecast adds the machine
    epsilon to the denominator instead).

    Parameters
    ----------
    y : Column
        Observed value.
    quantiles : dict
        ``{level: column}`` of the quantile forecasts.
    weights, counts : Column, optional
        Row weights and frequency counts: both sums are weighted.
    crossing : {"score", "sort", "invalid"}, default "score"
        Crossing quantiles: scored as given, rearranged in increasing order
        first, or invalid rows (as in :func:`conformal_frames.pinball_loss`);
        with "score" and "sort" the output has ``<name>_n_crossing``.

    Returns
    -------
    ScaledCRPS
        A metric object (output ``scaled_crps``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1.0, 3.0], "q50": [2.0, 2.0]})
    >>> df.conformal.scaled_crps("y", quantiles={0.5: "q50"})
    0.5

    References
    ----------
    S. S. Rangapuram et al. (2021), "End-to-end learning of coherent
    probabilistic forecasts for hierarchical time series", ICML, PMLR 139.
    """
    return ScaledCRPS(
        y=role(y), quantiles=check_quantiles(quantiles), weights=role(weights), counts=role(counts), crossing=crossing
    )


# ---------------------------------------------------------------------------
# naive_scale: a frame function
# ---------------------------------------------------------------------------
def _check_season_column(q: Query, season: str, keys: list[str]) -> None:
    """A season column: a positive integer, the same on every row of a series (invalid rows otherwise)."""
    s = q.number(season)
    q.check(f"column {season!r} (season=) is not a positive integer in {{rows}}", (s < 1.0) | (s != s.round()))
    q.check(
        f"column {season!r} (season=) changes within a series in {{rows}}; each series has one season",
        engine.over(s.max(), keys) != engine.over(s.min(), keys),
    )


def _with_lag(rows: Any, keys: list[str], order_by: str, v: str, lag: str, season: int | str) -> Any:
    """``rows`` with ``lag``: the value ``season`` rows back in the series' time order.

    A season column (``__cf_season`` on ``rows``): each row's position in its
    series (its rank by ``order_by``) joins the row ``season`` positions back.
    """
    if not isinstance(season, str):
        return rows.with_columns(engine.over(nw.col(v).shift(season), keys, order_by=order_by).alias(lag))
    pos = "__cf_pos"
    rows = rows.with_columns(engine.over(nw.col(order_by).rank("ordinal"), keys).cast(nw.Int64).alias(pos))
    back = rows.select(*keys, (nw.col(pos) + nw.col("__cf_season")).alias(pos), nw.col(v).alias(lag))
    return engine.join_keys(rows, back, [*keys, pos]).drop(pos, "__cf_season")


@no_weights("naive_scale", "the naive scale of a series is the mean change of its training rows")
@engine.takes_roles("y", "order_by")
def naive_scale(
    frame: Any,
    y: Column,
    *,
    by: Column | Sequence[Column],
    order_by: Column,
    season: int | str = 1,
    invalid: InvalidPolicy | None = None,
) -> Any:
    """Each series' in-sample (seasonal) naive scale, as a frame to join to the forecast rows.

    Per series (``by``), with the training rows ordered by ``order_by`` and
    the changes ``d_t = y_t - y_{t - season}`` (``season`` rows back within
    the series; the first ``season`` rows have none):

    - ``naive_mae = mean_t |d_t|``: the scale of :func:`mase` and
      :func:`scaled_pinball`;
    - ``naive_mse = mean_t d_t^2``: the scale of :func:`rmsse` (squared units);
    - ``n``: the training rows of the series (``n - season`` changes; the
      scales are null for a series of ``season`` rows or fewer).

    Lags are taken by row position in the time order (as utilsforecast and
    the M4/M5 code do): a gap in the time index is not filled.  The rows need
    not be sorted; a repeated time point within a series and missing values
    are invalid rows (``invalid=`` as in :func:`~conformal_frames.evaluate`).
    A constant series has scale 0: :func:`mase` then reports its rows as
    invalid, never an infinity.  Lazy in, lazy out (one window and one
    aggregation).

    Parameters
    ----------
    frame : DataFrame or LazyFrame
        The training rows (any backend narwhals supports).
    y : Column
        Observed value.
    by : Column or list of Column
        Columns identifying one series (e.g. ``["series"]`` or
        ``["series", "cutoff"]`` with one training window per cutoff).
    order_by : Column
        Time column (any sortable type).
    season : int or str, default 1
        Seasonal period of the naive forecast (1: the random walk; 12 for
        monthly data), or the name of a column holding each series' period
        (a positive integer, constant within the series): a panel of monthly
        and quarterly series in one call.
    invalid : {"raise", "drop", "null"}, optional
        Invalid-row policy (default: ``"raise"`` on eager input, ``"null"``
        on lazy input, which adds ``n_invalid``).

    Returns
    -------
    frame
        The caller's type: ``by`` columns, ``naive_mae``, ``naive_mse``,
        ``n`` (and ``n_invalid`` under ``invalid="null"``), sorted by ``by``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> train = pl.DataFrame({"s": ["a"] * 4, "t": [4, 3, 2, 1], "y": [4.0, 2.0, 3.0, 1.0]})
    >>> cf.naive_scale(train, "y", by="s", order_by="t")
    shape: (1, 4)
    ┌─────┬───────────┬───────────┬─────┐
    │ s   ┆ naive_mae ┆ naive_mse ┆ n   │
    │ --- ┆ ---       ┆ ---       ┆ --- │
    │ str ┆ f64       ┆ f64       ┆ i64 │
    ╞═════╪═══════════╪═══════════╪═════╡
    │ a   ┆ 1.666667  ┆ 3.0       ┆ 4   │
    └─────┴───────────┴───────────┴─────┘
    """
    # the roles arrive as column names: engine.takes_roles resolves expressions first
    y = cast(str, y)
    order_by = cast(str, order_by)
    by = cast("str | Sequence[str]", by)
    keys = engine.as_keys(by)
    if not keys:
        msg = "naive_scale needs by= (the columns of one series)"
        raise ValueError(msg)
    check_columns(keys, "by")
    engine.check_index_keys(frame, keys)
    check_column(y, "y")
    check_column(order_by, "order_by")
    if isinstance(season, str):
        check_column(season, "season")
    else:
        season = check_positive_int(season, "season")
    lf, eager = engine.to_lazy(frame)
    rule = engine.policy(invalid, eager)

    def read(q: Query) -> None:
        q.number(y)
        if isinstance(season, str):
            _check_season_column(q, season, keys)
        t = q.column(order_by)
        q.check(f"column {order_by!r} (order_by=) has missing values", t.is_null())
        # a row equal to the previous one in the series' time order (one window, like the lag itself;
        # a time point given k times counts k - 1 rows)
        repeated = t == engine.over(t.shift(1), keys, order_by=order_by)
        q.check(
            f"column {order_by!r} (order_by=) repeats a time point of its series in {{rows}}; "
            "each time point may appear once per series",
            repeated,
        )

    plan = engine.Plan.inputs(lf.collect_schema(), keys, read)
    # the checks ride in the one aggregation (n_invalid); which check failed is computed on failure only
    fused = rule == "null" or (rule == "raise" and eager)
    rows = lf if fused else plan.apply_policy(lf, rule)[0]
    v, lag, bad = "__cf_y", "__cf_lag", "n_invalid"
    rows = rows.select(
        *keys,
        order_by,
        nw.col(y).cast(nw.Float64).alias(v),
        *([plan.invalid_mask().cast(nw.Int64).alias(bad)] if fused else []),
        *(
            [nw.col(season).fill_nan(None).fill_null(1.0).cast(nw.Int64).alias("__cf_season")]
            if isinstance(season, str)
            else []
        ),
    )
    rows = _with_lag(rows, keys, order_by, v, lag, season)
    d = nw.col(v) - nw.col(lag)
    rows = rows.with_columns(d.abs().alias("naive_mae"), (d**2).alias("naive_mse"))
    aggs = [nw.col("naive_mae").mean(), nw.col("naive_mse").mean(), nw.len().alias("n")]
    out = rows.group_by(*keys).agg(*aggs, *([nw.col(bad).sum()] if fused else []))
    out = out.with_columns(nw.col("n").cast(nw.Int64))
    if fused:
        ok = nw.col(bad) == 0
        out = out.with_columns(
            nw.when(ok).then(nw.col("naive_mae")).alias("naive_mae"),
            nw.when(ok).then(nw.col("naive_mse")).alias("naive_mse"),
            nw.col(bad).cast(nw.Int64),
        )
    out = sort_result(out, *keys)
    if rule == "raise" and eager:
        result = out.collect()
        if result[bad].sum():
            plan.raise_failed(plan.check_counts(lf))
        return result.drop(bad).to_native()
    return out.collect().to_native() if eager else out.to_native()
