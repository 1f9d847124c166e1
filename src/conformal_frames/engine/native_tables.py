"""Tables of the polars target beyond sums of ordered cells (hooks of :mod:`~conformal_frames.engine.native`).

:mod:`~conformal_frames.engine.native` compiles a table function that groups a
group's rows by one column into sums (the ordered cells).  This module widens
what such a table may do, each rule a small function the recorder calls:

- :func:`row_count`: ``nw.len()`` in the rows' aggregation is the sum of a
  row column of ones (the reliability table's bin sizes);
- :func:`row_sum`: ``nw.col(x).sum().alias(y)`` sums the row column ``x``
  under another name;
- :func:`row_extreme` / :func:`cell_extremes`: ``nw.col(x).min()`` (or
  ``max``) per cell (path coverage: a path is covered when its least
  ``covered`` is 1) is the window ``min().over(cell)`` over the sorted rows;
- :func:`add_filter` / :func:`kept_rows`: ``rows.filter(...)`` before the
  grouping (weighted tables leave out rows of weight 0) is a row mask the
  table's aggregations apply with the invalid-row policy's;
- :func:`row_column`: a row column that is a window over the group's rows
  ordered by a row column (the miss runs' ids, a running count in time
  order) sorts every row column of the table by it (``sort_by``, stable),
  the row masks too; the window is then the expression on sorted rows;
- :func:`ordered_rows`: a row column of the query that is such a window
  (weighted quantile bins, rank bins) is refused with a message;
- :func:`composite_key` / :func:`key_fields`: rows grouped by several
  columns (top-label ECE's label and bin) are ordered cells of one struct
  key, its columns read as the key's fields;
- :func:`keyed`: a table function whose form without keys forks its frame
  (pit_test's KS cells: a base of one row joined to its maximum) is recorded
  with one key, :data:`GROUP`, standing for the whole group: a window over
  it is a window over the group, a grouping by it the aggregation
  (:class:`Whole`);
- :func:`key_inputs`: an input column read only as a grouping key of a
  table (path and group columns) keeps its dtype (strings) instead of the
  Float64 cast;
- :func:`cell_rows`: a sorted block's order and sums are leaves of the rows'
  binding (a long row such as the Gaussian PIT is bound once);
- :class:`Picked` (``cells.filter(least value)...select(...)`` joined back
  to the aggregation: coverage_gap's worst group): the picked cell's values
  are aggregations of the cells, its key columns (the group labels, in their
  own dtype) a struct beside the statistics (:func:`with_labels`);
- :func:`long_rows`: a metric's long table (``to_long`` of its wide outputs)
  as a list of structs per group (``cfx.long_table``).

The rules reach the compiler's recorder and conversion through
:func:`attach` (``native`` calls it once when imported).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import narwhals.stable.v2 as nw

from conformal_frames.engine import native_ensembles

if TYPE_CHECKING:
    import polars as pl

    from conformal_frames.engine.metric import Metric
    from conformal_frames.engine.plan import Plan
    from conformal_frames.engine.query import Query

__all__ = [
    "GROUP",
    "Picked",
    "Whole",
    "add_filter",
    "attach",
    "cell_extremes",
    "cell_rows",
    "composite_key",
    "join_picked",
    "kept_rows",
    "key_fields",
    "key_inputs",
    "keyed",
    "labels_of",
    "long_rows",
    "order_read",
    "ordered_rows",
    "picked_labels",
    "picked_values",
    "row_column",
    "row_count",
    "row_extreme",
    "row_sum",
    "widened",
    "with_labels",
    "write_labels",
]


#: the compiler (:mod:`~conformal_frames.engine.native`), attached by it when imported: these rules
#: extend its recorder and use its conversion, and an import of it here would be a cycle
_compiler: Any = None


def attach(compiler: Any) -> None:
    """Called once by :mod:`~conformal_frames.engine.native`: the module whose recorder these rules extend."""
    global _compiler
    _compiler = compiler


def row_count(expr: nw.Expr, native: pl.Expr) -> pl.Expr | None:
    """The row column whose sum is ``expr`` when ``expr`` counts the rows (``nw.len()``), else ``None``.

    ``native`` is ``expr`` in polars.  The ones are Float64: the cells are.
    """
    import polars as pl

    if str(native.meta.undo_aliases()) != str(pl.len()):
        return None
    return pl.lit(1.0, pl.Float64)


def row_sum(expr: nw.Expr, rows: Mapping[str, pl.Expr]) -> pl.Expr | None:
    """The row column whose sum is ``expr`` when ``expr`` is ``nw.col(x).sum()`` of a row column ``x``, else ``None``."""
    _is, _reads = _compiler._is, _compiler._reads

    read = _reads(expr)
    if len(read) != 1 or read[0] not in rows or not _is(expr, read[0], lambda c: c.sum()):
        return None
    return rows[read[0]]


def row_extreme(expr: nw.Expr, rows: Mapping[str, pl.Expr]) -> tuple[str, pl.Expr] | None:
    """``("min" | "max", row column)`` when ``expr`` is ``nw.col(x).min()`` / ``.max()`` of a row column, else ``None``."""
    _is, _reads = _compiler._is, _compiler._reads

    read = _reads(expr)
    if len(read) != 1 or read[0] not in rows:
        return None
    for how in ("min", "max"):
        if _is(expr, read[0], lambda c, how=how: getattr(c, how)()):
            return how, rows[read[0]]
    return None


def cell_extremes(order: pl.Expr, extremes: Mapping[str, str]) -> list[pl.Expr]:
    """Inside ``list.eval`` over a group's rows sorted by ``order``: each extreme column's value per cell
    (a window over the elementwise ``order``), read at the cell's last row as the running totals."""
    import polars as pl

    return [getattr(pl.element().struct.field(c), how)().over(order).alias(c) for c, how in extremes.items()]


