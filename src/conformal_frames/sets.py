"""Prediction-set metrics (classification): coverage, size, SSC.

A prediction set is given either as

- a **list column** of labels (``sets="s"``, e.g. ``[0, 2]`` or ``["cat"]``),
  with ``classes=`` the possible labels; or
- one **boolean membership column** per class (``sets=["p0", "p1", "p2"]``)
  with ``classes=`` giving each column's label, in the same order.

``classes`` is required in both cases: it is what lets us check that every
label (true labels and set members) is a known class, and it fixes the
possible set sizes ``0..K`` used by :func:`set_ssc`.  Labels are integers or
strings (all of one kind).  Membership of the true label is computed row by
row as ``sum_k 1[y == c_k] * 1[c_k in C]``: no list explode, no Python loop
over rows.

Invalid rows (an error on eager input; null metrics and ``n_invalid`` on lazy
input): a missing true label or set, a true label not among ``classes``, and
a list whose elements are not distinct members of ``classes``.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._params import check_bins, check_probability
from conformal_frames._renames import renamed
from conformal_frames.core import Metric, Query
from conformal_frames.stats import min_of, ratio, wilson_interval

__all__ = ["empty_rate", "set_coverage", "set_size", "set_ssc", "set_ssc_score", "singleton_rate"]
METHODS = list(__all__)

Label = int | str


# ---------------------------------------------------------------------------
# validation of the set representation (at construction, no data needed)
# ---------------------------------------------------------------------------
def check_classes(classes: Any, name: str = "classes") -> tuple[Label, ...]:
    """Distinct labels, all integers or all strings, at least one."""
    if classes is None:
        msg = f"{name}= is required: the labels of the classes (integers or strings)"
        raise ValueError(msg)
    if isinstance(classes, (str, bytes)) or not isinstance(classes, Sequence | np.ndarray):
        msg = f"{name} must be a list of labels, got {classes!r}"
        raise TypeError(msg)
    out: list[Label] = []
    for c in list(classes):
        if isinstance(c, (bool, np.bool_)):
            msg = f"{name} must hold integers or strings, got the boolean {c!r}"
            raise TypeError(msg)
        if isinstance(c, Integral):
            out.append(int(c))
        elif isinstance(c, str):
            out.append(c)
        else:
            msg = f"{name} must hold integers or strings, got {c!r} ({type(c).__name__})"
            raise TypeError(msg)
    if not out:
        msg = f"{name} must hold at least one label"
        raise ValueError(msg)
    if len({type(c) for c in out}) > 1:
        msg = f"{name} mixes integer and string labels: {out!r}"
        raise TypeError(msg)
    if len(set(out)) != len(out):
        dupes = sorted({c for c in out if out.count(c) > 1}, key=str)
        msg = f"{name} has repeated labels: {dupes!r}"
        raise ValueError(msg)
    return tuple(out)


@dataclass(frozen=True)
class SetSpec:
    """A prediction-set representation: a list column or membership columns."""

    sets: str | tuple[str, ...]
    classes: tuple[Label, ...]

    @property
    def is_list(self) -> bool:
        return isinstance(self.sets, str)

    @property
    def k(self) -> int:
        return len(self.classes)


def set_spec(sets: Any, classes: Any) -> SetSpec:
    """Validate ``sets`` / ``classes`` of a set metric factory."""
    labels = check_classes(classes)
    if isinstance(sets, str):
        return SetSpec(sets, labels)
    if isinstance(sets, Sequence) and sets and all(isinstance(s, str) for s in sets):
        cols = tuple(sets)
        if len(cols) != len(labels):
            msg = (
                f"mismatched classes and membership columns: {len(cols)} columns "
                f"{list(cols)!r} but {len(labels)} classes {list(labels)!r}"
            )
            raise ValueError(msg)
        if len(set(cols)) != len(cols):
            msg = f"membership columns are repeated: {list(cols)!r}"
            raise ValueError(msg)
        return SetSpec(cols, labels)
    msg = (
        "sets must be the name of a list column or a list of boolean membership "
        f"column names (one per class), got {sets!r}"
    )
    raise TypeError(msg)


def _label_kind_ok(dtype: Any, classes: tuple[Label, ...]) -> bool:
    if isinstance(classes[0], str):
        return dtype == nw.String or dtype == nw.Categorical or dtype == nw.Enum
    return dtype.is_integer() or dtype.is_numeric()


# ---------------------------------------------------------------------------
# row-level expressions shared by set metrics (and conditional coverage)
# ---------------------------------------------------------------------------
def _total(exprs: list[nw.Expr]) -> nw.Expr:
    return functools.reduce(operator.add, exprs)


def membership_exprs(q: Query, spec: SetSpec) -> list[nw.Expr]:
    """Float64 0/1 expression per class: is class ``k`` in the row's set."""
    if spec.is_list:
        name = spec.sets
        assert isinstance(name, str)
        col = q.column(name)
        dtype = q.schema[name]
        if not isinstance(dtype, nw.List):
            hint = (
                " (a pandas column of Python lists has dtype object: convert it to a pyarrow list dtype, e.g. pd.ArrowDtype(pa.list_(pa.int64())), or use boolean membership columns)"
                if dtype == nw.Object
                else ""
            )
            msg = (
                f"set column {name!r} must be a list column of labels, found dtype {dtype}{hint}; "
                "alternatively pass one boolean membership column per class with classes="
            )
            raise TypeError(msg)
        inner_ok = _label_kind_ok(dtype.inner, spec.classes)
        if isinstance(spec.classes[0], int):  # list.contains needs an integer list for integer labels
            inner_ok = dtype.inner.is_integer()
        if not inner_ok:
            msg = f"set column {name!r} holds {dtype.inner} labels but classes are {list(spec.classes)!r}"
            raise TypeError(msg)
        mem = [col.list.contains(c).cast(nw.Float64) for c in spec.classes]
        q.check(f"set column {name!r} has missing values", col.is_null())
        q.check(
            f"set column {name!r} has labels not among classes {list(spec.classes)!r} (or repeated labels)",
            col.list.len().cast(nw.Float64) != _total(mem),
        )
        return mem
    mem = []
    for name in spec.sets:
        col = q.column(name)
        dtype = q.schema[name]
        if dtype != nw.Boolean:
            msg = f"membership column {name!r} must be boolean, found dtype {dtype}; cast it (e.g. col == 1) first"
            raise TypeError(msg)
        q.check(f"membership column {name!r} has missing values", col.is_null())
        mem.append(col.cast(nw.Float64))
    return mem


