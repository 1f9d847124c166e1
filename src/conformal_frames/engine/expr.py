"""Expression and frame helpers every family shares (one implementation each).

Group aggregation (:func:`aggregate`), windows (:func:`over`), indicators and
sums of expressions, the sort of a result table (:func:`sort_result`), the
union of parts (:func:`stack`), table handles (:class:`TableRef`), ordered
cells (:class:`Cells`, :func:`ordered_cells`) and a null-safe join on the
group keys (:func:`join_keys`).  Backend branches live here, not in the
families.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import narwhals.stable.v2 as nw

from conformal_frames.engine.frames import normalized_keys

__all__ = [
    "Cells",
    "FinalizeFn",
    "TableFn",
    "TableRef",
    "aggregate",
    "indicator",
    "join_keys",
    "ordered_cells",
    "over",
    "polars_in_memory",
    "running_total",
    "sort_result",
    "spark_call_sites_off",
    "stack",
    "total",
]


# ---------------------------------------------------------------------------
# engine helpers shared by every family (one implementation each)
# ---------------------------------------------------------------------------
def aggregate(frame: nw.LazyFrame, keys: Sequence[str], aggs: Sequence[nw.Expr]) -> nw.LazyFrame:
    """``group_by(keys).agg(aggs)``, or one row of ``aggs`` when there are no keys."""
    return frame.group_by(*keys).agg(*aggs) if keys else frame.select(*aggs)


def sort_result(frame: nw.LazyFrame, *by: str, nulls_last: bool = False) -> nw.LazyFrame:
    """A result table (a row per group, bin or level: small) sorted by ``by``.

    On Spark in one partition (``coalesce(1).sortWithinPartitions``): a global
    sort first samples its input in a job of its own to cut it into ranges,
    about 0.1 s per query whatever the size (local mode).  A pandas Arrow
    dictionary key, which pandas cannot sort, becomes its value type (see
    :func:`~conformal_frames.engine.frames.normalized_keys`).
    """
    if not by:
        return frame
    if frame.implementation.is_pandas_like():
        frame = normalized_keys(frame, by)
    if frame.implementation in (nw.Implementation.PYSPARK, nw.Implementation.PYSPARK_CONNECT):
        from pyspark.sql import functions as F  # a Spark frame: pyspark is installed

        order = [F.asc_nulls_last(c) if nulls_last else F.asc_nulls_first(c) for c in by]
        return nw.from_native(frame.to_native().coalesce(1).sortWithinPartitions(*order))
    return frame.sort(*by, nulls_last=nulls_last)


_CALL_SITES_LOCK = threading.Lock()
#: [depth of nested spark_call_sites_off blocks, the saved setting]
_CALL_SITES: list[Any] = [0, None]


@contextlib.contextmanager
def spark_call_sites_off() -> Iterator[None]:
    """Inside: PySpark (classic, >= 4.0) does not capture a call site per Column operation.

    PySpark 4 records, for every Column method and ``functions`` call, the
    Python call site of the operation in the JVM (for its error messages):
    about six py4j round trips each (the active session, the
    ``stackTracesInDataFrameContext`` setting, a reflection lookup, set and
    clear), two thirds of the round trips of building a wide query (issue 38
    item 9: 52,000 round trips without it, 18,300 with, for the trial's 23
    metrics).  The sites
    it records there point into narwhals, not at the user's line.  This turns
    off PySpark's Python-side switch (its cache of
    ``spark.python.sql.dataFrameDebugging.enabled``) while the library
    builds, and puts it back after; no Spark setting changes, and the query
    built is the same.  Nested and concurrent blocks restore the setting
    when the last one ends.  Nothing happens on other PySpark versions.
    """
    utils: Any = sys.modules.get("pyspark.errors.utils")
    if utils is None or not hasattr(utils, "_enable_debugging_cache"):
        yield
        return
    with _CALL_SITES_LOCK:
        if _CALL_SITES[0] == 0:
            _CALL_SITES[1] = utils._enable_debugging_cache
        _CALL_SITES[0] += 1
        utils._enable_debugging_cache = False
    try:
        yield
    finally:
        with _CALL_SITES_LOCK:
            _CALL_SITES[0] -= 1
            if _CALL_SITES[0] == 0:
                utils._enable_debugging_cache = _CALL_SITES[1]


@functools.cache
def polars_in_memory() -> dict[str, Any]:
    """``collect`` options for polars' in-memory engine (polars >= 1.25 names its engines);
    empty on older polars, whose default is that engine."""
    import polars as pl  # a polars frame is being collected

    major, minor = (int(x) for x in pl.__version__.split(".")[:2])
    return {"engine": "in-memory"} if (major, minor) >= (1, 25) else {}


def over(expr: nw.Expr, partition: Sequence[str], *, order_by: str | Sequence[str] | None = None) -> nw.Expr:
    """``expr`` as a window over ``partition`` (the whole frame when empty)."""
    if order_by is not None:
        return expr.over(*partition, order_by=order_by)
    return expr.over(*partition) if partition else expr


def indicator(condition: nw.Expr) -> nw.Expr:
    """1.0 where ``condition`` holds, else 0.0 (also where it is null: such rows
    are invalid and never counted).  polars computes it about twice as fast as
    a cast of the boolean to Float64."""
    return nw.when(condition).then(1.0).otherwise(0.0)


def total(exprs: Iterable[nw.Expr]) -> nw.Expr:
    """The row-wise sum ``e1 + e2 + ...`` of one or more expressions."""
    return functools.reduce(operator.add, exprs)


def stack(frame: nw.LazyFrame, keys: Sequence[str], parts: Sequence[Mapping[str, nw.Expr]]) -> nw.LazyFrame:
    """The rows of ``frame``, each repeated as one row per part: ``keys`` plus ``{column: expr}`` of the part.

    A union of one ``select`` per part; on Spark, where such a union computes
    the frame once per part (a whole query each), the same rows in one pass
    (an unpivot of one tag column per part).  Every part has the same columns.
    """
    selects = [frame.select(*keys, *[e.alias(c) for c, e in part.items()]) for part in parts]
    if len(parts) == 1 or not frame.implementation.is_spark_like():
        return nw.concat(selects, how="vertical")
    tags = [f"__cf_part{m}" for m in range(len(parts))]
    index = frame.collect_schema().names()
    tagged = frame.with_columns(*[nw.lit(m, nw.Int64).alias(t) for m, t in enumerate(tags)])
    rows = tagged.unpivot(on=tags, index=index, variable_name="__cf_tag", value_name="__cf_part")
    part = nw.col("__cf_part")
    columns = []
    for c in parts[0]:
        expr = parts[-1][c]
        for m in range(len(parts) - 2, -1, -1):
            expr = nw.when(part == m).then(parts[m][c]).otherwise(expr)
        columns.append(expr.alias(c))
    return rows.select(*keys, *columns)


@dataclass(frozen=True)
class TableRef:
    """Handle to the columns of a sub-query registered with :meth:`Query.table`.

    The table function names its result columns ``ref.name("x")``; metrics
    read them as ``ref.col("x")``.  Names are private to the table.
    """

    prefix: str

    def name(self, column: str) -> str:
        return f"{self.prefix}{column}"

    def col(self, column: str) -> nw.Expr:
        return nw.col(self.name(column))


#: ``fn(rows, keys, ref)``: a frame of ``keys`` plus columns named ``ref.name(...)``
TableFn = Callable[[nw.LazyFrame, list[str], TableRef], nw.LazyFrame]
#: ``fn(table, ref)``: the aggregated table with columns named ``ref.name(...)`` added
FinalizeFn = Callable[[nw.LazyFrame, TableRef], nw.LazyFrame]


@dataclass(frozen=True)
class Cells:
    """A table that reads the rows only through per-(group, ``order``) sums.

    Recorded by :meth:`Query.cells`: its table function groups the rows by
    ``(keys, order)`` and sums the row columns ``sums`` first, so it gives the
    same result on rows that are already such sums (one row per cell, or
    several to be added).  That makes the table mergeable: see
    :func:`conformal_frames.summarize`.
    """

    order: str
    sums: tuple[str, ...]


def running_total(column: str) -> str:
    """The name :func:`ordered_cells` gives the running total of the sum ``column``."""
    return f"{column}_cum"


def ordered_cells(
    rows: nw.LazyFrame, keys: Sequence[str], order: str, sums: Sequence[str], *, running: Sequence[str] = ()
) -> nw.LazyFrame:
    """One row per (group, distinct ``order`` value): the sums of the columns ``sums``.

    The sums are Float64 (a column of ones counts rows).  For each column of
    ``running`` (some of ``sums``), :func:`running_total` names its running
    total: the cumulative sum of the cells over the group ordered by
    ``order``, ties aggregated first (a tie counts whole, at its value).  The
    cast is its own step before the ordered window: on pandas,
    ``cast(...).cum_sum().over(order_by=...)`` ignores ``order_by``.
    """
    if running and not keys and rows.implementation.is_polars():
        return _polars_ordered_cells(rows, order, sums, running)
    cells = rows.group_by(*keys, order).agg(*[nw.col(c).sum() for c in sums])
    cells = cells.with_columns(*[nw.col(c).cast(nw.Float64) for c in sums])
    if not running:
        return cells
    return cells.with_columns(
        *[over(nw.col(c).cum_sum(), keys, order_by=order).alias(running_total(c)) for c in running]
    )


def _polars_ordered_cells(rows: nw.LazyFrame, order: str, sums: Sequence[str], running: Sequence[str]) -> nw.LazyFrame:
    """Ungrouped :func:`ordered_cells` on polars: one sort instead of a hash aggregation of every distinct value.

    The rows are sorted by ``order``; the running total of each sum column is
    its cumulative sum over the rows, read at the last row of each run of
    tied values (a tie counts whole, at its value: the same cells as the
    aggregation).  A cell's sum is the difference of consecutive running
    totals (exact for counts).  About 2x faster at 2e6 distinct values
    (docs/performance.md).  Grouped, the per-group windows this needs cost
    more than the aggregation saves, so groups keep the aggregation.
    The sort is single-threaded and stable (tied rows keep their order, so
    the running sums add in a defined order): polars' multithreaded sort took
    more CPU and wall time on the shared 2 cores (5e6 rows: 2.55x -> 2.30x
    one sort of the column, wall).
    """
    import polars as pl  # only reached for polars input

    tmp = {c: f"__cf_cells_{i}" for i, c in enumerate(sums)}
    end = (pl.int_range(pl.len()) == pl.len() - 1) | pl.col(order).ne_missing(pl.col(order).shift(-1))
    lf = (
        rows.to_native()
        .select(order, *[pl.col(c).cast(pl.Float64).alias(tmp[c]) for c in sums])
        .sort(order, nulls_last=True, multithreaded=False, maintain_order=True)
        .with_columns(*[pl.col(t).cum_sum() for t in tmp.values()])
        .filter(end)
    )
    cells = lf.select(
        order,
        *[(pl.col(t) - pl.col(t).shift(1).fill_null(0.0)).alias(c) for c, t in tmp.items()],
        *[pl.col(tmp[c]).alias(running_total(c)) for c in running],
    )
    return nw.from_native(cells)


def _filled(key: nw.Expr, dtype: Any) -> nw.Expr:
    """``key`` without nulls, a value of one type on both sides of a join (nulls told apart by an indicator)."""
    if dtype.is_numeric():
        return key.fill_null(0)
    if dtype == nw.Boolean:
        return key.fill_null(False)
    if dtype != nw.String:  # categorical, dates, ...: compared as text
        key = key.cast(nw.String)
    return key.fill_null("")


_FrameT = TypeVar("_FrameT", nw.LazyFrame, nw.DataFrame)


def join_keys(left: _FrameT, right: _FrameT, keys: Sequence[str], *, how: Literal["left", "inner"] = "left") -> _FrameT:
    """``left.join(right, on=keys, how=how)`` with a null key equal to a null key.

    A null group key forms a group of its own (see :func:`null_keys`): the
    per-group tables join back on it.  Each key joins as a filled value and
    an is-null indicator; the result has ``left``'s key columns (``right``'s
    are dropped).
    """
    if not keys:
        return left.join(right, how="cross")
    schema = left.collect_schema()
    on: list[str] = []
    made: list[nw.Expr] = []
    for i, k in enumerate(keys):
        value, null = f"__cf_jv{i}", f"__cf_jn{i}"
        made += [_filled(nw.col(k), schema[k]).alias(value), nw.col(k).is_null().cast(nw.Int8).alias(null)]
        on += [value, null]
    joined = left.with_columns(*made).join(right.with_columns(*made).drop(*keys), on=on, how=how)
    return joined.drop(*on)
