"""Windows over the rows of a group, and p-value steps, in a compiled polars expression.

The hooks of :mod:`~conformal_frames.engine.native` for the metrics whose rows
read other rows of their group (:meth:`Query.over`): AUARC's ranks of the
confidences (over the group, and over its correct and incorrect rows),
Christoffersen's previous miss in ``order_by`` order, Diebold-Mariano's mean
of the loss differential and its lags.  The windows are those of the recorded
definition, translated by :func:`~conformal_frames.engine.native.to_polars`;
only how a window is written changes:

- in every polars aggregation context (``select``, ``group_by().agg``,
  ``over``, ``group_by_dynamic``, ``rolling``) the expression sees the
  group's rows as columns, so a window over the group is the expression
  itself, and a window over the group and a row column ``c`` is
  ``expr.over(c)`` (``c`` bound to its expression: an elementwise partition);
- the windows ordered by ``order_by`` read the rows sorted by it: the input
  columns are sorted (``sort_by``) before any row is computed, so an ordered
  window (``shift``) is the expression itself.  Rows repeating an
  ``order_by`` value within a group are invalid in these metrics, so ties
  never decide an order; metrics ordered in different orders (two
  ``order_by`` in one ``cfx.metrics`` struct) take one sorted block per
  order (:func:`blocks`), unless a table reads the windows;
- under ``invalid="drop"`` a window reads the kept rows only (as ``evaluate``
  drops the invalid rows before its windows): the inputs are filtered by the
  checks first (the checks read the group's rows as given, the repeated
  ``order_by`` values included), and the aggregations read the filtered rows.

:func:`numpy_steps` compiles a numpy step over the values of the aggregated
table (Diebold-Mariano's Student-t p-value of ``small_sample="hln"``, scipy's
``stdtr``) to a row-wise ``map_batches`` call on the compiled struct, after
the aggregation (polars batches the groups).

This module does not import :mod:`~conformal_frames.engine.native` (which
imports it): its functions take the compiler module as ``compiler`` and use
its ``to_polars`` and row helpers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames.engine.plan import Plan
from conformal_frames.engine.query import Query

if TYPE_CHECKING:
    import polars as pl

__all__ = ["aggregations", "blocks", "numpy_steps", "order", "orders", "with_numpy"]


class _Scan:
    """The windows of a query's rows, found by translating each row once (:func:`order`)."""

    def __init__(self) -> None:
        self.windows = 0
        self.orders: set[str] = set()
        #: the names of the partition columns (bound to ``pl.col(name)`` by ``_AnyName``)
        self.partitions: set[str] = set()

    def __call__(self, native: pl.Expr, partition: list[pl.Expr], order_by: list[str]) -> pl.Expr:
        self.windows += 1
        self.orders.update(order_by)
        self.partitions.update(p.meta.output_name() for p in partition)
        return native


def order(plan: Plan, compiler: ModuleType) -> tuple[bool, str | None]:
    """``(windows, order)``: whether a row of the plan's query is a window, and the row column
    they are ordered by.

    Raises :class:`~conformal_frames.engine.native.NotAnExpressionError` for
    windows in several orders (:func:`orders` and :func:`blocks` take them; the
    tables of windowed rows, :mod:`.native_window_tables`, call this).
    """
    windows, by = orders(plan, compiler)
    if len(by) > 1:  # blocks() takes several; a table of windowed rows reads one block (native_window_tables)
        raise compiler.NotAnExpressionError(_several(plan, compiler, " with a table of windowed rows"))
    return windows, next(iter(by), None)


def _several(plan: Plan, compiler: ModuleType, why: str = "") -> str:
    metric = ", ".join(s.metric for s in plan.specs)
    return str(compiler._refused(metric, "windows over the rows in several orders" + why))


def orders(plan: Plan, compiler: ModuleType) -> tuple[bool, list[str]]:
    """``(windows, orders)``: whether a row of the plan's query is a window, and the row columns
    the ordered windows are ordered by (each once, in the order found)."""
    q = plan.query
    scan = _Scan()
    found: list[str] = []
    for r in q.rows.values():
        compiler.to_polars(r.expr, compiler._AnyName(), over=scan)
        found += [o for o in sorted(scan.orders) if o not in found]
    # a window over the whole group is its expression (engine.over): Query.over counts it
    return scan.windows + q.windows > 0, found


