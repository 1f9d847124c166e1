"""Quantile and interval forecasts: pinball loss, WIS, quantile and interval coverage.

Notation: a group of ``n`` rows (forecasts), observed value ``y``; quantile
forecasts ``q_tau`` at levels ``tau`` (``quantiles={tau: column}``, see
:mod:`~conformal_frames.inputs.forecasts` for every accepted form and its
checks); central intervals ``(lo_c, hi_c)`` at confidence levels ``c``.  The
pinball (quantile) loss of one forecast is

``rho_tau(y, q) = tau * (y - q)^+ + (1 - tau) * (q - y)^+``.

Crossing quantiles (``q_a > q_b`` for levels ``a < b``, or intervals that
are not nested) follow ``crossing=`` on every metric here (read in
:func:`~conformal_frames.inputs.forecasts.quantile_rows`): ``"score"``
(default) scores them as given (each definition holds for any quantiles),
``"sort"`` rearranges each row's quantiles in increasing order first, both
with an output ``<name>_n_crossing`` (the rows with any crossing) and a
warning naming the count on eager input; ``"invalid"`` makes them invalid
rows.  An interval with ``lo > hi`` is its two quantiles crossing: the same
rule (``"score"``: it covers nothing and has a negative width; ``"sort"``:
the interval-set metrics score the sorted bounds; ``"invalid"``: an error on
eager input, null metrics and ``n_invalid`` on lazy input, left out with
``invalid="drop"``).  The single-interval metrics (``coverage``, ``width``,
``winkler``) have no ``crossing=``: there ``lo > hi`` is an invalid row.

Per-level results (``per_level=True`` and :func:`interval_coverage`) are long
tables, one row per group and level, with the level in a column
``quantile_level`` or ``confidence_level``.  Inside
:func:`~conformal_frames.evaluate` they are wide columns ``<name>_level<p>``,
``<name>_level<p>_<stat>`` (``p`` the level's name,
:func:`~conformal_frames.inputs.levels.level_name`: ``90`` for 0.9,
``97_5`` for 0.975; in the long form, where the level is a ``by=`` key,
``<name>_level``) and ``<name>_n``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import narwhals.stable.v2 as nw

from conformal_frames._roles import Column, role
from conformal_frames._validate import check_boolean, checked, optional
from conformal_frames.engine import Metric, Query, Weighting, indicator, sort_result, stack, total
from conformal_frames.inputs.forecasts import (
    CrossingOutputs,
    Intervals,
    QuantileLevel,
    Quantiles,
    check_crossing,
    check_intervals,
    check_level_column,
    check_long_crossing,
    check_long_form,
    check_quantiles,
    crossing_interval_checks,
    crossing_outputs,
    interval_set_rows,
    intervals_as_quantiles,
    is_close_level,
    level_tau,
    quantile_levels,
    quantile_rows,
    value_row,
)
from conformal_frames.inputs.levels import level_name
from conformal_frames.numerics.stats import ratio, wilson_interval

__all__ = ["interval_coverage", "pinball_loss", "quantile_coverage", "wis"]
METHODS = list(__all__)

F64 = nw.Float64


def _check_quantiles_long(value: object, name: str) -> Quantiles | str:
    return check_quantiles(value, name, long=True)


def pinball_row(q: Query, y: str, level: QuantileLevel) -> str:
    """Row column ``rho_tau(y, q_tau)`` (the quantile loss of one forecast)."""
    tau, extra = level_tau(level)
    d = nw.col(y) - nw.col(level.row)
    loss = tau * d.clip(lower_bound=0.0) + (1.0 - tau) * (-d).clip(lower_bound=0.0)
    return q.row(("pinball", y, level.row, level.tau), loss, inputs=[y, level.row, *extra])


def _below_row(q: Query, y: str, level: QuantileLevel) -> str:
    """Row column ``1[y <= q_tau]``."""
    return q.row(("below", y, level.row), (nw.col(y) <= nw.col(level.row)).cast(F64), inputs=[y, level.row])


# ---------------------------------------------------------------------------
# long tables: one row per group and level (core.stack: one pass on Spark)
# ---------------------------------------------------------------------------
def group_rows(frame: nw.LazyFrame, name: str) -> nw.Expr:
    """The long table's ``n``: evaluate's ``n`` where the wide frame has it.

    Never null: the metric's own ``<name>_n`` is null for a group with invalid
    rows (``invalid="null"``), which pandas cannot cast to int64.
    """
    if "n" in frame.collect_schema().names():
        return nw.col("n")
    return nw.col(f"{name}_n").cast(nw.Int64).alias("n")


def level_suffix(level: float | str) -> str:
    """``level<p>`` of a level's wide columns (:func:`level_name`); ``level`` in the long form."""
    return "level" if isinstance(level, str) else f"level{level_name(level)}"


