"""Independent numpy oracles of the quantile / interval forecast scores.

Written from the definitions (not from the library's formulas): the WIS from
interval scores as in Bracher et al. (2021), eq. (1)-(2), its components as in
scoringutils; the Wilson interval from its textbook formula.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import norm

LEVELS = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)


def column(level: float) -> str:
    return f"q{round(level * 1000):04d}"


def forecast_data(seed: int, n: int = 120) -> dict[str, Any]:
    """Random quantile forecasts with ties, groups of size 1 and 2.

    Values are on a 0.5 grid so that ``y`` often equals a quantile and
    neighbouring quantiles are often equal (valid: non-decreasing).
    """
    rng = np.random.default_rng(seed)
    sizes = [1, 2, 3, n - 6]
    g = np.repeat(["a_one", "b_two", "c_three", "d_many"], sizes)
    center = np.round(rng.normal(0.0, 3.0, n) * 2) / 2
    spread = np.sort(np.round(rng.exponential(1.5, (n, len(LEVELS))) * 2) / 2, axis=1)
    spread -= spread[:, [len(LEVELS) // 2]]  # the median column sits at center
    data: dict[str, Any] = {"g": g.tolist(), "y": (np.round(rng.normal(0.0, 4.0, n) * 2) / 2).tolist()}
    for j, level in enumerate(LEVELS):
        data[column(level)] = (center + spread[:, j]).tolist()
    return data


def pinball(y: np.ndarray, q: np.ndarray, tau: float) -> float:
    d = y - q
    return float(np.mean(np.where(d >= 0, tau * d, (tau - 1.0) * d)))


def interval_score(y: np.ndarray, lo: np.ndarray, hi: np.ndarray, alpha: float) -> np.ndarray:
    return (hi - lo) + 2.0 / alpha * np.maximum(lo - y, 0.0) + 2.0 / alpha * np.maximum(y - hi, 0.0)


def wis(y: np.ndarray, median: np.ndarray, intervals: list[tuple[float, np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Mean WIS and its components; ``intervals`` = [(alpha, lo, hi), ...]."""
    k = len(intervals)
    total = 0.5 * np.abs(y - median)
    disp = np.zeros_like(y)
    over = 0.5 * np.maximum(median - y, 0.0)
    under = 0.5 * np.maximum(y - median, 0.0)
    for alpha, lo, hi in intervals:
        total = total + alpha / 2.0 * interval_score(y, lo, hi, alpha)
        disp = disp + alpha / 2.0 * (hi - lo)
        over = over + alpha / 2.0 * (2.0 / alpha) * np.maximum(lo - y, 0.0)
        under = under + alpha / 2.0 * (2.0 / alpha) * np.maximum(y - hi, 0.0)
    scale = 1.0 / (k + 0.5)
    return {
        "wis": float(np.mean(total) * scale),
        "wis_dispersion": float(np.mean(disp) * scale),
        "wis_overprediction": float(np.mean(over) * scale),
        "wis_underprediction": float(np.mean(under) * scale),
    }


def wilson(k: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    z = norm.ppf(0.5 + confidence / 2)
    p = k / n
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, min(center - half, p)), min(1.0, max(center + half, p))
