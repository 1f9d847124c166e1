"""Sequential diagnostics of interval misses (forecast / VaR backtesting).

A *miss* is a row whose value falls outside its interval, ``y < lo`` or
``y > hi`` (the complement of :func:`~conformal_frames.coverage`); with
``confidence_level = 1 - p`` the misses should be independent Bernoulli(p)
draws.  Pooled coverage tests the rate only; these tests look at the order:

- :func:`kupiec_test`: the miss rate (unconditional coverage, LR_uc);
- :func:`christoffersen_test`: independence of consecutive misses (LR_ind)
  and the conditional-coverage combination LR_cc = LR_uc + LR_ind;
- :func:`longest_miss_run`: the longest run of consecutive misses.

Rows are put in order by ``order_by=`` (a timestamp, a date, a sequence
number) within each group, so the input may come in any order; repeated
``order_by`` values within a group are invalid rows (the order would be
ambiguous).  Everything stays lazy: transitions are ``shift`` window
functions ordered by ``order_by`` plus sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import narwhals.stable.v2 as nw

from conformal_frames._roles import Column, as_role, role
from conformal_frames._validate import check_column, checked, complement, optional
from conformal_frames.engine import FinalizeFn, Metric, Query, TableFn, TableRef, aggregate, no_weights, over
from conformal_frames.inputs.intervals import covered_row, miss_column_row
from conformal_frames.inputs.levels import level_row
from conformal_frames.numerics.brownian import with_normal_sf
from conformal_frames.results import ChristoffersenTestResult, KupiecTestResult

__all__ = ["christoffersen_test", "kupiec_test", "longest_miss_run"]
METHODS = list(__all__)

F64 = nw.Float64


def miss_row(q: Query, y: str, lo: str, hi: str) -> str:
    """Row column: 1.0 where ``y`` is outside ``[lo, hi]``, else 0.0."""
    covered = covered_row(q, y, lo, hi)
    return q.row(("miss", covered), 1.0 - nw.col(covered), inputs=[covered])


def misses(q: Query, y: str | None, lo: str | None, hi: str | None, miss: str | None) -> str:
    """The miss row: from ``miss=`` (a 0/1 column) or from ``y`` outside ``[lo, hi]``."""
    if miss is not None:
        return miss_column_row(q, miss)
    assert y is not None and lo is not None and hi is not None  # checked by the factory
    return miss_row(q, y, lo, hi)


def check_miss_inputs(metric: str, y: str | None, lo: str | None, hi: str | None, miss: str | None) -> None:
    """Either ``y, lo, hi`` or ``miss=``, not both, not neither."""
    given = [v is not None for v in (y, lo, hi)]
    if miss is not None and any(given):
        msg = f"{metric}: give either y, lo, hi (the interval) or miss= (a 0/1 miss column), not both"
        raise ValueError(msg)
    if miss is None and not all(given):
        msg = f"{metric}: give y, lo and hi (the interval), or miss= (a 0/1 column, 1 = miss, e.g. a VaR hit)"
        raise ValueError(msg)
    if miss is not None and not isinstance(as_role(miss), str):
        msg = f"{metric}: miss must be a column name (a string), got {miss!r}"
        raise TypeError(msg)


def order_row(q: Query, order_by: str) -> str:
    """Row column: the ``order_by`` column (any orderable dtype), checked."""
    col = q.column(order_by)
    q.check(f"order_by column {order_by!r} has missing values", col.is_null())
    # a repeated value makes the order within the group ambiguous
    repeated = nw.len().over(*q.keys, order_by) > 1
    q.check(f"order_by column {order_by!r} has values repeated within a group in {{rows}}", repeated)
    return q.row(("order", order_by), col)


def _miss_level(q: Query, level: float | str) -> nw.Expr:
    """The expected miss rate ``p = 1 - confidence_level`` (a constant or an aggregated column)."""
    row = level_row(q, level)
    return 1.0 - q.min(row) if row is not None else nw.lit(complement(float(level)))


def _xlogx(k: nw.Expr, total: nw.Expr) -> nw.Expr:
    """``k ln(k / total)`` with ``0 ln 0 = 0``."""
    # the log of 1 where k = 0 (no log(0) computed, even in a branch not taken)
    return k * nw.when(k > 0.0).then(k / total).otherwise(1.0).log()


def _kupiec(q: Query, miss: str, level: float | str) -> tuple[nw.Expr, nw.Expr]:
    """``(LR_uc, the miss count)`` from the miss row."""
    misses = q.sum(miss)
    n = q.n
    p = _miss_level(q, level)
    # 2 [N ln(N / (n p)) + (n - N) ln((n - N) / (n (1 - p)))]: the textbook
    # -2 ln[(1-p)^(n-N) p^N / ((1-phat)^(n-N) phat^N)], written without cancellation
    lr = 2.0 * (_xlogx(misses, n * p) + _xlogx(n - misses, n * (1.0 - p)))
    return nw.when(n > 0).then(lr.clip(lower_bound=0.0)), misses


def _chi2_1_finalize(lrs: dict[str, nw.Expr]) -> FinalizeFn:
    """A finalize step adding, per named LR statistic, its chi-square(1) p-value ``2 Phi_c(sqrt(LR))``."""

    def build(out: nw.LazyFrame, ref: TableRef) -> nw.LazyFrame:
        out = out.with_columns(*[e.alias(ref.name(k)) for k, e in lrs.items()])
        roots, tails = [ref.name(f"{k}_root") for k in lrs], [ref.name(f"{k}_q") for k in lrs]
        out = out.with_columns(*[nw.col(ref.name(k)).sqrt().alias(r) for k, r in zip(lrs, roots)])
        out = with_normal_sf(out, roots, tails, ref.name("t_"))  # every tail in the same steps
        # LR = 0 (e.g. no miss for LR_ind): exactly 1, not the tail series' 1 - 1e-15
        return out.with_columns(
            *[
                nw.when(nw.col(ref.name(k)) == 0.0)
                .then(1.0)
                .otherwise((2.0 * nw.col(q)).clip(upper_bound=1.0))
                .alias(ref.name(f"{k}_p"))
                for k, q in zip(lrs, tails)
            ]
        )

    return build


# ---------------------------------------------------------------------------
# Kupiec
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class KupiecTest(Metric):
    y: str | None = checked(optional(check_column), None)
    lo: str | None = checked(optional(check_column), None)
    hi: str | None = checked(optional(check_column), None)
    confidence_level: float | str
    miss: str | None = checked(optional(check_column), None)
    default_name = "kupiec_test"
    kind = "test"
    result = KupiecTestResult

    def __post_init__(self) -> None:
        check_miss_inputs("kupiec_test", self.y, self.lo, self.hi, self.miss)
        super().__post_init__()

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        lr, _ = _kupiec(q, misses(q, self.y, self.lo, self.hi, self.miss), self.confidence_level)
        key = ("kupiec", self.y, self.lo, self.hi, self.miss, self.confidence_level)
        t = q.finalize(key, _chi2_1_finalize({"uc": lr}))
        return {"": t.col("uc"), "pvalue": t.col("uc_p")}


@no_weights("kupiec_test", "its likelihood ratio is that of a binomial count of misses; coverage(weights=) is weighted")
def kupiec_test(
    y: Column | None = None,
    lo: Column | None = None,
    hi: Column | None = None,
    *,
    confidence_level: float | str,
    miss: Column | None = None,
) -> KupiecTest:
    """Kupiec's proportion-of-failures test of the miss rate (unconditional coverage).

    With ``n`` rows, ``N`` misses (``y`` outside ``[lo, hi]``), the nominal
    miss rate ``p = 1 - confidence_level`` and ``phat = N / n``:

    ``LR_uc = -2 ln[(1 - p)^(n - N) p^N] + 2 ln[(1 - phat)^(n - N) phat^N]``

    (``0 ln 0 = 0``: with no miss, ``LR_uc = -2 n ln(1 - p)``; with only
    misses, ``-2 n ln p``), asymptotically chi-square with 1 degree of
    freedom under ``H0: miss rate = p``; ``pvalue = P(chi2_1 > LR_uc)``.
    The order of the rows does not matter (no ``order_by``), so the test's
    statistics merge (:func:`~conformal_frames.summarize`).

    Parameters
    ----------
    y, lo, hi : Column, optional
        Columns of the observed value and the interval bounds (a miss is
        ``y`` outside ``[lo, hi]``).
    confidence_level : float or str
        Nominal coverage ``1 - p`` in (0, 1), or the name of a ``by=`` column.
    miss : Column, optional
        Instead of ``y, lo, hi``: a 0/1 (or Boolean) column, 1 for a miss
        (e.g. a VaR exceedance, "hit"); other values are invalid rows.

    Returns
    -------
    KupiecTest
        A metric object.  ``df.conformal.kupiec_test(...)`` returns a
        :class:`~conformal_frames.results.KupiecTestResult` on an eager frame
        without ``by=``, otherwise a frame with ``kupiec_test``,
        ``kupiec_test_pvalue`` and ``n``.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"y": [1.0, 5.0, 2.0, 2.5, 9.0], "lo": [0.0] * 5, "hi": [3.0] * 5})
    >>> res = df.conformal.kupiec_test("y", "lo", "hi", confidence_level=0.9)
    >>> round(res.statistic, 4), round(res.pvalue, 4)
    (3.1124, 0.0777)

    References
    ----------
    P. H. Kupiec (1995), "Techniques for verifying the accuracy of risk
    measurement models", Journal of Derivatives 3(2), 73-84.
    """
    return KupiecTest(y=role(y), lo=role(lo), hi=role(hi), confidence_level=confidence_level, miss=role(miss))


# ---------------------------------------------------------------------------
# Christoffersen
# ---------------------------------------------------------------------------
def _transitions(q: Query, miss: str, order: str) -> dict[str, nw.Expr]:
    """Sums of the transition indicators ``n_ij`` (miss state ``i`` then ``j``), in ``order_by`` order."""
    prev = q.row(("miss_prev", miss, order), q.over(nw.col(miss).shift(1), order_by=order), inputs=[miss, order])
    counts = {}
    for i in (0.0, 1.0):
        for j in (0.0, 1.0):
            hit = ((nw.col(prev) == i) & (nw.col(miss) == j)).cast(F64).fill_null(0.0)
            name = f"n{int(i)}{int(j)}"
            counts[name] = q.sum(q.row(("transition", miss, order, i, j), hit, inputs=[miss, prev]))
    return counts


#: ``f(x) = (1 + x) ln(1 + x) - x = x^2 sum_m (-1)^m x^m / ((m + 1)(m + 2))`` for ``|x| < 0.1``
#: (16 terms: the remainder is below 1e-17 relative)
_F_SERIES = tuple((-1.0) ** m / ((m + 1) * (m + 2)) for m in range(16))
_F_SWITCH = 0.1


def _lr_ind_finalize(c: dict[str, nw.Expr]) -> FinalizeFn:
    """Christoffersen's LR_ind from the transition counts, written without cancellation.

    ``LR_ind = 2 sum_ij n_ij ln(n_ij / E_ij)`` with ``E_ij = from_i to_j / total``
    (the G statistic of the 2x2 table of transitions).  As ``sum n_ij = sum E_ij``,
    ``LR_ind = 2 sum_ij E_ij f(x_ij)`` with ``x_ij = n_ij / E_ij - 1`` and
    ``f(x) = (1 + x) ln(1 + x) - x >= 0``: a sum of non-negative terms (the
    textbook difference of log-likelihoods loses about 12 digits when the
    statistic is small).  ``n_ij - E_ij = +-D / total`` with ``D = n00 n11 - n01 n10``
    (exact for counts below 2^26), so ``x_ij = +-D / (from_i to_j)``; ``f`` is
    its power series for ``|x| < 0.1``, else the closed form (``f(-1) = 1``: ``0 ln 0 = 0``).
    """

    def build(out: nw.LazyFrame, ref: TableRef) -> nw.LazyFrame:
        out = out.with_columns(*[e.cast(F64).alias(ref.name(k)) for k, e in c.items()])
        n = {k: ref.col(k) for k in c}
        from_ = {0: n["n00"] + n["n01"], 1: n["n10"] + n["n11"]}
        to = {0: n["n00"] + n["n10"], 1: n["n01"] + n["n11"]}
        out = out.with_columns(
            (n["n00"] * n["n11"] - n["n01"] * n["n10"]).alias(ref.name("D")),
            *[(from_[i] * to[j]).alias(ref.name(f"p{i}{j}")) for i in (0, 1) for j in (0, 1)],
            (from_[0] + from_[1]).alias(ref.name("total")),
        )
        terms = []
        for i in (0, 1):
            for j in (0, 1):
                product = ref.col(f"p{i}{j}")
                sign = 1.0 if i == j else -1.0
                x = ref.name(f"x{i}{j}")
                out = out.with_columns(
                    nw.when(product > 0.0).then(sign * ref.col("D") / product).otherwise(0.0).alias(x)
                )
                xc = nw.col(x)
                h: nw.Expr = nw.lit(_F_SERIES[-1])
                for coef in _F_SERIES[-2::-1]:
                    h = h * xc + coef
                one_plus = nw.when(xc > -1.0).then(1.0 + xc).otherwise(1.0)  # no log(0), even untaken
                closed = nw.when(xc > -1.0).then(one_plus * one_plus.log() - xc).otherwise(1.0)
                f = nw.when(xc.abs() < _F_SWITCH).then(xc * xc * h).otherwise(closed)
                out = out.with_columns(f.alias(ref.name(f"f{i}{j}")))
                terms.append(product * ref.col(f"f{i}{j}"))
        total = ref.col("total")
        lr = 2.0 * nw.sum_horizontal(*terms) / nw.when(total > 0.0).then(total)
        return out.with_columns(nw.when(total > 0.0).then(lr.clip(lower_bound=0.0)).alias(ref.name("lr")))

    return build


@dataclass(frozen=True, kw_only=True)
class ChristoffersenTest(Metric):
    y: str | None = checked(optional(check_column), None)
    lo: str | None = checked(optional(check_column), None)
    hi: str | None = checked(optional(check_column), None)
    confidence_level: float | str
    order_by: str
    miss: str | None = checked(optional(check_column), None)
    default_name = "christoffersen_test"
    mergeable_alternative = "kupiec_test (misses merge; transitions across rows do not)"
    kind = "test"
    result = ChristoffersenTestResult

    def __post_init__(self) -> None:
        check_miss_inputs("christoffersen_test", self.y, self.lo, self.hi, self.miss)
        super().__post_init__()

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        miss = misses(q, self.y, self.lo, self.hi, self.miss)
        lr_uc, _ = _kupiec(q, miss, self.confidence_level)
        counts = _transitions(q, miss, order_row(q, self.order_by))
        key = ("christoffersen", self.y, self.lo, self.hi, self.miss, self.confidence_level, self.order_by)
        lr_ind = q.finalize(("lr_ind", *key), _lr_ind_finalize(counts)).col("lr")
        t = q.finalize(key, _chi2_1_finalize({"ind": lr_ind, "uc": lr_uc}))
        lr_cc = t.col("ind") + t.col("uc")
        from0, from1 = counts["n00"] + counts["n01"], counts["n10"] + counts["n11"]
        return {
            "": t.col("ind"),
            "pvalue": t.col("ind_p"),
            "statistic_cc": lr_cc,
            "pvalue_cc": (-0.5 * lr_cc).exp(),  # chi-square(2) survival function
            # the transition probabilities (null without a transition from that state)
            "pi_01": nw.when(from0 > 0).then(counts["n01"] / from0),
            "pi_11": nw.when(from1 > 0).then(counts["n11"] / from1),
        }


@no_weights("christoffersen_test", "its likelihood ratio counts the transitions between consecutive rows")
def christoffersen_test(
    y: Column | None = None,
    lo: Column | None = None,
    hi: Column | None = None,
    *,
    confidence_level: float | str,
    order_by: Column,
    miss: Column | None = None,
) -> ChristoffersenTest:
    """Christoffersen's test of independent misses, and of conditional coverage.

    Rows ordered by ``order_by`` within each group; ``n_ij`` counts the
    consecutive pairs of rows in miss state ``i`` then ``j`` (1 = miss),
    ``pi_01 = n_01 / (n_00 + n_01)``, ``pi_11 = n_11 / (n_10 + n_11)`` and
    ``pi = (n_01 + n_11) / (n_00 + n_01 + n_10 + n_11)``:

    ``LR_ind = -2 ln[(1 - pi)^(n_00 + n_10) pi^(n_01 + n_11)]
    + 2 ln[(1 - pi_01)^n_00 pi_01^n_01 (1 - pi_11)^n_10 pi_11^n_11]``,

    asymptotically chi-square(1) under independence (``.statistic``,
    ``.pvalue``).  The conditional-coverage statistic ``LR_cc = LR_uc +
    LR_ind`` (``LR_uc`` of :func:`kupiec_test` on the same rows) is
    chi-square(2) under ``H0: independent misses at rate p``
    (``.statistic_cc``, ``.pvalue_cc = exp(-LR_cc / 2)``).

    Degenerate cases, with ``0 ln 0 = 0`` throughout: no miss (or only
    misses) gives ``LR_ind = 0`` (p-value 1); no two consecutive misses
    (``n_11 = 0``) gives the finite value of the formula (``pi_11 = 0``
    contributes nothing); a group with fewer than two rows (no transition)
    has a null statistic.

    Parameters
    ----------
    y, lo, hi : Column, optional
        Columns of the observed value and the interval bounds (a miss is
        ``y`` outside ``[lo, hi]``).
    confidence_level : float or str
        Nominal coverage ``1 - p`` in (0, 1), or the name of a ``by=`` column.
    order_by : Column
        Column giving the order of the rows (time, sequence number); its
        values must be distinct within a group.
    miss : Column, optional
        Instead of ``y, lo, hi``: a 0/1 (or Boolean) column, 1 for a miss
        (e.g. a VaR exceedance); other values are invalid rows.

    Returns
    -------
    ChristoffersenTest
        A metric object.  A direct eager, ungrouped call returns a
        :class:`~conformal_frames.results.ChristoffersenTestResult`; frames
        carry ``christoffersen_test``, ``christoffersen_test_pvalue``,
        ``christoffersen_test_statistic_cc``, ``christoffersen_test_pvalue_cc``,
        the transition probabilities ``christoffersen_test_pi_01`` (a miss
        after a hit) and ``christoffersen_test_pi_11`` (a miss after a miss;
        null without a transition from that state) and ``n``.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"t": [5, 1, 2, 3, 4, 6, 7, 8],
    ...                    "y": [0.0, 9.0, 9.0, 0.0, 0.0, 9.0, 9.0, 0.0],
    ...                    "lo": [-1.0] * 8, "hi": [1.0] * 8})
    >>> res = df.conformal.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by="t")
    >>> round(res.statistic, 4), round(res.pvalue, 4), round(res.pvalue_cc, 4)
    (0.1965, 0.6576, 0.0152)

    References
    ----------
    P. F. Christoffersen (1998), "Evaluating interval forecasts",
    International Economic Review 39(4), 841-862.
    """
    return ChristoffersenTest(
        y=role(y), lo=role(lo), hi=role(hi), confidence_level=confidence_level, order_by=role(order_by), miss=role(miss)
    )


# ---------------------------------------------------------------------------
# longest run of misses
# ---------------------------------------------------------------------------
def _runs_table(miss: str, order: str) -> TableFn:
    """Per group: the longest run of consecutive misses (``run``)."""

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        rid, length, run = (ref.name(x) for x in ("rid", "len", "run"))
        # a run of misses shares the number of non-misses before it
        rows = rows.with_columns(over((1.0 - nw.col(miss)).cum_sum(), keys, order_by=order).alias(rid))
        runs = rows.group_by(*keys, rid).agg(nw.col(miss).sum().alias(length))
        return aggregate(runs, keys, [nw.col(length).max().alias(run)])

    return build


@dataclass(frozen=True, kw_only=True)
class LongestMissRun(Metric):
    y: str
    lo: str
    hi: str
    order_by: str
    default_name = "longest_miss_run"
    mergeable_alternative = "kupiec_test (misses merge; runs across rows do not)"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        miss, order = miss_row(q, self.y, self.lo, self.hi), order_row(q, self.order_by)
        t = q.table(("miss_runs", miss, order), _runs_table(miss, order))
        return {"": t.col("run")}


@no_weights("longest_miss_run", "a run counts consecutive rows")
def longest_miss_run(y: Column, lo: Column, hi: Column, *, order_by: Column) -> LongestMissRun:
    """The longest run of consecutive misses (``y`` outside ``[lo, hi]``) in ``order_by`` order.

    A number of rows (Float64; 0 when the group has no miss).  Under
    independent misses at rate ``p`` a run of length ``r`` starting at a
    given row has probability ``p^r``: a long run flags clustered misses
    that the pooled coverage hides.

    Parameters
    ----------
    y, lo, hi : Column
        Columns of the observed value and the interval bounds.
    order_by : Column
        Column giving the order of the rows; values distinct within a group.

    Returns
    -------
    LongestMissRun
        A metric object; ``df.conformal.longest_miss_run(...)`` returns a
        float on an eager frame without ``by=``.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"t": [3, 1, 2, 4, 5], "y": [9.0, 0.0, 9.0, 9.0, 0.0],
    ...                    "lo": [-1.0] * 5, "hi": [1.0] * 5})
    >>> df.conformal.longest_miss_run("y", "lo", "hi", order_by="t")
    3.0
    """
    return LongestMissRun(y=role(y), lo=role(lo), hi=role(hi), order_by=role(order_by))
