"""Limiting laws of the calibration tests: functionals of Brownian motion.

Two distributions on ``[0, inf)`` of a *standard Brownian motion* ``B`` on
``[0, 1]`` (``B_0 = 0``, free end point):

* ``sup_{0<=t<=1} |B_t|``: the limit of the Kolmogorov-Smirnov calibration
  statistic ``G = max_k |C_k| / sigma``;
* ``sup B - inf B`` (the range): the limit of the Kuiper statistic.

Neither is in scipy.  ``scipy.stats.kstwobign`` is the law of the supremum of
a Brownian *bridge* (``B_1 = 0``), the limit of the two-sample/one-sample
Kolmogorov-Smirnov statistic of distribution functions: a different law
(for example ``kstwobign.cdf(1) = 0.730`` while ``P(sup |B| <= 1) = 0.371``).

Each law has two series (Darling and Siegert 1953; Feller 1951; Tygert 2022):
a *theta series* of ``exp`` terms that converges fast for small ``x`` and an
alternating series of normal tails, obtained from the reflection principle,
that converges fast for large ``x``.  We switch at ``x = 2``, where both need
fewer than ten terms for double precision:

``P(sup|B| <= x) = (4/pi) sum_{k>=0} (-1)^k / (2k+1) exp(-(2k+1)^2 pi^2 / (8 x^2))``

``P(sup|B| >  x) = 4 sum_{k>=0} (-1)^k Phi_c((2k+1) x)``

``P(range <= x) = sum_{k>=0} (8 / x^2 + 2 / ((k+1/2)^2 pi^2)) exp(-2 (k+1/2)^2 pi^2 / x^2)``

``P(range >  x) = 8 sum_{k>=1} (-1)^(k-1) k Phi_c(k x)``

with ``Phi_c`` the standard normal survival function.  Computing the survival
function from the tail series keeps small p-values accurate to a relative
1e-14 (``1 - cdf`` would only be accurate to an absolute 1e-16).

The numpy functions use :func:`scipy.special.ndtr` for ``Phi_c``.  The
``*_expr`` functions are the same series as narwhals expressions (``exp``,
arithmetic and a fixed number of terms), so p-values stay lazy on every
backend; there ``Phi_c`` is computed by :func:`normal_sf_expr`.
"""

from __future__ import annotations

import math
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
from scipy.special import ndtr

__all__ = [
    "brownian_max_abs_cdf",
    "brownian_max_abs_sf",
    "brownian_range_cdf",
    "brownian_range_sf",
    "kolmogorov_smirnov_cdf",
    "kuiper_cdf",
    "max_abs_sf_expr",
    "range_sf_expr",
    "normal_sf_expr",
]

_SWITCH = 2.0
#: below this the CDFs are 0 in double precision (their leading term is
#: ``exp(-pi^2 / (8 x^2)) ~ exp(-1.2e6)``); clipping avoids 0 * inf
_TINY = 1e-3
_THETA_TERMS = 8  # theta series, x < 2: last term < 1e-30
_KS_TAIL_TERMS = 4  # Phi_c((2k+1) x), x >= 2: Phi_c(14) ~ 1e-44
_KUIPER_TAIL_TERMS = 6  # k Phi_c(k x), x >= 2: 6 Phi_c(12) ~ 1e-32
_PI2 = math.pi**2


def _as_array(x: Any) -> tuple[np.ndarray, bool]:
    arr = np.asarray(x, dtype=float)
    return arr, arr.ndim == 0


def _out(values: np.ndarray, scalar: bool) -> Any:
    values = np.clip(values, 0.0, 1.0)
    return float(values) if scalar else values


