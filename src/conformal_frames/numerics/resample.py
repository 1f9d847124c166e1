"""Deterministic Poisson(1) replicate weights from a hash of the row content.

The bootstrap (:mod:`conformal_frames.metrics.bootstrap`) needs, for every row and
every replicate ``b``, a count ``w_b ~ Poisson(1)`` that is the same on every
backend, for any row order and partitioning.  Narwhals has no hash expression,
so the counts are computed with Float64 arithmetic on integers below ``2^52``
only (``+``, ``*``, ``/``, ``floor`` and comparisons), where every step is
exact: pandas, polars, DuckDB and Spark give bit-identical counts.

1. **Values to integers.**  Each hashed value ``v`` (a numeric or Boolean
   input as Float64; a string, categorical or temporal input by its dense rank
   among the frame's values) is written as ``sign * 2^(32 t) * w`` with
   ``w`` in ``[1, 2^32)`` and ``t`` in ``-5..4`` (an exact power-of-two
   scaling; magnitudes beyond ``2^±160`` are clipped there first, and
   missing or non-finite values are hashed as 0), then cut into two integers:
   ``E = 128 floor(w) + 2 t' + sign`` (``t'`` a code of the tier) and
   ``F = 2^52 (w - floor(w))``; zero is ``(0, 0)``.  For magnitudes inside
   ``[2^-160, 2^160)`` this is injective.
2. **Row hash.**  Modulo the prime ``P = 2^31 - 1``: one integer per column
   ``x_c = (E mod P) * A + (F mod P)``, combined as ``L = sum_c (x_c + 1) M_c``
   with distinct multipliers ``M_c`` (column order matters), then the
   *duplicate index*: rows equal in every hashed value (and in the group keys)
   are numbered ``1..m`` by a window and the number is mixed in, so identical
   rows still get independent counts (which physical row gets which number
   does not matter: the rows are indistinguishable to the metric).  With
   ``block=`` the block value alone is hashed and no index is added: the rows
   of a block share their counts.  Two nonlinear rounds follow
   (``h -> rotate(h^2 mod P)``, a 31-bit rotation).
3. **Replicate draw.**  For replicate ``b``, ``h_b = (G + K_b)^2 mod P``
   with a constant ``K_b`` derived from ``(seed, b)`` in Python
   (splitmix64), so replicates and seeds differ by constants only;
   ``u_b = (h_b + 1/2) / P`` is uniform on ``(0, 1)`` to a resolution of
   ``1/P ~ 4.7e-10`` (the squares mod ``P`` are equidistributed).  The square
   is expanded (``G^2 + 2 K_b G + K_b^2``) so that a replicate costs two
   short expressions.
4. **Poisson(1) by inverse CDF.**  ``w_b = sum_{j=0}^{11} 1[u_b > F(j)]``
   with ``F`` the Poisson(1) CDF: counts ``0..12``; the mass of ``12`` and
   beyond (``P(X >= 12) ~ 8.3e-10``) is put on 12.

The squaring makes the map nonlinear (a purely linear hash gives visibly
dependent replicates on equally spaced data); the tests check uniformity,
independence between replicates and between neighbouring rows, and the
numpy re-implementation bit for bit.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames.engine import Query, total

__all__ = [
    "POISSON_MAX",
    "P",
    "poisson_counts",
    "poisson_thresholds",
    "replicate_constants",
    "replicate_count_row",
    "replicate_hash_rows",
    "replicate_terms",
    "replicate_weight_rows",
]

#: the prime modulus 2^31 - 1 (Mersenne): 2^32 = 2 (mod P)
P = 2147483647.0
#: Park-Miller multipliers (full period modulo P)
A = 48271.0
A2 = 69621.0
#: column multipliers M_c (primes below 2^17: every product stays below 2^52)
_COLUMN_MULTIPLIERS = (
    65537.0,
    65539.0,
    65543.0,
    65551.0,
    65557.0,
    65563.0,
    65579.0,
    65581.0,
    65587.0,
    65599.0,
    65609.0,
    65617.0,
    65629.0,
    65633.0,
    65647.0,
    65651.0,
)
#: largest count: the Poisson(1) mass beyond is put on it
POISSON_MAX = 12
#: tiers of the power-of-two normalisation: |v| in [2^(32 t), 2^(32 (t + 1)))
_TIERS = range(-5, 5)
_CLIP_LOW = 2.0 ** (32 * _TIERS[0])
_CLIP_HIGH = 2.0 ** (32 * (_TIERS[-1] + 1)) * (1.0 - 2.0**-53)
_MASK64 = (1 << 64) - 1


def poisson_thresholds() -> tuple[float, ...]:
    """``F(j) * P - 1/2`` for ``j = 0..11``: ``u > F(j)`` iff ``h > F(j) P - 1/2``."""
    cdf, term = 0.0, math.exp(-1.0)
    out = []
    for j in range(POISSON_MAX):
        cdf += term
        term /= j + 1
        out.append(cdf * P - 0.5)
    return tuple(out)


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def replicate_constants(seed: int, n_resamples: int) -> tuple[float, ...]:
    """``K_b`` in ``[0, P)`` for ``b = 0..n_resamples - 1`` (exact Python integers)."""
    base = _splitmix64(seed & _MASK64)
    return tuple(float(_splitmix64(base ^ (b * 0xD1B54A32D192ED03 & _MASK64)) % int(P)) for b in range(n_resamples))


# ---------------------------------------------------------------------------
# exact integer arithmetic in Float64 (every operand and result below 2^52)
# ---------------------------------------------------------------------------
def _mod_p(x: nw.Expr) -> nw.Expr:
    """``x mod P`` for an integer ``0 <= x < 2^52`` (the quotient's floor is exact)."""
    return x - (x / P).floor() * P


def _square(h: nw.Expr) -> nw.Expr:
    """``h^2 mod P`` for ``0 <= h < 2^31``: ``h = a 2^16 + b``, ``2^32 = 2 (mod P)``."""
    a = (h / 65536.0).floor()
    b = h - a * 65536.0
    return _mod_p(2.0 * a * a + 131072.0 * a * b + b * b)


def _rotate(h: nw.Expr) -> nw.Expr:
    """A 31-bit rotation by 15 bits (``P`` itself maps to 0)."""
    hi = (h / 65536.0).floor()
    lo = h - hi * 65536.0
    return _mod_p(lo * 32768.0 + hi)


def _chunks(q: Query, v: str) -> tuple[str, str]:
    """Row columns ``(E, F)`` of a cleaned Float64 value row (see the module docstring).

    Intermediate rows keep every expression small (no repeated subtrees).
    """
    a = q.row(("boot_abs", v), nw.col(v).abs().clip(lower_bound=_CLIP_LOW, upper_bound=_CLIP_HIGH), inputs=[v])
    scale: nw.Expr = nw.lit(1.0)
    tier: nw.Expr = nw.lit(0.0)
    for t in _TIERS:
        if t < 0:  # below 2^(32 (t + 1)): scale up by 2^32
            below = nw.col(a) < 2.0 ** (32 * (t + 1))
            scale = scale * nw.when(below).then(nw.lit(2.0**32)).otherwise(nw.lit(1.0))
            tier = tier + below.cast(nw.Float64)
        elif t > 0:  # at or above 2^(32 t): scale down by 2^32
            above = nw.col(a) >= 2.0 ** (32 * t)
            scale = scale * nw.when(above).then(nw.lit(2.0**-32)).otherwise(nw.lit(1.0))
            tier = tier + 6.0 * above.cast(nw.Float64)
    w = q.row(("boot_scaled", v), nw.col(a) * scale, inputs=[a])
    code = q.row(("boot_tier", v), tier, inputs=[a])
    value, ip = nw.col(v), nw.col(w).floor()
    zero = value == 0.0
    sign = (value < 0.0).cast(nw.Float64)
    e = nw.when(zero).then(nw.lit(0.0)).otherwise(ip * 128.0 + nw.col(code) * 2.0 + sign)
    f = nw.when(zero).then(nw.lit(0.0)).otherwise((nw.col(w) - ip) * 2.0**52)
    return q.row(("boot_e", v), e, inputs=[v, w, code]), q.row(("boot_f", v), f, inputs=[v, w])


def clean_row(q: Query, column: str) -> str:
    """Row column: the hashed value of ``column`` (Float64, missing/non-finite as 0)."""
    dtype = q.schema[column]
    expr = nw.col(column)
    if dtype == nw.Boolean or dtype.is_numeric():
        value = expr.cast(nw.Float64)
    elif dtype in (nw.String, nw.Categorical, nw.Enum) or dtype.is_temporal():
        if dtype in (nw.Categorical, nw.Enum):
            expr = expr.cast(nw.String)
        value = expr.rank("dense").cast(nw.Float64)  # rank among the frame's distinct values
    else:
        msg = (
            f"bootstrap cannot hash column {column!r} (dtype {dtype}) to derive replicate weights; "
            "pass block= a column that identifies the rows (e.g. a row id)"
        )
        raise TypeError(msg)
    # missing and non-finite values as 0; -0.0 as 0.0 (engines disagree on grouping them)
    clean = nw.when(value.is_finite() & (value != 0.0)).then(value).otherwise(nw.lit(0.0))
    return q.row(("boot_value", column), clean)


def _row_hash(q: Query, values: Sequence[str], *, duplicates: bool) -> str:
    """Row column ``G``: the mixed hash of ``values`` (and the duplicate index)."""
    xs = []
    for v in values:
        ef, ff = _chunks(q, v)
        x = _mod_p(_mod_p(nw.col(ef)) * A + _mod_p(nw.col(ff)))
        xs.append(q.row(("boot_x", v), x, inputs=[ef, ff]))
    if len(xs) > len(_COLUMN_MULTIPLIERS):
        msg = f"bootstrap hashes at most {len(_COLUMN_MULTIPLIERS)} columns, got {len(xs)}; pass block="
        raise ValueError(msg)
    terms = [_mod_p((nw.col(x) + 1.0) * m) for x, m in zip(xs, _COLUMN_MULTIPLIERS)]
    mixed = terms[0]
    for term in terms[1:]:
        mixed = mixed + term
    key = ("boot_l", *values)
    h = q.row(key, _mod_p(mixed), inputs=xs)
    if duplicates:
        index = q.row(
            ("boot_dup", *values), q.over(nw.col(values[0]).rank("ordinal"), *values).cast(nw.Float64), inputs=values
        )
        h = q.row(("boot_l2", *values), _mod_p(nw.col(h) * A + nw.col(index)), inputs=[h, index])
    for r, c in enumerate((1013904223.0, 1664525.0)):
        m = q.row(("boot_mix", r, *values), _mod_p(nw.col(h) * A2 + c), inputs=[h])
        s = q.row(("boot_sq", r, *values), _square(nw.col(m)), inputs=[m])
        h = q.row(("boot_rot", r, *values), _rotate(nw.col(s)), inputs=[s])
    return h


def _replicate_constants(k: float) -> tuple[float, float, float]:
    """``(c1, c2, c3)`` with ``(G + k)^2 = S + c1 G_hi + c2 G_lo + c3 (mod P)``.

    ``S = G^2 mod P``, ``G = 2^16 G_hi + G_lo``: ``c2 = 2k``, ``c1 = 2^16 c2``,
    ``c3 = k^2`` (mod P, exact Python integers).  Each product stays below 2^48.
    """
    p, kk = int(P), int(k)
    c2 = 2 * kk % p
    return float(c2 * 65536 % p), float(c2), float(kk * kk % p)


def replicate_hash_rows(q: Query, columns: Sequence[str], *, block: str | None = None) -> tuple[str, str, str]:
    """Row columns ``(G^2 mod P, G_hi, G_lo)`` of the row hash ``G``, shared by every replicate.

    ``columns`` are the hashed input columns (the metric's inputs); with
    ``block`` only that column is hashed and rows of a block share counts.
    """
    hashed = [block] if block is not None else list(columns)
    values = [clean_row(q, c) for c in hashed]
    g = _row_hash(q, values, duplicates=block is None)
    g_col = nw.col(g)
    g_hi = q.row(("boot_ghi", g), (g_col / 65536.0).floor(), inputs=[g])
    g_lo = q.row(("boot_glo", g), g_col - (g_col / 65536.0).floor() * 65536.0, inputs=[g])
    g_sq = q.row(("boot_gsq", g), _square(g_col), inputs=[g])
    return g_sq, g_hi, g_lo


def replicate_terms(k: float) -> tuple[float, float, float]:
    """The constants ``(c1, c2, c3)`` of the replicate of constant ``K_b = k`` (see :func:`replicate_count_row`)."""
    return _replicate_constants(k)


def replicate_count_row(
    q: Query,
    hashed: tuple[str, str, str],
    *,
    seed: int,
    b: int,
    k: float = 0.0,
) -> str:
    """Row column: the Poisson(1) count of replicate ``b`` (``k``: its constant ``K_b``).

    ``hashed`` is :func:`replicate_hash_rows`; two row columns per replicate:
    ``(G + K_b)^2 mod P`` from the three shared ones, then the count
    (:func:`poisson_counts` computes the same numbers in numpy).
    """
    g_sq, g_hi, g_lo = hashed
    c1, c2, c3 = (nw.lit(c) for c in _replicate_constants(k))
    v = nw.col(g_sq) + c1 * nw.col(g_hi) + c2 * nw.col(g_lo) + c3
    h = q.row(("boot_h", g_sq, seed, b), _mod_p(v), inputs=[g_sq, g_hi, g_lo])
    count = total((nw.col(h) > t).cast(nw.Float64) for t in poisson_thresholds())
    return q.row(("boot_w", g_sq, seed, b), count, inputs=[h])


#: width of a cell of the count table of :func:`poisson_counts` (``2^31 / 2^16`` cells)
_CELL = 32768.0


@functools.cache
def _count_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The thresholds, the count below each cell of ``h`` and whether a threshold falls inside the cell."""
    thresholds = np.array(poisson_thresholds())
    starts = np.arange(int(P // _CELL) + 1) * _CELL
    below = np.searchsorted(thresholds, starts, side="left").astype(np.float64)
    inside = np.zeros(starts.size, dtype=bool)
    inside[(thresholds // _CELL).astype(np.intp)] = True
    return thresholds, below, inside


def poisson_counts(hashed: Sequence[np.ndarray], terms: tuple[float, float, float]) -> np.ndarray:
    """The counts of :func:`replicate_count_row` in numpy, bit for bit (Float64).

    ``hashed``: the values of the three :func:`replicate_hash_rows` columns;
    ``terms``: :func:`replicate_terms` of the replicate.  The same exact
    integer arithmetic gives ``h``; its count (the thresholds below it) is read
    from a table of ``2^16`` cells of ``h``, searched only in the few cells a
    threshold falls into: twice as fast as a search per value.
    """
    g_sq, g_hi, g_lo = hashed
    c1, c2, c3 = terms
    h = g_sq + c1 * g_hi
    h += c2 * g_lo
    h += c3
    quotient = h / P
    np.floor(quotient, out=quotient)
    quotient *= P
    h -= quotient  # (G + K_b)^2 mod P, an integer in [0, P)
    thresholds, below, inside = _count_table()
    cell = (h * (1.0 / _CELL)).astype(np.intp)
    counts = below[cell]
    near = np.flatnonzero(inside[cell])
    counts[near] = np.searchsorted(thresholds, h[near], side="left")
    return counts


def replicate_weight_rows(
    q: Query, columns: Sequence[str], *, seed: int, n_resamples: int, block: str | None = None
) -> list[str]:
    """Row columns of the Poisson(1) counts of replicates ``0..n_resamples - 1``.

    :func:`replicate_hash_rows`, then :func:`replicate_count_row` per replicate
    (the bootstrap itself registers them chunk by chunk).
    """
    hashed = replicate_hash_rows(q, columns, block=block)
    constants = replicate_constants(seed, n_resamples)
    return [replicate_count_row(q, hashed, seed=seed, b=b, k=k) for b, k in enumerate(constants)]
