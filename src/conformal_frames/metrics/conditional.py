"""Conditional coverage: coverage gap across groups, grouped inference, worst slab.

Every metric here works for prediction intervals (``y, lo, hi``) and for
prediction sets (``y, sets=...``, ``classes=`` optional with a list column,
see :mod:`conformal_frames.metrics.sets`):
a row is *covered* when ``lo <= y <= hi`` or ``y in C``.

- :func:`coverage_gap`: mean ``|coverage_g - (1 - alpha)|`` over the groups
  ``g`` of ``groups=`` (unweighted or weighted by group size), the worst group
  and its coverage.  ``by=`` is an outer grouping (e.g. the confidence
  level): one gap per ``by`` group.
- :func:`coverage_test`: per ``by=`` group, coverage with a binomial confidence
  interval (Wilson or Clopper-Pearson), the one-sided exact test of
  ``H0: coverage >= 1 - alpha``, Holm and Benjamini-Hochberg adjusted p-values
  across the groups, and a flag.  With ``n_calibration=`` the null law is the
  exact finite-sample law of split-conformal coverage (Beta-binomial).
- :func:`worst_slab_coverage`: the smallest coverage over slabs
  ``{x : a <= v.x <= b}`` holding at least a fraction ``delta`` of the rows,
  over random directions ``v`` (Cauchois, Gupta and Duchi, 2021): an exact
  branch-and-bound over the directions (:mod:`conformal_frames.numerics.slabs`),
  O(M n) per group plus one O(n log n) sort per direction it cannot rule out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._progress import steps as progress_steps
from conformal_frames._renames import renamed
from conformal_frames._roles import Column, as_role, output_name, role
from conformal_frames._validate import (
    check_columns,
    check_fraction,
    check_positive_int,
    checked,
    choice,
    instance_of,
    optional,
)
from conformal_frames.engine import (
    GroupFn,
    NumpyFn,
    Query,
    TableFn,
    TableRef,
    aggregate,
    join_keys,
    no_weights,
    over,
)
from conformal_frames.inputs.levels import level_row
from conformal_frames.inputs.sets import Label
from conformal_frames.inputs.target import Target, TargetMetric, target
from conformal_frames.numerics.slabs import default_directions, slab_directions, slab_need, worst_slab
from conformal_frames.numerics.slabs import min_slab_mean as min_slab_mean
from conformal_frames.numerics.stats import ratio, wilson_interval
from conformal_frames.results import CoverageTestResult

__all__ = ["coverage_gap", "coverage_test", "worst_slab_coverage"]
METHODS = list(__all__)


def _names(value: Any, name: str) -> tuple[str, ...]:
    """A column name or a list of distinct column names, as a tuple."""
    value = as_role(value)
    return (value,) if isinstance(value, str) else check_columns(value, name)


# ---------------------------------------------------------------------------
# multiplicity adjustments (run on the aggregated table: one value per group)
# ---------------------------------------------------------------------------
def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (controls the family-wise error rate).

    With the ``m`` p-values sorted increasingly, ``p_adj(i) = max_{j <= i}
    min(1, (m - j + 1) p(j))``.  NaN p-values are left out of the family and
    stay NaN.

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03, float("nan")]).round(4).tolist()
    [0.03, 0.06, 0.06, nan]
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    m = len(idx)
    if m:
        order = idx[np.argsort(p[idx], kind="stable")]
        out[order] = np.minimum(np.maximum.accumulate((m - np.arange(m)) * p[order]), 1.0)
    return out


def benjamini_hochberg(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (false discovery rate).

    ``scipy.stats.false_discovery_control(p, method="bh")`` over the non-NaN
    p-values; NaN stays NaN.

    Examples
    --------
    >>> benjamini_hochberg([0.01, 0.04, 0.03]).round(4).tolist()
    [0.03, 0.04, 0.04]
    """
    from scipy.stats import false_discovery_control

    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        out[ok] = false_discovery_control(p[ok], method="bh")
    return out