def _max_abs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cdf, sf) of sup |B| on [0, 1], elementwise (NaN stays NaN)."""
    small = np.clip(np.where(np.isnan(x), 1.0, x), _TINY, _SWITCH)
    large = np.clip(np.where(np.isnan(x), _SWITCH, x), _SWITCH, None)
    theta = np.zeros_like(small)
    for k in range(_THETA_TERMS):
        j = 2 * k + 1
        theta += (-1) ** k / j * np.exp(-(j**2) * _PI2 / (8.0 * small**2))
    theta *= 4.0 / math.pi
    tail = np.zeros_like(large)
    for k in range(_KS_TAIL_TERMS):
        tail += (-1) ** k * ndtr(-(2 * k + 1) * large)
    tail *= 4.0
    use_tail = x >= _SWITCH
    cdf = np.where(use_tail, 1.0 - tail, theta)
    sf = np.where(use_tail, tail, 1.0 - theta)
    cdf = np.where(x <= _TINY, 0.0, cdf)
    sf = np.where(x <= _TINY, 1.0, sf)
    nan = np.isnan(x)
    return np.where(nan, np.nan, cdf), np.where(nan, np.nan, sf)


def _range(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cdf, sf) of the range of B on [0, 1], elementwise."""
    small = np.clip(np.where(np.isnan(x), 1.0, x), _TINY, _SWITCH)
    large = np.clip(np.where(np.isnan(x), _SWITCH, x), _SWITCH, None)
    theta = np.zeros_like(small)
    for k in range(_THETA_TERMS):
        h2 = (k + 0.5) ** 2
        theta += (8.0 / small**2 + 2.0 / (h2 * _PI2)) * np.exp(-2.0 * h2 * _PI2 / small**2)
    tail = np.zeros_like(large)
    for k in range(1, _KUIPER_TAIL_TERMS + 1):
        tail += (-1) ** (k - 1) * k * ndtr(-k * large)
    tail *= 8.0
    use_tail = x >= _SWITCH
    cdf = np.where(use_tail, 1.0 - tail, theta)
    sf = np.where(use_tail, tail, 1.0 - theta)
    cdf = np.where(x <= _TINY, 0.0, cdf)
    sf = np.where(x <= _TINY, 1.0, sf)
    nan = np.isnan(x)
    return np.where(nan, np.nan, cdf), np.where(nan, np.nan, sf)


def brownian_max_abs_cdf(x: Any) -> Any:
    """CDF of ``sup_{0<=t<=1} |B_t|`` for a standard Brownian motion ``B``.

    The limiting law of the Kolmogorov-Smirnov calibration statistic (see
    :func:`conformal_frames.ks_test`).  Vectorised: a float for a scalar, an
    array for an array.  Values are within ``[0, 1]`` for every ``x``: 0 for
    ``x <= 0``, 1 at ``+inf``; NaN stays NaN.  Absolute accuracy ~1e-16.

    Not in scipy: ``scipy.stats.kstwobign`` is the supremum of a Brownian
    *bridge*, a different law.  Series used (theta series below ``x = 2``,
    alternating normal tails above)::

        P(sup|B| <= x) = (4/pi) sum_k (-1)^k/(2k+1) exp(-(2k+1)^2 pi^2/(8x^2))
        P(sup|B| >  x) = 4 sum_k (-1)^k Phi_c((2k+1) x)

    Examples
    --------
    >>> from conformal_frames import brownian_max_abs_cdf
    >>> round(brownian_max_abs_cdf(1.0), 4)
    0.3708
    >>> brownian_max_abs_cdf([0.0, 2.0, 3.0]).round(6).tolist()
    [0.0, 0.908999, 0.9946]

    References
    ----------
    D. A. Darling and A. J. F. Siegert (1953), "The first passage problem for a
    continuous Markov process", Ann. Math. Statist. 24(4), 624-639.
    M. Tygert (2022), "Calibration of P-values for calibration and for
    deviation of a subpopulation from the full population", arXiv:2202.00100.
    """
    arr, scalar = _as_array(x)
    return _out(_max_abs(arr)[0], scalar)


def brownian_max_abs_sf(x: Any) -> Any:
    """Survival function ``P(sup_{0<=t<=1} |B_t| > x)``: the KS p-value.

    Computed from the normal-tail series for ``x >= 2``, so small p-values keep
    their relative accuracy.  See :func:`brownian_max_abs_cdf`.

    Examples
    --------
    >>> from conformal_frames import brownian_max_abs_sf
    >>> f"{brownian_max_abs_sf(6.0):.6e}"
    '3.946351e-09'
    """
    arr, scalar = _as_array(x)
    return _out(_max_abs(arr)[1], scalar)