def long_by_level(
    frame: nw.LazyFrame,
    keys: list[str],
    name: str,
    levels: Sequence[float],
    stats: dict[str, str],
    level_column: str,
    per_group: Sequence[str] = (),
) -> nw.LazyFrame:
    """The wide per-level columns of ``name`` as one row per group and level.

    ``stats`` maps a long-table column to the wide suffix after
    ``<name>_level<p>`` (``""`` for the level's main column); ``per_group``
    names the columns ``<name>_<c>`` common to every level (e.g. ``n_eff``),
    placed before ``n``.  Built by
    :func:`~conformal_frames.engine.stack`: a union of one select per level,
    one unpivot on Spark (where a union would run the query once per level).
    """
    parts = [
        {
            level_column: nw.lit(level, F64),
            **{s: nw.col(f"{name}_{level_suffix(level)}{'_' + x if x else ''}").cast(F64) for s, x in stats.items()},
            **{c: nw.col(f"{name}_{c}") for c in per_group},  # the wide table's dtypes (n_eff Float64, counts Int64)
            "n": group_rows(frame, name),
        }
        for level in levels
    ]
    return sort_result(stack(frame, keys, parts), *keys, level_column)


# ---------------------------------------------------------------------------
# pinball loss
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class PinballLoss(CrossingOutputs, Metric):
    y: str
    quantiles: Quantiles | str = checked(_check_quantiles_long)
    quantile_level: str | None = checked(check_level_column, None)
    per_level: bool = checked(check_boolean, False)
    weights: str | None = None
    counts: str | None = None
    crossing: str = checked(check_crossing, "score")
    default_name = "pinball_loss"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_long_form(self.quantiles, self.quantile_level, "pinball_loss")
        check_long_crossing(self.quantiles, self.crossing, "pinball_loss")

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        y = value_row(q, self.y)
        levels = quantile_levels(q, self.quantiles, self.quantile_level, by_key=self.per_level, crossing=self.crossing)
        rows = [pinball_row(q, y, lv) for lv in levels]
        w = q.weighting(self.weights, counts=self.counts)
        crossing = crossing_outputs(self, q, self.quantiles, self.counts) if not isinstance(self.quantiles, str) else {}
        if not self.per_level:  # one row column and one sum, whatever the number of levels
            mean = q.row(("pinball_mean", y, *rows), total(nw.col(r) for r in rows) / float(len(rows)), inputs=rows)
            return {"": ratio(w.sum(mean), w.total), **crossing}
        out: dict[str, nw.Expr | None] = {"": ratio(total(w.sum(r) for r in rows), w.total * float(len(rows)))}
        out.update({level_suffix(lv.tau): ratio(w.sum(r), w.total) for lv, r in zip(levels, rows)})
        out |= crossing
        out["n"] = q.n
        return out


class PinballLossTable(PinballLoss):
    """:class:`PinballLoss` with ``per_level=True``: a direct call returns the long table."""

    kind = "table"
    long = True

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        per_group = ("n_crossing",) if self.counts_crossing() else ()
        return _to_long(self, frame, keys, self.quantiles, "quantile_level", {self.output_name: ""}, per_group)


def _to_long(
    metric: Metric,
    frame: nw.LazyFrame,
    keys: list[str],
    levels: object,
    column: str,
    stats: dict[str, str],
    per_group: Sequence[str] = (),
) -> nw.LazyFrame:
    """A per-level metric's long table; in the long form the level is already a by= key."""
    name = metric.output_name
    if isinstance(levels, str):  # long form: one level per group, the group's own key
        table = frame.select(
            *keys,
            *[nw.col(f"{name}_level{'_' + s if s else ''}").alias(c) for c, s in stats.items()],
            *[nw.col(f"{name}_{c}").alias(c) for c in per_group],
            group_rows(frame, name),
        )
        return sort_result(table, *keys)
    values = [float(level[0]) for level in levels]  # type: ignore[attr-defined]
    return long_by_level(frame, keys, name, values, stats, column, per_group)


def _wilson(q: Query, w: Weighting, rows: list[str], ci_level: float) -> list[tuple[nw.Expr, nw.Expr]]:
    """The Wilson interval of each (weighted) proportion of the row columns ``rows`` (at Kish's ``n_eff``)."""
    return [wilson_interval(q, *w.binomial(w.summed(r)), ci_level) for r in rows]


