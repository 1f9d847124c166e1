"""Calibration of regression uncertainty: Gaussian predictions ``mean=`` and ``std=``.

A model that predicts a mean ``mu`` and a standard deviation ``sigma`` per row
(deep ensembles, Gaussian processes, NGBoost) is judged by how well ``sigma``
describes its errors ``y - mu``:

* :func:`ence`, :func:`ence_table`: the expected normalized calibration error
  of Levi et al. (2022): rows binned by ``sigma``, the root mean variance
  ``RMV`` against the ``RMSE`` per bin, ``mean_bins |RMV - RMSE| / RMV``;
* :func:`uce`: the uncertainty calibration error of Laves et al. (2020):
  rows binned by ``sigma^2``, ``sum_bins (n_b / n) |MSE_b - MV_b|``;
* :func:`uncertainty_calibration_curve` and its summaries
  :func:`mean_absolute_calibration_error`,
  :func:`root_mean_squared_calibration_error` and :func:`miscalibration_area`:
  the observed against the expected proportion of rows inside the central
  Gaussian intervals (``proportion="interval"``) or below the Gaussian
  quantiles (``"quantile"``) over ``n_levels`` evenly spaced levels in
  ``[0, 1]`` (uncertainty-toolbox's definitions);
* :func:`sharpness`: ``sqrt(mean(sigma^2))``;
* :func:`adversarial_group_calibration`: the worst calibration error over
  random subgroups of each size (seeded; a per-group numpy step).

``mean`` and ``std`` are read as ``crps`` and ``pit_histogram`` read a Gaussian
forecast (missing, NaN or infinite values and ``std <= 0`` are invalid rows).
Every metric but :func:`adversarial_group_calibration` stays lazy on every
backend and is mergeable: the curve's statistics are sums over fixed levels,
the binned errors read the rows through ordered cells of ``sigma``.  See
``docs/uncertainty-calibration.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._roles import Column, role
from conformal_frames._validate import check_column, check_positive_int, checked, choice, optional
from conformal_frames.engine import (
    Metric,
    Query,
    TableFn,
    TableRef,
    Weighting,
    aggregate,
    no_weights,
    over,
    running_total,
    sort_result,
    stack,
    total,
)
from conformal_frames.inputs.forecasts import (
    Crossing,
    CrossingOutputs,
    Quantiles,
    check_crossing,
    check_quantiles,
    crossing_outputs,
    gaussian_std,
    gaussian_z,
    one_forecast,
    quantile_rows,
    value_row,
)
from conformal_frames.numerics.stats import equal_count_bin, ratio, weighted_cut

__all__ = [
    "adversarial_group_calibration",
    "ence",
    "ence_table",
    "mean_absolute_calibration_error",
    "miscalibration_area",
    "root_mean_squared_calibration_error",
    "sharpness",
    "uce",
    "uncertainty_calibration_curve",
]
METHODS = list(__all__)

Proportion = Literal["interval", "quantile"]
Strategy = Literal["uniform", "quantile"]
_check_proportion = choice("interval", "quantile")
F64 = nw.Float64


def _levels(value: Any, name: str) -> int:
    return check_positive_int(value, name, at_least=2)


# ---------------------------------------------------------------------------
# the rows: errors, variances
# ---------------------------------------------------------------------------
def _squared_error(q: Query, y: str, mean: str) -> str:
    """Row column ``(y - mean)^2``."""
    yv, mu = value_row(q, y), value_row(q, mean)
    return q.row(("sq_error", yv, mu), (nw.col(yv) - nw.col(mu)) ** 2, inputs=[yv, mu])


def _variance(q: Query, sd: str) -> str:
    return q.row(("variance", sd), nw.col(sd) ** 2, inputs=[sd])


# ---------------------------------------------------------------------------
# sharpness
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Sharpness(Metric):
    std: str = checked(check_column)
    weights: str | None = None
    counts: str | None = None
    default_name = "sharpness"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        var = _variance(q, gaussian_std(q, self.std))
        return {"": ratio(w.sum(var), w.total).sqrt()}


def sharpness(std: Column, *, weights: Column | None = None, counts: Column | None = None) -> Sharpness:
    """Sharpness of Gaussian predictions: ``sqrt(mean(std^2))``; lower is sharper.

    The root mean predicted variance (uncertainty-toolbox's ``sharpness``).
    It says how concentrated the predictions are, not whether they are
    calibrated: read it beside a calibration error.

    Parameters
    ----------
    std : Column
        Column of predicted standard deviations (``std > 0``; other values,
        missing, NaN or infinite ones are invalid rows).
    weights : Column, optional
        Column of non-negative row weights: ``sqrt(sum w std^2 / sum w)``.
    counts : Column, optional
        Column of frequency counts: a row stands for ``k`` identical rows.

    Returns
    -------
    Sharpness
        A metric object; a direct call on an eager frame without ``by=``
        returns a float.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"sd": [1.0, 2.0, 2.0]})
    >>> round(df.conformal.sharpness("sd"), 6)
    1.732051
    """
    return Sharpness(std=role(std), weights=role(weights), counts=role(counts))


# ---------------------------------------------------------------------------
# ENCE and UCE: binned by the predicted spread, through its ordered cells
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _BinRows:
    """The row columns of the binned errors (all summed per cell of ``order``)."""

    order: str  # the predicted std (the cells' order)
    mass: str  # a row's weight (1 without weights)
    var: str  # w * std^2
    err: str  # w * (y - mean)^2
    rows: str  # the rows a row stands for (its count, else 1)
    weighted: bool  # quantile bins cut a non-integer total
    by_variance: bool  # uniform bins cut the range of std^2 (UCE), else of std


def _bin_rows(q: Query, y: str, mean: str, std: str, w: Weighting, *, by_variance: bool) -> _BinRows:
    _, sd = gaussian_z(q, y, mean, std)
    var, err = _variance(q, sd), _squared_error(q, y, mean)
    one = q.row(("one",), nw.lit(1.0))
    mass = one if w.row is None else w.row
    rows = w.counts if w.counts is not None else one
    return _BinRows(sd, mass, w.of(var), w.of(err), rows, w.weighted, by_variance)


def _bin_of(b: _BinRows, strategy: str, n_bins: int, keys: list[str], ref: TableRef) -> tuple[nw.Expr, list[nw.Expr]]:
    """The bin of a cell (Float64) and the window columns it needs first."""
    m = float(n_bins)
    if strategy == "quantile":
        tot = ref.name("total")
        before = nw.col(running_total(b.mass)) - nw.col(b.mass)
        cut = weighted_cut if b.weighted else equal_count_bin
        return cut(before, nw.col(tot), n_bins), [over(nw.col(b.mass).sum(), keys).alias(tot)]
    lo, hi = ref.name("lo"), ref.name("hi")
    value = nw.col(b.order) ** 2 if b.by_variance else nw.col(b.order)
    spread = nw.when(nw.col(b.mass) > 0.0).then(value)
    firsts = [over(spread.min(), keys).alias(lo), over(spread.max(), keys).alias(hi)]
    width = nw.col(hi) - nw.col(lo)
    scaled = ((value - nw.col(lo)) / nw.when(width > 0.0).then(width).otherwise(1.0) * m).floor()
    return scaled.clip(0.0, m - 1.0), firsts


def _bins_table(b: _BinRows, strategy: str, n_bins: int) -> TableFn:
    """Per group and bin ``k``: weight ``n<k>``, rows ``r<k>``, ``sum w std^2`` (``v<k>``), ``sum w err^2``
    (``e<k>``), the least and largest spread (``lo<k>``, ``hi<k>``); then ENCE's and UCE's terms."""

    def build(cells: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        b_col = ref.name("bin")
        expr, firsts = _bin_of(b, strategy, n_bins, keys, ref)
        cells = cells.with_columns(*firsts).with_columns(expr.alias(b_col))
        # the masked columns first, then plain sums: pandas with Arrow dtypes ignores a when() inside an aggregation
        parts, aggs = [], []
        for k in range(n_bins):
            in_k = (nw.col(b_col) == float(k)) & (nw.col(b.mass) > 0.0)
            for x, c in (("n", b.mass), ("r", b.rows), ("v", b.var), ("e", b.err)):
                parts.append(nw.when(in_k).then(nw.col(c)).otherwise(0.0).alias(ref.name(f"{x}{k}")))
                aggs.append(nw.col(ref.name(f"{x}{k}")).sum())
            parts.append(nw.when(in_k).then(nw.col(b.order)).alias(ref.name(f"lo{k}")))
            parts.append(nw.when(in_k).then(nw.col(b.order)).alias(ref.name(f"hi{k}")))
            aggs += [nw.col(ref.name(f"lo{k}")).min(), nw.col(ref.name(f"hi{k}")).max()]
        table = aggregate(cells.with_columns(*parts), keys, aggs)
        return table.with_columns(*_bin_terms(ref, n_bins)).with_columns(*_bin_totals(ref, n_bins))

    return build


def _bin_terms(ref: TableRef, n_bins: int) -> list[nw.Expr]:
    out = []
    for k in range(n_bins):
        n, v, e = (nw.col(ref.name(f"{x}{k}")) for x in ("n", "v", "e"))
        full = n > 0.0
        out += [
            nw.when(full).then((v / n).sqrt()).alias(ref.name(f"rmv{k}")),
            nw.when(full).then((e / n).sqrt()).alias(ref.name(f"rmse{k}")),
            (e - v).abs().alias(ref.name(f"ad{k}")),  # |MSE - MV| times the bin's weight
        ]
    return out


def _bin_totals(ref: TableRef, n_bins: int) -> list[nw.Expr]:
    terms, full = [], []
    for k in range(n_bins):
        rmv, rmse = nw.col(ref.name(f"rmv{k}")), nw.col(ref.name(f"rmse{k}"))
        terms.append(((rmv - rmse).abs() / rmv).fill_null(0.0))
        full.append((nw.col(ref.name(f"n{k}")) > 0.0).cast(F64))
    mass = total([nw.col(ref.name(f"n{k}")) for k in range(n_bins)])
    return [
        nw.when(total(full) > 0.0).then(total(terms) / total(full)).alias(ref.name("ence")),
        nw.when(mass > 0.0)
        .then(total([nw.col(ref.name(f"ad{k}")) for k in range(n_bins)]) / mass)
        .alias(ref.name("uce")),
    ]


def _binned(q: Query, b: _BinRows, strategy: str, n_bins: int) -> TableRef:
    sums = tuple(dict.fromkeys((b.mass, b.rows, b.var, b.err)))
    key = ("uncertainty_bins", b, strategy, n_bins)
    return q.cells(key, _bins_table(b, strategy, n_bins), order=b.order, sums=sums, running=(b.mass,))


@dataclass(frozen=True, kw_only=True)
class _Binned(Metric):
    y: str
    mean: str = checked(check_column)
    std: str = checked(check_column)
    n_bins: int = 10
    strategy: str = "quantile"
    weights: str | None = None
    counts: str | None = None
    by_variance = False

    def table(self, q: Query) -> TableRef:
        w = q.weighting(self.weights, counts=self.counts)
        b = _bin_rows(q, self.y, self.mean, self.std, w, by_variance=self.by_variance)
        return _binned(q, b, self.strategy, self.n_bins)


@dataclass(frozen=True, kw_only=True)
class ENCE(_Binned):
    default_name = "ence"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        return {"": self.table(q).col("ence")}


@dataclass(frozen=True, kw_only=True)
class UCE(_Binned):
    strategy: str = "uniform"
    default_name = "uce"
    by_variance = True

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        return {"": self.table(q).col("uce")}


#: long-table column -> wide suffix after ``<name>_bin<k>``
_ENCE_COLUMNS = {"std_low": "lo", "std_high": "hi", "rmv": "rmv", "rmse": "rmse"}


@dataclass(frozen=True, kw_only=True)
class ENCETable(_Binned):
    default_name = "ence_table"
    kind = "table"
    long = True

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        t = self.table(q)
        out: dict[str, nw.Expr | None] = {}
        for k in range(self.n_bins):
            for x in _ENCE_COLUMNS.values():
                out[f"bin{k}_{x}"] = t.col(f"{x}{k}")
            out[f"bin{k}_n"] = t.col(f"r{k}")
        return out

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        name = self.output_name
        parts = []
        for k in range(self.n_bins):
            cols: dict[str, nw.Expr] = {"bin": nw.lit(k, nw.Int64)}
            cols |= {c: nw.col(f"{name}_bin{k}_{x}") for c, x in _ENCE_COLUMNS.items()}
            rmv, rmse = cols["rmv"], cols["rmse"]
            cols["normalized_error"] = (rmv - rmse).abs() / rmv
            cols["n"] = nw.col(f"{name}_bin{k}_n").cast(nw.Int64)
            parts.append(cols)
        return sort_result(stack(frame, keys, parts).filter(nw.col("n") > 0), *keys, "bin")


def ence(
    y: Column,
    *,
    mean: Column,
    std: Column,
    n_bins: int = 10,
    strategy: Strategy = "quantile",
    weights: Column | None = None,
    counts: Column | None = None,
) -> ENCE:
    """Expected normalized calibration error (ENCE) of Gaussian predictions; 0 is calibrated.

    The rows are binned by their predicted ``std``; in bin ``b``
    ``RMV_b = sqrt(mean(std^2))`` and ``RMSE_b = sqrt(mean((y - mean)^2))``,
    and ``ENCE = (1 / B) sum_b |RMV_b - RMSE_b| / RMV_b`` over the ``B``
    non-empty bins (Levi, Gispan, Giladi and Fetaya 2022; netcal's ``ENCE``
    with ``strategy="uniform"``).  :func:`ence_table` gives the bins.
    Mergeable: the bins read the rows through the ordered cells of ``std``.

    Parameters
    ----------
    y : Column
        Column of observed values.
    mean, std : Column
        Columns of the Gaussian prediction's mean and standard deviation
        (``std > 0``; missing, NaN or infinite values and ``std <= 0`` are
        invalid rows, as for ``crps``).
    n_bins : int, default 10
        Number of bins.
    strategy : {"quantile", "uniform"}, default "quantile"
        ``"quantile"``: bins of (near) equal row count in the order of the
        spread, the first ``n % n_bins`` one row longer, tied values kept in
        one bin (the bins of ``ece(strategy="quantile")``); with weights the
        bins cut the total weight.  ``"uniform"``: ``n_bins`` bins of equal
        width between the group's least and largest std (the last bin
        closed), netcal's binning.  Empty bins are skipped.
    weights : Column, optional
        Column of non-negative row weights: every mean of a bin is weighted
        and quantile bins cut the total weight.
    counts : Column, optional
        Column of frequency counts: a row stands for ``k`` identical rows.

    Returns
    -------
    ENCE
        A metric object; a float on an eager frame without ``by=``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.0, 1.0, 0.0, 4.0], "mu": [0.0, 0.0, 0.0, 0.0], "sd": [1.0, 1.0, 2.0, 2.0]})
    >>> round(df.conformal.ence("y", mean="mu", std="sd", n_bins=2), 6)
    0.353553

    References
    ----------
    D. Levi, L. Gispan, N. Giladi and E. Fetaya (2022), "Evaluating and
    calibrating uncertainty prediction in regression tasks", Sensors 22(15), 5540.
    """
    return ENCE(
        y=role(y),
        mean=role(mean),
        std=role(std),
        n_bins=n_bins,
        strategy=strategy,
        weights=role(weights),
        counts=role(counts),
    )


def ence_table(
    y: Column,
    *,
    mean: Column,
    std: Column,
    n_bins: int = 10,
    strategy: Strategy = "quantile",
    weights: Column | None = None,
    counts: Column | None = None,
) -> ENCETable:
    """The bins of :func:`ence`: RMV against RMSE per bin of the predicted ``std``.

    One row per non-empty bin (and group): ``bin``, ``std_low`` and
    ``std_high`` (the least and largest ``std`` in it), ``rmv``, ``rmse``,
    ``normalized_error = |rmv - rmse| / rmv`` and ``n`` (its rows).  A
    calibrated model has ``rmse`` close to ``rmv`` in every bin: plot one
    against the other.

    Parameters
    ----------
    y : Column
        Column of observed values.
    mean, std : Column
        Columns of the Gaussian prediction's mean and standard deviation
        (``std > 0``; missing, NaN or infinite values and ``std <= 0`` are
        invalid rows, as for ``crps``).
    n_bins : int, default 10
        Number of bins.
    strategy : {"quantile", "uniform"}, default "quantile"
        ``"quantile"``: bins of (near) equal row count in the order of the
        spread, the first ``n % n_bins`` one row longer, tied values kept in
        one bin (the bins of ``ece(strategy="quantile")``); with weights the
        bins cut the total weight.  ``"uniform"``: ``n_bins`` bins of equal
        width between the group's least and largest std (the last bin
        closed), netcal's binning.  Empty bins are skipped.
    weights : Column, optional
        Column of non-negative row weights: every mean of a bin is weighted
        and quantile bins cut the total weight.
    counts : Column, optional
        Column of frequency counts: a row stands for ``k`` identical rows.

    Returns
    -------
    ENCETable
        A metric object; ``df.conformal.ence_table(...)`` returns the long
        table.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.0, 1.0, 0.0, 4.0], "mu": [0.0, 0.0, 0.0, 0.0], "sd": [1.0, 1.0, 2.0, 2.0]})
    >>> df.conformal.ence_table("y", mean="mu", std="sd", n_bins=2).select("bin", "rmv", "rmse", "n").rows()
    [(0, 1.0, 0.7071067811865476, 2), (1, 2.0, 2.8284271247461903, 2)]
    """
    return ENCETable(
        y=role(y),
        mean=role(mean),
        std=role(std),
        n_bins=n_bins,
        strategy=strategy,
        weights=role(weights),
        counts=role(counts),
    )


def uce(
    y: Column,
    *,
    mean: Column,
    std: Column,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
    weights: Column | None = None,
    counts: Column | None = None,
) -> UCE:
    """Uncertainty calibration error (UCE) of Gaussian predictions; 0 is calibrated.

    The rows are binned by their predicted variance ``std^2``; in bin ``b``
    of ``n_b`` rows ``MV_b = mean(std^2)`` and ``MSE_b = mean((y - mean)^2)``,
    and ``UCE = sum_b (n_b / n) |MSE_b - MV_b|`` (Laves, Ihler, Fast, Kahrs
    and Ortmaier 2020; netcal's ``UCE``: ``strategy="uniform"``, the default).
    In the units of a variance, unlike :func:`ence`.

    Parameters
    ----------
    y : Column
        Column of observed values.
    mean, std : Column
        Columns of the Gaussian prediction's mean and standard deviation
        (``std > 0``; missing, NaN or infinite values and ``std <= 0`` are
        invalid rows, as for ``crps``).
    n_bins : int, default 10
        Number of bins.
    strategy : {"quantile", "uniform"}, default "uniform"
        ``"quantile"``: bins of (near) equal row count in the order of the
        spread, the first ``n % n_bins`` one row longer, tied values kept in
        one bin (the bins of ``ece(strategy="quantile")``); with weights the
        bins cut the total weight.  ``"uniform"``: ``n_bins`` bins of equal
        width between the group's least and largest variance (the last bin
        closed), netcal's binning.  Empty bins are skipped.
    weights : Column, optional
        Column of non-negative row weights: every mean of a bin is weighted
        and quantile bins cut the total weight.
    counts : Column, optional
        Column of frequency counts: a row stands for ``k`` identical rows.

    Returns
    -------
    UCE
        A metric object; a float on an eager frame without ``by=``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.0, 1.0, 0.0, 4.0], "mu": [0.0, 0.0, 0.0, 0.0], "sd": [1.0, 1.0, 2.0, 2.0]})
    >>> round(df.conformal.uce("y", mean="mu", std="sd", n_bins=2), 6)
    2.25

    References
    ----------
    M.-H. Laves, S. Ihler, J. F. Fast, L. A. Kahrs and T. Ortmaier (2020),
    "Well-calibrated regression uncertainty in medical imaging with deep
    learning", Medical Imaging with Deep Learning (PMLR 121), 393-412.
    """
    return UCE(
        y=role(y),
        mean=role(mean),
        std=role(std),
        n_bins=n_bins,
        strategy=strategy,
        weights=role(weights),
        counts=role(counts),
    )


# ---------------------------------------------------------------------------
# the calibration curve over fixed levels: one sum per level
# ---------------------------------------------------------------------------
def level_grid(n_levels: int) -> np.ndarray:
    """The expected proportions: ``n_levels`` evenly spaced levels from 0 to 1 (``numpy.linspace``)."""
    return np.linspace(0.0, 1.0, n_levels)


def _bounds(p: float, proportion: str) -> tuple[float, float]:
    """The standardized error ``z = (y - mean) / std`` is inside at level ``p`` iff ``lo <= z <= hi``."""
    from scipy.special import ndtri

    if proportion == "interval":  # uncertainty-toolbox: ndtri(0.5 - p/2) <= (mean - y) / std <= ndtri(0.5 + p/2)
        return -float(ndtri(0.5 + p / 2.0)), -float(ndtri(0.5 - p / 2.0))
    return -math.inf, float(ndtri(p))


def _inside(q: Query, z: str, p: float, proportion: str) -> str | float:
    """Row column ``1[z inside at level p]``, or the constant 0 or 1 where it does not depend on the row."""
    lo, hi = _bounds(p, proportion)
    if lo == -math.inf and hi == math.inf:
        return 1.0
    if hi == -math.inf:
        return 0.0
    zc = nw.col(z)
    cond = zc <= hi if lo == -math.inf else (zc >= lo) & (zc <= hi)
    return q.row(("gauss_inside", z, proportion, p), cond.cast(F64), inputs=[z])


def observed_proportions(q: Query, z: str, levels: np.ndarray, proportion: str, w: Weighting) -> list[str]:
    """The values (:meth:`Query.value`) of the observed proportion at each level."""
    out = []
    for p in levels:
        row = _inside(q, z, float(p), proportion)
        expr = nw.when(w.total > 0).then(nw.lit(row)) if isinstance(row, float) else ratio(w.sum(row), w.total)
        out.append(q.value(expr, key=("gauss_observed", row, w.row, float(p))))
    return out


def _segment_area(dl: nw.Expr, dr: nw.Expr, dx: float) -> nw.Expr:
    """``int |d|`` over a segment where ``d`` is linear from ``dl`` to ``dr`` (its crossing of 0 included)."""
    crossing = dx * (dl * dl + dr * dr) / (2.0 * (dl.abs() + dr.abs()))
    return nw.when(dl * dr < 0.0).then(crossing).otherwise(dx * (dl + dr).abs() / 2.0)


def _wide_quantiles(value: Any, name: str) -> Quantiles:
    out = check_quantiles(value, name)
    assert not isinstance(out, str)  # the wide form only (long=False)
    return out


@dataclass(frozen=True, kw_only=True)
class _Curve(CrossingOutputs, Metric):
    y: str
    mean: str | None = checked(optional(check_column), None)
    std: str | None = checked(optional(check_column), None)
    quantiles: Quantiles | None = checked(optional(_wide_quantiles), None)
    n_levels: int = checked(_levels, 100)
    proportion: str | None = checked(optional(_check_proportion), None)
    weights: str | None = None
    counts: str | None = None
    crossing: str = checked(check_crossing, "score")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mean is None and self.std is None and self.quantiles is None:
            msg = "give a prediction: mean= and std= columns (Gaussian) or quantiles={level: column}"
            raise ValueError(msg)
        one_forecast(self.mean, self.std, None, self.quantiles)
        if self.quantiles is not None and self.proportion == "interval":
            msg = (
                "proportion='interval' reads a Gaussian prediction (mean=, std=); the calibration curve of "
                "quantiles= is the share of y at or below each quantile (proportion='quantile')"
            )
            raise ValueError(msg)

    def counts_crossing(self) -> bool:
        return self.quantiles is not None and super().counts_crossing()

    def observed(self, q: Query) -> tuple[np.ndarray, list[str]]:
        """The levels and the values of the observed proportion at each.

        Quantiles: the given levels with the ends 0 and 1 (where the share is
        0 and 1 by definition) for the area, not for the means.
        """
        w = q.weighting(self.weights, counts=self.counts)
        if self.quantiles is not None:
            y = value_row(q, self.y)
            below = []
            for tau, row in quantile_rows(q, self.quantiles, self.crossing):
                hit = q.row(("below", y, row), (nw.col(y) <= nw.col(row)).cast(F64), inputs=[y, row])
                below.append(q.value(ratio(w.sum(hit), w.total), key=("share_below", hit, w.row, tau)))
            return np.array([tau for tau, _ in self.quantiles]), below
        assert self.mean is not None and self.std is not None
        z, _ = gaussian_z(q, self.y, self.mean, self.std)
        levels = level_grid(self.n_levels)
        return levels, observed_proportions(q, z, levels, self.proportion or "interval", w)

    def curve(self, q: Query) -> tuple[np.ndarray, list[nw.Expr]]:
        """The levels and the expressions of ``observed - expected`` at each."""
        levels, observed = self.observed(q)
        return levels, [nw.col(o) - float(p) for o, p in zip(observed, levels)]

    def crossing_count(self, q: Query) -> dict[str, nw.Expr | None]:
        return {} if self.quantiles is None else crossing_outputs(self, q, self.quantiles, self.counts)


@dataclass(frozen=True, kw_only=True)
class MeanAbsoluteCalibrationError(_Curve):
    default_name = "mean_absolute_calibration_error"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        _, d = self.curve(q)
        return {"": total([x.abs() for x in d]) / float(len(d)), **self.crossing_count(q)}


@dataclass(frozen=True, kw_only=True)
class RootMeanSquaredCalibrationError(_Curve):
    default_name = "root_mean_squared_calibration_error"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        _, d = self.curve(q)
        return {"": (total([x * x for x in d]) / float(len(d))).sqrt(), **self.crossing_count(q)}


@dataclass(frozen=True, kw_only=True)
class MiscalibrationArea(_Curve):
    default_name = "miscalibration_area"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        levels, obs = self.observed(q)
        d = [nw.col(o) - float(p) for o, p in zip(obs, levels)]
        if self.quantiles is not None:  # the ends, where a quantile forecast is calibrated by definition
            levels, obs, d = np.r_[0.0, levels, 1.0], ["", *obs, ""], [nw.lit(0.0), *d, nw.lit(0.0)]
        dx = np.diff(levels)
        # one value per segment: an expression of two columns each (polars plans one sum of 99 branches slowly)
        segments = [
            q.value(
                _segment_area(d[i], d[i + 1], float(dx[i])),
                key=("gauss_segment", obs[i], obs[i + 1]),
                inputs=obs[i : i + 2],
            )
            for i in range(len(dx))
        ]
        return {"": total([nw.col(c) for c in segments]), **self.crossing_count(q)}


@dataclass(frozen=True, kw_only=True)
class CalibrationCurve(_Curve):
    default_name = "uncertainty_calibration_curve"
    kind = "table"
    long = True

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        _, observed = self.observed(q)
        return {**{f"level{i}": nw.col(o) for i, o in enumerate(observed)}, **self.crossing_count(q)}

    def levels(self) -> np.ndarray:
        return level_grid(self.n_levels) if self.quantiles is None else np.array([t for t, _ in self.quantiles])

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        name = self.output_name
        names = frame.collect_schema().names()
        counts = [c for c in (f"{name}_n_crossing", "n") if c in names]
        parts = [
            {
                "level": nw.lit(i, nw.Int64),
                "expected": nw.lit(float(p), F64),
                "observed": nw.col(f"{name}_level{i}"),
                **{c.removeprefix(f"{name}_"): nw.col(c) for c in counts},
            }
            for i, p in enumerate(self.levels())
        ]
        return sort_result(stack(frame, keys, parts), *keys, "level")


def mean_absolute_calibration_error(
    y: Column,
    *,
    mean: Column | None = None,
    std: Column | None = None,
    quantiles: Mapping[float, Column] | None = None,
    n_levels: int = 100,
    proportion: Proportion | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
    crossing: Crossing = "score",
) -> MeanAbsoluteCalibrationError:
    """Mean absolute calibration error of Gaussian predictions: ``mean_p |observed(p) - p|``.

    The mean over the ``n_levels`` levels ``p`` of the gap between the
    observed and the expected proportion (see
    :func:`uncertainty_calibration_curve`); uncertainty-toolbox's
    ``mean_absolute_calibration_error``.  Mergeable: a sum per level.

    Parameters
    ----------
    y : Column
        Column of observed values.
    mean, std : Column, optional
        Columns of the Gaussian prediction's mean and standard deviation
        (``std > 0``; missing, NaN or infinite values and ``std <= 0`` are
        invalid rows, as for ``crps``).
    quantiles : dict, optional
        Instead of ``mean=``/``std=``: quantile forecasts ``{level: column}``
        (levels in (0, 1)).  The expected proportions are the levels, the
        observed ones the shares of ``y`` at or below each quantile
        (``proportion="quantile"``; the area adds the ends 0 and 1).
    n_levels : int, default 100
        Number of expected proportions ``p`` of a Gaussian prediction, evenly
        spaced from 0 to 1 (``numpy.linspace(0, 1, n_levels)``,
        uncertainty-toolbox's ``num_bins``).
    proportion : {"interval", "quantile"}, optional
        ``"interval"`` (the default for ``mean=``/``std=``): the observed
        proportion at ``p`` is the share of rows inside the central Gaussian
        interval of probability ``p``, ``|y - mean| <= std * Phi^-1(1/2 +
        p/2)`` (uncertainty-toolbox's default ``prop_type="interval"``).
        ``"quantile"`` (the only one for ``quantiles=``): the share at or
        below the ``p``-quantile, ``y <= mean + std * Phi^-1(p)``.
    weights : Column, optional
        Column of non-negative row weights: weighted shares.
    counts : Column, optional
        Column of frequency counts: a row stands for ``k`` identical rows.
    crossing : {"score", "sort", "invalid"}, default "score"
        Crossing quantiles (``quantiles=`` only), as for ``quantile_coverage``:
        scored as given and counted (``<name>_n_crossing``), rearranged, or
        invalid rows.

    Returns
    -------
    MeanAbsoluteCalibrationError
        A metric object; a float on an eager frame without ``by=``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.1, -0.5, 1.2, 2.5], "mu": [0.0, 0.0, 0.0, 0.0], "sd": [1.0, 1.0, 1.0, 1.0]})
    >>> round(df.conformal.mean_absolute_calibration_error("y", mean="mu", std="sd"), 6)
    0.097298
    """
    return MeanAbsoluteCalibrationError(
        y=role(y),
        mean=role(mean),
        std=role(std),
        quantiles=None if quantiles is None else _wide_quantiles(quantiles, "quantiles"),
        n_levels=n_levels,
        proportion=proportion,
        weights=role(weights),
        counts=role(counts),
        crossing=crossing,
    )


def root_mean_squared_calibration_error(
    y: Column,
    *,
    mean: Column | None = None,
    std: Column | None = None,
    quantiles: Mapping[float, Column] | None = None,
    n_levels: int = 100,
    proportion: Proportion | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
    crossing: Crossing = "score",
) -> RootMeanSquaredCalibrationError:
    """Root mean squared calibration error: ``sqrt(mean_p (observed(p) - p)^2)``.

    Over the ``n_levels`` levels of :func:`uncertainty_calibration_curve`;
    uncertainty-toolbox's ``root_mean_squared_calibration_error``.

    Parameters
    ----------
    y : Column
        Column of observed values.
    mean, std : Column, optional
        Columns of the Gaussian prediction's mean and standard deviation
        (``std > 0``; missing, NaN or infinite values and ``std <= 0`` are
        invalid rows, as for ``crps``).
    quantiles : dict, optional
        Instead of ``mean=``/``std=``: quantile forecasts ``{level: column}``
        (levels in (0, 1)).  The expected proportions are the levels, the
        observed ones the shares of ``y`` at or below each quantile
        (``proportion="quantile"``; the area adds the ends 0 and 1).
    n_levels : int, default 100
        Number of expected proportions ``p`` of a Gaussian prediction, evenly
        spaced from 0 to 1 (``numpy.linspace(0, 1, n_levels)``,
        uncertainty-toolbox's ``num_bins``).
    proportion : {"interval", "quantile"}, optional
        ``"interval"`` (the default for ``mean=``/``std=``): the observed
        proportion at ``p`` is the share of rows inside the central Gaussian
        interval of probability ``p``, ``|y - mean| <= std * Phi^-1(1/2 +
        p/2)`` (uncertainty-toolbox's default ``prop_type="interval"``).
        ``"quantile"`` (the only one for ``quantiles=``): the share at or
        below the ``p``-quantile, ``y <= mean + std * Phi^-1(p)``.
    weights : Column, optional
        Column of non-negative row weights: weighted shares.
    counts : Column, optional
        Column of frequency counts: a row stands for ``k`` identical rows.
    crossing : {"score", "sort", "invalid"}, default "score"
        Crossing quantiles (``quantiles=`` only), as for ``quantile_coverage``:
        scored as given and counted (``<name>_n_crossing``), rearranged, or
        invalid rows.

    Returns
    -------
    RootMeanSquaredCalibrationError
        A metric object; a float on an eager frame without ``by=``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.1, -0.5, 1.2, 2.5], "mu": [0.0, 0.0, 0.0, 0.0], "sd": [1.0, 1.0, 1.0, 1.0]})
    >>> round(df.conformal.root_mean_squared_calibration_error("y", mean="mu", std="sd"), 6)
    0.118909
    """
    return RootMeanSquaredCalibrationError(
        y=role(y),
        mean=role(mean),
        std=role(std),
        quantiles=None if quantiles is None else _wide_quantiles(quantiles, "quantiles"),
        n_levels=n_levels,
        proportion=proportion,
        weights=role(weights),
        counts=role(counts),
        crossing=crossing,
    )


def miscalibration_area(
    y: Column,
    *,
    mean: Column | None = None,
    std: Column | None = None,
    quantiles: Mapping[float, Column] | None = None,
    n_levels: int = 100,
    proportion: Proportion | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
    crossing: Crossing = "score",
) -> MiscalibrationArea:
    """Miscalibration area: the area between the calibration curve and the diagonal.

    ``int_0^1 |observed(p) - p| dp`` with the curve of
    :func:`uncertainty_calibration_curve` linear between its levels, a
    segment that crosses the diagonal counted as its two triangles
    (uncertainty-toolbox's ``miscalibration_area``).  Tends to the mean
    absolute calibration error as ``n_levels`` grows.

    Parameters
    ----------
    y : Column
        Column of observed values.
    mean, std : Column, optional
        Columns of the Gaussian prediction's mean and standard deviation
        (``std > 0``; missing, NaN or infinite values and ``std <= 0`` are
        invalid rows, as for ``crps``).
    quantiles : dict, optional
        Instead of ``mean=``/``std=``: quantile forecasts ``{level: column}``
        (levels in (0, 1)).  The expected proportions are the levels, the
        observed ones the shares of ``y`` at or below each quantile
        (``proportion="quantile"``; the area adds the ends 0 and 1).
    n_levels : int, default 100
        Number of expected proportions ``p`` of a Gaussian prediction, evenly
        spaced from 0 to 1 (``numpy.linspace(0, 1, n_levels)``,
        uncertainty-toolbox's ``num_bins``).
    proportion : {"interval", "quantile"}, optional
        ``"interval"`` (the default for ``mean=``/``std=``): the observed
        proportion at ``p`` is the share of rows inside the central Gaussian
        interval of probability ``p``, ``|y - mean| <= std * Phi^-1(1/2 +
        p/2)`` (uncertainty-toolbox's default ``prop_type="interval"``).
        ``"quantile"`` (the only one for ``quantiles=``): the share at or
        below the ``p``-quantile, ``y <= mean + std * Phi^-1(p)``.
    weights : Column, optional
        Column of non-negative row weights: weighted shares.
    counts : Column, optional
        Column of frequency counts: a row stands for ``k`` identical rows.
    crossing : {"score", "sort", "invalid"}, default "score"
        Crossing quantiles (``quantiles=`` only), as for ``quantile_coverage``:
        scored as given and counted (``<name>_n_crossing``), rearranged, or
        invalid rows.

    Returns
    -------
    MiscalibrationArea
        A metric object; a float on an eager frame without ``by=``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.1, -0.5, 1.2, 2.5], "mu": [0.0, 0.0, 0.0, 0.0], "sd": [1.0, 1.0, 1.0, 1.0]})
    >>> round(df.conformal.miscalibration_area("y", mean="mu", std="sd"), 6)
    0.09703
    """
    return MiscalibrationArea(
        y=role(y),
        mean=role(mean),
        std=role(std),
        quantiles=None if quantiles is None else _wide_quantiles(quantiles, "quantiles"),
        n_levels=n_levels,
        proportion=proportion,
        weights=role(weights),
        counts=role(counts),
        crossing=crossing,
    )


def uncertainty_calibration_curve(
    y: Column,
    *,
    mean: Column | None = None,
    std: Column | None = None,
    quantiles: Mapping[float, Column] | None = None,
    n_levels: int = 100,
    proportion: Proportion | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
    crossing: Crossing = "score",
) -> CalibrationCurve:
    """The calibration curve of Gaussian predictions: observed against expected proportion.

    One row per level (and group): ``level`` (0 .. n_levels - 1),
    ``expected`` (the level ``p``), ``observed`` (the share of rows inside
    the central interval of probability ``p``, or below the ``p``-quantile)
    and ``n``.  A calibrated model follows the diagonal; uncertainty-toolbox's
    ``get_proportion_lists`` (its ``plot_calibration``).  Mergeable: a sum
    per level.

    Parameters
    ----------
    y : Column
        Column of observed values.
    mean, std : Column, optional
        Columns of the Gaussian prediction's mean and standard deviation
        (``std > 0``; missing, NaN or infinite values and ``std <= 0`` are
        invalid rows, as for ``crps``).
    quantiles : dict, optional
        Instead of ``mean=``/``std=``: quantile forecasts ``{level: column}``
        (levels in (0, 1)).  The expected proportions are the levels, the
        observed ones the shares of ``y`` at or below each quantile
        (``proportion="quantile"``; the area adds the ends 0 and 1).
    n_levels : int, default 100
        Number of expected proportions ``p`` of a Gaussian prediction, evenly
        spaced from 0 to 1 (``numpy.linspace(0, 1, n_levels)``,
        uncertainty-toolbox's ``num_bins``).
    proportion : {"interval", "quantile"}, optional
        ``"interval"`` (the default for ``mean=``/``std=``): the observed
        proportion at ``p`` is the share of rows inside the central Gaussian
        interval of probability ``p``, ``|y - mean| <= std * Phi^-1(1/2 +
        p/2)`` (uncertainty-toolbox's default ``prop_type="interval"``).
        ``"quantile"`` (the only one for ``quantiles=``): the share at or
        below the ``p``-quantile, ``y <= mean + std * Phi^-1(p)``.
    weights : Column, optional
        Column of non-negative row weights: weighted shares.
    counts : Column, optional
        Column of frequency counts: a row stands for ``k`` identical rows.
    crossing : {"score", "sort", "invalid"}, default "score"
        Crossing quantiles (``quantiles=`` only), as for ``quantile_coverage``:
        scored as given and counted (``<name>_n_crossing``), rearranged, or
        invalid rows.

    Returns
    -------
    CalibrationCurve
        A metric object; ``df.conformal.uncertainty_calibration_curve(...)``
        returns the long table.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.1, -0.5, 1.2, 2.5], "mu": [0.0, 0.0, 0.0, 0.0], "sd": [1.0, 1.0, 1.0, 1.0]})
    >>> curve = df.conformal.uncertainty_calibration_curve("y", mean="mu", std="sd", n_levels=5)
    >>> curve.select("expected", "observed").rows()
    [(0.0, 0.0), (0.25, 0.25), (0.5, 0.5), (0.75, 0.5), (1.0, 1.0)]
    """
    return CalibrationCurve(
        y=role(y),
        mean=role(mean),
        std=role(std),
        quantiles=None if quantiles is None else _wide_quantiles(quantiles, "quantiles"),
        n_levels=n_levels,
        proportion=proportion,
        weights=role(weights),
        counts=role(counts),
        crossing=crossing,
    )


# ---------------------------------------------------------------------------
# adversarial group calibration: random subgroups, a per-group numpy step
# ---------------------------------------------------------------------------
def first_inside(z: np.ndarray, levels: np.ndarray, proportion: str) -> np.ndarray:
    """Per row, the first level at which it is inside (``len(levels)``: never); the intervals are nested."""
    bounds = np.array([_bounds(float(p), proportion) for p in levels])
    upper = np.searchsorted(bounds[:, 1], z, side="left")  # the first level with z <= hi
    if proportion == "quantile":
        return upper
    return np.maximum(upper, np.searchsorted(-bounds[:, 0], -z, side="left"))  # and lo <= z


def adversarial_numpy(
    z: np.ndarray,
    *,
    levels: np.ndarray,
    proportion: str,
    calibration_error: str,
    fractions: np.ndarray,
    n_trials: int,
    n_draws: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group fraction: the group size, the mean over trials of the worst error of ``n_draws`` groups, its sd.

    The draws are those of ``numpy.random.RandomState(seed).choice(n, size,
    replace=False)``, in the order fraction, trial, draw (uncertainty-toolbox
    draws the same after ``numpy.random.seed(seed)``).
    """
    n, k = len(z), len(levels)
    sizes = np.array([max(round(n * float(r)), 2) for r in fractions], dtype=float)
    worst = np.full(len(fractions), np.nan)
    spread = np.full(len(fractions), np.nan)
    if n < 2 or not np.all(np.isfinite(z)):
        return sizes, worst, spread
    first = first_inside(z, levels, proportion)
    rng = np.random.RandomState(seed)
    for j, size in enumerate(sizes.astype(int)):
        per_trial = np.empty(n_trials)
        for t in range(n_trials):
            errors = np.empty(n_draws)
            for d in range(n_draws):
                idx = rng.choice(n, size, replace=False)
                observed = np.cumsum(np.bincount(first[idx], minlength=k + 1)[:k]) / size
                gap = observed - levels
                errors[d] = np.mean(np.abs(gap)) if calibration_error == "mean_absolute" else np.sqrt(np.mean(gap**2))
            per_trial[t] = errors.max()
        worst[j] = per_trial.mean()
        spread[j] = per_trial.std(ddof=1) if n_trials > 1 else np.nan
    return sizes, worst, spread


