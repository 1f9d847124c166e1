"""A deterministic synthetic dataset for the demo and the docs.

Heteroscedastic regression ``y = sin(x) + x/2 + sigma(x) * eps`` with
``sigma(x) = 0.3 + 0.2 x``; split-conformal-like intervals
``mu(x) -/+ z_level * sigma_hat(x)`` at levels 0.8 / 0.9 / 0.95, stacked in long
format (a ``level`` column).  Five segments of very different sizes; the
``island`` segment's model under-estimates its noise (``sigma_hat = 0.6 sigma``)
so it is deliberately under-covered.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

LEVELS = (0.8, 0.9, 0.95)
SEGMENTS = {"north": 0.50, "south": 0.27, "east": 0.15, "west": 0.06, "island": 0.02}
UNDER_COVERED = "island"


def demo_data(n: int = 20_000, seed: int = 0) -> dict[str, np.ndarray]:
    """Columns ``segment, level, x, y, lo, hi`` (``n`` rows per level)."""
    rng = np.random.default_rng(seed)
    names = np.array(list(SEGMENTS))
    segment = names[rng.choice(len(names), size=n, p=list(SEGMENTS.values()))]
    x = rng.uniform(0.0, 10.0, size=n)
    sigma = 0.3 + 0.2 * x
    mu = np.sin(x) + x / 2
    y = mu + sigma * rng.standard_normal(n)
    sigma_hat = np.where(segment == UNDER_COVERED, 0.6 * sigma, sigma)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("segment", "level", "x", "y", "lo", "hi")}
    for level in LEVELS:
        z = norm.ppf(0.5 + level / 2)
        parts["segment"].append(segment)
        parts["level"].append(np.full(n, level))
        parts["x"].append(x)
        parts["y"].append(y)
        parts["lo"].append(np.round(mu - z * sigma_hat, 6))
        parts["hi"].append(np.round(mu + z * sigma_hat, 6))
    return {k: np.concatenate(v) for k, v in parts.items()}
