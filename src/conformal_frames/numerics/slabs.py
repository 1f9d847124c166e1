"""The worst-slab search behind :func:`conformal_frames.worst_slab_coverage`.

Per direction ``v`` the rows are sorted by ``v . x`` and a slab is a window
of that order whose ends fall between distinct values; :func:`min_slab_mean`
finds the smallest window mean with Dinkelbach's iteration.  The search over
the ``M`` directions (:func:`worst_slab`) returns exactly the minimum over all
of them while sorting only a few:

- a cheap lower bound per direction from counts in equal-width buckets of
  ``v . x`` (one ``bincount``, no sort; :func:`bucket_lower_bounds`);
- the directions are then solved exactly in increasing order of their bound,
  with one running minimum ``lam`` shared by all of them (a direction whose
  windows are all ``>= lam`` costs one scan), and the search stops at the
  first direction whose bound is ``>= lam``: no later one can go lower;
- with one feature every direction is a positive or negative multiple of the
  others: the slabs are those of ``x`` itself (same windows, same or reversed
  order) whenever the products ``x v`` tie exactly where ``x`` does, which is
  checked per direction; those directions are solved once.

Every window mean is computed from integer counts, so the minimum is the
same float whichever direction or iteration reaches it.  The bounds' scans
round like :func:`min_slab_mean`'s (about ``n * 1e-16``, far below the
``1 / n`` by which a better window must go below ``lam``), so they never rule
out a direction that one sort per direction would have found better.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

#: directions x rows per block of projections (the memory of one block)
CHUNK_CELLS = 2_000_000
#: buckets of the lower bounds (at least; ``n // 16`` on more rows, at most ``n // 8``)
BINS = 4096
#: directions of ``n_directions=None``: ``DIRECTIONS`` up to ``DIRECTION_CELLS / DIRECTIONS`` rows,
#: then ``DIRECTION_CELLS / n`` (at least ``MIN_DIRECTIONS``)
DIRECTIONS = 1000
DIRECTION_CELLS = 10**8
MIN_DIRECTIONS = 100
#: fewer rows: every direction is solved (the bounds would cost more than they save)
SEARCH_ROWS = 1000


def slab_directions(n_directions: int, d: int, seed: int) -> np.ndarray:
    """The random directions: ``default_rng(seed).standard_normal((M, d))``.

    The generator fills the array row by row: the first ``k`` directions of
    ``M`` are the ``k`` directions of ``n_directions=k``.
    """
    return np.random.default_rng(seed).standard_normal((n_directions, d))


def default_directions(n: int) -> int:
    """``n_directions=None`` on ``n`` rows: 1000 up to 1e5 rows, then ``1e8 / n``, at least 100.

    The work of the search is about ``n_directions * n`` (the bounds of every
    direction, :func:`bucket_lower_bounds`): it stays near ``1e8`` cells on
    large groups.
    """
    return int(min(DIRECTIONS, max(MIN_DIRECTIONS, DIRECTION_CELLS // max(n, 1))))


# ---------------------------------------------------------------------------
# exact minimum per projection: sort, prefix sums, Dinkelbach scans
# ---------------------------------------------------------------------------
def _window_prefixes(z: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prefix sums of ``c`` in the sorted order of each row of ``z``, twice.

    Boundary ``i`` sits between sorted rows ``i - 1`` and ``i``; it may start
    or end a window only between distinct values.  Returned: the prefix sums
    with ``-inf`` at the other boundaries (window starts) and with ``+inf``
    there (window ends).  Tied rows are never split, so their order (the
    sort needs not be stable) does not change any value at a boundary; NaN
    (sorted last, never tied) keeps the stable order.
    """
    m, n = z.shape
    order = np.argsort(z, axis=1, kind="stable" if np.isnan(z).any() else None)
    zs = np.take_along_axis(z, order, axis=1)
    starts = np.zeros((m, n + 1))
    np.cumsum(c[order], axis=1, out=starts[:, 1:])
    tied = np.zeros((m, n + 1), dtype=bool)
    np.equal(zs[:, 1:], zs[:, :-1], out=tied[:, 1:n])
    ends = starts.copy()
    starts[tied] = -np.inf
    ends[tied] = np.inf
    return starts, ends


