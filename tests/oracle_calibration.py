"""Plain-numpy implementations of the calibration definitions (DESIGN §4).

Written from the definitions, independently of the library: explicit loops
over bins, sorting with numpy, distinct scores with ``np.unique``, and the
limiting laws by their normal-tail (reflection principle) series evaluated
with ``scipy.stats.norm`` and many terms.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

# ---------------------------------------------------------------------------
# bins
# ---------------------------------------------------------------------------
EDGE_SNAP = {"float64": 2.0**-50, "float32": 2.0**-22}


def uniform_bins(s: np.ndarray, num_bins: int, precision: str | None = None) -> np.ndarray:
    """Bin m holds m <= s f < m + 1 with the double f = M (1 + eps); s = 1 goes to the last bin.

    ``eps`` by the scores' precision (Float32 arrays: 2^-22, else 2^-50), so
    an edge m/M rounded to that precision lands in bin m.
    """
    if precision is None:
        precision = "float32" if np.asarray(s).dtype == np.float32 else "float64"
    factor = float(num_bins) * (1.0 + EDGE_SNAP[precision])
    out = np.full(len(s), num_bins - 1)
    for i, v in enumerate(s):
        scaled = float(v) * factor
        for m in range(num_bins):
            if m <= scaled < m + 1:
                out[i] = m
                break
    return out


def quantile_bins(s: np.ndarray, num_bins: int) -> np.ndarray:
    """Positions 0..n-1 split in runs of sizes differing by <= 1 (first n % M longer);
    a row takes the bin of the first position of its tie block."""
    n = len(s)
    sizes = [n // num_bins + (1 if b < n % num_bins else 0) for b in range(num_bins)]
    position_bin = np.repeat(np.arange(num_bins), sizes)
    smaller = np.array([int(np.sum(s < v)) for v in s], dtype=int)
    return position_bin[smaller]


def bins(s: np.ndarray, num_bins: int, strategy: str) -> np.ndarray:
    return uniform_bins(s, num_bins) if strategy == "uniform" else quantile_bins(s, num_bins)


def ece(y: np.ndarray, s: np.ndarray, num_bins: int, strategy: str = "uniform") -> float:
    b = bins(s, num_bins, strategy)  # in the scores' own precision
    s = np.asarray(s, dtype=float)
    n = len(y)
    total = 0.0
    for m in range(num_bins):
        idx = b == m
        if idx.any():
            total += idx.sum() / n * abs(y[idx].mean() - s[idx].mean())
    return total


def mce(y: np.ndarray, s: np.ndarray, num_bins: int, strategy: str = "uniform") -> float:
    b = bins(s, num_bins, strategy)
    s = np.asarray(s, dtype=float)
    return max(abs(y[b == m].mean() - s[b == m].mean()) for m in range(num_bins) if (b == m).any())


def brier(y: np.ndarray, s: np.ndarray) -> float:
    return float(np.mean((y - s) ** 2))


def reliability(y, s, num_bins, strategy, ci):
    """[(bin, mean_score, frequency, ci_low, ci_high, n)] for non-empty bins."""
    from scipy.stats import binomtest

    b = bins(s, num_bins, strategy)
    s = np.asarray(s, dtype=float)
    out = []
    for m in range(num_bins):
        idx = b == m
        if idx.any():
            k, n = int(y[idx].sum()), int(idx.sum())
            w = binomtest(k, n).proportion_ci(confidence_level=ci, method="wilson")
            out.append((m, s[idx].mean(), y[idx].mean(), w.low, w.high, n))
    return out


def top_label_ece(y, probs: np.ndarray, classes, num_bins, strategy, weighted=False) -> float:
    """probs: (n, K); first maximal column wins."""
    pred = np.argmax(probs, axis=1)  # numpy argmax returns the first maximum
    conf = probs[np.arange(len(pred)), pred]
    labels = np.asarray(classes, dtype=object)[pred]
    correct = np.array([a == b for a, b in zip(y, labels)], dtype=float)
    eces, weights = [], []
    for j in np.unique(pred):
        idx = pred == j
        eces.append(ece(correct[idx], conf[idx], num_bins, strategy))
        weights.append(idx.sum())
    if weighted:
        return float(np.dot(eces, weights) / np.sum(weights))
    return float(np.mean(eces))


def classwise_ece(y, probs: np.ndarray, classes, num_bins, strategy) -> float:
    vals = []
    for k, c in enumerate(classes):
        yk = np.array([v == c for v in y], dtype=float)
        vals.append(ece(yk, probs[:, k], num_bins, strategy))
    return float(np.mean(vals))


# ---------------------------------------------------------------------------
# cumulative differences and tests
# ---------------------------------------------------------------------------
def cumulative_differences(y, s):
    """(distinct scores, counts, C at each distinct score)."""
    values, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    per_value = np.zeros(len(values))
    np.add.at(per_value, inverse, y - s)
    return values, counts, np.cumsum(per_value) / len(y)


def max_abs_sf(x: float) -> float:
    """P(sup_[0,1] |B| > x) = 4 sum_k (-1)^k Phi_c((2k+1) x), many terms."""
    if x <= 0:
        return 1.0
    if math.isinf(x):
        return 0.0
    k = np.arange(0, int(60 / x) + 10)
    return float(min(1.0, 4 * np.sum((-1.0) ** k * norm.sf((2 * k + 1) * x))))


def range_sf(x: float) -> float:
    """P(range of B on [0,1] > x) = 8 sum_{k>=1} (-1)^(k-1) k Phi_c(k x)."""
    if x <= 0:
        return 1.0
    if math.isinf(x):
        return 0.0
    k = np.arange(1, int(60 / x) + 10)
    return float(min(1.0, 8 * np.sum((-1.0) ** (k - 1) * k * norm.sf(k * x))))


def ks(y, s) -> tuple[float, float]:
    _, _, c = cumulative_differences(y, s)
    sigma = math.sqrt(np.sum(s * (1 - s))) / len(y)
    dev = np.max(np.abs(c))
    if sigma == 0:
        return (math.nan, math.nan) if dev == 0 else (math.inf, 0.0)
    g = dev / sigma
    return g, max_abs_sf(g)


def kuiper(y, s) -> tuple[float, float]:
    _, _, c = cumulative_differences(y, s)
    c = np.concatenate([[0.0], c])  # C_0 = 0
    sigma = math.sqrt(np.sum(s * (1 - s))) / len(y)
    dev = np.max(c) - np.min(c)
    if sigma == 0:
        return (math.nan, math.nan) if dev == 0 else (math.inf, 0.0)
    h = dev / sigma
    return h, range_sf(h)


def spiegelhalter(y, s, alternative: str = "two-sided") -> tuple[float, float]:
    """Spiegelhalter's Z and its p-value (scipy's names of the alternative)."""
    num = np.sum((y - s) * (1 - 2 * s))
    den = math.sqrt(np.sum((1 - 2 * s) ** 2 * s * (1 - s)))
    if den == 0:
        return (math.nan, math.nan) if num == 0 else (math.inf, 0.0 if alternative != "less" else 1.0)
    z = num / den
    p = {"greater": norm.sf(z), "less": norm.cdf(z), "two-sided": min(1.0, 2 * norm.sf(abs(z)))}[alternative]
    return z, float(p)