class _AdversarialGroups:
    """The per-group draws, computed once for every output of one evaluation."""

    def __init__(self, metric: AdversarialGroupCalibration) -> None:
        self.metric = metric
        self.memo: tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None = None

    def _all(self, group: np.ndarray, n_groups: int, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        (z,) = data.values()
        if self.memo is not None and self.memo[0] is group and self.memo[1] is z:
            return self.memo[2]
        m = self.metric
        fractions = np.linspace(0.0, 1.0, m.n_group_sizes)
        out = {s: np.full(n_groups, np.nan) for s in m.suffixes()}
        order = np.argsort(group, kind="stable")
        cuts = np.searchsorted(group[order], np.arange(n_groups + 1))
        for g in range(n_groups):
            _, worst, spread = adversarial_numpy(
                z[order[cuts[g] : cuts[g + 1]]],
                levels=level_grid(m.n_levels),
                proportion=m.proportion,
                calibration_error=m.calibration_error,
                fractions=fractions,
                n_trials=m.n_trials,
                n_draws=m.n_draws,
                seed=m.seed,
            )
            for j in range(m.n_group_sizes):
                out[f"size{j}"][g], out[f"size{j}_sd"][g] = worst[j], spread[j]
        self.memo = (group, z, out)
        return out

    def component(self, suffix: str) -> Callable[[np.ndarray, int, dict[str, np.ndarray]], np.ndarray]:
        def fn(group: np.ndarray, n_groups: int, data: dict[str, np.ndarray]) -> np.ndarray:
            return self._all(group, n_groups, data)[suffix]

        return fn


def _group_size(n: nw.Expr, fraction: float) -> nw.Expr:
    """``max(round(n * fraction), 2)`` as Int64, Python's ``round`` (half to even) of the same double product."""
    x = n.cast(F64) * fraction
    low = x.floor()
    frac = x - low
    up = (frac > 0.5) | ((frac == 0.5) & ((low % 2.0) == 1.0))
    size = nw.when(up).then(low + 1.0).otherwise(low)
    return nw.when(size > 2.0).then(size).otherwise(2.0).cast(nw.Int64)


def _at_least_two(value: Any, name: str) -> int:
    return check_positive_int(value, name, at_least=2)


@dataclass(frozen=True, kw_only=True)
class AdversarialGroupCalibration(Metric):
    y: str
    mean: str = checked(check_column)
    std: str = checked(check_column)
    calibration_error: str = checked(choice("mean_absolute", "root_mean_squared"), "mean_absolute")
    n_levels: int = checked(_levels, 100)
    proportion: str = checked(_check_proportion, "interval")
    n_group_sizes: int = checked(_at_least_two, 10)
    n_trials: int = checked(check_positive_int, 10)
    n_draws: int = checked(check_positive_int, 10)
    seed: int = 0
    default_name = "adversarial_group_calibration"
    mergeable_alternative = "mean_absolute_calibration_error"
    kind = "table"
    long = True

    def suffixes(self) -> list[str]:
        return [f"size{j}{x}" for j in range(self.n_group_sizes) for x in ("", "_sd")]

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        z, _ = gaussian_z(q, self.y, self.mean, self.std)
        groups = q.shared(("adversarial_group_calibration", z, self), lambda: _AdversarialGroups(self))
        what = "adversarial_group_calibration (draws random subgroups of each group's rows)"
        for suffix in self.suffixes():
            q.per_group(f"{self.output_name}_{suffix}", [z], groups.component(suffix), what=what)
        return dict.fromkeys(self.suffixes())

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        name = self.output_name
        parts = [
            {
                "group_fraction": nw.lit(float(r), F64),
                "group_size": _group_size(nw.col("n"), float(r)),
                "worst_error": nw.col(f"{name}_size{j}"),
                "worst_error_sd": nw.col(f"{name}_size{j}_sd"),
                "n": nw.col("n"),
            }
            for j, r in enumerate(np.linspace(0.0, 1.0, self.n_group_sizes))
        ]
        return sort_result(stack(frame, keys, parts), *keys, "group_fraction")


@no_weights("adversarial_group_calibration", "it draws random subgroups of rows")
def adversarial_group_calibration(
    y: Column,
    *,
    mean: Column,
    std: Column,
    calibration_error: Literal["mean_absolute", "root_mean_squared"] = "mean_absolute",
    n_levels: int = 100,
    proportion: Proportion = "interval",
    n_group_sizes: int = 10,
    n_trials: int = 10,
    n_draws: int = 10,
    seed: int = 0,
) -> AdversarialGroupCalibration:
    """Adversarial group calibration: the worst calibration error over random subgroups, by subgroup size.

    For each fraction ``r`` of ``n_group_sizes`` evenly spaced fractions in
    ``[0, 1]``, subgroups of ``max(round(n r), 2)`` rows are drawn without
    replacement; a trial keeps the worst calibration error (mean absolute or
    root mean squared, over ``n_levels`` levels as
    :func:`mean_absolute_calibration_error`) of ``n_draws`` subgroups, and the
    table gives the mean and the standard deviation of ``n_trials`` trials
    (uncertainty-toolbox's ``adversarial_group_calibration``, whose
    ``score_stderr`` is this standard deviation).  Small subgroups are
    miscalibrated by chance; a model whose curve stays high for large
    subgroups is miscalibrated on some region of its inputs.

    The draws are ``numpy.random.RandomState(seed).choice``, in the order
    fraction, trial, draw, for each ``by=`` group from the same ``seed``:
    uncertainty-toolbox gives the same numbers after
    ``numpy.random.seed(seed)``.  A per-group numpy step: eager frames and
    polars lazy frames (kept lazy); other lazy backends raise
    :class:`~conformal_frames.BackendLimitError`.  A group of fewer than 2
    rows has null errors.

    Parameters
    ----------
    y : Column
        Column of observed values.
    mean, std : Column
        Columns of the Gaussian prediction's mean and standard deviation
        (``std > 0``).
    calibration_error : {"mean_absolute", "root_mean_squared"}, default "mean_absolute"
        The error of a subgroup (uncertainty-toolbox's ``cali_type``
        ``"mean_abs"`` / ``"root_mean_sq"``).
    n_levels : int, default 100
        Levels of the calibration curve (see
        :func:`uncertainty_calibration_curve`).
    proportion : {"interval", "quantile"}, default "interval"
        Central intervals or quantiles (see
        :func:`uncertainty_calibration_curve`).
    n_group_sizes, n_trials, n_draws : int, default 10
        Subgroup fractions (at least 2: 0 and 1 included), trials per
        fraction and subgroups per trial (uncertainty-toolbox's
        ``num_group_bins``, ``num_trials``, ``num_group_draws``).
    seed : int, default 0
        Seed of the draws.

    Returns
    -------
    AdversarialGroupCalibration
        A metric object; ``df.conformal.adversarial_group_calibration(...)``
        returns the long table: ``group_fraction``, ``group_size``,
        ``worst_error``, ``worst_error_sd`` and ``n`` per fraction (and group).

    Examples
    --------
    >>> import numpy as np
    >>> import polars as pl
    >>> import conformal_frames
    >>> rng = np.random.default_rng(0)
    >>> df = pl.DataFrame({"y": rng.normal(size=200), "mu": np.zeros(200), "sd": np.full(200, 1.0)})
    >>> table = df.conformal.adversarial_group_calibration("y", mean="mu", std="sd", n_group_sizes=3)
    >>> table.select("group_fraction", "group_size").rows()
    [(0.0, 2), (0.5, 100), (1.0, 200)]
    """
    return AdversarialGroupCalibration(
        y=role(y),
        mean=role(mean),
        std=role(std),
        calibration_error=calibration_error,
        n_levels=n_levels,
        proportion=proportion,
        n_group_sizes=n_group_sizes,
        n_trials=n_trials,
        n_draws=n_draws,
        seed=seed,
    )