def brownian_range_cdf(x: Any) -> Any:
    """CDF of the range ``sup B - inf B`` of a standard Brownian motion on [0, 1].

    The limiting law of the Kuiper calibration statistic (see
    :func:`conformal_frames.kuiper_test`).  Vectorised; within ``[0, 1]``
    for every ``x``, 0 for ``x <= 0``, 1 at ``+inf``.  Not in scipy.  Series
    used (Feller 1951; theta series below ``x = 2``, normal tails above)::

        P(R <= x) = sum_{k>=0} (8/x^2 + 2/((k+1/2)^2 pi^2)) exp(-2 (k+1/2)^2 pi^2 / x^2)
        P(R >  x) = 8 sum_{k>=1} (-1)^(k-1) k Phi_c(k x)

    Examples
    --------
    >>> from conformal_frames import brownian_range_cdf
    >>> round(brownian_range_cdf(1.0), 4)
    0.0634
    >>> brownian_range_cdf([2.0, 3.0]).round(6).tolist()
    [0.818506, 0.989201]

    References
    ----------
    W. Feller (1951), "The asymptotic distribution of the range of sums of
    independent random variables", Ann. Math. Statist. 22(3), 427-432.
    """
    arr, scalar = _as_array(x)
    return _out(_range(arr)[0], scalar)


def brownian_range_sf(x: Any) -> Any:
    """Survival function ``P(range > x)``: the Kuiper p-value.

    See :func:`brownian_range_cdf`.

    Examples
    --------
    >>> from conformal_frames import brownian_range_sf
    >>> round(brownian_range_sf(1.0), 4)
    0.9366
    """
    arr, scalar = _as_array(x)
    return _out(_range(arr)[1], scalar)


#: the baseline's names for the same functions
kolmogorov_smirnov_cdf = brownian_max_abs_cdf
kuiper_cdf = brownian_range_cdf


# ---------------------------------------------------------------------------
# the same series as narwhals expressions (lazy on every backend)
# ---------------------------------------------------------------------------
_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_NORMAL_SWITCH = 2.5
_KUMMER_TERMS = 40  # erf series, |x| < 2.5 / sqrt(2): terms < 1e-20
_CF_TERMS = 60  # Mills-ratio continued fraction, z >= 2.5: relative error ~1e-15


def _upper_tail(z: nw.Expr) -> nw.Expr:
    """``Phi_c(z)`` for ``z >= 2.5`` by Laplace's continued fraction.

    ``Phi_c(z) = phi(z) / (z + 1/(z + 2/(z + 3/(z + ...))))``, truncated
    after a fixed number of levels (relative error ~1e-15 for z >= 2.5).
    """
    t = z
    for k in range(_CF_TERMS, 0, -1):
        t = z + float(k) / t
    return (-0.5 * z * z).exp() * _INV_SQRT_2PI / t


def _erf_small(x: nw.Expr) -> nw.Expr:
    """``erf(x)`` for ``|x| < 1.8``: ``2/sqrt(pi) exp(-x^2) sum_n (2x^2)^n x / (2n+1)!!``.

    All terms of the series have the sign of ``x``, so there is no
    cancellation; evaluated in Horner form.
    """
    x2 = x * x
    s: nw.Expr = nw.lit(1.0)
    for n in range(_KUMMER_TERMS, 0, -1):
        s = 1.0 + (2.0 / (2 * n + 1)) * x2 * s
    return (2.0 / math.sqrt(math.pi)) * (-x2).exp() * x * s