#: the name of a table's row filter among its row columns (no row column has it)
_MASK = "\x00mask"


def add_filter(rows: dict[str, pl.Expr], predicates: Sequence[pl.Expr]) -> None:
    """Record ``rows.filter(*predicates)`` of a table's stand-in row frame (the filters add up)."""
    import polars as pl

    mask = pl.all_horizontal(*predicates) if len(predicates) != 1 else predicates[0]
    rows[_MASK] = mask if _MASK not in rows else rows[_MASK] & mask


def kept_rows(keep: pl.Expr | None, rows: Mapping[str, pl.Expr]) -> Callable[[pl.Expr], pl.Expr]:
    """A row expression restricted to the rows a table aggregates: ``keep`` (the rows the policy keeps)
    and the table's own filter, if any (in the table's row order: :func:`row_column`)."""
    mask = rows.get(_MASK)
    if keep is not None and _SORT in rows:
        keep = keep.sort_by(rows[_SORT], maintain_order=True)
    both = mask if keep is None else keep if mask is None else keep & mask

    def kept(e: pl.Expr) -> pl.Expr:
        return e if both is None else e.filter(both)

    return kept


#: the original-order key the table's rows are sorted by, among its row columns
_SORT = "\x00sort"


def row_column(expr: nw.Expr, rows: dict[str, pl.Expr]) -> pl.Expr:
    """``expr`` as a row column of a table's stand-in rows ``rows`` (updated when it sorts them).

    A window without partition ordered by a row column ``c`` (the group's
    rows in ``c`` order) sorts the rows by ``c`` once: every row column
    (and the table's row filter) is replaced by its sorted form, and the
    window is ``expr`` on the sorted rows.  Rows sorted by one column only.
    """
    NotAnExpressionError, to_polars = _compiler.NotAnExpressionError, _compiler.to_polars

    try:
        return to_polars(expr, rows, sorted_by="\x00unsorted")  # no ordered window
    except NotAnExpressionError:
        pass
    for name in [n for n in rows if not n.startswith("\x00")]:
        try:
            to_polars(expr, rows, sorted_by=name)  # the window's order is the row column `name`
        except NotAnExpressionError:
            continue
        if _SORT not in rows:
            key = rows[name]
            rows |= {n: e.sort_by(key, maintain_order=True) for n, e in rows.items()}
            rows[_SORT], rows[_SORT + name] = key, key
        if _SORT + name in rows:
            return to_polars(expr, rows, sorted_by=name)
    msg = "a window over the rows in an order other than one row column"
    raise NotAnExpressionError(msg)


