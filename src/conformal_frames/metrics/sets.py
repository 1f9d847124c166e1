"""Prediction-set metrics (classification): coverage, size, SSC.

A prediction set is given either as

- a **list column** of labels (``sets="s"``, e.g. ``[0, 2]`` or ``["cat"]``);
  ``classes=`` (the possible labels) is optional; or
- one **boolean membership column** per class (``sets=["p0", "p1", "p2"]``)
  with ``classes=`` giving each column's label, in the same order (required).

With ``classes=``, every label (true labels and set members) is checked to be
a known class, and the possible set sizes ``0..K`` are known (:func:`set_ssc`
needs them).  Membership of the true label is then computed row by row as
``sum_k 1[y == c_k] * 1[c_k in C]``: no list explode, no Python loop over rows.

Without ``classes=`` (list columns only: :func:`set_coverage`,
:func:`set_size`, :func:`singleton_rate`, :func:`empty_rate`), the labels come
from the data: a sub-query explodes the lists once and counts, per group, the
rows whose set holds the true label and the distinct labels of each set.  A
list is read as a set: a repeated label counts once and a missing (null)
element is no label.  A pandas column of Python lists (dtype ``object``:
lists, tuples, sets or numpy arrays) is converted to an Arrow list column
internally (the caller's frame is not modified).

Invalid rows (an error on eager input; null metrics and ``n_invalid`` on lazy
input): a missing true label or set; with ``classes=``, a true label not among
``classes`` and a list whose elements are not distinct members of ``classes``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._renames import renamed
from conformal_frames._validate import (
    check_bins,
    check_classes,
    check_sets,
    checked,
    optional,
    validate_fields,
)
from conformal_frames.core import Metric, Query, TableFn, TableRef, aggregate, stack, total
from conformal_frames.stats import min_of, proportion, ratio

__all__ = ["empty_rate", "set_coverage", "set_size", "set_ssc", "set_ssc_score", "singleton_rate"]
METHODS = list(__all__)

Label = int | str


# ---------------------------------------------------------------------------
# validation of the set representation (at construction, no data needed)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SetSpec:
    """A prediction-set representation: a list column or membership columns."""

    sets: str | tuple[str, ...] = checked(check_sets)
    #: ``None``: a list column whose labels come from the data
    classes: tuple[Label, ...] | None = checked(optional(check_classes))

    def __post_init__(self) -> None:
        validate_fields(self)

    @property
    def is_list(self) -> bool:
        return isinstance(self.sets, str)

    @property
    def k(self) -> int:
        assert self.classes is not None
        return len(self.classes)


def set_spec(sets: Any, classes: Any, *, need_classes: str | None = None) -> SetSpec:
    """Validate ``sets`` / ``classes`` of a set metric factory.

    ``classes`` may be ``None`` with a list column, unless ``need_classes``
    (the reason, for the error message) says the metric needs them.
    """
    sets = check_sets(sets)
    if classes is None and isinstance(sets, str):
        if need_classes is not None:
            msg = f"classes= is required with the list column {sets!r}: {need_classes}"
            raise ValueError(msg)
        return SetSpec(sets, None)
    labels = check_classes(classes)
    if isinstance(sets, str):
        return SetSpec(sets, labels)
    if len(sets) != len(labels):
        msg = (
            f"mismatched classes and membership columns: {len(sets)} columns "
            f"{list(sets)!r} but {len(labels)} classes {list(labels)!r}"
        )
        raise ValueError(msg)
    return SetSpec(sets, labels)


def _label_kind_ok(dtype: Any, classes: tuple[Label, ...]) -> bool:
    if isinstance(classes[0], str):
        return dtype == nw.String or dtype == nw.Categorical or dtype == nw.Enum
    return dtype.is_integer() or dtype.is_numeric()


# ---------------------------------------------------------------------------
# row-level expressions shared by set metrics (and conditional coverage)
# ---------------------------------------------------------------------------
def membership_exprs(q: Query, spec: SetSpec) -> list[nw.Expr]:
    """Float64 0/1 expression per class: is class ``k`` in the row's set."""
    assert spec.classes is not None
    if spec.is_list:
        name = spec.sets
        assert isinstance(name, str)
        col = q.column(name)
        dtype = q.schema[name]
        if not isinstance(dtype, nw.List):
            msg = (
                f"set column {name!r} must be a list column of labels, found dtype {dtype}; "
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
            col.list.len().cast(nw.Float64) != total(mem),
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
        (total(eq) == 0.0) & ~missing,
        example=col.cast(nw.String) if dtype == nw.Categorical or dtype == nw.Enum else col,
    )
    return eq


