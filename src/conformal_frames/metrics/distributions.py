"""Distributional forecast scores: CRPS and the probability integral transform (PIT).

A forecast of ``y`` is given as one of

- a **Gaussian** forecast: ``mean=`` and ``std=`` columns (``std > 0``);
- an **ensemble** (sample) forecast: ``samples=`` a list column (polars
  List/Array, Arrow list, or a pandas ``object`` column of lists/arrays) or a
  list of columns, one per member.

Everything stays lazy on every backend: the Gaussian scores are row
expressions (the normal tail is the engine's polynomial approximation of the
Mills ratio, relative accuracy ~1e-14, see :mod:`conformal_frames.numerics.brownian`);
an ensemble is turned into one row per member (``explode`` of a list column,
a union of the member columns otherwise), its members sorted per forecast with
an ordered window, and aggregated back: ``O(m log m)`` per forecast of ``m``
members, never the ``O(m^2)`` pair sum.

Invalid rows (an error on eager input; null metrics and ``n_invalid`` on lazy
input): a missing or non-finite ``y``, ``mean`` or ``std``; ``std <= 0``; a
missing or empty ensemble, or one with NaN or infinite members.  A list whose
members are partly missing (null elements) cannot be seen by a row check on
every backend: the group's score is then null (never computed from the
remaining members).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import narwhals.stable.v2 as nw

from conformal_frames._roles import Column, role
from conformal_frames._validate import check_column, checked, choice, optional
from conformal_frames.engine import (
    FinalizeFn,
    Metric,
    Query,
    TableFn,
    TableRef,
    Weighting,
    aggregate,
    join_keys,
    no_counts,
    no_weights,
    ordered_cells,
    over,
    running_total,
    sort_result,
    total,
)
from conformal_frames.engine.native_ensembles import (
    HASH_P,
    CRPSSums,
    PITDraws,
    mod_p,
    native_table,
    uniform_hash_parts,
)
from conformal_frames.inputs.forecasts import (
    CrossingOutputs,
    Ensemble,
    Quantiles,
    check_crossing,
    check_member_weights,
    check_quantiles,
    check_samples,
    crossing_outputs,
    ensemble,
    ensemble_rows,
    gaussian_z,
    list_column,
    one_forecast,
    quantile_rows,
    value_row,
)
from conformal_frames.inputs.sets import arrow_lists
from conformal_frames.numerics.brownian import BIG, mills, normal_density, phi_c_of_mills, t_of
from conformal_frames.numerics.stats import max_of, min_of, ratio
from conformal_frames.results import PITTestResult

__all__ = ["crps", "pit_histogram", "pit_test", "quantile_crps"]
METHODS = list(__all__)

Estimator = Literal["plain", "fair"]
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)


def _quantiles(value: Any) -> Quantiles | None:
    """``quantiles=`` normalised to sorted ``(level, column)`` pairs (wide form only)."""
    return None if value is None else check_quantiles(value)


def _density_row(q: Query, a: str) -> str:
    """Row column ``phi(a)`` of the row column ``a``."""
    return q.row(("gauss_density", a), normal_density(nw.col(a)), inputs=[a])


def gaussian_tail(q: Query, y: str, mean: str, std: str) -> tuple[str, str, str, str]:
    """Row columns ``z``, ``|z|``, ``Phi_c(|z|)`` and ``std``.

    The normal tail is the engine's interpolated Mills ratio (relative error
    ~1e-14, see :mod:`conformal_frames.numerics.brownian`) over row columns, so each
    expression names columns only (SQL engines plan a repeated argument slowly).
    """
    z, sd = gaussian_z(q, y, mean, std)
    a = q.row(("gauss_abs_z", z), nw.col(z).abs().clip(upper_bound=BIG), inputs=[z])
    t = q.row(("gauss_t", a), t_of(nw.col(a)), inputs=[a])
    # H(t) and phi(a) as columns: the division of Phi_c repeats its numerator (on Spark)
    h = q.row(("gauss_mills", t), mills(nw.col(t)), inputs=[t])
    d = _density_row(q, a)
    tail = q.row(("gauss_tail", a), phi_c_of_mills(nw.col(d), nw.col(h), nw.col(a)), inputs=[a, h, d])
    return z, a, tail, sd


def gaussian_crps_row(q: Query, y: str, mean: str, std: str) -> str:
    """Row column: ``|y - mean| (1 - 2 Phi_c(|z|)) + std (2 phi(z) - 1/sqrt(pi))``.

    The linear term uses the unclipped ``|y - mean|`` (``|z|`` is clipped at
    ``BIG`` for the tail only, where ``Phi_c`` and ``phi`` are 0 anyway): far
    in the tail the score is ``|y - mean| - std / sqrt(pi)``.
    """
    _, a, tail, sd = gaussian_tail(q, y, mean, std)
    dev = q.row(("gauss_abs_dev", y, mean), (q.number(y) - q.number(mean)).abs())
    d = _density_row(q, a)
    crps = nw.col(dev) * (1.0 - 2.0 * nw.col(tail)) + nw.col(sd) * (2.0 * nw.col(d) - _INV_SQRT_PI)
    return q.row(("gauss_crps", a), crps, inputs=[tail, sd, dev, d])


def gaussian_pit_row(q: Query, y: str, mean: str, std: str) -> str:
    """Row column: ``Phi(z)`` (exactly 0.5 at ``z = 0``, a bin edge, common with rounded data)."""
    z, _, tail, _ = gaussian_tail(q, y, mean, std)
    zc, tc = nw.col(z), nw.col(tail)
    pit = nw.when(zc > 0.0).then(1.0 - tc).otherwise(nw.when(zc < 0.0).then(tc).otherwise(nw.lit(0.5)))
    return q.row(("gauss_pit", z), pit, inputs=[z, tail])


def _crps_table(ens: Ensemble, estimator: str) -> TableFn:
    """Sub-query: per group, the (weighted) sum of the forecasts' CRPS and the forecasts with null members."""

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        per = ensemble_rows(rows, keys, ens, ref)
        m = nw.col(ref.name("m"))
        pairs = m * m if estimator == "plain" else m * (m - 1.0)
        score = ratio(nw.col(ref.name("abs_dev")), m) - ratio(nw.col(ref.name("spread")), pairs)
        if ens.weight is not None:
            score = score * nw.col(ref.name("w"))
        per = per.with_columns(score.alias(ref.name("crps")))
        bad = (nw.col(ref.name("nulls")) > 0).cast(nw.Float64).alias(ref.name("bad"))
        return aggregate(per.with_columns(bad), keys, [nw.col(ref.name("crps")).sum(), nw.col(ref.name("bad")).sum()])

    return native_table(build, CRPSSums(ens, estimator))