# ---------------------------------------------------------------------------
# coverage gap across groups
# ---------------------------------------------------------------------------
def _gap_table(
    covered: str,
    gcols: list[str],
    labels: list[str],
    target: float | str,
    level: str | None,
    weight: str | None = None,
    counts: str | None = None,
) -> TableFn:
    """Sub-query: per outer group, the spread of coverage over ``groups=``.

    Columns ``groups``, ``gap_sum``, ``gapw_sum``, ``rows``, ``worst``,
    ``worst_n`` and the worst group's labels (named ``labels``, as output).
    With ``weight`` (a row column), ``covered`` is the weighted row ``w c``,
    a group's size is its weight, ``worst_n`` counts rows of positive weight
    (sums their ``counts``, if any) and rows of weight 0 are in no group.
    """

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        cnt, hit, cov, gap, rc = (ref.name(s) for s in ("cnt", "hit", "cov", "gap", "rc"))
        tcol = ref.name("target")
        extra = [nw.col(level).min().alias(tcol)] if level is not None else []
        size = [nw.len().alias(cnt)]
        if weight is not None:
            rows = rows.filter(nw.col(weight) > 0.0)
            size = [nw.col(weight).sum().alias(cnt), (nw.len() if counts is None else nw.col(counts).sum()).alias(rc)]
        cells = rows.group_by(*keys, *gcols).agg(*size, nw.col(covered).sum().alias(hit), *extra)
        cells = cells.with_columns(nw.col(cnt).cast(nw.Float64)).with_columns((nw.col(hit) / nw.col(cnt)).alias(cov))
        goal = nw.col(tcol) if level is not None else nw.lit(float(target))
        cells = cells.with_columns((nw.col(cov) - goal).abs().alias(gap))
        cells = cells.with_columns((nw.col(gap) * nw.col(cnt)).alias(f"{gap}w"))
        aggs = [
            nw.len().alias(ref.name("groups")),
            nw.col(gap).sum().alias(ref.name("gap_sum")),
            nw.col(f"{gap}w").sum().alias(ref.name("gapw_sum")),
            nw.col(cnt).sum().alias(ref.name("rows")),
            nw.col(cov).min().alias(ref.name("worst")),
        ]
        stats = aggregate(cells, keys, aggs)
        stats = stats.with_columns(ref.col("groups").cast(nw.Float64))

        def lowest(col: str) -> nw.Expr:
            return nw.col(col) == over(nw.col(col).min(), keys)

        worst = cells.filter(lowest(cov))
        for g in gcols:  # ties: the smallest group labels, column by column
            worst = worst.filter(lowest(g))
        worst = worst.select(
            *keys,
            *[nw.col(g).alias(lab) for g, lab in zip(gcols, labels)],
            nw.col(cnt if weight is None else rc).alias(ref.name("worst_n")),
        )
        if keys:
            return join_keys(stats, worst, keys)
        one = ref.name("one")  # a left join on a constant: one row even when there is no group
        joined = stats.with_columns(nw.lit(1).alias(one)).join(
            worst.with_columns(nw.lit(1).alias(one)), on=one, how="left"
        )
        return joined.drop(one)

    return build


@dataclass(frozen=True, kw_only=True)
class CoverageGap(TargetMetric):
    target: Target = checked(instance_of(Target))
    groups: tuple[str, ...]
    confidence_level: float | str
    weighted: bool = False
    weights: str | None = None
    counts: str | None = None
    default_name = "coverage_gap"
    mergeable_alternative = "coverage by= the group column"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        covered = w.of(self.target.covered(q))
        gcols = []
        for g in self.groups:
            col = q.column(g)
            q.check(f"group column {g!r} (groups=) has null values", col.is_null())
            gcols.append(q.row(("group", g), col))
        name = self.output_name
        labels = [f"{name}_worst_{g}" for g in self._labels()]
        level = level_row(q, self.confidence_level)
        t = q.table(
            ("coverage_gap", name), _gap_table(covered, gcols, labels, self.confidence_level, level, w.row, w.counts)
        )
        groups = t.col("groups")
        gap = ratio(t.col("gapw_sum"), t.col("rows")) if self.weighted else ratio(t.col("gap_sum"), groups)
        out: dict[str, nw.Expr | None] = {"": gap, "worst_coverage": t.col("worst")}
        out.update({f"worst_{g}": None for g in self._labels()})  # label columns come from the table as they are
        out["worst_n"] = t.col("worst_n")
        out["groups"] = groups
        return out

    def _labels(self) -> list[str]:
        """The names of the worst group's label columns: each group column's (an expression's output name).

        Two expressions of one output name, or one named like a plain group
        column, keep their internal columns' names (never two outputs of one name).
        """
        named = [output_name(g) for g in self.groups]
        return [n if named.count(n) == 1 else g for g, n in zip(self.groups, named)]

    def output_dtypes(self, built: Mapping[str, nw.Expr | None]) -> dict[str, Any]:
        """Counts are Int64: ``worst_n`` and the number of groups ``groups``."""
        return {**super().output_dtypes(built), f"{self.output_name}_groups": nw.Int64}