def blocks(
    plan: Plan, inputs: Mapping[str, pl.Expr], keep: pl.Expr | None, by: Sequence[str], compiler: ModuleType
) -> list[tuple[list[str], pl.Expr]]:
    """The aggregations of the plan's query as :func:`aggregations` blocks, one per order of ``by``
    (several metrics of one struct, each ordered its own way): an aggregated row goes to the block of
    the order its windows read (directly or through other rows; the first block if none)."""
    q = plan.query
    if len(by) <= 1:
        return [aggregations(q, inputs, keep, next(iter(by), None), compiler)]
    reads = _reads(q, compiler)
    ordered: dict[str, set[str]] = {}
    for r in sorted(q.rows.values(), key=lambda r: r.level):
        scan = _Scan()
        compiler.to_polars(r.expr, compiler._AnyName(), over=scan)
        ordered[r.name] = set(scan.orders).union(*(ordered.get(n, set()) for n in reads[r.name]))
    parts: dict[str, list[Any]] = {o: [] for o in by}
    for key in q.aggs:
        row_orders = ordered.get(cast("tuple[str, str]", key)[1], set())
        if len(row_orders) > 1:  # pragma: no cover - one metric orders its rows one way
            raise compiler.NotAnExpressionError(_several(plan, compiler))
        parts[next(iter(row_orders), by[0])].append(key)
    return [aggregations(q, inputs, keep, o, compiler, keys) for o, keys in parts.items() if keys]


def order_column(q: Query, by: str | None, compiler: ModuleType) -> dict[str, pl.Expr]:
    """``{column: pl.col(column)}`` for the input column of the order row ``by`` (any orderable dtype:
    a string or date column is read as it is, not cast to Float64), if it is one."""
    import polars as pl

    row = next((r for r in q.rows.values() if r.name == by), None)
    if row is None or row.level > 0:
        return {}
    read = compiler._reads(row.expr)
    if len(read) != 1 or any(read[0] in compiler._reads(r.expr) for r in q.rows.values() if r is not row):
        return {}  # a column another row reads as a number stays Float64
    return {read[0]: pl.col(read[0])}


def _writer(by: str | None, compiler: ModuleType) -> Any:
    def over(native: pl.Expr, partition: list[pl.Expr], order_by: list[str]) -> pl.Expr:
        if order_by not in ([], [by]):  # pragma: no cover - order() refuses two orders
            raise compiler.NotAnExpressionError("a window over the rows in another order")
        # the rows are the group's (kept) rows sorted by `by`: a window over the group is the
        # expression; over a partition, polars keeps each partition's rows in their order
        return native.over(partition) if partition else native

    return over


def aggregations(
    q: Query,
    inputs: Mapping[str, pl.Expr],
    keep: pl.Expr | None,
    by: str | None,
    compiler: ModuleType,
    keys: Sequence[Any] | None = None,
) -> tuple[list[str], pl.Expr]:
    """``(names, values)``: the aggregations of ``q`` (those of ``keys`` if given) over the rows
    ``keep`` (all if ``None``) sorted by the row ``by``, as one list of Float64 values (in ``names``' order).

    The group's (kept, sorted) input columns as one list of structs; the rows
    and their aggregations computed inside one ``list.eval``: a window there
    needs an elementwise partition (a row column bound to its expression of
    the struct's fields), never ``over(order_by=...)`` (the list is sorted).
    Outside ``list.eval`` polars refuses a window over a filtered partition
    in an aggregation, and a window with a partition of another length in
    ``select``.
    """
    import polars as pl

    chosen = list(q.aggs) if keys is None else list(keys)
    aggregated = [cast("tuple[str, str]", k) for k in chosen]  # (how, row name): see Query.agg
    reads = _reads(q, compiler)
    needed = {row for _, row in aggregated}
    for r in sorted(q.rows.values(), key=lambda r: -r.level):
        if r.name in needed:
            needed |= set(reads[r.name])
    # the inputs the aggregated rows read (the order column is a sort key: a string one is never cast)
    names = [k for k in inputs if k in needed]
    block = pl.struct(*[inputs[k].alias(f"i{i}") for i, k in enumerate(names)])
    key = None
    if by is not None:
        key = compiler._rows(q, inputs)[by]  # the order column as it is (order_column): strings, dates, big integers
    if keep is not None:
        block = block.filter(keep)
        key = key.filter(keep) if key is not None else None
    if key is not None:
        block = block.sort_by(key)
    bind = {k: pl.element().struct.field(f"i{i}") for i, k in enumerate(names)}
    sums = [row for _, row in aggregated]
    rows, block = _levels(q, bind, block.implode(), needed, sums, reads, _writer(by, compiler), compiler)
    values = [getattr(rows[row], how)().cast(pl.Float64) for how, row in aggregated]
    return [q.aggs[k][0] for k in chosen], block.list.eval(pl.concat_list(*values)).list.first()


