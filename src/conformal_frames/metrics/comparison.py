"""Comparing two models on the same rows: the Diebold-Mariano test.

Notation: a group of ``n`` rows ordered by ``order_by`` (time); two
forecasts ``score_t`` and ``other_t`` of ``y_t`` with losses
``L(y_t, score_t)`` and ``L(y_t, other_t)``; the loss differential
``d_t = L(y_t, score_t) - L(y_t, other_t)``.  For the bootstrap interval of
the difference of any score between two models see
:func:`~conformal_frames.bootstrap_difference`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import narwhals.stable.v2 as nw

from conformal_frames import engine
from conformal_frames._validate import check_column, choice
from conformal_frames.engine import Metric, Query, TableRef, no_weights
from conformal_frames.inputs.binary import binary_row
from conformal_frames.inputs.forecasts import check_horizon, horizon_row
from conformal_frames.numerics.brownian import abs_normal_tail
from conformal_frames.numerics.stats import ratio
from conformal_frames.results import DieboldMarianoTestResult

__all__ = ["diebold_mariano_test"]
METHODS = list(__all__)

Loss = Literal["squared", "absolute", "log"]
#: spread of ``d`` (relative to the losses' root mean square) below which ``d`` counts as constant
_ROUNDING = 1e-12
#: a long-run variance at most this fraction of gamma_0 is a zero one up to rounding (e.g. horizon >= the rows)
_VANISHING = 1e-8
LOSSES: tuple[str, ...] = ("squared", "absolute", "log")


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


def order_row(q: Query, order_by: str) -> str:
    """Row column of the ``order_by`` values; missing and repeated values (within a group) are invalid."""
    col = q.column(order_by)
    q.check(f"column {order_by!r} (order_by=) has missing values", col.is_null())
    repeated = engine.over(col.count(), [*q.keys, order_by]) > 1
    q.check(
        f"column {order_by!r} (order_by=) has repeated values within a group in {{rows}}; "
        "each time point may appear once per group",
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

    return build


@dataclass(frozen=True, kw_only=True)
class DieboldMarianoTest(Metric):
    y: str
    score: str
    other: str = field(metadata={"check": check_column})
    order_by: str = field(metadata={"check": check_column})
    loss: Loss = field(default="squared", metadata={"check": choice(*LOSSES)})
    horizon: int | str = field(default=1, metadata={"check": check_horizon})
    default_name = "diebold_mariano_test"
    kind = "test"
    result = DieboldMarianoTestResult

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        a, b = _loss_rows(q, self.y, self.score, self.other, self.loss)
        t = order_row(q, self.order_by)
        d = q.row(("loss_diff", a, b), nw.col(a) - nw.col(b), inputs=[a, b])
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
        long_run = gamma0 + 2.0 * engine.total(lags) if lags else gamma0
        # a long-run variance <= 0 (possible for horizon > 1; 0 when horizon >= the rows) falls back to gamma_0
        variance = nw.when(long_run > _VANISHING * gamma0).then(long_run).otherwise(gamma0) / q.n
        mean_d = ratio(q.sum(d), q.n)
        # d constant up to the rounding of the losses (e.g. other = score + c): no statistic
        scale = q.sum(q.row(("loss_scale", a, b), nw.col(a) ** 2 + nw.col(b) ** 2, inputs=[a, b]))
        varies = gamma0 > _ROUNDING**2 * ratio(scale, q.n)
        stat = nw.when((variance > 0.0) & varies).then(mean_d / variance.sqrt())
        key = ("diebold_mariano", a, b, t, self.horizon)
        z = q.value(stat, key=key)
        tail = q.finalize(key, abs_normal_tail(z)).col("q")
        return {"": nw.col(z), "pvalue": (2.0 * tail).clip(upper_bound=1.0)}


@no_weights(
    "diebold_mariano_test", "its long-run variance is that of the loss differences of consecutive rows, a time series"
)
def diebold_mariano_test(
    y: str, score: str, other: str, *, order_by: str, loss: Loss = "squared", horizon: int | str = 1
) -> DieboldMarianoTest:
    """Diebold-Mariano test of equal predictive accuracy of two forecasts.

    With the loss differential ``d_t = L(y_t, score_t) - L(y_t, other_t)``
    of the rows ordered by ``order_by``, its mean ``dbar`` and its
    autocovariances ``gamma_k = (1/n) sum_{t > k} (d_t - dbar)(d_{t-k} - dbar)``,

    ``DM = dbar / sqrt(V / n)``,  ``V = gamma_0 + 2 sum_{k=1}^{h-1} gamma_k``

    with ``h = horizon``: the long-run variance of ``d`` truncated at lag
    ``h - 1`` with uniform weights (Diebold and Mariano 1995; ``h``-step
    forecast errors are at most ``(h - 1)``-dependent under optimality).
    When ``V <= 0`` (possible for ``h > 1``) ``gamma_0`` is used instead, as R's
    ``forecast::dm.test`` does; ``V`` at most ``1e-8 gamma_0`` counts as 0
    (rounding: ``V`` is exactly 0 when ``h`` is at least the group's rows).  ``pvalue`` is two-sided,
    ``2 (1 - Phi(|DM|))`` (asymptotic normal; no small-sample correction).
    ``DM > 0`` means ``score`` has the larger mean loss; the statistic is
    null when ``d`` is constant (its standard deviation at most ``1e-12``
    times the root mean square of the losses: rounding, e.g. when
    ``other = score + c``).

    Only lag products need the order: they are window functions over the
    group ordered by ``order_by`` (grouped and lazy on every backend).  Rows
    with a missing or repeated ``order_by`` value (within a group) are invalid.

    Parameters
    ----------
    y : str
        Observed value (a 0/1 label for ``loss="log"``).
    score, other : str
        The two models' forecasts of ``y`` (probabilities strictly inside
        ``(0, 1)`` for ``loss="log"``).
    order_by : str
        Time column (any sortable type); one row per time point and group.
    loss : {"squared", "absolute", "log"}, default "squared"
        ``(y - f)^2``, ``|y - f|`` or ``-(y log f + (1 - y) log(1 - f))``.
    horizon : int or str, default 1
        Forecast horizon ``h``; autocovariances up to lag ``h - 1`` enter
        ``V``.  A column name: each group's horizon from the data (positive
        integers, constant within each group, else invalid rows); with
        ``by="horizon", horizon="horizon"`` every horizon is tested with its
        own ``h``, as one call per horizon would.

    Returns
    -------
    DieboldMarianoTest
        A metric object.  ``df.conformal.diebold_mariano_test(...)`` returns a
        :class:`~conformal_frames.results.DieboldMarianoTestResult` on an eager
        frame without ``by=``, otherwise a frame with the group keys,
        ``diebold_mariano_test``, ``diebold_mariano_test_pvalue`` and ``n``.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"t": range(8), "y": [1.0, 2, 3, 2, 1, 2, 3, 2],
    ...                    "f1": [1.1, 2.2, 2.9, 2.1, 1.2, 1.8, 3.1, 2.0],
    ...                    "f2": [1.3, 1.6, 3.1, 2.4, 0.9, 2.3, 2.6, 2.2]})
    >>> res = df.conformal.diebold_mariano_test("y", "f1", "f2", order_by="t")
    >>> round(res.statistic, 4), round(res.pvalue, 4)
    (-3.1502, 0.0016)

    References
    ----------
    F. X. Diebold and R. S. Mariano (1995), "Comparing predictive accuracy",
    Journal of Business & Economic Statistics 13(3), 253-263.
    """
    return DieboldMarianoTest(y=y, score=score, other=other, order_by=order_by, loss=loss, horizon=horizon)