def _n_eff(weights: str | None) -> tuple[str, ...]:
    """The per-group columns of a long coverage table: ``n_eff`` when weighted."""
    return () if weights is None else ("n_eff",)


def pinball_loss(
    y: Column,
    *,
    quantiles: Mapping[float, Column] | Column,
    quantile_level: str | None = None,
    per_level: bool = False,
    weights: Column | None = None,
    counts: Column | None = None,
    crossing: str = "score",
) -> PinballLoss:
    """Pinball (quantile) loss, averaged over the quantile levels (lower is better).

    ``(1/n) sum_i (1/L) sum_tau rho_tau(y_i, q_tau,i)`` with
    ``rho_tau(y, q) = tau (y - q)^+ + (1 - tau) (q - y)^+`` over the ``L``
    levels of ``quantiles``.  Per level it equals scikit-learn's
    ``mean_pinball_loss(y, q_tau, alpha=tau)``; twice the loss at level 0.5
    is the mean absolute error of the median.

    Parameters
    ----------
    y : Column
        Column of the observed value.
    quantiles : dict or Column
        ``{level: column}`` (wide form; crossing rows: see ``crossing``), or
        the column of the quantile in the long form (with ``quantile_level``).
    quantile_level : str, optional
        Long form: the column of each row's level, in (0, 1).  The loss is
        the mean over rows; with ``per_level=True`` it must be a ``by=`` key.
    per_level : bool, default False
        A direct call returns the long table: group keys, ``quantile_level``,
        ``pinball_loss`` and ``n``, one row per level (in ``evaluate``: wide
        columns ``pinball_loss_level<p>`` next to the mean, ``p`` = 10 for 0.1).
    weights : Column, optional
        Column of non-negative row weights: every mean becomes the weighted
        mean ``sum_i w_i x_i / sum_i w_i`` (per level: scikit-learn's
        ``mean_pinball_loss(..., sample_weight=w)``; see the docs page
        "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").
    crossing : {"score", "sort", "invalid"}, default "score"
        Rows whose quantiles cross (``q_a > q_b`` for levels ``a < b``):
        ``"score"`` scores them as given, ``"sort"`` rearranges each row's
        quantiles in increasing order first (never a higher pinball loss);
        both add the output ``<name>_n_crossing`` (rows with any crossing)
        and warn with the count on eager input.  ``"invalid"``: crossing
        rows are invalid rows (the ``invalid=`` policy of the evaluation).

    Returns
    -------
    PinballLoss
        A metric object.  ``df.conformal.pinball_loss(...)`` returns a float
        on an eager frame without ``by=``, otherwise a frame of the caller's
        type with the group keys, ``pinball_loss`` and ``n`` (lazy in, lazy
        out); :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1.0, 4.0], "q10": [0.0, 1.0], "q50": [2.0, 2.0], "q90": [3.0, 3.0]})
    >>> df.conformal.pinball_loss("y", quantiles={0.1: "q10", 0.5: "q50", 0.9: "q90"})
    0.5
    >>> df.conformal.pinball_loss("y", quantiles={0.1: "q10", 0.9: "q90"}, per_level=True)
    shape: (2, 4)
    ┌────────────────┬──────────────┬────────────┬─────┐
    │ quantile_level ┆ pinball_loss ┆ n_crossing ┆ n   │
    │ ---            ┆ ---          ┆ ---        ┆ --- │
    │ f64            ┆ f64          ┆ i64        ┆ i64 │
    ╞════════════════╪══════════════╪════════════╪═════╡
    │ 0.1            ┆ 0.2          ┆ 0          ┆ 2   │
    │ 0.9            ┆ 0.55         ┆ 0          ┆ 2   │
    └────────────────┴──────────────┴────────────┴─────┘

    References
    ----------
    R. Koenker and G. Bassett (1978), "Regression quantiles", Econometrica
    46(1), 33-50; T. Gneiting and A. E. Raftery (2007), "Strictly proper
    scoring rules, prediction, and estimation", JASA 102, 359-378.
    """
    cls = PinballLossTable if per_level is True else PinballLoss
    return cls(
        y=role(y),
        quantiles=_check_quantiles_long(quantiles, "quantiles"),
        quantile_level=quantile_level,
        per_level=per_level,
        weights=role(weights),
        counts=role(counts),
        crossing=crossing,
    )