def label_exprs(q: Query, y: str, classes: tuple[Label, ...]) -> list[nw.Expr]:
    """Float64 0/1 expression per class: ``y == c_k`` (0 where ``y`` is missing).

    ``y`` may also be a group key (``by=`` the label: label-conditional metrics).
    """
    col = nw.col(y) if y in q.keys else q.column(y)
    dtype = q.schema[y]
    if not _label_kind_ok(dtype, classes):
        msg = f"label column {y!r} has dtype {dtype} but classes are {list(classes)!r}"
        raise TypeError(msg)
    missing = col.is_null()
    if dtype.is_float():
        missing = missing | col.is_nan()
    eq = [(col == c).cast(nw.Float64).fill_null(0.0) for c in classes]
    q.check(f"label column {y!r} has missing values", missing)
    q.check(
        f"label column {y!r} has labels not among classes {list(classes)!r}",
        (_total(eq) == 0.0) & ~missing,
        example=col.cast(nw.String) if dtype == nw.Categorical or dtype == nw.Enum else col,
    )
    return eq


def _key(spec: SetSpec) -> Hashable:
    return (spec.sets, spec.classes)


def size_row(q: Query, spec: SetSpec) -> str:
    """Row column: the set size ``|C_i|`` (Float64)."""
    return q.row(("set_size", _key(spec)), _total(membership_exprs(q, spec)))


def set_covered_row(q: Query, y: str, spec: SetSpec) -> str:
    """Row column: 1.0 where the true label is in the set, else 0.0."""
    mem = membership_exprs(q, spec)
    eq = label_exprs(q, y, spec.classes)
    return q.row(("set_covered", y, _key(spec)), _total([e * m for e, m in zip(eq, mem)]))