def normal_sf_expr(z: nw.Expr) -> nw.Expr:
    """Standard normal survival function ``1 - Phi(z)`` as a narwhals expression.

    ``|z| < 2.5``: ``(1 - erf(z / sqrt 2)) / 2`` by a positive-term erf series;
    ``|z| >= 2.5``: Laplace's continued fraction for the Mills ratio (used for
    ``1 - Phi_c(-z)`` when ``z <= -2.5``).  Relative accuracy ~1e-14 against
    :func:`scipy.special.ndtr` on the whole line; null stays null.
    """
    mid = 0.5 - 0.5 * _erf_small(z.clip(-_NORMAL_SWITCH, _NORMAL_SWITCH) / _SQRT2)
    far = _upper_tail(z.abs().clip(lower_bound=_NORMAL_SWITCH, upper_bound=1e6))
    return (
        nw.when(z >= _NORMAL_SWITCH)
        .then(far)
        .otherwise(nw.when(z <= -_NORMAL_SWITCH).then(1.0 - far).otherwise(mid))
    )


def _theta_max_abs_cdf(x: nw.Expr) -> nw.Expr:
    xs = x.clip(_TINY, _SWITCH)
    terms = [
        ((-1) ** k / (2 * k + 1)) * (-((2 * k + 1) ** 2) * _PI2 / 8.0 / (xs * xs)).exp() for k in range(_THETA_TERMS)
    ]
    return (4.0 / math.pi) * nw.sum_horizontal(*terms)


def _theta_range_cdf(x: nw.Expr) -> nw.Expr:
    xs = x.clip(_TINY, _SWITCH)
    terms = []
    for k in range(_THETA_TERMS):
        h2 = (k + 0.5) ** 2
        terms.append((8.0 / (xs * xs) + 2.0 / (h2 * _PI2)) * (-2.0 * h2 * _PI2 / (xs * xs)).exp())
    return nw.sum_horizontal(*terms)


def _sf_expr(x: nw.Expr, theta: nw.Expr, tail: nw.Expr) -> nw.Expr:
    sf = nw.when(x >= _SWITCH).then(tail).otherwise(1.0 - theta)
    return nw.when(x <= _TINY).then(nw.lit(1.0)).otherwise(sf).clip(0.0, 1.0)


def max_abs_sf_expr(x: nw.Expr) -> nw.Expr:
    """``P(sup |B| > x)`` as a narwhals expression (see :func:`brownian_max_abs_sf`).

    ``+inf`` gives 0; null stays null.
    """
    large = x.clip(lower_bound=_SWITCH, upper_bound=1e6)
    tail = 4.0 * nw.sum_horizontal(*[(-1) ** k * _normal_sf_large((2 * k + 1) * large) for k in range(_KS_TAIL_TERMS)])
    return _sf_expr(x, _theta_max_abs_cdf(x), tail)


def range_sf_expr(x: nw.Expr) -> nw.Expr:
    """``P(range > x)`` as a narwhals expression (see :func:`brownian_range_sf`)."""
    large = x.clip(lower_bound=_SWITCH, upper_bound=1e6)
    tail = 8.0 * nw.sum_horizontal(
        *[(-1) ** (k - 1) * k * _normal_sf_large(k * large) for k in range(1, _KUIPER_TAIL_TERMS + 1)]
    )
    return _sf_expr(x, _theta_range_cdf(x), tail)


def _normal_sf_large(z: nw.Expr) -> nw.Expr:
    """``Phi_c(z)`` for ``z >= 2``: the erf series below 2.5, the continued fraction above."""
    mid = 0.5 - 0.5 * _erf_small(z.clip(upper_bound=_NORMAL_SWITCH) / _SQRT2)
    far = _upper_tail(z.clip(lower_bound=_NORMAL_SWITCH))
    return nw.when(z >= _NORMAL_SWITCH).then(far).otherwise(mid)