def ordered_rows(plan: Plan) -> str | None:
    """Why ``plan`` cannot be an expression when a row column is a window (a running sum in score order:
    weighted quantile bins), or ``None``.  Windows inside a table's rows sort them (:func:`row_column`)."""
    NotAnExpressionError, _refused, to_polars = _compiler.NotAnExpressionError, _compiler._refused, _compiler.to_polars

    for r in plan.query.rows.values():
        try:
            to_polars(r.expr, {}, sorted_by="\x00unsorted")
        except NotAnExpressionError:
            metrics = ", ".join(s.metric for s in plan.specs)
            return _refused(metrics, "a window over the rows of a group")
    return None


#: a key column standing for the whole group (:func:`keyed`); no column has this name
GROUP = "\x00group"


def keyed(fn: Any, rows: Any, ref: Any) -> Any:
    """The table function ``fn`` recorded on the stand-in ``rows`` with the one key :data:`GROUP`."""
    return fn(rows, [GROUP], ref)


class Whole:
    """``cells.group_by(GROUP)``: its ``agg`` is the cells' aggregation (a ``select``)."""

    def __init__(self, cells: Any) -> None:
        self.cells = cells

    def agg(self, *exprs: nw.Expr) -> Any:
        return self.cells.select(*exprs)


def key_inputs(plan: Plan) -> set[str]:
    """The input columns read only as a grouping key of a table (directly, or through a row that is the column).

    Found by recording each table on a stand-in whose rows are the plain
    columns: the rows it groups by, traced to the inputs they are; an input
    another row reads (other than as itself) stays a Float64 input.
    """
    _AnyName, _is, _reads, _Rows = (
        _compiler._AnyName,
        _compiler._is,
        _compiler._reads,
        _compiler._Rows,
    )

    q = plan.query
    inputs = {name for spec in plan.specs for name, _ in spec.inputs}
    itself = {r.name: c for r in q.rows.values() for c in _reads(r.expr)[:1] if c in inputs and _is(r.expr, c, _same)}
    grouped: set[str] = set()
    for fn, ref in q.tables.values():
        stand_in = _Rows({})
        stand_in.rows = _AnyName()
        try:
            block = fn(cast("Any", stand_in), [], ref)
        except Exception:  # not a table of cells (the compile says why): its inputs stay cast
            continue
        order = stand_in.order or ""
        parts = set(order[len(_KEY) :].split("\x00")) if order.startswith(_KEY) else {order}
        if not parts & _cell_reads(block):  # the cells never read the key's values
            grouped |= parts
    read = {c for r in q.rows.values() if r.name not in itself for c in _reads(r.expr)}
    return {itself.get(k, k) for k in grouped if k not in read} & inputs - read


def _cell_reads(block: Any) -> set[str]:
    """The names the steps and aggregations of a recorded cell frame read (its key too when regrouped)."""
    out: set[str] = set()
    exprs = [e for _, e in getattr(block, "aggregated", [])]
    exprs += [e for stage in getattr(block, "after", []) for _, e in stage if isinstance(e, nw.Expr)]
    for kind, step in getattr(block, "steps", []):
        if kind == "cols":
            exprs += [e for _, e in step]
        elif kind == "group":
            out.add(step[0])
    for e in exprs:
        out |= set(_reads_of(e))
    return out


def order_read(block: Any) -> bool:
    """Whether the recorded cell frame ``block`` may read its cells' order value after the cells are made.

    Conservative: a composite key, a rename or regrouping of the cells, a
    picked cell, or a read of the order column by name keeps it.
    """
    steps = getattr(block, "steps", [])
    if block.order.startswith(_KEY) or "picked" in vars(block) or any(k in ("rename", "group") for k, _ in steps):
        return True
    return block.order in _cell_reads(block)