def _key(spec: SetSpec) -> Hashable:
    return (spec.sets, spec.classes)


def size_row(q: Query, spec: SetSpec) -> str:
    """Row column: the set size ``|C_i|`` (Float64)."""
    return q.row(("set_size", _key(spec)), total(membership_exprs(q, spec)))


def set_covered_row(q: Query, y: str, spec: SetSpec) -> str:
    """Row column: 1.0 where the true label is in the set, else 0.0."""
    mem = membership_exprs(q, spec)
    assert spec.classes is not None
    eq = label_exprs(q, y, spec.classes)
    return q.row(("set_covered", y, _key(spec)), total([e * m for e, m in zip(eq, mem)]))


def _size_indicator(q: Query, spec: SetSpec, lo: int, hi: int) -> str:
    size = total(membership_exprs(q, spec))
    return q.row(("set_size_in", _key(spec), lo, hi), ((size >= lo) & (size <= hi)).cast(nw.Float64))


# ---------------------------------------------------------------------------
# pandas columns of Python lists (dtype object)
# ---------------------------------------------------------------------------
def _as_list(value: Any) -> list[Any] | bool | None:
    """The labels of one object cell; ``None`` if missing; ``False`` if not a list."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, np.ndarray):
        return value.tolist()
    try:
        import pandas as pd

        if value is pd.NA:
            return None
    except ImportError:  # pragma: no cover
        pass
    return False


def _arrow_list(values: list[Any], name: str) -> Any:
    import pyarrow as pa

    cells = [_as_list(v) for v in values]
    bad = [i for i, c in enumerate(cells) if c is False]
    if bad:
        example = values[bad[0]]
        rows = f"{len(bad)} row{'s' if len(bad) != 1 else ''}"
        msg = (
            f"set column {name!r} (dtype object) holds values that are not lists of labels in {rows}, "
            f"e.g. {example!r} ({type(example).__name__}); expected lists, tuples, sets or numpy arrays"
        )
        raise TypeError(msg)
    try:
        arr = pa.array(cells)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        msg = f"set column {name!r} mixes label types ({exc}); use labels of one kind (all integers or all strings)"
        raise TypeError(msg) from exc
    if pa.types.is_null(arr.type):
        arr = pa.array(cells, type=pa.list_(pa.null()))
    return arr


def arrow_lists(frame: nw.LazyFrame, names: Sequence[str]) -> nw.LazyFrame:
    """Pandas ``object`` columns of Python lists (``names``) as Arrow list columns.

    Tuples, sets and numpy arrays are lists too; missing cells stay missing.
    Returns a new frame (the caller's frame is not modified); other backends
    and other dtypes pass through.
    """
    if not frame.implementation.is_pandas_like():
        return frame
    schema = frame.collect_schema()
    todo = [n for n in names if n in schema and schema[n] == nw.Object]
    if not todo:
        return frame
    import pandas as pd

    native = frame.to_native()
    new = {
        n: pd.Series(pd.arrays.ArrowExtensionArray(_arrow_list(native[n].tolist(), n)), index=native.index)
        for n in todo
    }
    return nw.from_native(native.assign(**new)).lazy()


# ---------------------------------------------------------------------------
# list columns without classes: labels from the data (one explode sub-query)
# ---------------------------------------------------------------------------
def _list_column(q: Query, name: str) -> nw.Expr:
    """The list column ``name``, checked to be a list column."""
    col = q.column(name)
    dtype = q.schema[name]
    if not isinstance(dtype, nw.List):
        msg = (
            f"set column {name!r} must be a list column of labels, found dtype {dtype}; "
            "alternatively pass one boolean membership column per class with classes="
        )
        raise TypeError(msg)
    q.check(f"set column {name!r} has missing values", col.is_null())
    return col


def _same_kind(label: Any, inner: Any) -> bool:
    if inner == nw.Unknown:  # e.g. every list empty
        return True
    strings = (nw.String, nw.Categorical, nw.Enum)
    return any(label == t for t in strings) == any(inner == t for t in strings) and (
        label.is_numeric() == inner.is_numeric()
    )


def _data_label_row(q: Query, y: str, inner: Any) -> str:
    """Row column of the true label, compared with the list elements."""
    col = nw.col(y) if y in q.keys else q.column(y)
    dtype = q.schema[y]
    if not _same_kind(dtype, inner):
        msg = f"label column {y!r} has dtype {dtype} but the sets hold {inner} labels"
        raise TypeError(msg)
    missing = col.is_null() | col.is_nan() if dtype.is_float() else col.is_null()
    q.check(f"label column {y!r} has missing values", missing)
    if dtype == nw.Categorical or dtype == nw.Enum:
        col = col.cast(nw.String)
    return q.row(("set_label", y), col)


def _explode_table(lst: str, order: str, label: str | None, weight: str | None = None) -> TableFn:
    """Per group: rows whose set holds the label, distinct labels, singletons, non-empty sets.

    Each row gets an id (unique; its order does not matter), the lists are
    exploded once, null elements dropped, and the elements counted per row,
    then per group.  Rows with an empty set have no element and only count in
    the main aggregation's ``n``.  With ``weight`` (a row column), every
    per-row count is multiplied by the row's weight before the group sums.
    """

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        e, o, y, rid, hit, d, one, ne = (ref.name(x) for x in ("e", "o", "y", "rid", "hit", "d", "one", "ne"))
        wt = ref.name("w")
        cols: list[nw.Expr | str] = [*keys, nw.col(lst).alias(e), nw.col(order).alias(o)]
        cols += [nw.col(label).alias(y)] if label else []
        cols += [nw.col(weight).alias(wt)] if weight else []
        r = rows.select(*cols).with_row_index(rid, order_by=[o]).explode(e).filter(~nw.col(e).is_null())
        aggs = [nw.col(e).n_unique().alias(d), *([nw.col(wt).max()] if weight else [])]
        if label:
            r = r.with_columns((nw.col(e) == nw.col(y)).cast(nw.Float64).fill_null(0.0).alias(hit))
            aggs.append(nw.col(hit).max().alias(hit))
        per = r.group_by(*keys, rid).agg(*aggs)
        per = per.with_columns(nw.col(d).cast(nw.Float64), (nw.col(d) == 1).cast(nw.Float64).alias(one))
        if weight:
            per = per.with_columns(*[(nw.col(c) * nw.col(wt)).alias(c) for c in (d, one, *([hit] if label else []))])
        count = nw.col(wt).sum().alias(ne) if weight else nw.len().alias(ne)
        sums = [nw.col(d).sum(), nw.col(one).sum(), count, *([nw.col(hit).sum()] if label else [])]
        out = aggregate(per, keys, sums)
        return out.with_columns(nw.col(ne).cast(nw.Float64))

    return build


def data_label_counts(q: Query, spec: SetSpec, y: str | None, weight: str | None = None) -> dict[str, nw.Expr]:
    """Per-group sums of a list column without classes: ``hits`` (with ``y``),
    ``size`` (distinct labels), ``singletons`` and ``nonempty`` rows (each row
    counted with its ``weight``, a row column, when given)."""
    assert isinstance(spec.sets, str)
    col = _list_column(q, spec.sets)
    lst = q.row(("set_list", spec.sets), col)
    order = q.row(("set_len", spec.sets), col.list.len().cast(nw.Float64))
    label = _data_label_row(q, y, q.schema[spec.sets].inner) if y is not None else None
    t = q.table(("set_explode", lst, label, weight), _explode_table(lst, order, label, weight))
    names = {"size": "d", "singletons": "one", "nonempty": "ne", **({"hits": "hit"} if label else {})}
    return {k: t.col(v).fill_null(0.0) for k, v in names.items()}


# ---------------------------------------------------------------------------
# coverage, size, singleton and empty rates
# ---------------------------------------------------------------------------
class SetMetric(Metric):
    """A metric of prediction sets: a pandas list column of dtype object is converted first."""

    spec: SetSpec

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        return arrow_lists(frame, [self.spec.sets] if isinstance(self.spec.sets, str) else [])


@dataclass(frozen=True, kw_only=True)
class SetCoverage(SetMetric):
    y: str
    spec: SetSpec
    ci_level: float = 0.95
    weights: str | None = None
    default_name = "set_coverage"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights)
        if self.spec.classes is None:
            k = data_label_counts(q, self.spec, self.y, w.row)["hits"]
        else:
            k = w.sum(set_covered_row(q, self.y, self.spec))
        return proportion(w, k, self.ci_level)


@renamed(ci="ci_level")
def set_coverage(
    y: str,
    sets: str | Sequence[str],
    *,
    classes: Sequence[Label] | None = None,
    ci_level: float = 0.95,
    weights: str | None = None,
) -> SetCoverage:
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
    classes : list of int or str, optional
        The possible labels; required with membership columns (the label of
        each column, in order).  With a list column and no ``classes``, the
        labels come from the data (a repeated label counts once).
    ci_level : float, default 0.95
        Confidence level of the Wilson interval.
    weights : str, optional
        Column of non-negative row weights: the weighted proportion, its
        Wilson interval at Kish's effective sample size and an extra output
        ``set_coverage_n_eff`` (see the docs page
        "Weights").

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
    return SetCoverage(y=y, spec=set_spec(sets, classes), ci_level=ci_level, weights=weights)


@dataclass(frozen=True, kw_only=True)
class SetSize(SetMetric):
    spec: SetSpec
    weights: str | None = None
    default_name = "set_size"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights)
        if self.spec.classes is None:
            return {"": ratio(data_label_counts(q, self.spec, None, w.row)["size"], w.total)}
        return {"": ratio(w.sum(size_row(q, self.spec)), w.total)}


def set_size(
    sets: str | Sequence[str], *, classes: Sequence[Label] | None = None, weights: str | None = None
) -> SetSize:
    """Mean prediction-set size ``(1/n) * sum_i |C_i|``.

    Parameters
    ----------
    sets : str or list of str
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str, optional
        The possible labels; required with membership columns (the label of
        each column, in order).  With a list column and no ``classes``, the
        labels come from the data (a repeated label counts once).
    weights : str, optional
        Column of non-negative row weights: the mean becomes the weighted
        mean ``sum_i w_i x_i / sum_i w_i`` (see the docs page "Weights").

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
    return SetSize(spec=set_spec(sets, classes), weights=weights)


@dataclass(frozen=True, kw_only=True)
class SizeRate(SetMetric):
    spec: SetSpec
    size: int
    weights: str | None = None
    default_name = "size_rate"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights)
        if self.spec.classes is None:
            counts = data_label_counts(q, self.spec, None, w.row)
            hits = counts["singletons"] if self.size == 1 else w.total - counts["nonempty"]
            return {"": ratio(hits, w.total)}
        return {"": ratio(w.sum(_size_indicator(q, self.spec, self.size, self.size)), w.total)}


