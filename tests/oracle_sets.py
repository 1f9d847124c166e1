"""Plain-numpy oracles for set metrics, Vovk's criteria and conditional coverage.

Written from the definitions (DESIGN §4, reference/004), independently of
the library: explicit loops and boolean matrices.
"""

from __future__ import annotations

from typing import Any

import numpy as np


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------
def random_sets(seed: int, n: int = 150, k: int = 4, strings: bool = False) -> dict[str, Any]:
    """Membership matrix ``m`` (n x k), labels ``y``, groups ``g`` (incl. sizes 1 and 2).

    Sets include empty and full sets; ``classes`` are ints or strings.
    """
    rng = np.random.default_rng(seed)
    classes = [f"c{j}" for j in range(k)] if strings else list(range(k))
    m = rng.random((n, k)) < rng.uniform(0.2, 0.8, size=(n, 1))
    m[:5] = False  # empty sets
    m[5:10] = True  # full sets
    yi = rng.integers(0, k, size=n)
    y = np.array(classes, dtype=object)[yi] if strings else yi
    groups = rng.choice(["g0", "g1", "g2", "g3"], size=n - 3, p=[0.4, 0.3, 0.2, 0.1])
    g = np.concatenate([groups, ["one", "two", "two"]])
    return {"m": m, "yi": yi, "y": y, "g": g, "classes": classes}


def frame_dict(d: dict[str, Any], *, list_column: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"y": list(d["y"]) if isinstance(d["y"][0], str) else d["y"], "g": d["g"]}
    if list_column:
        out["s"] = [[c for c, inside in zip(d["classes"], row) if inside] for row in d["m"]]
    else:
        for j in range(d["m"].shape[1]):
            out[f"m{j}"] = d["m"][:, j]
    return out


# ---------------------------------------------------------------------------
# set metrics
# ---------------------------------------------------------------------------
def set_covered(yi: np.ndarray, m: np.ndarray) -> np.ndarray:
    return np.array([m[i, yi[i]] for i in range(len(yi))], dtype=float)


def set_coverage(yi, m) -> float:
    return float(set_covered(yi, m).mean())


def set_size(m) -> float:
    return float(m.sum(axis=1).mean())


def size_rate(m, size: int) -> float:
    return float((m.sum(axis=1) == size).mean())


def set_ssc(yi, m, num_bins: int | None) -> list[tuple[int, int, float, int]]:
    """(size_min, size_max, coverage, n) of the non-empty strata."""
    k = m.shape[1]
    if num_bins is None:
        ranges = [(s, s) for s in range(k + 1)]
    else:
        # contiguous ranges of sizes 0..k, lengths differing by at most one
        base, extra = divmod(k + 1, num_bins)
        ranges, start = [], 0
        for b in range(num_bins):
            length = base + (1 if b < extra else 0)
            ranges.append((start, start + length - 1))
            start += length
    sizes = m.sum(axis=1)
    cov = set_covered(yi, m)
    out = []
    for lo, hi in ranges:
        sel = (sizes >= lo) & (sizes <= hi)
        if sel.any():
            out.append((lo, hi, float(cov[sel].mean()), int(sel.sum())))
    return out


def set_ssc_score(yi, m, num_bins, include_empty: bool = False) -> float:
    """Minimum stratum coverage; by default over the rows with a non-empty set (same strata)."""
    if not include_empty:
        keep = m.sum(axis=1) > 0
        if not keep.any():
            return float("nan")
        yi, m = yi[keep], m[keep]
    return min(c for _, _, c, _ in set_ssc(yi, m, num_bins))


# ---------------------------------------------------------------------------
# Vovk et al.'s criteria
# ---------------------------------------------------------------------------
def criteria(p: np.ndarray, eps: float, yi: np.ndarray | None = None) -> dict[str, float]:
    """The ten criteria (and credibility, empty fraction) by direct loops."""
    n, k = p.shape
    rows: dict[str, list[float]] = {c: [] for c in ["S", "N", "U", "F", "M", "E", "credibility", "empty"]}
    if yi is not None:
        rows.update({c: [] for c in ["OU", "OF", "OM", "OE"]})
    for i in range(n):
        pi = p[i]
        ordered = sorted(pi, reverse=True)
        in_set = [j for j in range(k) if pi[j] > eps]
        rows["S"].append(sum(pi))
        rows["N"].append(len(in_set))
        rows["U"].append(ordered[1])  # ties: a repeated largest value is also the second largest
        rows["F"].append(sum(pi) - ordered[0])
        rows["M"].append(float(len(in_set) > 1))
        rows["E"].append(max(len(in_set) - 1, 0))
        rows["credibility"].append(ordered[0])
        rows["empty"].append(float(len(in_set) == 0))
        if yi is not None:
            false = [j for j in range(k) if j != yi[i]]
            rows["OU"].append(max(pi[j] for j in false))
            rows["OF"].append(sum(pi[j] for j in false))
            rows["OM"].append(float(any(j in in_set for j in false)))
            rows["OE"].append(float(sum(j in in_set for j in false)))
    return {c: float(np.mean(v)) for c, v in rows.items()}


def random_pvalues(seed: int, n: int = 120, k: int = 4) -> dict[str, Any]:
    """P-values on a coarse grid (many ties, exact 0 and 1), labels and groups."""
    rng = np.random.default_rng(seed)
    p = rng.integers(0, 11, size=(n, k)) / 10.0
    p[:4] = 0.5  # all tied
    p[4, :] = [1.0, 1.0] + [0.0] * (k - 2)  # tied largest
    yi = rng.integers(0, k, size=n)
    groups = rng.choice(["g0", "g1", "g2"], size=n - 3, p=[0.5, 0.3, 0.2])
    g = np.concatenate([groups, ["one", "two", "two"]])
    return {"p": p, "yi": yi, "g": g}


# ---------------------------------------------------------------------------
# conditional coverage
# ---------------------------------------------------------------------------
def holm(p: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (loop form)."""
    p = np.asarray(p, float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        adjusted[idx] = running
    return adjusted


def bh(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg step-up adjusted p-values (loop form)."""
    p = np.asarray(p, float)
    m = len(p)
    out = np.empty(m)
    for i in range(m):
        out[i] = min(1.0, min(p[j] * m / (np.sum(p <= p[j])) for j in range(m) if p[j] >= p[i]))
    return out


def worst_slab(x: np.ndarray, covered: np.ndarray, delta: float, n_directions: int, seed: int) -> float:
    """Worst slab coverage by brute force over all slabs {a <= v.x <= b}."""
    n, d = x.shape
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n_directions, d))
    need = int(np.ceil(delta * n - 1e-12))
    best = np.inf
    for direction in v:
        z = x @ direction
        values = np.unique(z)
        for a in values:
            for b in values[values >= a]:
                sel = (z >= a) & (z <= b)
                if sel.sum() >= need:
                    best = min(best, covered[sel].mean())
    return float(best)
