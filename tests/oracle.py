"""Plain-numpy implementations of the metric definitions (DESIGN §4).

Written from the definitions, independently of the library: direct sums,
sorting with numpy, explicit n x n matrices where the definition uses them.
"""

from __future__ import annotations

import numpy as np


def covered(y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return ((lo <= y) & (y <= hi)).astype(float)


def coverage(y, lo, hi) -> float:
    return float(np.mean(covered(y, lo, hi)))


def wilson(k: float, n: float, ci: float) -> tuple[float, float]:
    from scipy.stats import binomtest

    res = binomtest(int(k), int(n)).proportion_ci(confidence_level=ci, method="wilson")
    return res.low, res.high


def width(lo, hi) -> float:
    return float(np.mean(hi - lo))


SSC_TIE_RTOL = 1e-9


def ssc(y, lo, hi, num_bins: int) -> list[tuple[int, float, int]]:
    """(bin, coverage, n) for non-empty bins; tied widths are never split.

    Tie groups: the sorted distinct widths, a new group wherever a width
    exceeds the previous distinct one by more than 1e-9 x the largest width.
    Nominal bins are runs of positions of sizes n // M (+1 for the first
    n % M); each tie group goes whole to the bin holding its first position.
    """
    c = covered(y, lo, hi)
    w = hi - lo
    n = len(y)
    distinct = np.unique(w)
    tol = SSC_TIE_RTOL * np.max(np.abs(w))
    group_of = {}
    g = 0
    for j, v in enumerate(distinct):
        if j > 0 and not (v - distinct[j - 1] <= tol):
            g += 1
        group_of[v] = g
    tie = np.array([group_of[v] for v in w])
    sizes = [n // num_bins + (1 if b < n % num_bins else 0) for b in range(num_bins)]
    run_of_position = np.repeat(np.arange(num_bins), sizes)
    rows_in = [[] for _ in range(num_bins)]
    start = 0
    for t in range(g + 1):
        members = np.flatnonzero(tie == t)
        rows_in[run_of_position[start]].extend(members)
        start += len(members)
    return [(b, float(c[idx].mean()), len(idx)) for b, idx in enumerate(rows_in) if idx]


def ssc_score(y, lo, hi, num_bins: int) -> float:
    return min(cov for _, cov, _ in ssc(y, lo, hi, num_bins))


def winkler(y, lo, hi, confidence_level: float) -> float:
    alpha = 1 - confidence_level
    score = (hi - lo) + 2 / alpha * (np.maximum(lo - y, 0) + np.maximum(y - hi, 0))
    return float(np.mean(score))


def cwc(y, lo, hi, eta: float, confidence_level: float) -> float:
    span = y.max() - y.min()
    if span == 0:
        return float("nan")
    return float((1 - width(lo, hi) / span) * np.exp(-eta * (coverage(y, lo, hi) - confidence_level) ** 2))


def hsic(y, lo, hi, kernel_sizes=(1.0, 1.0)) -> float:
    """The definition with explicit n x n matrices (their entries made a block of rows at a time)."""
    n = len(y)
    if n < 2:
        return float("nan")
    w = hi - lo
    c = covered(y, lo, hi)
    # trace(L H K H), H = I - 11'/n the centring matrix, as trace((H L H)(H K H)) (H is
    # idempotent): H M H is M less its row and column means plus its grand mean, and for
    # symmetric matrices the trace of the product is the sum of the elementwise product
    # (O(n^2) instead of the n^3 products; a constant kernel centres to exact zeros).
    # The kernels are symmetric (a row mean is the column mean); the rows come in blocks
    # so that a 5000-row case holds no 200 MB matrix (and its temporaries) at once.
    blocks = [np.arange(i, min(i + 256, n)) for i in range(0, n, 256)]

    def kernel(v: np.ndarray, size: float, rows: np.ndarray) -> np.ndarray:
        return np.exp(-((v[rows, None] - v[None, :]) ** 2) / size)

    means = [
        np.concatenate([kernel(v, s, b).mean(axis=1) for b in blocks])
        for v, s in ((w, kernel_sizes[0]), (c, kernel_sizes[1]))
    ]
    (mk, ml), (gk, gl) = means, (means[0].mean(), means[1].mean())
    total = 0.0
    for b in blocks:
        k = kernel(w, kernel_sizes[0], b) - mk[None, :] - mk[b, None] + gk
        l_mat = kernel(c, kernel_sizes[1], b) - ml[None, :] - ml[b, None] + gl
        total += float(np.sum(l_mat * k))
    return float(np.sqrt(total) / (n - 1))
