"""Execution: run a compiled plan (numpy and per-group steps), evaluate, evaluate_one."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames.engine import _pandas_polars, _plan_cache
from conformal_frames.engine.plan import (
    _POLICY_COLUMNS,
    Compiled,
    _backend,
    _failed,
    _plan,
    _policy,
    _raise_checks,
    as_keys,
    compile_query,
    declared_dtypes,
    has_invalid,
    to_lazy,
)
from conformal_frames.engine.query import (
    _GID,
    _INVALID,
    _N,
    _OWN_MESSAGE,
    InvalidPolicy,
    Metric,
    Query,
    _GroupStep,
    _NumpyStep,
)

__all__ = ["compute", "evaluate", "evaluate_one"]


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
        return nw.maybe_reset_index(declared_dtypes(frame.select(*final_cols), q))
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
    uses (see :mod:`conformal_frames.engine._pandas_polars`), with the compiled
    queries of eager polars frames (``reusable``: see :mod:`conformal_frames.engine._plan_cache`).
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