def _best_windows(starts: np.ndarray, ends: np.ndarray, lam: np.ndarray, need: int) -> np.ndarray:
    """One Dinkelbach scan per row: the mean of its most negative window at ``lam``.

    With ``S_i = C_i - lam i``, the window ``[i, j)`` (``j - i >= need``)
    minimising ``S_j - S_i``; ``lam`` is one value per row (shape ``(m, 1)``)
    or one shared value (shape ``(1, 1)``).  The mean is computed from the
    integer counts of the window.
    """
    n = starts.shape[1] - 1
    lam_pos = lam * np.arange(n + 1, dtype=float)
    s = starts - lam_pos
    best_start = np.maximum.accumulate(s[:, : n + 1 - need], axis=1)
    gap = ends[:, need:] - lam_pos[:, need:]
    gap -= best_start
    j = need + np.argmin(gap, axis=1)
    i = _first_max_upto(s, j - need)
    r = np.arange(len(j))
    return (ends[r, j] - starts[r, i]) / (j - i)


def _first_max_upto(s: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Per row ``r``: the first index of the maximum of ``s[r, : last[r] + 1]``."""
    if len(s) <= 16:  # a few long rows: no masked copy
        return np.array([np.argmax(row[: k + 1]) for row, k in zip(s, last)], dtype=np.intp)
    upto = np.arange(s.shape[1]) <= last[:, None]
    return np.argmax(np.where(upto, s, -np.inf), axis=1)


def min_slab_mean(z: np.ndarray, c: np.ndarray, need: int) -> np.ndarray:
    """Smallest mean of ``c`` over slabs ``{a <= z <= b}`` holding >= ``need`` rows.

    ``z`` is ``(M, n)`` (one projection per row of ``z``), ``c`` the 0/1
    covered indicator.  Per projection: sort once (O(n log n)); a slab is a
    window ``[i, j)`` of the sorted order whose ends fall between distinct
    values.  The minimum mean ``c*`` is found by Dinkelbach's iteration: start
    from the mean ``lam`` of the whole range; some window has mean ``< lam``
    iff ``min_j (S_j - max_{i <= j - need} S_i) < 0`` with ``S_i = C_i - lam i``
    (``C`` the prefix sums), an O(n) vectorised scan whose minimising window
    gives the next ``lam``, its mean computed from integer counts.  The means
    decrease strictly and the iteration stops at the first window that is not
    better: the minimum, after a handful of scans (superlinear convergence).
    Total O(M n log n).

    The scan itself is in floating point (rounding ~``n * 1e-16``): the result is
    the exact minimum while that stays below ``1 / n^2``, the smallest gap
    between two distinct means (n up to ~10^5), and beyond that within a few
    ``1e-11`` of it.
    """
    starts, ends = _window_prefixes(z, c)
    lam = starts[:, -1] / z.shape[1]  # the whole range: a slab holding every row
    todo = np.arange(len(lam))
    while todo.size:
        mean = _best_windows(starts[todo], ends[todo], lam[todo, None], need)
        better = mean < lam[todo]
        lam[todo[better]] = mean[better]
        todo = todo[better]
    return lam


def lowest_slab_mean(z: np.ndarray, c: np.ndarray, need: int, lam: float) -> float:
    """``min(lam, min_slab_mean(z, c, need).min())`` with one shared iteration.

    Dinkelbach's iteration of :func:`min_slab_mean` run on all rows at once
    from ``lam`` (the mean of some window of at least ``need`` rows, e.g. a
    minimum found before): after each scan ``lam`` becomes the smallest
    better window mean of any row, and a row leaves as soon as none of its
    windows is below ``lam`` (usually after its first scan).
    """
    starts, ends = _window_prefixes(z, c)
    while len(starts):
        mean = _best_windows(starts, ends, np.array([[lam]]), need)
        better = mean < lam
        if not better.any():
            break
        lam = float(mean[better].min())
        starts, ends = starts[better], ends[better]
    return lam


# ---------------------------------------------------------------------------
# lower bounds from bucket counts
# ---------------------------------------------------------------------------
def _bucket_counts(zt: np.ndarray, uncovered: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Covered and uncovered rows per equal-width bucket of each column of ``zt``.

    ``zt`` is ``(n, m)`` (one projection per column).  A row's bucket is
    ``floor((z - lo) * scale)`` clipped to ``[0, bins)``, with ``lo`` and
    ``scale`` from the range of every 16th row: non-decreasing in ``z``, so
    each bucket is a run of the sorted order.  Returns two ``(m, bins)``
    integer arrays.
    """
    m = zt.shape[1]
    sample = zt[::16]
    lo = sample.min(axis=0)
    with np.errstate(over="ignore", invalid="ignore"):  # huge projections: clipped to the end buckets
        span = sample.max(axis=0) - lo
        spread = np.isfinite(span) & (span > 0)
        scale = np.where(spread, bins / np.where(spread, span, 1.0), 0.0)
        t = zt * scale
        t -= np.where(spread, lo * scale, 0.0)
    if not spread.all():
        t[:, ~spread] = 0.0  # one bucket (no NaN from inf * 0)
    np.clip(t, 0, bins - 1, out=t)
    t += np.arange(m) * bins
    idx = t.astype(np.intp)
    idx += np.where(uncovered, m * bins, 0)[:, None]
    counts = np.bincount(idx.ravel(), minlength=2 * m * bins).reshape(2, m, bins)
    return counts[0], counts[1]


def _last_start(sizes: np.ndarray, need: int) -> np.ndarray:
    """Per bucket ``b2``: the last bucket ``b1 < b2`` with ``N_{b2+1} - N_{b1} >= need`` (-1: none).

    ``sizes`` is ``(m, bins)``; ``N`` its prefix sums (``N_0 = 0``).  One
    ``searchsorted`` over all rows, offset by row to keep them apart.
    """
    m, bins = sizes.shape
    prefix = np.zeros((m, bins + 1), dtype=np.int64)
    np.cumsum(sizes, axis=1, out=prefix[:, 1:])
    width = prefix[:, -1:] + 1
    offset = np.arange(m)[:, None] * width
    flat = (prefix + offset).ravel()
    found = np.searchsorted(flat, (prefix[:, 1:] - need + offset).ravel(), side="right").reshape(m, bins)
    last = found - 1 - np.arange(m)[:, None] * (bins + 1)
    return np.minimum(last, np.arange(bins) - 1)


def _bucket_sums(zt: np.ndarray, c: np.ndarray, need: int, bins: int) -> tuple[np.ndarray, ...]:
    """The arrays of :func:`bucket_lower_bounds`' scans, each ``(m, bins)``.

    ``covered`` (``(m, bins + 1)``, prefix sums ``K``), ``end_rows`` (``N_b +
    u_b``: rows before bucket ``b`` plus its uncovered ones), ``start_rows``
    (``N_{b+1} - u_b``), ``last`` (:func:`_last_start`, 0 where infeasible)
    and ``feasible``.
    """
    cov, unc = _bucket_counts(zt, c == 0, bins)
    last = _last_start(cov + unc, need)
    covered = np.zeros((len(cov), bins + 1))
    np.cumsum(cov, axis=1, out=covered[:, 1:])
    rows = np.zeros((len(cov), bins + 1))
    np.cumsum(cov + unc, axis=1, out=rows[:, 1:])
    return covered, rows[:, :bins] + unc, rows[:, 1:] - unc, np.maximum(last, 0), last >= 0


def bucket_lower_bounds(zt: np.ndarray, c: np.ndarray, need: int, bins: int, start: float = 1.0) -> np.ndarray:
    """A lower bound of each direction's smallest window mean, from bucket counts.

    A window of ``>= need`` rows whose first and last rows are in buckets
    ``b1 < b2`` (a window inside one bucket: take a neighbour as the other)
    contains the buckets strictly between, with ``A`` covered rows out of
    ``S``, and at most the ``u1`` and ``u2`` uncovered rows of the two end
    buckets; so for any ``0 <= lam <= 1`` its ``covered - lam * rows`` is at
    least ``A - lam (S + u1 + u2) = F(b2) - H(b1)``, with ``F(b) = K_b - lam
    (N_b + u_b)`` and ``H(b) = K_{b+1} - lam (N_{b+1} - u_b)``.  Dinkelbach's
    iteration on ``A / (S + u1 + u2)`` over the pairs whose buckets hold
    ``>= need`` rows (the scan of :func:`min_slab_mean` on ``bins``
    buckets), started at ``min(start, mean of c)``, gives ``lam*`` with no
    window mean below it (``start`` itself when no pair is below it).
    ``zt`` is ``(n, m)``: one projection per column.
    """
    covered, end_rows, start_rows, last, feasible = _bucket_sums(zt, c, need, bins)
    lam = np.minimum(covered[:, -1] / len(zt), start)  # start: the whole range
    todo = np.arange(len(lam))
    while todo.size:
        step = _bound_step(covered[todo], end_rows[todo], start_rows[todo], last[todo], feasible[todo], lam[todo])
        better = step < lam[todo]
        lam[todo[better]] = step[better]
        todo = todo[better]
    return lam


def _bound_step(
    covered: np.ndarray,
    end_rows: np.ndarray,
    start_rows: np.ndarray,
    last: np.ndarray,
    feasible: np.ndarray,
    lam: np.ndarray,
) -> np.ndarray:
    """One scan of :func:`bucket_lower_bounds`: the ratio of the most negative pair (``inf``: none)."""
    bins = last.shape[1]
    f = covered[:, :bins] - lam[:, None] * end_rows
    h = covered[:, 1:] - lam[:, None] * start_rows
    hmax = np.maximum.accumulate(h, axis=1)
    r = np.arange(len(lam))
    gap = np.where(feasible, f - hmax[r[:, None], last], np.inf)
    b2 = np.argmin(gap, axis=1)
    out = np.full(len(lam), np.inf)
    neg = np.flatnonzero(gap[r, b2] < 0)
    for k in neg:
        b1 = int(np.argmax(h[k, : last[k, b2[k]] + 1]))
        a = covered[k, b2[k]] - covered[k, b1 + 1]
        out[k] = a / (end_rows[k, b2[k]] - start_rows[k, b1])
    return out


# ---------------------------------------------------------------------------
# the search over directions
# ---------------------------------------------------------------------------
def _projections(x: np.ndarray, v: np.ndarray, start: int, step: int) -> np.ndarray:
    """``v . x`` for directions ``start .. start + step - 1``: ``(n, step)``, one per column.

    Always this product on these blocks, so a direction's projection is the
    same float wherever it is computed.
    """
    return x @ v[start : start + step].T


def _one_feature_repeats(x: np.ndarray, zt: np.ndarray, v: np.ndarray) -> np.ndarray:
    """One feature: the columns of ``zt`` that are exactly ``x v`` (``True``).

    Such a projection is monotone in ``x`` (non-decreasing for ``v > 0``,
    non-increasing for ``v < 0``): its slabs are slabs of ``x`` (fewer when
    the product ties two distinct values of ``x``), so its minimum is at
    least that of ``x``.
    """
    return (zt == x * v[:, 0]).all(axis=0)


def _same_ties(x: np.ndarray, v: np.ndarray, columns: np.ndarray) -> int | None:
    """The first of ``columns`` whose ``x v`` ties exactly where ``x`` does (its slabs are those of ``x``)."""
    xs = np.sort(x[:, 0])
    distinct = xs[1:] != xs[:-1]
    for k in columns:
        zs = xs * v[k, 0]
        if np.array_equal(distinct, zs[1:] != zs[:-1]):
            return int(k)
    return None


def _search_block(zt: np.ndarray, c: np.ndarray, need: int, bins: int, lam: float) -> float:
    """``min(lam, minimum of the block's directions)``: bounds, then exact solves in their order.

    ``zt`` is ``(n, m)``, one projection per column.  The directions whose
    bound is below ``lam`` are solved by :func:`lowest_slab_mean` in batches
    of 1, 2, 4, ... in increasing order of their bound, until the next bound
    is not below the running minimum.
    """
    bounds = bucket_lower_bounds(zt, c, need, bins, start=lam)
    order = np.argsort(bounds, kind="stable")
    done, batch = 0, 1
    while done < len(order) and bounds[order[done]] < lam:
        todo = order[done : done + batch]
        todo = np.sort(todo[bounds[todo] < lam])
        lam = lowest_slab_mean(np.ascontiguousarray(zt[:, todo].T), c, need, lam)
        done += batch
        batch *= 2
    return lam


def worst_slab(
    x: np.ndarray,
    c: np.ndarray,
    v: np.ndarray,
    need: int,
    *,
    chunk_cells: int = CHUNK_CELLS,
    search_rows: int = SEARCH_ROWS,
    tick: Callable[[int], None] | None = None,
) -> float:
    """``min`` over the directions ``v`` of :func:`min_slab_mean` of ``x v`` (``x`` is ``(n, d)``).

    Exactly that minimum, by the search of the module docstring, block by
    block of directions (the blocks of ``chunk_cells`` projected values on
    which :func:`_projections` always runs); below ``search_rows`` rows, by
    :func:`lowest_slab_mean` on every block.  ``tick(k)`` is called after
    each block with its number of directions (progress).
    """
    lam = math.inf
    for done, value in _blocks(x, c, v, need, chunk_cells=chunk_cells, search_rows=search_rows):
        lam = value
        if tick is not None:
            tick(done)
    return lam


def _blocks(
    x: np.ndarray, c: np.ndarray, v: np.ndarray, need: int, *, chunk_cells: int, search_rows: int
) -> Iterator[tuple[int, float]]:
    """The search of :func:`worst_slab`, block by block: ``(directions of the block, minimum so far)``."""
    n = len(c)
    step = max(1, chunk_cells // (n + 1))
    if not (np.isfinite(x).all() and np.isin(c, (0.0, 1.0)).all()):  # invalid rows: their group is null
        low = math.inf
        for s in range(0, len(v), step):
            low = min(low, float(min_slab_mean(_projections(x, v, s, step).T, c, need).min()))
            yield len(v[s : s + step]), low
        return
    lam = float(c.sum()) / n  # the whole range
    if n < max(search_rows, 16):  # (16: at least 2 buckets)
        for start in range(0, len(v), step):
            lam = lowest_slab_mean(_projections(x, v, start, step).T, c, need, lam)
            yield len(v[start : start + step]), lam
        return
    # narrow buckets on many rows: tighter bounds rule out more directions (the bounds stay bounds)
    bins = min(max(BINS, n // 16), n // 8)
    as_x = False  # the minimum over the slabs of x is in lam (one feature)
    for start in range(0, len(v), step):
        zt = _projections(x, v, start, step)
        if x.shape[1] == 1:
            repeats = _one_feature_repeats(x, zt, v[start : start + step])
            if not as_x:
                first = _same_ties(x, v[start : start + step], np.flatnonzero(repeats))
                if first is not None:
                    lam = lowest_slab_mean(np.ascontiguousarray(zt[:, first : first + 1].T), c, need, lam)
                    as_x = True
            if as_x:
                zt = zt[:, ~repeats]
        if zt.shape[1]:
            lam = _search_block(zt, c, need, bins, lam)
        yield len(v[start : start + step]), lam


def slab_need(delta: float, n: int) -> int:
    """The smallest number of rows of a slab: ``max(1, ceil(delta n))``."""
    return max(1, math.ceil(delta * n - 1e-9))
