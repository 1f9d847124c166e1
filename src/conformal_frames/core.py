"""The one core: compile metrics into a single narwhals query.

Every metric is split into *sufficient statistics* (row-level columns and
elementary aggregations per group) and a *finalize* step (expressions over the
aggregated columns).  :func:`evaluate` merges the statistics of all metrics of
one call into a single query:

1. one ``select`` of the group keys and every row-level column the metrics ask
   for (shared columns are registered once, by a structural key);
2. one ``group_by(keys).agg(...)`` of elementary aggregations
   (``sum``/``min``/``max``/``len``), including the counts of invalid rows;
3. optional *tables*: sub-queries over the same row-level frame that need a
   second aggregation level (size-stratified bins, calibration bins, ordered
   cumulative sums), joined back on the keys;
4. finalize expressions over the aggregated columns;
5. optional numpy steps on the aggregated table (one row per group) for special
   functions with no closed form, and per-group numpy steps for metrics that
   need all rows of a group at once (HSIC).

Steps 1-4 stay lazy on every backend.  Step 5 stays lazy on polars (through
``map_batches``) and is eager-only elsewhere, with an error naming the backend.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames.results import TestResult

__all__ = ["Metric", "Query", "compute", "evaluate"]

ResultKind = Literal["score", "test", "table"]
NumpyFn = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
GroupFn = Callable[[np.ndarray, int, dict[str, np.ndarray]], np.ndarray]
TableFn = Callable[[nw.LazyFrame, list[str]], nw.LazyFrame]

_INVALID = "__cf_invalid"
_N = "__cf_n"
_GID = "__cf_gid"
_OWN_MESSAGE = "conformal-frames: "


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
    rows: dict[Hashable, tuple[str, nw.Expr, int]] = field(default_factory=dict)
    aggs: dict[Hashable, tuple[str, nw.Expr]] = field(default_factory=dict)
    checks: dict[str, str] = field(default_factory=dict)
    #: check message -> aggregated column with an offending value (see :meth:`check`)
    examples: dict[str, str] = field(default_factory=dict)
    tables: dict[Hashable, tuple[TableFn, list[str]]] = field(default_factory=dict)
    finalizers: dict[Hashable, Callable[[nw.LazyFrame], nw.LazyFrame]] = field(default_factory=dict)
    numpy_steps: list[_NumpyStep] = field(default_factory=list)
    group_steps: dict[str, _GroupStep] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    #: aggregated column counting invalid rows (set by compile_query)
    invalid: str = _INVALID

    # -- inputs -----------------------------------------------------------
    def column(self, name: str) -> nw.Expr:
        """An input column, checked to exist (any dtype)."""
        if not isinstance(name, str):
            msg = f"column names must be strings, got {name!r} ({type(name).__name__})"
            raise TypeError(msg)
        if name not in self.schema:
            available = ", ".join(repr(c) for c in self.schema)
            msg = f"column {name!r} not found; available columns: {available}"
            raise ValueError(msg)
        if name in self.keys:
            msg = f"column {name!r} is both a group key (by=) and a metric input"
            raise ValueError(msg)
        self.used.add(name)
        return nw.col(name)

    def number(self, name: str) -> nw.Expr:
        """A numeric input column as Float64; missing/NaN/inf rows are invalid."""
        expr = self.column(name)
        dtype = self.schema[name]
        if not dtype.is_numeric():
            msg = f"column {name!r} must be numeric, found dtype {dtype}; cast it to a float or integer type first"
            raise TypeError(msg)
        value = expr.cast(nw.Float64)
        self.check(
            f"column {name!r} has missing (null/NaN) or infinite values",
            value.is_null() | ~value.is_finite(),
        )
        return value

    # -- registration -----------------------------------------------------
    def row(self, key: Hashable, expr: nw.Expr, *, level: int = 0) -> str:
        """Register a row-level column; returns its (internal) name.

        Level-0 columns are computed from the input columns; a level-``k``
        column may use the columns of lower levels.
        """
        if key not in self.rows:
            self.rows[key] = (f"__cf_r{len(self.rows)}", expr, level)
        return self.rows[key][0]

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
        """Number of rows in the group."""
        return nw.col(_N)

    def check(self, message: str, bad: nw.Expr, *, example: nw.Expr | None = None) -> None:
        """Rows where ``bad`` is true make the group invalid.

        Eager input: a ValueError ``"<message> in <count> rows"`` (or the
        message with ``{rows}`` replaced by the count).  Lazy input:
        the group's metric columns are null and ``n_invalid`` counts the rows.
        With ``example`` (an expression, e.g. the offending column), the eager
        error also names the smallest offending value: ``"..., e.g. 7"``.
        """
        if message not in self.checks:
            name = self.row(("check", message), bad.cast(nw.Float64))
            self.checks[message] = name
            if example is not None:
                shown = self.row(("check_example", message), nw.when(bad).then(example))
                self.examples[message] = self.agg("min", shown)

    def table(self, key: Hashable, fn: TableFn, columns: list[str]) -> None:
        """A sub-query over the row-level frame returning keys + ``columns``.

        Prefer main-aggregation statistics (:meth:`sum` ...) plus
        :meth:`finalize` where the math allows: a table is a second pass over
        the rows, and polars caches the shared row frame in memory when a
        query uses it twice (streaming then holds the whole input).
        """
        self.tables.setdefault(key, (fn, columns))

    def finalize(self, key: Hashable, fn: Callable[[nw.LazyFrame], nw.LazyFrame]) -> None:
        """A multi-step finalize: ``fn(table) -> table`` adds columns to the
        aggregated table (one row per group) before the output expressions,
        e.g. a p-value series computed in several ``with_columns`` steps."""
        self.finalizers.setdefault(key, fn)

    def numpy(
        self, inputs: list[str], outputs: list[str], fn: NumpyFn, *, what: str, boolean: Sequence[str] = ()
    ) -> None:
        """A numpy step over the aggregated table (one row per group).

        Outputs named in ``boolean`` are Boolean columns (``fn`` returns 0/1;
        NaN becomes False), the others Float64.
        """
        self.numpy_steps.append(_NumpyStep(inputs, outputs, fn, what, tuple(boolean)))

    def per_group(self, output: str, rows: list[str], fn: GroupFn, *, what: str) -> None:
        """A numpy step that needs the rows of every group (e.g. HSIC).

        ``fn(group_index, n_groups, {row_name: values})`` returns one value per
        group, written to the output column ``output``; the metric's
        :meth:`Metric.build` returns ``None`` for that output.
        """
        self.group_steps[output] = _GroupStep(rows, output, fn, what)


@dataclass(frozen=True, kw_only=True)
class Metric:
    """Base class of metric objects (like polars expressions).

    Subclasses define ``default_name``, ``kind`` and :meth:`build`, which
    registers the metric's statistics on a :class:`Query` and returns its
    finalize expressions: ``{suffix: expr}``, the main output under ``""``.
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