def coverage_gap(
    y: Column | Sequence[Column],
    lo: Column | Sequence[Column] | None = None,
    hi: Column | Sequence[Column] | None = None,
    *,
    sets: Column | Sequence[Column] | None = None,
    classes: Sequence[Label] | None = None,
    groups: Column | Sequence[Column],
    confidence_level: float | str,
    weighted: bool = False,
    weights: Column | None = None,
    counts: Column | None = None,
) -> CoverageGap:
    """Mean absolute deviation of group coverage from the target level.

    With ``G`` groups (the distinct values of ``groups=``), group coverages
    ``c_g`` over ``n_g`` rows and ``t = confidence_level``:

    - ``weighted=False``: ``(1/G) sum_g |c_g - t|``;
    - ``weighted=True``: ``(1/n) sum_g n_g |c_g - t|``.

    Also reported: ``<name>_worst_coverage`` (smallest ``c_g``), the worst
    group's labels ``<name>_worst_<column>`` (ties: the smallest labels; an
    expression in ``groups=`` is named by its output name, e.g.
    ``nw.col("g").alias("seg")`` gives ``<name>_worst_seg``),
    ``<name>_worst_n`` and ``<name>_groups`` (``G``).  ``by=`` is an *outer*
    grouping: one gap per ``by`` group (e.g. ``by="level"`` with stacked
    levels); ``groups`` and ``by`` must be different columns.

    Parameters
    ----------
    y, lo, hi : Column or list of Column
        Observed value and interval bounds; or ``y`` with ``sets=`` (and
        ``classes=``, optional with a list column) for prediction sets.
        Lists of columns (one per output): a row is covered when every
        output is inside its interval (joint coverage).
    groups : Column or list of Column
        The columns defining the groups whose coverages are compared.
    confidence_level : float or str
        The target coverage ``1 - alpha`` in (0, 1); or the name of a ``by=``
        column holding it (levels stacked in long format, ``by="level"``).
    weighted : bool, default False
        Weight each group's deviation by its size (its total weight with
        ``weights=``).
    weights : Column, optional
        Column of non-negative row weights: each group's coverage is the
        weighted proportion; rows of weight 0 are in no group and
        ``worst_n`` counts rows of positive weight (see the docs page
        "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    CoverageGap
        A metric object.  ``df.conformal.coverage_gap(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``coverage_gap`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"seg": ["a", "a", "b", "b", "b", "b"],
    ...     "y": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "lo": [0.0, 0.0, 2.0, 5.0, 4.0, 7.0],
    ...     "hi": [2.0, 3.0, 4.0, 6.0, 6.0, 8.0]})
    >>> df.conformal.coverage_gap("y", "lo", "hi", groups="seg", confidence_level=0.9)
    0.25
    >>> out = pl.DataFrame(conformal_frames.evaluate(df, conformal_frames.coverage_gap(
    ...     "y", "lo", "hi", groups="seg", confidence_level=0.9)))
    >>> out.select("coverage_gap_worst_seg", "coverage_gap_worst_coverage").row(0)
    ('b', 0.5)
    """
    return CoverageGap(
        target=target(y, lo, hi, sets, classes, metric="coverage_gap"),
        groups=_names(groups, "groups"),
        confidence_level=confidence_level,
        weighted=weighted,
        weights=role(weights),
        counts=role(counts),
    )


# ---------------------------------------------------------------------------
# grouped inference
# ---------------------------------------------------------------------------
def split_conformal_law(n_calibration: int, confidence_level: float) -> tuple[float, float]:
    """Beta parameters ``(a, b)`` of split-conformal coverage given calibration.

    With ``m`` calibration points and target ``1 - alpha``, the coverage of the
    split-conformal set, conditional on the calibration data, is
    ``Beta(a, b)`` with ``a = ceil((m + 1)(1 - alpha))``, ``b = m + 1 - a``
    (continuous scores, no ties); so the number of covered rows among ``n``
    test rows is ``BetaBinomial(n, a, b)``.
    """
    m = n_calibration
    a = math.ceil((m + 1) * confidence_level - 1e-9)
    return float(a), float(m + 1 - a)


Alternative = Literal["less", "greater", "two-sided"]


