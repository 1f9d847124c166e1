"""Binomial confidence intervals as expressions over aggregated columns."""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING

import narwhals.stable.v2 as nw

from conformal_frames._validate import check_probability

if TYPE_CHECKING:
    from conformal_frames.engine import Weighting


def wilson_interval(successes: nw.Expr, n: nw.Expr, confidence: float) -> tuple[nw.Expr, nw.Expr]:
    """Wilson score interval for a binomial proportion, as two expressions.

    ``(k + z^2/2) / (n + z^2) -/+ z / (n + z^2) * sqrt(k (n - k) / n + z^2 / 4)``
    with ``z`` the two-sided normal quantile of ``confidence``.  Null for n = 0.

    The bounds always contain the estimate ``k / n``: rounding can put
    ``center + half`` one ulp below 1 when ``k = n`` (and ``center - half``
    above 0 when ``k = 0``), so each bound is widened to the estimate where it
    falls short (a change of at most a few ulps) and clipped to ``[0, 1]``.
    """
    from scipy.special import ndtri  # imported where used: scipy costs ~0.2 s at import

    z = float(ndtri(0.5 + check_probability(confidence, "ci") / 2))
    z2 = z * z
    center = (successes + z2 / 2) / (n + z2)
    # clip: invalid rows (labels outside {0, 1}) can make k > n before they are reported
    half = z / (n + z2) * ((successes * (n - successes)).clip(lower_bound=0.0) / n + z2 / 4).sqrt()
    estimate = successes / n
    # a clip by the estimate, not a when/then that repeats the raw bound (every
    # expression node costs query-building time) nor min/max_horizontal (Dask
    # cannot align a horizontal reduction over the aggregated frame).  One clip
    # per bound: SQL engines repeat a clipped expression (a null test and the
    # clip), so nested clips copied the interval's arithmetic four times into
    # a Spark plan.  With 0 <= estimate <= 1 these are the clips to [0, 1] as well
    # (an estimate outside [0, 1] comes from invalid rows, whose group is null).
    low = (center - half).clip(lower_bound=0.0, upper_bound=estimate)
    high = (center + half).clip(lower_bound=estimate, upper_bound=1.0)
    return low, high


def proportion(w: Weighting, hits: nw.Expr, ci_level: float) -> dict[str, nw.Expr | None]:
    """A (weighted) proportion ``hits / total`` with its Wilson interval.

    With weights the interval is taken at Kish's effective sample size
    (:meth:`~conformal_frames.engine.Weighting.binomial`) and ``n_eff`` is an
    output too.
    """
    k, n = w.binomial(hits)
    low, high = wilson_interval(k, n, ci_level)
    out: dict[str, nw.Expr | None] = {"": ratio(hits, w.total), "ci_low": low, "ci_high": high}
    if w.weighted:
        out["n_eff"] = n
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
