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
``*_expr`` functions (and the ``with_*`` frame steps) are the same series as
narwhals expressions (``exp``, arithmetic and a fixed number of terms), so
p-values stay lazy on every backend; there ``Phi_c`` is ``exp(-a^2/2)``
times a polynomial approximation of the Mills ratio (see
:func:`normal_sf_expr`); the ``with_*`` steps on polars frames take polars'
``erfc`` instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import narwhals.stable.v2 as nw
import numpy as np

__all__ = [
    "brownian_max_abs_cdf",
    "brownian_max_abs_sf",
    "brownian_range_cdf",
    "brownian_range_sf",
    "kolmogorov_smirnov_cdf",
    "kuiper_cdf",
    "max_abs_sf_expr",
    "normal_sf_expr",
    "range_sf_expr",
]

_SWITCH = 2.0
#: below this the CDFs are 0 in double precision (their leading term is
#: ``exp(-pi^2 / (8 x^2)) ~ exp(-1.2e6)``); clipping avoids 0 * inf
_TINY = 1e-3
# theta series for x < 2: 5 terms reach 1e-17 for sup|B|, 3 for the range; one
# more of each for margin
_KS_THETA_TERMS = 6
_KUIPER_THETA_TERMS = 4
_KS_TAIL_TERMS = 4  # Phi_c((2k+1) x), x >= 2: Phi_c(14) ~ 1e-44
_KUIPER_TAIL_TERMS = 6  # k Phi_c(k x), x >= 2: 6 Phi_c(12) ~ 1e-32
_PI2 = math.pi**2


def _as_array(x: Any) -> tuple[np.ndarray, bool]:
    arr = np.asarray(x, dtype=float)
    return arr, arr.ndim == 0


def _out(values: np.ndarray, scalar: bool) -> Any:
    values = np.clip(values, 0.0, 1.0)
    return float(values) if scalar else values