# ---------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------
def _as_keys(by: str | Sequence[str] | None) -> list[str]:
    if by is None:
        return []
    if isinstance(by, str):
        return [by]
    keys = list(by)
    if not all(isinstance(k, str) for k in keys):
        msg = f"by= must be a column name or a list of column names, got {by!r}"
        raise TypeError(msg)
    if len(set(keys)) != len(keys):
        msg = f"by= has duplicate columns: {keys!r}"
        raise ValueError(msg)
    return keys


def _to_lazy(frame: Any) -> tuple[nw.LazyFrame, bool]:
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
    _check_unique_columns(list(nw_frame.columns))
    if isinstance(nw_frame, nw.DataFrame):
        return nw_frame.lazy(), True
    return nw_frame, False


def _check_unique_columns(columns: list[str]) -> None:
    seen: set[str] = set()
    repeated = sorted({c for c in columns if c in seen or seen.add(c)})  # type: ignore[func-returns-value]
    if repeated:
        msg = f"the frame has duplicate column names {repeated!r}; rename them first"
        raise ValueError(msg)


def _check_keys(schema: Mapping[str, Any], keys: list[str]) -> None:
    for k in keys:
        if k not in schema:
            available = ", ".join(repr(c) for c in schema)
            msg = f"group column {k!r} (by=) not found; available columns: {available}"
            raise ValueError(msg)


def _backend(lf: nw.LazyFrame) -> str:
    return str(lf.implementation).split(".")[-1].lower()


def _rows_frame(lf: nw.LazyFrame, q: Query) -> nw.LazyFrame:
    levels = sorted({lvl for _, _, lvl in q.rows.values()})
    by_level = {lvl: [e.alias(n) for n, e, lv in q.rows.values() if lv == lvl] for lvl in levels}
    rows = lf.select(*[nw.col(k).alias(ik) for k, ik in zip(q.keys, q.group)], *by_level.get(0, []))
    for lvl in levels:
        if lvl > 0:
            rows = rows.with_columns(*by_level[lvl])
    return rows