# ---------------------------------------------------------------------------
# weighted interval score
# ---------------------------------------------------------------------------
def wis_pairs(quantiles: Quantiles) -> tuple[str, list[tuple[float, str, str]]]:
    """The median column and the ``(tau, lower, upper)`` pairs of a symmetric quantile set."""
    levels = dict(quantiles)
    median = [c for t, c in quantiles if is_close_level(t, 0.5)]
    if not median:
        msg = (
            f"wis needs the median: quantiles= has no level 0.5 (levels {sorted(levels)}); "
            "the weighted interval score of Bracher et al. (2021) includes the median term"
        )
        raise ValueError(msg)
    pairs = []
    for tau, lower in quantiles:
        if tau >= 0.5 and not is_close_level(tau, 0.5):
            break
        if is_close_level(tau, 0.5):
            continue
        upper = [c for t, c in quantiles if is_close_level(t, 1.0 - tau)]
        if not upper:
            msg = f"wis needs central intervals: quantiles= has the level {tau:g} but not {1.0 - tau:g}"
            raise ValueError(msg)
        pairs.append((tau, lower, upper[0]))
    if 2 * len(pairs) + 1 != len(quantiles):
        unmatched = [t for t, _ in quantiles if t > 0.5 and not any(is_close_level(t, 1.0 - p[0]) for p in pairs)]
        msg = f"wis needs central intervals: quantiles= has the level {unmatched[0]:g} but not {1.0 - unmatched[0]:g}"
        raise ValueError(msg)
    return median[0], pairs


@dataclass(frozen=True, kw_only=True)
class WIS(CrossingOutputs, Metric):
    y: str
    quantiles: Quantiles | None = checked(optional(check_quantiles), None)
    intervals: Intervals | None = checked(optional(check_intervals), None)
    median: str | None = checked(optional(check_level_column), None)
    weights: str | None = None
    counts: str | None = None
    crossing: str = checked(check_crossing, "score")
    default_name = "wis"

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.quantiles is None) == (self.intervals is None):
            msg = "wis needs exactly one of quantiles= ({level: column}) or intervals= ({confidence_level: (lo, hi)})"
            raise ValueError(msg)
        if self.intervals is not None and self.median is None:
            msg = "wis with intervals= needs median= (the column of the median forecast): the score includes the median term"
            raise ValueError(msg)
        if self.quantiles is not None and self.median is not None:
            msg = "wis: median= is for intervals=; with quantiles= the median is the level 0.5"
            raise ValueError(msg)
        if self.quantiles is not None:
            wis_pairs(self.quantiles)

    def quantile_set(self) -> Quantiles:
        """The forecast's quantiles: ``quantiles=``, or the intervals' bounds and the median."""
        if self.quantiles is not None:
            return self.quantiles
        assert self.intervals is not None and self.median is not None
        return tuple(sorted([*intervals_as_quantiles(self.intervals), (0.5, self.median)]))

    def _components(self, q: Query) -> tuple[str, str, str]:
        """Row columns: dispersion, overprediction, underprediction (each divided by K + 1/2).

        The quantile form: ``1 / (K + 1/2)`` times the pinball losses of the
        ``2K + 1`` quantiles, split into its three parts; it equals the
        interval form for any bounds (crossing or not).
        """
        y = value_row(q, self.y)
        if self.crossing == "invalid" and self.intervals is not None:
            crossing_interval_checks(q, self.intervals)
        quantile_set = self.quantile_set()
        mode = "score" if self.crossing == "invalid" and self.intervals is not None else self.crossing
        rows = quantile_rows(q, quantile_set, mode)

        def row_at(level: float) -> str:
            return next(r for lv, r in rows if is_close_level(lv, level))

        _, pairs = wis_pairs(quantile_set)
        m = row_at(0.5)
        bounds = [(tau, row_at(tau), row_at(1.0 - tau)) for tau, _, _ in pairs]
        scale = 1.0 / (len(pairs) + 0.5)
        yc, mc = nw.col(y), nw.col(m)
        disp = total([nw.lit(0.0), *[tau * (nw.col(hi) - nw.col(lo)) for tau, lo, hi in bounds]]) * scale
        over = total(
            [0.5 * (mc - yc).clip(lower_bound=0.0), *[(nw.col(lo) - yc).clip(lower_bound=0.0) for _, lo, _ in bounds]]
        )
        under = total(
            [0.5 * (yc - mc).clip(lower_bound=0.0), *[(yc - nw.col(hi)).clip(lower_bound=0.0) for _, _, hi in bounds]]
        )
        inputs = [y, m, *[r for _, lo, hi in bounds for r in (lo, hi)]]
        key = ("wis", y, m, tuple(bounds))
        return (
            q.row((*key, "dispersion"), disp, inputs=inputs),
            q.row((*key, "overprediction"), over * scale, inputs=inputs),
            q.row((*key, "underprediction"), under * scale, inputs=inputs),
        )

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        disp, over, under = (w.sum(r) for r in self._components(q))
        return {
            "": ratio(disp + over + under, w.total),
            "dispersion": ratio(disp, w.total),
            "overprediction": ratio(over, w.total),
            "underprediction": ratio(under, w.total),
            **crossing_outputs(self, q, self.quantile_set(), self.counts),
        }