def _ranges(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` clipped to the range of each series: small-``x`` (theta) and large-``x`` (tail); NaN stays in range."""
    small = np.clip(np.where(np.isnan(x), 1.0, x), _TINY, _SWITCH)
    large = np.clip(np.where(np.isnan(x), _SWITCH, x), _SWITCH, None)
    return small, large


def _cdf_sf(x: np.ndarray, theta: np.ndarray, tail: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cdf, sf) from the theta series (the cdf for small ``x``) and the tail series (the sf for large ``x``)."""
    use_tail = x >= _SWITCH
    cdf = np.where(use_tail, 1.0 - tail, theta)
    sf = np.where(use_tail, tail, 1.0 - theta)
    cdf = np.where(x <= _TINY, 0.0, cdf)
    sf = np.where(x <= _TINY, 1.0, sf)
    nan = np.isnan(x)
    return np.where(nan, np.nan, cdf), np.where(nan, np.nan, sf)


def _ndtr(x: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr  # imported where used: scipy costs ~0.2 s at import

    return np.asarray(ndtr(x))


def _max_abs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cdf, sf) of sup |B| on [0, 1], elementwise (NaN stays NaN)."""
    small, large = _ranges(x)
    theta = np.zeros_like(small)
    for k in range(_KS_THETA_TERMS):
        j = 2 * k + 1
        theta += (-1) ** k / j * np.exp(-(j**2) * _PI2 / (8.0 * small**2))
    theta *= 4.0 / math.pi
    tail = np.zeros_like(large)
    for k in range(_KS_TAIL_TERMS):
        tail += (-1) ** k * _ndtr(-(2 * k + 1) * large)
    tail *= 4.0
    return _cdf_sf(x, theta, tail)


def _range(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cdf, sf) of the range of B on [0, 1], elementwise."""
    small, large = _ranges(x)
    theta = np.zeros_like(small)
    for k in range(_KUIPER_THETA_TERMS):
        h2 = (k + 0.5) ** 2
        theta += (8.0 / small**2 + 2.0 / (h2 * _PI2)) * np.exp(-2.0 * h2 * _PI2 / small**2)
    tail = np.zeros_like(large)
    for k in range(1, _KUIPER_TAIL_TERMS + 1):
        tail += (-1) ** (k - 1) * k * _ndtr(-k * large)
    tail *= 8.0
    return _cdf_sf(x, theta, tail)


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
# The normal tail Phi_c has no closed form; in the engine it is written as
#     Phi_c(a) = phi(a) * H(t) / (a + K),   t = (a - K) / (a + K),   a >= 0,
# where H(t) = (a + K) * Mills(a) is smooth on t in [-1, 1] and replaced by
# its degree-24 interpolating polynomial (Chebyshev points, power form; the
# coefficients are below 2 so Horner's rule is stable).  The coefficients are
# computed at import from scipy.special.erfcx; relative error of Phi_c
# ~1e-14 on [0, 37] (beyond, exp(-a^2/2) itself loses digits to the rounding
# of a^2, as in any implementation working in double precision).
_MILLS_K = 4.0
_MILLS_DEGREE = 24
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
BIG = 1e6  # Phi_c(1e6) = 0 in double precision; avoids inf / inf


@functools.cache
def _mills_coefficients() -> tuple[float, ...]:
    from numpy.polynomial import chebyshev
    from scipy.special import erfcx

    def scaled_mills(t: np.ndarray) -> np.ndarray:
        t = np.minimum(t, 1.0 - 1e-16)
        a = _MILLS_K * (1.0 + t) / (1.0 - t)
        return math.sqrt(math.pi / 2.0) * erfcx(a / math.sqrt(2.0)) * (a + _MILLS_K)

    coefficients = chebyshev.cheb2poly(chebyshev.chebinterpolate(cast(Any, scaled_mills), _MILLS_DEGREE))
    return tuple(float(c) for c in coefficients)


def _horner(h: nw.Expr, t: nw.Expr, coefficients: Sequence[float]) -> nw.Expr:
    """``(...(h t + c_0) t + c_1 ...) t + c_last``: Horner's rule continued from ``h``."""
    for c in coefficients:
        h = h * t + c
    return h


def _phi_c_of(a: nw.Expr, h: nw.Expr) -> nw.Expr:
    """``Phi_c(a)`` from ``h = H(t)``."""
    return phi_c_of_mills(normal_density(a), h, a)


def mills(t: nw.Expr) -> nw.Expr:
    """``H(t)``, the interpolated scaled Mills ratio (Horner's rule) of :func:`phi_c`."""
    coefficients = _mills_coefficients()
    return _horner(nw.lit(coefficients[-1]), t, coefficients[-2::-1])


def normal_density(a: nw.Expr) -> nw.Expr:
    """``phi(a)``, the standard normal density (``a`` is repeated)."""
    return (-0.5 * a * a).exp() * _INV_SQRT_2PI


def phi_c_of_mills(density: nw.Expr, h: nw.Expr, a: nw.Expr) -> nw.Expr:
    """``Phi_c(a)`` from ``phi(a)`` and ``h = mills(t_of(a))``: :func:`phi_c` in parts (the same operations).

    Pass column references: the numerator is repeated (narwhals' division on
    Spark repeats it in the guards for a zero divisor; with ``H`` and ``phi``
    written out there, Spark's generated code for one Gaussian CRPS held the
    24-step polynomial four times: 8,950 bytes, above HotSpot's JIT limit).
    """
    return density * h / (a + _MILLS_K)


def phi_c(a: nw.Expr, t: nw.Expr) -> nw.Expr:
    """``Phi_c(a)`` for ``a`` in ``[0, 1e6]``, given ``t = (a - K)/(a + K)``.

    Pass column references: both are repeated.
    """
    return _phi_c_of(a, mills(t))


#: Mills coefficients per ``with_columns`` step of :func:`_with_mills` (polars plans a
#: chain of n operations in about n^2 time: 1.4 ms for the 24 steps in one expression,
#: 0.8 ms in three steps, on a 3-row frame)
_HORNER_STEP = 8


def _with_mills(frame: Any, ts: Sequence[str], hs: Sequence[str]) -> tuple[Any, list[nw.Expr], list[str]]:
    """``H(ts[i])`` as expressions, by Horner's rule in steps of intermediate columns ``hs[i]``
    (returned last: the columns added).

    The same operations in the same order as :func:`phi_c` (the same values).
    On Spark, which analyses the whole plan again at every step, Horner's
    rule is one step: a column all the same, as ``Phi_c`` divides it (narwhals
    writes a Spark division with its numerator in four places).
    """
    mills = _mills_coefficients()
    rest = list(mills[-2::-1])
    current = [nw.lit(mills[-1])] * len(ts)
    step = len(rest) if frame.implementation.is_spark_like() else _HORNER_STEP
    while rest:
        chunk, rest = rest[:step], rest[step:]
        frame = frame.with_columns(*[_horner(h, nw.col(t), chunk).alias(o) for h, t, o in zip(current, ts, hs)])
        current = [nw.col(o) for o in hs]
    return frame, current, list(hs)


def t_of(a: nw.Expr) -> nw.Expr:
    return (a - _MILLS_K) / (a + _MILLS_K)


def normal_sf_expr(z: nw.Expr) -> nw.Expr:
    """Standard normal survival function ``1 - Phi(z)`` as a narwhals expression.

    ``Phi_c(|z|)`` by the interpolated Mills ratio above (``1 - Phi_c(-z)``
    for negative ``z``): relative accuracy ~1e-14 against
    :func:`scipy.special.ndtr` for ``0 <= z <= 37``, absolute ~1e-14 for ``z < 0``.
    Null stays null.  On SQL engines :func:`with_normal_sf` (same formula,
    intermediate columns) plans faster.
    """
    a = z.abs().clip(upper_bound=BIG)
    q = phi_c(a, t_of(a))
    return nw.when(~z.is_null()).then(nw.when(z >= 0.0).then(q).otherwise(1.0 - q))


def _theta_square(x: nw.Expr) -> nw.Expr:
    """``x^2`` of the theta series, ``x`` clipped to their range."""
    xs = x.clip(_TINY, _SWITCH)
    return xs * xs


def _theta_max_abs_cdf(xx: nw.Expr) -> nw.Expr:
    """The theta series of ``P(sup |B| <= x)``, given ``xx = _theta_square(x)``."""
    terms = [((-1) ** k / (2 * k + 1)) * (-((2 * k + 1) ** 2) * _PI2 / 8.0 / xx).exp() for k in range(_KS_THETA_TERMS)]
    return (4.0 / math.pi) * nw.sum_horizontal(*terms)


def _theta_range_cdf(xx: nw.Expr) -> nw.Expr:
    """The theta series of ``P(range <= x)``, given ``xx = _theta_square(x)``."""
    terms = []
    for k in range(_KUIPER_THETA_TERMS):
        h2 = (k + 0.5) ** 2
        terms.append((8.0 / xx + 2.0 / (h2 * _PI2)) * (-2.0 * h2 * _PI2 / xx).exp())
    return nw.sum_horizontal(*terms)


#: tail series for x >= 2, as (multiple m of x, weight w): sf = sum w Phi_c(m x).
#: Terms are kept while w Phi_c(m x) / Phi_c(x) can exceed 1e-17 at x = 2
#: (the ratio is ~ exp(-(m^2 - 1) x^2 / 2)).
_KS_TAIL = ((1.0, 4.0), (3.0, -4.0))
_KUIPER_TAIL = ((1.0, 8.0), (2.0, -16.0), (3.0, 24.0), (4.0, -32.0))


def _sf_raw(x: nw.Expr, theta: nw.Expr, tail: nw.Expr) -> nw.Expr:
    """The survival function before its clip to ``[0, 1]`` (see :func:`_sf_expr`)."""
    sf = nw.when(x >= _SWITCH).then(tail).otherwise(1.0 - theta)
    return nw.when(x <= _TINY).then(nw.lit(1.0)).otherwise(sf)


def _sf_of_raw(x: nw.Expr, raw: nw.Expr) -> nw.Expr:
    # explicit: horizontal sums skip nulls (and pandas' NaN), which would turn
    # a missing statistic into p = 1
    return nw.when(~x.is_null()).then(raw.clip(0.0, 1.0))


def _sf_expr(x: nw.Expr, theta: nw.Expr, tail: nw.Expr) -> nw.Expr:
    return _sf_of_raw(x, _sf_raw(x, theta, tail))


def _tail_expr(x: nw.Expr, series: tuple[tuple[float, float], ...]) -> nw.Expr:
    large = x.clip(lower_bound=_SWITCH, upper_bound=BIG)
    return nw.sum_horizontal(*[w * phi_c(m * large, t_of(m * large)) for m, w in series])


def max_abs_sf_expr(x: nw.Expr) -> nw.Expr:
    """``P(sup |B| > x)`` as one narwhals expression (see :func:`brownian_max_abs_sf`).

    ``+inf`` gives 0; null stays null.  On SQL engines prefer
    :func:`with_max_abs_sf` (same series, intermediate columns).
    """
    return _sf_expr(x, _theta_max_abs_cdf(_theta_square(x)), _tail_expr(x, _KS_TAIL))


def range_sf_expr(x: nw.Expr) -> nw.Expr:
    """``P(range > x)`` as one narwhals expression (see :func:`brownian_range_sf`)."""
    return _sf_expr(x, _theta_range_cdf(_theta_square(x)), _tail_expr(x, _KUIPER_TAIL))


# ---------------------------------------------------------------------------
# frame steps: the same series with intermediate columns
# ---------------------------------------------------------------------------
# As single expressions the series repeat their argument many times, which SQL
# engines (DuckDB, Spark) parse and plan slowly.  These steps materialise the
# arguments as columns, so each expression references column names only.
# The calibration tests use them on their aggregated tables (one row per group).
def with_normal_sf(
    frame: Any,
    z: str | Sequence[str],
    out: str | Sequence[str],
    tmp: str,
    *,
    absolute: bool = False,
    keep_scratch: bool = False,
) -> Any:
    """Add column ``out = 1 - Phi(z)`` (``absolute``: ``1 - Phi(|z|)``); ``tmp`` prefixes scratch columns (dropped).

    ``z`` and ``out`` may be sequences of as many names: every tail in the same steps.
    ``keep_scratch``: on polars the scratch columns stay (see :func:`_with_last`).
    """
    zs: list[str] = [z] if isinstance(z, str) else list(z)
    outs: list[str] = [out] if isinstance(out, str) else list(out)
    a, t, h = ([f"{tmp}{c}{i}" for i in range(len(zs))] for c in "ath")
    folded = [nw.col(c).abs().clip(upper_bound=BIG) for c in zs]
    if _native_phi_c(frame):  # a target with its own Phi_c (polars: erfc), see _phi_c_columns
        frame = frame.with_columns(*[f.alias(n) for f, n in zip(folded, a)])
        frame, tails, added = _phi_c_columns(frame, a, h)
    else:
        frame = frame.with_columns(
            *[f.alias(n) for f, n in zip(folded, a)], *[t_of(f).alias(n) for f, n in zip(folded, t)]
        )
        frame, mills, added = _with_mills(frame, t, h)
        tails, added = [_phi_c_of(nw.col(ac), m) for ac, m in zip(a, mills)], [*t, *added]
    results: dict[str, nw.Expr] = {}
    for zc, q, o in zip(map(nw.col, zs), tails, outs):
        results[o] = nw.when(~zc.is_null()).then(q if absolute else nw.when(zc >= 0.0).then(q).otherwise(1.0 - q))
    return _with_last(frame, results, [*a, *added], keep=keep_scratch)


def _phi_c_columns(frame: Any, a: Sequence[str], out: Sequence[str]) -> tuple[Any, list[nw.Expr], list[str]]:
    """``Phi_c`` of the columns ``a`` (``a >= 0``) as columns ``out``, on a frame with its own ``Phi_c``.

    A target that computes the normal tail natively (the polars expressions
    of :mod:`conformal_frames.polars`) offers ``frame.with_phi_c({out: a})``;
    a polars frame takes ``erfc(a / sqrt 2) / 2`` (within 4e-13 of the Mills
    series; the same expression as the compiled one, so ``evaluate`` and
    ``conformal_frames.polars`` give the same p-values); every other frame
    takes Mills' series by Horner's rule in steps (:func:`_with_mills`).
    """
    if hasattr(frame, "with_phi_c"):
        return frame.with_phi_c(dict(zip(out, a))), [nw.col(o) for o in out], list(out)
    import polars as pl  # _native_phi_c: a polars frame

    native = frame.to_native().with_columns(*[(0.5 * (pl.col(x) * _SQRT_HALF).erfc()).alias(o) for x, o in zip(a, out)])
    return nw.from_native(native), [nw.col(o) for o in out], list(out)


_SQRT_HALF = 0.7071067811865476


def _native_phi_c(frame: Any) -> bool:
    """Whether ``frame`` computes ``Phi_c`` natively (:func:`_phi_c_columns`) rather than by Mills' series.

    polars frames do (``erfc``): Mills' series is a chain of 24 operations,
    which polars plans in about n^2 time at every call (``spiegelhalter_test``
    on 1,000 rows: 0.87 vs 0.66 ms).
    """
    if hasattr(frame, "with_phi_c"):
        return True
    return isinstance(frame, (nw.DataFrame, nw.LazyFrame)) and frame.implementation.is_polars()


def abs_normal_tail(z: str) -> Callable[[Any, Any], Any]:
    """A finalize step (``fn(table, ref)``): ``ref.name("q") = 1 - Phi(|z|)`` of the column ``z``.

    One tail evaluation serves a one-sided p-value (``q`` or ``1 - q`` by the
    sign of ``z``) and a two-sided one (``2 q``), both written by the metric's
    outputs.
    """

    def build(out: Any, ref: Any) -> Any:
        # the aggregated table's final selection leaves the scratch columns out
        return with_normal_sf(out, z, ref.name("q"), ref.name("t_"), absolute=True, keep_scratch=True)

    return build


def _with_last(frame: Any, results: dict[str, nw.Expr], scratch: Sequence[str], *, keep: bool = False) -> Any:
    """``frame`` with the ``results`` columns (name -> expression) and without the ``scratch`` ones,
    in one projection (on Spark each ``with_columns`` or ``drop`` is a plan analysis of its own).

    ``keep``: on polars the scratch columns stay (for a caller whose final
    selection leaves them out): a projection of every column costs polars
    about 1 us per column at every call, 0.1-0.2 ms of the 8 single-pass
    metrics on 1,000 rows.
    """
    if keep and frame.implementation.is_polars():
        return frame.with_columns(*[e.alias(k) for k, e in results.items()])
    return frame.select(nw.exclude(*results, *scratch), *[e.alias(k) for k, e in results.items()])


def _with_sf(
    frame: Any, x: str, out: str, tmp: str, theta: Callable[[nw.Expr], nw.Expr], series: tuple[tuple[float, float], ...]
) -> Any:
    """``out = P(X > x)``: ``1 - theta(x^2)`` below 2, the tail series above.

    Every argument the series repeat is a column first (the clipped square,
    ``m x``, Mills' ``H``; the unclipped value): inlined, SQL engines copy them
    into each branch of a clip or a division.
    """
    xl, xx, raw = f"{tmp}xl", f"{tmp}xx", f"{tmp}raw"
    # the series run on a filled Float64 copy (a missing statistic stays
    # null through _sf_expr): an all-null column may have no float dtype
    # (pyarrow-backed pandas), and numpy's exp rejects it
    xf = nw.col(x).fill_null(1.0).cast(nw.Float64)
    frame = frame.with_columns(xf.clip(lower_bound=_SWITCH, upper_bound=BIG).alias(xl), _theta_square(xf).alias(xx))
    zs = [f"{tmp}z{i}" for i in range(len(series))]
    ts = [f"{tmp}t{i}" for i in range(len(series))]
    hs = [f"{tmp}h{i}" for i in range(len(series))]
    if _native_phi_c(frame):  # a target with its own Phi_c (see _phi_c_columns)
        frame = frame.with_columns(*[(m * nw.col(xl)).alias(z) for z, (m, _w) in zip(zs, series)])
        frame, tails, added = _phi_c_columns(frame, zs, hs)
        ts = []
    else:
        # t of m x written from m x itself (not its column): the same operations, one step fewer
        frame = frame.with_columns(
            *[(m * nw.col(xl)).alias(z) for z, (m, _w) in zip(zs, series)],
            *[t_of(m * nw.col(xl)).alias(t) for t, (m, _w) in zip(ts, series)],
        )
        frame, mills, added = _with_mills(frame, ts, hs)
        tails = [_phi_c_of(nw.col(z), h) for z, h in zip(zs, mills)]
    tail = nw.sum_horizontal(*[w * q for q, (_m, w) in zip(tails, series)])
    frame = frame.with_columns(_sf_raw(nw.col(x), theta(nw.col(xx)), tail).alias(raw))
    return _with_last(frame, {out: _sf_of_raw(nw.col(x), nw.col(raw))}, [xl, xx, raw, *zs, *ts, *added])


def with_max_abs_sf(frame: Any, x: str, out: str, tmp: str) -> Any:
    """Add ``out = P(sup|B| > x)`` (the KS p-value) to a narwhals frame; see :func:`brownian_max_abs_sf`."""
    return _with_sf(frame, x, out, tmp, _theta_max_abs_cdf, _KS_TAIL)


def with_range_sf(frame: Any, x: str, out: str, tmp: str) -> Any:
    """Add ``out = P(range > x)`` (the Kuiper p-value) to a narwhals frame; see :func:`brownian_range_sf`."""
    return _with_sf(frame, x, out, tmp, _theta_range_cdf, _KUIPER_TAIL)
