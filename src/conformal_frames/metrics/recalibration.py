"""Calibration through recalibration: smooth ECE, CORP reliability, score decomposition.

Binary setting as in :mod:`conformal_frames.metrics.calibration`: a score ``s`` in
``[0, 1]`` and a label ``y`` in ``{0, 1}`` per row (same checks, same
invalid-row policy).  The three tools estimate the *recalibration function*
``s -> P(y = 1 | s)`` without bins:

* :func:`smooth_ece`: kernel smoothing of the residuals ``s - y`` with the
  automatic bandwidth of Blasiok and Nakkiran (ICLR 2024), as in the
  ``relplot`` package;
* :func:`corp_reliability`: the CORP reliability diagram of Dimitriadis,
  Gneiting and Jordan (PNAS 2021): isotonic (PAV) recalibration at each
  distinct score, with a consistency band under the hypothesis of
  calibration;
* :func:`score_decomposition`: the mean Brier or log score split into
  miscalibration, discrimination and uncertainty from the same PAV fit.

All three need the ordered rows of a group, which no SQL aggregation gives: a
per-group numpy step of the engine (:meth:`conformal_frames.engine.Query.per_group`).
They run on eager frames of every backend and stay lazy on polars LazyFrames
(``map_batches``); a lazy DuckDB, PySpark or Dask frame raises
``BackendLimitError`` (a ``NotImplementedError``) naming the backend and asking to collect first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames import engine
from conformal_frames._roles import Column, role
from conformal_frames._validate import (
    check_column,
    check_positive_int,
    check_probability,
    check_seed,
    checked,
    choice,
)
from conformal_frames.engine import GroupFn, InvalidPolicy, Metric, Query, no_weights
from conformal_frames.inputs.binary import binary_inputs, binary_row, score_row

METHODS = ["smooth_ece", "score_decomposition"]
#: functions of a frame that become ``.conformal`` methods
FRAME_METHODS = ["corp_reliability"]
__all__ = [*METHODS, "corp_reliability", "pav", "smooth_ece_numpy", "decomposition_numpy"]

ScoringRule = Literal["brier", "log"]
F64 = nw.Float64


# ---------------------------------------------------------------------------
# numpy kernels (one group)
# ---------------------------------------------------------------------------
def _split(group: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """Row indices of each group ``0 .. n_groups - 1`` (one stable sort)."""
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
    return [order[bounds[g] : bounds[g + 1]] for g in range(n_groups)]


def _cells(s: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct scores (ascending), their row counts and the sums of ``y``.

    With weights ``w``: the cells' weights and weighted sums of ``y``, over
    the rows of positive weight (a row of weight 0 is in no cell).
    """
    if w is not None:
        keep = w > 0
        s, y, w = s[keep], y[keep], w[keep]
    x, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    if w is None:
        return x, counts.astype(float), np.bincount(inverse.ravel(), weights=y, minlength=len(x))
    mass = np.bincount(inverse.ravel(), weights=w, minlength=len(x))
    return x, mass, np.bincount(inverse.ravel(), weights=w * y, minlength=len(x))


