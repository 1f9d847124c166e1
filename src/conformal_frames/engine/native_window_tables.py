"""Windowed rows read by a table, in a compiled polars expression (a hook of :mod:`~conformal_frames.engine.native`).

Quantile bins are rows that read other rows of their group: a rank of the
score (``reliability``, ``top_label_ece``, per predicted label), or the
weight of the rows with a smaller score (weighted and counted ``ece``,
``mce``, ``reliability``); the binned table then groups the rows by that
bin.  :mod:`~conformal_frames.engine.native_windows` computes windowed rows
in one block per group (the group's kept input columns as one list of
structs, sorted by the windows' order, the rows computed inside
``list.eval``); :mod:`~conformal_frames.engine.native`'s tables group a
sorted list of rows into ordered cells.  This module joins the two:

- the block is formed once: the inputs the aggregations and tables read,
  kept rows only under ``"drop"`` (``evaluate`` drops invalid rows before its
  windows), sorted by the windows' order column (without one, by the score a
  rank reads: no window then reads the order, and the rank and the bins'
  sort see sorted rows);
- the rows a table reads are written on the block's elements (the windows:
  ``expr.over(partition)`` on sorted rows, as in ``native_windows``), the
  table function is recorded on them (:func:`native._table`), and its rows
  become one list of structs sorted by the table's key, formed into ordered
  cells by ``native._cells_of``; a table's row totals are sums inside the
  block;
- aggregations of rows that read no window stay ordinary aggregations;
  the others are computed in the block as ``native_windows.aggregations``.

Why the block and not windows in the aggregation: polars evaluates a window
nested in another window per outer partition, refuses a window over a
filtered partition in ``group_by().agg``, and ``list.eval`` shares nothing
with an equal expression outside it.  The rows are computed on one sorted
block per group instead of once per windowed row (issue39h's first form:
20x slower than ``evaluate``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from conformal_frames.engine import native_tables, native_windows
from conformal_frames.engine.plan import Plan
from conformal_frames.engine.query import Query

if TYPE_CHECKING:
    import polars as pl

__all__ = ["applies", "order_inputs", "statistics"]

_Stage = Any


def applies(plan: Plan, compiler: ModuleType) -> bool:
    """Whether ``plan`` has rows that read other rows and a table (this module compiles it).

    ``evaluate`` keeps its narwhals query for such a plan (``engine._polars_native``):
    measured at 1e6 rows in 1,000 groups, lazy (CPU time), the compiled expression
    takes 1.0-1.05x evaluate's time for weighted quantile bins, 1.3-1.4x for rank
    bins and the pooled Diebold-Mariano (wall clock on a loaded machine: 1.4-1.6x).
    """
    tables = plan.query.tables.values()
    return bool(tables) and (native_windows.order(plan, compiler)[0] or any(_tag(fn) for fn, _ in tables))


def _tag(fn: Any) -> tuple[str, ...] | None:
    """A table function's description for this module (``fn.native_table``: Diebold-Mariano's lag sums)."""
    return getattr(fn, "native_table", None)


def _windowed(q: Query, compiler: ModuleType) -> set[str]:
    """The rows of ``q`` that read other rows (a window, or an aggregation over the whole group:
    ``engine.over`` without keys), directly or through other rows."""
    reads = native_windows._reads(q, compiler)
    out: set[str] = set()
    for r in sorted(q.rows.values(), key=lambda r: r.level):
        if _across(compiler.to_polars(r.expr, compiler._AnyName())) or any(n in out for n in reads[r.name]):
            out.add(r.name)
    return out


def _across(expr: pl.Expr) -> bool:
    """Whether a node of ``expr`` reads other rows (polars' ``is_row_separable`` answers for one node)."""
    try:
        if not expr.meta.is_row_separable():
            return True
    except Exception:  # polars cannot tell without a schema (list.eval): per row
        return False
    return any(_across(e) for e in expr.meta.pop())


def _ranked(q: Query, plain: Mapping[str, pl.Expr], compiler: ModuleType) -> pl.Expr | None:
    """Without an order of the windows: the row a rank reads (quantile bins' score), whose order the
    block may take (no window then reads the order; the rank and the bins' sort see sorted rows)."""
    for r in q.rows.values():
        native = compiler.to_polars(r.expr, compiler._AnyName())
        if "rank(" in str(native):
            read = compiler._reads(r.expr)
            if read and read[0] in plain:
                return plain[read[0]]
    return None


def _table_reads(plan: Plan, compiler: ModuleType, names: list[str]) -> set[str]:
    """The row and input names the tables of ``plan`` read (recorded on plain columns)."""
    import polars as pl

    out: set[str] = set()
    for fn, ref in plan.query.tables.values():
        tag = _tag(fn)
        if tag is not None:
            out |= set(tag[1:])
            continue
        block, rows = compiler._table(plan, fn, ref, {n: pl.col(n) for n in names})
        _, outside, needed = block.split()
        used = [rows[block.order], *(rows[c] for c in needed), *(rows[c] for c in outside.values())]
        used += [e for k, e in rows.items() if k.startswith("\x00")]  # the table's filter and sort key
        for e in used:
            out |= set(e.meta.root_names())
    return out


def statistics(
    plan: Plan,
    inputs: Mapping[str, pl.Expr],
    keep: pl.Expr | None,
    by: str | None,
    compiler: ModuleType,
    labels: dict[str, pl.Expr] | None,
) -> tuple[dict[str, pl.Expr], list[_Stage]]:
    """The statistics of a plan whose tables read windowed rows: ``(stats, stages)`` as
    ``native._statistics`` writes them (``n`` and the invalid flag aside)."""
    import polars as pl

    q = plan.query
    windowed = _windowed(q, compiler)
    plain = compiler._rows(q, inputs)
    names = [*inputs, *(r.name for r in q.rows.values())]
    aggregated = [cast("tuple[str, str]", k) for k in q.aggs]
    in_block = [(how, row) for how, row in aggregated if row in windowed]
    read_by_tables = _table_reads(plan, compiler, names)
    needed = read_by_tables | {row for _, row in in_block}
    reads = native_windows._reads(q, compiler)
    for r in sorted(q.rows.values(), key=lambda r: -r.level):
        if r.name in needed:
            needed |= set(reads[r.name])
    cols = [k for k in inputs if k in needed]
    block = pl.struct(*[inputs[k].alias(f"i{i}") for i, k in enumerate(cols)])
    key = plain[by] if by is not None else _ranked(q, plain, compiler)
    if keep is not None:
        block, key = block.filter(keep), (key.filter(keep) if key is not None else None)
    if key is not None:
        block = block.sort_by(key)
    bind = {k: pl.element().struct.field(f"i{i}") for i, k in enumerate(cols)}
    writer = native_windows._writer(by, compiler)
    fields = {str(e) for e in bind.values()}
    for r in q.rows.values():  # a row that is an input (its value row) is that field: never materialised
        if r.level == 0 and r.name in needed and str(e := compiler.to_polars(r.expr, bind, over=writer)) in fields:
            bind[r.name] = e
            needed.discard(r.name)
    leaves = [row for _, row in in_block] + sorted(read_by_tables)
    rows, block = native_windows._levels(q, bind, block.implode(), needed, leaves, reads, writer, compiler)
    rows = {**{n: e for n, e in bind.items()}, **rows}

    def kept(e: pl.Expr) -> pl.Expr:
        return e if keep is None else e.filter(keep)

    stats: dict[str, pl.Expr] = {}
    for (how, row), (name, _) in zip(aggregated, q.aggs.values(), strict=True):
        if row not in windowed:
            stats[name] = getattr(kept(plain[row]), how)().cast(pl.Float64)
    if in_block:
        values = [getattr(rows[row], how)().cast(pl.Float64) for how, row in in_block]
        names_in = [name for (how, row), (name, _) in zip(aggregated, q.aggs.values(), strict=True) if row in windowed]
        stats[compiler._BLOCK + "\x00".join(names_in)] = block.list.eval(pl.concat_list(*values)).list.first()
    stages: list[_Stage] = []
    for fn, ref in q.tables.values():
        tag = _tag(fn)
        if tag is not None:
            stats |= _tagged(tag, ref, rows, block, compiler)
            continue
        stages += _table(plan, fn, ref, rows, block, stats, labels, compiler)
    return stats, stages


def _table(
    plan: Plan,
    fn: Any,
    ref: Any,
    rows: Mapping[str, pl.Expr],
    block: pl.Expr,
    stats: dict[str, pl.Expr],
    labels: dict[str, pl.Expr] | None,
    compiler: ModuleType,
) -> list[_Stage]:
    """One table over the block's rows: its ordered cells' aggregations and row totals into ``stats``."""
    import polars as pl

    cells_frame, table_rows = compiler._table(plan, fn, ref, rows)
    inside, outside, needed = cells_frame.split()
    in_table = native_tables.kept_rows(None, table_rows)  # the table's own row filter
    for name, c in outside.items():  # a total of the cells is the sum over the rows
        stats[name] = block.list.eval(in_table(table_rows[c]).sum()).list.first().cast(pl.Float64)
    if inside:
        order = table_rows[cells_frame.order]
        fields = [order.alias(compiler._ORDER), *[table_rows[c].alias(c) for c in needed]]
        # the order written once: a field of the rows, sorted by it in a second pass
        rows_of = block.list.eval(in_table(pl.struct(*fields)))
        sorted_rows = rows_of.list.eval(pl.element().sort_by(pl.element().struct.field(compiler._ORDER)))
        cells = compiler._cells_of(
            sorted_rows, [c for c in needed if c not in cells_frame.extremes], cells_frame.extremes
        )
        stats[compiler._BLOCK + "\x00".join(name for name, _ in inside)] = cells_frame.aggregations(cells, inside)
        if labels is not None:
            labels |= native_tables.labels_of(cells_frame)
    return list(cells_frame.after)


def order_inputs(
    plan: Plan, by: str | None, roles: Mapping[str, pl.Expr] | None, compiler: ModuleType
) -> dict[str, pl.Expr]:
    """The input columns of the windows' order row ``by`` and of each tagged table's time row as
    they are (dates, strings: ``native_windows.order_column``); an expression role's column is
    its expression (``native_roles``), not a column of its internal name."""
    times = [tag[2] for fn, _ in plan.query.tables.values() if (tag := _tag(fn)) is not None]
    out: dict[str, pl.Expr] = {}
    for row in [by, *times]:
        for name, col in native_windows.order_column(plan.query, row, compiler).items():
            out[name] = roles[name] if roles and name in roles else col
    return out


def _tagged(
    tag: tuple[str, ...], ref: Any, rows: Mapping[str, pl.Expr], block: pl.Expr, compiler: ModuleType
) -> dict[str, pl.Expr]:
    """The columns of a Diebold-Mariano table (``metrics.comparison``) from the block's rows.

    ``("lag_sum", c, t, h)``: ``sum_i c_i (C_(i-1) - C_(i-h))`` with ``C`` the
    running sum of ``c`` in ``t`` order (``C`` before the first row: 0), the
    horizon ``h`` one value per group.  ``("pooled", d, t, h)``: per time point
    the mean of ``d`` over the series (``dt``), then the number of time
    points ``T``, ``sum dt``, ``sum (dt - mean dt)^2`` and the lag sum of the
    centred ``dt``.  The block is sorted by ``t`` first (a second sort when
    the windows have another order).
    """
    import polars as pl

    kind, first, t, h = tag
    ordered = block.list.eval(pl.element().sort_by(rows[t]))
    horizon = rows[h].max().fill_null(1.0).cast(pl.Int64)

    def lag_sum(c: pl.Expr) -> pl.Expr:
        running = c.cum_sum()
        return (c * (running - c - running.shift(horizon).fill_null(0.0))).sum()

    if kind == "lag_sum":
        names, values = [ref.name("s")], [lag_sum(rows[first])]
    else:
        time = rows[t]
        starts = time.ne_missing(time.shift(1))  # the first row of each time point (sorted)
        dt = rows[first].mean().over(time).filter(starts)
        centred = dt - dt.mean()
        names = [ref.name(x) for x in ("T", "sum", "c2", "lag")]
        values = [starts.sum(), dt.sum(), (centred**2).sum(), lag_sum(centred)]
    value = pl.concat_list(*[v.cast(pl.Float64) for v in values])
    return {compiler._BLOCK + "\x00".join(names): ordered.list.eval(value).list.first()}
