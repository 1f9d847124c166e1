"""Prediction-set metrics (classification): coverage, size, SSC.

A prediction set is given either as

- a **list column** of labels (``sets="s"``, e.g. ``[0, 2]`` or ``["cat"]``);
  ``classes=`` (the possible labels) is optional; or
- one **boolean membership column** per class (``sets=["p0", "p1", "p2"]``)
  with ``classes=`` giving each column's label, in the same order (required).

With ``classes=``, every label (true labels and set members) is checked to be
a known class, and the possible set sizes ``0..K`` are known.  Membership of
the true label is then computed row by row as ``sum_k 1[y == c_k] * 1[c_k in
C]``: no list explode, no Python loop over rows.

Without ``classes=`` (list columns only), the labels come from the data.  A
list is read as a set: a repeated label counts once and a missing (null)
element is no label.  Each row's set size and whether ``y`` is in its set are
read with the backend's own list functions (polars, DuckDB, PySpark; pyarrow
compute for pandas and pyarrow), then every metric is the same sum as with
``classes=``.
Without classes the size strata of :func:`set_ssc` cannot be the sizes
``0..K``: they are the sizes ``0 .. n_bins - 2`` and ``>= n_bins - 1``
(default ``n_bins=4``), so the output columns never depend on the data.  A
pandas column of Python lists (dtype ``object``: lists, tuples, sets or numpy
arrays) is converted to an Arrow list column internally (the caller's frame
is not modified).

Invalid rows (an error on eager input; null metrics and ``n_invalid`` on lazy
input): a missing true label or set; with ``classes=``, a true label not among
``classes`` and a list whose elements are not distinct members of ``classes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._renames import renamed
from conformal_frames._roles import Column, role
from conformal_frames._validate import (
    check_bins,
    check_positive_int,
    checked,
    instance_of,
    optional,
)
from conformal_frames.engine import Query, sort_result, stack
from conformal_frames.inputs.sets import (
    Label,
    SetMetric,
    SetSpec,
    set_covered_row,
    set_key,
    set_spec,
    size_indicator,
    size_row,
)
from conformal_frames.numerics.stats import min_of, proportion, ratio

__all__ = ["empty_rate", "set_coverage", "set_size", "set_ssc", "set_ssc_score", "singleton_rate"]
METHODS = list(__all__)


# ---------------------------------------------------------------------------
# coverage, size, singleton and empty rates
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class SetCoverage(SetMetric):
    y: str
    spec: SetSpec = checked(instance_of(SetSpec))
    ci_level: float = 0.95
    weights: str | None = None
    counts: str | None = None
    default_name = "set_coverage"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        return proportion(w, set_covered_row(q, self.y, self.spec), self.ci_level)


@renamed(ci="ci_level")
def set_coverage(
    y: Column,
    sets: Column | Sequence[Column],
    *,
    classes: Sequence[Label] | None = None,
    ci_level: float = 0.95,
    weights: Column | None = None,
    counts: Column | None = None,
) -> SetCoverage:
    """Empirical coverage of prediction sets, with a Wilson interval.

    ``set_coverage = (1/n) * sum_i 1[y_i in C_i]``.  Grouped and ``evaluate``
    output also carry ``set_coverage_ci_low`` / ``set_coverage_ci_high`` (Wilson
    score interval at confidence ``ci_level``).

    Parameters
    ----------
    y : Column
        Column of true labels (integers or strings).
    sets : Column or list of Column
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str, optional
        The possible labels; required with membership columns (the label of
        each column, in order).  With a list column and no ``classes``, the
        labels come from the data (a repeated label counts once).
    ci_level : float, default 0.95
        Confidence level of the Wilson interval.
    weights : Column, optional
        Column of non-negative row weights: the weighted proportion, its
        Wilson interval at Kish's effective sample size and an extra output
        ``set_coverage_n_eff`` (see the docs page
        "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    SetCoverage
        A metric object.  ``df.conformal.set_coverage(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``set_coverage`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": ["a", "b", "c"], "s": [["a", "b"], ["a"], ["c"]]})
    >>> df.conformal.set_coverage("y", "s", classes=["a", "b", "c"])
    0.6666666666666666
    """
    return SetCoverage(
        y=role(y), spec=set_spec(sets, classes), ci_level=ci_level, weights=role(weights), counts=role(counts)
    )


@dataclass(frozen=True, kw_only=True)
class SetSize(SetMetric):
    spec: SetSpec = checked(instance_of(SetSpec))
    weights: str | None = None
    counts: str | None = None
    default_name = "set_size"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(w.sum(size_row(q, self.spec)), w.total)}


def set_size(
    sets: Column | Sequence[Column],
    *,
    classes: Sequence[Label] | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
) -> SetSize:
    """Mean prediction-set size ``(1/n) * sum_i |C_i|``.

    Parameters
    ----------
    sets : Column or list of Column
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str, optional
        The possible labels; required with membership columns (the label of
        each column, in order).  With a list column and no ``classes``, the
        labels come from the data (a repeated label counts once).
    weights : Column, optional
        Column of non-negative row weights: the mean becomes the weighted
        mean ``sum_i w_i x_i / sum_i w_i`` (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    SetSize
        A metric object.  ``df.conformal.set_size(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``set_size`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"c0": [True, False, True], "c1": [True, False, False]})
    >>> df.conformal.set_size(["c0", "c1"], classes=[0, 1])
    1.0
    """
    return SetSize(spec=set_spec(sets, classes), weights=role(weights), counts=role(counts))


@dataclass(frozen=True, kw_only=True)
class SizeRate(SetMetric):
    spec: SetSpec = checked(instance_of(SetSpec))
    size: int = checked(partial(check_positive_int, at_least=0))
    weights: str | None = None
    counts: str | None = None
    default_name = "size_rate"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(w.sum(size_indicator(q, self.spec, self.size, self.size)), w.total)}


@dataclass(frozen=True, kw_only=True)
class SingletonRate(SizeRate):
    default_name = "singleton_rate"


@dataclass(frozen=True, kw_only=True)
class EmptyRate(SizeRate):
    default_name = "empty_rate"


def singleton_rate(
    sets: Column | Sequence[Column],
    *,
    classes: Sequence[Label] | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
) -> SizeRate:
    """Fraction of prediction sets with exactly one label.

    Parameters
    ----------
    sets : Column or list of Column
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str, optional
        The possible labels; required with membership columns (the label of
        each column, in order).  With a list column and no ``classes``, the
        labels come from the data (a repeated label counts once).
    weights : Column, optional
        Column of non-negative row weights: the mean becomes the weighted
        mean ``sum_i w_i x_i / sum_i w_i`` (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    SizeRate
        A metric object.  ``df.conformal.singleton_rate(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``singleton_rate`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"c0": [True, False, True, True], "c1": [True, False, False, False]})
    >>> df.conformal.singleton_rate(["c0", "c1"], classes=[0, 1])
    0.5
    """
    return SingletonRate(spec=set_spec(sets, classes), size=1, weights=role(weights), counts=role(counts))


def empty_rate(
    sets: Column | Sequence[Column],
    *,
    classes: Sequence[Label] | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
) -> SizeRate:
    """Fraction of empty prediction sets.

    Parameters
    ----------
    sets : Column or list of Column
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str, optional
        The possible labels; required with membership columns (the label of
        each column, in order).  With a list column and no ``classes``, the
        labels come from the data (a repeated label counts once).
    weights : Column, optional
        Column of non-negative row weights: the mean becomes the weighted
        mean ``sum_i w_i x_i / sum_i w_i`` (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    SizeRate
        A metric object.  ``df.conformal.empty_rate(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``empty_rate`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"c0": [True, False, True, True], "c1": [True, False, False, False]})
    >>> df.conformal.empty_rate(["c0", "c1"], classes=[0, 1])
    0.25
    """
    return EmptyRate(spec=set_spec(sets, classes), size=0, weights=role(weights), counts=role(counts))


# ---------------------------------------------------------------------------
# size-stratified coverage
# ---------------------------------------------------------------------------
#: strata of set sizes without classes: sizes 0 .. n_bins - 2, then ">= n_bins - 1"
DATA_SSC_BINS = 4


def size_strata(k: int | None, n_bins: int | None) -> list[tuple[int, int | None]]:
    """Contiguous ranges ``(min, max)`` of set sizes (``max`` ``None``: no upper end).

    With ``k`` classes, the sizes ``0..k``: ``None``: one stratum per size; an
    integer: ``range(k + 1)`` split into ``n_bins`` contiguous chunks whose
    lengths differ by at most one (the first ``(k + 1) % n_bins`` chunks are
    one longer), as the baseline does.  Without classes (``k`` ``None``, the
    largest size unknown before the data is read): one stratum per size
    ``0..n_bins - 2`` and a last one of the sizes ``>= n_bins - 1``
    (``n_bins`` default :data:`DATA_SSC_BINS`).
    """
    if k is None:
        nb = DATA_SSC_BINS if n_bins is None else n_bins
        return [(s, s) for s in range(nb - 1)] + [(nb - 1, None)]
    sizes = np.arange(k + 1)
    if n_bins is None:
        return [(int(s), int(s)) for s in sizes]
    return [(int(c[0]), int(c[-1])) for c in np.array_split(sizes, n_bins)]


def _check_set_bins(n_bins: Any, spec: SetSpec) -> int | None:
    if n_bins is None:
        return None
    nb = check_bins(n_bins)
    if spec.classes is None:
        return nb
    k = spec.k
    if nb > k + 1:
        msg = f"n_bins={nb} exceeds the {k + 1} possible set sizes (0..{k}) of {k} classes"
        raise ValueError(msg)
    return nb


def _ssc_strata(
    q: Query,
    y: str,
    spec: SetSpec,
    n_bins: int | None,
    weights: str | None,
    counts: str | None = None,
    *,
    include_empty: bool = True,
) -> list[tuple[nw.Expr, nw.Expr]]:
    """(coverage, rows) of each stratum; with weights, the weighted coverage and the rows of positive weight.

    ``include_empty=False``: the same strata without the empty sets (a
    stratum of sizes ``0..h`` becomes ``1..h``; the stratum of size 0 alone
    goes).
    """
    w = q.weighting(weights, counts=counts)
    covered = set_covered_row(q, y, spec)
    out = []
    strata = size_strata(spec.k if spec.classes is not None else None, n_bins)
    if not include_empty:
        strata = [(max(lo, 1), hi) for lo, hi in strata if hi is None or hi >= 1]
    for lo, hi in strata:
        inside = size_indicator(q, spec, lo, hi)
        hits = q.row(
            ("set_ssc_hits", y, set_key(spec), lo, hi), nw.col(inside) * nw.col(covered), inputs=[inside, covered]
        )
        weight = w.sum(inside)  # registered first: the unweighted query of 0.2, unchanged
        out.append((ratio(w.sum(hits), weight), w.count(inside)))
    return out


def _largest(column: str, lo: int) -> nw.Expr:
    """The open stratum's largest size (``lo`` where it has no row: such strata are left out)."""
    return nw.col(column).fill_null(float(lo)).cast(nw.Int64)