def wis(
    y: Column,
    *,
    quantiles: Mapping[float, Column] | None = None,
    intervals: Mapping[float, tuple[Column, Column]] | None = None,
    median: str | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
    crossing: str = "score",
) -> WIS:
    """Weighted interval score of Bracher, Ray, Gneiting and Reich (2021) (lower is better).

    For ``K`` central intervals ``(l_k, u_k)`` at confidence levels
    ``1 - alpha_k`` and the median ``m``::

        WIS = 1 / (K + 1/2) * (1/2 |y - m| + sum_k alpha_k / 2 * IS_alpha_k)
        IS_alpha(l, u; y) = (u - l) + 2/alpha (l - y)^+ + 2/alpha (y - u)^+

    averaged over rows.  It equals ``1 / (K + 1/2)`` times the sum of the
    pinball losses of the ``2K + 1`` quantiles.  Three more outputs add up
    to it: ``wis_dispersion`` (``sum_k alpha_k/2 (u_k - l_k)``),
    ``wis_overprediction`` (``sum_k (l_k - y)^+ + 1/2 (m - y)^+``) and
    ``wis_underprediction`` (``sum_k (y - u_k)^+ + 1/2 (y - m)^+``), each
    divided by ``K + 1/2`` and averaged.

    Parameters
    ----------
    y : Column
        Column of the observed value.
    quantiles : dict, optional
        ``{level: column}`` with the median (level 0.5) and, for every level
        ``tau < 0.5``, the level ``1 - tau``.
    intervals : dict, optional
        ``{confidence_level: (lo, hi)}`` instead of ``quantiles``, with
        ``median``: the quantiles ``(1 -+ c) / 2`` and the median, so an
        interval with ``lo > hi``, intervals that are not nested or a median
        outside an interval are crossing quantiles (see ``crossing``).
    median : str, optional
        With ``intervals``: the column of the median forecast.
    weights : Column, optional
        Column of non-negative row weights: the score and its components
        become weighted means ``sum_i w_i x_i / sum_i w_i`` (see the docs
        page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").
    crossing : {"score", "sort", "invalid"}, default "score"
        Rows whose quantiles cross: ``"score"`` scores them as given (the
        quantile form above holds for any quantiles), ``"sort"`` rearranges
        each row's quantiles in increasing order first (never a higher
        score); both add the output ``wis_n_crossing`` (rows with any
        crossing) and warn with the count on eager input.  ``"invalid"``:
        crossing rows are invalid rows (with ``intervals=``: ``lo > hi`` and
        intervals that are not nested, as before 0.3).

    Returns
    -------
    WIS
        A metric object.  ``df.conformal.wis(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``wis``, its three components and ``n`` (lazy in,
        lazy out); :func:`~conformal_frames.evaluate` combines it with other
        metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [1.0, 4.0], "q10": [0.0, 1.0], "q50": [2.0, 2.0], "q90": [3.0, 3.0]})
    >>> df.conformal.wis("y", quantiles={0.1: "q10", 0.5: "q50", 0.9: "q90"})
    1.0
    >>> df.conformal.wis("y", intervals={0.8: ("q10", "q90")}, median="q50")
    1.0

    References
    ----------
    J. Bracher, E. L. Ray, T. Gneiting and N. G. Reich (2021), "Evaluating
    epidemic forecasts in an interval format", PLOS Computational Biology
    17(2), e1008618; T. Gneiting and A. E. Raftery (2007), JASA 102, 359-378.
    """
    return WIS(
        y=role(y),
        quantiles=None if quantiles is None else check_quantiles(quantiles),
        intervals=None if intervals is None else check_intervals(intervals),
        median=median,
        weights=role(weights),
        counts=role(counts),
        crossing=crossing,
    )


# ---------------------------------------------------------------------------
# quantile coverage
# ---------------------------------------------------------------------------
_QUANTILE_STATS = {"coverage": "", "coverage_ci_low": "ci_low", "coverage_ci_high": "ci_high", "deviation": "deviation"}