def _aggregate(rows: nw.LazyFrame, keys: list[str], aggs: list[nw.Expr]) -> nw.LazyFrame:
    if keys:
        return rows.group_by(*keys).agg(*aggs)
    return rows.select(*aggs)


def _join(left: nw.LazyFrame, right: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
    if keys:
        return left.join(right, on=keys, how="left")
    return left.join(right, how="cross")


def compile_query(
    lf: nw.LazyFrame, metrics: Sequence[Metric], keys: list[str], *, eager: bool = False
) -> tuple[nw.LazyFrame, Query, list[str]]:
    """Compile ``metrics`` into one lazy query.

    Returns the query (keys, outputs, ``n`` and internal check columns), the
    registry, and the output column names in order.
    """
    schema = lf.collect_schema()
    _check_keys(schema, keys)
    ikeys = [f"__cf_k{i}" for i in range(len(keys))]
    q = Query(schema=schema, keys=keys, group=ikeys)
    for k in keys:
        q.check(f"group column {k!r} (by=) has null values in {{rows}}; fill or drop them first", nw.col(k).is_null())
    outputs: dict[str, nw.Expr | None] = {}
    for m in metrics:
        if not isinstance(m, Metric):
            msg = f"expected metric objects such as cf.coverage(...), got {m!r}"
            raise TypeError(msg)
        for name, expr in m.outputs(m.build(q)).items():
            if name in outputs or name in keys or name == "n":
                msg = f"two outputs are named {name!r}; rename one with .alias()"
                raise ValueError(msg)
            outputs[name] = expr
    checks = list(q.checks.values())
    if eager:
        # eager input raises on any invalid row: the check sums suffice (no
        # row-level "any invalid" column); the mask only guards empty groups
        inv = _INVALID
    else:
        # lazy input: n_invalid counts rows with at least one problem
        invalid = nw.any_horizontal(*[nw.col(c) > 0 for c in checks], ignore_nulls=True) if checks else nw.lit(False)
        inv = q.row(_INVALID, invalid.cast(nw.Float64), level=max([lv for *_, lv in q.rows.values()], default=0) + 1)
    rows = _rows_frame(lf, q)
    aggs = [nw.len().alias(_N), *[e.alias(n) for n, e in q.aggs.values()]]
    aggs += [nw.col(c).sum().alias(c) for c in [*checks, *([] if eager else [inv])]]
    table = _aggregate(rows, ikeys, aggs)
    if eager:
        table = table.with_columns((nw.sum_horizontal(*checks) if checks else nw.lit(0.0)).alias(inv))
    q.invalid = inv
    for fn, _cols in q.tables.values():
        table = _join(table, fn(rows, ikeys), ikeys)
    for finalize in q.finalizers.values():
        table = finalize(table)
    valid = (nw.col(inv) == 0) & (nw.col(_N) > 0)
    expr_outputs = {k: v for k, v in outputs.items() if v is not None}
    if expr_outputs:
        table = table.with_columns(
            *[nw.when(valid).then(e).otherwise(nw.lit(None, nw.Float64)).alias(k) for k, e in expr_outputs.items()]
        )
    if ikeys:
        table = table.sort(*ikeys, nulls_last=True)
    q._rows_lf = rows  # type: ignore[attr-defined]
    return table, q, list(outputs)


def _numpy_apply(frame: nw.DataFrame, q: Query) -> nw.DataFrame:
    cols: dict[str, np.ndarray] = {}
    for step in q.numpy_steps:
        data = {c: frame.get_column(c).to_numpy().astype(float) for c in step.inputs}
        data.update({c: v for c, v in cols.items() if c in step.inputs})
        result = step.fn(data)
        cols.update({k: np.asarray(result[k], dtype=float) for k in step.outputs})
    if not cols:
        return frame
    valid = (frame.get_column(q.invalid).to_numpy() == 0) & (frame.get_column(_N).to_numpy() > 0)
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
    valid = (frame.get_column(q.invalid).to_numpy() == 0) & (frame.get_column(_N).to_numpy() > 0)
    for step in q.group_steps.values():
        values = np.asarray(step.fn(group_index, n_groups, {c: data[c] for c in step.rows}), dtype=float)
        new.append(nw.new_series(step.output, np.where(valid, values, np.nan), nw.Float64, backend=ns).fill_nan(None))
    return frame.with_columns(*new)


def _raise_checks(frame: nw.DataFrame, q: Query) -> None:
    for message, col in q.checks.items():
        count = int(np.nansum(frame.get_column(col).to_numpy().astype(float)))
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


def _finish(table: nw.LazyFrame, q: Query, names: list[str], keys: list[str], eager: bool, backend: str) -> Any:
    inv = q.invalid
    final_cols = [*[nw.col(ik).alias(k) for k, ik in zip(keys, q.group)], *names, nw.col(_N).cast(nw.Int64).alias("n")]
    if eager:
        frame = table.collect()
        _raise_checks(frame, q)
        frame = _group_apply(frame, q._rows_lf, q)  # type: ignore[attr-defined]
        frame = _numpy_apply(frame, q)
        return nw.maybe_reset_index(frame.select(*final_cols))
    if q.group_steps or q.numpy_steps:
        if table.implementation.is_polars():
            return _polars_lazy_steps(table, q, keys, final_cols)
        what = "; ".join(sorted({s.what for s in [*q.group_steps.values(), *q.numpy_steps]}))
        msg = _OWN_MESSAGE + (
            f"{what} cannot stay lazy on the {backend} backend; collect the frame first "
            "(e.g. .collect() / .toPandas()) and evaluate the eager frame, or use polars"
        )
        raise NotImplementedError(msg)
    return table.select(*final_cols, nw.col(inv).cast(nw.Int64).alias("n_invalid"))


def _polars_lazy_steps(table: nw.LazyFrame, q: Query, keys: list[str], final_cols: list[nw.Expr | str]) -> nw.LazyFrame:
    """Numpy steps on a polars LazyFrame, kept lazy with ``map_batches``."""
    rows_native = q._rows_lf.to_native()  # type: ignore[attr-defined]
    inv = q.invalid

    def run(df: Any) -> Any:
        frame = nw.from_native(df, eager_only=True)
        frame = _group_apply(frame, nw.from_native(rows_native), q)
        frame = _numpy_apply(frame, q)
        return frame.select(*final_cols, nw.col(inv).cast(nw.Int64).alias("n_invalid")).to_native()

    native = table.to_native()
    schema = native.collect_schema()
    import polars as pl  # only reached for polars input

    out_schema = {k: schema[ik] for k, ik in zip(keys, q.group)}
    # outputs already in the table keep their dtype (e.g. a worst-group label); numpy outputs are Float64
    out_schema.update({c: schema.get(c, pl.Float64) for c in final_cols if isinstance(c, str)})
    out_schema.update({k: pl.Boolean for s in q.numpy_steps for k in s.boolean})
    out_schema["n"] = pl.Int64
    out_schema["n_invalid"] = pl.Int64
    return nw.from_native(native.map_batches(run, schema=pl.Schema(out_schema), streamable=False))


def compute(
    frame: Any, metrics: Sequence[Metric], by: str | Sequence[str] | None = None
) -> nw.LazyFrame | nw.DataFrame:
    """Narwhals-level evaluation: a narwhals DataFrame (eager) or LazyFrame."""
    lf, eager = _to_lazy(frame)
    keys = _as_keys(by)
    for m in metrics:
        lf = m.prepare(lf) if isinstance(m, Metric) else lf
    try:
        table, q, names = compile_query(lf, metrics, keys, eager=eager)
        return _finish(table, q, names, keys, eager, _backend(lf))
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


def evaluate(frame: Any, *metrics: Metric, by: str | Sequence[str] | None = None) -> Any:
    """Evaluate any number of metrics in one pass.

    Parameters
    ----------
    frame
        Any frame narwhals supports: pandas, polars (eager or lazy), DuckDB,
        PySpark, Dask, ...
    *metrics
        Metric objects, e.g. ``cf.coverage("y", "lo", "hi")``.
    by
        Group column(s).  ``None`` evaluates the whole frame (one row).

    Returns
    -------
    frame
        A frame of the caller's type: group keys, one column per metric output,
        ``n``; sorted by the keys.  Eager in, eager out; lazy in, lazy out (with
        an extra ``n_invalid`` column: groups with invalid rows get null metrics).

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
    return nw.to_native(compute(frame, metrics, by))


def evaluate_one(frame: Any, metric: Metric, by: str | Sequence[str] | None = None) -> Any:
    """A single metric with the return contract of the ``.conformal`` methods."""
    result = compute(frame, [metric], by)
    keys = _as_keys(by)
    if metric.long:
        lazy = result if isinstance(result, nw.LazyFrame) else result.lazy()
        long = metric.to_long(lazy, keys)
        return nw.to_native(long if isinstance(result, nw.LazyFrame) else nw.maybe_reset_index(long.collect()))
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