@dataclass(frozen=True, kw_only=True)
class SetSSC(SetMetric):
    y: str
    spec: SetSpec = checked(instance_of(SetSpec))
    n_bins: int | None = checked(optional(check_bins), None)
    weights: str | None = None
    counts: str | None = None
    default_name = "set_ssc"
    kind = "table"
    long = True

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        out: dict[str, nw.Expr | None] = {}
        for b, (cov, rows) in enumerate(_ssc_strata(q, self.y, self.spec, self.n_bins, self.weights, self.counts)):
            out[f"bin{b}"] = cov
            out[f"bin{b}_n"] = rows
        if self.spec.classes is None:  # the open last stratum: its largest size in the data
            lo, _ = self._strata()[-1]
            inside, size = size_indicator(q, self.spec, lo, None), size_row(q, self.spec)
            biggest = q.row(
                ("set_size_max_data", inside), nw.when(nw.col(inside) > 0.0).then(nw.col(size)), inputs=[inside, size]
            )
            out[f"bin{len(out) // 2 - 1}_size_max"] = q.weighting(self.weights, counts=self.counts).max(biggest)
        return out

    def _strata(self) -> list[tuple[int, int | None]]:
        return size_strata(self.spec.k if self.spec.classes is not None else None, self.n_bins)

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        name = self.output_name
        parts = [
            {
                "size_min": nw.lit(lo, nw.Int64),
                "size_max": nw.lit(hi, nw.Int64) if hi is not None else _largest(f"{name}_bin{b}_size_max", lo),
                name: nw.col(f"{name}_bin{b}"),
                "n": nw.col(f"{name}_bin{b}_n").cast(nw.Int64),
            }
            for b, (lo, hi) in enumerate(self._strata())
        ]
        return sort_result(stack(frame, keys, parts).filter(nw.col("n") > 0), *keys, "size_min")