@dataclass(frozen=True, kw_only=True)
class QuantileCoverage(CrossingOutputs, Metric):
    y: str
    quantiles: Quantiles | str = checked(_check_quantiles_long)
    quantile_level: str | None = checked(check_level_column, None)
    per_level: bool = checked(check_boolean, True)
    ci_level: float = 0.95
    weights: str | None = None
    counts: str | None = None
    crossing: str = checked(check_crossing, "score")
    default_name = "quantile_coverage"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_long_form(self.quantiles, self.quantile_level, "quantile_coverage")
        check_long_crossing(self.quantiles, self.crossing, "quantile_coverage")

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        y = value_row(q, self.y)
        levels = quantile_levels(q, self.quantiles, self.quantile_level, by_key=True, crossing=self.crossing)
        w = q.weighting(self.weights, counts=self.counts)
        out: dict[str, nw.Expr | None] = {}
        deviations = []
        below = [_below_row(q, y, lv) for lv in levels]
        hits = [w.sum(r) for r in below]
        bounds = _wilson(q, w, below, self.ci_level) if self.per_level else []
        for k, lv in enumerate(levels):
            cov = ratio(hits[k], w.total)
            deviations.append((cov - lv.group_tau).abs())
            if self.per_level:
                low, high, at = *bounds[k], level_suffix(lv.tau)
                out |= {at: cov, f"{at}_ci_low": low, f"{at}_ci_high": high, f"{at}_deviation": cov - lv.group_tau}
        summary: dict[str, nw.Expr | None] = {"": total(deviations) / float(len(deviations))}
        if not isinstance(self.quantiles, str):
            summary |= crossing_outputs(self, q, self.quantiles, self.counts)
        if w.weighted:
            out["n_eff"] = w.n_eff
        return {**summary, **out, "n": q.n} if self.per_level else summary


class QuantileCoverageTable(QuantileCoverage):
    """:class:`QuantileCoverage` with ``per_level=True``: a direct call returns the long table."""

    kind = "table"
    long = True

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        per_group = (*_n_eff(self.weights), *(("n_crossing",) if self.counts_crossing() else ()))
        return _to_long(self, frame, keys, self.quantiles, "quantile_level", _QUANTILE_STATS, per_group)


def quantile_coverage(
    y: Column,
    *,
    quantiles: Mapping[float, Column] | Column,
    quantile_level: str | None = None,
    per_level: bool = True,
    ci_level: float = 0.95,
    weights: Column | None = None,
    counts: Column | None = None,
    crossing: str = "score",
) -> QuantileCoverage:
    """Quantile coverage: per level, the fraction of ``y <= q_tau`` against ``tau``.

    A calibrated quantile forecast at level ``tau`` has ``y <= q_tau`` in a
    fraction ``tau`` of the rows.  Per level: ``coverage = (1/n) sum_i
    1[y_i <= q_tau,i]``, its Wilson interval at confidence ``ci_level``
    (``coverage_ci_low`` / ``coverage_ci_high``) and ``deviation = coverage -
    tau``.  The one-number summary is the mean absolute deviation over the
    ``L`` levels, ``(1/L) sum_tau |coverage_tau - tau|`` (the miscalibration
    area of uncertainty-toolbox when the levels are an even grid).

    Parameters
    ----------
    y : Column
        Column of the observed value.
    quantiles : dict or Column
        ``{level: column}`` (wide form; crossing rows: see ``crossing``), or
        the column of the quantile in the long form (with ``quantile_level``).
    quantile_level : str, optional
        Long form: the column of each row's level, in (0, 1); it must be a
        ``by=`` key (one level per group).
    per_level : bool, default True
        ``True``: a direct call returns the long table (group keys,
        ``quantile_level``, ``coverage``, ``coverage_ci_low``,
        ``coverage_ci_high``, ``deviation``, ``n``; one row per level; in the
        long form the level is the group's own key).  ``False``: the summary
        only (a float on an eager frame without ``by=``).  In ``evaluate``
        the summary is the column ``quantile_coverage``, the levels are wide
        columns ``quantile_coverage_level<p>``, ``..._level<p>_ci_low``, ...
        (``p`` the level's name: ``90`` for 0.9, see the conventions page)
    ci_level : float, default 0.95
        Confidence level of the Wilson intervals.
    weights : Column, optional
        Column of non-negative row weights: each coverage is the weighted
        proportion ``sum_i w_i 1[y_i <= q_tau,i] / sum_i w_i``, its Wilson
        interval is taken at Kish's effective sample size ``n_eff = (sum_i
        w_i)^2 / sum_i w_i^2``, and the long table has a column ``n_eff``
        (``quantile_coverage_n_eff`` in ``evaluate``; see the docs page
        "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").
    crossing : {"score", "sort", "invalid"}, default "score"
        Rows whose quantiles cross (wide form): ``"score"`` counts ``y <=
        q_tau`` on the quantiles as given, ``"sort"`` on each row's
        quantiles rearranged in increasing order; both add the output
        ``<name>_n_crossing`` (a column ``n_crossing`` of the long table)
        and warn with the count on eager input.  ``"invalid"``: crossing
        rows are invalid rows.  The long form has one level per row: its
        rows are scored as given ("sort" is refused).

    Returns
    -------
    QuantileCoverage
        A metric object (see ``per_level`` for what a direct call returns);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1.0, 2.0, 3.0, 4.0], "q25": [1.5, 1.5, 1.5, 1.5], "q75": [3.5, 3.5, 2.5, 3.5]})
    >>> q = {0.25: "q25", 0.75: "q75"}
    >>> df.conformal.quantile_coverage("y", quantiles=q).select("quantile_level", "coverage", "deviation", "n")
    shape: (2, 4)
    ┌────────────────┬──────────┬───────────┬─────┐
    │ quantile_level ┆ coverage ┆ deviation ┆ n   │
    │ ---            ┆ ---      ┆ ---       ┆ --- │
    │ f64            ┆ f64      ┆ f64       ┆ i64 │
    ╞════════════════╪══════════╪═══════════╪═════╡
    │ 0.25           ┆ 0.25     ┆ 0.0       ┆ 4   │
    │ 0.75           ┆ 0.5      ┆ -0.25     ┆ 4   │
    └────────────────┴──────────┴───────────┴─────┘
    >>> df.conformal.quantile_coverage("y", quantiles=q, per_level=False)
    0.125

    References
    ----------
    T. Gneiting, F. Balabdaoui and A. E. Raftery (2007), "Probabilistic
    forecasts, calibration and sharpness", JRSS B 69(2), 243-268; Y. Chung,
    I. Char, H. Guo, J. Schneider and W. Neiswanger (2021), "Uncertainty
    toolbox", arXiv:2109.10254.
    """
    cls = QuantileCoverageTable if per_level is True else QuantileCoverage
    return cls(
        y=role(y),
        quantiles=_check_quantiles_long(quantiles, "quantiles"),
        quantile_level=quantile_level,
        per_level=per_level,
        ci_level=ci_level,
        weights=role(weights),
        counts=role(counts),
        crossing=crossing,
    )