# ---------------------------------------------------------------------------
# quantile forecasts: row expressions
# ---------------------------------------------------------------------------
def level_weights(levels: Sequence[float]) -> list[float]:
    """Each level's share of (0, 1): from the midpoint with the level below to the one above.

    The end levels take the tails: ``w_1 = (tau_1 + tau_2) / 2``, ``w_K = 1 -
    (tau_(K-1) + tau_K) / 2``; the weights add up to 1.

    >>> level_weights([0.1, 0.5, 0.9])
    [0.3, 0.4, 0.30000000000000004]
    """
    cuts = [0.0, *[(a + b) / 2.0 for a, b in itertools.pairwise(levels)], 1.0]
    return [b - a for a, b in itertools.pairwise(cuts)]


def quantile_crps_row(q: Query, y: str, quantiles: Quantiles, crossing: str = "invalid") -> str:
    """Row column: ``2 sum_k w_k rho_tau_k(y - q_k)`` with ``w_k`` the level's share (:func:`level_weights`)."""
    y_row = value_row(q, y)
    rows = quantile_rows(q, quantiles, crossing)
    yc = nw.col(y_row)
    weights = level_weights([tau for tau, _ in rows])
    terms = [
        (2.0 * wk) * nw.when(yc >= nw.col(r)).then(tau * (yc - nw.col(r))).otherwise((1.0 - tau) * (nw.col(r) - yc))
        for (tau, r), wk in zip(rows, weights)
    ]
    key = ("quantile_crps", y_row, tuple(r for _, r in rows))
    return q.row(key, total(terms), inputs=[y_row, *[r for _, r in rows]])


def quantile_pit_rows(q: Query, y: str, quantiles: Quantiles, crossing: str = "invalid") -> tuple[str, str]:
    """Row columns ``lo = sup{tau: Q(tau) < y}`` and ``hi = inf{tau: Q(tau) > y}``.

    ``Q`` interpolates the quantiles linearly between levels; below the lowest
    quantile it is unknown (``y < q_1``: ``[0, tau_1]``), above the highest
    too (``y > q_K``: ``[tau_K, 1]``); a flat stretch ``q_j = q_(j+1) = y``
    gives ``[tau_j, tau_(j+1)]``.  ``Q`` must be non-decreasing: unless
    ``crossing="invalid"`` (crossing rows invalid), each row's quantiles are
    rearranged in increasing order first (``"score"`` and ``"sort"`` alike).
    """
    y_row = value_row(q, y)
    rows = quantile_rows(q, quantiles, "invalid" if crossing == "invalid" else "sort")
    yc = nw.col(y_row)
    (t1, r1), (tk, rk) = rows[0], rows[-1]
    lo_parts = [nw.when(yc >= nw.col(r1)).then(nw.lit(t1)).otherwise(nw.lit(0.0))]
    hi_parts = [nw.when(yc <= nw.col(rk)).then(nw.lit(tk)).otherwise(nw.lit(1.0))]
    for (ta, ra), (tb, rb) in itertools.pairwise(rows):
        a, b = nw.col(ra), nw.col(rb)
        # used only where a < y < b (the guard keeps engines from dividing by zero elsewhere)
        inside = ta + (tb - ta) * (yc - a) / nw.when(b > a).then(b - a).otherwise(1.0)
        lo_parts.append(nw.when(a < yc).then(nw.when(yc >= b).then(nw.lit(tb)).otherwise(inside)).otherwise(0.0))
        hi_parts.append(nw.when(b > yc).then(nw.when(yc <= a).then(nw.lit(ta)).otherwise(inside)).otherwise(1.0))
    inputs = [y_row, *[r for _, r in rows]]
    lo = q.row(("quantile_pit_lo", *inputs), max_of(*lo_parts), inputs=inputs)
    hi = q.row(("quantile_pit_hi", *inputs), min_of(*hi_parts), inputs=inputs)
    return lo, hi


# ---------------------------------------------------------------------------
# CRPS
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CRPS(Metric):
    y: str
    mean: str | None = checked(optional(check_column), None)
    std: str | None = checked(optional(check_column), None)
    samples: str | tuple[str, ...] | None = checked(optional(check_samples), None)
    estimator: str = checked(choice("plain", "fair"), "plain")
    weights: str | None = None
    counts: str | None = None
    member_weights: str | tuple[str, ...] | None = checked(optional(check_samples), None)
    default_name = "crps"

    def __post_init__(self) -> None:
        super().__post_init__()
        one_forecast(self.mean, self.std, self.samples)
        check_member_weights(self.samples, self.member_weights)
        if self.member_weights is not None and self.estimator == "fair":
            msg = "estimator='fair' is for equally weighted members; with member_weights= use estimator='plain'"
            raise ValueError(msg)
        if self.estimator == "fair" and isinstance(self.samples, tuple) and len(self.samples) < 2:
            msg = "estimator='fair' needs at least 2 members, got samples=" + repr(list(self.samples))
            raise ValueError(msg)

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        lists = [c for c in (self.samples, self.member_weights) if isinstance(c, str)]
        return arrow_lists(frame, lists, empty_as="float64")

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        if self.mean is not None and self.std is not None:
            return {"": ratio(w.sum(gaussian_crps_row(q, self.y, self.mean, self.std)), w.total)}
        assert self.samples is not None
        ens = ensemble(q, self.y, self.samples, w.row, self.member_weights)
        if self.estimator == "fair" and isinstance(self.samples, str):
            col = list_column(q, self.samples)
            q.check(
                f"samples column {self.samples!r} has single-member ensembles (estimator='fair' needs 2+)",
                col.list.len() == 1,
            )
        t = q.table(("crps_ensemble", ens, self.estimator), _crps_table(ens, self.estimator))
        return {"": nw.when(t.col("bad").fill_null(0.0) == 0).then(ratio(t.col("crps").fill_null(0.0), w.total))}


