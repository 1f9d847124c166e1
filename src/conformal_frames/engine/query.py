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
trip is exact (:mod:`conformal_frames._pandas_polars`): the same frame as the
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

from conformal_frames import _pandas_polars, _plan_cache
from conformal_frames._validate import validate_fields
from conformal_frames.results import TestResult

__all__ = [
    "Cells",
    "Compiled",
    "FinalizeFn",
    "InvalidPolicy",
    "Metric",
    "Query",
    "TableFn",
    "TableRef",
    "Weighting",
    "aggregate",
    "as_keys",
    "complete_query",
    "compute",
    "evaluate",
    "indicator",
    "invalid_mask",
    "no_weights",
    "over",
    "policy",
    "stack",
    "to_lazy",
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
_OWN_MESSAGE = "conformal-frames: "
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

    Declared with :meth:`Query.table` (``cells=``): the table function groups
    the rows by ``(keys, order)`` and sums the row columns ``sums`` first, so
    it gives the same result on rows that are already such sums (one row per
    cell, or several to be added).  That makes the table mergeable: see
    :func:`conformal_frames.summarize`.
    """

    order: str
    sums: tuple[str, ...]


@dataclass
class _Row:
    name: str
    expr: nw.Expr
    level: int


@dataclass
class _Check:
    #: column of the check's row count in the frame :func:`check_counts` returns
    row: str
    bad: nw.Expr
    #: the offending value shown in the error (rows where ``bad``), if any
    example: nw.Expr | None = None


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


def _not_found(what: str, name: str, schema: Iterable[Any], role: str = "") -> ValueError:
    available = ", ".join(repr(c) for c in schema)
    return ValueError(f"{what} {name!r}{role} not found; available columns: {available}{_did_you_mean(name, schema)}")


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
    numpy_steps: list[_NumpyStep] = field(default_factory=list)
    group_steps: dict[str, _GroupStep] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    #: state shared between the builds of one query (see :meth:`shared`)
    state: dict[Hashable, Any] = field(default_factory=dict)
    #: table key -> its cells (tables that read the rows through per-cell sums)
    cells: dict[Hashable, Cells] = field(default_factory=dict)
    #: number of window expressions registered with :meth:`over`
    windows: int = 0

    def __post_init__(self) -> None:
        if not self.group:
            self.group = [f"__cf_k{i}" for i in range(len(self.keys))]

    #: aggregated column counting the invalid rows of each group (0 = valid);
    #: a numpy step may take it as an input
    invalid: ClassVar[str] = _INVALID

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
            self.rows[key] = _Row(f"__cf_r{len(self.rows)}", expr, self._level(inputs))
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

    def check(self, message: str, bad: nw.Expr, *, example: nw.Expr | None = None) -> None:
        """Rows where ``bad`` is true are invalid.

        ``bad`` is an expression of the frame's input columns (not of row
        columns).  What an invalid row does follows the evaluation's
        ``invalid=`` policy: ``"raise"``: a ValueError ``"<message> in <count>
        rows"`` (or the message with ``{rows}`` replaced by the count);
        ``"null"``: the group's metric columns are null and ``n_invalid``
        counts the rows; ``"drop"``: the row is left out (``n_dropped``).
        With ``example`` (an expression, e.g. the offending column), the error
        also names the smallest offending value: ``"..., e.g. 7"``.
        """
        if message not in self.checks:
            # the main aggregation counts the rows failing any check; the
            # count of each check is computed when one fails (check_counts)
            number = len(self.checks)
            shown = nw.when(bad).then(example) if example is not None else None
            self.checks[message] = _Check(f"__cf_c{number}", bad, shown)
            if shown is not None:
                self.examples[message] = f"__cf_e{number}"

    def table(self, key: Hashable, fn: TableFn, *, cells: Cells | None = None) -> TableRef:
        """A sub-query ``fn(rows, keys, ref)`` over the row-level frame.

        It returns the group ``keys`` plus columns named ``ref.name(...)``,
        joined to the aggregated table; metrics read them as ``ref.col(...)``.
        Registering the same ``key`` again returns the same handle.  Prefer
        main-aggregation statistics (:meth:`sum` ...) plus finalize
        expressions where the math allows: a table is a second pass over the
        rows, and polars caches the shared row frame in memory when a query
        uses it twice (streaming then holds the whole input).  ``cells``
        declares that ``fn`` reads the rows only through per-cell sums
        (:class:`Cells`): the table is then mergeable.
        """
        if key not in self.tables:
            self.tables[key] = (fn, TableRef(f"__cf_t{len(self.tables)}_"))
            if cells is not None:
                self.cells[key] = cells
        return self.tables[key][1]

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

    def weighting(self, weights: str | None) -> Weighting:
        """The sums of a metric with an optional ``weights=`` column.

        ``None``: the plain aggregations (``Weighting.sum`` is :meth:`sum`,
        ``Weighting.total`` is :attr:`n`), so unweighted results are unchanged.
        A column name: the column is checked once (missing, NaN, infinite or
        negative weights are invalid rows; so are the rows of a group whose
        weights are all zero) and every sum is weighted.
        """
        if weights is None:
            return Weighting(self, None)
        w = self.number(weights)
        self.check(f"column {weights!r} (weights=) has negative values", w < 0.0, example=w)
        raw = nw.col(weights)
        peak = over(raw.max(), self.keys)  # the keys' own names: checks read the input frame
        self.check(
            f"column {weights!r} (weights=) is zero on every row of a group, in {{rows}}; "
            "a group needs a positive total weight",
            peak.is_null() | (peak <= 0),
        )
        return Weighting(self, self.row(("value", weights), w))

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
    Without weights (``row`` is ``None``) they are ``q.sum(x)``, ``q.n`` and
    ``q.n``: the very expressions of the unweighted metric.
    """

    q: Query
    #: the row column of the weights (Float64); ``None``: unweighted
    row: str | None

    @property
    def weighted(self) -> bool:
        return self.row is not None

    def of(self, row: str) -> str:
        """The row column ``w_i * x_i`` (``x_i`` itself without weights)."""
        if self.row is None:
            return row
        return self.q.row(("weighted", row, self.row), nw.col(row) * nw.col(self.row), inputs=[row, self.row])

    def squared(self, row: str) -> str:
        """The row column ``w_i^2 x_i`` (``x_i`` itself without weights): a variance term."""
        if self.row is None:
            return row
        return self.q.row(("weighted_sq", row, self.row), nw.col(row) * nw.col(self.square), inputs=[row, self.square])

    def sum(self, row: str) -> nw.Expr:
        """``sum_i w_i x_i`` per group."""
        return self.q.sum(self.of(row))

    @property
    def total(self) -> nw.Expr:
        """``sum_i w_i`` per group (the row count without weights)."""
        return self.q.n if self.row is None else self.q.sum(self.row)

    @property
    def square(self) -> str:
        """The row column ``w_i^2`` (weighted only)."""
        assert self.row is not None
        return self.q.row(("weight_sq", self.row), nw.col(self.row) ** 2, inputs=[self.row])

    @property
    def n_eff(self) -> nw.Expr:
        """Kish's effective sample size ``(sum w)^2 / sum w^2`` (the row count without weights)."""
        if self.row is None:
            return self.q.n
        square = self.q.sum(self.square)
        # null, not NaN, when no weight is left (invalid="drop" removed the rows of positive weight)
        return nw.when(square > 0.0).then(self.total**2 / square)

    def binomial(self, successes: nw.Expr) -> tuple[nw.Expr, nw.Expr]:
        """``(k, n)`` of a binomial proportion whose weighted count is ``successes``.

        Without weights ``(successes, q.n)``; with weights the proportion
        ``p = successes / total`` at Kish's sample size: ``(p * n_eff, n_eff)``.
        """
        if self.row is None:
            return successes, self.q.n
        n_eff = self.n_eff
        return successes / self.total * n_eff, n_eff

    def positive(self, row: str) -> str:
        """The row column ``x_i`` where ``w_i > 0``, null elsewhere (for minima and maxima)."""
        if self.row is None:
            return row
        expr = nw.when(nw.col(self.row) > 0.0).then(nw.col(row))
        return self.q.row(("where_weighted", row, self.row), expr, inputs=[row, self.row])

    def count(self, row: str) -> nw.Expr:
        """``sum_i x_i`` over the rows of positive weight (a row count: ``x`` is 0/1)."""
        return self.q.sum(self.positive(row))

    def min(self, row: str) -> nw.Expr:
        return self.q.min(self.positive(row))

    def max(self, row: str) -> nw.Expr:
        return self.q.max(self.positive(row))


