"""Paired tests of two models' scores and the Holm adjustment (numpy, scipy)."""

from __future__ import annotations

import numpy as np

#: permuted statistics within this relative distance of the observed one count as ties (rounding of the sums)
_TIES = 1e-12
#: sign draws held at once (permutations x pairs): memory does not grow with ``n_permutations``
CHUNK_CELLS = 4_000_000


def permutation_pvalue(x: np.ndarray, y: np.ndarray, *, n_permutations: int, rng: np.random.Generator) -> float:
    """Two-sided paired permutation p-value of ``mean(x) - mean(y)``.

    Each permutation swaps the pair ``(x_t, y_t)`` with probability 1/2
    (``sel_t ~ Bernoulli(1/2)``), i.e. flips the sign of ``d_t = x_t - y_t``;
    its statistic is ``|sum_t s_t d_t| / n``.  The p-value is
    ``(1 + #{permuted >= observed}) / (n_permutations + 1)`` (the paired
    permutation test of scoringutils' ``permutation_test``, from the
    surveillance package).
    """
    d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    n = len(d)
    observed = abs(d.sum()) / n
    extreme = 0
    rows = max(1, CHUNK_CELLS // max(n, 1))  # the draws of consecutive chunks are those of one draw
    for first in range(0, n_permutations, rows):
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(min(rows, n_permutations - first), n))
        permuted = np.abs(signs @ d) / n
        extreme += int(np.count_nonzero(permuted >= observed * (1.0 - _TIES)))
    return (1.0 + extreme) / (n_permutations + 1.0)


def wilcoxon_pvalue(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of the pairs (``scipy.stats.wilcoxon``, its defaults).

    1 when every difference is zero (scipy has no statistic then).
    """
    from scipy.stats import wilcoxon  # imported where used: scipy.stats costs ~0.3 s at import

    d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    if not np.any(d != 0.0):
        return 1.0
    return float(wilcoxon(d).pvalue)


def holm(pvalues: np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment (R's ``p.adjust(p, "holm")``); NaN stays NaN and is not counted."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if not m:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out
