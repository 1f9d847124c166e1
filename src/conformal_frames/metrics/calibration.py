"""Calibration of probabilistic predictions: ECE family, reliability, tests.

Binary setting: a score ``s`` in ``[0, 1]`` and a label ``y`` in ``{0, 1}``
per row; a group of ``n`` rows.  Scores outside ``[0, 1]``, missing scores or
labels and labels other than 0/1 are invalid rows (an error naming the column
and the count on eager input; null metrics and ``n_invalid`` on lazy input).
Labels are never remapped.

* :func:`ece`, :func:`mce`, :func:`brier`, :func:`reliability`: binned
  calibration error and the reliability table (``uniform`` bins
  ``[m/M, (m+1)/M)``, the last closed at 1; ``quantile`` bins of near-equal
  count in score order, tied scores kept together);
* :func:`confidence_ece`, :func:`top_label_ece`, :func:`classwise_ece`:
  multiclass versions over one probability column per class;
* :func:`cumulative_differences`, :func:`ks_test`, :func:`kuiper_test`,
  :func:`spiegelhalter_test`: the tests of Arrieta-Ibarra et al. (2022) and
  Spiegelhalter (1986).  Cumulative differences are taken at distinct score
  values, so tied scores never depend on row order or backend.  p-values are
  computed inside the engine (series of ``exp`` terms, see
  :mod:`conformal_frames.numerics.brownian`): lazy on every backend.

See ``docs/calibration.md`` for the formulas and the differences from the
numpy baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import narwhals.stable.v2 as nw

from conformal_frames import engine
from conformal_frames._renames import renamed
from conformal_frames._roles import Column, role
from conformal_frames._validate import check_column, checked, choice
from conformal_frames.engine import (
    InvalidPolicy,
    Metric,
    Query,
    TableRef,
    Weighting,
    aggregate,
    indicator,
    ordered_cells,
    over,
    running_total,
    total,
)
from conformal_frames.inputs.binary import Precision, binary_inputs, binary_row, score_precision, score_row
from conformal_frames.inputs.probabilities import (
    Probs,
    ProbsMetric,
    binary_or_classes,
    check_probs,
    probability_rows,
    probs_field,
    probs_precision,
)
from conformal_frames.inputs.sets import Label, label_exprs
from conformal_frames.numerics.brownian import (
    abs_normal_tail,
    brownian_max_abs_cdf,
    brownian_max_abs_sf,
    brownian_range_cdf,
    brownian_range_sf,
    kolmogorov_smirnov_cdf,
    kuiper_cdf,
    with_max_abs_sf,
    with_range_sf,
)
from conformal_frames.numerics.stats import equal_count_bin, max_of, ratio, weighted_cut, wilson_interval
from conformal_frames.results import KSTestResult, KuiperTestResult, SpiegelhalterTestResult

METHODS = [
    "ece",
    "mce",
    "brier",
    "rps",
    "reliability",
    "top_label_ece",
    "confidence_ece",
    "classwise_ece",
    "ks_test",
    "kuiper_test",
    "spiegelhalter_test",
]
#: functions of a frame that become ``.conformal`` methods
FRAME_METHODS = ["cumulative_differences"]
__all__ = [
    *METHODS,
    "cumulative_differences",
    "brownian_max_abs_cdf",
    "brownian_max_abs_sf",
    "brownian_range_cdf",
    "brownian_range_sf",
    "kolmogorov_smirnov_cdf",
    "kuiper_cdf",
]

Strategy = Literal["uniform", "quantile"]
F64 = nw.Float64
_INF = float("inf")


# ---------------------------------------------------------------------------
# parameters and row-level inputs
# ---------------------------------------------------------------------------
#: uniform bins: relative snap of the edges ``m / M`` by the scores' precision
#: (see :func:`bin_row`)
EDGE_SNAP: dict[Precision, float] = {"float64": 2.0**-50, "float32": 2.0**-22}


def bin_row(
    q: Query,
    s_row: str,
    n_bins: int,
    strategy: Strategy,
    within: Sequence[str] = (),
    *,
    precision: Precision = "float64",
    weight: str | None = None,
) -> str:
    """Row column: the bin (0 .. n_bins-1, Float64) of the score ``s_row``.

    ``uniform``: bin ``m`` is ``[m/M, (m+1)/M)``, the last closed at 1.  A
    score equal to an edge ``m/M`` *as written in the score's precision* (the
    double nearest to 0.57, or the Float32 nearest to 0.7) goes to the bin the
    edge starts.  Computed as ``min(floor(s * f), M - 1)`` with the double
    ``f = M * (1 + eps)``, ``eps = 2**-50`` for Float64 scores and ``2**-22``
    when a score column is Float32: the edge's rounding error (relative
    ``2**-53``, resp. ``2**-24``) is absorbed, so a score at most a few units
    in the last place of its precision below an edge (8 for Float64, 4 for
    Float32) counts as the edge.  One correctly rounded product: the same bin
    on every backend.  ``quantile``: with ``r`` the number
    of rows of the group (and of ``within``) with a smaller score, the row goes
    to the bin that holds position ``r`` when ``n`` positions are split into
    ``M`` runs whose sizes differ by at most one (the first ``n % M`` runs are
    one longer); tied scores share ``r`` and hence their bin.  With a
    ``weight`` row, quantile bins cut the total weight instead of the row
    count (:func:`weighted_quantile_bin`); uniform bins do not depend on it.
    """
    m = float(n_bins)
    s = nw.col(s_row)
    if strategy == "uniform":
        # no comparison with the edges m / M: engines may rewrite a division
        # by a constant as a product with its (rounded) reciprocal
        # invalid scores (NaN, inf; their rows are reported) are clamped first:
        # floor(inf) overflows in Spark's ANSI mode
        factor = m * (1.0 + EDGE_SNAP[precision])
        b = (s.fill_nan(0.0).clip(0.0, 1.0) * factor).floor()
        return q.row(("ubin", s_row, n_bins, precision), b.clip(0.0, m - 1.0), inputs=[s_row])
    if weight is not None:
        return weighted_quantile_bin(q, s_row, n_bins, within, weight)
    part = (s_row, *within)
    r_row = q.row(("rank", *part), q.over(s.rank("min"), *within).cast(F64) - 1.0, inputs=part)
    n_row = q.row(("count", *part), q.over(s.count(), *within).cast(F64), inputs=part)
    b = equal_count_bin(nw.col(r_row), nw.col(n_row), n_bins)
    return q.row(("qbin", n_bins, *part), b, inputs=[r_row, n_row])


def weighted_quantile_bin(q: Query, s_row: str, n_bins: int, within: Sequence[str], weight: str) -> str:
    """Row column: the weighted quantile bin of ``s_row`` (see :func:`weighted_cut`).

    The position of a row is the total weight of the rows of its group (and
    of ``within``) with a smaller score, so tied scores share their bin; the
    total is the group's weight.  Rows of weight 0 take no room.
    """
    part = [*q.group, *within]
    w = nw.col(weight)
    before = q.row(
        ("wcum", weight, s_row, *within),
        over(w.cum_sum(), part, order_by=s_row) - w,
        inputs=[weight, s_row, *within],
    )
    # tied scores: the least running sum is the weight of the smaller scores
    r = q.row(("wrank", weight, s_row, *within), over(nw.col(before).min(), [*part, s_row]), inputs=[before, s_row])
    tot = q.row(("wtotal", weight, *within), over(w.sum(), part), inputs=[weight, *within])
    return q.row(
        ("wqbin", n_bins, weight, s_row, *within), weighted_cut(nw.col(r), nw.col(tot), n_bins), inputs=[r, tot]
    )


# ---------------------------------------------------------------------------
# binned statistics (ECE family)
# ---------------------------------------------------------------------------
def _bins_table(y: str, s: str, b: str, sub: str | None, weight: str | None = None) -> engine.TableFn:
    """Per group: ``sum_bins |sum y - sum s|`` (``ad``) and ``max_bins |mean y - mean s|`` (``gap``).

    With ``sub`` (the predicted label of top-label ECE), bins are per
    ``(group, sub)``; the table then also has the sum over labels of their
    ECE (``ecej``) and the number of labels (``cnt``).  With ``weight``,
    ``y`` and ``s`` are the weighted rows ``w y`` and ``w s``, a bin's count is
    its weight and rows of weight 0 are in no bin.
    """

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        cnt, sy, ss = (ref.name(x) for x in ("cnt", "sy", "ss"))
        cells_keys = [*keys, *([sub] if sub else [])]
        size = nw.len().alias(cnt) if weight is None else nw.col(weight).sum().alias(cnt)
        if weight is not None:
            rows = rows.filter(nw.col(weight) > 0.0)
        cells = rows.group_by(*cells_keys, b).agg(size, nw.col(y).sum().alias(sy), nw.col(s).sum().alias(ss))
        return _bin_errors_table(cells, keys, ref, sub)

    return build


def _bin_errors_table(cells: nw.LazyFrame, keys: list[str], ref: TableRef, sub: str | None) -> nw.LazyFrame:
    """:func:`_bins_table` from one row per (group, ``sub``, bin) with its count and sums ``cnt``, ``sy``, ``ss``."""
    cnt, sy, ss, ad, gap, ece_j = (ref.name(x) for x in ("cnt", "sy", "ss", "ad", "gap", "ecej"))
    cells = cells.with_columns(nw.col(cnt).cast(F64), (nw.col(sy) - nw.col(ss)).abs().alias(ad))
    cells = cells.with_columns((nw.col(ad) / nw.col(cnt)).alias(gap))
    if sub is None:
        return aggregate(cells, keys, [nw.col(ad).sum().alias(ad), nw.col(gap).max().alias(gap)])
    per = cells.group_by(*keys, sub).agg(nw.col(ad).sum().alias(ad), nw.col(cnt).sum().alias(cnt))
    per = per.with_columns((nw.col(ad) / nw.col(cnt)).alias(ece_j))
    return aggregate(
        per,
        keys,
        [nw.col(ece_j).sum().alias(ece_j), nw.col(ece_j).count().alias(cnt), nw.col(ad).sum().alias(ad)],
    )


def _quantile_bins_table(y: str, s: str, one: str, n_bins: int) -> engine.TableFn:
    """:func:`_bins_table` of unweighted quantile bins, from the ordered cells of the scores.

    One row per (group, distinct score) (:meth:`~conformal_frames.engine.Query.cells`):
    its rows ``one``, the sum of ``y`` and the running row count.  The rows
    with a smaller score are the running count less the cell's own: the
    position of :func:`bin_row`'s quantile bins, so a cell goes whole to the
    bin of its rows.  No rank of the rows (a single-threaded sort on polars),
    and mergeable: a summary keeps the cells.
    """

    def build(cells: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        cnt, sy, ss, b, n = (ref.name(x) for x in ("cnt", "sy", "ss", "bin", "n"))
        cells = cells.with_columns(
            over(nw.col(one).sum(), keys).alias(n), (nw.col(one) * nw.col(s)).alias(ss), nw.col(y).alias(sy)
        )
        before = nw.col(running_total(one)) - nw.col(one)
        cells = cells.with_columns(equal_count_bin(before, nw.col(n), n_bins).alias(b))
        per_bin = cells.group_by(*keys, b).agg(nw.col(one).sum().alias(cnt), nw.col(sy).sum(), nw.col(ss).sum())
        return _bin_errors_table(per_bin, keys, ref, None)

    return build


def _binned(
    q: Query,
    y_row: str,
    s_row: str,
    n_bins: int,
    strategy: Strategy,
    sub: str | None = None,
    *,
    precision: Precision = "float64",
    w: Weighting | None = None,
) -> TableRef:
    """Register the binned table (:func:`_bins_table`); returns its handle."""
    weight = w.row if w is not None else None
    if strategy == "quantile" and weight is None and sub is None:
        one = q.row(("one",), nw.lit(1.0))
        fn = _quantile_bins_table(y_row, s_row, one, n_bins)
        return q.cells(("qbins", y_row, s_row, n_bins), fn, order=s_row, sums=(one, y_row), running=(one,))
    b = bin_row(q, s_row, n_bins, strategy, within=[sub] if sub else [], precision=precision, weight=weight)
    if w is not None and weight is not None:
        y_row, s_row = w.of(y_row), w.of(s_row)
    return q.table(("bins", y_row, s_row, b, sub, weight), _bins_table(y_row, s_row, b, sub, weight))


#: uniform bins up to this many are summed in the main aggregation (one pass,
#: streamable); more bins, quantile bins and per-label bins use a sub-query
WIDE_BINS = 32


def bin_errors(
    q: Query,
    y_row: str,
    s_row: str,
    n_bins: int,
    strategy: Strategy,
    *,
    gaps: bool = False,
    precision: Precision = "float64",
    w: Weighting | None = None,
) -> tuple[nw.Expr, nw.Expr | None]:
    """``(sum_bins |sum (y - s)|, max_bins |mean y - mean s|)`` per group.

    Uniform bins (``n_bins <= WIDE_BINS``) are elementary sums of the main
    aggregation: per bin ``sum (y - s)`` over the rows in the bin (and, with
    ``gaps``, the row count).  Otherwise a per-(group, bin) sub-query.  With
    weights (``w``) every sum and count is weighted.
    """
    w = w if w is not None else q.weighting(None)
    if strategy != "uniform" or n_bins > WIDE_BINS:
        t = _binned(q, y_row, s_row, n_bins, strategy, precision=precision, w=w)
        return t.col("ad"), t.col("gap")
    b = bin_row(q, s_row, n_bins, strategy, precision=precision)
    d = q.row(("ydiff", y_row, s_row), nw.col(y_row) - nw.col(s_row), inputs=[y_row, s_row])
    diffs, gap_exprs = [], []
    for m in range(n_bins):
        in_bin = nw.col(b) == float(m)
        diff = w.sum(q.row(("bin_diff", d, b, m), nw.when(in_bin).then(nw.col(d)).otherwise(0.0), inputs=[d, b])).abs()
        diffs.append(diff)
        if gaps:
            cnt = w.sum(q.row(("bin_count", b, m), indicator(in_bin), inputs=[b]))
            gap_exprs.append(nw.when(cnt > 0.0).then(diff / cnt))
    return total(diffs), (max_of(*gap_exprs) if gaps else None)


@dataclass(frozen=True, kw_only=True)
class ECE(Metric):
    y: str
    score: str
    n_bins: int = 10
    strategy: Strategy = "uniform"
    weights: str | None = None
    counts: str | None = None
    default_name = "ece"
    mergeable_alternative = "ece with strategy='uniform' and n_bins <= 32, or strategy='quantile' without weights"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        prec, w = score_precision(q, self.score), q.weighting(self.weights, counts=self.counts)
        y, s = binary_row(q, self.y), score_row(q, self.score)
        ad, _ = bin_errors(q, y, s, self.n_bins, self.strategy, precision=prec, w=w)
        return {"": ratio(ad, w.total)}


@renamed(num_bins="n_bins")
def ece(
    y: Column,
    score: Column,
    *,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
    weights: Column | None = None,
    counts: Column | None = None,
) -> ECE:
    """Expected calibration error of binary scores.

    ``ECE = sum_m |B_m| / n * |mean_{B_m}(y) - mean_{B_m}(s)|`` over the
    non-empty bins ``B_m``.

    Parameters
    ----------
    y : Column
        Label column, values 0/1 (integer, float or boolean); other values
        are an error, never remapped.
    score : Column
        Score column (predicted probability of ``y = 1``), within ``[0, 1]``.
    n_bins : int, default 10
        Number of bins ``M``.
    strategy : {"uniform", "quantile"}
        ``uniform``: ``M`` bins ``[m/M, (m+1)/M)``, the last closed at 1 (all
        ``M`` bins are real bins); a score equal to an edge in its own
        precision (0.57, or a Float32 0.7) starts its bin, see
        :func:`bin_row`.  ``quantile``: ``M`` bins of near-equal
        count in score order (sizes differ by at most one, the first bins
        taking the extra rows); tied scores stay in one bin, so bins may be
        uneven or empty when scores are tied.
    weights : Column, optional
        Column of non-negative row weights: bins weigh their rows (a bin's
        mass is its total weight; quantile bins cut the total weight), see
        the docs page "Weights".
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    ECE
        A metric object.  ``df.conformal.ece(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``ece`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [0, 1, 1, 0, 1], "s": [0.1, 0.15, 0.8, 0.85, 0.9]})
    >>> round(df.conformal.ece("y", "s", n_bins=2), 6)
    0.26

    References
    ----------
    M. P. Naeini, G. Cooper and M. Hauskrecht (2015), "Obtaining well
    calibrated probabilities using Bayesian binning", AAAI 29.
    """
    return ECE(
        y=role(y), score=role(score), n_bins=n_bins, strategy=strategy, weights=role(weights), counts=role(counts)
    )


@dataclass(frozen=True, kw_only=True)
class MCE(Metric):
    y: str
    score: str
    n_bins: int = 10
    strategy: Strategy = "uniform"
    weights: str | None = None
    counts: str | None = None
    default_name = "mce"
    mergeable_alternative = "mce with strategy='uniform' and n_bins <= 32, or strategy='quantile' without weights"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        y, s, prec = binary_row(q, self.y), score_row(q, self.score), score_precision(q, self.score)
        w = q.weighting(self.weights, counts=self.counts)
        _, gap = bin_errors(q, y, s, self.n_bins, self.strategy, gaps=True, precision=prec, w=w)
        return {"": gap}


@renamed(num_bins="n_bins")
def mce(
    y: Column,
    score: Column,
    *,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
    weights: Column | None = None,
    counts: Column | None = None,
) -> MCE:
    """Maximum calibration error: ``max_m |mean_{B_m}(y) - mean_{B_m}(s)|``.

    The maximum is over the non-empty bins; bins as in :func:`ece`.

    Parameters
    ----------
    y : Column
        Label column, values 0/1 (integer, float or boolean); other values are
        an error, never remapped.
    score : Column
        Score column (predicted probability of ``y = 1``), within ``[0, 1]``.
    n_bins : int, default 10
        Number of bins ``M``.
    strategy : {"uniform", "quantile"}, default "uniform"
        How the bins are cut; see :func:`ece`.

    Returns
    -------
    MCE
        A metric object.  ``df.conformal.mce(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``mce`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [0, 1, 1, 0, 1], "s": [0.1, 0.15, 0.8, 0.85, 0.9]})
    >>> round(df.conformal.mce("y", "s", n_bins=2), 6)
    0.375
    """
    return MCE(
        y=role(y), score=role(score), n_bins=n_bins, strategy=strategy, weights=role(weights), counts=role(counts)
    )


@dataclass(frozen=True, kw_only=True)
class Brier(Metric):
    y: str
    score: str
    weights: str | None = None
    counts: str | None = None
    default_name = "brier"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        y, s = binary_row(q, self.y), score_row(q, self.score)
        sq = q.row(("brier", y, s), (nw.col(y) - nw.col(s)) ** 2, inputs=[y, s])
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(w.sum(sq), w.total)}


@dataclass(frozen=True, kw_only=True)
class MulticlassBrier(ProbsMetric):
    y: str
    probs: Probs = checked(probs_field)
    classes: tuple[Label, ...]
    weights: str | None = None
    counts: str | None = None
    default_name = "brier"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        p_rows, eq_rows = _class_rows(q, self.y, self.probs, self.classes)
        # scikit-learn's scale_by_half="auto": halved for two classes (the binary Brier score)
        half = 0.5 if len(self.classes) < 3 else 1.0
        sq = total([(nw.col(e) - nw.col(p)) ** 2 for e, p in zip(eq_rows, p_rows)]) * half
        row = q.row(("brier_classes", self.y, self.probs, self.classes), sq, inputs=[*eq_rows, *p_rows])
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(w.sum(row), w.total)}


def _class_rows(q: Query, y: str, probs: Probs, classes: tuple[Label, ...]) -> tuple[list[str], list[str]]:
    """Row columns of the proper scores: the class probabilities (summing to 1) and ``1[y = c_k]``."""
    p_rows = probability_rows(q, probs, classes, sums_to_one=True)
    eq_rows = [q.row(("label_eq", y, c), e) for c, e in zip(classes, label_exprs(q, y, classes))]
    return p_rows, eq_rows


def brier(
    y: Column,
    score: Column | Sequence[Column] | None = None,
    *,
    probs: Column | Sequence[Column] | None = None,
    classes: Sequence[Label] | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
) -> Brier | MulticlassBrier:
    """Brier score ``(1/n) sum_i (y_i - s_i)^2`` (lower is better).

    Parameters
    ----------
    y : Column
        Label column, values 0/1 (integer, float or boolean); other values are
        an error, never remapped.
    score : Column or list of Column
        Score column (predicted probability of ``y = 1``), within ``[0, 1]``.
        A list of columns is read as ``probs=``.
    probs : Column or list of Column, optional
        Class probabilities (the multiclass form): one column per class in
        the order of ``classes`` (default ``0, 1, ..., K-1``), or the name of
        a list column holding them (``classes=`` required).
    classes : list of int or str, optional
        The labels of the classes, in the order of the probabilities.
    weights : Column, optional
        Column of non-negative row weights: ``sum_i w_i (y_i - s_i)^2 /
        sum_i w_i``, as scikit-learn's ``brier_score_loss(sample_weight=)``
        (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    Brier or MulticlassBrier
        A metric object.  ``df.conformal.brier(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``brier`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Notes
    -----
    The multiclass form is ``(1/n) sum_i sum_k (1[y_i = c_k] - p_ik)^2``
    (Brier 1950), halved for two classes: scikit-learn's
    ``brier_score_loss(y, P, labels=classes)`` with its default
    ``scale_by_half="auto"``, so two class columns give the binary score.  A
    label outside ``classes`` and a row whose probabilities do not sum to 1
    are invalid rows (see :func:`log_loss`).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.0, 1.0], "s": [0.2, 0.6]})
    >>> round(df.conformal.brier("y", "s"), 6)
    0.1
    >>> mc = pl.DataFrame({"y": ["a", "c"], "pa": [0.7, 0.1], "pb": [0.2, 0.3], "pc": [0.1, 0.6]})
    >>> round(mc.conformal.brier("y", probs=["pa", "pb", "pc"], classes=["a", "b", "c"]), 6)
    0.2
    """
    multiclass = binary_or_classes("brier", score, probs, classes)
    if multiclass is not None:
        cols, labels = multiclass
        return MulticlassBrier(y=role(y), probs=cols, classes=labels, weights=role(weights), counts=role(counts))
    return Brier(y=role(y), score=check_column(score, "score"), weights=role(weights), counts=role(counts))


@dataclass(frozen=True, kw_only=True)
class RPS(ProbsMetric):
    y: str
    probs: Probs = checked(probs_field)
    classes: tuple[Label, ...]
    weights: str | None = None
    counts: str | None = None
    default_name = "rps"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        p_rows, eq_rows = _class_rows(q, self.y, self.probs, self.classes)
        terms, cum_p, cum_o = [], nw.lit(0.0), nw.lit(0.0)
        for e, p in zip(eq_rows, p_rows):
            cum_p, cum_o = cum_p + nw.col(p), cum_o + nw.col(e)
            terms.append((cum_p - cum_o) ** 2)
        row = q.row(("rps", self.y, self.probs, self.classes), total(terms), inputs=[*eq_rows, *p_rows])
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(w.sum(row), w.total)}


def rps(
    y: Column,
    probs: Column | Sequence[Column],
    *,
    classes: Sequence[Label] | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
) -> RPS:
    """Ranked probability score of a forecast of ordered categories (Epstein 1969), lower is better.

    ``(1/n) sum_i sum_{k=1}^{K} (P_ik - O_ik)^2`` with ``P_ik = p_i1 + ... +
    p_ik`` the forecast's cumulative probability of the first ``k`` classes
    and ``O_ik = 1[y_i <= c_k]`` the observation's, classes ordered as in
    ``classes``.  Not divided by ``K - 1``: scoringrules' ``rps_score``
    (verification's ``rps`` and some papers divide by ``K - 1``, see
    docs/differences.md).  The Brier score of each cumulative event, summed:
    a forecast that puts its mass near the observed category scores better
    than one that puts it far away.  A label outside ``classes`` and a row
    whose probabilities do not sum to 1 are invalid rows (see :func:`log_loss`).

    Parameters
    ----------
    y : Column
        The observed category, one of ``classes``.
    probs : Column or list of Column
        One probability column per category in the order of ``classes``, or
        the name of a list column holding them (``classes=`` required).
    classes : list of int or str, optional
        The categories in their order; default ``0, 1, ..., K-1``.
    weights : Column, optional
        Column of non-negative row weights.
    counts : Column, optional
        Column of frequency counts (non-negative integers).

    Returns
    -------
    RPS
        A metric object (output ``rps``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [2], "p0": [0.1], "p1": [0.2], "p2": [0.3], "p3": [0.4]})
    >>> round(df.conformal.rps("y", ["p0", "p1", "p2", "p3"]), 6)
    0.26

    References
    ----------
    E. S. Epstein (1969), "A scoring system for probability forecasts of
    ranked categories", Journal of Applied Meteorology 8, 985-987.
    """
    cols, labels = check_probs(probs, classes)
    return RPS(y=role(y), probs=cols, classes=labels, weights=role(weights), counts=role(counts))


# ---------------------------------------------------------------------------
# reliability table
# ---------------------------------------------------------------------------
def _reliability_table(
    y: str, s: str, b: str, n_bins: int, w: tuple[str, str, str | None] | None = None
) -> engine.TableFn:
    """Per group and bin ``m``: rows ``n<m>``, ``sum y`` (``y<m>``) and ``sum s`` (``s<m>``).

    With ``w`` (the row columns of the weights, their squares and the
    counts, if any), ``y`` and ``s`` are weighted rows, ``n<m>`` is the bin's
    weight, ``q<m>`` its sum of squared weights and ``r<m>`` its rows (the sum
    of their counts); rows of weight 0 are in no bin.
    """
    stats = ("n", "y", "s") if w is None else ("n", "y", "s", "q", "r")

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        cnt, sy, ss, sq, rc = (ref.name(x) for x in ("cnt", "sy", "ss", "sq", "rc"))
        aggs = [nw.col(y).sum().alias(sy), nw.col(s).sum().alias(ss)]
        if w is None:
            cells = rows.group_by(*keys, b).agg(nw.len().alias(cnt), *aggs)
        else:
            rows = rows.filter(nw.col(w[0]) > 0.0)
            size = nw.len() if w[2] is None else nw.col(w[2]).sum()
            aggs += [nw.col(w[0]).sum().alias(cnt), nw.col(w[1]).sum().alias(sq), size.alias(rc)]
            cells = rows.group_by(*keys, b).agg(*aggs).with_columns(nw.col(rc).cast(F64))
        cells = cells.with_columns(nw.col(cnt).cast(F64))
        source = {"n": cnt, "y": sy, "s": ss, "q": sq, "r": rc}
        parts = []
        for m in range(n_bins):
            is_m = (nw.col(b) == float(m)).cast(F64)
            parts += [(is_m * nw.col(source[x])).alias(ref.name(f"{x}{m}")) for x in stats]
        cells = cells.with_columns(*parts)
        sums = [nw.col(ref.name(f"{x}{m}")).sum() for m in range(n_bins) for x in stats]
        return aggregate(cells, keys, sums)

    return build


#: long-table column -> wide suffix after ``<name>_bin<m>`` (the bin's observed frequency is ``<name>_bin<m>``)
_RELIABILITY_COLUMNS = {
    "mean_score": "_mean_score",
    "frequency": "",
    "frequency_ci_low": "_ci_low",
    "frequency_ci_high": "_ci_high",
}


@dataclass(frozen=True, kw_only=True)
class Reliability(Metric):
    y: str
    score: str
    n_bins: int = 10
    strategy: Strategy = "uniform"
    ci_level: float = 0.95
    weights: str | None = None
    counts: str | None = None
    default_name = "reliability"
    mergeable_alternative = "ece / mce with strategy='uniform' and n_bins <= 32"
    kind = "table"
    long = True

    def _table(self, q: Query) -> TableRef:
        y, s = binary_row(q, self.y), score_row(q, self.score)
        w = q.weighting(self.weights, counts=self.counts)
        b = bin_row(q, s, self.n_bins, self.strategy, precision=score_precision(q, self.score), weight=w.row)
        if w.row is None:
            return q.table(("reliability", y, s, b, self.n_bins), _reliability_table(y, s, b, self.n_bins))
        wy, ws, pair = w.of(y), w.of(s), (w.row, w.square, w.counts)
        return q.table(("reliability", wy, ws, b, self.n_bins, pair), _reliability_table(wy, ws, b, self.n_bins, pair))

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        t = self._table(q)
        out: dict[str, nw.Expr | None] = {}
        for m in range(self.n_bins):
            n, k, tot = (t.col(f"{x}{m}") for x in ("n", "y", "s"))
            rows, k_ci, n_ci = n, t.name(f"y{m}"), t.name(f"n{m}")
            if self.weights is not None:  # the frequency's interval at Kish's n_eff of the bin
                rows, n_ci = t.col(f"r{m}"), q.value(ratio(n**2, t.col(f"q{m}")))
                k_ci = q.value(ratio(k, n) * nw.col(n_ci), inputs=[n_ci])
            low, high = wilson_interval(q, k_ci, n_ci, self.ci_level)
            out[f"bin{m}_mean_score"] = ratio(tot, n)
            out[f"bin{m}"] = ratio(k, n)
            out[f"bin{m}_ci_low"] = nw.when(n > 0).then(low)
            out[f"bin{m}_ci_high"] = nw.when(n > 0).then(high)
            out[f"bin{m}_n"] = rows
        return out

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        name = self.output_name
        parts = [
            {
                "bin": nw.lit(m, nw.Int64),
                **{c: nw.col(f"{name}_bin{m}{x}") for c, x in _RELIABILITY_COLUMNS.items()},
                "n": nw.col(f"{name}_bin{m}_n").cast(nw.Int64),
            }
            for m in range(self.n_bins)
        ]
        return engine.sort_result(engine.stack(frame, keys, parts).filter(nw.col("n") > 0), *keys, "bin")


@renamed(num_bins="n_bins", ci="ci_level")
def reliability(
    y: Column,
    score: Column,
    *,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
    ci_level: float = 0.95,
    weights: Column | None = None,
    counts: Column | None = None,
) -> Reliability:
    """Reliability table: the data behind a reliability diagram.

    Per (group, non-empty bin): ``bin`` (0-based; bins as in :func:`ece`),
    ``mean_score``, the observed ``frequency`` of ``y = 1``, its Wilson
    interval at confidence ``ci_level`` (``frequency_ci_low`` /
    ``frequency_ci_high``) and ``n`` (rows in the bin).  Empty bins are absent
    rows.  Inside ``evaluate`` the bins are wide columns: ``reliability_bin<m>``
    (the frequency, like ``ssc_bin<m>``), ``reliability_bin<m>_ci_low``,
    ``..._ci_high``, ``..._mean_score`` and ``..._n`` (null for an empty bin).

    Parameters
    ----------
    y : Column
        Label column, values 0/1 (integer, float or boolean); other values are
        an error, never remapped.
    score : Column
        Score column (predicted probability of ``y = 1``), within ``[0, 1]``.
    n_bins : int, default 10
        Number of bins ``M``.
    strategy : {"uniform", "quantile"}, default "uniform"
        How the bins are cut; see :func:`ece`.
    ci_level : float, default 0.95
        Confidence level of the Wilson interval of each bin's frequency.
    weights : Column, optional
        Column of non-negative row weights: weighted means per bin, the
        Wilson interval at the bin's Kish effective sample size; ``n``
        counts the bin's rows of positive weight (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    Reliability
        A metric object.  ``df.conformal.reliability(...)`` returns the long
        table described above, a frame of the caller's type (lazy in, lazy
        out); inside :func:`~conformal_frames.evaluate` the wide columns.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.0, 1.0, 1.0, 1.0], "s": [0.2, 0.4, 0.7, 0.9]})
    >>> df.conformal.reliability("y", "s", n_bins=2).select("bin", "mean_score", "frequency", "n")
    shape: (2, 4)
    ┌─────┬────────────┬───────────┬─────┐
    │ bin ┆ mean_score ┆ frequency ┆ n   │
    │ --- ┆ ---        ┆ ---       ┆ --- │
    │ i64 ┆ f64        ┆ f64       ┆ i64 │
    ╞═════╪════════════╪═══════════╪═════╡
    │ 0   ┆ 0.3        ┆ 0.5       ┆ 2   │
    │ 1   ┆ 0.8        ┆ 1.0       ┆ 2   │
    └─────┴────────────┴───────────┴─────┘
    """
    return Reliability(
        y=role(y),
        score=role(score),
        n_bins=n_bins,
        strategy=strategy,
        ci_level=ci_level,
        weights=role(weights),
        counts=role(counts),
    )


# ---------------------------------------------------------------------------
# multiclass: top-label and class-wise ECE
# ---------------------------------------------------------------------------
def _top_label_rows(q: Query, y: str, probs: Probs, classes: tuple[Label, ...]) -> tuple[str, str, str]:
    """Row columns: the confidence (largest probability), the predicted class (its position; ties go to the
    first column) and ``1.0`` where it is the label."""
    p_rows = probability_rows(q, probs, classes)
    eq = label_exprs(q, y, classes)
    conf = q.row(("top_conf", probs), max_of(*[nw.col(p) for p in p_rows]), inputs=p_rows)
    pred_expr: nw.Expr = nw.lit(float(len(p_rows) - 1))
    for k in range(len(p_rows) - 2, -1, -1):  # first maximal column wins
        pred_expr = nw.when(nw.col(p_rows[k]) == nw.col(conf)).then(nw.lit(float(k))).otherwise(pred_expr)
    pred = q.row(("top_pred", probs), pred_expr, inputs=[*p_rows, conf])
    eq_rows = [q.row(("label_eq", y, c), e) for c, e in zip(classes, eq)]
    hit = total([(nw.col(pred) == float(k)).cast(F64) * nw.col(r) for k, r in enumerate(eq_rows)])
    correct = q.row(("top_correct", y, probs, classes), hit, inputs=[pred, *eq_rows])
    return conf, pred, correct


@dataclass(frozen=True, kw_only=True)
class TopLabelECE(ProbsMetric):
    y: str
    probs: Probs = checked(probs_field)
    classes: tuple[Label, ...]
    n_bins: int = 10
    strategy: Strategy = "uniform"
    weighted: bool = False
    weights: str | None = None
    counts: str | None = None
    default_name = "top_label_ece"
    mergeable_alternative = "ece / mce with strategy='uniform' on the top-label score"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        conf, pred, correct = _top_label_rows(q, self.y, self.probs, self.classes)
        prec = probs_precision(q, self.probs)
        w = q.weighting(self.weights, counts=self.counts)
        t = _binned(q, correct, conf, self.n_bins, self.strategy, sub=pred, precision=prec, w=w)
        if self.weighted:
            return {"": ratio(t.col("ad"), w.total)}
        return {"": ratio(t.col("ecej"), t.col("cnt"))}


@renamed(num_bins="n_bins")
def top_label_ece(
    y: Column,
    probs: Column | Sequence[Column],
    *,
    classes: Sequence[Label] | None = None,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
    weighted: bool = False,
    weights: Column | None = None,
    counts: Column | None = None,
) -> TopLabelECE:
    """Top-label expected calibration error (Gupta and Ramdas 2021).

    Per row, the predicted label ``c`` is the class of the largest probability
    column (ties go to the first column) and the confidence ``h`` is that
    probability.  For each predicted label ``j``, ``ECE_j`` is the ECE of
    ``1[y = j]`` against ``h`` over the rows predicting ``j`` (bins as in
    :func:`ece`, built within those rows).  The result is the unweighted mean
    of ``ECE_j`` over the labels that are predicted at least once (the
    reference's definition), or with ``weighted=True`` the mean weighted by
    the number of rows predicting each label.

    Parameters
    ----------
    y : Column
        Label column; every value must be one of ``classes`` (missing or
        unknown labels are an error).
    probs : list of Column or Column
        One probability column per class (or a list column of them, with
        ``classes=``), each within ``[0, 1]``.  Rows need
        not sum to 1: only the maximum and its position are used (nothing is
        renormalised or checked).
    classes : list of int or str, optional
        The labels of the probability columns, in order; default
        ``0, 1, ..., K-1``.
    n_bins, strategy
        As in :func:`ece`.
    weighted : bool, default False
        Weight each label's ECE by its number of rows (by its total weight
        with ``weights=``).
    weights : Column, optional
        Column of non-negative row weights; bins weigh their rows as in
        :func:`ece`.  Labels predicted only by rows of weight 0 do not count.
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    TopLabelECE
        A metric object.  ``df.conformal.top_label_ece(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``top_label_ece`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": ["a", "b", "b", "a"], "pa": [0.7, 0.4, 0.2, 0.6],
    ...                    "pb": [0.3, 0.6, 0.8, 0.4]})
    >>> round(df.conformal.top_label_ece("y", ["pa", "pb"], classes=["a", "b"], n_bins=5), 6)
    0.325
    """
    cols, labels = check_probs(probs, classes)
    return TopLabelECE(
        y=role(y),
        probs=cols,
        classes=labels,
        n_bins=n_bins,
        strategy=strategy,
        weighted=weighted,
        weights=role(weights),
        counts=role(counts),
    )


@dataclass(frozen=True, kw_only=True)
class _ClassProbabilities(ProbsMetric):
    """A binned calibration error of class probabilities (one column per class, or a list column)."""

    y: str
    probs: Probs = checked(probs_field)
    classes: tuple[Label, ...]
    n_bins: int = 10
    strategy: Strategy = "uniform"
    weights: str | None = None
    counts: str | None = None


@dataclass(frozen=True, kw_only=True)
class ConfidenceECE(_ClassProbabilities):
    default_name = "confidence_ece"
    mergeable_alternative = "confidence_ece with strategy='uniform' and n_bins <= 32"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        conf, _, correct = _top_label_rows(q, self.y, self.probs, self.classes)
        prec, w = probs_precision(q, self.probs), q.weighting(self.weights, counts=self.counts)
        ad, _ = bin_errors(q, correct, conf, self.n_bins, self.strategy, precision=prec, w=w)
        return {"": ratio(ad, w.total)}


def confidence_ece(
    y: Column,
    probs: Column | Sequence[Column],
    *,
    classes: Sequence[Label] | None = None,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
    weights: Column | None = None,
    counts: Column | None = None,
) -> ConfidenceECE:
    """Confidence ECE of a classifier: the "ECE" of torchmetrics, netcal and Guo et al. (2017).

    Per row, the confidence ``h`` is the largest probability and the
    prediction is its class (ties go to the first column); the row is
    correct when the prediction is the label.  The result is :func:`ece` of
    the correct indicator against ``h``, all rows binned together:
    ``sum_m |B_m| / n * |accuracy(B_m) - mean confidence(B_m)|``.
    :func:`top_label_ece` bins each predicted class apart and averages over
    classes; :func:`classwise_ece` scores every class's probability (see
    docs/calibration.md, "Multiclass ECE: which one").

    Equal to torchmetrics' ``MulticlassCalibrationError(norm="l1")`` and
    netcal's ``ECE`` with the same number of equal-width bins, up to their
    float32 arithmetic; a confidence of exactly 1 is in the last bin here
    and in netcal, in a bin of its own in torchmetrics (docs/differences.md).

    Parameters
    ----------
    y : Column
        Label column; every value must be one of ``classes`` (missing or
        unknown labels are an error).
    probs : list of Column or Column
        One probability column per class (or a list column of them, with
        ``classes=``), each within ``[0, 1]``; only the
        maximum and its position are used (nothing is renormalised).
    classes : list of int or str, optional
        The labels of the probability columns, in order; default
        ``0, 1, ..., K-1``.
    n_bins, strategy
        As in :func:`ece` (torchmetrics' default is 15 bins, netcal's 10).
    weights : Column, optional
        Column of non-negative row weights; bins weigh their rows as in
        :func:`ece`.
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    ConfidenceECE
        A metric object.  ``df.conformal.confidence_ece(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``confidence_ece`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": ["a", "b", "b", "a"], "pa": [0.7, 0.4, 0.2, 0.6],
    ...                    "pb": [0.3, 0.6, 0.8, 0.4]})
    >>> round(df.conformal.confidence_ece("y", ["pa", "pb"], classes=["a", "b"], n_bins=5), 6)
    0.325

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger (2017), "On calibration of
    modern neural networks", ICML.
    """
    cols, labels = check_probs(probs, classes)
    return ConfidenceECE(
        y=role(y),
        probs=cols,
        classes=labels,
        n_bins=n_bins,
        strategy=strategy,
        weights=role(weights),
        counts=role(counts),
    )


@dataclass(frozen=True, kw_only=True)
class ClasswiseECE(_ClassProbabilities):
    default_name = "classwise_ece"
    mergeable_alternative = "ece with strategy='uniform' per class column"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        eq = label_exprs(q, self.y, self.classes)
        eces = []
        p_rows = probability_rows(q, self.probs, self.classes)
        for i, (p, c, e) in enumerate(zip(p_rows, self.classes, eq)):
            y_k = q.row(("label_eq", self.y, c), e)
            prec = probs_precision(q, self.probs if isinstance(self.probs, str) else (self.probs[i],))
            ad, _ = bin_errors(q, y_k, p, self.n_bins, self.strategy, precision=prec, w=w)
            eces.append(ratio(ad, w.total))
        return {"": total(eces) / float(len(eces))}


@renamed(num_bins="n_bins")
def classwise_ece(
    y: Column,
    probs: Column | Sequence[Column],
    *,
    classes: Sequence[Label] | None = None,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
    weights: Column | None = None,
    counts: Column | None = None,
) -> ClasswiseECE:
    """Class-wise ECE: the mean over classes of the one-vs-rest ECE.

    ``(1/K) sum_k ECE(1[y = c_k], p_k)`` with bins as in :func:`ece` built on
    each probability column separately (Kull et al. 2019).  Arguments as in
    :func:`top_label_ece`.

    Parameters
    ----------
    y : Column
        Label column; every value must be one of ``classes``.
    probs : list of Column or Column
        One probability column per class (or a list column of them, with
        ``classes=``), each within ``[0, 1]``.
    classes : list of int or str, optional
        The labels of the probability columns, in order; default ``0, ..., K-1``.
    n_bins : int, default 10
        Number of bins ``M``.
    strategy : {"uniform", "quantile"}, default "uniform"
        How the bins are cut; see :func:`ece`.
    weights : Column, optional
        Column of non-negative row weights; bins weigh their rows as in
        :func:`ece`.
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    ClasswiseECE
        A metric object.  ``df.conformal.classwise_ece(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``classwise_ece`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [0, 1, 1, 0], "p0": [0.7, 0.4, 0.2, 0.6], "p1": [0.3, 0.6, 0.8, 0.4]})
    >>> round(df.conformal.classwise_ece("y", ["p0", "p1"], n_bins=5), 6)
    0.325

    References
    ----------
    M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and
    P. Flach (2019), "Beyond temperature scaling: obtaining well-calibrated
    multiclass probabilities with Dirichlet calibration", NeurIPS 32.
    """
    cols, labels = check_probs(probs, classes)
    return ClasswiseECE(
        y=role(y),
        probs=cols,
        classes=labels,
        n_bins=n_bins,
        strategy=strategy,
        weights=role(weights),
        counts=role(counts),
    )


# ---------------------------------------------------------------------------
# cumulative differences: Kolmogorov-Smirnov and Kuiper
# ---------------------------------------------------------------------------
def _null_or_inf(dev: nw.Expr, scale: nw.Expr) -> nw.Expr:
    """``dev / scale``; when ``scale == 0``: null if ``dev == 0`` else +inf."""
    degenerate = nw.when(dev > 0.0).then(nw.lit(_INF)).otherwise(nw.lit(None, F64))
    return nw.when(scale > 0.0).then(dev / scale).otherwise(degenerate)


def _cumulative_table(d: str, v: str, wanted: set[str]) -> engine.TableFn:
    """Per group: KS and Kuiper statistics and the p-values of the ``wanted`` tests.

    From the ordered cells (:meth:`~conformal_frames.engine.Query.cells`): the
    running total of ``sum(y - s)`` is ``n C_k`` at each distinct score.
    ``wanted`` is filled by the metrics' ``build`` before the query runs.
    """

    def build(cells: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        c, ca = running_total(d), ref.name("ca")
        cmax, cmin, camax, vsum = (ref.name(x) for x in ("cmax", "cmin", "camax", "vsum"))
        ks, ku, ks_p, ku_p = (ref.name(x) for x in ("ks", "ku", "ks_p", "ku_p"))
        cells = cells.with_columns(nw.col(c).abs().alias(ca))
        out = aggregate(
            cells,
            keys,
            [
                nw.col(c).max().alias(cmax),
                nw.col(c).min().alias(cmin),
                nw.col(ca).max().alias(camax),
                nw.col(v).sum().alias(vsum),
            ],
        )
        scale = nw.col(vsum).clip(lower_bound=0.0).sqrt()
        kuiper_dev = nw.col(cmax).clip(lower_bound=0.0) - nw.col(cmin).clip(upper_bound=0.0)
        out = out.with_columns(_null_or_inf(nw.col(camax), scale).alias(ks), _null_or_inf(kuiper_dev, scale).alias(ku))
        columns = []
        if "ks" in wanted:
            out = with_max_abs_sf(out, ks, ks_p, ref.name("t1_"))
            columns += [ks, ks_p]
        if "kuiper" in wanted:
            out = with_range_sf(out, ku, ku_p, ref.name("t2_"))
            columns += [ku, ku_p]
        return out.select(*keys, *columns)

    return build


def _cumulative(
    q: Query, y: str, score: str, test: str, weights: str | None = None, counts: str | None = None
) -> TableRef:
    y_row, s_row = binary_row(q, y), score_row(q, score)
    w = q.weighting(weights, counts=counts)
    d = q.row(("ydiff", y_row, s_row), nw.col(y_row) - nw.col(s_row), inputs=[y_row, s_row])
    v = q.row(("svar", s_row), nw.col(s_row) * (1.0 - nw.col(s_row)), inputs=[s_row])
    # weighted: sum w (y - s) and its variance sum w^2 s (1 - s)
    d, v = w.of(d), w.squared(v)
    # one table per (label, score) shared by KS and Kuiper; each test adds
    # itself to the set of p-values the table computes
    key = ("cumulative", y_row, s_row) if w.row is None else ("cumulative", y_row, s_row, w.row)
    wanted: set[str] = q.shared(key, set)
    wanted.add(test)
    return q.cells(key, _cumulative_table(d, v, wanted), order=s_row, sums=(d, v), running=(d,))


@dataclass(frozen=True, kw_only=True)
class KSTest(Metric):
    y: str
    score: str
    weights: str | None = None
    counts: str | None = None
    default_name = "ks_test"
    kind = "test"
    result = KSTestResult

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        t = _cumulative(q, self.y, self.score, "ks", self.weights, self.counts)
        return {"": t.col("ks"), "pvalue": t.col("ks_p")}


def ks_test(y: Column, score: Column, *, weights: Column | None = None, counts: Column | None = None) -> KSTest:
    """Kolmogorov-Smirnov calibration test (Arrieta-Ibarra et al. 2022).

    Sort the group by score; at each *distinct* score value ``s_(k)`` take the
    cumulative difference ``C_k = (1/n) sum_{i: s_i <= s_(k)} (y_i - s_i)``.
    With ``sigma = sqrt(sum_i s_i (1 - s_i)) / n``, the statistic is
    ``G = max_k |C_k| / sigma`` and the p-value ``P(sup_{[0,1]} |B| > G)`` for
    a standard Brownian motion ``B`` (:func:`brownian_max_abs_sf`; the law
    is asymptotic, ``n -> inf``).  Taking ``C`` at distinct scores makes ties
    independent of row order (the baseline breaks ties by random jitter).

    When ``sigma = 0`` (every score is 0 or 1) the statistic is null if every
    label equals its score (no information) and ``+inf`` with p-value 0
    otherwise (a label contradicting a certain score).

    A direct call on an eager frame returns a
    :class:`~conformal_frames.results.KSTestResult`; grouped or in ``evaluate``
    the columns are ``ks_test``, ``ks_test_pvalue`` and ``n``.

    Parameters
    ----------
    y : Column
        Label column, values 0/1 (integer, float or boolean); other values are
        an error, never remapped.
    score : Column
        Score column (predicted probability of ``y = 1``), within ``[0, 1]``.
    weights : Column, optional
        Column of non-negative row weights: the cumulative sums become
        ``sum_i w_i (y_i - s_i)`` and ``sigma^2 n^2`` their variance
        ``sum_i w_i^2 s_i (1 - s_i)`` under calibration (see the docs
        page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    KSTest
        A metric object.  ``df.conformal.ks_test(...)`` returns a
        :class:`~conformal_frames.results.KSTestResult` on an eager frame without
        ``by=``, otherwise a frame of the caller's type with the columns
        ``ks_test``, ``ks_test_pvalue``, ... and ``n``.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [1, 0, 1, 0, 1, 0], "s": [0.8, 0.3, 0.55, 0.5, 0.7, 0.1]})
    >>> res = df.conformal.ks_test("y", "s")
    >>> round(res.statistic, 4), round(res.pvalue, 4)
    (0.8329, 0.7849)

    References
    ----------
    I. Arrieta-Ibarra, P. Gujral, J. Tannen, M. Tygert and C. Xu (2022),
    "Metrics of calibration for probabilistic predictions", JMLR 23(351).
    M. Tygert (2022), arXiv:2202.00100.
    """
    return KSTest(y=role(y), score=role(score), weights=role(weights), counts=role(counts))


@dataclass(frozen=True, kw_only=True)
class KuiperTest(Metric):
    y: str
    score: str
    weights: str | None = None
    counts: str | None = None
    default_name = "kuiper_test"
    kind = "test"
    result = KuiperTestResult

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        t = _cumulative(q, self.y, self.score, "kuiper", self.weights, self.counts)
        return {"": t.col("ku"), "pvalue": t.col("ku_p")}


def kuiper_test(y: Column, score: Column, *, weights: Column | None = None, counts: Column | None = None) -> KuiperTest:
    """Kuiper calibration test (Arrieta-Ibarra et al. 2022).

    ``H = (max_k C_k - min_k C_k) / sigma`` with ``C_k`` and ``sigma`` as in
    :func:`ks_test` and ``C_0 = 0`` included in the max and min (the range
    of the path starts at 0, like the Brownian motion it is compared with;
    the baseline omits it, which can make its Kuiper statistic smaller than
    KS).  p-value ``P(range of B on [0,1] > H)`` (:func:`brownian_range_sf`).
    ``sigma = 0`` as in :func:`ks_test`.

    Parameters
    ----------
    y : Column
        Label column, values 0/1 (integer, float or boolean); other values are
        an error, never remapped.
    score : Column
        Score column (predicted probability of ``y = 1``), within ``[0, 1]``.
    weights : Column, optional
        Column of non-negative row weights, as in :func:`ks_test`.
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    KuiperTest
        A metric object.  ``df.conformal.kuiper_test(...)`` returns a
        :class:`~conformal_frames.results.KuiperTestResult` on an eager frame without
        ``by=``, otherwise a frame of the caller's type with the columns
        ``kuiper_test``, ``kuiper_test_pvalue``, ... and ``n``.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [1, 0, 1, 0, 1, 0], "s": [0.8, 0.3, 0.55, 0.5, 0.7, 0.1]})
    >>> res = df.conformal.kuiper_test("y", "s")
    >>> round(res.statistic, 4), round(res.pvalue, 4)
    (0.8792, 0.9812)
    """
    return KuiperTest(y=role(y), score=role(score), weights=role(weights), counts=role(counts))


@dataclass(frozen=True, kw_only=True)
class SpiegelhalterTest(Metric):
    y: str
    score: str
    alternative: str = checked(choice("less", "greater", "two-sided"), "two-sided")
    weights: str | None = None
    counts: str | None = None
    default_name = "spiegelhalter_test"
    kind = "test"
    result = SpiegelhalterTestResult

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        y, s = binary_row(q, self.y), score_row(q, self.score)
        ys, ss = nw.col(y), nw.col(s)
        num = q.row(("spieg_num", y, s), (ys - ss) * (1.0 - 2.0 * ss), inputs=[y, s])
        den = q.row(("spieg_den", s), (1.0 - 2.0 * ss) ** 2 * ss * (1.0 - ss), inputs=[s])
        w = q.weighting(self.weights, counts=self.counts)
        num, den = w.of(num), w.squared(den)  # weighted: sum w (...) over sqrt(sum w^2 (...))
        key = ("spiegelhalter", y, s) if w.row is None else ("spiegelhalter", y, s, w.row)
        a, b = nw.col(q.agg("sum", num)), nw.col(q.agg("sum", den))
        z_name = q.value(_null_or_inf(a, b.clip(lower_bound=0.0).sqrt()), key=key)
        z, tail = nw.col(z_name), q.finalize(key, abs_normal_tail(z_name)).col("q")
        # q = 1 - Phi(|Z|); greater: 1 - Phi(Z), less: Phi(Z), two-sided: 2 q
        upper = nw.when(z >= 0.0).then(tail).otherwise(1.0 - tail)
        lower = nw.when(z >= 0.0).then(1.0 - tail).otherwise(tail)
        two_sided = (2.0 * tail).clip(upper_bound=1.0)
        return {"": z, "pvalue": {"greater": upper, "less": lower, "two-sided": two_sided}[self.alternative]}


def spiegelhalter_test(
    y: Column,
    score: Column,
    *,
    alternative: Literal["less", "greater", "two-sided"] = "two-sided",
    weights: Column | None = None,
    counts: Column | None = None,
) -> SpiegelhalterTest:
    """Spiegelhalter's calibration test (z-test of the Brier score).

    ``Z = sum_i (y_i - s_i)(1 - 2 s_i) / sqrt(sum_i (1 - 2 s_i)^2 s_i (1 - s_i))``;
    ``pvalue = 2 (1 - Phi(|Z|))`` (two-sided, the default: small when the
    Brier score is larger *or smaller* than expected under calibration, so
    over-confident and under-confident scores are both detected).
    ``alternative="greater"`` gives ``1 - Phi(Z)``, the one-sided p-value
    of the reference (small only when the Brier score is too large) and
    ``"less"`` gives ``Phi(Z)``.  The normal tail is computed in
    the engine (lazy everywhere) to a relative 1e-13.  When the denominator
    is 0 (every score is 0, 1/2 or 1) ``Z`` is null if the numerator is 0
    and ``+inf`` (p-values 0) otherwise.

    Parameters
    ----------
    y : Column
        Label column, values 0/1 (integer, float or boolean); other values are
        an error, never remapped.
    score : Column
        Score column (predicted probability of ``y = 1``), within ``[0, 1]``.
    alternative : {"two-sided", "greater", "less"}, default "two-sided"
        The alternative hypothesis, as in scipy: ``Z`` differs from 0,
        ``Z > 0`` (the reference's one-sided test) or ``Z < 0``.
    weights : Column, optional
        Column of non-negative row weights: ``Z = sum_i w_i (y_i - s_i)(1 - 2 s_i)
        / sqrt(sum_i w_i^2 (1 - 2 s_i)^2 s_i (1 - s_i))`` (see the docs
        page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    SpiegelhalterTest
        A metric object.  ``df.conformal.spiegelhalter_test(...)`` returns a
        :class:`~conformal_frames.results.SpiegelhalterTestResult` on an eager frame without
        ``by=``, otherwise a frame of the caller's type with the columns
        ``spiegelhalter_test``, ``spiegelhalter_test_pvalue``, ... and ``n``.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [1, 0, 1, 0, 1, 0], "s": [0.8, 0.3, 0.5, 0.5, 0.7, 0.1]})
    >>> round(df.conformal.spiegelhalter_test("y", "s").pvalue, 4)
    0.3028
    >>> round(df.conformal.spiegelhalter_test("y", "s", alternative="greater").pvalue, 4)
    0.8486

    References
    ----------
    D. J. Spiegelhalter (1986), "Probabilistic prediction in patient
    management and clinical trials", Statistics in Medicine 5(5), 421-433.
    """
    return SpiegelhalterTest(
        y=role(y), score=role(score), alternative=alternative, weights=role(weights), counts=role(counts)
    )


# ---------------------------------------------------------------------------
# cumulative differences as a frame
# ---------------------------------------------------------------------------
def _difference_cells(
    rows: nw.LazyFrame, keys: list[str], weighted: bool, names: tuple[str, ...], *, counted: bool = False
) -> nw.LazyFrame:
    """Per (group, distinct score): rows, cumulative (weighted) difference and the group's (weighted) total.

    ``rows`` has the columns ``names`` (score, difference) and, ``weighted``,
    the weight column ``__cf_w``; ``counted``, the counts ``__cf_k`` (``n`` sums them).
    """
    scol, dcol, cnt, dsum, n_total = names
    size = cnt
    if weighted:
        size = "__cf_w"
        rows = rows.filter(nw.col(size) > 0.0).with_columns(nw.col(dcol) * nw.col(size))
    rows = rows.with_columns((nw.col("__cf_k") if counted else nw.lit(1.0)).alias(cnt))
    cells = ordered_cells(rows, keys, scol, list(dict.fromkeys([cnt, dcol, size])), running=[dcol])
    return cells.with_columns(
        nw.col(cnt).cast(nw.Int64),
        nw.col(running_total(dcol)).alias(dsum),
        over(nw.col(size).sum(), keys).alias(n_total),
    )


@engine.takes_roles("y", "score", "weights", "counts")
def cumulative_differences(
    frame: Any,
    y: Column,
    score: Column,
    *,
    weights: Column | None = None,
    counts: Column | None = None,
    by: Column | Sequence[Column] | None = None,
    invalid: InvalidPolicy | None = None,
) -> Any:
    """Cumulative differences ``C_k`` at each distinct score, per group.

    ``C_k = (1/n) sum_{i: s_i <= s_(k)} (y_i - s_i)`` where ``s_(k)`` is the
    ``k``-th smallest distinct score of the group and ``n`` its row count:
    the path behind :func:`ks_test` and :func:`kuiper_test` (plot it against
    the score, or against ``n`` cumulated, to see where miscalibration
    sits).

    Returns a frame of the caller's type (eager in, eager out; lazy in, lazy
    out) with the group keys, the score column (distinct values, ascending),
    ``n`` (rows at that score) and ``cumulative_difference``; sorted by
    keys and score.  Input validation as for the tests, with the invalid-row
    policy ``invalid=`` of :func:`conformal_frames.evaluate`: ``"raise"``
    (eager default) raises, ``"null"`` (lazy default) gives the groups with
    invalid rows a null ``cumulative_difference``, ``"drop"`` leaves the
    invalid rows out.

    Parameters
    ----------
    frame
        Any frame narwhals supports (eager or lazy).
    y : Column
        Label column, values 0/1 (integer, float or boolean); other values are
        an error, never remapped.
    score : Column
        Score column (predicted probability of ``y = 1``), within ``[0, 1]``.
    weights : Column, optional
        Column of non-negative row weights: ``C_k = sum_{i: s_i <= s_(k)}
        w_i (y_i - s_i) / sum_i w_i``; rows of weight 0 are left out and ``n``
        counts the rows of positive weight at each score (see the docs
        page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").
    by : Column or list of Column, optional
        Group columns.

    Returns
    -------
    frame
        A frame of the caller's type: the group keys, the score column
        (distinct values, ascending), ``n`` and ``cumulative_difference``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> df = pl.DataFrame({"y": [1.0, 0.0, 1.0, 0.0], "s": [0.5, 0.5, 0.25, 0.75]})
    >>> cf.cumulative_differences(df, "y", "s")
    shape: (3, 3)
    ┌──────┬─────┬───────────────────────┐
    │ s    ┆ n   ┆ cumulative_difference │
    │ ---  ┆ --- ┆ ---                   │
    │ f64  ┆ i64 ┆ f64                   │
    ╞══════╪═════╪═══════════════════════╡
    │ 0.25 ┆ 1   ┆ 0.1875                │
    │ 0.5  ┆ 2   ┆ 0.1875                │
    │ 0.75 ┆ 1   ┆ 0.0                   │
    └──────┴─────┴───────────────────────┘
    """
    # the roles arrive as column names: engine.takes_roles resolves expressions first
    y = cast(str, y)
    score = cast(str, score)
    weights = cast("str | None", weights)
    counts = cast("str | None", counts)
    by = cast("str | Sequence[str] | None", by)
    lf, eager = engine.to_lazy(frame)
    keys = engine.as_keys(by)
    if score in keys or y in keys:
        msg = "the label and score columns cannot be group keys (by=)"
        raise ValueError(msg)
    policy = engine.policy(invalid, eager)
    lf, validity = binary_inputs(lf, y, score, keys, weights=weights, counts=counts).apply_policy(
        lf, policy
    )  # "raise": raises here
    ycol, scol, dcol, cnt, dsum, n_total = "__cf_y", "__cf_s", "__cf_d", "n", "__cf_dsum", "__cf_total"
    y_expr = nw.col(y).cast(F64)
    factors = [nw.col(c).cast(F64) for c in (weights, counts) if c is not None]
    wcols = [(factors[0] if len(factors) == 1 else factors[0] * factors[1]).alias("__cf_w")] if factors else []
    wcols += [nw.col(counts).cast(F64).alias("__cf_k")] if counts is not None else []
    rows = lf.select(*keys, y_expr.alias(ycol), nw.col(score).cast(F64).alias(scol), *wcols)
    rows = rows.with_columns((nw.col(ycol) - nw.col(scol)).alias(dcol))
    names = (scol, dcol, cnt, dsum, n_total)
    cells = _difference_cells(rows, keys, bool(factors), names, counted=counts is not None)
    value = (nw.col(dsum) / nw.col(n_total)).alias("cumulative_difference")
    if policy != "null":
        out = cells.select(*keys, nw.col(scol).alias(score), cnt, value).sort(*keys, score)
        return nw.to_native(nw.maybe_reset_index(out.collect()) if eager else out)
    assert validity is not None
    cells, valid = engine.with_validity(cells, validity, keys)
    out = cells.select(
        *keys,
        nw.col(scol).alias(score),
        cnt,
        nw.when(valid).then(value).otherwise(nw.lit(None, F64)).alias("cumulative_difference"),
    )
    out = out.sort(*keys, score, nulls_last=True)
    return nw.to_native(nw.maybe_reset_index(out.collect()) if eager else out)