def pav(counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Isotonic (increasing) least-squares fit of the cell means ``sums / counts``
    weighted by ``counts``: the pool-adjacent-violators algorithm (scipy's)."""
    if len(counts) == 0:
        return np.empty(0)
    from scipy.optimize import isotonic_regression

    return np.asarray(isotonic_regression(sums / counts, weights=counts, increasing=True).x, dtype=float)


def _usable(s: np.ndarray, y: np.ndarray) -> bool:
    """A group the kernels can run on (invalid groups are masked by the engine)."""
    return len(s) > 0 and bool(np.all(np.isfinite(s)) and np.all(np.isfinite(y)))


# -- smooth ECE --------------------------------------------------------------
#: relplot's constants: the bisection of the bandwidth, the evaluation mesh,
#: the density floor and the smallest bandwidth tried
_SIGMA_STEPS = 10
_MESH = 200
_DENSITY_FLOOR = 1e-4
_SIGMA_FLOOR = 1e-3


def _spread(s: np.ndarray, values: np.ndarray, m: int) -> np.ndarray:
    """Each value split linearly between the two grid points ``k / (m - 1)`` around its score."""
    pos = s * (m - 1)
    left = np.clip(pos.astype(np.int64), 0, m - 2)
    right_share = pos - left
    return np.bincount(left, weights=(1 - right_share) * values, minlength=m) + np.bincount(
        left + 1, weights=right_share * values, minlength=m
    )


def _reflected_smooth(mass: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian kernel smoothing of grid masses on [0, 1], mirrored at 0 and 1."""
    from scipy.signal import fftconvolve  # imported where used: scipy.signal costs ~0.6 s

    m = len(mass)
    offsets = np.linspace(-0.5, 0.5, m)
    kernel = np.exp(-(offsets**2) / (2 * sigma**2)) / (np.sqrt(2 * np.pi) * sigma)
    mirrored = np.concatenate([mass[:0:-1], mass, mass[-2::-1]])
    full = fftconvolve(mirrored, kernel, mode="valid")
    return np.asarray(full[m // 2 : m // 2 + m])


def smooth_ece_sigma(
    s: np.ndarray, y: np.ndarray, sigma: float, cache: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
) -> float:
    """Smooth ECE at a fixed bandwidth ``sigma`` (one group).

    ``cache`` keeps the grid masses by grid size across bandwidths (the rows
    are spread once per grid size, not once per bandwidth).
    """
    m = max(2000, round(20 / sigma)) // 2 + 1
    cache = {} if cache is None else cache
    if m not in cache:
        cache[m] = (_spread(s, s - y, m), _spread(s, np.ones_like(s), m))
    grid = np.linspace(0.0, 1.0, m)
    residual = _reflected_smooth(cache[m][0], sigma)
    density = _reflected_smooth(cache[m][1], sigma)
    mesh = np.linspace(0.0, 1.0, max(round(10 / sigma), _MESH))
    dens = np.interp(mesh, grid, density) + _DENSITY_FLOOR
    smoothed = np.interp(mesh, grid, residual) / dens
    return float(np.sum(np.abs(smoothed) * dens) / np.sum(dens))


def smooth_ece_numpy(s: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(smooth ECE, bandwidth)`` of one group with the automatic bandwidth.

    The bandwidth is the fixed point ``sigma* = smECE_sigma*``, located by
    bisection on ``(0, 1]`` to ``2**-10`` (the largest tried ``sigma`` with
    ``smECE_sigma <= sigma``), as ``relplot.smECE`` does.
    """

    cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def too_wide(sigma: float) -> bool:  # sigma above the fixed point
        return not (sigma < _SIGMA_FLOOR or sigma < smooth_ece_sigma(s, y, sigma, cache))

    high = 1.0
    if too_wide(high):
        low = 0.0
        for _ in range(_SIGMA_STEPS):
            mid = (low + high) / 2
            if too_wide(mid):
                high = mid
            else:
                low = mid
    return smooth_ece_sigma(s, y, high, cache), high


def _smooth_ece_groups(group: np.ndarray, n_groups: int, data: dict[str, np.ndarray]) -> np.ndarray:
    y, s = data.values()
    out = np.full(n_groups, np.nan)
    for g, idx in enumerate(_split(group, n_groups)):
        if _usable(s[idx], y[idx]):
            out[g] = smooth_ece_numpy(s[idx], y[idx])[0]
    return out


# -- score decomposition -----------------------------------------------------
def _mean_score(rule: ScoringRule, counts: np.ndarray, sums: np.ndarray, p: np.ndarray) -> float:
    """Mean Brier / log score of predictions ``p`` per cell (``sums`` ones among ``counts``)."""
    ones, zeros = sums, counts - sums
    if rule == "brier":
        total = ones * (1 - p) ** 2 + zeros * p**2
    else:
        with np.errstate(divide="ignore", invalid="ignore"):  # 0 * log(0) is taken as 0
            total = np.where(ones > 0, -ones * np.log(p), 0.0) + np.where(zeros > 0, -zeros * np.log1p(-p), 0.0)
    return float(np.sum(total) / np.sum(counts))


def decomposition_numpy(
    s: np.ndarray, y: np.ndarray, rule: ScoringRule, w: np.ndarray | None = None
) -> dict[str, float]:
    """Mean score and its CORP decomposition for one group.

    ``score = miscalibration - discrimination + uncertainty`` with
    ``miscalibration = S(s) - S(pav)``, ``discrimination = S(ybar) - S(pav)``
    and ``uncertainty = S(ybar)``.  With weights ``w`` every mean, the PAV
    fit and ``ybar`` are weighted.
    """
    x, counts, sums = _cells(s, y, w)
    fitted = pav(counts, sums)
    score = _mean_score(rule, counts, sums, x)
    recalibrated = _mean_score(rule, counts, sums, fitted)
    base_rate = float(np.sum(sums) / np.sum(counts))
    uncertainty = _mean_score(rule, counts, sums, np.full_like(x, base_rate))
    return {
        "": score,
        "miscalibration": score - recalibrated,
        "discrimination": uncertainty - recalibrated,
        "uncertainty": uncertainty,
    }


class _DecompositionGroups:
    """Per-group decomposition, computed once for the four outputs of one evaluation."""

    def __init__(self, rule: ScoringRule) -> None:
        self.rule = rule
        self.memo: tuple[tuple[np.ndarray, ...], dict[str, np.ndarray]] | None = None

    def _all(self, group: np.ndarray, n_groups: int, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        y, s, *weight = data.values()  # the weights when weighted
        arrays = (group, y, s, *weight)
        if (
            self.memo is not None
            and len(self.memo[0]) == len(arrays)
            and all(a is b for a, b in zip(self.memo[0], arrays))
        ):
            return self.memo[1]
        out = {k: np.full(n_groups, np.nan) for k in ("", "miscalibration", "discrimination", "uncertainty")}
        for g, idx in enumerate(_split(group, n_groups)):
            w = weight[0][idx] if weight else None
            if _usable(s[idx], y[idx]) and (w is None or bool(np.all(np.isfinite(w)) and np.sum(w) > 0)):
                for k, v in decomposition_numpy(s[idx], y[idx], self.rule, w).items():
                    out[k][g] = v
        self.memo = (arrays, out)
        return out

    def component(self, key: str) -> GroupFn:
        def fn(group: np.ndarray, n_groups: int, data: dict[str, np.ndarray]) -> np.ndarray:
            return self._all(group, n_groups, data)[key]

        return fn


# ---------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class SmoothECE(Metric):
    y: str
    score: str
    default_name = "smooth_ece"
    mergeable_alternative = "ece with strategy='uniform'"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        y, s = binary_row(q, self.y), score_row(q, self.score)
        q.per_group(self.output_name, [y, s], _smooth_ece_groups, what="smooth_ece (smooths all rows of each group)")
        return {"": None}


@no_weights(
    "smooth_ece",
    "the bandwidth fixed point of Blasiok and Nakkiran (2024), as relplot computes it, is defined for unweighted "
    "rows; ece(weights=) and score_decomposition(weights=) are weighted",
)
def smooth_ece(y: Column, score: Column) -> SmoothECE:
    """Smooth expected calibration error (smECE) with the automatic bandwidth.

    The residuals ``s_i - y_i`` and the scores' density are smoothed with a
    Gaussian kernel of bandwidth ``sigma`` (reflected at 0 and 1 so that no
    mass leaves ``[0, 1]``); ``smECE_sigma`` is the mean absolute smoothed
    residual, weighted by the smoothed density.  The bandwidth is the fixed
    point ``sigma* = smECE_sigma*`` (Blasiok and Nakkiran, ICLR 2024):
    residuals are pooled over a window as wide as the miscalibration they
    measure.  ``smooth_ece`` returns ``smECE_sigma*``.

    Binned ECE (:func:`~conformal_frames.ece`) pools the residuals inside
    fixed bins instead: its value jumps with the bin count and edges, and it
    is biased upwards for small bins (noise) and downwards for wide bins
    (cancellation).  smECE replaces the bins by a kernel whose width follows
    from the data, so it has no bin count to choose; it is consistent (a
    small change of the scores changes it a little), and for a calibrated
    predictor it tends to 0 as ``n`` grows.

    The computation follows ``relplot.smECE`` (the authors' package) and
    agrees with it to 1e-4: scores are spread linearly onto a grid of
    ``max(2000, 20 / sigma) / 2 + 1`` points, smoothed by FFT convolution,
    read at ``max(200, 10 / sigma)`` points with a density floor of 1e-4,
    and ``sigma*`` is located by ten bisection steps on ``(0, 1]``.
    Cost: about 11 smoothings of the grid per group, after one pass over its
    rows.

    The smoothing needs every row of a group: a per-group numpy step.  It
    runs on eager frames of every backend and stays lazy on polars
    LazyFrames; lazy DuckDB / PySpark / Dask frames raise and ask to collect
    first.

    Parameters
    ----------
    y : Column
        Label column, values 0/1 (integer, float or boolean); other values are
        an error, never remapped.
    score : Column
        Score column (predicted probability of ``y = 1``), within ``[0, 1]``.

    Returns
    -------
    SmoothECE
        A metric object: a float from ``df.conformal.smooth_ece(...)`` on an
        eager ungrouped frame, otherwise a frame with ``smooth_ece`` and ``n``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0, 0, 1, 1, 1, 0], "s": [0.1, 0.3, 0.4, 0.6, 0.9, 0.7]})
    >>> round(df.conformal.smooth_ece("y", "s"), 4)
    0.1212

    References
    ----------
    J. Blasiok and P. Nakkiran (2024), "Smooth ECE: Principled reliability
    diagrams via kernel smoothing", ICLR 2024.
    """
    return SmoothECE(y=role(y), score=role(score))


_DECOMPOSITION = ("miscalibration", "discrimination", "uncertainty")
_check_rule = choice("brier", "log")


def _rule(value: str) -> ScoringRule:
    return "log" if value == "log" else "brier"


@dataclass(frozen=True, kw_only=True)
class ScoreDecomposition(Metric):
    y: str
    score: str
    scoring_rule: str = checked(_check_rule, "brier")  # "brier" or "log"
    weights: str | None = None
    counts: str | None = None
    default_name = "score_decomposition"
    mergeable_alternative = "brier (its decomposition needs the ordered rows of a group)"
    kind = "table"
    long = True

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        y, s = binary_row(q, self.y), score_row(q, self.score)
        w = q.weighting(self.weights, counts=self.counts)
        rows = [y, s] if w.row is None else [y, s, w.row]
        groups = q.shared(
            ("score_decomposition", *rows, self.scoring_rule), lambda: _DecompositionGroups(_rule(self.scoring_rule))
        )
        what = "score_decomposition (isotonic regression of all rows of each group)"
        for suffix in ("", *_DECOMPOSITION):
            name = f"{self.output_name}_{suffix}" if suffix else self.output_name
            q.per_group(name, rows, groups.component(suffix), what=what)
        return dict.fromkeys(("", *_DECOMPOSITION))

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        name = self.output_name
        counts = [c for c in engine.RESERVED if c in frame.collect_schema().names()]  # n, n_invalid, n_dropped
        return frame.select(
            *keys, nw.col(name).alias("score"), *[nw.col(f"{name}_{c}").alias(c) for c in _DECOMPOSITION], *counts
        )


def score_decomposition(
    y: Column,
    score: Column,
    *,
    scoring_rule: ScoringRule = "brier",
    weights: Column | None = None,
    counts: Column | None = None,
) -> ScoreDecomposition:
    """The mean score split into miscalibration, discrimination and uncertainty.

    ``score = miscalibration - discrimination + uncertainty`` (Dimitriadis,
    Gneiting and Jordan, PNAS 2021), with ``S`` the mean scoring rule:

    * ``score = S(s)``, the mean Brier score ``(s - y)^2`` or log score
      ``-y log s - (1 - y) log(1 - s)`` of the scores;
    * ``miscalibration = S(s) - S(r)``, where ``r`` is the PAV
      (isotonic) recalibration of the scores (see :func:`corp_reliability`):
      0 for an isotonically calibrated predictor;
    * ``discrimination = S(ybar) - S(r)``: how much better the recalibrated
      scores are than the constant base rate ``ybar`` (0 when the scores
      carry no information on ``y``);
    * ``uncertainty = S(ybar)``: the score of the base rate, ``ybar (1 -
      ybar)`` for Brier, the entropy of ``ybar`` for the log score.

    Equal to ``model_diagnostics.scoring.decompose`` with ``SquaredError()``
    / ``LogLoss()`` (scikit-learn's isotonic regression) to 1e-9.  A log
    score is infinite when a score of 0 or 1 meets the opposite label.

    PAV needs the ordered rows of each group: a per-group numpy step (eager
    frames of every backend, lazy on polars; lazy DuckDB / PySpark / Dask
    frames raise and ask to collect first).

    Parameters
    ----------
    y : Column
        Label column, values 0/1 (integer, float or boolean); other values are
        an error, never remapped.
    score : Column
        Score column (predicted probability of ``y = 1``), within ``[0, 1]``.
    scoring_rule : {"brier", "log"}, default "brier"
        The proper scoring rule that is decomposed.
    weights : Column, optional
        Column of non-negative row weights: every mean score, the base rate
        ``ybar`` and the PAV fit (a weighted isotonic regression) are
        weighted, so an integer weight ``k`` gives the decomposition of the
        row repeated ``k`` times (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    ScoreDecomposition
        A metric object.  ``df.conformal.score_decomposition(...)`` returns a
        frame of the caller's type with the group keys, ``score``,
        ``miscalibration``, ``discrimination``, ``uncertainty`` and ``n``;
        inside :func:`~conformal_frames.evaluate` the columns
        ``score_decomposition`` (the score),
        ``score_decomposition_miscalibration``, ... .

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0, 0, 1, 1], "s": [0.1, 0.6, 0.4, 0.8]})
    >>> df.conformal.score_decomposition("y", "s")
    shape: (1, 5)
    ┌────────┬────────────────┬────────────────┬─────────────┬─────┐
    │ score  ┆ miscalibration ┆ discrimination ┆ uncertainty ┆ n   │
    │ ---    ┆ ---            ┆ ---            ┆ ---         ┆ --- │
    │ f64    ┆ f64            ┆ f64            ┆ f64         ┆ i64 │
    ╞════════╪════════════════╪════════════════╪═════════════╪═════╡
    │ 0.1925 ┆ 0.0675         ┆ 0.125          ┆ 0.25        ┆ 4   │
    └────────┴────────────────┴────────────────┴─────────────┴─────┘

    References
    ----------
    T. Dimitriadis, T. Gneiting and A. I. Jordan (2021), "Stable reliability
    diagrams for probabilistic classifiers", PNAS 118(8), e2016191118.
    """
    return ScoreDecomposition(
        y=role(y), score=role(score), scoring_rule=scoring_rule, weights=role(weights), counts=role(counts)
    )


# ---------------------------------------------------------------------------
# CORP reliability table (a function of a frame: one row per distinct score)
# ---------------------------------------------------------------------------
_CORP_COLUMNS = ("score", "n", "recalibrated", "band_low", "band_high")


def corp_band(
    x: np.ndarray, counts: np.ndarray, n_resamples: int, ci_level: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Consistency band under calibration at the distinct scores ``x``.

    ``n_resamples`` times: labels drawn as Bernoulli(``x``) (a binomial count
    per distinct score), refit by PAV; the band is the pointwise
    ``(1 - ci_level) / 2`` and ``(1 + ci_level) / 2`` quantiles of the refits.
    """
    if n_resamples == 0 or len(x) == 0:
        nan = np.full(len(x), np.nan)
        return nan, nan
    fits = np.empty((n_resamples, len(x)))
    for b in range(n_resamples):
        fits[b] = pav(counts, rng.binomial(counts.astype(np.int64), x).astype(float))
    alpha = (1 - ci_level) / 2
    low, high = np.quantile(fits, [alpha, 1 - alpha], axis=0)
    return low, high


def _corp_cells(
    frame: nw.DataFrame, keys: list[str], n_resamples: int, ci_level: float, seed: int
) -> dict[str, np.ndarray]:
    """PAV and band per group of the cell table (keys, score, n, sum of y), sorted."""
    x = frame.get_column("score").to_numpy().astype(float)
    counts = frame.get_column("n").to_numpy().astype(float)
    sums = frame.get_column("__cf_sy").to_numpy().astype(float)
    fitted, low, high = (np.full(len(x), np.nan) for _ in range(3))
    if keys:
        ids = frame.select(*keys).with_row_index("__cf_row").group_by(*keys).agg(nw.col("__cf_row").min())
        starts = np.sort(ids.get_column("__cf_row").to_numpy())
    else:
        starts = np.array([0] if len(x) else [], dtype=np.int64)
    bounds = [*starts.tolist(), len(x)]
    for g in range(len(starts)):
        sl = slice(bounds[g], bounds[g + 1])
        if np.all(np.isfinite(sums[sl])) and np.all(np.isfinite(x[sl])):
            rng = np.random.default_rng([seed, g])
            fitted[sl] = pav(counts[sl], sums[sl])
            low[sl], high[sl] = corp_band(x[sl], counts[sl], n_resamples, ci_level, rng)
    return {"recalibrated": fitted, "band_low": low, "band_high": high}


def _corp_finish(keys: list[str], n_resamples: int, ci_level: float, seed: int) -> Callable[[Any], Any]:
    """Native cells frame -> native CORP table (keys, score, n, recalibrated, band)."""

    def run(native: Any) -> Any:
        frame = nw.maybe_reset_index(nw.from_native(native, eager_only=True))
        cols = _corp_cells(frame, keys, n_resamples, ci_level, seed)
        ns = nw.get_native_namespace(frame)
        new = [nw.new_series(k, v, F64, backend=ns).fill_nan(None) for k, v in cols.items()]
        out = frame.with_columns(*new).select(*keys, *_CORP_COLUMNS)
        return nw.maybe_reset_index(out).to_native()

    return run


@no_weights(
    "corp_reliability",
    "its consistency band resamples unweighted rows; score_decomposition(weights=) gives the weighted PAV decomposition",
)
@engine.takes_roles("y", "score")
def corp_reliability(
    frame: Any,
    y: Column,
    score: Column,
    *,
    n_resamples: int = 100,
    ci_level: float = 0.9,
    seed: int = 0,
    by: Column | Sequence[Column] | None = None,
    invalid: InvalidPolicy | None = None,
) -> Any:
    """CORP reliability table: isotonic recalibration with a consistency band.

    Per group and distinct score ``s`` (ascending): ``n`` (rows with that
    score), ``recalibrated``, the PAV (pool-adjacent-violators) isotonic
    regression of ``y`` on the score at ``s`` (equal to scikit-learn's
    ``IsotonicRegression().fit(s, y).predict(s)`` to 1e-9), and the
    consistency band ``band_low`` / ``band_high``: where ``recalibrated``
    would fall with probability ``ci_level`` if the scores were calibrated.
    A calibrated predictor's ``recalibrated`` stays on the diagonal within the
    band; plot both against ``score`` for the CORP reliability diagram
    (Dimitriadis, Gneiting and Jordan, PNAS 2021;
    :func:`conformal_frames.plots.corp_reliability_diagram`).

    The band is the resampling band of the CORP paper (``reliabilitydiag``'s
    default for moderate ``n``): ``n_resamples`` times, labels are drawn as
    Bernoulli(``s``) at the observed scores and refit by PAV; ``band_low`` /
    ``band_high`` are the pointwise ``(1 - ci_level) / 2`` and
    ``(1 + ci_level) / 2`` quantiles of the refits (numpy's linear quantile).
    It depends on ``seed`` and the group's position in the sorted keys, never
    on the row order or the backend.  ``n_resamples=0`` leaves the band null.
    Cost: ``n_resamples`` PAV fits of the distinct scores per group, memory
    ``8 * n_resamples`` bytes per distinct score.

    Runs on eager frames of every backend: the counts and label sums per
    distinct score are aggregated by the backend, PAV runs on them in numpy.
    On a polars LazyFrame it stays lazy (``map_batches``); a lazy DuckDB /
    PySpark / Dask frame raises ``NotImplementedError``: collect it first.

    Parameters
    ----------
    frame
        Any frame narwhals supports.
    y : Column
        Label column, values 0/1 (integer, float or boolean); other values are
        an error, never remapped.
    score : Column
        Score column (predicted probability of ``y = 1``), within ``[0, 1]``.
    n_resamples : int, default 100
        Resamples of the consistency band (0: no band).
    ci_level : float, default 0.9
        Coverage of the consistency band (the CORP paper's 90 %).
    seed : int, default 0
        Seed of the resampling.
    by : Column or list of Column, optional
        Group columns.
    invalid : {"raise", "drop", "null"}, optional
        The invalid-row policy of :func:`conformal_frames.evaluate`; with
        ``"null"`` a group with invalid rows has null ``recalibrated`` and
        band.

    Returns
    -------
    frame
        A frame of the caller's type: the group keys, ``score``, ``n``,
        ``recalibrated``, ``band_low``, ``band_high``; sorted by keys and
        score.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> df = pl.DataFrame({"y": [0, 1, 0, 1, 1], "s": [0.2, 0.4, 0.6, 0.6, 0.9]})
    >>> cf.corp_reliability(df, "y", "s", n_resamples=0).select("score", "n", "recalibrated")
    shape: (4, 3)
    ┌───────┬─────┬──────────────┐
    │ score ┆ n   ┆ recalibrated │
    │ ---   ┆ --- ┆ ---          │
    │ f64   ┆ i64 ┆ f64          │
    ╞═══════╪═════╪══════════════╡
    │ 0.2   ┆ 1   ┆ 0.0          │
    │ 0.4   ┆ 1   ┆ 0.666667     │
    │ 0.6   ┆ 2   ┆ 0.666667     │
    │ 0.9   ┆ 1   ┆ 1.0          │
    └───────┴─────┴──────────────┘
    """
    # the roles arrive as column names: engine.takes_roles resolves expressions first
    y = cast(str, y)
    score = cast(str, score)
    by = cast("str | Sequence[str] | None", by)
    check_column(y, "y")
    check_column(score, "score")
    n_resamples = check_positive_int(n_resamples, "n_resamples", at_least=0)
    ci_level = check_probability(ci_level, "ci_level")
    seed = check_seed(seed)
    lf, eager = engine.to_lazy(frame)
    keys = engine.as_keys(by)
    clash = [k for k in keys if k in (*_CORP_COLUMNS, y, score)]
    if clash:
        msg = f"group column {clash[0]!r} (by=) is the label or score column, or the name of a column of the corp_reliability table; rename it first"
        raise ValueError(msg)
    cells = _cell_table(lf, y, score, keys, engine.policy(invalid, eager))
    run = _corp_finish(keys, n_resamples, ci_level, seed)
    if eager:
        return run(cells.collect().to_native())
    if cells.implementation.is_polars():
        import polars as pl

        native = cells.to_native()
        schema = native.collect_schema()
        out_schema = pl.Schema({**{k: schema[k] for k in keys}, "score": pl.Float64, "n": pl.Int64})
        out_schema.update(dict.fromkeys(_CORP_COLUMNS[2:], pl.Float64()))
        return native.map_batches(run, schema=out_schema, streamable=False)
    raise engine.lazy_refusal("corp_reliability (isotonic regression of each group's distinct scores)", lf)


def _cell_table(lf: nw.LazyFrame, y: str, score: str, keys: list[str], policy: InvalidPolicy) -> nw.LazyFrame:
    """Lazy cells (keys, score, n, label sum) after the invalid-row policy, sorted."""
    # exactly the checks of the binary calibration metrics; "raise": raises here
    lf, validity = binary_inputs(lf, y, score, keys).apply_policy(lf, policy)
    y_sum = nw.col(y).cast(F64).alias("__cf_sy")
    rows = lf.select(*keys, y_sum, nw.col(score).cast(F64).alias("score"), nw.lit(1.0).alias("n"))
    cells = engine.ordered_cells(rows, keys, "score", ["n", "__cf_sy"]).with_columns(nw.col("n").cast(nw.Int64))
    if validity is not None:  # policy "null"
        cells, valid = engine.with_validity(cells, validity, keys)
        cells = cells.with_columns(nw.when(valid).then(nw.col("__cf_sy")).otherwise(float("nan")).alias("__cf_sy"))
    return cells.sort(*keys, "score", nulls_last=True)