def _reads_of(expr: nw.Expr) -> list[str]:
    _reads = _compiler._reads

    return _reads(expr)


def widened(plan: Plan) -> bool:
    """Whether a table of ``plan`` compiles only through a rule of this module.

    ``evaluate`` keeps its narwhals query for such a plan: a hash group-by of
    the cells there, a sort per group here.  Measured (1e6 rows, 1,000
    groups, lazy, the compiled expression vs evaluate's narwhals query):
    reliability 0.49x, path_coverage 0.47x, longest_miss_run 0.84x its speed.
    An ensemble or randomized-PIT table (:class:`native_ensembles.NativeTable`) is not: measured at
    parity or faster (member-column ``pit_test`` 0.36x the time).
    """
    _AnyName, _Rows = _compiler._AnyName, _compiler._Rows
    for fn, ref in plan.query.tables.values():
        if isinstance(fn, native_ensembles.NativeTable):  # measured at parity or faster (native_ensembles)
            continue
        stand_in = _Rows({})
        stand_in.rows = _AnyName()
        try:
            block = fn(cast("Any", stand_in), [], ref)
        except Exception:  # recorded with a key (keyed) or not at all
            return True
        order = stand_in.order or ""
        if stand_in.widened or order.startswith(_KEY) or _SORT in dict(stand_in.rows) or "picked" in vars(block):
            return True
    return False


def _same(column: pl.Expr) -> pl.Expr:
    return column


def cell_rows(q: Query) -> list[str]:
    """The row columns the ordered cells of ``q`` read (each table's order and sums).

    Leaves of the rows' binding (:func:`native._rows`): a long row read there
    (the Gaussian PIT's normal CDF, a polynomial of ``z``) is then bound once
    in a row struct, not inlined at every read (pit_test: 117,000 to 11,000
    characters of plan, a group-by of 24 rows 0.42 s to 0.06 s).
    """
    out: list[str] = []
    for c in q.cell_tables.values():
        out += [c.order, *c.sums]
    return out


#: the name of a composite key among the row columns: this prefix, then its columns joined by NUL
_KEY = "\x00key\x00"


def composite_key(rows: dict[str, pl.Expr], keys: Sequence[str]) -> str:
    """A row column of ``rows``: the struct of the row columns ``keys`` (rows grouped by all of them); its name."""
    import polars as pl

    name = _KEY + "\x00".join(keys)
    rows[name] = pl.struct(*[rows[k].alias(k) for k in keys])
    return name


def key_fields(order: str, key: pl.Expr) -> dict[str, pl.Expr]:
    """The columns of the composite key ``order`` (:func:`composite_key`) as fields of its value ``key``."""
    if not order.startswith(_KEY):
        return {}
    return {k: key.struct.field(k) for k in order[len(_KEY) :].split("\x00")}


# -- a picked cell: the cell of the least values, joined back to the aggregation --------------------
class Picked:
    """``cells.filter(c == min(c))`` after the cells' aggregation, then ``select``: the cell of the least
    values of some columns in turn (ties: the next column), and the columns taken from it."""

    def __init__(self, cells: Any) -> None:
        self.cells = cells
        self.order: list[str] = []
        self.columns: dict[str, str] = {}  # output name -> cell column

    def filter(self, *predicates: nw.Expr) -> Picked:
        import polars as pl

        to_polars, _reads = _compiler.to_polars, _compiler._reads
        probe = pl.col("\x00probe")
        for p in predicates:
            read = _reads(p)
            least = len(read) == 2 and read[0] == read[1]
            if not least or str(to_polars(p, {read[0]: probe}, sorted_by="\x00none")) != str(probe == probe.min()):
                raise _compiler.NotAnExpressionError("a table that filters its cells other than to their least value")
            self.order.append(read[0])
        return self

    def select(self, *exprs: nw.Expr | str) -> Picked:
        for e in exprs:
            if isinstance(e, str):
                continue  # a group key
            read = _compiler._reads(e)
            if len(read) != 1 or not _compiler._is(e, read[0], _same):
                raise _compiler.NotAnExpressionError("a table that takes other than cell columns from a picked cell")
            self.columns[_compiler._output_name(e)] = read[0]
        return self

    def with_columns(self, *exprs: nw.Expr) -> Picked:
        if any(_compiler._reads(e) for e in exprs):  # a constant to join on is all a picked cell takes
            raise _compiler.NotAnExpressionError("a table that adds columns to a picked cell")
        return self

    def drop(self, *names: str) -> Picked:
        return self

    def __getattr__(self, name: str) -> Any:
        raise _compiler.NotAnExpressionError(f"a table whose picked cell takes {name}()")