def coverage_pvalues(
    covered: np.ndarray,
    n: np.ndarray,
    confidence_level: np.ndarray,
    n_calibration: int | None = None,
    *,
    continuous: bool = False,
    alternative: Alternative = "less",
) -> np.ndarray:
    """coverage_test's p-values from per-group counts (NaN: no test).

    ``alternative="less"`` (coverage below the target): ``P(K <= covered)``
    with ``K ~ Binomial(n, t)``, or with ``n_calibration=m``
    ``K ~ BetaBinomial(n, a, b)`` (see :func:`split_conformal_law`);
    ``"greater"`` (above it): ``P(K >= covered)``; ``"two-sided"``: the sum of
    the probabilities of the counts no more likely than ``covered``, as
    ``scipy.stats.binomtest`` (:func:`_two_sided`).  Groups with ``n = 0``, a
    missing count or a target outside (0, 1) get NaN.  ``continuous``:
    ``covered`` and ``n`` may be real (weighted counts at Kish's ``n_eff``):
    the binomial tails through their regularized incomplete beta forms
    ``I_{1-t}(n - k, k + 1)`` and ``I_t(k, n - k + 1)``, equal to
    ``binom.cdf`` and ``binom.sf`` at integers; two-sided, twice the smaller
    tail (capped at 1).
    """
    from scipy.special import betainc
    from scipy.stats import betabinom, binom

    kk, nn, t = (np.asarray(v, dtype=float) for v in (covered, n, confidence_level))
    ok = (nn > 0) & np.isfinite(kk) & (t > 0) & (t < 1)
    p = np.full(len(kk), np.nan)
    if n_calibration is None and continuous:
        # P(K <= k) = I_{1-t}(n - k, k + 1) and P(K >= k) = I_t(k, n - k + 1), for real k and n
        below, above = ok & (kk < nn), ok & (kk > 0)
        lower, upper = np.where(ok, 1.0, np.nan), np.where(ok, 1.0, np.nan)
        lower[below] = betainc(nn[below] - kk[below], kk[below] + 1.0, 1.0 - t[below])
        upper[above] = betainc(kk[above], nn[above] - kk[above] + 1.0, t[above])
        tails = {"less": lower, "greater": upper, "two-sided": 2.0 * np.fmin(lower, upper)}
        p[ok] = tails[alternative][ok]
        return np.minimum(p, 1.0)
    args: tuple[np.ndarray, ...]
    if n_calibration is None:
        dist, args = binom, (nn[ok], t[ok])
    else:
        a = np.ceil((n_calibration + 1) * t - 1e-9)
        b = n_calibration + 1 - a
        ok &= b >= 1  # too few calibration points for this level: no test
        dist, args = betabinom, (nn[ok], a[ok], b[ok])
    # the one-sided tails without freezing the law (scipy builds a frozen law's docs: 1.6 ms a call)
    if alternative == "less":
        p[ok] = dist.cdf(kk[ok], *args)
    elif alternative == "greater":
        p[ok] = dist.sf(kk[ok] - 1.0, *args)
    else:
        p[ok] = _two_sided(dist(*args), kk[ok], nn[ok])
    return np.minimum(p, 1.0)