def crps(
    y: Column,
    *,
    mean: Column | None = None,
    std: Column | None = None,
    samples: Column | Sequence[Column] | None = None,
    quantiles: Mapping[float, Column] | None = None,
    estimator: Estimator = "plain",
    weights: Column | None = None,
    counts: Column | None = None,
    member_weights: Column | Sequence[Column] | None = None,
) -> CRPS:
    """Continuous ranked probability score (CRPS), averaged over rows; lower is better.

    ``CRPS(F, y) = int (F(x) - 1[y <= x])^2 dx = E|X - y| - (1/2) E|X - X'|``
    with ``X, X'`` independent draws from the forecast ``F`` (Matheson and
    Winkler 1976; Gneiting and Raftery 2007).  The metric is the mean over rows.

    - **Gaussian** (``mean=``, ``std=``): the closed form
      ``std * (z (2 Phi(z) - 1) + 2 phi(z) - 1/sqrt(pi))``, ``z = (y - mean) / std``
      (Gneiting et al. 2005); ``scipy.stats.norm`` / scoringrules'
      ``crps_normal`` give the same values.
    - **Ensemble** (``samples=``, ``m`` members ``x_1..x_m``): exact for the
      ensemble's empirical distribution, from the sorted members
      ``x_(1) <= ... <= x_(m)`` in ``O(m log m)``:
      ``(1/m) sum_i |x_i - y| - (1/m^2) sum_i (2 i - m - 1) x_(i)``
      (``estimator="plain"``, the default: the CRPS of the empirical
      distribution, scoringrules' default ``crps_ensemble`` estimator and
      properscoring's ``crps_ensemble``).  ``estimator="fair"`` divides the
      second sum by ``m (m - 1)`` instead: the unbiased ("fair") estimator of
      the CRPS of the distribution the members are drawn from (Ferro 2014;
      scoringrules' ``estimator="fair"``), which needs 2 or more members.

    The output ``crps`` is always an exact CRPS.  For quantile forecasts use
    :func:`quantile_crps` (output ``quantile_crps``), an approximation:
    ``crps(quantiles=...)`` raises a ``ValueError`` pointing to it (0.3).

    Parameters
    ----------
    y : Column
        Column of observed values.
    mean, std : Column, optional
        Columns of a Gaussian forecast's mean and standard deviation
        (``std > 0``).
    samples : Column or list of Column, optional
        An ensemble: a list column (polars List or Array, Arrow list, or a
        pandas ``object`` column of lists or numpy arrays; members may differ
        in number between rows), or a list of member columns.
    quantiles : dict, optional
        Not accepted since 0.3 (a ``ValueError`` pointing to
        :func:`quantile_crps`, whose output is named ``quantile_crps``).
    estimator : {"plain", "fair"}, default "plain"
        The ensemble estimator (see above); ignored for a Gaussian forecast.
    weights : Column, optional
        Column of non-negative row weights (one per forecast): the mean over
        rows becomes the weighted mean ``sum_i w_i CRPS_i / sum_i w_i``, for
        every forecast kind (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").
    member_weights : Column or list of Column, optional
        Weights of the ensemble's members, aligned with ``samples``: a list
        column (with a list column of samples, of the same lengths) or one
        column per member column.  The forecast is the weighted empirical
        distribution: ``CRPS = sum_i w_i |x_i - y| - (1/2) sum_{i,j} w_i w_j
        |x_i - x_j|`` with the weights normalised per forecast (properscoring's
        ``crps_ensemble(weights=)``), still from the sorted members.
        Weights are finite, non-negative, with a positive total per forecast
        (else invalid rows); ``estimator="plain"`` only.  List columns on
        DuckDB and PySpark raise :class:`~conformal_frames.BackendLimitError`
        (two list columns cannot be exploded together there; member columns
        work on every backend).

    Returns
    -------
    CRPS
        A metric object.  ``df.conformal.crps(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``crps`` and ``n`` (lazy in, lazy out).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.0, 1.0], "mu": [0.0, 0.0], "sd": [1.0, 1.0],
    ...                    "ens": [[-1.0, 0.0, 1.0], [0.0, 2.0, 2.0]]})
    >>> round(df.conformal.crps("y", mean="mu", std="sd"), 6)
    0.418068
    >>> round(df.conformal.crps("y", samples="ens"), 6)
    0.388889

    References
    ----------
    J. E. Matheson and R. L. Winkler (1976), "Scoring rules for continuous
    probability distributions", Management Science 22(10), 1087-1096.
    T. Gneiting and A. E. Raftery (2007), "Strictly proper scoring rules,
    prediction, and estimation", JASA 102(477), 359-378.
    C. A. T. Ferro (2014), "Fair scores for ensemble forecasts", QJRMS
    140(683), 1917-1923.
    J. Berrisch and F. Ziel (2023), "CRPS learning", Journal of Econometrics
    237(2), 105221.
    """
    if quantiles is not None:
        msg = (
            "crps(quantiles=...) is not an exact CRPS; use cf.quantile_crps(y, quantiles=...) (output "
            "'quantile_crps'): the approximation from quantiles, each level weighted by its share of (0, 1) "
            "(crps(quantiles=) of 0.2 weighted the levels equally, 33% below the CRPS at the forecast-hub levels)"
        )
        raise ValueError(msg)
    return CRPS(
        y=role(y),
        mean=role(mean),
        std=role(std),
        samples=check_samples(samples) if samples is not None else None,
        estimator=estimator,
        weights=role(weights),
        counts=role(counts),
        member_weights=check_samples(member_weights, "member_weights") if member_weights is not None else None,
    )


@dataclass(frozen=True, kw_only=True)
class QuantileCRPS(CrossingOutputs, Metric):
    y: str
    quantiles: Quantiles = checked(check_quantiles)
    weights: str | None = None
    counts: str | None = None
    crossing: str = checked(check_crossing, "score")
    default_name = "quantile_crps"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        row = quantile_crps_row(q, self.y, self.quantiles, self.crossing)
        return {"": ratio(w.sum(row), w.total), **crossing_outputs(self, q, self.quantiles, self.counts)}