def join_picked(cells: Any, other: Any) -> Any:
    """``aggregated.join(picked)``: the picked cell's columns join the aggregation (one row per group)."""
    if not isinstance(other, Picked) or other.cells is not cells or "picked" in vars(cells):
        raise _compiler.NotAnExpressionError("a table that joins frames other than its aggregation and one picked cell")
    cells.picked = other
    return cells


def _picked(cells: Any) -> list[tuple[str, nw.Expr, bool]]:
    """``(name, value, is_key)`` of each column taken from the picked cell of ``cells`` (none without one)."""
    picked: Picked | None = vars(cells).get("picked")
    if picked is None:
        return []
    mask: nw.Expr | None = None
    for c in picked.order:  # the least of each column among the cells still tied
        column = nw.col(c) if mask is None else nw.col(c).filter(mask)
        least = nw.col(c) == column.min()
        mask = least if mask is None else mask & least
    order: str = cells.order
    keys = {order, *(order[len(_KEY) :].split("\x00") if order.startswith(_KEY) else [])}
    out = []
    for name, c in picked.columns.items():
        value = nw.col(c) if mask is None else nw.col(c).filter(mask)
        out.append((name, value.first(), c in keys))
    return out


def picked_values(cells: Any) -> list[tuple[str, nw.Expr]]:
    """The picked cell's columns that are cell values (counts): aggregations of the cells, Float64."""
    return [(n, e) for n, e, is_key in _picked(cells) if not is_key]


def picked_labels(cells: Any) -> list[tuple[str, nw.Expr]]:
    """The picked cell's key columns (group labels): written beside the aggregation in their own dtype."""
    return [(n, e) for n, e, is_key in _picked(cells) if is_key]


def write_labels(cells: Any, block: pl.Expr, convert: Callable[[nw.Expr], pl.Expr]) -> None:
    """Record on ``cells`` the struct of its picked labels over the cells ``block`` (see :func:`labels_of`)."""
    import polars as pl

    labels = picked_labels(cells)
    if labels:
        cells.labels = block.list.eval(pl.struct(*[convert(e).alias(n) for n, e in labels])).list.first()
        cells.label_names = [n for n, _ in labels]


def labels_of(cells: Any) -> dict[str, pl.Expr]:
    """Output name -> the picked label of each group (a field of :func:`write_labels`' struct)."""
    struct = vars(cells).get("labels")
    return {} if struct is None else {n: struct.struct.field(n) for n in cells.label_names}


def with_labels(expr: pl.Expr, labels: Mapping[str, pl.Expr]) -> pl.Expr:
    """The struct ``expr`` of the outputs with the ``labels`` in place of its null fields of those names.

    A label is not nulled with the group's other outputs under ``"null"``:
    ``evaluate`` takes it from the table as it is (the least cell of all the
    group's rows).  ``struct.with_fields`` keeps the fields' order (and
    computes the struct once; a struct of its fields read one by one
    recomputed it per field: coverage_gap grouped at 1e6 rows, 843 vs 183 ms).
    """
    return expr.struct.with_fields(*[e.alias(k) for k, e in labels.items()])