# ---------------------------------------------------------------------------
# interval coverage
# ---------------------------------------------------------------------------
_INTERVAL_STATS = {
    "coverage": "",
    "coverage_ci_low": "ci_low",
    "coverage_ci_high": "ci_high",
    "width": "width",
    "winkler": "winkler",
}


@dataclass(frozen=True, kw_only=True)
class IntervalCoverage(CrossingOutputs, Metric):
    y: str
    intervals: Intervals = checked(check_intervals)
    ci_level: float = 0.95
    weights: str | None = None
    counts: str | None = None
    crossing: str = checked(check_crossing, "score")
    default_name = "interval_coverage"
    kind = "table"
    long = True

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        y = value_row(q, self.y)
        bounds_rows = interval_set_rows(q, self.intervals, self.crossing)
        w = q.weighting(self.weights, counts=self.counts)
        out: dict[str, nw.Expr | None] = {}
        yc = nw.col(y)
        covered = [
            q.row(
                ("covered_rows", y, lo_r, hi_r),
                indicator((nw.col(lo_r) <= yc) & (yc <= nw.col(hi_r))),
                inputs=[y, lo_r, hi_r],
            )
            for _, lo_r, hi_r in bounds_rows
        ]
        all_hits = [w.sum(c) for c in covered]
        bounds = _wilson(q, w, covered, self.ci_level)
        for k, (level, lo_r, hi_r) in enumerate(bounds_rows):
            hits, (low, high) = all_hits[k], bounds[k]
            miss = (nw.col(lo_r) - yc).clip(lower_bound=0.0) + (yc - nw.col(hi_r)).clip(lower_bound=0.0)
            score = (nw.col(hi_r) - nw.col(lo_r)) + (2.0 / (1.0 - level)) * miss
            winkler = q.row(("winkler_rows", y, lo_r, hi_r, level), score, inputs=[y, lo_r, hi_r])
            width = q.row(("width_rows", lo_r, hi_r), nw.col(hi_r) - nw.col(lo_r), inputs=[lo_r, hi_r])
            at = level_suffix(level)
            out |= {at: ratio(hits, w.total), f"{at}_ci_low": low, f"{at}_ci_high": high}
            out[f"{at}_width"] = ratio(w.sum(width), w.total)
            out[f"{at}_winkler"] = ratio(w.sum(winkler), w.total)
        if w.weighted:
            out["n_eff"] = w.n_eff
        out |= crossing_outputs(self, q, intervals_as_quantiles(self.intervals), self.counts)
        out["n"] = q.n
        return out

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        per_group = (*_n_eff(self.weights), *(("n_crossing",) if self.counts_crossing() else ()))
        return _to_long(self, frame, keys, self.intervals, "confidence_level", _INTERVAL_STATS, per_group)


