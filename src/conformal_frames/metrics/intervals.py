"""Interval metrics (regression): coverage, width, SSC, Winkler, CWC, HSIC.

Notation: a group of ``n`` rows; ``covered_i = lo_i <= y_i <= hi_i`` (both
bounds inclusive); ``w_i = hi_i - lo_i``.  Rows with ``lo > hi`` are invalid
(an error on eager input, null metrics and ``n_invalid`` on lazy input): they
are never counted as covered nor as a negative width.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._renames import renamed
from conformal_frames._roles import Column, as_role, role, roles
from conformal_frames._validate import check_columns, checked
from conformal_frames.engine import (
    GroupFn,
    Metric,
    Query,
    TableFn,
    TableRef,
    aggregate,
    indicator,
    no_weights,
    ordered_cells,
    over,
    running_total,
    sort_result,
    stack,
    total,
)
from conformal_frames.inputs.intervals import (
    Columns,
    check_outputs,
    covered_row,
    interval_bounds,
    interval_outputs,
    one_output,
    output_covered_rows,
    output_width_rows,
    width_row,
)
from conformal_frames.inputs.levels import level_row
from conformal_frames.numerics.gauss import grouped_gauss_form
from conformal_frames.numerics.stats import min_of, proportion, ratio, weighted_cut, wilson_interval

__all__ = ["coverage", "cwc", "hsic", "path_coverage", "ssc", "ssc_score", "width", "winkler"]
METHODS = list(__all__)


# ---------------------------------------------------------------------------
# coverage and width
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Coverage(Metric):
    y: Columns = checked(check_outputs)
    lo: Columns = checked(check_outputs)
    hi: Columns = checked(check_outputs)
    ci_level: float = 0.95
    weights: str | None = None
    counts: str | None = None
    default_name = "coverage"

    def __post_init__(self) -> None:
        super().__post_init__()
        interval_outputs("coverage", y=self.y, lo=self.lo, hi=self.hi)

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        out = proportion(w, covered_row(q, self.y, self.lo, self.hi), self.ci_level)
        if isinstance(self.y, tuple):  # several outputs: the coverage of each
            rows = output_covered_rows(q, self.y, self.lo, self.hi)
            out.update({f"output{k}": ratio(w.sum(r), w.total) for k, r in enumerate(rows)})
        return out


@renamed(ci="ci_level")
def coverage(
    y: Column | Sequence[Column],
    lo: Column | Sequence[Column],
    hi: Column | Sequence[Column],
    *,
    ci_level: float = 0.95,
    weights: Column | None = None,
    counts: Column | None = None,
) -> Coverage:
    """Empirical coverage of prediction intervals, with a Wilson interval.

    ``coverage = (1/n) * sum_i 1[lo_i <= y_i <= hi_i]`` (both bounds
    inclusive).  Grouped and ``evaluate`` output also carry
    ``coverage_ci_low`` / ``coverage_ci_high``: the Wilson score interval of
    the binomial proportion at confidence ``ci_level``.

    Several outputs (``y``, ``lo``, ``hi`` lists of columns, one per output,
    of the same length): ``coverage`` is the *joint* coverage, the share of
    rows where every output ``j`` has ``lo_ij <= y_ij <= hi_ij``, with its
    Wilson interval; ``coverage_output<j>`` (``j = 0, 1, ...``, the position
    in the lists) is the coverage of output ``j`` alone.  A missing value or
    ``lo > hi`` in any output makes the row invalid.  (The outputs are
    columns of one row; when they are rows of a forecast path, the same
    question is :func:`path_coverage`.)

    Parameters
    ----------
    y, lo, hi : Column or list of Column
        Columns of the observed value and the interval's lower / upper bound;
        lists of columns for several outputs (joint coverage).
    ci_level : float, default 0.95
        Confidence level of the Wilson interval, in (0, 1).
    weights : Column, optional
        Column of non-negative row weights: the weighted proportion
        ``sum_i w_i 1[...] / sum_i w_i``, its Wilson interval at Kish's
        effective sample size, and an extra output ``coverage_n_eff``
        (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    Coverage
        A metric object; evaluate it with ``df.conformal.coverage(...)``,
        ``df.conformal.evaluate(...)`` or :func:`conformal_frames.evaluate`.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames as cf  # registers .conformal
    >>> df = pd.DataFrame({"y": [5, 7.5, 9.5, 10.5, 12.5],
    ...                    "lo": [4, 6, 9, 8.5, 10.5], "hi": [6, 9, 10, 12.5, 12]})
    >>> df.conformal.coverage("y", "lo", "hi")
    0.8

    Two outputs: a row is covered when both are.

    >>> df["y2"], df["lo2"], df["hi2"] = [0.0, 1, 2, 3, 4], [0.0, 0, 0, 0, 0], [1.0, 1, 1, 5, 5]
    >>> out = cf.evaluate(df, cf.coverage(["y", "y2"], ["lo", "lo2"], ["hi", "hi2"]))
    >>> out[["coverage", "coverage_output0", "coverage_output1"]].round(2).values.tolist()
    [[0.6, 0.8, 0.8]]

    References
    ----------
    E. B. Wilson (1927), "Probable inference, the law of succession, and
    statistical inference", JASA 22(158), 209-212.
    """
    return Coverage(
        y=roles(y), lo=roles(lo), hi=roles(hi), ci_level=ci_level, weights=role(weights), counts=role(counts)
    )


@dataclass(frozen=True, kw_only=True)
class Width(Metric):
    lo: Columns = checked(check_outputs)
    hi: Columns = checked(check_outputs)
    weights: str | None = None
    counts: str | None = None
    default_name = "width"

    def __post_init__(self) -> None:
        super().__post_init__()
        interval_outputs("width", lo=self.lo, hi=self.hi)

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        out: dict[str, nw.Expr | None] = {"": ratio(w.sum(width_row(q, self.lo, self.hi)), w.total)}
        if isinstance(self.lo, tuple):  # several outputs: the mean width of each
            rows = output_width_rows(q, self.lo, self.hi)
            out.update({f"output{k}": ratio(w.sum(r), w.total) for k, r in enumerate(rows)})
        return out


def width(
    lo: Column | Sequence[Column],
    hi: Column | Sequence[Column],
    *,
    weights: Column | None = None,
    counts: Column | None = None,
) -> Width:
    """Mean interval width ``(1/n) * sum_i (hi_i - lo_i)``.

    Rows with ``lo > hi`` are invalid (the numpy baseline takes ``|hi - lo|``
    and so silently accepts crossed bounds).

    Several outputs (``lo``, ``hi`` lists of columns, one per output):
    ``width`` is the mean volume of the prediction box, ``(1/n) sum_i
    prod_j (hi_ij - lo_ij)`` (one output: its width), and
    ``width_output<j>`` the mean width of output ``j`` (its position in the
    lists).

    Parameters
    ----------
    lo, hi : Column or list of Column
        Columns of the interval's lower and upper bound; lists of columns for
        several outputs (the box volume).
    weights : Column, optional
        Column of non-negative row weights: the mean becomes the weighted
        mean ``sum_i w_i x_i / sum_i w_i`` (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    Width
        A metric object.  ``df.conformal.width(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``width`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"lo": [4.0, 9, 8.5, 7, 5], "hi": [6.0, 10, 12.5, 8.5, 6.5]})
    >>> df.conformal.width("lo", "hi")
    2.0
    >>> df.conformal.width(["lo", "lo"], ["hi", "hi"])  # two outputs: the mean of the squared widths
    5.1
    """
    return Width(lo=roles(lo), hi=roles(hi), weights=role(weights), counts=role(counts))


# ---------------------------------------------------------------------------
# size-stratified coverage
# ---------------------------------------------------------------------------
#: widths closer than this fraction of the group's largest width are tied (SSC)
SSC_TIE_RTOL = 1e-9


def _bin_by_starts(cells: nw.LazyFrame, keys: list[str], ref: TableRef, close: nw.Expr, n_bins: int) -> nw.LazyFrame:
    """The bin of each distinct width (unweighted SSC), without a running maximum.

    A tie group goes to the bin of its start position ``before`` (rows of
    smaller width).  Bin ``k`` of :func:`~conformal_frames.numerics.stats.equal_count_bin` starts at the position
    ``c_k = k * floor(n / M) + min(k, n % M)`` (the cut points of
    :func:`~conformal_frames.numerics.stats.weighted_cut`); ``first<k>`` is the least
    group start at or after ``c_k``.  As ``before`` (a row count) strictly
    increases with the width, a width is in bin ``k`` or above exactly when
    its ``before`` reaches ``first<k>``: the bins of the tie groups' starts,
    with per-group minima instead of a running maximum (an ordered window).
    """
    before, n, b, sb = ref.name("before"), ref.name("n"), ref.name("bin"), ref.name("startpos")
    firsts = [ref.name(f"first{k}") for k in range(1, n_bins)]
    if not firsts:
        return cells.with_columns(nw.lit(0.0).alias(b))
    m = float(n_bins)
    size = (nw.col(n) / m).floor()
    extra = nw.col(n) - size * m
    # the positions of the group starts (null elsewhere), once as a column
    cells = cells.with_columns(nw.when(close).then(nw.lit(None, nw.Float64)).otherwise(nw.col(before)).alias(sb))
    start = nw.col(sb)
    cells = cells.with_columns(
        *[
            over(nw.when(start >= size * float(k) + extra.clip(upper_bound=float(k))).then(start).min(), keys).alias(f)
            for k, f in enumerate(firsts, 1)
        ]
    )
    reached = [indicator(nw.col(before) >= nw.col(f)) for f in firsts]
    return cells.with_columns(total(reached).alias(b))


def _ssc_table(
    width_col: str, covered_col: str, n_bins: int, weight: str | None = None, counts: str | None = None
) -> TableFn:
    """Sub-query: per group, rows and covered rows of each equal-count width bin.

    Distinct widths are sorted; a distinct width starts a new tie group unless
    it exceeds the previous distinct width by at most ``SSC_TIE_RTOL`` times
    the group's largest width (a chain of such close widths is one tie group).
    Tie groups are never split: sorted by width, a tie group occupying
    positions ``[start, end)`` goes whole to the bin that holds position
    ``start`` when ``n`` positions are cut into ``n_bins`` runs whose sizes
    differ by at most one (the first ``n % n_bins`` runs are one longer).  The
    counts depend neither on row order nor on the backend nor on the coverage
    of the rows.  With ``weight`` (a row column; ``covered_col`` is then the
    weighted row ``w c``), positions are weights
    (:func:`~conformal_frames.numerics.stats.weighted_cut`), rows of weight 0 take no
    part, ``n<k>`` is the bin's rows (the sum of their ``counts``, if any) and
    ``w<k>`` its weight.
    """

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        cnt, hit, prev, scale, before, start, n, b = (
            ref.name(x) for x in ("cnt", "hit", "prev", "scale", "before", "start", "n", "bin")
        )
        rc = ref.name("rc")
        w = nw.col(width_col)
        rows = rows.with_columns((nw.lit(1.0) if counts is None else nw.col(counts)).alias(rc))
        if weight is not None:
            rows = rows.filter(nw.col(weight) > 0.0)
        # one row per distinct width (the only aggregation), then ordered windows
        size = (rc,) if weight is None else (weight, rc)
        cells = ordered_cells(rows, keys, width_col, (*size, covered_col), running=size[:1])
        cells = cells.rename({size[0]: cnt, covered_col: hit})
        cells = cells.with_columns(
            over(w.shift(1), keys, order_by=width_col).alias(prev),
            over(w.abs().max(), keys).alias(scale),
            (nw.col(running_total(size[0])) - nw.col(cnt)).alias(before),
            over(nw.col(cnt).sum(), keys).alias(n),
        )
        # a tie group starts where the gap to the previous width is not close
        close = (w - nw.col(prev)) <= SSC_TIE_RTOL * nw.col(scale)
        if weight is None:
            cells = _bin_by_starts(cells, keys, ref, close, n_bins)
        else:
            # its rows before are those before its first width (the latest start)
            cells = cells.with_columns(nw.when(close).then(nw.lit(0.0)).otherwise(nw.col(before)).alias(start))
            cells = cells.with_columns(over(nw.col(start).cum_max(), keys, order_by=width_col).alias(start))
            cells = cells.with_columns(weighted_cut(nw.col(start), nw.col(n), n_bins).alias(b))
        stats = {"n": cnt, "k": hit} if weight is None else {"n": rc, "k": hit, "w": cnt}
        parts = []
        for k in range(n_bins):
            # when/then, not a Boolean cast: the same values, cheaper on polars
            mine = nw.col(b) == float(k)
            parts += [nw.when(mine).then(nw.col(c)).otherwise(0.0).alias(ref.name(f"{s}{k}")) for s, c in stats.items()]
        cells = cells.with_columns(*parts)
        sums = [nw.col(ref.name(f"{s}{k}")).sum() for k in range(n_bins) for s in stats]
        return aggregate(cells, keys, sums)

    return build


def _ssc_bins(
    q: Query, y: str, lo: str, hi: str, n_bins: int, weights: str | None = None, counts: str | None = None
) -> list[tuple[nw.Expr, nw.Expr]]:
    """(coverage, rows) expressions of each width bin; coverage null when empty.

    With weights: the weighted coverage and the rows of positive weight.
    """
    w = width_row(q, lo, hi)
    c = covered_row(q, y, lo, hi)
    if weights is None and counts is None:
        t = q.table(("ssc", w, c, n_bins), _ssc_table(w, c, n_bins))
        return [(ratio(t.col(f"k{b}"), t.col(f"n{b}")), t.col(f"n{b}")) for b in range(n_bins)]
    wt = q.weighting(weights, counts=counts)
    assert wt.row is not None
    wc = wt.of(c)
    t = q.table(("ssc", w, wc, n_bins, wt.row), _ssc_table(w, wc, n_bins, wt.row, wt.counts))
    return [(ratio(t.col(f"k{b}"), t.col(f"w{b}")), t.col(f"n{b}")) for b in range(n_bins)]


@dataclass(frozen=True, kw_only=True)
class SSC(Metric):
    y: str = checked(one_output("ssc"))
    lo: str = checked(one_output("ssc"))
    hi: str = checked(one_output("ssc"))
    n_bins: int = 3
    weights: str | None = None
    counts: str | None = None
    default_name = "ssc"
    mergeable_alternative = "coverage by= a width band column you define (fixed edges)"
    kind = "table"
    long = True

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        out: dict[str, nw.Expr | None] = {}
        for b, (cov, rows) in enumerate(_ssc_bins(q, self.y, self.lo, self.hi, self.n_bins, self.weights, self.counts)):
            out[f"bin{b}"] = cov
            out[f"bin{b}_n"] = rows
        return out

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        name = self.output_name
        parts = [
            {
                "bin": nw.lit(b, nw.Int64),
                name: nw.col(f"{name}_bin{b}"),
                "n": nw.col(f"{name}_bin{b}_n").fill_null(0.0).cast(nw.Int64),
            }
            for b in range(self.n_bins)
        ]
        return sort_result(stack(frame, keys, parts).filter(nw.col("n") > 0), *keys, "bin")


@renamed(num_bins="n_bins")
def ssc(
    y: Column, lo: Column, hi: Column, *, n_bins: int = 3, weights: Column | None = None, counts: Column | None = None
) -> SSC:
    """Size-stratified coverage: coverage within equal-count bins of width.

    Rows are sorted by width ``w = hi - lo`` and split into ``n_bins`` bins
    whose sizes differ by at most one (the first ``n % n_bins`` bins get one
    extra row); the coverage of each bin is reported.  Ties in width are
    broken by the coverage indicator, which makes the result independent of
    row order and identical on every backend (rows tied on both are
    interchangeable).  Bins with no rows (``n < n_bins``) are absent.

    A direct call returns a long table: group keys, ``bin`` (0 = narrowest),
    the coverage column and ``n`` (rows in the bin).  Inside ``evaluate`` the
    bins are wide columns ``ssc_bin0``, ``ssc_bin0_n``, ...

    Parameters
    ----------
    y, lo, hi : Column
        Columns of the observed value and of the interval's lower / upper
        bound (numeric; rows with ``lo > hi`` are invalid).
    n_bins : int, default 3
        Number of equal-count width bins.
    weights : Column, optional
        Column of non-negative row weights: the bins cut the total weight
        (integer weights bin as repeated rows), each bin's coverage is
        weighted and its ``n`` counts rows of positive weight (see the
        docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    SSC
        A metric object.  ``df.conformal.ssc(...)`` returns the long
        table described above, a frame of the caller's type (lazy in, lazy
        out); inside :func:`~conformal_frames.evaluate` the wide columns.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [5.0, 7.5, 9.5], "lo": [4.0, 6.0, 9.0], "hi": [6.0, 9.0, 10.0]})
    >>> df.conformal.ssc("y", "lo", "hi", n_bins=2)
    shape: (2, 3)
    ┌─────┬─────┬─────┐
    │ bin ┆ ssc ┆ n   │
    │ --- ┆ --- ┆ --- │
    │ i64 ┆ f64 ┆ i64 │
    ╞═════╪═════╪═════╡
    │ 0   ┆ 1.0 ┆ 2   │
    │ 1   ┆ 1.0 ┆ 1   │
    └─────┴─────┴─────┘

    References
    ----------
    A. N. Angelopoulos and S. Bates (2021), "A gentle introduction to conformal
    prediction and distribution-free uncertainty quantification",
    arXiv:2107.07511.
    """
    return SSC(y=role(y), lo=role(lo), hi=role(hi), n_bins=n_bins, weights=role(weights), counts=role(counts))


@dataclass(frozen=True, kw_only=True)
class SSCScore(Metric):
    y: str = checked(one_output("ssc_score"))
    lo: str = checked(one_output("ssc_score"))
    hi: str = checked(one_output("ssc_score"))
    n_bins: int = 3
    weights: str | None = None
    counts: str | None = None
    default_name = "ssc_score"
    mergeable_alternative = "coverage by= a width band column you define (fixed edges)"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        covs = [cov for cov, _ in _ssc_bins(q, self.y, self.lo, self.hi, self.n_bins, self.weights, self.counts)]
        return {"": min_of(*covs)}


@renamed(num_bins="n_bins")
def ssc_score(
    y: Column, lo: Column, hi: Column, *, n_bins: int = 3, weights: Column | None = None, counts: Column | None = None
) -> SSCScore:
    """Minimum size-stratified coverage over the non-empty width bins.

    See :func:`ssc` for the bins.

    Parameters
    ----------
    y, lo, hi : Column
        Columns of the observed value and of the interval's lower / upper
        bound (numeric; rows with ``lo > hi`` are invalid).
    n_bins : int, default 3
        Number of equal-count width bins.
    weights : Column, optional
        Column of non-negative row weights: the bins cut the total weight
        (integer weights bin as repeated rows), each bin's coverage is
        weighted and its ``n`` counts rows of positive weight (see the
        docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    SSCScore
        A metric object.  ``df.conformal.ssc_score(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``ssc_score`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [1.0, 2, 3, 4], "lo": [0.0, 2.5, 2, 3], "hi": [2.0, 3, 5, 5]})
    >>> # widths 0.5 (missed), 2, 2 (tied: one stratum), 3: bins {0.5, 2, 2} and {3}
    >>> round(df.conformal.ssc_score("y", "lo", "hi", n_bins=2), 4)
    0.6667
    """
    return SSCScore(y=role(y), lo=role(lo), hi=role(hi), n_bins=n_bins, weights=role(weights), counts=role(counts))


# ---------------------------------------------------------------------------
# Winkler and CWC
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Winkler(Metric):
    y: str = checked(one_output("winkler"))
    lo: str = checked(one_output("winkler"))
    hi: str = checked(one_output("winkler"))
    confidence_level: float | str
    weights: str | None = None
    counts: str | None = None
    default_name = "winkler"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        lo_e, hi_e = interval_bounds(q, self.lo, self.hi)
        y_e = q.number(self.y)
        miss = (lo_e - y_e).clip(lower_bound=0.0) + (y_e - hi_e).clip(lower_bound=0.0)
        # a level column (a by= key, checked by level_row) enters the same arithmetic per row
        level = self.confidence_level
        alpha = 1.0 - nw.col(str(level)).cast(nw.Float64) if level_row(q, level) else 1.0 - float(level)
        score = q.row(("winkler", self.y, self.lo, self.hi, level), (hi_e - lo_e) + (2.0 / alpha) * miss)
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(w.sum(score), w.total)}


def winkler(
    y: Column,
    lo: Column,
    hi: Column,
    *,
    confidence_level: float | str,
    weights: Column | None = None,
    counts: Column | None = None,
) -> Winkler:
    """Mean Winkler interval score (lower is better).

    ``(1/n) sum_i [w_i + (2/alpha) ((lo_i - y_i)^+ + (y_i - hi_i)^+)]`` with
    ``alpha = 1 - confidence_level``.

    Parameters
    ----------
    y, lo, hi : Column
        Columns of the observed value and of the interval's lower / upper
        bound (numeric; rows with ``lo > hi`` are invalid).
    confidence_level : float or str
        The nominal coverage ``1 - alpha`` of the intervals, in (0, 1); or the
        name of a ``by=`` column holding each group's level.
    weights : Column, optional
        Column of non-negative row weights: the mean becomes the weighted
        mean ``sum_i w_i x_i / sum_i w_i`` (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    Winkler
        A metric object.  ``df.conformal.winkler(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``winkler`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [1.0, 3.0], "lo": [0.0, 0.0], "hi": [2.0, 2.0]})
    >>> df.conformal.winkler("y", "lo", "hi", confidence_level=0.8)
    7.0

    References
    ----------
    R. L. Winkler (1972), "A decision-theoretic approach to interval
    estimation", JASA 67, 187-191; T. Gneiting and A. E. Raftery (2007),
    "Strictly proper scoring rules, prediction, and estimation", JASA 102,
    359-378 (section 6.2).
    """
    return Winkler(
        y=role(y),
        lo=role(lo),
        hi=role(hi),
        confidence_level=confidence_level,
        weights=role(weights),
        counts=role(counts),
    )


@dataclass(frozen=True, kw_only=True)
class CWC(Metric):
    y: str = checked(one_output("cwc"))
    lo: str = checked(one_output("cwc"))
    hi: str = checked(one_output("cwc"))
    eta: float
    confidence_level: float | str
    weights: str | None = None
    counts: str | None = None
    default_name = "cwc"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        cov = ratio(w.sum(covered_row(q, self.y, self.lo, self.hi)), w.total)
        mean_w = ratio(w.sum(width_row(q, self.lo, self.hi)), w.total)
        y_row = q.row(("value", self.y), q.number(self.y))
        span = w.max(y_row) - w.min(y_row)
        level = level_row(q, self.confidence_level)
        target = q.min(level) if level is not None else float(self.confidence_level)  # constant per group
        penalty = (-self.eta * (cov - target) ** 2).exp()
        return {"": (1.0 - ratio(mean_w, span)) * penalty}


def cwc(
    y: Column,
    lo: Column,
    hi: Column,
    *,
    eta: float,
    confidence_level: float | str,
    weights: Column | None = None,
    counts: Column | None = None,
) -> CWC:
    """Coverage width-based criterion (higher is better).

    ``(1 - mean(w) / (max(y) - min(y))) * exp(-eta * (coverage - confidence_level)^2)``.
    Null when all ``y`` of the group are equal (no reference range).

    Parameters
    ----------
    y, lo, hi : Column
        Columns of the observed value and of the interval's lower / upper
        bound (numeric; rows with ``lo > hi`` are invalid).
    eta : float
        Penalty weight of the coverage deviation (finite).
    confidence_level : float or str
        The nominal coverage ``1 - alpha`` of the intervals, in (0, 1); or the
        name of a ``by=`` column holding each group's level.
    weights : Column, optional
        Column of non-negative row weights: coverage and mean width are
        weighted means, the range of ``y`` is taken over the rows of positive
        weight (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    CWC
        A metric object.  ``df.conformal.cwc(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``cwc`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [5, 7.5, 9.5, 10.5, 12.5],
    ...                    "lo": [4, 6, 9, 8.5, 10.5], "hi": [6, 9, 10, 12.5, 12]})
    >>> round(df.conformal.cwc("y", "lo", "hi", eta=0.01, confidence_level=0.9), 2)
    0.69
    """
    return CWC(
        y=role(y),
        lo=role(lo),
        hi=role(hi),
        eta=eta,
        confidence_level=confidence_level,
        weights=role(weights),
        counts=role(counts),
    )


# ---------------------------------------------------------------------------
# HSIC
# ---------------------------------------------------------------------------
def _hsic_groups(k0: float, k1: float) -> GroupFn:
    def fn(group: np.ndarray, n_groups: int, data: dict[str, np.ndarray]) -> np.ndarray:
        (w_col, c_col) = data.keys()
        w, c = data[w_col], data[c_col]
        n = np.bincount(group, minlength=n_groups).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.bincount(group, c, minlength=n_groups) / n
            # widths relative to the group's smallest: exact differences even
            # for huge widths (the box expansion works with positions)
            low = np.full(n_groups, np.inf)
            np.minimum.at(low, group, w)
            form = grouped_gauss_form(w - low[group], c - p[group], group, n_groups, k0)
            value = np.sqrt(np.maximum(2.0 * -math.expm1(-1.0 / k1) * form, 0.0)) / (n - 1)
        return np.where(n > 1, value, np.nan)

    return fn


@dataclass(frozen=True, kw_only=True)
class HSIC(Metric):
    y: str = checked(one_output("hsic"))
    lo: str = checked(one_output("hsic"))
    hi: str = checked(one_output("hsic"))
    kernel_sizes: tuple[float, float] = (1.0, 1.0)
    default_name = "hsic"
    mergeable_alternative = "coverage and width"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = width_row(q, self.lo, self.hi)
        c = covered_row(q, self.y, self.lo, self.hi)
        q.per_group(
            self.output_name, [w, c], _hsic_groups(*self.kernel_sizes), what="hsic (needs all rows of each group)"
        )
        return {"": None}


@no_weights("hsic")
def hsic(y: Column, lo: Column, hi: Column, *, kernel_sizes: tuple[float, float] = (1.0, 1.0)) -> HSIC:
    """Hilbert-Schmidt independence criterion between coverage and width.

    ``sqrt(trace(L H K H)) / (n - 1)`` with ``K_ij = exp(-(w_i - w_j)^2 / k0)``,
    ``L_ij = exp(-(c_i - c_j)^2 / k1)`` on the coverage indicator ``c`` and
    ``H = I - 11^T / n``.  Since ``c`` is 0/1, ``trace(L H K H) =
    2 (1 - exp(-1/k1)) c~^T K c~`` with ``c~ = c - mean(c)``, a 1-D Gaussian
    quadratic form computed by a box expansion (:mod:`conformal_frames.numerics.gauss`)
    in O(n) memory, never an n x n matrix.  Null for groups of one row.

    HSIC needs all rows of a group at once: it collects the width and
    coverage columns per group.  On polars LazyFrames it stays lazy
    (``map_batches``); other lazy backends raise and ask to collect first.

    Parameters
    ----------
    y, lo, hi : Column
        Columns of the observed value and of the interval's lower / upper
        bound (numeric; rows with ``lo > hi`` are invalid).
    kernel_sizes : tuple of float, default (1.0, 1.0)
        Bandwidths ``(k0, k1)`` of the Gaussian kernels on width and coverage.

    Returns
    -------
    HSIC
        A metric object.  ``df.conformal.hsic(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``hsic`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [9.5, 10.5, 12.5], "lo": [9, 8.5, 10.5], "hi": [10.0, 12.5, 12.0]})
    >>> round(df.conformal.hsic("y", "lo", "hi"), 8)
    0.31787614

    References
    ----------
    S. Feldman, S. Bates and Y. Romano (2021), "Improving conditional coverage
    via orthogonal quantile regression", NeurIPS 34, 2060-2071.
    """
    return HSIC(y=role(y), lo=role(lo), hi=role(hi), kernel_sizes=kernel_sizes)


# ---------------------------------------------------------------------------
# whole-path coverage: a two-level aggregation (per path, then per group)
# ---------------------------------------------------------------------------
def _check_path(value: object, name: str) -> tuple[str, ...]:
    value = as_role(value)
    return check_columns([value] if isinstance(value, str) else value, name)


def _path_table(covered: str, path: list[str]) -> TableFn:
    """Per group: the paths (distinct ``path`` values), the covered ones, those of one row."""

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        low, size = ref.name("low"), ref.name("size")
        per_path = rows.group_by(*keys, *path).agg(nw.col(covered).min().alias(low), nw.len().alias(size))
        per_path = per_path.with_columns(
            nw.col(low).cast(nw.Float64), indicator(nw.col(size) == 1).alias(ref.name("single"))
        )
        aggs = [
            nw.col(low).sum().alias(ref.name("k")),
            nw.len().alias(ref.name("m")),
            nw.col(ref.name("single")).sum().alias(ref.name("single")),
        ]
        return aggregate(per_path, keys, aggs).with_columns(nw.col(ref.name("m")).cast(nw.Float64))

    return build


@dataclass(frozen=True, kw_only=True)
class PathCoverage(Metric):
    y: str = checked(one_output("path_coverage"))
    lo: str = checked(one_output("path_coverage"))
    hi: str = checked(one_output("path_coverage"))
    path: tuple[str, ...] = checked(_check_path)
    ci_level: float = 0.95
    default_name = "path_coverage"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        covered = covered_row(q, self.y, self.lo, self.hi)
        path = []
        for p in self.path:
            if p in q.keys:  # a group key is constant within the group: the path is the rest
                continue
            col = q.column(p)
            q.check(f"column {p!r} (path=) has missing values", col.is_null())
            path.append(q.row(("path", p), col))
        t = q.table(("path_coverage", covered, *path), _path_table(covered, path))
        k, m = t.col("k"), t.col("m")
        low, high = wilson_interval(q, t.name("k"), t.name("m"), self.ci_level)
        return {"": ratio(k, m), "ci_low": low, "ci_high": high, "n_paths": m, "n_single": t.col("single")}

    def output_dtypes(self, built: Mapping[str, nw.Expr | None]) -> dict[str, Any]:
        named = self.outputs(built)
        return {c: nw.Int64 for s, c in zip(built, named) if s in ("n_paths", "n_single")}


@no_weights("path_coverage", "it counts paths, not rows")
def path_coverage(
    y: Column, lo: Column, hi: Column, *, path: Column | Sequence[Column], ci_level: float = 0.95
) -> PathCoverage:
    """Share of forecast paths covered at every one of their rows, with a Wilson interval over paths.

    A *path* is the set of rows sharing the values of the ``path`` columns,
    e.g. ``path=["series", "cutoff"]``: every horizon of one series forecast
    at one cutoff.  The path is covered when ``lo <= y <= hi`` holds at each
    of its rows; ``path_coverage`` is the share of covered paths of the
    group, ``k / m``, with the Wilson interval of ``k`` successes in ``m``
    paths (paths are the independent units, not rows).  Pointwise bands of
    level ``c`` cover whole paths of ``H`` horizons far less often than ``c``
    (about ``c^H`` when the errors are independent).

    Extra outputs: ``path_coverage_n_paths`` (``m``) and
    ``path_coverage_n_single`` (paths of one row: their coverage is the
    pointwise one, e.g. when ``by=`` splits paths by horizon).  Path
    columns that are also ``by=`` keys are constant within a group; the path
    is the other columns (none: the group is one path).  Missing path values
    are invalid rows.  Computed lazily as a two-level aggregation (the
    minimum of the covered indicator per (group, path), then sums per
    group): a second aggregation over the rows, so :func:`~conformal_frames.summarize`
    cannot merge it.  When a path's outputs are columns of one row instead
    of rows, the same question is the joint coverage of :func:`coverage`
    with lists of columns.

    Parameters
    ----------
    y, lo, hi : Column
        Columns of the observed value and of the band's lower / upper bound.
    path : Column or list of Column
        Columns identifying one path (any dtype).
    ci_level : float, default 0.95
        Confidence level of the Wilson interval.

    Returns
    -------
    PathCoverage
        A metric object (outputs ``path_coverage``, ``path_coverage_ci_low``,
        ``path_coverage_ci_high``, ``path_coverage_n_paths``,
        ``path_coverage_n_single``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"s": ["a", "a", "b", "b"], "h": [1, 2, 1, 2],
    ...                    "y": [1.0, 2.0, 1.0, 5.0], "lo": [0.0] * 4, "hi": [3.0] * 4})
    >>> df.conformal.path_coverage("y", "lo", "hi", path="s")
    0.5
    """
    return PathCoverage(y=role(y), lo=role(lo), hi=role(hi), path=_check_path(path, "path"), ci_level=ci_level)