# -- long tables: a metric's to_long as a list of structs ---------------------------------------
def long_rows(metric: Metric, wide: pl.Expr, names: Sequence[str]) -> pl.Expr:
    """``metric``'s long table (:meth:`Metric.to_long`) of one group as a list of structs.

    ``wide`` is the group's wide outputs (a struct, or a Float64 named
    ``names[0]``), ``names`` its fields.  ``to_long`` runs on a stand-in
    narwhals frame (:class:`_LongTable`) whose rows are a list of structs:
    ``select`` / ``with_columns`` / ``filter`` / ``sort`` become
    ``list.eval`` of the struct elements, a ``concat`` of frames
    ``pl.concat_list``; so ``.explode().struct.unnest()`` after a group-by
    gives the rows of ``df.conformal.<metric>(..., by=)``.  The frame is
    narwhals' polars lazy frame over the stand-in: the second use of
    narwhals' compliant layer (after :func:`native.to_polars`), pinned by
    ``tests/test_polars_long_tables.py``.
    """
    import polars as pl
    from narwhals._utils import Version

    struct = wide if len(names) > 1 else pl.struct(wide.alias(names[0]))
    table = _LongTable(pl.concat_list(struct), list(names))
    frame: nw.LazyFrame[Any] = nw.LazyFrame(_long_frame()(table, version=Version.V2), level="lazy")
    try:
        out = metric.to_long(frame, [])
    except AttributeError as exc:  # an operation the stand-in does not record
        NotAnExpressionError, _refused = _compiler.NotAnExpressionError, _compiler._refused

        raise NotAnExpressionError(_refused(metric.output_name, f"a long table built with {exc}")) from None
    long: _LongTable = out._compliant_frame.native
    return long.rows


class _LongTable:
    """A stand-in for a polars LazyFrame: its rows as a list of structs, and its column names."""

    def __init__(self, rows: pl.Expr, names: list[str]) -> None:
        self.rows = rows
        self.names = names

    def collect_schema(self) -> pl.Schema:
        import polars as pl

        return pl.Schema(dict.fromkeys(self.names, pl.Float64))  # the names matter, not the dtypes

    @property
    def columns(self) -> list[str]:
        return list(self.names)

    def select(self, *exprs: pl.Expr | str) -> _LongTable:
        import polars as pl

        fields = [_field(e) if isinstance(e, str) else e for e in exprs]
        return _LongTable(self.rows.list.eval(pl.struct(*fields)), [e.meta.output_name() for e in fields])

    def with_columns(self, *exprs: pl.Expr) -> _LongTable:
        import polars as pl

        added = [n for n in (e.meta.output_name() for e in exprs) if n not in self.names]
        return _LongTable(self.rows.list.eval(pl.element().struct.with_fields(*exprs)), [*self.names, *added])

    def filter(self, *predicates: pl.Expr) -> _LongTable:
        import polars as pl

        return _LongTable(self.rows.list.eval(pl.element().filter(*predicates)), self.names)

    def sort(self, by: Any, *more: Any, descending: Any = False, nulls_last: Any = False, **_: Any) -> _LongTable:
        import polars as pl

        keys = [_field(b) if isinstance(b, str) else b for b in [*([by] if isinstance(by, str) else by), *more]]
        ordered = pl.element().sort_by(*keys, descending=descending, nulls_last=nulls_last, maintain_order=True)
        return _LongTable(self.rows.list.eval(ordered), self.names)


def _field(name: str) -> pl.Expr:
    import polars as pl

    return pl.element().struct.field(name)


@functools.cache
def _long_frame() -> type:
    """narwhals' polars lazy frame over a :class:`_LongTable`: its columns are the struct fields of the rows."""
    import polars as pl
    from narwhals._polars.dataframe import PolarsLazyFrame
    from narwhals._polars.expr import PolarsExpr
    from narwhals._polars.namespace import PolarsNamespace

    class Namespace(PolarsNamespace):
        def col(self, *names: str) -> PolarsExpr:
            return PolarsExpr(_field(names[0]) if len(names) == 1 else pl.col(*names), version=self._version)

        def concat(self, items: Any, *, how: str) -> Any:
            tables = [item.native for item in items]
            rows = pl.concat_list(*[t.rows for t in tables])
            return Frame(cast("Any", _LongTable(rows, tables[0].names)), version=self._version)

    class Frame(PolarsLazyFrame):
        def __narwhals_namespace__(self) -> Any:
            return Namespace(version=self._version)

    return Frame