def _reads(q: Query, compiler: ModuleType) -> dict[str, list[str]]:
    """Row name -> the names (inputs, rows) its expression reads, a window's partition twice
    (inside ``list.eval`` a partition must be elementwise: a field of the materialised rows)."""
    reads: dict[str, list[str]] = {}
    for r in q.rows.values():
        seen: list[str] = []
        scan = _Scan()
        compiler.to_polars(r.expr, compiler._AnyName(), read=seen.append, over=scan)
        reads[r.name] = seen + sorted(scan.partitions)  # a partition counts twice: it is materialised
    return reads


def _levels(
    q: Query,
    bind: Mapping[str, pl.Expr],
    block: pl.Expr,
    needed: set[str],
    aggregated: Sequence[str],
    reads: Mapping[str, list[str]],
    over: Any,
    compiler: ModuleType,
) -> tuple[dict[str, pl.Expr], pl.Expr]:
    """The row columns of ``q`` over ``block`` (a list of structs of the inputs), level by level.

    A row is inlined where it is read, unless a row of its level is read
    twice or more later: then the level is materialised (one ``list.eval``
    writes a struct of the columns read later), as nothing is shared inside
    ``list.eval`` (a Gaussian CRPS loss inlined into DM's lags repeats its
    tree at every level: 18 s per test instead of 0.2 s; materialising every
    level made Christoffersen's 7 levels 1.5x slower).  ``needed``: the rows
    ``aggregated`` (one entry per aggregation) and the rows and inputs they
    read.  Returns the bindings of the rows and the block.
    """
    import polars as pl

    levels: dict[int, list[Any]] = {}
    for r in q.rows.values():
        if r.name in needed:
            levels.setdefault(r.level, []).append(r)
    bound = dict(bind)
    for level in sorted(levels):
        counts = Counter(aggregated)
        counts.update(n for r in q.rows.values() if r.level > level and r.name in needed for n in reads[r.name])
        new = {r.name: compiler.to_polars(r.expr, bound, over=over) for r in levels[level]}
        bound |= new
        if all(counts[n] < 2 for n in new):
            continue  # inlined where read
        carried = {n: e for n, e in bound.items() if counts[n] > 0}
        fields = {n: f"f{i}" for i, n in enumerate(carried)}
        block = block.list.eval(pl.struct(*[e.alias(fields[n]) for n, e in carried.items()]))
        bound = {n: pl.element().struct.field(f) for n, f in fields.items()}
    return bound, block


# -- numpy steps over the aggregated values ---------------------------------------------------
def numpy_steps(plan: Plan) -> list[Any] | None:
    """The numpy steps of ``plan`` if each reads values of the aggregated table only
    (:meth:`Query.value` columns), writes Float64 outputs and is row-wise (its
    function says so with ``fn.rowwise = True``: an output of a group reads
    that group's row only, so polars may hand it the groups in any batches),
    else ``None``."""
    q = plan.query
    values = {v.name for v in q.values.values()}
    steps = list(q.numpy_steps)
    if any(s.boolean or not set(s.inputs) <= values or not getattr(s.fn, "rowwise", False) for s in steps):
        return None
    return steps


def inputs_of(steps: Sequence[Any]) -> dict[str, nw.Expr]:
    """The extra outputs the compiled struct carries for ``steps``: their inputs, under internal names."""
    return {_carried(c): nw.col(c) for s in steps for c in s.inputs}


def _carried(column: str) -> str:
    return f"\x00numpy\x00{column}"


def with_numpy(expr: pl.Expr, outputs: Sequence[str], steps: Sequence[Any], integers: Sequence[str] = ()) -> pl.Expr:
    """``expr`` (the struct of the compiled outputs and the steps' inputs) with the steps' outputs,
    as a struct of ``outputs`` in order.

    A row-wise ``map_batches`` call on the aggregated struct: polars hands it
    the aggregated rows of many groups at once (one call per ``group_by``:
    1,000 groups in 1 ms, against 1 s with one call per group).
    As ``evaluate`` (``engine._steps.numpy_apply``), a NaN output is null, and
    every output of an invalid group is null (its inputs are null already).
    """
    import polars as pl

    produced = {o for s in steps for o in s.outputs}

    def run(batch: pl.Series) -> pl.Series:
        frame = batch.struct.unnest()
        cols: dict[str, np.ndarray] = {}
        for s in steps:
            data = {c: frame[_carried(c)].cast(pl.Float64).fill_null(np.nan).to_numpy() for c in s.inputs}
            result = s.fn(data)
            cols |= {k: np.asarray(result[k], dtype=float) for k in s.outputs}
        series = [
            pl.Series(k, cols[k], pl.Float64).fill_nan(None) if k in produced else frame[k].alias(k) for k in outputs
        ]
        return pl.struct(*series, eager=True)

    dtype = pl.Struct({k: pl.Int64 if k in integers else pl.Float64 for k in outputs})
    return expr.map_batches(run, return_dtype=dtype, is_elementwise=True, returns_scalar=True)
