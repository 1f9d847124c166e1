"""Anytime-valid boundaries for a Bernoulli rate: confidence sequences and e-processes.

Howard, Ramdas, McAuliffe and Sekhon (2021), "Time-uniform, nonparametric,
nonasymptotic confidence sequences", Annals of Statistics 49(2).  After
``t`` independent 0/1 outcomes (here: misses) with ``K`` ones, a nonnegative
(super)martingale ``M_t(p)`` with ``M_0 = 1`` under the rate ``p`` satisfies
Ville's inequality ``P(exists t: M_t(p) >= 1 / a) <= a``, so

- ``{p : M_t(p) < 1 / a}`` is a confidence sequence: it holds at every ``t``
  at once with probability ``>= 1 - a`` (``a = 1 - ci_level``);
- ``M_t(p0)`` (or a mixture over alternatives only) is an e-process: an
  alarm when it crosses ``1 / significance`` is a false alarm with
  probability ``<= significance``, however often it is looked at.

Both boundaries depend on ``(t, K)`` only:

- **beta-binomial** (the conjugate mixture): the likelihood ratio of a
  ``Beta(a, b)`` mixture of rates against ``p``,
  ``M_t(p) = B(a + K, b + t - K) / B(a, b) / (p^K (1 - p)^(t - K))``;
  exact for Bernoulli outcomes.  Its interval needs a root solve and its
  one-sided e-process the incomplete beta function: numpy (:func:`beta_binomial_cs`,
  :func:`beta_binomial_log_e`).
- **normal mixture**: a 0/1 outcome is sub-Gaussian with variance proxy
  ``1/4``; a ``N(0, 1/rho)`` mixture of ``exp(l S - l^2 V / 2)``, ``S = K - t p``,
  ``V = t / 4``, gives ``M_t = sqrt(rho / (V + rho)) exp(S^2 / (2 (V + rho)))``
  and the closed-form radius ``sqrt((V + rho) log((V + rho) / (rho a^2)))``
  (:func:`numpy_normal`; :mod:`conformal_frames.metrics.monitoring` writes the
  same formulas as expressions: lazy on every backend).

Both mixtures are tuned to be tightest after ``n_opt`` outcomes (Howard et
al., section 3.5): ``rho = v / (2 log(1/a) + log(1 + 2 log(1/a)))`` at the
intrinsic time ``v = n_opt / 4``; the beta prior's pseudo-count is the same
``n_opt / (2 log(1/a) + log(1 + 2 log(1/a)))`` (its variance matches the
normal mixture's on the rate scale), centred on the target rate.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "DETECTOR_ODDS",
    "beta_binomial_cs",
    "beta_binomial_log_e",
    "beta_prior",
    "detector_grid",
    "normal_rho",
    "numpy_normal",
]

_BISECTIONS = 64


def _tuning(n_opt: float, level: float) -> float:
    """``n_opt / (2 log(1/a) + log(1 + 2 log(1/a)))``: the mixture's precision in outcomes."""
    ell = math.log(1.0 / level)
    return n_opt / (2.0 * ell + math.log1p(2.0 * ell))


def normal_rho(n_opt: float, level: float) -> float:
    """The normal mixture's ``rho``, tightest at ``n_opt`` outcomes (variance proxy 1/4) for level ``a``."""
    return _tuning(n_opt, level) / 4.0


def beta_prior(p0: float, n_opt: float, level: float) -> tuple[float, float]:
    """``(a, b)`` of the beta mixture: mean ``p0``, pseudo-count tuned to ``n_opt`` outcomes."""
    c = _tuning(n_opt, level)
    return c * p0, c * (1.0 - p0)


def _log_m(k: np.ndarray, f: np.ndarray, p: np.ndarray, a: float, b: float) -> np.ndarray:
    """``log M_t(p)`` of the beta-binomial mixture (``0 log 0 = 0``)."""
    from scipy import special  # loaded on first use: import conformal_frames stays light

    with np.errstate(divide="ignore", invalid="ignore"):
        lp = np.where(k > 0, k * np.log(np.where(k > 0, p, 1.0)), 0.0)
        lq = np.where(f > 0, f * np.log(np.where(f > 0, 1.0 - p, 1.0)), 0.0)
    return special.betaln(a + k, b + f) - special.betaln(a, b) - lp - lq