def interval_coverage(
    y: Column,
    *,
    intervals: Mapping[float, tuple[Column, Column]],
    ci_level: float = 0.95,
    weights: Column | None = None,
    counts: Column | None = None,
    crossing: str = "score",
) -> IntervalCoverage:
    """Coverage, width and Winkler score of central intervals at several levels.

    Per confidence level ``c`` with interval ``(lo, hi)``: ``coverage =
    (1/n) sum_i 1[lo_i <= y_i <= hi_i]`` (both bounds inclusive) with its
    Wilson interval at confidence ``ci_level``, the mean ``width`` ``hi -
    lo`` and the mean ``winkler`` score ``w + 2/alpha ((lo - y)^+ + (y -
    hi)^+)`` with ``alpha = 1 - c``: the same numbers as :func:`coverage`,
    :func:`width` and :func:`winkler` level by level, in one query.

    Long-form intervals (one row per forecast and level, the level in a
    column) need no special metric: group by the level column and pass it as
    ``confidence_level``, e.g. ``cf.winkler("y", "lo", "hi",
    confidence_level="level")`` with ``by=[..., "level"]``.

    Parameters
    ----------
    y : Column
        Column of the observed value.
    intervals : dict
        ``{confidence_level: (lo, hi)}``; rows with ``lo > hi`` and rows
        whose intervals are not nested (``lo90 <= lo80 <= hi80 <= hi90``
        fails) are crossing quantiles and follow ``crossing``.
    ci_level : float, default 0.95
        Confidence level of the Wilson intervals.
    weights : Column, optional
        Column of non-negative row weights: coverage, width and Winkler
        score become weighted means ``sum_i w_i x_i / sum_i w_i``, the Wilson
        interval is taken at Kish's effective sample size ``n_eff = (sum_i
        w_i)^2 / sum_i w_i^2`` (as :func:`coverage` does), and the long table
        has a column ``n_eff`` (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").
    crossing : {"score", "sort", "invalid"}, default "score"
        Rows with ``lo > hi`` or intervals that are not nested (their
        quantiles ``(1 -+ c) / 2`` cross): ``"score"`` scores each level as
        given (``lo > hi`` covers nothing, its width ``hi - lo`` is
        negative and its Winkler score is the interval score, defined for
        any bounds), ``"sort"`` rearranges each row's bounds in increasing
        order first and scores the sorted intervals (the narrowest level
        gets the two middle values); both add a column ``n_crossing``
        (``interval_coverage_n_crossing`` in ``evaluate``) and warn with the
        count on eager input; no row is left out.  ``"invalid"``: such rows
        are invalid rows (``lo > hi`` counted per level, the nesting per
        bound).

    Returns
    -------
    IntervalCoverage
        A metric object.  ``df.conformal.interval_coverage(...)`` returns the
        long table: group keys, ``confidence_level``, ``coverage``,
        ``coverage_ci_low``, ``coverage_ci_high``, ``width``, ``winkler`` and
        ``n``, one row per group and level (a frame of the caller's type, lazy
        in, lazy out).  Inside :func:`~conformal_frames.evaluate`: wide
        columns ``interval_coverage_level<p>``, ``..._level<p>_width``, ... (``p`` = 90 for 0.9)

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [1.0, 3.0], "lo8": [0.5, 0.5], "hi8": [1.5, 1.5], "lo9": [0.0, 0.0], "hi9": [2.0, 4.0]})
    >>> t = df.conformal.interval_coverage("y", intervals={0.8: ("lo8", "hi8"), 0.9: ("lo9", "hi9")})
    >>> t[["confidence_level", "coverage", "width", "winkler", "n"]]
       confidence_level  coverage  width  winkler  n
    0               0.8       0.5    1.0     8.5  2
    1               0.9       1.0    3.0     3.0  2

    References
    ----------
    R. L. Winkler (1972), "A decision-theoretic approach to interval
    estimation", JASA 67, 187-191; E. B. Wilson (1927), JASA 22(158), 209-212.
    """
    return IntervalCoverage(
        y=role(y),
        intervals=check_intervals(intervals),
        ci_level=ci_level,
        weights=role(weights),
        counts=role(counts),
        crossing=crossing,
    )
