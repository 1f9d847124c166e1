"""Comparing two models on the same rows: the Diebold-Mariano test.

Notation: a group of ``n`` rows ordered by ``order_by`` (time); two
forecasts ``score_t`` and ``other_t`` of ``y_t`` with losses
``L(y_t, score_t)`` and ``L(y_t, other_t)``; the loss differential
``d_t = L(y_t, score_t) - L(y_t, other_t)``.  For the bootstrap interval of
the difference of any score between two models see
:func:`~conformal_frames.bootstrap_difference`.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal, cast

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames import engine
from conformal_frames._roles import Column, role
from conformal_frames._validate import check_column, checked, choice, optional
from conformal_frames.engine import Metric, NotPerRowError, Query, TableRef, no_weights
from conformal_frames.inputs.binary import binary_row
from conformal_frames.inputs.forecasts import check_horizon, horizon_row
from conformal_frames.numerics.brownian import abs_normal_tail
from conformal_frames.numerics.stats import ratio
from conformal_frames.results import DieboldMarianoTestResult

__all__ = ["diebold_mariano_test"]
METHODS = list(__all__)

Loss = Literal["squared", "absolute", "log", "column"]
SmallSample = Literal["hln"]
#: spread of ``d`` (relative to the losses' root mean square) below which ``d`` counts as constant
_ROUNDING = 1e-12
#: a long-run variance at most this fraction of gamma_0 is a zero one up to rounding (e.g. horizon >= the rows)
_VANISHING = 1e-8
LOSSES: tuple[str, ...] = ("squared", "absolute", "log", "column")


def _check_forecast(value: Any, name: str) -> str | Metric:
    """``score`` / ``other``: a column, or a score metric whose per-row value is the loss."""
    if isinstance(value, Metric):
        if value.kind != "score":
            msg = f"{name}= takes a column or a score metric such as cf.wis(...); {value.output_name} is a {value.kind}"
            raise TypeError(msg)
        return value
    return check_column(value, name)


def _metric_loss(q: Query, metric: Metric) -> str:
    """Row column of the per-row score of ``metric`` (a mean of per-row values)."""
    with q.per_row() as rows:
        try:
            expr = metric.build(q)[""]
        except NotPerRowError as exc:
            msg = (
                f"diebold_mariano_test needs a per-row loss, and {metric.output_name} is not a mean of per-row "
                f"values without weights (it needs {exc}); pass its per-row losses as columns with loss='column'"
            )
            raise TypeError(msg) from None
    assert expr is not None  # a score's main output is an expression
    key: Hashable = ("per_row_score", repr(metric))
    return q.row(key, expr.cast(nw.Float64), inputs=rows.read)


def _loss_rows(q: Query, y: str, score: str, other: str, loss: str) -> tuple[str, str]:
    """Row columns of the per-row losses of ``score`` and ``other``."""
    if loss == "log":
        target = binary_row(q, y)
        rows = []
        for name in (score, other):
            p = q.number(name)
            q.check(
                f"column {name!r} has values outside (0, 1), where the log loss is infinite", (p <= 0.0) | (p >= 1.0)
            )
            s = q.row(("value", name), p)
            t, ps = nw.col(target), nw.col(s)
            expr = -(t * ps.log() + (1.0 - t) * (1.0 - ps).log())
            rows.append(q.row(("log_loss", target, s), expr, inputs=[target, s]))
        return rows[0], rows[1]
    target = q.row(("value", y), q.number(y))
    rows = []
    for name in (score, other):
        s = q.row(("value", name), q.number(name))
        diff = nw.col(target) - nw.col(s)
        expr = diff**2 if loss == "squared" else diff.abs()
        rows.append(q.row((f"{loss}_loss", target, s), expr, inputs=[target, s]))
    return rows[0], rows[1]


def order_row(q: Query, order_by: str, series: str | None = None) -> str:
    """Row column of the ``order_by`` values; missing and repeated values (within a group, and series) are invalid."""
    col = q.column(order_by)
    q.check(f"column {order_by!r} (order_by=) has missing values", col.is_null())
    within = [*q.keys, *([series] if series is not None else []), order_by]
    repeated = engine.over(col.count(), within) > 1
    where = "a group and series" if series is not None else "a group"
    q.check(
        f"column {order_by!r} (order_by=) has repeated values within {where} in {{rows}}; "
        f"each time point may appear once per {'series' if series is not None else 'group'}",
        repeated,
    )
    return q.row(("order", order_by), col)


def _lag_sum_table(c: str, t: str, h: str) -> engine.TableFn:
    """Per group: ``sum_{k=1}^{h-1} sum_t c_t c_(t-k)`` for a horizon ``h`` read from the rows.

    With ``C`` the running sum of ``c`` in time order and ``r`` the row's
    rank, the inner sum over the lags is ``C_(r-1) - C_(r-h)``; ``C_(r-h)``
    comes from a join on ``(keys, r)`` (lazy on every engine, no shift by a
    column).
    """

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        one, r, cum, lag, s = (ref.name(x) for x in ("one", "r", "cum", "lag", "s"))
        f = rows.select(*keys, t, c, h).with_columns(nw.lit(1, nw.Int64).alias(one))
        f = f.with_columns(
            engine.over(nw.col(one).cum_sum(), keys, order_by=t).alias(r),
            engine.over(nw.col(c).cum_sum(), keys, order_by=t).alias(cum),
        )
        shifted = f.select(*keys, (nw.col(r) + nw.col(h).cast(nw.Int64)).alias(r), nw.col(cum).alias(lag))
        joined = engine.join_keys(f, shifted, [*keys, r])
        term = nw.col(c) * (nw.col(cum) - nw.col(c) - nw.col(lag).fill_null(0.0))
        return engine.aggregate(joined.with_columns(term.alias(s)), keys, [nw.col(s).sum()])

    build.native_table = ("lag_sum", c, t, h)  # type: ignore[attr-defined]  # engine.native_window_tables
    return build


def _pooled_table(d: str, t: str, h: str) -> engine.TableFn:
    """Per group, the series pooled: ``d_t`` = the mean loss differential at each time point, then its moments.

    Columns: ``T`` (time points), ``sum`` (of ``d_t``), ``c2`` (``sum_t (d_t - dbar)^2``)
    and ``lag`` (``sum_{k=1}^{h-1} sum_t c_t c_(t-k)``, by :func:`_lag_sum_table`).
    """

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        dt, c, c2 = ref.name("dt"), ref.name("c"), ref.name("c2")
        per_t = engine.aggregate(rows.select(*keys, t, d, h), [*keys, t], [nw.col(d).mean().alias(dt), nw.col(h).max()])
        centered = nw.col(dt) - engine.over(nw.col(dt).mean(), keys)
        per_t = per_t.with_columns(centered.alias(c)).with_columns((nw.col(c) ** 2).alias(c2))
        inner = TableRef(ref.name("lags_"))
        lags = _lag_sum_table(c, t, h)(per_t, keys, inner).select(*keys, inner.col("s").alias(ref.name("lag")))
        moments = [nw.len().alias(ref.name("T")), nw.col(dt).sum().alias(ref.name("sum")), nw.col(c2).sum()]
        table = engine.aggregate(per_t, keys, moments).with_columns(nw.col(ref.name("T")).cast(nw.Float64))
        return engine.join_keys(table, lags, keys)

    build.native_table = ("pooled", d, t, h)  # type: ignore[attr-defined]  # engine.native_window_tables
    return build


def _t_pvalues(stat: str, n: str, output: str) -> engine.NumpyFn:
    """Two-sided Student-t p-values ``2 P(T_{n-1} > |stat|)`` (scipy's ``stdtr``); NaN without a statistic or with n < 2."""

    def fn(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from scipy.special import stdtr

        z, m = data[stat], data[n]
        ok = np.isfinite(z) & (m >= 2.0)
        p = np.full(len(z), np.nan)
        p[ok] = np.minimum(2.0 * stdtr(m[ok] - 1.0, -np.abs(z[ok])), 1.0)
        return {output: p}

    fn.rowwise = True  # type: ignore[attr-defined]  # a group's p-value reads its row only (engine.native_windows)
    return fn


@dataclass(frozen=True, kw_only=True)
class DieboldMarianoTest(Metric):
    y: str | None = checked(optional(check_column))
    score: str | Metric = checked(_check_forecast)
    other: str | Metric = checked(_check_forecast)
    order_by: str = checked(check_column)
    loss: Loss | None = checked(optional(choice(*LOSSES)), None)
    horizon: int | str = checked(check_horizon, 1)
    small_sample: SmallSample | None = checked(optional(choice("hln")), "hln")
    series: str | None = checked(optional(check_column), None)
    default_name = "diebold_mariano_test"
    kind = "test"
    result = DieboldMarianoTestResult

    def __post_init__(self) -> None:
        super().__post_init__()
        metrics = [isinstance(m, Metric) for m in (self.score, self.other)]
        if any(metrics) and not all(metrics):
            msg = "diebold_mariano_test compares two columns or two score metrics, not one of each"
            raise TypeError(msg)
        if all(metrics) and self.loss is not None:
            msg = f"loss={self.loss!r} is for columns; the per-row values of the two score metrics are the losses"
            raise ValueError(msg)
        if not all(metrics) and self.loss != "column" and self.y is None:
            msg = f"diebold_mariano_test with loss={self.loss or 'squared'!r} needs y, the observed value"
            raise TypeError(msg)

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        for m in (self.score, self.other):
            frame = m.prepare(frame) if isinstance(m, Metric) else frame
        return frame

    def _losses(self, q: Query) -> tuple[str, str]:
        if isinstance(self.score, Metric) and isinstance(self.other, Metric):
            return _metric_loss(q, self.score), _metric_loss(q, self.other)
        score, other = cast(str, self.score), cast(str, self.other)
        if self.loss == "column":
            return q.row(("value", score), q.number(score)), q.row(("value", other), q.number(other))
        return _loss_rows(q, cast(str, self.y), score, other, self.loss or "squared")

    def _moments(self, q: Query, d: str, t: str) -> tuple[nw.Expr, nw.Expr, list[nw.Expr], nw.Expr]:
        """``(n, mean of d, [gamma_0 and the lag terms], gamma_0)`` of the group's loss differential."""
        if self.series is not None:  # one differential per time point: the mean over the series
            q.column(self.series)
            h = (
                horizon_row(q, self.horizon)
                if isinstance(self.horizon, str)
                else q.row(("horizon_lit", self.horizon), nw.lit(float(self.horizon)))
            )
            table = q.table(("dm_pooled", d, t, h), _pooled_table(d, t, h))
            n = table.col("T")
            gamma0 = ratio(table.col("c2"), n)
            return n, ratio(table.col("sum"), n), [ratio(table.col("lag").fill_null(0.0), n)], gamma0
        mean = q.row(("group_mean", d), q.over(nw.col(d).mean()), inputs=[d])
        c = q.row(("centered", d), nw.col(d) - nw.col(mean), inputs=[d, mean])
        gamma0 = ratio(q.sum(q.row(("square", c), nw.col(c) ** 2, inputs=[c])), q.n)
        lags: list[nw.Expr] = []
        if isinstance(self.horizon, str):  # one horizon per group, from the data: a lag-sum table
            h = horizon_row(q, self.horizon)
            table = q.table(("dm_lags", c, t, h), _lag_sum_table(c, t, h))
            lags.append(ratio(table.col("s").fill_null(0.0), q.n))
        for k in range(1, self.horizon if isinstance(self.horizon, int) else 1):
            lag = q.row(("lag", c, t, k), engine.over(nw.col(c).shift(k), q.group, order_by=t), inputs=[c, t])
            prod = q.row(("lag_product", c, lag), (nw.col(c) * nw.col(lag)).fill_null(0.0), inputs=[c, lag])
            lags.append(ratio(q.sum(prod), q.n))
        return q.n, ratio(q.sum(d), q.n), lags, gamma0

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        a, b = self._losses(q)
        t = order_row(q, self.order_by, self.series)
        d = q.row(("loss_diff", a, b), nw.col(a) - nw.col(b), inputs=[a, b])
        n, mean_d, lags, gamma0 = self._moments(q, d, t)
        long_run = gamma0 + 2.0 * engine.total(lags) if lags else gamma0
        # a long-run variance <= 0 (possible for horizon > 1; 0 when horizon >= the rows) falls back to gamma_0
        variance = nw.when(long_run > _VANISHING * gamma0).then(long_run).otherwise(gamma0) / n
        # d constant up to the rounding of the losses (e.g. other = score + c): no statistic
        scale = q.sum(q.row(("loss_scale", a, b), nw.col(a) ** 2 + nw.col(b) ** 2, inputs=[a, b]))
        varies = gamma0 > _ROUNDING**2 * ratio(scale, q.n)
        stat = nw.when((variance > 0.0) & varies).then(mean_d / variance.sqrt())
        key = ("diebold_mariano", a, b, t, self.horizon, self.series)
        if self.small_sample == "hln":  # Harvey, Leybourne and Newbold (1997): DM sqrt((n + 1 - 2h + h(h-1)/n) / n)
            h = nw.lit(float(self.horizon)) if isinstance(self.horizon, int) else q.max(horizon_row(q, self.horizon))
            factor = ((n + 1.0 - 2.0 * h + h * (h - 1.0) / n) / n).clip(lower_bound=0.0).sqrt()
            # h >= n: the correction (n - h)(n - h + 1) / n^2 is 0 or meaningless: no test
            factor = nw.when(h < n).then(factor)
            z = q.value(stat * factor, key=(*key, "hln"))
            size = q.value(n, key=("dm_n", key))
            q.numpy(
                [z, size],
                [f"{self.output_name}_pvalue"],
                _t_pvalues(z, size, f"{self.output_name}_pvalue"),
                what=f"{self.output_name} (the Student-t p-value of small_sample='hln', in scipy; small_sample=None is lazy)",
            )
            return {"": nw.col(z), "pvalue": None}
        z = q.value(stat, key=key)
        tail = q.finalize(key, abs_normal_tail(z)).col("q")
        return {"": nw.col(z), "pvalue": (2.0 * tail).clip(upper_bound=1.0)}


@no_weights(
    "diebold_mariano_test", "its long-run variance is that of the loss differences of consecutive rows, a time series"
)
def diebold_mariano_test(
    y: Column | None,
    score: Column | Metric,
    other: Column | Metric,
    *,
    order_by: Column,
    loss: Loss | None = None,
    horizon: int | str = 1,
    small_sample: SmallSample | None = "hln",
    series: Column | None = None,
) -> DieboldMarianoTest:
    """Diebold-Mariano test of equal predictive accuracy of two forecasts.

    With the loss differential ``d_t = L_t(score) - L_t(other)`` of the rows
    ordered by ``order_by``, its mean ``dbar`` and its autocovariances
    ``gamma_k = (1/n) sum_{t > k} (d_t - dbar)(d_{t-k} - dbar)``,

    ``DM = dbar / sqrt(V / n)``,  ``V = gamma_0 + 2 sum_{k=1}^{h-1} gamma_k``

    with ``h = horizon``: the long-run variance of ``d`` truncated at lag
    ``h - 1`` with uniform weights (Diebold and Mariano 1995; ``h``-step
    forecast errors are at most ``(h - 1)``-dependent under optimality).
    When ``V <= 0`` (possible for ``h > 1``) ``gamma_0`` is used instead, as R's
    ``forecast::dm.test`` does; ``V`` at most ``1e-8 gamma_0`` counts as 0
    (rounding: ``V`` is exactly 0 when ``h`` is at least the group's rows).

    ``small_sample="hln"`` (default): the Harvey, Leybourne and Newbold
    (1997) correction, ``DM* = DM sqrt((n + 1 - 2h + h (h - 1) / n) / n)``,
    with the two-sided p-value of a Student-t with ``n - 1`` degrees of
    freedom, ``2 P(T_{n-1} > |DM*|)`` (as R's ``forecast::dm.test``, the
    ``dieboldmariano`` package and nci ``scores`` with
    ``statistic_distribution="t"``): the normal p-value rejects too often at
    the ``n`` of a backtest (20 to 100 points per series and horizon).  The
    p-value is scipy's Student-t on the per-group table (eager frames and
    polars LazyFrames; on DuckDB and Spark relations it needs a collected
    frame: ``BackendLimitError``).  A group with ``h >= n`` has no HLN test
    (null statistic and p-value): the factor ``(n - h)(n - h + 1) / n^2`` is 0
    at ``h = n`` and ``n + 1`` (any data would read ``DM* = 0``, p = 1) and
    meaningless beyond.  ``None``: ``DM`` and the asymptotic
    normal p-value ``2 (1 - Phi(|DM|))``, lazy on every backend.

    ``DM > 0`` means ``score`` has the larger mean loss; the statistic is
    null when ``d`` is constant (its standard deviation at most ``1e-12``
    times the root mean square of the losses: rounding, e.g. when
    ``other = score + c``).

    Losses: ``loss="squared"`` (default), ``"absolute"`` or ``"log"`` of the
    forecasts ``score`` and ``other`` of ``y``; ``loss="column"``: ``score``
    and ``other`` are columns of per-row losses (any loss computed
    upstream; ``y`` is not read and may be ``None``); or ``score`` and
    ``other`` are two score metrics that are means of per-row values
    (``cf.wis(...)``, ``cf.pinball_loss(...)``, ``cf.crps(...)``,
    ``cf.mae(...)``, without ``weights=``): their per-row values are the
    losses (``loss`` stays ``None``; a metric without per-row values is a
    ``TypeError``).

    ``series=``: pool several series (e.g. locations) in one test: ``d_t``
    is the mean of the series' loss differentials at time point ``t``
    (those present), and the test runs on that one series of ``n`` time
    points, so ``by="horizon", horizon="horizon", series="series"`` tests each
    horizon across all series.  ``order_by`` then repeats across series
    (once per series and group).

    Only lag products need the order: they are window functions over the
    group ordered by ``order_by`` (grouped and lazy on every backend).  Rows
    with a missing or repeated ``order_by`` value (within a group, or a
    series) are invalid.

    Parameters
    ----------
    y : Column or None
        Observed value (a 0/1 label for ``loss="log"``); not read with
        ``loss="column"`` or score metrics.
    score, other : Column or Metric
        The two models' forecasts of ``y`` (probabilities strictly inside
        ``(0, 1)`` for ``loss="log"``), their per-row losses
        (``loss="column"``), or two score metrics.
    order_by : Column
        Time column (any sortable type); one row per time point and group
        (and series).
    loss : {"squared", "absolute", "log", "column"}, optional
        ``(y - f)^2`` (default for columns), ``|y - f|``,
        ``-(y log f + (1 - y) log(1 - f))``, or the columns themselves.
    horizon : int or str, default 1
        Forecast horizon ``h``; autocovariances up to lag ``h - 1`` enter
        ``V``.  A column name: each group's horizon from the data (positive
        integers, constant within each group, else invalid rows); with
        ``by="horizon", horizon="horizon"`` every horizon is tested with its
        own ``h``, as one call per horizon would.
    small_sample : {"hln"} or None, default "hln"
        The small-sample correction and Student-t p-value, or none.
    series : Column, optional
        Column identifying the series to pool (mean differential per time
        point).

    Returns
    -------
    DieboldMarianoTest
        A metric object.  ``df.conformal.diebold_mariano_test(...)`` returns a
        :class:`~conformal_frames.results.DieboldMarianoTestResult` on an eager
        frame without ``by=``, otherwise a frame with the group keys,
        ``diebold_mariano_test``, ``diebold_mariano_test_pvalue`` and ``n``
        (rows).

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"t": range(8), "y": [1.0, 2, 3, 2, 1, 2, 3, 2],
    ...                    "f1": [1.1, 2.2, 2.9, 2.1, 1.2, 1.8, 3.1, 2.0],
    ...                    "f2": [1.3, 1.6, 3.1, 2.4, 0.9, 2.3, 2.6, 2.2]})
    >>> res = df.conformal.diebold_mariano_test("y", "f1", "f2", order_by="t")
    >>> round(res.statistic, 4), round(res.pvalue, 4)
    (-2.9468, 0.0215)
    >>> res = df.conformal.diebold_mariano_test("y", "f1", "f2", order_by="t", small_sample=None)
    >>> round(res.statistic, 4), round(res.pvalue, 4)
    (-3.1502, 0.0016)

    References
    ----------
    F. X. Diebold and R. S. Mariano (1995), "Comparing predictive accuracy",
    Journal of Business & Economic Statistics 13(3), 253-263.
    D. Harvey, S. Leybourne and P. Newbold (1997), "Testing the equality of
    prediction mean squared errors", International Journal of Forecasting
    13(2), 281-291.
    """
    return DieboldMarianoTest(
        y=role(y),
        score=score if isinstance(score, Metric) else role(score),
        other=other if isinstance(other, Metric) else role(other),
        order_by=role(order_by),
        loss=loss,
        horizon=horizon,
        small_sample=small_sample,
        series=role(series),
    )