def quantile_crps(
    y: Column,
    *,
    quantiles: Mapping[float, Column],
    weights: Column | None = None,
    counts: Column | None = None,
    crossing: str = "score",
) -> QuantileCRPS:
    """The CRPS approximated from quantile forecasts, averaged over rows; lower is better.

    The CRPS is ``2 int_0^1 rho_tau(y - F^-1(tau)) dtau``, with the pinball
    loss ``rho_tau(u) = u (tau - 1[u < 0])`` (Laio and Tamea 2007; Gneiting
    and Ranjan 2011).  From ``K`` quantiles ``q_k`` at levels ``tau_1 < ...
    < tau_K`` the integral becomes the sum ``2 sum_k w_k rho_tau_k(y -
    q_k)``, each level weighted by its share of (0, 1): ``w_k`` runs from
    the midpoint with the level below to the midpoint with the level above,
    the end levels taking the tails (``w_1 = (tau_1 + tau_2) / 2``), so the
    weights add up to 1 and uneven levels are not biased.  With equally
    spaced levels ``k / (K + 1)`` the interior weights are ``1 / (K + 1)``.

    Bias for a calibrated Gaussian forecast (expected score against the
    exact CRPS ``1 / sqrt(pi)`` of a standard normal): -2.8 % with the 9
    forecast-hub levels 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.975
    (equal weights, ``(2 / K) sum_k rho``: -33 %) and -0.17 % with the 23
    hub levels 0.01, 0.025, 0.05, 0.1, ..., 0.9, 0.95, 0.975, 0.99 (equal
    weights: -11 %).  The tails beyond the end levels are missing, so the
    approximation is below the CRPS for a forecast that is right.

    Parameters
    ----------
    y : Column
        Column of observed values.
    quantiles : dict
        Quantile forecasts ``{level: column}``, levels in (0, 1).
    weights : Column, optional
        Column of non-negative row weights: the weighted mean over rows (see
        the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows (see the docs page "Weights").
    crossing : {"score", "sort", "invalid"}, default "score"
        Rows whose quantiles cross: ``"score"`` scores them as given,
        ``"sort"`` rearranges each row's quantiles in increasing order first
        (never a higher score); both add the output ``quantile_crps_n_crossing``
        and warn with the count on eager input.  ``"invalid"``: crossing rows
        are invalid rows.

    Returns
    -------
    QuantileCRPS
        A metric object.  ``df.conformal.quantile_crps(...)`` returns a float
        on an eager frame without ``by=``, otherwise a frame of the caller's
        type with the group keys, ``quantile_crps``,
        ``quantile_crps_n_crossing`` and ``n`` (lazy in, lazy out).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.0, 1.0], "q25": [-0.5, -0.5], "q50": [0.0, 0.0], "q75": [0.5, 0.5]})
    >>> df.conformal.quantile_crps("y", quantiles={0.25: "q25", 0.5: "q50", 0.75: "q75"})
    0.5

    References
    ----------
    F. Laio and S. Tamea (2007), "Verification tools for probabilistic
    forecasts of continuous hydrological variables", HESS 11, 1267-1277.
    T. Gneiting and R. Ranjan (2011), "Comparing density forecasts using
    threshold- and quantile-weighted scoring rules", JBES 29(3), 411-422.
    """
    return QuantileCRPS(
        y=role(y), quantiles=check_quantiles(quantiles), weights=role(weights), counts=role(counts), crossing=crossing
    )


# ---------------------------------------------------------------------------
# PIT: per forecast, the interval [lo, hi] of CDF values at y, randomized
# ---------------------------------------------------------------------------
def uniform_hash(frame: nw.LazyFrame, index: str, seed: int, out: str) -> nw.LazyFrame:
    """Add ``out``: a pseudo-random number in (0, 1) per row of the integer column ``index``.

    Three rounds of ``h -> h^2 + c mod P`` in exact Float64 integer
    arithmetic: the same values on every engine (no engine random generator,
    whose streams differ between engines and partitions).  The constants are
    :func:`~conformal_frames.engine.native_ensembles.uniform_hash_parts`'s
    (``conformal_frames.polars`` draws the same values).
    """
    offset, rounds = uniform_hash_parts(seed)
    frame = frame.with_columns(mod_p(nw.col(index).cast(nw.Float64) + offset).alias(out))
    for c in rounds:
        frame = frame.with_columns(mod_p(nw.col(out) * nw.col(out) + (c + nw.col(index).cast(nw.Float64))).alias(out))
    return frame.with_columns(((nw.col(out) + 0.5) / HASH_P).alias(out))