def beta_binomial_cs(k: np.ndarray, t: np.ndarray, a: float, b: float, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The beta-binomial confidence sequence of the rate: ``(low, high)`` where ``M_t(p) = 1 / level``.

    ``k`` ones among ``t`` outcomes; ``t = 0`` gives ``(0, 1)``.  The
    maximum-likelihood rate ``k / t`` is always inside (there ``M_t <= 1``);
    each end is found by 64 bisections of ``[0, k/t]`` and ``[k/t, 1]``
    (``M_t(p)`` is convex in ``log`` on each side), to a width of ``2^-64``.
    """
    k, t = np.asarray(k, dtype=float), np.asarray(t, dtype=float)
    f = t - k
    phat = np.where(t > 0, k / np.where(t > 0, t, 1.0), 0.5)
    bound = math.log(1.0 / level)
    ends = []
    for side in (0.0, 1.0):
        inside, outside = phat.copy(), np.full_like(phat, side)
        # the end itself when it is inside (k = 0 at 0, k = t at 1, or t = 0)
        inside_end = _log_m(k, f, outside, a, b) < bound
        for _ in range(_BISECTIONS):
            mid = 0.5 * (inside + outside)
            ok = _log_m(k, f, mid, a, b) < bound
            inside, outside = np.where(ok, mid, inside), np.where(ok, outside, mid)
        ends.append(np.where(inside_end | (t == 0), side, inside))
    return ends[0], ends[1]


def beta_binomial_log_e(k: np.ndarray, t: np.ndarray, p0: float, a: float, b: float, alternative: str) -> np.ndarray:
    """``log`` of the beta-binomial e-process against the rate ``p0``.

    ``"two-sided"``: ``M_t(p0)``.  ``"greater"`` (the rate is above ``p0``):
    the mixture restricted to rates above ``p0``, a supermartingale under
    every rate ``<= p0``:
    ``M_t(p0) * P(q > p0 | Beta(a + K, b + F)) / P(q > p0 | Beta(a, b))``;
    ``"less"``: restricted to rates below ``p0``.
    """
    from scipy import special  # loaded on first use: import conformal_frames stays light

    k, t = np.asarray(k, dtype=float), np.asarray(t, dtype=float)
    f = t - k
    log_e = _log_m(k, f, np.full_like(k, p0), a, b)
    if alternative == "two-sided":
        return log_e
    tail = special.betaincc if alternative == "greater" else special.betainc
    with np.errstate(divide="ignore"):
        return log_e + np.log(tail(a + k, b + f, p0)) - math.log(float(tail(a, b, p0)))


def numpy_normal(k: Any, t: Any, p0: float, rho: float, level: float, alternative: str) -> tuple[Any, Any, Any]:
    """The normal mixture in numpy: the rate's band ``(low, high)`` at ``level`` and ``log`` of the
    e-process against ``p0`` (``alternative`` on the rate).  The library writes the same formulas
    as expressions (lazy on every backend); this is their reference."""
    from scipy import special  # loaded on first use: import conformal_frames stays light

    k, t = np.asarray(k, dtype=float), np.asarray(t, dtype=float)
    v = t / 4.0 + rho
    radius = np.sqrt(v * np.log(v / (rho * level * level))) / t
    s = k - t * p0
    two = 0.5 * np.log(rho / v) + s * s / (2.0 * v)
    if alternative == "two-sided":
        return k / t - radius, k / t + radius, two
    z = s / np.sqrt(v) if alternative == "greater" else -s / np.sqrt(v)
    return k / t - radius, k / t + radius, math.log(2.0) + two + special.log_ndtr(z)


# the alternatives of the change detector: the odds of a miss multiplied by these factors
DETECTOR_ODDS = (1.25, 1.5, 2.0, 3.0, 5.0, 10.0)


def detector_grid(p0: float, alternative: str) -> list[tuple[float, float, float]]:
    """The change detector's alternatives: ``(log q/p0, log (1-q)/(1-p0), log weight)`` per miss rate ``q``.

    ``q`` has the odds of ``p0`` multiplied (``"greater"``) or divided
    (``"less"``) by each of :data:`DETECTOR_ODDS` (both for ``"two-sided"``);
    the weights are equal and sum to one.  A period with ``k`` misses among
    ``n`` rows has the likelihood ratio ``exp(k log(q/p0) + (n-k) log((1-q)/(1-p0)))``,
    an e-value under every miss rate on the null side of ``p0`` (its mean is
    ``(q p/p0 + (1-q)(1-p)/(1-p0))^n <= 1`` there).
    """
    odds = p0 / (1.0 - p0)
    factors = {"greater": DETECTOR_ODDS, "less": tuple(1.0 / r for r in DETECTOR_ODDS)}.get(
        alternative, DETECTOR_ODDS + tuple(1.0 / r for r in DETECTOR_ODDS)
    )
    log_w = -math.log(len(factors))
    grid = []
    for r in factors:
        q = odds * r / (1.0 + odds * r)
        grid.append((math.log(q / p0), math.log((1.0 - q) / (1.0 - p0)), log_w))
    return grid