@renamed(num_bins="n_bins")
def set_ssc(
    y: Column,
    sets: Column | Sequence[Column],
    *,
    classes: Sequence[Label] | None = None,
    n_bins: int | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
) -> SetSSC:
    """Size-stratified coverage of prediction sets.

    Rows are grouped by set size: with ``n_bins=None`` one stratum per size
    ``0..K`` (``K = len(classes)``); with an integer, the sizes ``0..K`` are cut
    into ``n_bins`` contiguous ranges of (near) equal length, the first
    ``(K + 1) % n_bins`` one size longer.  Without ``classes`` (a list column
    whose labels come from the data) ``K`` is unknown before the data is
    read: one stratum per size ``0 .. n_bins - 2`` and a last one of the
    sizes ``>= n_bins - 1`` (default ``n_bins=4``); its ``size_max`` is the
    largest size in the group (wide: ``set_ssc_bin{last}_size_max``).
    Coverage is reported per stratum.  **Strata without rows are absent**
    (the baseline reports them as NaN).

    A direct call returns a long table: group keys, ``size_min``, ``size_max``,
    the coverage column and ``n`` (rows in the stratum).  Inside ``evaluate`` the
    strata are wide columns ``set_ssc_bin0``, ``set_ssc_bin0_n``, ...

    Parameters
    ----------
    y : Column
        Column of true labels.
    sets : Column or list of Column
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str, optional
        The possible labels ``c_1..c_K`` (they fix the sizes ``0..K``); with
        membership columns (required), the label of each column, in order.
        Without them (a list column), the strata are the sizes ``0 ..
        n_bins - 2`` and ``>= n_bins - 1``.
    n_bins : int, optional
        With ``classes``: ``None``, one stratum per size; an integer, that
        many contiguous ranges of sizes.  Without: the number of strata
        (default 4: sizes 0, 1, 2 and ``>= 3``).
    weights : Column, optional
        Column of non-negative row weights: each stratum's weighted coverage;
        its ``n`` counts the stratum's rows of positive weight (see the
        docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    SetSSC
        A metric object.  ``df.conformal.set_ssc(...)`` returns the long
        table described above, a frame of the caller's type (lazy in, lazy
        out); inside :func:`~conformal_frames.evaluate` the wide columns.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [3, 3, 1, 2, 2],
    ...     "c0": [True, False, True, False, True], "c1": [True, True, True, False, True],
    ...     "c2": [True, False, True, True, False], "c3": [True, True, False, True, True]})
    >>> df.conformal.set_ssc("y", ["c0", "c1", "c2", "c3"], classes=[0, 1, 2, 3], n_bins=2)
    shape: (2, 4)
    ┌──────────┬──────────┬──────────┬─────┐
    │ size_min ┆ size_max ┆ set_ssc  ┆ n   │
    │ ---      ┆ ---      ┆ ---      ┆ --- │
    │ i64      ┆ i64      ┆ f64      ┆ i64 │
    ╞══════════╪══════════╪══════════╪═════╡
    │ 0        ┆ 2        ┆ 1.0      ┆ 2   │
    │ 3        ┆ 4        ┆ 0.666667 ┆ 3   │
    └──────────┴──────────┴──────────┴─────┘
    """
    spec = set_spec(sets, classes)
    return SetSSC(
        y=role(y), spec=spec, n_bins=_check_set_bins(n_bins, spec), weights=role(weights), counts=role(counts)
    )