@dataclass(frozen=True, kw_only=True)
class SingletonRate(SizeRate):
    default_name = "singleton_rate"


@dataclass(frozen=True, kw_only=True)
class EmptyRate(SizeRate):
    default_name = "empty_rate"


def singleton_rate(
    sets: str | Sequence[str], *, classes: Sequence[Label] | None = None, weights: str | None = None
) -> SizeRate:
    """Fraction of prediction sets with exactly one label.

    Parameters
    ----------
    sets : str or list of str
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str, optional
        The possible labels; required with membership columns (the label of
        each column, in order).  With a list column and no ``classes``, the
        labels come from the data (a repeated label counts once).
    weights : str, optional
        Column of non-negative row weights: the mean becomes the weighted
        mean ``sum_i w_i x_i / sum_i w_i`` (see the docs page "Weights").

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
    return SingletonRate(spec=set_spec(sets, classes), size=1, weights=weights)


def empty_rate(
    sets: str | Sequence[str], *, classes: Sequence[Label] | None = None, weights: str | None = None
) -> SizeRate:
    """Fraction of empty prediction sets.

    Parameters
    ----------
    sets : str or list of str
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str, optional
        The possible labels; required with membership columns (the label of
        each column, in order).  With a list column and no ``classes``, the
        labels come from the data (a repeated label counts once).
    weights : str, optional
        Column of non-negative row weights: the mean becomes the weighted
        mean ``sum_i w_i x_i / sum_i w_i`` (see the docs page "Weights").

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
    return EmptyRate(spec=set_spec(sets, classes), size=0, weights=weights)


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


