"""The plan of one evaluation: keys, checks, the invalid-row policy, compilation."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames.engine.query import (
    _DROPPED,
    _INVALID,
    _N,
    _VALID,
    RESERVED,
    InvalidPolicy,
    Metric,
    Query,
    _not_found,
    aggregate,
    indicator,
)

__all__ = [
    "Compiled",
    "as_keys",
    "check_counts",
    "compile_query",
    "complete_query",
    "declared_dtypes",
    "has_invalid",
    "invalid_mask",
    "policy",
    "to_lazy",
]


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
    (:func:`~conformal_frames.metrics.calibration.cumulative_differences`).
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
        built = m.build(q)
        q.output_dtypes.update(m.output_dtypes(built))
        for name, expr in m.outputs(built).items():
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
    # n: the rows, or the rows they represent (the sum of the counts=, see Query.counted)
    size = nw.len() if q.count_row is None else nw.col(q.count_row).sum()
    aggs = [size.alias(_N), *[e.alias(n) for n, e in q.aggs.values()]]
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
    counts = {getattr(m, "counts", None) for m in metrics}
    if len(counts) > 1:  # the group's n is the sum of the counts: one column for every metric
        shown = ", ".join(repr(c) for c in sorted(counts, key=str))
        msg = f"every metric of one evaluation takes the same counts= (it sets the group's n), got {shown}"
        raise ValueError(msg)
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
    each output's own dtype instead (see :mod:`conformal_frames.engine._pandas_polars`).
    An output of a declared dtype (``q.output_dtypes``, e.g. an Int64 count)
    is cast to it; on pandas after collecting (:func:`declared_dtypes`).
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
        final = {k: nw.when(valid).then(e).otherwise(null) for k, e in exprs.items()}
        if not _cast_after_collect(table):
            final |= {k: final[k].cast(t) for k, t in q.output_dtypes.items() if k in final}
        table = table.with_columns(*[e.alias(k) for k, e in final.items()])
    if q.group:
        table = table.sort(*q.group, nulls_last=True)
    return Compiled(table=table, query=q, names=list(outputs), rows=rows, policy=invalid)


def _cast_after_collect(table: nw.LazyFrame) -> bool:
    """Whether declared dtypes are set after collecting (pandas-like: a numpy int64 cannot hold a null)."""
    return table.implementation.is_pandas_like() or table.implementation.is_dask()


def declared_dtypes(frame: nw.DataFrame, q: Query) -> nw.DataFrame:
    """The collected result ``frame`` with the outputs of a declared dtype cast to it.

    Only pandas-like frames need it (elsewhere :func:`complete_query` casts):
    an integer output with nulls takes pandas' nullable dtype of its backend
    (``Int64`` for numpy columns, ``int64[pyarrow]`` for Arrow ones).
    """
    if not frame.implementation.is_pandas_like():
        return frame
    cast = {k: t for k, t in q.output_dtypes.items() if k in frame.columns and frame.schema[k] != t}
    if not cast:
        return frame
    native = frame.to_native().copy(deep=False)
    for k, t in cast.items():
        column = native[k]
        if t.is_integer() and isinstance(column.dtype, np.dtype) and column.isna().any():
            native[k] = column.astype("Int64")
        else:
            native[k] = frame.get_column(k).cast(t).to_native()
    return nw.from_native(native, eager_only=True)


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