@dataclass(frozen=True, kw_only=True)
class SetSSCScore(SetMetric):
    y: str
    spec: SetSpec = checked(instance_of(SetSpec))
    n_bins: int | None = checked(optional(check_bins), None)
    include_empty: bool = False
    weights: str | None = None
    counts: str | None = None
    default_name = "set_ssc_score"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        strata = _ssc_strata(
            q, self.y, self.spec, self.n_bins, self.weights, self.counts, include_empty=self.include_empty
        )
        w = q.weighting(self.weights, counts=self.counts)
        return {
            "": min_of(*[cov for cov, _ in strata]),
            "empty_rate": ratio(w.sum(size_indicator(q, self.spec, 0, 0)), w.total),
            "coverage": ratio(w.sum(set_covered_row(q, self.y, self.spec)), w.total),
        }


@renamed(num_bins="n_bins")
def set_ssc_score(
    y: Column,
    sets: Column | Sequence[Column],
    *,
    classes: Sequence[Label] | None = None,
    n_bins: int | None = None,
    include_empty: bool = False,
    weights: Column | None = None,
    counts: Column | None = None,
) -> SetSSCScore:
    """Minimum size-stratified coverage over the strata of non-empty sets that have rows.

    The strata are those of :func:`set_ssc` without the empty sets (a
    stratum of sizes ``0..h`` becomes ``1..h``; the size-0 stratum goes): an
    empty set never covers, so with any empty set the strict score is 0
    whatever the other sets do (every LAC predictor with empty sets scores
    0).  Beside it, ``set_ssc_score_empty_rate`` (the share of empty sets)
    and ``set_ssc_score_coverage`` (the coverage of all sets, empty ones
    included), so that the rows left out stay in view.
    ``include_empty=True`` gives the strict score over every stratum, as
    ``min`` of :func:`set_ssc` (the 0.3 definition).

    Parameters
    ----------
    y : Column
        Column of true labels.
    sets : Column or list of Column
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str, optional
        The possible labels ``c_1..c_K`` (they fix the sizes ``0..K``); with
        membership columns (required), the label of each column, in order.
        Without them (a list column), the strata are the sizes ``0 ..
        n_bins - 2`` and ``>= n_bins - 1``.
    n_bins : int, optional
        With ``classes``: ``None``, one stratum per size; an integer, that
        many contiguous ranges of sizes.  Without: the number of strata
        (default 4: sizes 0, 1, 2 and ``>= 3``).
    include_empty : bool, default False
        Whether the empty sets count (their stratum's coverage is 0).
    weights : Column, optional
        Column of non-negative row weights: each stratum's weighted coverage;
        its ``n`` counts the stratum's rows of positive weight (see the
        docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    SetSSCScore
        A metric object.  ``df.conformal.set_ssc_score(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``set_ssc_score``, ``set_ssc_score_empty_rate``,
        ``set_ssc_score_coverage`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [3, 3, 1, 2, 2, 0],
    ...     "s": [[0, 1, 2, 3], [1, 3], [0, 1, 2], [2, 3], [0, 1, 3], []]})
    >>> df.conformal.set_ssc_score("y", "s", classes=[0, 1, 2, 3])
    0.5
    >>> df.conformal.set_ssc_score("y", "s", classes=[0, 1, 2, 3], include_empty=True)
    0.0
    >>> out = conformal_frames.evaluate(df, conformal_frames.set_ssc_score("y", "s", classes=[0, 1, 2, 3]))
    >>> [round(v, 6) for v in out.select("set_ssc_score_empty_rate", "set_ssc_score_coverage").row(0)]
    [0.166667, 0.666667]
    """
    spec = set_spec(sets, classes)
    return SetSSCScore(
        y=role(y),
        spec=spec,
        n_bins=_check_set_bins(n_bins, spec),
        include_empty=include_empty,
        weights=role(weights),
        counts=role(counts),
    )