def _size_indicator(q: Query, spec: SetSpec, lo: int, hi: int) -> str:
    size = _total(membership_exprs(q, spec))
    return q.row(("set_size_in", _key(spec), lo, hi), ((size >= lo) & (size <= hi)).cast(nw.Float64))


# ---------------------------------------------------------------------------
# coverage, size, singleton and empty rates
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class SetCoverage(Metric):
    y: str
    spec: SetSpec
    ci_level: float = 0.95
    default_name = "set_coverage"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        k = q.sum(set_covered_row(q, self.y, self.spec))
        low, high = wilson_interval(k, q.n, self.ci_level)
        return {"": ratio(k, q.n), "ci_low": low, "ci_high": high}


@renamed(ci="ci_level")
def set_coverage(y: str, sets: str | Sequence[str], *, classes: Sequence[Label], ci_level: float = 0.95) -> SetCoverage:
    """Empirical coverage of prediction sets, with a Wilson interval.

    ``set_coverage = (1/n) * sum_i 1[y_i in C_i]``.  Grouped and ``evaluate``
    output also carry ``set_coverage_ci_low`` / ``set_coverage_ci_high`` (Wilson
    score interval at confidence ``ci_level``).

    Parameters
    ----------
    y : str
        Column of true labels (integers or strings).
    sets : str or list of str
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str
        The possible labels; with membership columns, the label of each column.
    ci_level : float, default 0.95
        Confidence level of the Wilson interval.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": ["a", "b", "c"], "s": [["a", "b"], ["a"], ["c"]]})
    >>> df.conformal.set_coverage("y", "s", classes=["a", "b", "c"])
    0.6666666666666666
    """
    check_probability(ci_level, "ci_level")
    return SetCoverage(y=y, spec=set_spec(sets, classes), ci_level=ci_level)


@dataclass(frozen=True, kw_only=True)
class SetSize(Metric):
    spec: SetSpec
    default_name = "set_size"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        return {"": ratio(q.sum(size_row(q, self.spec)), q.n)}


def set_size(sets: str | Sequence[str], *, classes: Sequence[Label]) -> SetSize:
    """Mean prediction-set size ``(1/n) * sum_i |C_i|``.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"c0": [True, False, True], "c1": [True, False, False]})
    >>> df.conformal.set_size(["c0", "c1"], classes=[0, 1])
    1.0
    """
    return SetSize(spec=set_spec(sets, classes))


@dataclass(frozen=True, kw_only=True)
class SizeRate(Metric):
    spec: SetSpec
    size: int
    default_name = "size_rate"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        return {"": ratio(q.sum(_size_indicator(q, self.spec, self.size, self.size)), q.n)}


@dataclass(frozen=True, kw_only=True)
class SingletonRate(SizeRate):
    default_name = "singleton_rate"


@dataclass(frozen=True, kw_only=True)
class EmptyRate(SizeRate):
    default_name = "empty_rate"


def singleton_rate(sets: str | Sequence[str], *, classes: Sequence[Label]) -> SizeRate:
    """Fraction of prediction sets with exactly one label.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"c0": [True, False, True, True], "c1": [True, False, False, False]})
    >>> df.conformal.singleton_rate(["c0", "c1"], classes=[0, 1])
    0.5
    """
    return SingletonRate(spec=set_spec(sets, classes), size=1)


def empty_rate(sets: str | Sequence[str], *, classes: Sequence[Label]) -> SizeRate:
    """Fraction of empty prediction sets.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"c0": [True, False, True, True], "c1": [True, False, False, False]})
    >>> df.conformal.empty_rate(["c0", "c1"], classes=[0, 1])
    0.25
    """
    return EmptyRate(spec=set_spec(sets, classes), size=0)


# ---------------------------------------------------------------------------
# size-stratified coverage
# ---------------------------------------------------------------------------
def size_strata(k: int, n_bins: int | None) -> list[tuple[int, int]]:
    """Contiguous ranges ``(min, max)`` of set sizes ``0..k``.

    ``None``: one stratum per size.  An integer: ``range(k + 1)`` split into
    ``n_bins`` contiguous chunks whose lengths differ by at most one (the
    first ``(k + 1) % n_bins`` chunks are one longer), as the baseline does.
    """
    sizes = np.arange(k + 1)
    if n_bins is None:
        return [(int(s), int(s)) for s in sizes]
    return [(int(c[0]), int(c[-1])) for c in np.array_split(sizes, n_bins)]