@dataclass(frozen=True)
class PITSource:
    """How a sub-query gets each forecast's PIT interval ``[lo, hi]`` and its null-member flag."""

    #: a Gaussian forecast's PIT row (``lo = hi``)
    gaussian: str | None = None
    #: an ensemble's rows
    ens: Ensemble | None = None
    #: a quantile forecast's ``lo`` and ``hi`` rows
    interval: tuple[str, str] | None = None
    #: the row column of the forecasts' weights (``weights=``)
    weight: str | None = None

    def bounds(self, rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        """Per forecast: ``keys``, ``lo``, ``hi``, ``bad`` (1.0 when it has null members) and the weight ``w``."""
        lo, hi, bad, w = ref.name("lo"), ref.name("hi"), ref.name("bad"), ref.name("w")
        weight = [] if self.weight is None else [nw.col(self.weight).alias(w)]
        if self.gaussian is not None:
            pit = nw.col(self.gaussian)
            return rows.select(*keys, pit.alias(lo), pit.alias(hi), nw.lit(0.0).alias(bad), *weight)
        if self.interval is not None:
            a, b = self.interval
            return rows.select(*keys, nw.col(a).alias(lo), nw.col(b).alias(hi), nw.lit(0.0).alias(bad), *weight)
        assert self.ens is not None
        per = ensemble_rows(rows, keys, self.ens, ref)
        below, equal = nw.col(ref.name("below")), nw.col(ref.name("equal"))
        if self.ens.member_weights is not None:  # the weighted empirical CDF: [F(y-), F(y)]
            total_w = nw.col(ref.name("m"))
            lo_e, hi_e = below / total_w, (below + equal) / total_w
        else:  # the rank among the members and y
            m1 = nw.col(ref.name("m")) + 1.0
            lo_e, hi_e = below / m1, (below + equal + 1.0) / m1
        return per.select(
            *keys,
            lo_e.alias(lo),
            hi_e.alias(hi),
            (nw.col(ref.name("nulls")) > 0).cast(nw.Float64).alias(bad),
            *([] if self.weight is None else [nw.col(w)]),
        )

    def values(self, rows: nw.LazyFrame, keys: list[str], ref: TableRef, seed: int) -> nw.LazyFrame:
        """Per forecast: ``keys``, the randomized PIT ``u = lo + V (hi - lo)`` and ``bad``.

        With a weight: the forecasts of positive weight only, with their weight ``w``.
        """
        frame = self.bounds(rows, keys, ref)
        lo, hi, u = ref.name("lo"), ref.name("hi"), ref.name("u")
        order = [*keys, lo, hi]
        if self.weight is not None:  # a forecast of weight 0 takes no part (not even in the draws)
            frame = frame.filter(nw.col(ref.name("w")) > 0.0)
            order.append(ref.name("w"))
        if self.gaussian is not None:
            return frame.with_columns(nw.col(lo).alias(u))
        # forecasts with the same keys, [lo, hi] (and weight) are interchangeable: any order
        # of them gives the same multiset of PIT values per group, on every engine.  The hash
        # takes the forecast's rank in its group (its position in the frame ordered by keys
        # and bounds, less that of its group's first forecast): a group's draws do not
        # depend on the other groups, nor on how an engine orders the keys (e.g. categoricals)
        idx, v = ref.name("idx"), ref.name("v")
        frame = frame.with_row_index(idx, order_by=order)
        frame = frame.with_columns((nw.col(idx) - over(nw.col(idx).min(), keys)).alias(idx))
        frame = uniform_hash(frame, idx, seed, v)
        return frame.with_columns((nw.col(lo) + nw.col(v) * (nw.col(hi) - nw.col(lo))).alias(u))


def pit_source(
    q: Query,
    y: str,
    mean: str | None,
    std: str | None,
    samples: Any,
    quantiles: Quantiles | None = None,
    weight: str | None = None,
    crossing: str = "invalid",
    member_weights: str | tuple[str, ...] | None = None,
) -> PITSource:
    """Register the forecast's rows; Gaussian: ``Phi((y - mean) / std)``; ``weight``: a weight row column."""
    if quantiles is not None:
        return PITSource(interval=quantile_pit_rows(q, y, quantiles, crossing), weight=weight)
    if mean is not None and std is not None:
        return PITSource(gaussian=gaussian_pit_row(q, y, mean, std), weight=weight)
    return PITSource(ens=ensemble(q, y, samples, weight, member_weights), weight=weight)


def _histogram_table(source: PITSource, n_bins: int, seed: int) -> TableFn:
    """Sub-query: per group, the forecasts in each PIT bin ``[k/B, (k+1)/B)`` (the last one closed).

    ``n<k>`` counts them; with a weight, ``w<k>`` is their total weight.
    """

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        frame = source.values(rows, keys, ref, seed)
        b = (nw.col(ref.name("u")) * float(n_bins)).floor().clip(0.0, float(n_bins - 1))
        frame = frame.with_columns(b.alias(ref.name("b")))
        frame = frame.with_columns(
            *[(nw.col(ref.name("b")) == float(k)).cast(nw.Float64).alias(ref.name(f"n{k}")) for k in range(n_bins)]
        )
        sums = [nw.col(ref.name(f"n{k}")).sum() for k in range(n_bins)]
        if source.weight is not None:
            w = nw.col(ref.name("w"))
            frame = frame.with_columns(
                *[(nw.col(ref.name(f"n{k}")) * w).alias(ref.name(f"w{k}")) for k in range(n_bins)]
            )
            sums += [nw.col(ref.name(f"w{k}")).sum() for k in range(n_bins)]
        return aggregate(frame, keys, [*sums, nw.col(ref.name("bad")).sum()])

    return native_table(build, _draws(source, seed, n_bins))


def _ks_table(source: PITSource, seed: int) -> TableFn:
    """Sub-query: per group, ``D = sup_u |F_n(u) - u|`` of the randomized PIT values (ties aggregated)."""

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        frame = source.values(rows, keys, ref, seed)
        u, c = ref.name("u"), ref.name("c")
        bad = aggregate(frame, keys, [nw.col(ref.name("bad")).sum()])
        ties = ordered_cells(frame.with_columns(nw.lit(1.0).alias(c)), keys, u, [c], running=[c])
        return _ks_distance(ties, keys, ref, u, c, bad)

    return native_table(build, _draws(source, seed))


def _draws(source: PITSource, seed: int, n_bins: int | None = None) -> PITDraws:
    """The specification of a randomized PIT table's polars form (``engine.native_ensembles``)."""
    return PITDraws(ens=source.ens, interval=source.interval, weight=source.weight, seed=seed, n_bins=n_bins)


def _ks_cells(u: str, one: str) -> TableFn:
    """Cells (:meth:`~conformal_frames.engine.Query.cells`): ``D`` of the PIT row ``u``, one per row (mergeable)."""

    def build(cells: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        # without keys, the one row of the group (also of no rows) carries the maximum
        rows = None if keys else aggregate(cells, keys, [nw.col(one).sum().alias(ref.name("rows"))])
        return _ks_distance(cells, keys, ref, u, one, rows)

    return build


def _ks_distance(
    ties: nw.LazyFrame, keys: list[str], ref: TableRef, u: str, c: str, base: nw.LazyFrame | None
) -> nw.LazyFrame:
    """Per group: ``d = sup |F_n - u|`` over the ordered ``ties`` (count ``c``), joined to ``base``'s columns."""
    tot, d = ref.name("tot"), ref.name("d")
    end = running_total(c)
    ties = ties.with_columns(over(nw.col(c).sum(), keys).alias(tot))
    above = nw.col(end) / nw.col(tot) - nw.col(u)
    below = nw.col(u) - (nw.col(end) - nw.col(c)) / nw.col(tot)
    ties = ties.with_columns(nw.max_horizontal(above, below).alias(d))
    if keys:
        stats = aggregate(ties, keys, [nw.col(d).max()])
        return stats if base is None else join_keys(stats, base, keys)
    assert base is not None
    # no keys: the maximum as a group of its own, joined to the one row of ``base``; the
    # maximum of no rows (an empty frame, every row dropped) is then a typed null on
    # every engine (pandas with Arrow dtypes makes an object column of pd.NA otherwise)
    one = ref.name("one")
    stat = ties.with_columns(nw.lit(1).alias(one)).group_by(one).agg(nw.col(d).max())
    return base.with_columns(nw.lit(1).alias(one)).join(stat, on=one, how="left").drop(one)


# ---------------------------------------------------------------------------
# the Kolmogorov distribution (sup of a Brownian bridge), lazily
# ---------------------------------------------------------------------------
_KS_SWITCH = 1.0
_KS_TAIL_TERMS = 6  # 2 sum (-1)^(k-1) exp(-2 k^2 x^2), x >= 1: exp(-72) ~ 5e-32
_KS_THETA_TERMS = 4  # sqrt(2 pi)/x sum exp(-(2k-1)^2 pi^2 / (8 x^2)), x < 1: exp(-49 pi^2 / 8) ~ 7e-27


def with_kolmogorov_sf(frame: nw.LazyFrame, x: str, out: str, tmp: str) -> nw.LazyFrame:
    """Add ``out = P(K > x)``, ``K`` the Kolmogorov distribution (``scipy.stats.kstwobign``).

    Two series (Feller 1948), switched at ``x = 1``: ``2 sum_k (-1)^(k-1)
    exp(-2 k^2 x^2)`` above, ``1 - sqrt(2 pi)/x sum_k exp(-(2k-1)^2 pi^2 /
    (8 x^2))`` below; both to double precision with the terms kept.
    Null stays null.
    """
    big, small = f"{tmp}big", f"{tmp}small"
    xf = nw.col(x).cast(nw.Float64)
    frame = frame.with_columns(
        xf.clip(lower_bound=_KS_SWITCH, upper_bound=1e3).alias(big),
        xf.clip(lower_bound=1e-3, upper_bound=_KS_SWITCH).alias(small),
    )
    xb, xs = nw.col(big), nw.col(small)
    tail = nw.sum_horizontal(
        *[(2.0 * (-1) ** (k - 1)) * (-2.0 * k * k * xb * xb).exp() for k in range(1, _KS_TAIL_TERMS + 1)]
    )
    theta = nw.sum_horizontal(
        *[(-((2 * k - 1) ** 2) * math.pi**2 / 8.0 / (xs * xs)).exp() for k in range(1, _KS_THETA_TERMS + 1)]
    )
    sf = nw.when(xf >= _KS_SWITCH).then(tail).otherwise(1.0 - math.sqrt(2.0 * math.pi) / xs * theta)
    sf = nw.when(xf <= 1e-3).then(nw.lit(1.0)).otherwise(sf).clip(0.0, 1.0)
    return frame.with_columns(nw.when(~xf.is_null()).then(sf).alias(out)).drop(big, small)


# ---------------------------------------------------------------------------
# PIT histogram and uniformity test
# ---------------------------------------------------------------------------
_HISTOGRAM_COLUMNS = ("bin_low", "bin_high", "frequency", "band_low", "band_high")


@dataclass(frozen=True, kw_only=True)
class _PITMetric(CrossingOutputs, Metric):
    y: str
    mean: str | None = checked(optional(check_column), None)
    std: str | None = checked(optional(check_column), None)
    samples: str | tuple[str, ...] | None = checked(optional(check_samples), None)
    quantiles: tuple[tuple[float, str], ...] | None = checked(optional(check_quantiles), None)
    seed: int = 0
    crossing: str = checked(check_crossing, "score")
    member_weights: str | tuple[str, ...] | None = checked(optional(check_samples), None)
    mergeable_alternative = (
        "the same metric of a Gaussian forecast (mean=, std=); the PIT of an ensemble or quantile forecast "
        "is randomized by each forecast's rank in its whole group, so it cannot be summed per day"
    )

    def counts_crossing(self) -> bool:
        return self.quantiles is not None and self.crossing != "invalid"

    def rearranges(self) -> bool:
        return True  # the PIT needs a non-decreasing quantile function

    def crossing_count(self, q: Query) -> dict[str, nw.Expr | None]:
        return crossing_outputs(self, q, self.quantiles, None) if self.quantiles is not None else {}

    def __post_init__(self) -> None:
        super().__post_init__()
        one_forecast(self.mean, self.std, self.samples, self.quantiles)
        check_member_weights(self.samples, self.member_weights)

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        lists = [c for c in (self.samples, self.member_weights) if isinstance(c, str)]
        return arrow_lists(frame, lists, empty_as="float64")

    def source(self, q: Query, weight: str | None = None) -> PITSource:
        return pit_source(
            q, self.y, self.mean, self.std, self.samples, self.quantiles, weight, self.crossing, self.member_weights
        )


@dataclass(frozen=True, kw_only=True)
class PITHistogram(_PITMetric):
    n_bins: int = 10
    ci_level: float = 0.95
    weights: str | None = None
    default_name = "pit_histogram"
    kind = "table"
    long = True

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        from scipy.special import ndtri

        w = q.weighting(self.weights)
        counts, masses, ok = self._bins(q, self.source(q, w.row), w)
        p = 1.0 / self.n_bins
        half = float(ndtri(0.5 + self.ci_level / 2)) * (p * (1.0 - p) / w.n_eff).sqrt()
        out: dict[str, nw.Expr | None] = {}
        for k in range(self.n_bins):
            out[f"bin{k}"] = _where(ok, ratio(masses[k], w.total))
            out[f"bin{k}_n"] = _where(ok, counts[k])
        out["band_low"] = _where(ok, (p - half).clip(lower_bound=0.0))
        out["band_high"] = _where(ok, (p + half).clip(upper_bound=1.0))
        if w.weighted:
            out["n_eff"] = w.n_eff
        return out | self.crossing_count(q)

    def _bins(self, q: Query, source: PITSource, w: Weighting) -> tuple[list[nw.Expr], list[nw.Expr], nw.Expr | None]:
        """Per bin: the forecasts (of positive weight) and their weight; the groups without null members (or ``None``).

        A Gaussian forecast's PIT is a row column: its bins are elementary
        sums of the main aggregation (mergeable, as uniform-bin ``ece``).  A
        randomized PIT draws by the forecast's rank in its group: a sub-query.
        """
        if source.gaussian is not None:
            u, top = source.gaussian, float(self.n_bins - 1)
            b = q.row(("pit_bin", u, self.n_bins), (nw.col(u) * float(self.n_bins)).floor().clip(0.0, top), inputs=[u])
            rows = [
                q.row(("pit_in_bin", b, k), (nw.col(b) == float(k)).cast(nw.Float64), inputs=[b])
                for k in range(self.n_bins)
            ]
            return [w.count(r) for r in rows], [w.sum(r) for r in rows], None
        key = ("pit_histogram", source, self.n_bins, self.seed)
        t = q.table(key, _histogram_table(source, self.n_bins, self.seed))
        counts = [t.col(f"n{k}").fill_null(0.0) for k in range(self.n_bins)]
        masses = [t.col(f"w{k}").fill_null(0.0) for k in range(self.n_bins)] if w.weighted else counts
        return counts, masses, t.col("bad").fill_null(0.0) == 0

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        name, b = self.output_name, float(self.n_bins)
        parts = [
            frame.select(
                *keys,
                nw.lit(k, nw.Int64).alias("bin"),
                nw.lit(k / b, nw.Float64).alias("bin_low"),
                nw.lit((k + 1) / b, nw.Float64).alias("bin_high"),
                nw.col(f"{name}_bin{k}").alias("frequency"),
                nw.col(f"{name}_band_low").alias("band_low"),
                nw.col(f"{name}_band_high").alias("band_high"),
                *([nw.col(f"{name}_n_eff").alias("n_eff")] if self.weights is not None else []),
                nw.col(f"{name}_bin{k}_n").cast(nw.Int64).alias("n"),
            )
            for k in range(self.n_bins)
        ]
        return sort_result(nw.concat(parts, how="vertical"), *keys, "bin")


@dataclass(frozen=True, kw_only=True)
class PITTest(_PITMetric):
    default_name = "pit_test"
    kind = "test"
    result = PITTestResult

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        source = self.source(q)
        if source.gaussian is not None:  # a PIT per row: its ordered cells (mergeable, as ks_test)
            one = q.row(("one",), nw.lit(1.0))
            u = source.gaussian
            t = q.cells(("pit_ks", u), _ks_cells(u, one), order=u, sums=(one,))
            stat = t.col("d")
        else:
            t = q.table(("pit_ks", source, self.seed), _ks_table(source, self.seed))
            stat = nw.when(t.col("bad").fill_null(0.0) == 0).then(t.col("d"))
        scaled = q.finalize(("pit_ks_scaled", t.prefix), _scaled(stat, q.n))
        pvalue = q.finalize(("pit_ks_pvalue", t.prefix), _pvalue(scaled.name("x")))
        return {"": stat, "pvalue": pvalue.col("p"), **self.crossing_count(q)}


def _where(ok: nw.Expr | None, value: nw.Expr) -> nw.Expr:
    """``value`` where ``ok`` holds (null elsewhere); ``value`` itself without a condition."""
    return value if ok is None else nw.when(ok).then(value)


def _scaled(stat: nw.Expr, n: nw.Expr) -> FinalizeFn:
    def build(table: nw.LazyFrame, ref: TableRef) -> nw.LazyFrame:
        return table.with_columns((stat * n.cast(nw.Float64).sqrt()).alias(ref.name("x")))

    return build


def _pvalue(x: str) -> FinalizeFn:
    def build(table: nw.LazyFrame, ref: TableRef) -> nw.LazyFrame:
        return with_kolmogorov_sf(table, x, ref.name("p"), ref.name("tmp"))

    return build


@no_counts(
    "pit_histogram",
    "the PIT of an ensemble or quantile forecast is randomized: one draw per row, not per represented row",
)
def pit_histogram(
    y: Column,
    *,
    mean: Column | None = None,
    std: Column | None = None,
    samples: Column | Sequence[Column] | None = None,
    quantiles: Mapping[float, Column] | None = None,
    n_bins: int = 10,
    ci_level: float = 0.95,
    seed: int = 0,
    weights: Column | None = None,
    crossing: str = "score",
    member_weights: Column | Sequence[Column] | None = None,
) -> PITHistogram:
    """PIT histogram: the frequency of the PIT values in ``n_bins`` equal bins, with a band.

    The PIT of a forecast with CDF ``F`` is ``F(y)``: uniform on (0, 1) when
    ``y`` is drawn from the forecast (Dawid 1984; Gneiting, Balabdaoui and
    Raftery 2007).  Gaussian: ``Phi((y - mean) / std)``.  Ensemble of ``m``
    members: the randomized verification rank ``(b + V (e + 1)) / (m + 1)``,
    ``b`` members below ``y``, ``e`` members equal to ``y`` and ``V`` uniform on
    (0, 1): exactly uniform when ``y`` and the members are exchangeable, ties
    included.  Quantiles ``q_1 <= ... <= q_K`` at levels ``tau_1 < ... <
    tau_K``: the CDF interpolates linearly between them, so a ``y`` between
    two quantiles has the interpolated level; where that is not one number
    the PIT is uniform on the levels consistent with ``y``: ``(0, tau_1)``
    below the lowest quantile, ``(tau_K, 1)`` above the highest (the tails
    are unknown) and ``(tau_j, tau_(j+1))`` on a flat stretch
    ``q_j = q_(j+1) = y``.  The interpolation assumes a continuous outcome: a
    discrete one (counts) that often equals a quantile gives PIT values piled
    at the levels ``tau_j`` even for exact quantiles, so the histogram and the
    test reject a perfect forecast; pass such forecasts as an ensemble
    (``samples=``), whose randomized rank handles ties.  ``V`` is a deterministic hash of ``seed`` and the
    forecast's rank in its group ordered by its PIT bounds (no engine random
    generator), so results agree across backends; the draws of one group do
    not depend on the other groups.

    Per (group, bin ``k``): ``bin``, the bin edges ``bin_low = k / B`` and
    ``bin_high = (k + 1) / B`` (the last bin includes 1), the ``frequency`` of
    PIT values in the bin, ``n`` (forecasts in the bin), and the band
    ``band_low``/``band_high``: ``1/B -/+ z sqrt((1/B)(1 - 1/B) / n_group)``
    with ``z`` the normal quantile of ``ci_level`` (clipped to [0, 1]), the
    acceptance region of the binomial score test of ``frequency = 1/B`` (a bin
    outside it has a frequency whose Wilson interval excludes ``1/B``).  A
    calibrated forecast has a flat histogram; a U shape means too narrow
    forecasts, a hump too wide ones.  Empty bins are rows with ``n = 0``.
    Inside ``evaluate`` the wide columns are ``pit_histogram_bin<k>`` (the frequency),
    ``pit_histogram_bin<k>_n``, ``pit_histogram_band_low`` and ``pit_histogram_band_high``.

    Parameters
    ----------
    y : Column
        Column of observed values.
    mean, std : Column, optional
        Columns of a Gaussian forecast's mean and standard deviation (``std > 0``).
    samples : Column or list of Column, optional
        An ensemble: a list column (polars List or Array, Arrow list, or a
        pandas ``object`` column of lists or numpy arrays) or a list of member
        columns.
    quantiles : dict, optional
        Quantile forecasts ``{level: column}``, levels in (0, 1).
    seed : int, default 0
        Seed of the randomization of ensemble and quantile PIT values (see
        above); the same seed gives the same values on every backend.
    n_bins : int, default 10
        Number of bins ``B``.
    ci_level : float, default 0.95
        Confidence level of the band.
    weights : Column, optional
        Column of non-negative forecast weights: a bin's ``frequency`` is the
        weight of its PIT values over the group's total weight, its ``n``
        counts its forecasts of positive weight (a forecast of weight 0 takes
        no part, not even in the randomization), and the band is taken at
        Kish's effective sample size ``n_eff = (sum_i w_i)^2 / sum_i w_i^2``
        (``1/B -/+ z sqrt((1/B)(1 - 1/B) / n_eff)``, the variance of a
        weighted proportion), with a column ``n_eff``.  An integer weight
        ``k`` gives the frequencies of the forecast repeated ``k`` times for
        a Gaussian forecast; for ensembles and quantiles the repeated
        forecast would draw ``k`` randomized PIT values, the weighted one
        draws one (the same law, not the same values).  See the docs page
        "Weights".
    crossing : {"score", "sort", "invalid"}, default "score"
        Quantile forecasts whose quantiles cross: the PIT needs a
        non-decreasing quantile function, so ``"score"`` and ``"sort"`` both
        rearrange each row's quantiles in increasing order first, count the
        rows (``<name>_n_crossing`` in ``evaluate``) and warn with the count
        on eager input; ``"invalid"``: crossing rows are invalid rows.
    member_weights : Column or list of Column, optional
        Weights of the ensemble's members, aligned with ``samples`` (a list
        column, or one column per member): the PIT is then randomized on the
        weighted empirical CDF, ``F(y-) + V (F(y) - F(y-))`` with ``F(t)``
        the weight of the members ``<= t`` over the total (not the rank).

    Returns
    -------
    PITHistogram
        A metric object; ``df.conformal.pit_histogram(...)`` returns the long
        table, a frame of the caller's type (lazy in, lazy out).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.1, -1.5, 0.3, 2.0], "mu": [0.0] * 4, "sd": [1.0] * 4})
    >>> df.conformal.pit_histogram("y", mean="mu", std="sd", n_bins=2).select("bin", "frequency", "n")
    shape: (2, 3)
    ┌─────┬───────────┬─────┐
    │ bin ┆ frequency ┆ n   │
    │ --- ┆ ---       ┆ --- │
    │ i64 ┆ f64       ┆ i64 │
    ╞═════╪═══════════╪═════╡
    │ 0   ┆ 0.25      ┆ 1   │
    │ 1   ┆ 0.75      ┆ 3   │
    └─────┴───────────┴─────┘

    References
    ----------
    T. Gneiting, F. Balabdaoui and A. E. Raftery (2007), "Probabilistic
    forecasts, calibration and sharpness", JRSS B 69(2), 243-268.
    """
    return PITHistogram(
        y=role(y),
        mean=role(mean),
        std=role(std),
        samples=check_samples(samples) if samples is not None else None,
        quantiles=_quantiles(quantiles),
        n_bins=n_bins,
        ci_level=ci_level,
        seed=seed,
        weights=role(weights),
        crossing=crossing,
        member_weights=check_samples(member_weights, "member_weights") if member_weights is not None else None,
    )


@no_weights(
    "pit_test",
    "the Kolmogorov-Smirnov law of a weighted empirical CDF is not standard; "
    "pit_histogram(weights=) gives the weighted PIT frequencies with a band at Kish's n_eff",
)
def pit_test(
    y: Column,
    *,
    mean: Column | None = None,
    std: Column | None = None,
    samples: Column | Sequence[Column] | None = None,
    quantiles: Mapping[float, Column] | None = None,
    seed: int = 0,
    crossing: str = "score",
    member_weights: Column | Sequence[Column] | None = None,
) -> PITTest:
    """Uniformity test of the PIT values (Kolmogorov-Smirnov).

    The PIT of a forecast with CDF ``F`` is ``F(y)``: uniform on (0, 1) when
    ``y`` is drawn from the forecast (Dawid 1984; Gneiting, Balabdaoui and
    Raftery 2007).  Gaussian: ``Phi((y - mean) / std)``.  Ensemble of ``m``
    members: the randomized verification rank ``(b + V (e + 1)) / (m + 1)``,
    ``b`` members below ``y``, ``e`` members equal to ``y`` and ``V`` uniform on
    (0, 1): exactly uniform when ``y`` and the members are exchangeable, ties
    included.  Quantiles ``q_1 <= ... <= q_K`` at levels ``tau_1 < ... <
    tau_K``: the CDF interpolates linearly between them, so a ``y`` between
    two quantiles has the interpolated level; where that is not one number
    the PIT is uniform on the levels consistent with ``y``: ``(0, tau_1)``
    below the lowest quantile, ``(tau_K, 1)`` above the highest (the tails
    are unknown) and ``(tau_j, tau_(j+1))`` on a flat stretch
    ``q_j = q_(j+1) = y``.  The interpolation assumes a continuous outcome: a
    discrete one (counts) that often equals a quantile gives PIT values piled
    at the levels ``tau_j`` even for exact quantiles, so the histogram and the
    test reject a perfect forecast; pass such forecasts as an ensemble
    (``samples=``), whose randomized rank handles ties.  ``V`` is a deterministic hash of ``seed`` and the
    forecast's rank in its group ordered by its PIT bounds (no engine random
    generator), so results agree across backends; the draws of one group do
    not depend on the other groups.

    The statistic is ``D = sup_u |F_n(u) - u|``, ``F_n`` the empirical CDF of
    the group's ``n`` PIT values (``scipy.stats.kstest(pit, "uniform")``'s
    statistic); the p-value is asymptotic, ``P(K > sqrt(n) D)`` with ``K``
    Kolmogorov's distribution (``scipy.stats.kstwobign``; scipy's
    ``kstest(..., method="asymp")``), computed lazily on every backend.  Small
    p-values reject calibration.

    Parameters
    ----------
    y : Column
        Column of observed values.
    mean, std : Column, optional
        Columns of a Gaussian forecast's mean and standard deviation (``std > 0``).
    samples : Column or list of Column, optional
        An ensemble: a list column (polars List or Array, Arrow list, or a
        pandas ``object`` column of lists or numpy arrays) or a list of member
        columns.
    quantiles : dict, optional
        Quantile forecasts ``{level: column}``, levels in (0, 1).
    seed : int, default 0
        Seed of the randomization of ensemble and quantile PIT values (see
        above); the same seed gives the same values on every backend.
    crossing : {"score", "sort", "invalid"}, default "score"
        Quantile forecasts whose quantiles cross: the PIT needs a
        non-decreasing quantile function, so ``"score"`` and ``"sort"`` both
        rearrange each row's quantiles in increasing order first, count the
        rows (``<name>_n_crossing`` in ``evaluate``) and warn with the count
        on eager input; ``"invalid"``: crossing rows are invalid rows.
    member_weights : Column or list of Column, optional
        Weights of the ensemble's members, aligned with ``samples`` (a list
        column, or one column per member): the PIT is then randomized on the
        weighted empirical CDF, ``F(y-) + V (F(y) - F(y-))`` with ``F(t)``
        the weight of the members ``<= t`` over the total (not the rank).

    Returns
    -------
    PITTest
        A metric object.  On an eager frame without ``by=``,
        ``df.conformal.pit_test(...)`` returns a
        :class:`~conformal_frames.PITTestResult` (``statistic, pvalue = res``);
        otherwise a frame with ``pit_test``, ``pit_test_pvalue`` and ``n``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.1, -1.5, 0.3, 2.0], "mu": [0.0] * 4, "sd": [1.0] * 4})
    >>> res = df.conformal.pit_test("y", mean="mu", std="sd")
    >>> round(res.statistic, 4), res.n
    (0.2898, 4)

    References
    ----------
    A. N. Kolmogorov (1933), "Sulla determinazione empirica di una legge di
    distribuzione", Giornale dell'Istituto Italiano degli Attuari 4, 83-91.
    """
    return PITTest(
        y=role(y),
        mean=role(mean),
        std=role(std),
        samples=check_samples(samples) if samples is not None else None,
        quantiles=_quantiles(quantiles),
        seed=seed,
        crossing=crossing,
        member_weights=check_samples(member_weights, "member_weights") if member_weights is not None else None,
    )
