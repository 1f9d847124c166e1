"""What a metric registers: the :class:`Query` recorder and :class:`Weighting`.

A metric's :meth:`Metric.build` records on a :class:`Query` what it needs:
row columns (:meth:`Query.row`, shared between metrics by a structural key),
elementary aggregations (:meth:`Query.sum` ...), checks of the input rows,
values of the aggregated table, tables (a second aggregation level; ordered
cells with :meth:`Query.cells`), numpy and per-group steps, and returns its
finalize expressions.  :meth:`Query.record` builds a metric and returns its
definition as a value (:class:`~conformal_frames.engine.spec.Spec`), which
every consumer reads; :mod:`~conformal_frames.engine.plan` compiles the
record of one evaluation into one lazy narwhals query, and
:mod:`~conformal_frames.engine.execute` runs it.

This module also holds the expression helpers every family shares
(:func:`aggregate`, :func:`over`, :func:`indicator`, :func:`ordered_cells`,
:func:`stack`, :func:`join_keys` ...).  The contributor's walk-through is the
docs page "How a metric is built".
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeVar, cast

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._roles import PREFIX, ExprColumn, shown
from conformal_frames.engine.expr import (
    Cells,
    FinalizeFn,
    TableFn,
    TableRef,
    aggregate,
    indicator,
    ordered_cells,
    over,
)
from conformal_frames.engine.spec import PHASES, CellTable, Reduction, Spec, Stat
from conformal_frames.errors import ColumnNotFoundError

__all__ = [
    "REPLICATE_WEIGHTS",
    "GroupFn",
    "InvalidPolicy",
    "NotPerRowError",
    "NumpyFn",
    "PerRow",
    "Query",
    "Replicate",
    "Weighting",
]

#: what happens to rows that fail a check (see :func:`evaluate`)
InvalidPolicy = Literal["raise", "drop", "null"]
NumpyFn = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
GroupFn = Callable[[np.ndarray, int, dict[str, np.ndarray]], np.ndarray]
T = TypeVar("T")
_FrameT = TypeVar("_FrameT", nw.LazyFrame, nw.DataFrame)

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
    #: outputs whose value in a group reads the other groups' rows of the table (e.g. a Holm adjustment)
    across: tuple[str, ...] = ()


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
    available = ", ".join(shown(c) for c in schema)
    near = "" if isinstance(name, ExprColumn) else _did_you_mean(name, schema)
    return ColumnNotFoundError(f"{what} {name!r}{role} not found; available columns: {available}{near}")


class Recordable(Protocol):
    """What :meth:`Query.record` needs of a metric (:class:`~conformal_frames.engine.metric.Metric`)."""

    @property
    def output_name(self) -> str: ...

    def build(self, q: Query) -> dict[str, nw.Expr | None]: ...

    def outputs(self, built: Mapping[str, nw.Expr | None]) -> dict[str, nw.Expr | None]: ...


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
    #: the replicate being built (:meth:`replicate`)
    _replicating: Replicate | None = field(default=None, repr=False)
    #: the per-row values being built (:meth:`per_row`)
    _per_row: PerRow | None = field(default=None, repr=False)
    #: what the metric being recorded touches (:meth:`record`): ``(kind, key)`` pairs
    _trace: set[tuple[str, Hashable]] | None = field(default=None, repr=False)
    #: what the factory of each :meth:`shared` key touched, for the metrics that reuse it
    _shared_traces: dict[Hashable, set[tuple[str, Hashable]]] = field(default_factory=dict, repr=False)
    #: row name -> its canonical key (:meth:`_canonical`), and row name -> its key
    _canonical_keys: dict[str, Hashable] = field(default_factory=dict, repr=False)
    _row_keys: dict[str, Hashable] = field(default_factory=dict, repr=False)
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
            if isinstance(name, ExprColumn) and not any(str(c).startswith(PREFIX) for c in self.schema):
                msg = (
                    f"the expression {name!r} is evaluated on a frame (cf.evaluate, .conformal, cf.summarize, "
                    f"cf.report); a schema without it names its column {str(name)!r}"
                )
                raise ColumnNotFoundError(msg)
            raise _not_found("column", name, self.schema)
        if name in self.keys:
            msg = f"column {name!r} is both a group key (by=) and a metric input"
            raise ValueError(msg)
        self.used.add(name)
        self._touch("input", name)
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
        self._touch("row", key)
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
        self._touch("window", None)
        return over(expr, [*self.group, *within], order_by=order_by)

    def agg(self, how: Literal["sum", "min", "max"], row_name: str) -> str:
        """Register an elementary aggregation of a row column; returns its name.

        Under :meth:`per_row`, the row column itself (the value of one row).
        """
        if self._per_row is not None:
            self._per_row.read.append(row_name)
            return row_name
        key = (how, row_name)
        if key not in self.aggs:
            expr = getattr(nw.col(row_name), how)()
            self.aggs[key] = (f"__cf_a{len(self.aggs)}", expr)
        self._touch("agg", key)
        return self.aggs[key][0]

    def sum(self, row_name: str) -> nw.Expr:
        return nw.col(self.agg("sum", row_name))

    def min(self, row_name: str) -> nw.Expr:
        return nw.col(self.agg("min", row_name))

    def max(self, row_name: str) -> nw.Expr:
        return nw.col(self.agg("max", row_name))

    @property
    def n(self) -> nw.Expr:
        """Number of rows in the group (the valid rows with ``invalid="drop"``); 1 under :meth:`per_row`."""
        return nw.col(_N) if self._per_row is None else nw.lit(1.0)

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
        self._whole_group("table")
        if key not in self.tables:
            self.tables[key] = (fn, TableRef(f"__cf_t{len(self.tables)}_"))
        self._touch("table", key)
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
        keeps the cells and finalize sums them again.  Its ``score_decimals=``
        rounds the ``order`` values before the cells are formed, so the sums
        must read the order value only through the score columns it rounds
        too (a count of rows, as ``pit_test``'s, reads none).
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
        self._whole_group("shared")
        if key not in self.state:
            outer, self._trace = self._trace, (set() if self._trace is not None else None)
            try:
                self.state[key] = factory()
            finally:
                self._shared_traces[key], self._trace = self._trace or set(), outer
        if self._trace is not None:
            self._trace |= self._shared_traces.get(key, set())
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
        self._whole_group("value")
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
        self._whole_group("finalize")
        if key not in self.finalizers:
            self.finalizers[key] = (fn, TableRef(f"__cf_f{len(self.finalizers)}_"))
        self._touch("finalize", key)
        return self.finalizers[key][1]

    def numpy(
        self,
        inputs: list[str],
        outputs: list[str],
        fn: NumpyFn,
        *,
        what: str,
        boolean: Sequence[str] = (),
        across: Sequence[str] = (),
    ) -> None:
        """A numpy step over the aggregated table (one row per group).

        ``inputs`` are aggregated columns (e.g. ``q.agg(...)`` names, or
        :attr:`invalid`); ``outputs`` are output columns the metric's
        :meth:`Metric.build` returns as ``None``.  Outputs named in
        ``boolean`` are Boolean columns (``fn`` returns 0/1; NaN becomes
        False), the others Float64.  Outputs named in ``across`` read the
        other groups' rows of the table (a multiple-testing adjustment): the
        others are computed group by group (a polars expression calls ``fn``
        once per group, see ``engine._native_steps``).
        """
        self._whole_group("numpy")
        self.numpy_steps.append(_NumpyStep(inputs, outputs, fn, what, tuple(boolean), tuple(across)))
        self._touch("numpy", what)

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
        if weights == REPLICATE_WEIGHTS:
            return self._replicate_weighting(counts)
        if self._per_row is not None and (weights is not None or counts is not None):
            raise NotPerRowError("weights=" if weights is not None else "counts=")
        if counts is not None:
            return self._counted(weights, counts)
        if weights is None:
            return Weighting(self, None)
        w = self._weights(weights)
        self._positive_total(nw.col(weights), f"column {weights!r} (weights=) is zero", "weight", w)
        return Weighting(self, w)

    @contextlib.contextmanager
    def replicate(self, counts: str, weights: str | None) -> Iterator[Replicate]:
        """Build a metric as one bootstrap replicate: its weighting resampled.

        Inside the block, a metric built with ``weights=REPLICATE_WEIGHTS``
        takes its weighted path with the weights ``weights`` (its own
        ``weights=``, or none) times the replicate's counts, the row column
        ``counts``; :attr:`Replicate.weights` is then the row of those weights.
        """
        outer, self._replicating = self._replicating, Replicate(counts, weights)
        try:
            yield self._replicating
        finally:
            self._replicating = outer

    def _replicate_weighting(self, counts: str | None) -> Weighting:
        replica = self._replicating
        if replica is None or counts is not None:
            msg = "the replicate weights are read inside Query.replicate(...) only, without counts="
            raise ValueError(msg)
        base = self.weighting(replica.own)
        row = replica.counts
        if base.row is not None:
            row = self.row(("boot_weight", base.row, row), nw.col(base.row) * nw.col(row), inputs=[base.row, row])
        replica.weights = row
        return Weighting(self, row)

    @contextlib.contextmanager
    def per_row(self) -> Iterator[PerRow]:
        """Build a score as its per-row values: a sum is the row's own value, ``n`` is 1.

        A score that is a mean of per-row values (``wis``, ``pinball_loss``,
        ``crps``, ``mae`` ...) built inside the block returns its per-row value
        as a row-level expression over the row columns :attr:`PerRow.read`; its
        rows and checks are registered as usual.  A metric that needs the rows
        of a group together (a table, a value, a finalize or numpy step,
        shared state, weights) raises :class:`NotPerRowError`.
        """
        outer, self._per_row = self._per_row, PerRow()
        try:
            yield self._per_row
        finally:
            self._per_row = outer

    def _whole_group(self, what: str) -> None:
        if self._per_row is not None:
            raise NotPerRowError(what)

    def fork(self) -> Query:
        """A query that reads the row columns this one registered (same names), and nothing else of it.

        For a sub-query over this query's row frame: :meth:`aggregate_forked` computes
        the rows the fork adds and its aggregations.
        """
        return Query(schema=self.schema, keys=list(self.keys), group=list(self.group), rows=dict(self.rows))

    def aggregate_forked(self, rows: nw.LazyFrame, keys: list[str], fork: Query) -> nw.LazyFrame:
        """``fork``'s aggregations (and :attr:`count`) per group of the row frame ``rows`` of this query.

        ``fork`` is a :meth:`fork` of this query; the row columns it added are
        computed first, layer after layer.
        """
        new = [r for k, r in fork.rows.items() if k not in self.rows]
        for level in sorted({r.level for r in new}):
            rows = rows.with_columns(*[r.expr.alias(r.name) for r in new if r.level == level])
        return aggregate(rows, keys, [nw.len().alias(_N), *[e.alias(n) for n, e in fork.aggs.values()]])

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
        self._whole_group("per_group")
        self.group_steps[output] = _GroupStep(rows, output, fn, what)
        self._touch("group_step", output)

    # -- the record as a value ----------------------------------------------
    def _touch(self, kind: str, key: Hashable) -> None:
        if self._trace is not None:
            self._trace.add((kind, key))

    def record(self, metric: Recordable) -> tuple[dict[str, nw.Expr | None], Spec]:
        """Build ``metric`` on this query: its finalize expressions and its :class:`Spec`.

        The one way a metric is built: the query keeps what it registers
        (shared with the other metrics of the query), the ``Spec`` says what
        the metric itself reads and reduces.
        """
        if self._trace is not None:
            msg = "Query.record: a metric is already being recorded"
            raise RuntimeError(msg)
        self._trace = set()
        try:
            built = metric.build(self)
        finally:
            trace, self._trace = self._trace, None
        return built, self._freeze(metric, built, trace)

    def _canonical(self, row: str) -> Hashable:
        """The key of the row column ``row`` with every row name it reads replaced by ``("row", that row's key)``.

        Internal names never equal an input column (:meth:`_internal`), so a
        key reads unambiguously; group keys read as ``("group key",)``.  A
        row never changes once registered: its canonical key is kept.
        """
        done = self._canonical_keys
        if len(self._row_keys) != len(self.rows):  # rows registered since (or copied in by a fork)
            self._row_keys.update({r.name: key for key, r in self.rows.items() if r.name not in self._row_keys})
        by_name, group = self._row_keys, self.group
        visiting: set[str] = set()

        def canon(x: Any) -> Any:
            # a row in its own key is an input column of the same name (a schema that claims every
            # name, see summaries' rows-less plan: internal names avoid the columns it knows)
            if isinstance(x, str) and x in by_name and x not in visiting:
                if x not in done:
                    visiting.add(x)
                    done[x] = canon(by_name[x])
                    visiting.discard(x)
                return ("row", done[x])
            if isinstance(x, str) and x in group:
                return ("group key",)
            if isinstance(x, tuple):
                return tuple(canon(i) for i in x)
            return x

        return canon(row)[1]

    def _freeze(
        self, metric: Recordable, built: Mapping[str, nw.Expr | None], trace: set[tuple[str, Hashable]]
    ) -> Spec:
        canon = self._canonical
        kinds: dict[str, list[Hashable]] = {}
        for kind, key in trace:
            kinds.setdefault(kind, []).append(key)
        stats = []
        # in the order of registration (the summary's column order): __cf_a<number>
        for agg_key in sorted(kinds.get("agg", []), key=lambda k: int(self.aggs[k][0][len("__cf_a") :])):
            how, row = cast("tuple[Reduction, str]", agg_key)  # (how, row name): see agg
            stats.append(Stat(how, canon(row), self.aggs[agg_key][0]))
        tables = set(kinds.get("table", []))
        cells = tuple(
            CellTable(canon(c.order), c.order, tuple((canon(r), r) for r in c.sums))
            for key, c in self.cell_tables.items()
            if key in tables
        )
        if "group_step" in kinds:
            why: str | None = "needs every row of a group at once"
        elif "window" in kinds:
            why = "ranks or orders the rows of a group"
        elif any(key not in self.cell_tables for key in tables):
            why = "aggregates the rows of a group a second time, e.g. per quantile bin or stratum"
        else:
            why = None
        used = sorted(str(c) for c in kinds.get("input", []))
        return Spec(
            metric=metric.output_name,
            outputs=tuple(metric.outputs(built)),
            inputs=tuple((c, self.schema[c]) for c in used),
            stats=tuple(stats),
            cells=cells,
            why_not=why,
            single_pass=not ({"group_step", "window", "table"} & kinds.keys()),
            phases=frozenset(kinds.keys() & set(PHASES)),
        )


#: the ``weights=`` of a metric built as a bootstrap replicate (:meth:`Query.replicate`)
REPLICATE_WEIGHTS = "__cf_replicate_weights"


class NotPerRowError(TypeError):
    """A metric built under :meth:`Query.per_row` needs more than per-row values (the argument says what)."""


@dataclass
class PerRow:
    """The per-row values being built (:meth:`Query.per_row`)."""

    #: the row columns the metric's sums read
    read: list[str] = field(default_factory=list)


@dataclass
class Replicate:
    """A bootstrap replicate being built (:meth:`Query.replicate`)."""

    #: the row column of the replicate's counts
    counts: str
    #: the metric's own ``weights=`` column
    own: str | None
    #: the row column of the replicate's weights, once the metric asked for them
    weights: str | None = None


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