def _check_set_bins(n_bins: Any, k: int) -> int | None:
    if n_bins is None:
        return None
    nb = check_bins(n_bins)
    if nb > k + 1:
        msg = f"n_bins={nb} exceeds the {k + 1} possible set sizes (0..{k}) of {k} classes"
        raise ValueError(msg)
    return nb


def _ssc_strata(q: Query, y: str, spec: SetSpec, n_bins: int | None) -> list[tuple[nw.Expr, nw.Expr]]:
    covered = set_covered_row(q, y, spec)
    out = []
    for lo, hi in size_strata(spec.k, n_bins):
        inside = _size_indicator(q, spec, lo, hi)
        hits = q.row(("set_ssc_hits", y, _key(spec), lo, hi), nw.col(inside) * nw.col(covered), level=1)
        count = q.sum(inside)
        out.append((ratio(q.sum(hits), count), count))
    return out


@dataclass(frozen=True, kw_only=True)
class SetSSC(Metric):
    y: str
    spec: SetSpec
    n_bins: int | None = None
    default_name = "set_ssc"
    kind = "table"
    long = True

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        out: dict[str, nw.Expr | None] = {}
        for b, (cov, rows) in enumerate(_ssc_strata(q, self.y, self.spec, self.n_bins)):
            out[f"bin{b}"] = cov
            out[f"bin{b}_n"] = rows
        return out

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        name = self.output_name
        parts = [
            frame.select(
                *keys,
                nw.lit(lo, nw.Int64).alias("size_min"),
                nw.lit(hi, nw.Int64).alias("size_max"),
                nw.col(f"{name}_bin{b}").alias(name),
                nw.col(f"{name}_bin{b}_n").cast(nw.Int64).alias("n"),
            )
            for b, (lo, hi) in enumerate(size_strata(self.spec.k, self.n_bins))
        ]
        return nw.concat(parts, how="vertical").filter(nw.col("n") > 0).sort(*keys, "size_min")


@renamed(num_bins="n_bins")
def set_ssc(y: str, sets: str | Sequence[str], *, classes: Sequence[Label], n_bins: int | None = None) -> SetSSC:
    """Size-stratified coverage of prediction sets.

    Rows are grouped by set size: with ``n_bins=None`` one stratum per size
    ``0..K`` (``K = len(classes)``); with an integer, the sizes ``0..K`` are cut
    into ``n_bins`` contiguous ranges of (near) equal length, the first
    ``(K + 1) % n_bins`` one size longer.  Coverage is reported per stratum.
    **Strata without rows are absent** (the baseline reports them as NaN).

    A direct call returns a long table: group keys, ``size_min``, ``size_max``,
    the coverage column and ``n`` (rows in the stratum).  Inside ``evaluate`` the
    strata are wide columns ``set_ssc_bin0``, ``set_ssc_bin0_n``, ...

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
    return SetSSC(y=y, spec=spec, n_bins=_check_set_bins(n_bins, spec.k))


@dataclass(frozen=True, kw_only=True)
class SetSSCScore(Metric):
    y: str
    spec: SetSpec
    n_bins: int | None = None
    default_name = "set_ssc_score"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        return {"": min_of(*[cov for cov, _ in _ssc_strata(q, self.y, self.spec, self.n_bins)])}


@renamed(num_bins="n_bins")
def set_ssc_score(
    y: str, sets: str | Sequence[str], *, classes: Sequence[Label], n_bins: int | None = None
) -> SetSSCScore:
    """Minimum size-stratified coverage over the strata that have rows.

    See :func:`set_ssc`.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [3, 3, 1, 2, 2],
    ...     "s": [[0, 1, 2, 3], [1, 3], [0, 1, 2], [2, 3], [0, 1, 3]]})
    >>> round(df.conformal.set_ssc_score("y", "s", classes=[0, 1, 2, 3], n_bins=2), 8)
    0.66666667
    """
    spec = set_spec(sets, classes)
    return SetSSCScore(y=y, spec=spec, n_bins=_check_set_bins(n_bins, spec.k))