_SSC_NEEDS = "the strata are the possible set sizes 0..K of K classes"


def _check_set_bins(n_bins: Any, k: int) -> int | None:
    if n_bins is None:
        return None
    nb = check_bins(n_bins)
    if nb > k + 1:
        msg = f"n_bins={nb} exceeds the {k + 1} possible set sizes (0..{k}) of {k} classes"
        raise ValueError(msg)
    return nb


def _ssc_strata(
    q: Query, y: str, spec: SetSpec, n_bins: int | None, weights: str | None
) -> list[tuple[nw.Expr, nw.Expr]]:
    """(coverage, rows) of each stratum; with weights, the weighted coverage and the rows of positive weight."""
    w = q.weighting(weights)
    covered = set_covered_row(q, y, spec)
    out = []
    for lo, hi in size_strata(spec.k, n_bins):
        inside = _size_indicator(q, spec, lo, hi)
        hits = q.row(
            ("set_ssc_hits", y, _key(spec), lo, hi), nw.col(inside) * nw.col(covered), inputs=[inside, covered]
        )
        weight = w.sum(inside)  # registered first: the unweighted query of 0.2, unchanged
        out.append((ratio(w.sum(hits), weight), w.count(inside)))
    return out


@dataclass(frozen=True, kw_only=True)
class SetSSC(SetMetric):
    y: str
    spec: SetSpec
    n_bins: int | None = checked(optional(check_bins), None)
    weights: str | None = None
    default_name = "set_ssc"
    kind = "table"
    long = True

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        out: dict[str, nw.Expr | None] = {}
        for b, (cov, rows) in enumerate(_ssc_strata(q, self.y, self.spec, self.n_bins, self.weights)):
            out[f"bin{b}"] = cov
            out[f"bin{b}_n"] = rows
        return out

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        name = self.output_name
        parts = [
            {
                "size_min": nw.lit(lo, nw.Int64),
                "size_max": nw.lit(hi, nw.Int64),
                name: nw.col(f"{name}_bin{b}"),
                "n": nw.col(f"{name}_bin{b}_n").cast(nw.Int64),
            }
            for b, (lo, hi) in enumerate(size_strata(self.spec.k, self.n_bins))
        ]
        return stack(frame, keys, parts).filter(nw.col("n") > 0).sort(*keys, "size_min")