# ---------------------------------------------------------------------------
# frame steps: the same series with intermediate columns
# ---------------------------------------------------------------------------
# As single expressions the series repeat their argument hundreds of times,
# which SQL engines (DuckDB, Spark) parse and plan slowly.  These steps
# materialise the argument and the partial results as columns, so each
# expression only references column names.  Used by the calibration tests on
# their aggregated tables (one row per group).
def with_normal_sf(frame: Any, z: str, out: str, tmp: str) -> Any:
    """Add column ``out = 1 - Phi(z)``; ``tmp`` prefixes scratch columns (dropped)."""
    a, m, x2, f, mid, far = (f"{tmp}{s}" for s in ("a", "m", "x2", "f", "mid", "far"))
    frame = frame.with_columns(
        nw.col(z).abs().clip(lower_bound=_NORMAL_SWITCH, upper_bound=1e6).alias(a),
        (nw.col(z).clip(-_NORMAL_SWITCH, _NORMAL_SWITCH) / _SQRT2).alias(m),
    )
    frame = frame.with_columns((nw.col(m) * nw.col(m)).alias(x2))
    s: nw.Expr = nw.lit(1.0)
    for n in range(_KUMMER_TERMS, 0, -1):
        s = 1.0 + (2.0 / (2 * n + 1)) * nw.col(x2) * s
    t: nw.Expr = nw.col(a)
    for k in range(_CF_TERMS, 0, -1):
        t = nw.col(a) + float(k) / t
    frame = frame.with_columns(
        (0.5 - (1.0 / math.sqrt(math.pi)) * (-nw.col(x2)).exp() * nw.col(m) * s).alias(mid),
        t.alias(f),
    )
    frame = frame.with_columns(((-0.5 * nw.col(a) * nw.col(a)).exp() * _INV_SQRT_2PI / nw.col(f)).alias(far))
    zc = nw.col(z)
    result = (
        nw.when(zc >= _NORMAL_SWITCH)
        .then(nw.col(far))
        .otherwise(nw.when(zc <= -_NORMAL_SWITCH).then(1.0 - nw.col(far)).otherwise(nw.col(mid)))
    )
    return frame.with_columns(result.alias(out)).drop(a, m, x2, f, mid, far)


def _with_sf(frame: Any, x: str, out: str, tmp: str, theta: nw.Expr, weights: list[tuple[float, float]], scale: float) -> Any:
    """``out = P(X > x)``: ``1 - theta`` below 2, ``scale * sum w Phi_c(m x)`` above."""
    xl, th = f"{tmp}xl", f"{tmp}th"
    frame = frame.with_columns(nw.col(x).clip(lower_bound=_SWITCH, upper_bound=1e6).alias(xl), theta.alias(th))
    names = []
    for i, (mult, _w) in enumerate(weights):
        frame = frame.with_columns((mult * nw.col(xl)).alias(f"{tmp}z{i}"))
        frame = with_normal_sf(frame, f"{tmp}z{i}", f"{tmp}p{i}", f"{tmp}n{i}_")
        names.append(f"{tmp}p{i}")
    tail = scale * nw.sum_horizontal(*[w * nw.col(name) for name, (_m, w) in zip(names, weights)])
    xc = nw.col(x)
    sf = nw.when(xc <= _TINY).then(nw.lit(1.0)).otherwise(nw.when(xc >= _SWITCH).then(tail).otherwise(1.0 - nw.col(th)))
    return frame.with_columns(sf.clip(0.0, 1.0).alias(out)).drop(xl, th, *names, *[f"{tmp}z{i}" for i in range(len(weights))])


def with_max_abs_sf(frame: Any, x: str, out: str, tmp: str) -> Any:
    """Add ``out = P(sup|B| > x)`` (the KS p-value) to a narwhals frame; see :func:`brownian_max_abs_sf`."""
    weights = [(2.0 * k + 1.0, float((-1) ** k)) for k in range(_KS_TAIL_TERMS)]
    return _with_sf(frame, x, out, tmp, _theta_max_abs_cdf(nw.col(x)), weights, 4.0)


def with_range_sf(frame: Any, x: str, out: str, tmp: str) -> Any:
    """Add ``out = P(range > x)`` (the Kuiper p-value) to a narwhals frame; see :func:`brownian_range_sf`."""
    weights = [(float(k), float((-1) ** (k - 1) * k)) for k in range(1, _KUIPER_TAIL_TERMS + 1)]
    return _with_sf(frame, x, out, tmp, _theta_range_cdf(nw.col(x)), weights, 8.0)
