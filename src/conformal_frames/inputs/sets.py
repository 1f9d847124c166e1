"""Prediction sets: the one reader of a set column and of a label against it.

A prediction set is a list column of labels (a native list, an Arrow list, or
a pandas object column of lists, tuples, sets or arrays, converted to an Arrow
list internally) or one Boolean membership column per class with
``classes=``.  Without ``classes=`` the labels come from the data: each row's
set size and whether ``y`` is in the set are read with the backend's own list
functions before the query (:func:`data_rows`).  A list is read as a set: a
repeated label counts once and a missing (null) element is no label.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._validate import (
    check_classes,
    check_sets,
    checked,
    optional,
    validate_fields,
)
from conformal_frames.engine import Metric, Query, backend_name, indicator, total
from conformal_frames.errors import BackendLimitError, BooleanColumnError, ListColumnError

__all__ = [
    "Label",
    "SetMetric",
    "SetSpec",
    "arrow_lists",
    "data_rows",
    "label_exprs",
    "membership_exprs",
    "prepared",
    "row_names",
    "set_covered_row",
    "set_key",
    "set_spec",
    "size_indicator",
    "size_row",
]

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


def set_spec(sets: Any, classes: Any) -> SetSpec:
    """Validate ``sets`` / ``classes`` of a set metric factory (``classes`` may be ``None`` with a list column)."""
    sets = check_sets(sets)
    if classes is None and isinstance(sets, str):
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
        col = _list_column(q, name)
        dtype = q.schema[name]
        if dtype.inner == nw.Unknown:  # lists without any label (e.g. every set empty): of the classes' type
            dtype = nw.List(nw.String() if isinstance(spec.classes[0], str) else nw.Int64())
            col = col.cast(dtype)
        inner_ok = _label_kind_ok(dtype.inner, spec.classes)
        if isinstance(spec.classes[0], int):  # list.contains needs an integer list for integer labels
            inner_ok = dtype.inner.is_integer()
        if not inner_ok:
            msg = f"set column {name!r} holds {dtype.inner} labels but classes are {list(spec.classes)!r}"
            raise TypeError(msg)
        mem = [col.list.contains(c).cast(nw.Float64) for c in spec.classes]
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
            raise BooleanColumnError(msg, column=name)
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


def set_key(spec: SetSpec) -> Hashable:
    return (spec.sets, spec.classes)


def size_row(q: Query, spec: SetSpec) -> str:
    """Row column: the set size ``|C_i|`` (Float64)."""
    if spec.classes is None:
        return _data_size_row(q, spec)
    return q.row(("set_size", set_key(spec)), total(membership_exprs(q, spec)))


def set_covered_row(q: Query, y: str, spec: SetSpec) -> str:
    """Row column: 1.0 where the true label is in the set, else 0.0."""
    if spec.classes is None:
        return _data_covered_row(q, y, spec)
    mem = membership_exprs(q, spec)
    assert spec.classes is not None
    eq = label_exprs(q, y, spec.classes)
    return q.row(("set_covered", y, set_key(spec)), total([e * m for e, m in zip(eq, mem)]))


def size_indicator(q: Query, spec: SetSpec, lo: int, hi: int | None) -> str:
    """Row column: 1.0 where the set size is in ``[lo, hi]`` (``hi`` ``None``: ``>= lo``)."""
    if spec.classes is None:
        data = nw.col(size_row(q, spec))
        inside = data >= lo if hi is None else (data >= lo) & (data <= hi)
        return q.row(("set_size_in", set_key(spec), lo, hi), indicator(inside), inputs=[size_row(q, spec)])
    assert hi is not None
    size = total(membership_exprs(q, spec))
    return q.row(("set_size_in", set_key(spec), lo, hi), ((size >= lo) & (size <= hi)).cast(nw.Float64))


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


def _arrow_list(values: list[Any], name: str, empty_as: str | None = None) -> Any:
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
    if pa.types.is_null(arr.type) or (pa.types.is_list(arr.type) and pa.types.is_null(arr.type.value_type)):
        # no label at all (no rows, every list empty or missing): the elements' type is unknown
        arr = pa.array(cells, type=pa.list_(pa.null() if empty_as is None else getattr(pa, empty_as)()))
    return arr


def arrow_lists(frame: nw.LazyFrame, names: Sequence[str], *, empty_as: str | None = None) -> nw.LazyFrame:
    """Pandas ``object`` columns of Python lists (``names``) as Arrow list columns.

    Tuples, sets and numpy arrays are lists too; missing cells stay missing.
    A column without any element (no rows, or every list empty) becomes a
    list of ``empty_as`` (a pyarrow type name, e.g. ``"int64"`` for integer classes), else of
    nulls.  Returns a new frame (the caller's frame is not modified); other
    backends and other dtypes pass through.
    """
    if not frame.implementation.is_pandas_like():
        return frame
    schema = frame.collect_schema()
    native = frame.to_native()
    # an object column without rows reads as String: it is a list column all the same
    todo = [
        n
        for n in names
        if n in schema
        and (schema[n] == nw.Object or (len(native) == 0 and str(getattr(native[n], "dtype", "")) == "object"))
    ]
    if not todo:
        return frame
    import pandas as pd

    new = {
        n: pd.Series(pd.arrays.ArrowExtensionArray(_arrow_list(native[n].tolist(), n, empty_as)), index=native.index)
        for n in todo
    }
    return nw.from_native(native.assign(**new)).lazy()


# ---------------------------------------------------------------------------
# list columns without classes: the checks of the list and of the label
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
        raise ListColumnError(msg, column=name)
    q.check(f"set column {name!r} has missing values", col.is_null())
    return col


def _same_kind(label: Any, inner: Any) -> bool:
    if inner == nw.Unknown:  # e.g. every list empty
        return True
    strings = (nw.String, nw.Categorical, nw.Enum)
    return any(label == t for t in strings) == any(inner == t for t in strings) and (
        label.is_numeric() == inner.is_numeric()
    )


def _check_data_label(q: Query, y: str, inner: Any) -> None:
    """The true label is of the list elements' kind (number/string) and not missing."""
    col = nw.col(y) if y in q.keys else q.column(y)
    dtype = q.schema[y]
    if not _same_kind(dtype, inner):
        msg = f"label column {y!r} has dtype {dtype} but the sets hold {inner} labels"
        raise TypeError(msg)
    missing = col.is_null() | col.is_nan() if dtype.is_float() else col.is_null()
    q.check(f"label column {y!r} has missing values", missing)


# ---------------------------------------------------------------------------
# list columns without classes, row by row: the set's size and "y in the set"
# ---------------------------------------------------------------------------
def row_names(lst: str, y: str | None) -> tuple[str, str]:
    """Frame columns that :func:`data_rows` adds: the set size and ``y in set`` (Float64)."""
    return f"__cf_set_size[{lst}]", f"__cf_set_in[{lst}][{y}]"


def _normalized(frame: nw.LazyFrame, lst: str, y: str | None) -> tuple[nw.LazyFrame, str, str | None] | None:
    """The list column and ``y`` as comparable columns (``None`` when build will refuse them)."""
    schema = frame.collect_schema()
    dtype = schema.get(lst)
    if not isinstance(dtype, nw.List) or (
        y is not None and (y not in schema or not _same_kind(schema[y], dtype.inner))
    ):
        return None
    lt, yt = "__cf_set_list", "__cf_set_label"
    strings = (nw.String, nw.Categorical, nw.Enum)
    inner, label = dtype.inner, schema[y] if y is not None else None
    if any(inner == t for t in strings[1:]):
        lcol = nw.col(lst).cast(nw.List(nw.String))
    elif y is not None and label is not None and label.is_numeric() and label != inner:
        lcol = nw.col(lst).cast(nw.List(nw.Float64))
    else:
        lcol = nw.col(lst)
    cols = [lcol.alias(lt)]
    if y is not None and label is not None:
        ycol = nw.col(y)
        if any(label == t for t in strings[1:]):
            ycol = ycol.cast(nw.String)
        elif label.is_numeric() and label != inner:
            ycol = ycol.cast(nw.Float64)
        cols.append(ycol.alias(yt))
    return frame.with_columns(*cols), lt, (yt if y is not None else None)


def _arrow_rows(lists: Any, labels: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct non-null labels per row and ``label in set`` (0/1) of an Arrow list array."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    parents = np.asarray(pc.list_parent_indices(lists), dtype=np.int64)
    flat = pc.list_flatten(lists)
    keep = np.asarray(flat.is_valid(), dtype=bool)
    pairs = pd.DataFrame({"p": parents[keep], "v": flat.filter(pa.array(keep)).to_pandas()}).drop_duplicates()
    size = np.bincount(pairs["p"].to_numpy(), minlength=n).astype(float)
    if labels is None:
        return size, np.zeros(n)
    right = pd.Series(np.asarray(labels, dtype=object)[pairs["p"].to_numpy()])
    hit = (pd.Series(pairs["v"].to_numpy(dtype=object)) == right).fillna(False).to_numpy(dtype=bool)
    return size, (np.bincount(pairs["p"].to_numpy()[hit], minlength=n) > 0).astype(float)


def _polars_rows(native: Any, lt: str, yt: str | None, size: str, inside: str) -> Any:
    import polars as pl

    exprs = [pl.col(lt).list.drop_nulls().list.n_unique().cast(pl.Float64).alias(size)]
    if yt is not None:
        exprs.append(pl.col(lt).list.contains(pl.col(yt)).cast(pl.Float64).alias(inside))
    return native.with_columns(exprs)


def _duckdb_rows(native: Any, lt: str, yt: str | None, size: str, inside: str) -> Any:
    import duckdb

    lcol, double = duckdb.ColumnExpression(lt), duckdb.sqltype("DOUBLE")
    distinct = duckdb.FunctionExpression("len", duckdb.FunctionExpression("list_distinct", lcol))
    exprs = [duckdb.StarExpression(), distinct.cast(double).alias(size)]
    if yt is not None:
        hit = duckdb.FunctionExpression("list_contains", lcol, duckdb.ColumnExpression(yt))
        exprs.append(hit.cast(double).alias(inside))
    return native.select(*exprs)


def _spark_rows(native: Any, lt: str, yt: str | None, size: str, inside: str) -> Any:
    from pyspark.sql import functions as F

    cols = {size: F.size(F.array_distinct(F.array_compact(F.col(lt)))).cast("double")}
    if yt is not None:
        cols[inside] = F.array_contains(F.col(lt), F.col(yt)).cast("double")
    return native.withColumns(cols)


def _arrow_backed_rows(native: Any, lt: str, yt: str | None, size: str, inside: str) -> Any:
    """pandas (an Arrow list column) or a pyarrow Table: pyarrow compute and numpy."""
    import pyarrow as pa

    table = native if isinstance(native, pa.Table) else None
    lists = table.column(lt) if table is not None else pa.array(native[lt])
    labels = None
    if yt is not None:
        labels = table.column(yt).to_pylist() if table is not None else native[yt].astype(object).tolist()
    sizes, hits = _arrow_rows(lists, labels, len(native))
    new = {size: sizes, **({inside: hits} if yt is not None else {})}
    if table is None:
        return native.assign(**new)
    for name, values in new.items():
        table = table.append_column(name, pa.array(values))
    return table


def _native_rows(frame: nw.LazyFrame, lt: str, yt: str | None, size: str, inside: str) -> nw.LazyFrame:
    """Add ``size`` and ``inside`` with the backend's own list functions (narwhals has no list-in-column)."""
    impl, native = frame.implementation, frame.to_native()
    if impl.is_polars():
        return nw.from_native(_polars_rows(native, lt, yt, size, inside))
    if impl.is_duckdb():
        return nw.from_native(_duckdb_rows(native, lt, yt, size, inside))
    if impl.is_pyspark() or impl.is_pyspark_connect():
        return nw.from_native(_spark_rows(native, lt, yt, size, inside))
    if impl.is_pandas() or impl.is_pyarrow():
        return nw.from_native(_arrow_backed_rows(native, lt, yt, size, inside)).lazy()
    msg = (
        f"a list column without classes= is read with the backend's own list functions, "
        f"which conformal-frames does not call on {impl}; pass classes= (the possible labels) "
        "or collect the data to pandas or polars first"
    )
    raise BackendLimitError(msg, backend=backend_name(impl))


def data_rows(frame: nw.LazyFrame, lst: str, y: str | None) -> nw.LazyFrame:
    """Add the columns of :func:`row_names`: each row's number of distinct labels and
    (with ``y``) 1.0 where ``y`` is among them.

    Returns ``frame`` unchanged when the columns are not a list column and a
    label of the same kind: the metric's build then refuses them with the
    message of every set metric.
    """
    size, inside = row_names(lst, y)
    names = frame.collect_schema().names()
    if size in names and (y is None or inside in names):  # another metric of the call added them
        return frame
    ready = _normalized(frame.drop(*[c for c in (size, inside) if c in names]), lst, y)
    if ready is None:
        return frame
    normalized, lt, yt = ready
    out = _native_rows(normalized, lt, yt, size, inside)
    return out.drop(lt, *([yt] if yt is not None else []))


def _data_size_row(q: Query, spec: SetSpec) -> str:
    """Row column of the set size of a list column without classes (checked; see :func:`data_rows`)."""
    assert isinstance(spec.sets, str)
    _list_column(q, spec.sets)
    return q.row(("set_size_data", spec.sets), q.column(row_names(spec.sets, None)[0]).fill_null(0.0))


def _data_covered_row(q: Query, y: str, spec: SetSpec) -> str:
    """Row column: 1.0 where ``y`` is in the row's list (no classes; see :func:`data_rows`)."""
    assert isinstance(spec.sets, str)
    _list_column(q, spec.sets)
    _check_data_label(q, y, q.schema[spec.sets].inner)
    name = row_names(spec.sets, y)[1]
    return q.row(("set_covered_data", y, spec.sets), q.column(name).fill_null(0.0))


def prepared(frame: nw.LazyFrame, spec: SetSpec, y: str | None) -> nw.LazyFrame:
    """The frame a set reader needs: Arrow lists for pandas object columns, and
    without classes the per-row columns of :func:`data_rows`."""
    if not isinstance(spec.sets, str):
        return frame
    empty_as = None if spec.classes is None else "string" if isinstance(spec.classes[0], str) else "int64"
    frame = arrow_lists(frame, [spec.sets], empty_as=empty_as)
    return data_rows(frame, spec.sets, y) if spec.classes is None else frame


class SetMetric(Metric):
    """A metric of prediction sets: a pandas list column of dtype object is converted
    first; without classes the per-row columns of :func:`data_rows` are added."""

    spec: SetSpec

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        return prepared(frame, self.spec, getattr(self, "y", None))