@renamed(num_bins="n_bins")
def set_ssc(
    y: str,
    sets: str | Sequence[str],
    *,
    classes: Sequence[Label] | None = None,
    n_bins: int | None = None,
    weights: str | None = None,
) -> SetSSC:
    """Size-stratified coverage of prediction sets.

    Rows are grouped by set size: with ``n_bins=None`` one stratum per size
    ``0..K`` (``K = len(classes)``); with an integer, the sizes ``0..K`` are cut
    into ``n_bins`` contiguous ranges of (near) equal length, the first
    ``(K + 1) % n_bins`` one size longer.  Coverage is reported per stratum.
    **Strata without rows are absent** (the baseline reports them as NaN).

    A direct call returns a long table: group keys, ``size_min``, ``size_max``,
    the coverage column and ``n`` (rows in the stratum).  Inside ``evaluate`` the
    strata are wide columns ``set_ssc_bin0``, ``set_ssc_bin0_n``, ...

    Parameters
    ----------
    y : str
        Column of true labels.
    sets : str or list of str
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str
        The possible labels ``c_1..c_K`` (they fix the sizes ``0..K``); with
        membership columns, the label of each column, in order.
    n_bins : int, optional
        ``None``: one stratum per size; an integer: that many contiguous
        ranges of sizes.
    weights : str, optional
        Column of non-negative row weights: each stratum's weighted coverage;
        its ``n`` counts the stratum's rows of positive weight (see the
        docs page "Weights").

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
    spec = set_spec(sets, classes, need_classes=_SSC_NEEDS)
    return SetSSC(y=y, spec=spec, n_bins=_check_set_bins(n_bins, spec.k), weights=weights)


@dataclass(frozen=True, kw_only=True)
class SetSSCScore(SetMetric):
    y: str
    spec: SetSpec
    n_bins: int | None = checked(optional(check_bins), None)
    weights: str | None = None
    default_name = "set_ssc_score"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        return {"": min_of(*[cov for cov, _ in _ssc_strata(q, self.y, self.spec, self.n_bins, self.weights)])}


@renamed(num_bins="n_bins")
def set_ssc_score(
    y: str,
    sets: str | Sequence[str],
    *,
    classes: Sequence[Label] | None = None,
    n_bins: int | None = None,
    weights: str | None = None,
) -> SetSSCScore:
    """Minimum size-stratified coverage over the strata that have rows.

    See :func:`set_ssc`.

    Parameters
    ----------
    y : str
        Column of true labels.
    sets : str or list of str
        A list column of labels, or one boolean membership column per class.
    classes : list of int or str
        The possible labels ``c_1..c_K`` (they fix the sizes ``0..K``); with
        membership columns, the label of each column, in order.
    n_bins : int, optional
        ``None``: one stratum per size; an integer: that many contiguous
        ranges of sizes.
    weights : str, optional
        Column of non-negative row weights: each stratum's weighted coverage;
        its ``n`` counts the stratum's rows of positive weight (see the
        docs page "Weights").

    Returns
    -------
    SetSSCScore
        A metric object.  ``df.conformal.set_ssc_score(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``set_ssc_score`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [3, 3, 1, 2, 2],
    ...     "s": [[0, 1, 2, 3], [1, 3], [0, 1, 2], [2, 3], [0, 1, 3]]})
    >>> round(df.conformal.set_ssc_score("y", "s", classes=[0, 1, 2, 3], n_bins=2), 8)
    0.66666667
    """
    spec = set_spec(sets, classes, need_classes=_SSC_NEEDS)
    return SetSSCScore(y=y, spec=spec, n_bins=_check_set_bins(n_bins, spec.k), weights=weights)
