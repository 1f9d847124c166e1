"""Binomial confidence intervals as expressions over aggregated columns."""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING

import narwhals.stable.v2 as nw

from conformal_frames._validate import check_probability

if TYPE_CHECKING:
    from conformal_frames.engine import Query, Weighting


def wilson_interval(q: Query, successes: str, n: str, confidence: float) -> tuple[nw.Expr, nw.Expr]:
    """Wilson score interval for a binomial proportion, as two expressions.

    ``(k + z^2/2) / (n + z^2) -/+ z / (n + z^2) * sqrt(k (n - k) / n + z^2 / 4)``
    with ``z`` the two-sided normal quantile of ``confidence``, ``k`` and
    ``n`` the aggregated columns ``successes`` and ``n``.  Null for n = 0.

    The centre, the half width and the estimate ``k / n`` are values of the
    query (:meth:`~conformal_frames.engine.Query.value`): the bounds reuse
    them, and inlined, SQL engines copy each into every branch of the clips
    and divisions (Spark's plan of a coverage grew to 14 KB).

    The bounds always contain the estimate: rounding can put ``center +
    half`` one ulp below 1 when ``k = n`` (and ``center - half`` above 0 when
    ``k = 0``), so each bound is widened to the estimate where it falls short
    (a change of at most a few ulps) and clipped to ``[0, 1]``.
    """
    from scipy.special import ndtri  # imported where used: scipy costs ~0.2 s at import

    z = float(ndtri(0.5 + check_probability(confidence, "ci") / 2))
    z2 = z * z
    k, m = nw.col(successes), nw.col(n)
    center = (k + z2 / 2) / (m + z2)
    # clip: invalid rows (labels outside {0, 1}) can make k > n before they are reported
    half = z / (m + z2) * ((k * (m - k)).clip(lower_bound=0.0) / m + z2 / 4).sqrt()
    parts = {"center": center, "half": half, "estimate": k / m}
    c, h, estimate = (
        nw.col(q.value(e, key=("wilson", part, successes, n, z), inputs=[successes, n])) for part, e in parts.items()
    )
    # a clip by the estimate, not a when/then that repeats the raw bound nor
    # min/max_horizontal (Dask cannot align a horizontal reduction over the
    # aggregated frame).  With 0 <= estimate <= 1 these are the clips to
    # [0, 1] as well (an estimate outside [0, 1] comes from invalid rows,
    # whose group is null).
    low = (c - h).clip(lower_bound=0.0, upper_bound=estimate)
    high = (c + h).clip(lower_bound=estimate, upper_bound=1.0)
    return low, high


def proportion(w: Weighting, row: str, ci_level: float) -> dict[str, nw.Expr | None]:
    """A (weighted) proportion ``hits / total`` of the row column ``row`` with its Wilson interval.

    With weights the interval is taken at Kish's effective sample size
    (:meth:`~conformal_frames.engine.Weighting.binomial`) and ``n_eff`` is an
    output too.
    """
    hits = w.summed(row)
    k, n = w.binomial(hits)
    low, high = wilson_interval(w.q, k, n, ci_level)
    out: dict[str, nw.Expr | None] = {"": ratio(nw.col(hits), w.total), "ci_low": low, "ci_high": high}
    if w.weighted:
        out["n_eff"] = nw.col(n)
    return out


def ratio(num: nw.Expr, den: nw.Expr) -> nw.Expr:
    """``num / den``, null where ``den`` is 0."""
    return nw.when(den != 0).then(num / den)


def max_of(*exprs: nw.Expr) -> nw.Expr:
    """Row-wise maximum of one or more expressions (ignoring nulls).

    One expression is returned as is: some engines (Spark's ``greatest``)
    reject a horizontal maximum of a single column.
    """
    return exprs[0] if len(exprs) == 1 else nw.max_horizontal(*exprs)


def min_of(*exprs: nw.Expr) -> nw.Expr:
    """Row-wise minimum of one or more expressions (ignoring nulls); see :func:`max_of`."""
    return exprs[0] if len(exprs) == 1 else nw.min_horizontal(*exprs)


def equal_count_bin(r: nw.Expr, n: nw.Expr, n_bins: int) -> nw.Expr:
    """The bin (Float64) of position ``r`` when ``n`` positions are cut into ``n_bins`` runs
    whose sizes differ by at most one (the first ``n % n_bins`` runs longer).

    The same bins as :func:`weighted_cut` for an integer ``n``, in one
    comparison instead of ``n_bins - 1``.
    """
    m = float(n_bins)
    size = (n / m).floor()
    extra = n - size * m
    head = extra * (size + 1.0)
    in_head = (r / (size + 1.0)).floor()
    in_tail = extra + ((r - head) / nw.max_horizontal(size, nw.lit(1.0))).floor()
    return nw.when(r < head).then(in_head).otherwise(in_tail)


def weighted_cut(position: nw.Expr, total_weight: nw.Expr, n_bins: int) -> nw.Expr:
    """The bin (Float64) of a ``position`` in ``[0, W)`` when ``W`` is cut into ``n_bins`` runs.

    The cut points are ``c_k = k * floor(W / M) + min(k, W - M floor(W / M))``
    (``k = 0..M``); the bin is the number of ``c_1..c_{M-1}`` at or below the
    position.  For an integer ``W`` these are the runs of the unweighted
    quantile bins (sizes differ by at most one, the first ``W % M`` one
    longer), so integer weights bin as repeated rows; for other weights the
    runs have (near) equal weight.
    """
    m = float(n_bins)
    size = (total_weight / m).floor()
    extra = total_weight - size * m
    ups = [(position >= size * float(k) + extra.clip(upper_bound=float(k))).cast(nw.Float64) for k in range(1, n_bins)]
    return functools.reduce(operator.add, ups) if ups else nw.lit(0.0)