def no_weights(metric: str, why: str | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate the factory of a metric without a weighted version.

    ``weights=`` then raises ``TypeError("<metric> has no weighted version
    (<why>): ...")`` instead of Python's generic message.
    """
    reason = f" ({why})" if why else ""

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            if "weights" in kwargs:
                msg = (
                    f"{metric} has no weighted version{reason}: weights= is not supported "
                    "(see the Weights section of the docs)"
                )
                raise TypeError(msg)
            return fn(*args, **kwargs)

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

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        """Reshape evaluate's wide output to this metric's long output."""
        return frame

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        """The input frame as this metric reads it (default: unchanged).

        E.g. set metrics turn a pandas column of Python lists into an Arrow
        list column.  Must return a new frame, never modify the caller's.
        """
        return frame

    def test_result(self, row: Mapping[str, Any]) -> TestResult:
        """A test's result object from its output row ``{column: value}``."""
        return self.result.from_row(row, self.output_name)

    def outputs(self, built: Mapping[str, nw.Expr | None]) -> dict[str, nw.Expr | None]:
        base = self.output_name
        return {(f"{base}_{s}" if s else base): e for s, e in built.items()}

    def output_names(self, schema: Mapping[str, Any], keys: Sequence[str] = ()) -> list[str]:
        """The wide output columns of this metric in :func:`evaluate`, in order.

        ``schema`` maps the frame's column names to narwhals dtypes (e.g.
        ``nw.from_native(df).collect_schema()``); raises as evaluation would
        for a missing column or a wrong dtype.  Nothing is computed.
        """
        return list(self.outputs(self.build(Query(schema=schema, keys=list(keys)))))


# ---------------------------------------------------------------------------
# frames and keys
# ---------------------------------------------------------------------------
def as_keys(by: Any) -> list[str]:
    """``by=`` as a list of distinct column names."""
    if by is None:
        return []
    if isinstance(by, str):
        return [by]
    if not isinstance(by, (list, tuple)):
        hint = " (pass the column name, e.g. by='g', not the column itself)" if hasattr(by, "dtype") else ""
        msg = f"by= must be a column name or a list of column names, got a {type(by).__name__}{hint}"
        raise TypeError(msg)
    keys = list(by)
    if not all(isinstance(k, str) for k in keys):
        msg = f"by= must be a column name or a list of column names, got {by!r}"
        raise TypeError(msg)
    if len(set(keys)) != len(keys):
        msg = f"by= has duplicate columns: {keys!r}"
        raise ValueError(msg)
    return keys


def to_lazy(frame: Any) -> tuple[nw.LazyFrame, bool]:
    """Narwhals lazy frame of ``frame``'s backend, and whether it was eager."""
    if isinstance(frame, (nw.DataFrame, nw.LazyFrame)):
        nw_frame = frame
    else:
        try:
            nw_frame = nw.from_native(frame)
        except nw.exceptions.DuplicateError as exc:
            msg = f"the frame has duplicate column names; rename them first ({exc})"
            raise ValueError(msg) from exc
        except TypeError as exc:
            msg = (
                f"expected a DataFrame supported by narwhals (pandas, polars, DuckDB, "
                f"PySpark, Dask, ...), got {type(frame).__name__}"
            )
            raise TypeError(msg) from exc
    if not isinstance(nw_frame, (nw.DataFrame, nw.LazyFrame)):
        msg = f"expected a DataFrame, got a Series ({type(frame).__name__})"
        raise TypeError(msg)
    _check_column_names(list(nw_frame.columns))
    if isinstance(nw_frame, nw.DataFrame):
        return nw_frame.lazy(), True
    return nw_frame, False


# the 0.1 private names, still used by modules outside the engine
_as_keys = as_keys
_to_lazy = to_lazy


def _check_column_names(columns: list[Any]) -> None:
    odd = [c for c in columns if not isinstance(c, str)]
    if odd:
        shown = ", ".join(repr(c) for c in odd[:5])
        msg = (
            f"column names must be strings, found {shown} (e.g. a frame built from an array); "
            "rename the columns first, e.g. df.columns = [str(c) for c in df.columns]"
        )
        raise TypeError(msg)
    seen: set[str] = set()
    repeated = sorted({c for c in columns if c in seen or seen.add(c)})  # type: ignore[func-returns-value]
    if repeated:
        msg = f"the frame has duplicate column names {repeated!r}; rename them first"
        raise ValueError(msg)


def _check_keys(schema: Mapping[str, Any], keys: list[str]) -> None:
    for k in keys:
        if k not in schema:
            raise _not_found("group column", k, schema, " (by=)")
        if k in RESERVED:
            msg = (
                f"group column {k!r} (by=) has the name of the result's row-count column {k!r}; "
                "rename the group column first"
            )
            raise ValueError(msg)


def _key_checks(q: Query) -> None:
    """Null (and NaN) group keys make their rows invalid on every backend."""
    for k in q.keys:
        bad = nw.col(k).is_null()
        what = "null"
        if q.schema[k].is_float():
            bad = bad | nw.col(k).is_nan()
            what = "null or NaN"
        q.check(f"group column {k!r} (by=) has {what} values in {{rows}}; fill or drop them first", bad)


def _backend(lf: nw.LazyFrame) -> str:
    return str(lf.implementation).split(".")[-1].lower()


def invalid_mask(lf: nw.LazyFrame, metrics: Sequence[Metric], keys: Sequence[str]) -> nw.Expr:
    """A boolean expression over ``lf``'s columns: the row fails a check of ``metrics``.

    For functions of a frame that apply ``invalid="drop"`` themselves
    (:func:`~conformal_frames.calibration.cumulative_differences`).
    """
    q = Query(schema=lf.collect_schema(), keys=list(keys))
    _key_checks(q)
    _build_outputs(q, metrics)
    bad = [c.bad for c in q.checks.values()]
    return nw.any_horizontal(*bad, ignore_nulls=True) if bad else nw.lit(False)


def policy(invalid: Any, eager: bool) -> InvalidPolicy:
    """The invalid-row policy: ``invalid`` checked, or the default for the input."""
    return _policy(invalid, eager)


def _policy(invalid: Any, eager: bool) -> InvalidPolicy:
    if invalid is None:
        return "raise" if eager else "null"
    if invalid in ("raise", "drop", "null"):
        policy: InvalidPolicy = invalid
        return policy
    msg = f"invalid= must be 'raise', 'drop' or 'null', got {invalid!r}"
    raise (TypeError if not isinstance(invalid, str) else ValueError)(msg)


# ---------------------------------------------------------------------------
# compilation
# ---------------------------------------------------------------------------
@dataclass
class Compiled:
    """One compiled evaluation: the lazy aggregated table and what made it."""

    #: one row per group: internal keys, outputs, ``n``, invalid counts
    table: nw.LazyFrame
    query: Query
    #: output column names, in order
    names: list[str]
    #: the row-level frame (internal keys and row columns), for per-group steps
    rows: nw.LazyFrame
    policy: InvalidPolicy
    #: the rows failing each check (:func:`check_counts`), computed when asked;
    #: ``None``: the table itself has a column per check (a finalized summary)
    counts: Callable[[], nw.DataFrame] | None = None


def check_count_query(lf: nw.LazyFrame, q: Query) -> nw.LazyFrame:
    """One row: the number of rows of ``lf`` failing each check of ``q`` (column
    ``check.row``) and the smallest offending value (``q.examples[message]``).

    A pass of its own, run only when a check fails (or when asked for on lazy
    input); the main aggregation counts the rows failing any check.
    """
    marks = [c.bad.cast(nw.Float64).alias(c.row) for c in q.checks.values()]
    shown = [c.example.alias(q.examples[m]) for m, c in q.checks.items() if c.example is not None]
    sums = [nw.col(c.row).sum() for c in q.checks.values()] + [nw.col(e).min() for e in q.examples.values()]
    return lf.select(*marks, *shown).select(*sums)


def check_counts(lf: nw.LazyFrame, q: Query) -> nw.DataFrame:
    """:func:`check_count_query`, collected."""
    return check_count_query(lf, q).collect()


def _rows_frame(lf: nw.LazyFrame, q: Query) -> nw.LazyFrame:
    layers: dict[int, list[nw.Expr]] = {}
    for r in q.rows.values():
        layers.setdefault(r.level, []).append(r.expr.alias(r.name))
    rows = lf.select(*[nw.col(k).alias(ik) for k, ik in zip(q.keys, q.group)], *layers.get(0, []))
    for level in sorted(layers):
        if level > 0:
            rows = rows.with_columns(*layers[level])
    return rows


def _join(left: nw.LazyFrame, right: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
    if keys:
        return left.join(right, on=keys, how="left")
    return left.join(right, how="cross")


def _build_outputs(q: Query, metrics: Sequence[Metric]) -> dict[str, nw.Expr | None]:
    outputs: dict[str, nw.Expr | None] = {}
    for m in metrics:
        if not isinstance(m, Metric):
            msg = f"expected metric objects such as cf.coverage(...), got {m!r}"
            raise TypeError(msg)
        for name, expr in m.outputs(m.build(q)).items():
            if name in q.keys:
                msg = (
                    f"group column {name!r} (by=) has the name of an output column of {m.output_name}; "
                    f"rename the group column or the metric (.alias(...))"
                )
                raise ValueError(msg)
            if name in outputs or name in RESERVED:
                msg = f"two outputs are named {name!r}; rename one with .alias()"
                raise ValueError(msg)
            outputs[name] = expr
    return outputs


def _aggregated(lf: nw.LazyFrame, q: Query, policy: InvalidPolicy) -> tuple[nw.LazyFrame, nw.LazyFrame]:
    """The row frame and the main aggregation (with ``_INVALID``/``_DROPPED``).

    ``_INVALID`` counts the rows failing at least one check: validation of
    every input rides in the one aggregation (:func:`check_counts` tells which
    checks fail, when one does).
    """
    bad = [c.bad for c in q.checks.values()]
    anybad = nw.any_horizontal(*bad, ignore_nulls=True) if bad else nw.lit(False)
    if policy == "null" or (policy == "raise" and bad):
        q.row(_INVALID, indicator(anybad))
    counts = None
    if policy == "drop":
        flag = anybad
        flagged = lf.with_columns(flag.alias(_DROPPED))
        ikeys = [nw.col(k).alias(ik) for k, ik in zip(q.keys, q.group)]
        marks = flagged.select(*ikeys, nw.col(_DROPPED).cast(nw.Float64))
        counts = aggregate(marks, q.group, [nw.col(_DROPPED).sum()])
        lf = flagged.filter(~nw.col(_DROPPED)).drop(_DROPPED)
    rows = _rows_frame(lf, q)
    aggs = [nw.len().alias(_N), *[e.alias(n) for n, e in q.aggs.values()]]
    if _INVALID in q.rows:
        aggs.append(nw.col(q.rows[_INVALID].name).sum().alias(_INVALID))
    table = aggregate(rows, q.group, aggs)
    if policy == "raise" and not bad:
        table = table.with_columns(nw.lit(0.0).alias(_INVALID))
    if counts is not None:
        # every group of the input, also one whose rows were all dropped
        table = _join(counts, table.with_columns(nw.lit(0.0).alias(_INVALID)), q.group)
        table = table.with_columns(nw.col(_N).fill_null(0), nw.col(_INVALID).fill_null(0.0))
    return rows, table


def compile_query(
    lf: nw.LazyFrame,
    metrics: Sequence[Metric],
    keys: list[str],
    *,
    invalid: InvalidPolicy = "null",
    keep_dtypes: bool = False,
) -> Compiled:
    """Compile ``metrics`` into one lazy query (see the module docstring and :func:`complete_query`)."""
    q, outputs = _plan(lf.collect_schema(), metrics, keys)
    return _assemble(lf, q, outputs, invalid, keep_dtypes=keep_dtypes)


def _plan(schema: Mapping[str, Any], metrics: Sequence[Metric], keys: list[str]) -> tuple[Query, dict[str, Any]]:
    """The metrics' statistics registered on a new :class:`Query` of ``schema``, and their outputs."""
    if not metrics:
        msg = "evaluate() needs at least one metric, e.g. cf.evaluate(df, cf.coverage('y', 'lo', 'hi'))"
        raise ValueError(msg)
    _check_keys(schema, keys)
    q = Query(schema=schema, keys=keys)
    _key_checks(q)
    return q, _build_outputs(q, metrics)


def _assemble(
    lf: nw.LazyFrame, q: Query, outputs: dict[str, Any], invalid: InvalidPolicy, *, keep_dtypes: bool = False
) -> Compiled:
    """The planned query ``q`` over the frame ``lf`` (any frame with the columns ``q`` uses)."""
    rows, table = _aggregated(lf, q, invalid)
    tables = [fn(rows, q.group, ref) for fn, ref in q.tables.values()]
    compiled = complete_query(q, outputs, table, tables, rows, invalid, keep_dtypes=keep_dtypes)
    compiled.counts = functools.partial(check_counts, lf, q)
    return compiled


def complete_query(
    q: Query,
    outputs: dict[str, nw.Expr | None],
    table: nw.LazyFrame,
    tables: Sequence[nw.LazyFrame],
    rows: nw.LazyFrame,
    invalid: InvalidPolicy,
    *,
    keep_dtypes: bool = False,
) -> Compiled:
    """The aggregated ``table`` joined with the ``tables``, finalized (outputs, sort).

    The outputs of an invalid group are null Float64 values, which makes every
    output Float64 on engines with a common supertype; ``keep_dtypes`` keeps
    each output's own dtype instead (see :mod:`conformal_frames._pandas_polars`).
    """
    for sub in tables:
        table = _join(table, sub, q.group)
    for finalize, fref in q.finalizers.values():
        table = finalize(table, fref)
    exprs = {k: v for k, v in outputs.items() if v is not None}
    if exprs:
        # the mask once as a column: every expression node costs query-building time
        table = table.with_columns(((nw.col(_INVALID) == 0) & (nw.col(_N) > 0)).alias(_VALID))
        valid = nw.col(_VALID)
        null = None if keep_dtypes else nw.lit(None, nw.Float64)
        table = table.with_columns(*[nw.when(valid).then(e).otherwise(null).alias(k) for k, e in exprs.items()])
    if q.group:
        table = table.sort(*q.group, nulls_last=True)
    return Compiled(table=table, query=q, names=list(outputs), rows=rows, policy=invalid)


# ---------------------------------------------------------------------------
# execution
# ---------------------------------------------------------------------------
def _valid_mask(frame: nw.DataFrame) -> np.ndarray:
    return (frame.get_column(_INVALID).to_numpy() == 0) & (frame.get_column(_N).to_numpy() > 0)


def _numpy_apply(frame: nw.DataFrame, q: Query) -> nw.DataFrame:
    cols: dict[str, np.ndarray] = {}
    for step in q.numpy_steps:
        data = {c: frame.get_column(c).to_numpy().astype(float) for c in step.inputs}
        data.update({c: v for c, v in cols.items() if c in step.inputs})
        result = step.fn(data)
        cols.update({k: np.asarray(result[k], dtype=float) for k in step.outputs})
    if not cols:
        return frame
    valid = _valid_mask(frame)
    ns = nw.get_native_namespace(frame)
    boolean = {k for s in q.numpy_steps for k in s.boolean}
    return frame.with_columns(
        *[
            nw.new_series(k, [bool(x == 1.0) if ok else None for x, ok in zip(v, valid)], nw.Boolean, backend=ns)
            if k in boolean
            else nw.new_series(k, np.where(valid, v, np.nan), nw.Float64, backend=ns).fill_nan(None)
            for k, v in cols.items()
        ]
    )


def _group_apply(frame: nw.DataFrame, rows: nw.LazyFrame, q: Query) -> nw.DataFrame:
    """Run per-group numpy steps; ``frame`` is the collected, sorted table."""
    if not q.group_steps:
        return frame
    keys = q.group
    n_groups = len(frame)
    needed = sorted({r for s in q.group_steps.values() for r in s.rows})
    if keys:
        gid = frame.select(*keys).with_row_index(_GID)
        narrow = rows.select(*keys, *needed).collect()
        narrow = narrow.join(gid, on=keys, how="inner") if len(narrow) else narrow.with_columns(nw.lit(0).alias(_GID))
        group_index = narrow.get_column(_GID).to_numpy().astype(np.int64)
    else:
        narrow = rows.select(*needed).collect()
        group_index = np.zeros(len(narrow), dtype=np.int64)
    data = {c: narrow.get_column(c).to_numpy().astype(float) for c in needed}
    ns = nw.get_native_namespace(frame)
    new = []
    valid = _valid_mask(frame)
    for step in q.group_steps.values():
        values = np.asarray(step.fn(group_index, n_groups, {c: data[c] for c in step.rows}), dtype=float)
        new.append(nw.new_series(step.output, np.where(valid, values, np.nan), nw.Float64, backend=ns).fill_nan(None))
    return frame.with_columns(*new)


def has_invalid(table: nw.DataFrame) -> bool:
    """Whether a collected aggregated table counts a row failing a check."""
    return bool(np.nansum(table.get_column(_INVALID).to_numpy().astype(float)) > 0)


def _failed(c: Compiled, table: nw.LazyFrame | nw.DataFrame) -> nw.DataFrame:
    """The per-check counts of an evaluation (``table``: its aggregated table)."""
    if c.counts is not None:
        return c.counts()
    if isinstance(table, nw.DataFrame):
        return table
    return table.select(*[ch.row for ch in c.query.checks.values()], *c.query.examples.values()).collect()


def _raise_checks(frame: nw.DataFrame, q: Query) -> None:
    for message, check in q.checks.items():
        count = int(np.nansum(frame.get_column(check.row).to_numpy().astype(float)))
        if count:
            rows = f"{count} row{'s' if count != 1 else ''}"
            text = message.replace("{rows}", rows) if "{rows}" in message else f"{message} in {rows}"
            if message in q.examples:
                text += _example(frame.get_column(q.examples[message]).to_list())
            raise ValueError(text)


def _present(value: Any) -> bool:
    """Not null, not NaN, not a missing-value sentinel such as ``pd.NA``."""
    if value is None:
        return False
    try:
        return bool(value == value)
    except TypeError:  # pd.NA: "boolean value of NA is ambiguous"
        return False


def _example(values: list[Any]) -> str:
    """``", e.g. <smallest offending value>"`` ('' when none is available)."""
    found = [v for v in values if _present(v)]
    if not found:
        return ""
    value = min(found)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f", e.g. {value!r}"


#: internal column -> public column added after ``n`` for each policy
_POLICY_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "raise": [],
    "null": [(_INVALID, "n_invalid")],
    "drop": [(_DROPPED, "n_dropped")],
}


def _finish(c: Compiled, keys: list[str], eager: bool, backend: str) -> nw.DataFrame | nw.LazyFrame:
    q, table = c.query, c.table
    final_cols: list[nw.Expr | str] = [
        *[nw.col(ik).alias(k) for k, ik in zip(keys, q.group)],
        *c.names,
        nw.col(_N).cast(nw.Int64).alias("n"),
        *[nw.col(i).cast(nw.Int64).alias(p) for i, p in _POLICY_COLUMNS[c.policy]],
    ]
    if c.policy == "raise":
        if not eager:  # asked for: run the checks now (the metrics stay lazy)
            _raise_checks(_failed(c, table), q)
        else:
            frame = table.collect()
            if has_invalid(frame):
                _raise_checks(_failed(c, frame), q)
    if eager:
        frame = table.collect() if c.policy != "raise" else frame
        frame = _group_apply(frame, c.rows, q)
        frame = _numpy_apply(frame, q)
        return nw.maybe_reset_index(frame.select(*final_cols))
    if q.group_steps or q.numpy_steps:
        if table.implementation.is_polars():
            return _polars_lazy_steps(c, keys, final_cols)
        steps: list[_GroupStep | _NumpyStep] = [*q.group_steps.values(), *q.numpy_steps]
        what = "; ".join(sorted({s.what for s in steps}))
        msg = _OWN_MESSAGE + (
            f"{what} cannot stay lazy on the {backend} backend; collect the frame first "
            "(e.g. .collect() / .toPandas()) and evaluate the eager frame, or use polars"
        )
        raise NotImplementedError(msg)
    return table.select(*final_cols)


def _polars_lazy_steps(c: Compiled, keys: list[str], final_cols: list[nw.Expr | str]) -> nw.LazyFrame:
    """Numpy steps on a polars LazyFrame, kept lazy with ``map_batches``."""
    rows_native = c.rows.to_native()
    q = c.query

    def run(df: Any) -> Any:
        frame = nw.from_native(df, eager_only=True)
        frame = _group_apply(frame, nw.from_native(rows_native), q)
        frame = _numpy_apply(frame, q)
        return frame.select(*final_cols).to_native()

    native = c.table.to_native()
    schema = native.collect_schema()
    import polars as pl  # only reached for polars input

    out_schema = {k: schema[ik] for k, ik in zip(keys, q.group)}
    # outputs already in the table keep their dtype (e.g. a worst-group label); numpy outputs are Float64
    out_schema.update({name: schema.get(name, pl.Float64) for name in c.names})
    out_schema.update({k: pl.Boolean for s in q.numpy_steps for k in s.boolean})
    out_schema["n"] = pl.Int64
    out_schema.update({p: pl.Int64 for _, p in _POLICY_COLUMNS[c.policy]})
    return nw.from_native(native.map_batches(run, schema=pl.Schema(out_schema), streamable=False))


def compute(
    frame: Any, metrics: Sequence[Metric], by: Any = None, *, invalid: InvalidPolicy | None = None
) -> nw.LazyFrame | nw.DataFrame:
    """Narwhals-level evaluation: a narwhals DataFrame (eager) or LazyFrame."""
    lf, eager = to_lazy(frame)
    keys = as_keys(by)
    policy = _policy(invalid, eager)
    for m in metrics:
        lf = m.prepare(lf) if isinstance(m, Metric) else lf
    try:
        # metrics that reshape the input (prepare) compile on every call
        reusable = bool(metrics) and all(isinstance(m, Metric) and type(m).prepare is Metric.prepare for m in metrics)
        if eager:
            fast = _pandas_by_polars(lf, metrics, keys, policy, reusable=reusable)
            if fast is not None:
                return fast
        with _plan_cache.bound(frame, lf, metrics, keys, policy, compile_query, reusable=reusable) as compiled:
            return _finish(compiled, keys, eager, _backend(lf))
    except (NotImplementedError, RuntimeError) as exc:
        if str(exc).startswith(_OWN_MESSAGE):
            raise
        if not isinstance(exc, NotImplementedError) and "not supported" not in str(exc):
            raise  # a real failure, not a backend limitation
        # an operation the backend (through narwhals) cannot run: say which
        # metrics were asked for and the way out, keep the original reason
        asked = ", ".join(m.output_name for m in metrics if isinstance(m, Metric))
        msg = (
            f"{asked}: the {_backend(lf)} backend cannot run an operation these metrics need "
            f"({exc}); collect the data to pandas or polars first, or use polars"
        )
        raise NotImplementedError(msg) from exc


def _pandas_by_polars(
    lf: nw.LazyFrame, metrics: Sequence[Metric], keys: list[str], policy: InvalidPolicy, *, reusable: bool
) -> nw.DataFrame | None:
    """An eager pandas evaluation run by polars, or ``None`` for the pandas path.

    The query is planned on the pandas schema (so errors about columns and
    dtypes are the pandas path's), then run on a polars copy of the columns it
    uses (see :mod:`conformal_frames._pandas_polars`), with the compiled
    queries of eager polars frames (``reusable``: see :mod:`conformal_frames._plan_cache`).
    Any error on the polars side returns ``None``: the pandas path then runs
    and raises its own error.
    """
    if not _pandas_polars.applies(lf):
        return None
    schema = lf.collect_schema()
    try:
        used = _used_columns(tuple(schema.items()), tuple(metrics), tuple(keys))
    except TypeError:  # a metric parameter that is not hashable: plan without the cache
        used = _used_columns.__wrapped__(tuple(schema.items()), tuple(metrics), tuple(keys))
    if used is None:
        return None
    twin = _pandas_polars.twin(lf, keys, used, schema)
    if twin is None:
        return None
    compile_fn = functools.partial(compile_query, keep_dtypes=True)
    try:
        with _plan_cache.bound(
            twin.to_native(), twin.lazy(), metrics, keys, policy, compile_fn, reusable=reusable, variant="keep_dtypes"
        ) as compiled:
            result = _finish(compiled, keys, True, "polars")
        assert isinstance(result, nw.DataFrame)
        booleans = {k for step in compiled.query.numpy_steps for k in step.boolean}
        return _pandas_polars.back(result, lf, keys, [k for k in compiled.names if k not in booleans])
    except Exception:  # e.g. invalid rows under "raise": the pandas path words the message
        return None


@functools.lru_cache(maxsize=128)
def _used_columns(
    schema: tuple[tuple[str, Any], ...], metrics: tuple[Metric, ...], keys: tuple[str, ...]
) -> tuple[str, ...] | None:
    """The input columns the metrics read (sorted), or ``None`` if planning them raises.

    A pure function of its arguments: cached (the plan costs milliseconds of
    expression building per call).
    """
    try:
        q, _ = _plan(dict(schema), metrics, list(keys))
    except Exception:  # the pandas path raises the same error
        return None
    return tuple(sorted(q.used))


def evaluate(frame: Any, *metrics: Metric, by: Any = None, invalid: InvalidPolicy | None = None) -> Any:
    """Evaluate any number of metrics in one pass.

    Parameters
    ----------
    frame
        Any frame narwhals supports: pandas, polars (eager or lazy), DuckDB,
        PySpark, Dask, ...
    *metrics
        Metric objects, e.g. ``cf.coverage("y", "lo", "hi")`` (at least one).
    by
        Group column name(s).  ``None`` evaluates the whole frame (one row).
        Groups are sorted by the keys' values (see the backend matrix for
        categorical keys); a null or NaN key is an invalid row.
    invalid : {"raise", "drop", "null"}, optional
        What rows that fail a check (missing values, ``lo > hi``, labels
        outside their set, ...) do.  ``"raise"`` (default for eager input): a
        ValueError naming the column, the problem and the row count.
        ``"null"`` (default for lazy input): the metrics of a group with
        invalid rows are null and ``n_invalid`` counts them.  ``"drop"``: the
        metrics use the valid rows only; ``n`` counts them and ``n_dropped``
        the rows left out (a group whose rows are all invalid stays, with
        ``n = 0`` and null metrics).  On lazy input ``"raise"`` runs the
        checks when called (the metrics stay lazy).

    Returns
    -------
    frame
        A frame of the caller's type: group keys, one column per metric output,
        ``n`` (and ``n_invalid`` or ``n_dropped``); sorted by the keys.  Eager
        in, eager out; lazy in, lazy out.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> df = pl.DataFrame({"y": [1.0, 2.0, 3.0, 4.0], "lo": [0.5, 2.5, 2.0, 3.0],
    ...                    "hi": [1.5, 3.5, 4.0, 5.0], "seg": ["a", "a", "b", "b"]})
    >>> cf.evaluate(df, cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), by="seg")
    shape: (2, 6)
    ┌─────┬──────────┬─────────────────┬──────────────────┬───────┬─────┐
    │ seg ┆ coverage ┆ coverage_ci_low ┆ coverage_ci_high ┆ width ┆ n   │
    │ --- ┆ ---      ┆ ---             ┆ ---              ┆ ---   ┆ --- │
    │ str ┆ f64      ┆ f64             ┆ f64              ┆ f64   ┆ i64 │
    ╞═════╪══════════╪═════════════════╪══════════════════╪═══════╪═════╡
    │ a   ┆ 0.5      ┆ 0.094531        ┆ 0.905469         ┆ 1.0   ┆ 2   │
    │ b   ┆ 1.0      ┆ 0.34238         ┆ 1.0              ┆ 2.0   ┆ 2   │
    └─────┴──────────┴─────────────────┴──────────────────┴───────┴─────┘
    """
    return nw.to_native(compute(frame, metrics, by, invalid=invalid))


def _long_table(result: nw.DataFrame | nw.LazyFrame, metric: Metric, keys: list[str]) -> Any:
    """The metric's long table; its columns must not collide with the keys."""
    lazy = result if isinstance(result, nw.LazyFrame) else result.lazy()
    ikeys = [f"__cf_k{i}" for i in range(len(keys))]
    # the table's own columns, probed (schema only) with internal key names
    probe = metric.to_long(lazy.rename(dict(zip(keys, ikeys))), ikeys).collect_schema().names()
    clash = [c for c in probe if c in keys]
    if clash:
        msg = (
            f"group column {clash[0]!r} (by=) has the name of a column of the {metric.output_name} table; "
            "rename the group column first"
        )
        raise ValueError(msg)
    long = metric.to_long(lazy, keys)
    return nw.to_native(long if isinstance(result, nw.LazyFrame) else nw.maybe_reset_index(long.collect()))


def evaluate_one(frame: Any, metric: Metric, by: Any = None, *, invalid: InvalidPolicy | None = None) -> Any:
    """A single metric with the return contract of the ``.conformal`` methods."""
    result = compute(frame, [metric], by, invalid=invalid)
    keys = as_keys(by)
    if metric.long:
        return _long_table(result, metric, keys)
    if isinstance(result, nw.LazyFrame) or keys:
        return nw.to_native(result)
    row = result.row(0)
    values = dict(zip(result.columns, row))
    main = values[metric.output_name]
    if metric.kind == "test":
        return metric.test_result(values)
    return _float(main)


def _float(value: Any) -> float:
    return float("nan") if value is None else float(value)


def level_row(q: Query, level: float | str) -> str | None:
    """Row column of the target level when it is a column (must be a ``by=`` key).

    ``None`` for a float level.  The one place where a metric's
    ``confidence_level=`` column is checked: it must be a ``by=`` key (so the
    target is constant within each group), numeric and inside (0, 1) (rows
    outside are invalid).  The row is Float64.
    """
    if not isinstance(level, str):
        return None
    if level not in q.keys:
        if level not in q.schema:
            q.column(level)  # the usual "not found" message
        msg = (
            f"confidence_level={level!r} names a column: it must also be a by= column, "
            "so that the target is constant within each group (e.g. by=[..., 'level'])"
        )
        raise ValueError(msg)
    if not q.schema[level].is_numeric():
        msg = f"confidence_level column {level!r} must be numeric, found dtype {q.schema[level]}"
        raise TypeError(msg)
    t = nw.col(level).cast(nw.Float64)
    q.check(f"confidence_level column {level!r} has values outside (0, 1)", ~((t > 0.0) & (t < 1.0)))
    return q.row(("target_level", level), t)
