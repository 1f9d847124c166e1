"""The one core: compile metrics into a single narwhals query.

Every metric is split into *sufficient statistics* (row-level columns and
elementary aggregations per group) and a *finalize* step (expressions over the
aggregated columns).  :func:`evaluate` merges the statistics of all metrics of
one call into a single query:

1. one ``select`` of the group keys and every row-level column the metrics ask
   for (shared columns are registered once, by a structural key), then
   ``with_columns`` layers for rows that use other rows: each row declares its
   ``inputs`` and its layer follows from them;
2. one ``group_by(keys).agg(...)`` of elementary aggregations
   (``sum``/``min``/``max``/``len``), including the counts of invalid rows;
3. optional *tables*: sub-queries over the same row-level frame that need a
   second aggregation level (size-stratified bins, calibration bins, ordered
   cumulative sums), joined back on the keys; each is addressed through the
   :class:`TableRef` its registration returns;
4. finalize expressions over the aggregated columns;
5. optional numpy steps on the aggregated table (one row per group) for special
   functions with no closed form, and per-group numpy steps for metrics that
   need all rows of a group at once (HSIC).

Steps 1-4 stay lazy on every backend.  Step 5 stays lazy on polars (through
``map_batches``) and is eager-only elsewhere, with an error naming the backend.
Eager pandas input is run by polars when polars is installed and the round
trip is exact (:mod:`conformal_frames.engine._pandas_polars`): the same frame as the
pandas path, faster.
The contributor's walk-through is the docs page "How a metric is built".
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import operator
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._validate import validate_fields
from conformal_frames.errors import ColumnNotFoundError
from conformal_frames.results import TestResult

__all__ = [
    "Cells",
    "FinalizeFn",
    "GroupFn",
    "InvalidPolicy",
    "Metric",
    "NumpyFn",
    "Query",
    "TableFn",
    "TableRef",
    "Weighting",
    "aggregate",
    "indicator",
    "no_counts",
    "no_weights",
    "ordered_cells",
    "over",
    "polars_in_memory",
    "running_total",
    "sort_result",
    "stack",
    "total",
]

ResultKind = Literal["score", "test", "table"]
#: what happens to rows that fail a check (see :func:`evaluate`)
InvalidPolicy = Literal["raise", "drop", "null"]
NumpyFn = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
GroupFn = Callable[[np.ndarray, int, dict[str, np.ndarray]], np.ndarray]
T = TypeVar("T")

_INVALID = "__cf_invalid"
_DROPPED = "__cf_dropped"
_N = "__cf_n"
_GID = "__cf_gid"
_VALID = "__cf_valid"
#: columns every evaluation may add next to the metrics' outputs
RESERVED = ("n", "n_invalid", "n_dropped")
#: integers beyond this lose precision when cast to Float64
_EXACT_INT = 2**53
_INF = float("inf")


# ---------------------------------------------------------------------------
# engine helpers shared by every family (one implementation each)
# ---------------------------------------------------------------------------
def aggregate(frame: nw.LazyFrame, keys: Sequence[str], aggs: Sequence[nw.Expr]) -> nw.LazyFrame:
    """``group_by(keys).agg(aggs)``, or one row of ``aggs`` when there are no keys."""
    return frame.group_by(*keys).agg(*aggs) if keys else frame.select(*aggs)


def normalized_keys(lf: nw.LazyFrame, keys: Sequence[str]) -> nw.LazyFrame:
    """``lf`` with its group keys as every engine groups them (pandas only; a new frame).

    pandas with Arrow dtypes groups a float key's ``-0.0`` apart from ``0.0``
    (every other engine forms one group: the key becomes ``x + 0.0``, which is
    ``0.0`` for both) and cannot sort an Arrow dictionary key (what
    ``polars.DataFrame.to_pandas(use_pyarrow_extension_array=True)`` makes of
    a Categorical: the key becomes its value type).  The caller's frame is
    not modified.
    """
    if not keys or not lf.implementation.is_pandas_like():
        return lf
    import pandas as pd

    native = lf.to_native()
    if not isinstance(native, pd.DataFrame):  # pragma: no cover - modin / cuDF keep their own ways
        return lf
    changed: dict[str, Any] = {}
    for k in keys:
        if k not in native.columns:
            continue  # reported by the plan's key checks
        column = native[k]
        dtype = column.dtype
        arrow = getattr(dtype, "pyarrow_dtype", None) if isinstance(dtype, pd.ArrowDtype) else None
        if arrow is not None and getattr(arrow, "value_type", None) is not None and str(arrow).startswith("dictionary"):
            changed[k] = column.astype(pd.ArrowDtype(arrow.value_type))
        elif arrow is not None and str(arrow) in ("double", "float", "halffloat"):
            changed[k] = column + 0.0  # -0.0 + 0.0 == 0.0
    if not changed:
        return lf
    copy = native.copy(deep=False)
    for k, column in changed.items():
        copy[k] = column
    return nw.from_native(copy).lazy()


def sort_result(frame: nw.LazyFrame, *by: str, nulls_last: bool = False) -> nw.LazyFrame:
    """A result table (a row per group, bin or level: small) sorted by ``by``.

    On Spark in one partition (``coalesce(1).sortWithinPartitions``): a global
    sort first samples its input in a job of its own to cut it into ranges,
    about 0.1 s per query whatever the size (local mode).  A pandas Arrow
    dictionary key, which pandas cannot sort, becomes its value type (see
    :func:`normalized_keys`).
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
    """
    import polars as pl  # only reached for polars input

    tmp = {c: f"__cf_cells_{i}" for i, c in enumerate(sums)}
    end = (pl.int_range(pl.len()) == pl.len() - 1) | pl.col(order).ne_missing(pl.col(order).shift(-1))
    lf = (
        rows.to_native()
        .select(order, *[pl.col(c).cast(pl.Float64).alias(tmp[c]) for c in sums])
        .sort(order, nulls_last=True)
        .with_columns(*[pl.col(t).cum_sum() for t in tmp.values()])
        .filter(end)
    )
    cells = lf.select(
        order,
        *[(pl.col(t) - pl.col(t).shift(1).fill_null(0.0)).alias(c) for c, t in tmp.items()],
        *[pl.col(tmp[c]).alias(running_total(c)) for c in running],
    )
    return nw.from_native(cells)


@dataclass
class _Row:
    name: str
    expr: nw.Expr
    level: int


@dataclass
class _Value:
    name: str
    expr: nw.Expr
    level: int


@dataclass
class _Check:
    #: column of the check's row count in the frame :meth:`~conformal_frames.engine.Plan.check_counts` returns
    row: str
    bad: nw.Expr
    #: the offending value shown in the error (rows where ``bad``), if any
    example: nw.Expr | None = None
    #: appended to the message when the check fails in more than half of the rows (the likely fix)
    hint: str | None = None


@dataclass
class _NumpyStep:
    inputs: list[str]
    outputs: list[str]
    fn: NumpyFn
    what: str
    #: outputs that are Boolean columns (the step returns 0/1, NaN = False)
    boolean: tuple[str, ...] = ()


@dataclass
class _GroupStep:
    rows: list[str]
    output: str
    fn: GroupFn
    what: str


def _did_you_mean(name: str, names: Iterable[Any]) -> str:
    """``"; did you mean 'y'?"`` for a near miss (case-insensitive), else ``""``."""
    candidates = [str(c) for c in names]
    folded = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(name.lower(), list(folded), n=1, cutoff=0.6)
    return f"; did you mean {folded[close[0]]!r}?" if close else ""


def _not_found(what: str, name: str, schema: Iterable[Any], role: str = "") -> ColumnNotFoundError:
    available = ", ".join(repr(c) for c in schema)
    return ColumnNotFoundError(
        f"{what} {name!r}{role} not found; available columns: {available}{_did_you_mean(name, schema)}"
    )


@dataclass
class Query:
    """What one evaluation needs: row columns, aggregations, checks, steps.

    Metrics call the registration methods from :meth:`Metric.build`; names of
    registered columns are internal (``__cf_*``) and shared between metrics
    that register the same structural key.
    """

    schema: Mapping[str, Any]
    keys: list[str]
    #: internal names of the group keys in the row-level and aggregated frames
    group: list[str] = field(default_factory=list)
    rows: dict[Hashable, _Row] = field(default_factory=dict)
    aggs: dict[Hashable, tuple[str, nw.Expr]] = field(default_factory=dict)
    checks: dict[str, _Check] = field(default_factory=dict)
    #: check message -> aggregated column with an offending value (see :meth:`check`)
    examples: dict[str, str] = field(default_factory=dict)
    tables: dict[Hashable, tuple[TableFn, TableRef]] = field(default_factory=dict)
    finalizers: dict[Hashable, tuple[FinalizeFn, TableRef]] = field(default_factory=dict)
    #: columns of the aggregated table written before the finalizers (see :meth:`value`)
    values: dict[Hashable, _Value] = field(default_factory=dict)
    numpy_steps: list[_NumpyStep] = field(default_factory=list)
    group_steps: dict[str, _GroupStep] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    #: state shared between the builds of one query (see :meth:`shared`)
    state: dict[Hashable, Any] = field(default_factory=dict)
    #: table key -> its cells (tables that read the rows through per-cell sums)
    cell_tables: dict[Hashable, Cells] = field(default_factory=dict)
    #: number of window expressions registered with :meth:`over`
    windows: int = 0
    #: output column -> its declared dtype (:meth:`Metric.output_dtypes`); the others are Float64
    output_dtypes: dict[str, Any] = field(default_factory=dict)
    #: the row column of the ``counts=`` of the query's metrics (see :meth:`counted`): ``n`` sums it
    count_row: str | None = None
    #: check message of a positive-total rule -> the aggregated total it is about (see
    #: :meth:`weighting`): a rule on the group's total, so merged summaries check the merged total
    totals: dict[str, str] = field(default_factory=dict)
    #: check message of a positive-total rule -> whether an input row is positive (for ``invalid="drop"``:
    #: the rule reads the rows the other checks leave, see :meth:`Plan.aggregate`)
    positive: dict[str, nw.Expr] = field(default_factory=dict)
    #: the aggregated number of input rows when ``n`` counts represented rows (``counts=``): the
    #: rows a positive-total rule makes invalid are input rows, as every invalid-row count
    physical_n: str | None = None

    def __post_init__(self) -> None:
        if not self.group:
            self.group = [self._internal(f"__cf_k{i}") for i in range(len(self.keys))]

    def _internal(self, name: str) -> str:
        """``name``, or ``name`` with leading underscores added until it is no input column.

        Metrics refer to row columns by name in their structural keys, next to input
        column names: an internal name never equals a column of the frame (a column
        may be called ``"__cf_r0"``), so a key reads unambiguously (see
        ``summaries._canonical_keys``).
        """
        columns = self.schema.keys()  # the real columns (a guessed schema claims every name)
        while name in columns:
            name = "_" + name
        return name

    #: aggregated column counting the invalid rows of each group (0 = valid);
    #: a numpy step may take it as an input
    invalid: ClassVar[str] = _INVALID
    #: aggregated column of the row count (:attr:`n`); a numpy step may take it as an input
    count: ClassVar[str] = _N

    # -- inputs -----------------------------------------------------------
    def column(self, name: str) -> nw.Expr:
        """An input column, checked to exist (any dtype)."""
        if not isinstance(name, str):
            msg = f"column names must be strings, got {name!r} ({type(name).__name__})"
            raise TypeError(msg)
        if name not in self.schema:
            raise _not_found("column", name, self.schema)
        if name in self.keys:
            msg = f"column {name!r} is both a group key (by=) and a metric input"
            raise ValueError(msg)
        self.used.add(name)
        return nw.col(name)

    def number(self, name: str) -> nw.Expr:
        """A numeric input column as Float64; missing/NaN/inf rows are invalid.

        64-bit integers beyond 2^53 cannot be represented exactly as Float64:
        those rows are invalid too (never a silently rounded value).
        """
        expr = self.column(name)
        dtype = self.schema[name]
        if not dtype.is_numeric():
            msg = f"column {name!r} must be numeric, found dtype {dtype}; cast it to a float or integer type first"
            raise TypeError(msg)
        if dtype in (nw.Int64, nw.UInt64, nw.Int128, nw.UInt128):
            big = expr > _EXACT_INT
            if dtype.is_signed_integer():
                big = big | (expr < -_EXACT_INT)
            self.check(
                f"column {name!r} has integers beyond 2^53 in absolute value, which Float64 cannot hold exactly",
                big,
            )
            expr = nw.when(~big).then(expr)  # never cast them (pyarrow refuses; others would round)
        value = expr if dtype == nw.Float64 else expr.cast(nw.Float64)  # each node costs query-building time
        # ~(|x| < inf) is ~is_finite(x) (NaN compares false everywhere); polars computes it twice as fast;
        # an integer is never NaN or infinite once cast (a value beyond 2^53 is null above)
        missing = value.is_null() if dtype.is_integer() else value.is_null() | ~(value.abs() < _INF)
        self.check(f"column {name!r} has missing (null/NaN) or infinite values", missing)
        return value

    # -- registration -----------------------------------------------------
    def row(self, key: Hashable, expr: nw.Expr, *, inputs: Sequence[str] = ()) -> str:
        """Register a row-level column; returns its (internal) name.

        ``inputs`` are the row columns (names returned by earlier ``row``
        calls) that ``expr`` uses.  A row without inputs is computed from the
        frame's columns (:meth:`column`, :meth:`number`); a row with inputs
        uses row columns only (register an input column as a row first, e.g.
        ``q.row(("value", name), q.number(name))``): the frame's own columns
        are not carried along, so a user column may have any name.  A row is
        computed after its inputs: the ``with_columns`` layers of the row
        frame follow from the declarations.  A row that uses a window (:meth:`over`) declares at
        least one input (the group keys exist from the second layer on).
        """
        if key not in self.rows:
            self.rows[key] = _Row(self._internal(f"__cf_r{len(self.rows)}"), expr, self._level(inputs))
        return self.rows[key].name

    def _level(self, inputs: Sequence[str]) -> int:
        levels = {r.name: r.level for r in self.rows.values()}
        unknown = [i for i in inputs if i not in levels and i not in self.group]
        if unknown:
            msg = f"inputs {unknown!r} are not registered row columns"
            raise ValueError(msg)
        return max((levels.get(i, 0) + 1 for i in inputs), default=0)

    def over(self, expr: nw.Expr, *within: str, order_by: str | None = None) -> nw.Expr:
        """``expr`` as a window over the group (and the row columns ``within``),
        ordered by the row column ``order_by`` if given."""
        self.windows += 1
        return over(expr, [*self.group, *within], order_by=order_by)

    def agg(self, how: Literal["sum", "min", "max"], row_name: str) -> str:
        """Register an elementary aggregation of a row column; returns its name."""
        key = (how, row_name)
        if key not in self.aggs:
            expr = getattr(nw.col(row_name), how)()
            self.aggs[key] = (f"__cf_a{len(self.aggs)}", expr)
        return self.aggs[key][0]

    def sum(self, row_name: str) -> nw.Expr:
        return nw.col(self.agg("sum", row_name))

    def min(self, row_name: str) -> nw.Expr:
        return nw.col(self.agg("min", row_name))

    def max(self, row_name: str) -> nw.Expr:
        return nw.col(self.agg("max", row_name))

    @property
    def n(self) -> nw.Expr:
        """Number of rows in the group (the valid rows with ``invalid="drop"``)."""
        return nw.col(_N)

    def check(self, message: str, bad: nw.Expr, *, example: nw.Expr | None = None, hint: str | None = None) -> None:
        """Rows where ``bad`` is true are invalid.

        ``bad`` is an expression of the frame's input columns (not of row
        columns).  What an invalid row does follows the evaluation's
        ``invalid=`` policy: ``"raise"``: a ValueError ``"<message> in <count>
        rows"`` (or the message with ``{rows}`` replaced by the count);
        ``"null"``: the group's metric columns are null and ``n_invalid``
        counts the rows; ``"drop"``: the row is left out (``n_dropped``).
        With ``example`` (an expression, e.g. the offending column), the error
        also names the smallest offending value: ``"..., e.g. 7"``.  With
        ``hint``, a check failing in more than half of the rows names the
        likely fix: ``"... in 9 of 10 rows: are lo and hi swapped? ..."``.
        """
        if message not in self.checks:
            # the main aggregation counts the rows failing any check; the
            # count of each check is computed when one fails (Plan.check_counts)
            number = len(self.checks)
            shown = nw.when(bad).then(example) if example is not None else None
            self.checks[message] = _Check(f"__cf_c{number}", bad, shown, hint)
            if shown is not None:
                self.examples[message] = f"__cf_e{number}"

    def table(self, key: Hashable, fn: TableFn) -> TableRef:
        """A sub-query ``fn(rows, keys, ref)`` over the row-level frame.

        It returns the group ``keys`` plus columns named ``ref.name(...)``,
        joined to the aggregated table; metrics read them as ``ref.col(...)``.
        Registering the same ``key`` again returns the same handle.  Prefer
        main-aggregation statistics (:meth:`sum` ...) plus finalize
        expressions where the math allows: a table is a second pass over the
        rows, and polars caches the shared row frame in memory when a query
        uses it twice (streaming then holds the whole input).  A table that
        sorts the rows by a column is :meth:`cells` (mergeable).
        """
        if key not in self.tables:
            self.tables[key] = (fn, TableRef(f"__cf_t{len(self.tables)}_"))
        return self.tables[key][1]

    def cells(
        self,
        key: Hashable,
        fn: TableFn,
        *,
        order: str,
        sums: Sequence[str],
        running: Sequence[str] | None = None,
    ) -> TableRef:
        """A sort-based table: ``fn(cells, keys, ref)`` over the ordered cells of the rows.

        ``cells`` is :func:`ordered_cells` of the rows: one row per (group,
        distinct value of the row column ``order``) with the cell sums of the
        row columns ``sums`` (under their own names) and the running totals
        of ``running`` (default: all of ``sums``), named by
        :func:`running_total`.  ``fn`` aggregates them to one row per group,
        columns named ``ref.name(...)`` as for :meth:`table`.  The table is
        mergeable by construction (:class:`Cells`): :func:`~conformal_frames.summarize`
        keeps the cells and finalize sums them again.
        """
        sums = tuple(sums)
        cum = sums if running is None else tuple(running)

        def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
            return fn(ordered_cells(rows, keys, order, sums, running=cum), keys, ref)

        self.cell_tables.setdefault(key, Cells(order, sums))
        return self.table(key, build)

    def shared(self, key: Hashable, factory: Callable[[], T]) -> T:
        """State shared by the builds of one query, created once by ``factory``.

        E.g. the KS and Kuiper tests share one cumulative table; each adds
        the p-value it needs to a set that the table function reads when the
        query is compiled (after every build).
        """
        if key not in self.state:
            self.state[key] = factory()
        value: T = self.state[key]
        return value

    def value(self, expr: nw.Expr, *, key: Hashable = None, inputs: Sequence[str] = ()) -> str:
        """Register a column of the aggregated table (one row per group); returns its name.

        ``expr`` reads aggregated columns (:meth:`sum`, :attr:`n`, table
        columns) and the values named in ``inputs``; a value is written one
        ``with_columns`` level above its inputs, before the finalizers and the
        outputs.  An expression that reuses a value then reads a column:
        narwhals writes ``x / y`` on Spark as a ``CASE`` with ``x`` in four
        places (a clip or a square root: two), so a value inlined into nested
        arithmetic grows the plan exponentially (a weighted Wilson interval:
        180 KB of plan, seconds to analyse and to compile).  ``key``: a
        structural key shared by the metrics that need the same value
        (default: a value of its own).
        """
        if key is None:
            key = ("__value", len(self.values))
        if key not in self.values:
            levels = {v.name: v.level for v in self.values.values()}
            level = max((levels[i] + 1 for i in inputs if i in levels), default=0)
            self.values[key] = _Value(f"__cf_v{len(self.values)}", expr, level)
        return self.values[key].name

    def with_values(self, table: _FrameT, *first: nw.Expr) -> _FrameT:
        """The aggregated ``table`` with the :meth:`value` columns: one ``with_columns`` per level.

        ``first``: more columns of the aggregated table, written with the first level.
        """
        levels: dict[int, list[nw.Expr]] = {0: list(first)} if first else {}
        for v in self.values.values():
            levels.setdefault(v.level, []).append(v.expr.alias(v.name))
        for level in sorted(levels):
            table = table.with_columns(*levels[level])
        return table

    def finalize(self, key: Hashable, fn: FinalizeFn) -> TableRef:
        """A multi-step finalize: ``fn(table, ref) -> table`` adds columns named
        ``ref.name(...)`` to the aggregated table (one row per group) before the
        output expressions, e.g. a p-value series computed in several
        ``with_columns`` steps; metrics read them as ``ref.col(...)``."""
        if key not in self.finalizers:
            self.finalizers[key] = (fn, TableRef(f"__cf_f{len(self.finalizers)}_"))
        return self.finalizers[key][1]

    def numpy(
        self, inputs: list[str], outputs: list[str], fn: NumpyFn, *, what: str, boolean: Sequence[str] = ()
    ) -> None:
        """A numpy step over the aggregated table (one row per group).

        ``inputs`` are aggregated columns (e.g. ``q.agg(...)`` names, or
        :attr:`invalid`); ``outputs`` are output columns the metric's
        :meth:`Metric.build` returns as ``None``.  Outputs named in
        ``boolean`` are Boolean columns (``fn`` returns 0/1; NaN becomes
        False), the others Float64.
        """
        self.numpy_steps.append(_NumpyStep(inputs, outputs, fn, what, tuple(boolean)))

    def weighting(self, weights: str | None, *, counts: str | None = None) -> Weighting:
        """The sums of a metric with optional ``weights=`` and ``counts=`` columns.

        ``None`` for both: the plain aggregations (``Weighting.sum`` is
        :meth:`sum`, ``Weighting.total`` is :attr:`n`), so unweighted results
        are unchanged.  ``weights``: the column is checked once (missing, NaN,
        infinite or negative weights are invalid rows; so are the rows of a
        group whose weights are all zero) and every sum is weighted.
        ``counts``: frequency counts (see :meth:`counted`): a row stands for
        ``k`` identical rows, every sum counts it ``k`` times; with weights
        too, ``k`` copies of a row of weight ``w``.
        """
        if counts is not None:
            return self._counted(weights, counts)
        if weights is None:
            return Weighting(self, None)
        w = self._weights(weights)
        self._positive_total(nw.col(weights), f"column {weights!r} (weights=) is zero", "weight", w)
        return Weighting(self, w)

    def _weights(self, weights: str) -> str:
        w = self.number(weights)
        self.check(f"column {weights!r} (weights=) has negative values", w < 0.0, example=w)
        return self.row(("value", weights), w)

    def _positive_total(self, raw: nw.Expr, what: str, noun: str, row: str) -> None:
        """Rows of a group where ``raw`` (input columns) is nowhere positive are invalid.

        A rule on the group's total (the sum of the row column ``row``): on
        rows a window over the group, on summaries (:func:`~conformal_frames.finalize`)
        the merged total, so that a partition of zero weight is no error
        when its group has weight elsewhere.
        """
        positive = (raw > 0) & (raw < _INF)  # NaN is neither (DuckDB orders it above inf)
        peak = over(indicator(positive).max(), self.keys)  # the keys' own names: checks read the input frame
        message = f"{what} on every row of a group, in {{rows}}; a group needs a positive total {noun}"
        self.check(message, peak.is_null() | (peak <= 0))
        self.positive[message] = positive
        # the positive rows (a count, mergeable): the same rule on rows and on summaries
        cell = nw.col(row)
        self.totals[message] = self.agg(
            "sum", self.row(("positive", row), indicator((cell > 0) & (cell < _INF)), inputs=[row])
        )

    def counted(self, counts: str) -> str:
        """The row column (Float64) of a ``counts=`` column of frequency counts.

        A numeric column of non-negative integers: missing, infinite,
        negative and non-integer values, and integers beyond 2^53, are
        invalid rows.  The group's ``n`` becomes the sum of the counts (the
        represented rows): every metric of one evaluation takes the same
        ``counts=``.
        """
        expr = self.column(counts)
        dtype = self.schema[counts]
        if not dtype.is_numeric():
            msg = f"column {counts!r} (counts=) must be numeric, found dtype {dtype}; counts are non-negative integers"
            raise TypeError(msg)
        what = f"column {counts!r} (counts=) has"
        value = expr.cast(nw.Float64)
        missing = expr.is_null() if dtype.is_integer() else expr.is_null() | ~(value.abs() < _INF)
        self.check(f"{what} missing (null/NaN) or infinite values", missing)
        self.check(f"{what} negative values", expr < 0, example=expr)
        big = expr > _EXACT_INT if dtype.is_integer() else (expr > _EXACT_INT) & (expr < _INF)
        self.check(f"{what} integers beyond 2^53, which Float64 cannot hold exactly", big)
        if not dtype.is_integer():
            fraction = (value.round(0) != value) & (value.abs() < _INF)  # NaN is missing, not a fraction
            self.check(f"{what} non-integer values", fraction, example=expr)
        row = self.row(("counts", counts), nw.when(~big).then(expr).cast(nw.Float64))
        if self.count_row not in (None, row):
            msg = "every metric of one evaluation takes the same counts= column (the group's n counts its rows)"
            raise ValueError(msg)
        self.count_row = row
        return row

    def _counted(self, weights: str | None, counts: str) -> Weighting:
        k = self.counted(counts)
        self.physical_n = self.agg("sum", self.row(("input_rows",), nw.lit(1.0)))
        if weights is None:
            self._positive_total(nw.col(counts), f"column {counts!r} (counts=) is zero", "count", k)
            return Weighting(self, k, counts=k)
        w = self._weights(weights)
        both = nw.col(weights).cast(nw.Float64) * nw.col(counts).cast(nw.Float64)
        row = self.row(("counted_weight", w, k), nw.col(w) * nw.col(k), inputs=[w, k])
        what = f"columns {weights!r} (weights=) or {counts!r} (counts=) are zero"
        self._positive_total(both, what, "weight", row)
        return Weighting(self, row, counts=k, weights=w)

    def per_group(self, output: str, rows: list[str], fn: GroupFn, *, what: str) -> None:
        """A numpy step that needs the rows of every group (e.g. HSIC).

        ``fn(group_index, n_groups, {row_name: values})`` returns one value per
        group, written to the output column ``output``; the metric's
        :meth:`Metric.build` returns ``None`` for that output.
        """
        self.group_steps[output] = _GroupStep(rows, output, fn, what)


@dataclass(frozen=True)
class Weighting:
    """Weighted sums of one metric's row columns (see :meth:`Query.weighting`).

    With weights ``w_i``: ``sum(x) = sum_i w_i x_i``, ``total = sum_i w_i`` and
    ``n_eff = (sum_i w_i)^2 / sum_i w_i^2`` (Kish's effective sample size).
    With counts ``k_i`` (frequency weights) the sums are those of the rows
    repeated ``k_i`` times: ``w_i`` becomes ``k_i w_i`` (``k_i`` without
    weights), the squares ``k_i w_i^2`` and without weights ``n_eff`` is
    ``sum_i k_i``.  Without either (``row`` is ``None``) they are
    ``q.sum(x)``, ``q.n`` and ``q.n``: the very expressions of the unweighted
    metric.
    """

    q: Query
    #: the row column of the weight of a row (Float64: ``w``, ``k`` or ``k w``); ``None``: unweighted
    row: str | None
    #: the row column of the frequency counts ``k``, if any
    counts: str | None = None
    #: the row column of the importance weights ``w`` when there are counts too
    weights: str | None = None

    @property
    def weighted(self) -> bool:
        """Importance weights: inference at Kish's ``n_eff`` (counts alone: that of the repeated rows)."""
        return self.row is not None and not self.frequency

    @property
    def frequency(self) -> bool:
        """Counts only: every sum is that of the repeated rows, inference too."""
        return self.counts is not None and self.weights is None

    def of(self, row: str) -> str:
        """The row column ``w_i * x_i`` (``x_i`` itself without weights)."""
        if self.row is None:
            return row
        return self.q.row(("weighted", row, self.row), nw.col(row) * nw.col(self.row), inputs=[row, self.row])

    def squared(self, row: str) -> str:
        """The row column ``w_i^2 x_i`` (``x_i`` itself without weights): a variance term."""
        if self.row is None:
            return row
        return self.q.row(
            ("weighted_sq", row, self.square), nw.col(row) * nw.col(self.square), inputs=[row, self.square]
        )

    def sum(self, row: str) -> nw.Expr:
        """``sum_i w_i x_i`` per group."""
        return nw.col(self.summed(row))

    def summed(self, row: str) -> str:
        """The aggregated column of :meth:`sum` (e.g. the successes of :meth:`binomial`)."""
        return self.q.agg("sum", self.of(row))

    @property
    def total(self) -> nw.Expr:
        """``sum_i w_i`` per group (the row count without weights)."""
        return self.q.n if self.row is None else self.q.sum(self.row)

    @property
    def square(self) -> str:
        """The row column ``w_i^2`` (weighted only; ``k_i w_i^2`` with counts)."""
        assert self.row is not None
        if self.counts is None:
            return self.q.row(("weight_sq", self.row), nw.col(self.row) ** 2, inputs=[self.row])
        if self.weights is None:
            return self.counts
        expr = nw.col(self.row) * nw.col(self.weights)
        return self.q.row(("weight_sq", self.row), expr, inputs=[self.row, self.weights])

    @property
    def n_eff(self) -> nw.Expr:
        """Kish's effective sample size ``(sum w)^2 / sum w^2`` (the row count without weights)."""
        if self.row is None:
            return self.q.n
        if self.frequency:
            return self.total
        return nw.col(self._n_eff())

    def _n_eff(self) -> str:
        """The value (:meth:`Query.value`) of Kish's ``n_eff`` of weighted sums."""
        square = self.q.sum(self.square)
        # null, not NaN, when no weight is left (invalid="drop" removed the rows of positive weight)
        return self.q.value(nw.when(square > 0.0).then(self.total**2 / square), key=("n_eff", self.row, self.square))

    def binomial(self, successes: str) -> tuple[str, str]:
        """The columns ``(k, n)`` of a binomial proportion whose weighted count is the column ``successes``.

        Without weights ``(successes, q.count)`` (the counted ``successes`` and
        ``sum k`` with counts only); with weights the proportion ``p =
        successes / total`` at Kish's sample size: ``(p * n_eff, n_eff)``,
        both values (:meth:`Query.value`).
        """
        if self.row is None:
            return successes, self.q.count
        if self.frequency:
            return successes, self.q.agg("sum", self.row)
        n_eff = self._n_eff()
        k = self.q.value(nw.col(successes) / self.total * nw.col(n_eff), key=("kish", successes, n_eff), inputs=[n_eff])
        return k, n_eff

    def positive(self, row: str) -> str:
        """The row column ``x_i`` where ``w_i > 0``, null elsewhere (for minima and maxima)."""
        if self.row is None:
            return row
        expr = nw.when(nw.col(self.row) > 0.0).then(nw.col(row))
        return self.q.row(("where_weighted", row, self.row), expr, inputs=[row, self.row])

    def count(self, row: str) -> nw.Expr:
        """``sum_i x_i`` over the rows of positive weight (a row count: ``x`` is 0/1), ``sum_i k_i x_i`` with counts."""
        if self.counts is None or self.row is None:
            return self.q.sum(self.positive(row))
        expr = nw.when(nw.col(self.row) > 0.0).then(nw.col(row) * nw.col(self.counts))
        return self.q.sum(self.q.row(("counted", row, self.row), expr, inputs=[row, self.row, self.counts]))

    def min(self, row: str) -> nw.Expr:
        return self.q.min(self.positive(row))

    def max(self, row: str) -> nw.Expr:
        return self.q.max(self.positive(row))


def no_weights(metric: str, why: str | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate the factory of a metric without a weighted version.

    ``weights=`` (or ``counts=``) then raises ``TypeError("<metric> has no
    weighted version (<why>): ...")`` instead of Python's generic message.
    """
    reason = f" ({why})" if why else ""

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            for option in ("weights", "counts"):
                if option in kwargs:
                    msg = (
                        f"{metric} has no weighted version{reason}: {option}= is not supported "
                        "(see the Weights section of the docs)"
                    )
                    raise TypeError(msg)
            return fn(*args, **kwargs)

        wrapper.__handled_keywords__ = ("weights", "counts")  # type: ignore[attr-defined]  # its own message
        return wrapper

    return decorate


def no_counts(metric: str, why: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate the factory of a weighted metric whose outputs cannot be those of repeated rows.

    ``counts=`` then raises ``TypeError("<metric> takes no counts= (<why>) ...")``.
    """

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            if "counts" in kwargs:
                msg = f"{metric} takes no counts= ({why}); see the Frequency counts section of the Weights docs"
                raise TypeError(msg)
            return fn(*args, **kwargs)

        wrapper.__handled_keywords__ = ("counts",)  # type: ignore[attr-defined]  # its own message
        return wrapper

    return decorate


@dataclass(frozen=True, kw_only=True)
class Metric:
    """Base class of metric objects (like polars expressions).

    Subclasses define ``default_name``, ``kind`` and :meth:`build`, which
    registers the metric's statistics on a :class:`Query` and returns its
    finalize expressions: ``{suffix: expr}``, the main output under ``""``
    (``None`` for an output a numpy step, per-group step or table fills).
    """

    name: str | None = None

    default_name: ClassVar[str] = "metric"
    #: what a direct eager, ungrouped call returns: a float ("score"), a
    #: result object ("test": see ``result``) or a frame
    kind: ClassVar[ResultKind] = "score"
    #: the frame returned by a direct call is this long table (not evaluate's)
    long: ClassVar[bool] = False
    #: result class of a test (kind "test"), built by :meth:`test_result`
    result: ClassVar[type[TestResult]] = TestResult
    #: for a metric :func:`~conformal_frames.summarize` refuses (its statistics
    #: do not merge exactly: per-group numpy steps, ordered windows, tables
    #: not built with :meth:`Query.cells`), the mergeable metric its error
    #: names instead, e.g. ``"auroc"``; ``None``: "evaluate it on the rows"
    mergeable_alternative: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        validate_fields(self)  # the same checks as the factories

    @property
    def output_name(self) -> str:
        return self.name if self.name is not None else self.default_name

    def alias(self, name: str) -> Metric:
        """The same metric with its output column(s) named ``name``."""
        if not isinstance(name, str) or not name:
            msg = f"alias must be a non-empty string, got {name!r}"
            raise TypeError(msg)
        return dataclasses.replace(self, name=name)

    def build(self, q: Query) -> dict[str, nw.Expr | None]:  # pragma: no cover - abstract
        raise NotImplementedError

    def counts_columns(self) -> set[str | None]:
        """The ``counts=`` columns of this metric's rows (``None``: uncounted rows).

        The one-counts-column rule of an evaluation (:meth:`Plan.of`) reads
        it; a composite metric (a skill score) answers for the metrics it
        combines.
        """
        return {getattr(self, "counts", None)}

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        """Reshape evaluate's wide output to this metric's long output."""
        return frame

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        """The input frame as this metric reads it (default: unchanged).

        E.g. set metrics turn a pandas column of Python lists into an Arrow
        list column.  Must return a new frame, never modify the caller's.
        """
        return frame

    def notices(self) -> dict[str, str]:
        """Counted outputs that warn on an eager result: ``{output column: message}``.

        The message's ``{count}`` is the column's total over the groups and
        ``{rows}`` the same as "1 row" / "3 rows"; no warning when it is 0
        (or the column is absent).  Default: none.
        """
        return {}

    def test_result(self, row: Mapping[str, Any]) -> TestResult:
        """A test's result object from its output row ``{column: value}``."""
        return self.result.from_row(row, self.output_name)

    def outputs(self, built: Mapping[str, nw.Expr | None]) -> dict[str, nw.Expr | None]:
        base = self.output_name
        return {(f"{base}_{s}" if s else base): e for s, e in built.items()}

    def output_dtypes(self, built: Mapping[str, nw.Expr | None]) -> dict[str, Any]:
        """The outputs (column names) of a declared dtype; the others are Float64.

        Default: a count of rows (suffix ``n`` or ``..._n``) is Int64 (see the
        output contract in ``docs/conventions.md``).  A metric with another
        integer output (e.g. a number of groups) extends this.
        """
        named = self.outputs(built)
        return {c: nw.Int64 for s, c in zip(built, named) if s == "n" or s.endswith("_n")}

    def output_names(self, schema: Mapping[str, Any], keys: Sequence[str] = ()) -> list[str]:
        """The wide output columns of this metric in :func:`evaluate`, in order.

        ``schema`` maps the frame's column names to narwhals dtypes (e.g.
        ``nw.from_native(df).collect_schema()``); raises as evaluation would
        for a missing column or a wrong dtype.  Nothing is computed.
        """
        return list(self.outputs(self.build(Query(schema=schema, keys=list(keys)))))


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