def _two_sided(law: Any, k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Two-sided p-values of counts ``k`` under the frozen discrete ``law`` (one per group).

    The probability of the counts no more likely than ``k`` (up to a relative
    1e-7, as ``scipy.stats.binomtest``).  The laws are unimodal, so these are
    two tails: the tail of ``k`` and the tail on the other side of the mode
    from where the probability drops to ``P(K = k)``.
    """
    out = np.empty(len(k))
    args = [np.broadcast_to(np.asarray(a, dtype=float), k.shape) for a in law.args]
    for i in range(len(k)):
        one = law.dist(*(a[i] for a in args))
        xs = np.arange(n[i] + 1.0)
        pmf = one.pmf(xs)
        mode, limit = int(np.argmax(pmf)), pmf[int(k[i])] * (1.0 + 1e-7)
        if limit >= pmf[mode]:  # k is a most likely count: every count is no more likely
            out[i] = 1.0
        elif k[i] < mode:  # the upper tail from the first count past the mode as unlikely as k
            far = xs[mode + 1 :][pmf[mode + 1 :] <= limit]
            out[i] = one.cdf(k[i]) + (one.sf(far[0] - 1.0) if len(far) else 0.0)
        else:  # the lower tail up to the last count before the mode as unlikely as k
            far = xs[:mode][pmf[:mode] <= limit]
            out[i] = (one.cdf(far[-1]) if len(far) else 0.0) + one.sf(k[i] - 1.0)
    return out


def _inference_step(test: CoverageTest, k: str, n: str, level: str | None, checks: list[str]) -> NumpyFn:
    """The p-values, their adjustments, the flag and (Clopper-Pearson) the interval of ``test``, by output name."""
    from scipy.stats import beta

    name = test.output_name

    def fn(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        kk, nn = data[k], data[n]
        bad = np.zeros(len(kk), dtype=bool)
        for c in checks:
            bad |= np.nan_to_num(data[c]) > 0
        ok = (nn > 0) & ~bad
        t = data[level] if level is not None else np.full(len(kk), test.confidence_level)
        weighted = test.weights is not None
        p = coverage_pvalues(kk, nn, t, test.n_calibration, continuous=weighted, alternative=test.alternative)
        p = np.where(ok, p, np.nan)
        ok &= ~np.isnan(p)
        out = {"pvalue": p, "pvalue_holm": holm(p), "pvalue_bh": benjamini_hochberg(p)}
        chosen = out[{"holm": "pvalue_holm", "bh": "pvalue_bh", "none": "pvalue"}[test.correction]]
        out["flag"] = np.where(np.isnan(chosen), np.nan, chosen < test.significance)  # NaN: null (no test)
        if test.method == "clopper-pearson":
            half = (1.0 - test.ci_level) / 2
            with np.errstate(invalid="ignore", divide="ignore"):
                low = np.where(kk > 0, beta.ppf(half, kk, nn - kk + 1), 0.0)
                high = np.where(kk < nn, beta.ppf(1 - half, kk + 1, nn - kk), 1.0)
                # the interval always contains its estimate k / n (rounding)
                low, high = np.fmin(low, kk / nn), np.fmax(high, kk / nn)
            out["ci_low"], out["ci_high"] = np.where(ok, low, np.nan), np.where(ok, high, np.nan)
        return {f"{name}_{suffix}": values for suffix, values in out.items()}

    return fn


@dataclass(frozen=True, kw_only=True)
class CoverageTest(TargetMetric):
    target: Target = checked(instance_of(Target))
    confidence_level: float | str
    ci_level: float = 0.95
    method: str = checked(choice("wilson", "clopper-pearson"), "wilson")
    n_calibration: int | None = checked(optional(check_positive_int), None)
    significance: float = 0.05
    correction: str = checked(choice("holm", "bh", "none"), "holm")
    alternative: Alternative = checked(choice("less", "greater", "two-sided"), "less")
    weights: str | None = None
    counts: str | None = None
    default_name = "coverage_test"
    kind = "test"
    result = CoverageTestResult

    def test_result(self, row: Mapping[str, Any]) -> CoverageTestResult:
        name = self.output_name
        adjusted = {"holm": "pvalue_holm", "bh": "pvalue_bh", "none": "pvalue"}[self.correction]
        values = {**row, f"{name}_pvalue_adjusted": row[f"{name}_{adjusted}"]}
        return CoverageTestResult.from_row(values, name)  # type: ignore[return-value]

    def _counts(self, q: Query) -> tuple[str, str, nw.Expr, dict[str, nw.Expr | None]]:
        """The aggregated columns of ``k`` and ``n`` the tests read, the estimate and its extra outputs.

        With weights: ``k = p n_eff`` and ``n = n_eff`` (Kish), values of the
        query (:meth:`~conformal_frames.engine.Weighting.binomial`).
        """
        covered = self.target.covered(q)
        w = q.weighting(self.weights, counts=self.counts)
        if not w.weighted:  # counts alone: the sums of the repeated rows; n, their number, is the group's n
            k_name = w.summed(covered)
            return k_name, q.count, ratio(nw.col(k_name), q.n), {}
        hits = w.summed(covered)
        k, n = w.binomial(hits)
        return k, n, ratio(nw.col(hits), w.total), {"n_eff": nw.col(n)}

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        k_name, n_name, estimate, extra = self._counts(q)
        name = self.output_name
        suffixes = ["pvalue", "pvalue_holm", "pvalue_bh", "flag"]
        out: dict[str, nw.Expr | None] = {"": estimate}
        if self.method == "wilson":
            low, high = wilson_interval(q, k_name, n_name, self.ci_level)
            out.update({"ci_low": low, "ci_high": high})
        else:
            suffixes += ["ci_low", "ci_high"]
        out.update({s: None for s in suffixes})
        level = level_row(q, self.confidence_level)
        level_agg = q.agg("min", level) if level is not None else None
        checks = [q.invalid]  # the group's invalid rows (all checks of the query)
        outputs = [f"{name}_{s}" for s in suffixes]
        what = f"{name} (exact binomial / beta tails: scipy on the per-group table)"
        inputs = [k_name, n_name, *([level_agg] if level_agg else []), *checks]
        step = _inference_step(self, k_name, n_name, level_agg, checks)
        # the adjusted p-values read every group's p-value (and so does the flag, unless correction="none")
        across = [f"{name}_pvalue_holm", f"{name}_pvalue_bh", *([f"{name}_flag"] if self.correction != "none" else [])]
        q.numpy(inputs, outputs, step, what=what, boolean=[f"{name}_flag"], across=across)
        return {**out, **extra}


@renamed(ci="ci_level", alpha="significance")
def coverage_test(
    y: Column | Sequence[Column],
    lo: Column | Sequence[Column] | None = None,
    hi: Column | Sequence[Column] | None = None,
    *,
    sets: Column | Sequence[Column] | None = None,
    classes: Sequence[Label] | None = None,
    confidence_level: float | str,
    ci_level: float = 0.95,
    method: Literal["wilson", "clopper-pearson"] = "wilson",
    n_calibration: int | None = None,
    significance: float = 0.05,
    correction: Literal["holm", "bh", "none"] = "holm",
    alternative: Alternative = "less",
    weights: Column | None = None,
    counts: Column | None = None,
) -> CoverageTest:
    """Per-group coverage with a confidence interval and an under-coverage test.

    For each ``by=`` group with ``k`` covered rows out of ``n``:

    - ``coverage_test = k / n``, with ``_ci_low`` / ``_ci_high`` the binomial
      confidence interval at level ``ci_level`` (``method="wilson"``: Wilson score
      interval; ``"clopper-pearson"``: exact, ``scipy.stats.beta.ppf``);
    - ``_pvalue``: with ``alternative="less"`` (the default), the one-sided
      test of ``H0: coverage >= t`` (``t = confidence_level``) against
      ``coverage < t``: ``P(K <= k)`` with ``K ~ Binomial(n, t)``
      (``scipy.stats.binom.cdf``); ``"greater"`` tests over-coverage
      (intervals too wide), ``P(K >= k)``; ``"two-sided"`` both, as
      ``scipy.stats.binomtest`` (the probability of the counts no more
      likely than ``k``; weighted, twice the smaller tail).  With ``n_calibration=m``
      (intervals/sets from split conformal with ``m`` calibration points) the
      null law is the exact finite-sample one, ``K ~ BetaBinomial(n, a, b)``,
      ``a = ceil((m + 1) t)``, ``b = m + 1 - a`` (``scipy.stats.betabinom``);
      the confidence interval stays binomial (it is about this group's rate);
    - ``_pvalue_holm`` (family-wise error) and ``_pvalue_bh``
      (Benjamini-Hochberg false discovery rate): adjusted across all groups of
      the result;
    - ``_flag`` (Boolean): True where the adjusted p-value (``correction=``)
      is below ``significance``, else False; null where the p-value is null
      (no test is not "not flagged"; pandas: the nullable ``boolean`` dtype).

    ``confidence_level`` may name a ``by=`` column holding each group's target
    (levels stacked in long format): ``by=["level", "segment"],
    confidence_level="level"``.  Adjustments then still run across all groups
    of the result; with ``n_calibration``, a level too high for ``m`` gives a
    null p-value for its groups.

    The p-values need scipy on the aggregated table (one row per group): lazy
    on polars LazyFrames, eager-only on other lazy backends (collect first).
    An ungrouped eager call returns a test result: ``.statistic`` (coverage)
    and ``.pvalue``.

    Parameters
    ----------
    y, lo, hi : Column or list of Column
        Observed value and interval bounds (prediction intervals); lists of
        columns (one per output): a row is covered when every output is
        inside its interval (joint coverage).
    sets : Column or list of Column, optional
        Prediction sets instead of intervals (with ``y`` the true label).
    classes : list of int or str, optional
        The possible labels of the sets; required with membership columns
        only (a list column without them: ``y`` in the row's list).
    confidence_level : float or str
        The target coverage ``t`` tested, in (0, 1); or the
        name of a ``by=`` column holding each group's level.
    ci_level : float, default 0.95
        Confidence level of the interval of each group's coverage.
    method : {"wilson", "clopper-pearson"}, default "wilson"
        The confidence interval.
    n_calibration : int, optional
        Number of calibration points of a split-conformal predictor: the
        null law becomes the exact Beta-binomial one.
    significance : float, default 0.05
        Size of the test: a group is flagged when its adjusted p-value is below it.
    correction : {"holm", "bh", "none"}, default "holm"
        The multiplicity adjustment across the groups of the result.
    alternative : {"less", "greater", "two-sided"}, default "less"
        The alternative hypothesis, as in scipy: coverage below the target
        (under-coverage), above it (over-coverage: intervals wider than
        needed) or either; the flag then marks both directions.
    weights : Column, optional
        Column of non-negative row weights: the weighted coverage ``p``; the
        interval and the test use ``k = p n_eff`` covered rows out of Kish's
        ``n_eff`` (the binomial tail as ``I_{1-t}(n_eff - k, k + 1)``), and
        ``coverage_test_n_eff`` is an extra output.  Not with
        ``n_calibration`` (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    CoverageTest
        A metric object.  ``df.conformal.coverage_test(...)`` returns a
        :class:`~conformal_frames.results.CoverageTestResult` on an eager frame without
        ``by=``, otherwise a frame of the caller's type with the columns
        ``coverage_test``, ``coverage_test_pvalue``, ... and ``n``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"seg": ["a"] * 50 + ["b"] * 50, "y": [0.0] * 100,
    ...     "lo": [-1.0] * 50 + [-1.0] * 30 + [1.0] * 20, "hi": [1.0] * 100})
    >>> out = df.conformal.coverage_test("y", "lo", "hi", confidence_level=0.9, by="seg")
    >>> out.select("seg", "coverage_test", "coverage_test_flag")
    shape: (2, 3)
    ┌─────┬───────────────┬────────────────────┐
    │ seg ┆ coverage_test ┆ coverage_test_flag │
    │ --- ┆ ---           ┆ ---                │
    │ str ┆ f64           ┆ bool               │
    ╞═════╪═══════════════╪════════════════════╡
    │ a   ┆ 1.0           ┆ false              │
    │ b   ┆ 0.6           ┆ true               │
    └─────┴───────────────┴────────────────────┘

    References
    ----------
    S. Holm (1979), "A simple sequentially rejective multiple test procedure",
    Scand. J. Statist. 6, 65-70; Y. Benjamini and Y. Hochberg (1995),
    "Controlling the false discovery rate", JRSS B 57, 289-300; V. Vovk (2012),
    "Conditional validity of inductive conformal predictors", ACML.
    """
    metric = CoverageTest(
        target=target(y, lo, hi, sets, classes, metric="coverage_test"),
        confidence_level=confidence_level,
        ci_level=ci_level,
        method=method,
        n_calibration=n_calibration,
        significance=significance,
        correction=correction,
        alternative=alternative,
        weights=role(weights),
        counts=role(counts),
    )
    level, n_calibration = metric.confidence_level, metric.n_calibration
    if n_calibration is not None and weights is not None:
        msg = "coverage_test: n_calibration= (the beta-binomial law of row counts) has no weighted version; drop weights= or n_calibration="
        raise ValueError(msg)
    if n_calibration is not None and isinstance(level, float):
        _, b = split_conformal_law(n_calibration, level)
        if b < 1:
            msg = (
                f"n_calibration={n_calibration} is too small for confidence_level={level}: "
                f"split conformal needs (m + 1) * (1 - confidence_level) >= 1, i.e. m >= {math.ceil(1 / (1 - level) - 1 - 1e-9)}"
            )
            raise ValueError(msg)
    return metric


# ---------------------------------------------------------------------------
# worst-slab coverage
# ---------------------------------------------------------------------------
def _slab_groups(n_features: int, delta: float, n_directions: int | None, seed: int) -> GroupFn:
    def fn(group: np.ndarray, n_groups: int, data: dict[str, np.ndarray]) -> np.ndarray:
        cols = list(data.values())
        x_all = np.column_stack(cols[:n_features])
        c_all = np.asarray(cols[n_features], dtype=float)
        sizes = np.bincount(group, minlength=n_groups)
        chosen = [n_directions or default_directions(int(k)) for k in sizes]
        v_all = slab_directions(max(chosen, default=1), n_features, seed)
        out = np.full(n_groups, np.nan)
        with progress_steps("directions", sum(m for m, k in zip(chosen, sizes) if k)) as tick:
            for g in range(n_groups):
                sel = group == g
                n = int(sizes[g])
                if n:
                    v = v_all[: chosen[g]]  # the first directions of the seed's sequence
                    out[g] = worst_slab(x_all[sel], c_all[sel], v, slab_need(delta, n), tick=tick)
        return out

    return fn


@dataclass(frozen=True, kw_only=True)
class WorstSlab(TargetMetric):
    target: Target = checked(instance_of(Target))
    features: tuple[str, ...]
    delta: float = checked(check_fraction, 0.1)
    n_directions: int | None = checked(optional(check_positive_int), None)
    seed: int = 0
    default_name = "worst_slab_coverage"
    mergeable_alternative = "coverage by= the slab columns you care about"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        feats = [q.row(("value", f), q.number(f)) for f in self.features]
        covered = self.target.covered(q)
        q.per_group(
            self.output_name,
            [*feats, covered],
            _slab_groups(len(self.features), self.delta, self.n_directions, self.seed),
            what="worst_slab_coverage (sorts all rows of each group)",
        )
        return {"": None}


@no_weights("worst_slab_coverage")
def worst_slab_coverage(
    y: Column | Sequence[Column],
    lo: Column | Sequence[Column] | None = None,
    hi: Column | Sequence[Column] | None = None,
    *,
    sets: Column | Sequence[Column] | None = None,
    classes: Sequence[Label] | None = None,
    features: Column | Sequence[Column],
    delta: float = 0.1,
    n_directions: int | None = None,
    seed: int = 0,
) -> WorstSlab:
    """Worst-slab coverage over random directions in feature space.

    ``min_{v, a < b} coverage({i : a <= v.x_i <= b})`` over slabs holding at
    least ``ceil(delta * n)`` rows, for ``M = n_directions`` directions
    ``v ~ N(0, I_d)`` drawn with ``numpy.random.default_rng(seed)``
    (``standard_normal((M, d))``), ``x`` the ``features`` columns (as given: scale
    them first if their units differ).  In-sample: the same rows choose the slab
    and measure it (an optimistic-for-the-adversary estimate; split the rows
    yourself for an unbiased one).

    Exact, and cheaper than one sort per direction: per direction an O(n)
    lower bound of its worst slab from bucket counts of ``v . x`` (no sort);
    then, in increasing order of the bounds, the directions whose bound is
    below the smallest coverage found so far are solved exactly (one sort,
    then Dinkelbach O(n) vectorised scans; see :func:`min_slab_mean`), and the
    rest are ruled out.  With one feature every direction gives the slabs of
    ``x`` (checked): one is solved.  So O(M n) per group plus O(n log n) per
    direction solved (at most ``M``: O(M n log n)), O(n) memory per direction,
    never a loop over all ``(a, b)`` pairs: at the defaults on 1e5 rows, a
    second or two when the bounds rule out most directions (features of
    comparable scale; heavy tails rule out fewer).  Needs all rows of a
    group: lazy on polars LazyFrames, eager-only on other lazy backends.

    Parameters
    ----------
    y, lo, hi : Column or list of Column
        Observed value and interval bounds (prediction intervals); lists of
        columns (one per output): a row is covered when every output is
        inside its interval (joint coverage).
    sets : Column or list of Column, optional
        Prediction sets instead of intervals (with ``y`` the true label).
    classes : list of int or str, optional
        The possible labels of the sets; required with membership columns
        only (a list column without them: ``y`` in the row's list).
    features : Column or list of Column
        Numeric feature columns spanning the space of slabs.
    delta : float, default 0.1
        Smallest fraction of the group's rows a slab must hold, in (0, 1].
    n_directions : int, optional
        Number of random directions ``M``.  Default (``None``): 1000 on
        groups of up to 100,000 rows, then ``1e8 / n`` (at least 100), so
        that the work (about ``M n``) stays bounded on large groups: 100
        directions on 1e6 rows.  The directions are the first ``M`` of the
        seed's sequence, so a smaller ``M`` searches a subset of a larger
        one's directions.
    seed : int, default 0
        Seed of the random directions.

    Returns
    -------
    WorstSlab
        A metric object.  ``df.conformal.worst_slab_coverage(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``worst_slab_coverage`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import numpy as np, polars as pl
    >>> import conformal_frames
    >>> x = np.linspace(0.0, 1.0, 100)
    >>> df = pl.DataFrame({"x": x, "y": np.zeros(100), "lo": np.where(x > 0.8, 1.0, -1.0), "hi": np.ones(100)})
    >>> df.conformal.worst_slab_coverage("y", "lo", "hi", features=["x"], delta=0.1, n_directions=5)
    0.0

    References
    ----------
    M. Cauchois, S. Gupta and J. C. Duchi (2021), "Knowing what you know: valid
    and validated confidence sets in multiclass and multilabel prediction",
    JMLR 22(81), 1-42.
    """
    return WorstSlab(
        target=target(y, lo, hi, sets, classes, metric="worst_slab_coverage"),
        features=_names(features, "features"),
        delta=delta,
        n_directions=n_directions,
        seed=seed,
    )
