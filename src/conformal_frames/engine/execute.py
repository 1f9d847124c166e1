"""Execution: run a compiled plan (numpy and per-group steps), evaluate, evaluate_one."""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import narwhals.stable.v2 as nw

from conformal_frames._progress import task
from conformal_frames._roles import Column
from conformal_frames.engine import _pandas_polars, _plan_cache, _polars_native, family_drop
from conformal_frames.engine._spark_build import spark_functions_kept
from conformal_frames.engine.expr import polars_in_memory, spark_call_sites_off
from conformal_frames.engine.metric import Metric
from conformal_frames.engine.plan import (
    Plan,
    as_keys,
    backend_name,
    check_index_keys,
    compile_query,
    normalized_keys,
    policy,
    to_lazy,
)
from conformal_frames.engine.query import InvalidPolicy, Query
from conformal_frames.engine.roles import resolve_roles
from conformal_frames.errors import BackendLimitError, user_stacklevel

__all__ = ["compute", "evaluate", "evaluate_one"]


def compute(
    frame: Any,
    metrics: Sequence[Metric],
    by: Any = None,
    *,
    invalid: InvalidPolicy | None = None,
    per_metric: bool = True,
) -> nw.LazyFrame | nw.DataFrame:
    """Narwhals-level evaluation: a narwhals DataFrame (eager) or LazyFrame.

    Lazy calls on classic PySpark frames keep their result for the next
    identical call (see :mod:`conformal_frames.engine._plan_cache`).
    Roles given as expressions are evaluated first (:func:`resolve_roles`).
    ``per_metric=False``: under ``"drop"`` a row failing a check of any
    metric leaves all of them (one ``n`` for every metric, as a report
    table's; :mod:`~conformal_frames.engine.family_drop` otherwise).
    """
    frame, by = resolve_roles(frame, metrics, by)
    return _resolved(frame, metrics, by, invalid=invalid, per_metric=per_metric)


def _resolved(
    frame: Any,
    metrics: Sequence[Metric],
    by: Any = None,
    *,
    invalid: InvalidPolicy | None = None,
    per_metric: bool = True,
) -> nw.LazyFrame | nw.DataFrame:
    """:func:`compute` of a frame whose expression roles are resolved already."""
    run = functools.partial(_compute, frame, metrics, by, invalid=invalid, per_metric=per_metric)
    if not _plan_cache.spark_classic(frame):
        return run()
    with spark_call_sites_off(), spark_functions_kept():  # py4j round trips of a build (issue 38 item 9)
        if invalid == "raise":  # runs its checks when called: built on every call
            return run()
        key = (tuple(metrics), tuple(as_keys(by)), invalid, per_metric)
        return _plan_cache.kept(frame, key, run)


def _compute(
    frame: Any,
    metrics: Sequence[Metric],
    by: Any = None,
    *,
    invalid: InvalidPolicy | None = None,
    per_metric: bool = True,
) -> nw.LazyFrame | nw.DataFrame:
    return _notify(_computed(frame, metrics, by, invalid=invalid, per_metric=per_metric), metrics)


def _computed(
    frame: Any,
    metrics: Sequence[Metric],
    by: Any = None,
    *,
    invalid: InvalidPolicy | None = None,
    per_metric: bool = True,
) -> nw.LazyFrame | nw.DataFrame:
    lf, eager = to_lazy(frame)
    keys = as_keys(by)
    check_index_keys(frame, keys)
    chosen = policy(invalid, eager)
    for m in metrics:
        lf = m.prepare(lf) if isinstance(m, Metric) else lf
    lf = normalized_keys(lf, keys)
    if chosen == "drop" and per_metric and len(metrics) > 1:  # each metric on its own valid rows (family_drop)
        how = family_drop.split(lf.collect_schema(), metrics, keys)
        if how is not None:
            again = functools.partial(_computed, by=by, invalid="drop")
            collect = functools.partial(_collect_options, frame, lf)
            return family_drop.run(frame, lf, metrics, keys, how, again, eager=eager, collect_options=collect)
    # polars: the compiled expressions (one metric; see _polars_native)
    native = _polars_native.run(frame, lf, metrics, keys, chosen, eager=eager, collect_options=_collect_options)
    if native is not None:
        return native
    try:
        # metrics that reshape the input (prepare) compile on every call
        reusable = bool(metrics) and all(isinstance(m, Metric) and not m.reshapes for m in metrics)
        if eager:
            fast = _pandas_by_polars(lf, metrics, keys, chosen, reusable=reusable)
            if fast is not None:
                return fast
        options = _collect_options(frame, lf) if eager else {}
        with _plan_cache.bound(frame, lf, metrics, keys, chosen, compile_query, reusable=reusable) as compiled:
            return compiled.finish(eager=eager, collect_options=options)
    except BackendLimitError:
        raise
    except (NotImplementedError, RuntimeError) as exc:
        if not isinstance(exc, NotImplementedError) and not _raised_by_narwhals(exc):
            raise  # a real failure, not a backend limitation
        # an operation the backend (through narwhals) cannot run: say which
        # metrics were asked for and the way out, keep the original reason
        backend = backend_name(lf)
        asked = ", ".join(m.output_name for m in metrics if isinstance(m, Metric))
        msg = (
            f"{asked}: the {backend} backend cannot run an operation these metrics need "
            f"({exc}); collect the data to pandas or polars first, or use polars"
        )
        raise BackendLimitError(msg, backend=backend) from exc


#: eager polars frames up to this many rows run on polars' in-memory engine: on a small
#: frame it answers in about two thirds of the streaming engine's time (polars 2.1)
IN_MEMORY_ROWS = 100_000


#: eager polars frames up to this many rows skip polars' query optimizer, as polars' own
#: eager methods do: on 1e3 rows it costs more than it saves (``coverage`` about 0.2-0.4 ms
#: of 1.3-1.7 ms, the 8 single-pass metrics about 1 ms of 4.5 ms); from about 1e4 rows
#: with the sort-based metrics its common subexpressions pay (polars 2.1)
NO_OPTIMIZER_ROWS = 10_000


def _collect_options(frame: Any, lf: nw.LazyFrame) -> dict[str, Any]:
    """The ``collect`` options of an eager call: on a small polars frame, the in-memory engine, no optimizer."""
    if not lf.implementation.is_polars():
        return {}
    native = frame.to_native() if isinstance(frame, nw.DataFrame) else frame
    rows = len(native)
    return {**(polars_in_memory() if rows <= IN_MEMORY_ROWS else {}), **_no_optimizer(rows)}


def _no_optimizer(rows: int) -> dict[str, Any]:
    """``collect`` options that skip polars' optimizer on a frame of at most ``NO_OPTIMIZER_ROWS`` rows."""
    if rows > NO_OPTIMIZER_ROWS:
        return {}
    flags = _no_optimizations()
    return {} if flags is None else {"optimizations": flags}


@functools.cache
def _no_optimizations() -> Any:
    """polars' ``QueryOptFlags.none()``, built once (``None`` before polars 1.30).

    One object serves every call: polars copies the flags before it changes them.
    """
    import polars as pl  # a polars frame is being collected

    flags = getattr(pl, "QueryOptFlags", None)  # polars >= 1.30
    return None if flags is None else flags.none()


def _notify(result: nw.DataFrame | nw.LazyFrame, metrics: Sequence[Metric]) -> nw.DataFrame | nw.LazyFrame:
    """Warn about the metrics' counted notices (:meth:`Metric.notices`) of an eager result.

    One warning per call, at the user's line: the metrics with the same notice
    share one line of it (``"pinball_loss, wis: crossing quantiles in 6 rows, ..."``).
    """
    if isinstance(result, nw.DataFrame):
        lines: dict[str, list[str]] = {}
        for m in metrics:
            for column, message in (m.notices() if isinstance(m, Metric) else {}).items():
                if column in result.columns:
                    count = int(result.get_column(column).fill_null(0).sum())
                    if count > 0:
                        rows = f"{count} row" + ("" if count == 1 else "s")
                        name, sep, body = message.format(count=count, rows=rows).partition(": ")
                        lines.setdefault(body if sep else name, []).extend([name] if sep else [])
        if lines:
            text = "\n".join(f"{', '.join(names)}: {body}" if names else body for body, names in lines.items())
            warnings.warn(text, UserWarning, stacklevel=user_stacklevel())
    return result


def _raised_by_narwhals(exc: BaseException) -> bool:
    """Whether narwhals raised ``exc`` itself (its backends word their limits as RuntimeError, e.g. Dask's)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and str(tb.tb_frame.f_globals.get("__name__", "")).startswith("narwhals")


def _pandas_by_polars(
    lf: nw.LazyFrame, metrics: Sequence[Metric], keys: list[str], policy: InvalidPolicy, *, reusable: bool
) -> nw.DataFrame | None:
    """An eager pandas evaluation run by polars, or ``None`` for the pandas path.

    The query is planned on the pandas schema (so errors about columns and
    dtypes are the pandas path's), then run on a polars copy of the columns it
    uses (see :mod:`conformal_frames.engine._pandas_polars`), with the compiled
    queries of eager polars frames (``reusable``: see :mod:`conformal_frames.engine._plan_cache`).
    A polars error (e.g. a conversion the polars copy cannot make) returns
    ``None``: the pandas path then runs and raises its own error.  Invalid
    rows raise here, with the pandas path's message (the same checks over the
    same values): the query runs once.
    """
    if not _pandas_polars.applies(lf):
        return None
    schema = lf.collect_schema()
    try:
        used = _used_columns(tuple(schema.items()), tuple(metrics), tuple(keys))
    except TypeError:  # a metric parameter that is not hashable: plan without the cache
        used = _used_columns.__wrapped__(tuple(schema.items()), tuple(metrics), tuple(keys))
    twin = _pandas_polars.twin(lf, keys, used, schema)
    if twin is None:
        return None
    compile_fn = functools.partial(compile_query, keep_dtypes=True)
    try:
        with _plan_cache.bound(
            twin.to_native(), twin.lazy(), metrics, keys, policy, compile_fn, reusable=reusable, variant="keep_dtypes"
        ) as compiled:
            result = compiled.finish(eager=True, collect_options=_no_optimizer(len(twin)))
    except _pandas_polars.polars_errors():  # what polars cannot do on the copy: the pandas path
        return None
    assert isinstance(result, nw.DataFrame)
    booleans = {k for step in compiled.query.numpy_steps for k in step.boolean}
    return _pandas_polars.back(result, lf, keys, [k for k in compiled.names if k not in booleans])


@functools.lru_cache(maxsize=128)
def _used_columns(
    schema: tuple[tuple[str, Any], ...], metrics: tuple[Metric, ...], keys: tuple[str, ...]
) -> tuple[str, ...]:
    """The input columns the metrics read (sorted).

    Planned on the pandas schema: an error here is the pandas path's error.
    A pure function of its arguments: cached (the plan costs milliseconds of
    expression building per call).
    """
    specs = Plan.of(dict(schema), metrics, list(keys)).specs
    return tuple(sorted({c for spec in specs for c, _ in spec.inputs}))


def evaluate(
    frame: Any,
    *metrics: Metric,
    by: Column | Sequence[Column] | None = None,
    invalid: InvalidPolicy | None = None,
    progress: bool | None = False,
) -> Any:
    """Evaluate any number of metrics in one pass.

    Parameters
    ----------
    frame
        Any frame narwhals supports: pandas, polars (eager or lazy), DuckDB,
        PySpark, Dask, ...
    *metrics
        Metric objects, e.g. ``cf.coverage("y", "lo", "hi")`` (at least one).
    by : Column or list of Column, optional
        Group column name(s) or expressions.  ``None`` evaluates the whole frame (one row).
        Groups are sorted by the keys' values (see the backend matrix for
        categorical keys); the rows of a null (or NaN) key form one group,
        sorted last (``invalid="drop"`` drops them).
    invalid : {"raise", "drop", "null"}, optional
        What rows that fail a check (missing values, ``lo > hi``, labels
        outside their set, ...) do.  ``"raise"`` (default for eager input): a
        ValueError naming the column, the problem and the row count.
        ``"null"`` (default for lazy input): the metrics of a group with
        invalid rows are null and ``n_invalid`` counts them.  ``"drop"``: each
        metric uses the rows valid for its own inputs (a row with ``lo > hi``
        leaves ``coverage``, not ``mae``); ``n`` counts the rows no metric
        dropped and ``n_dropped`` the rows at least one metric dropped (a
        group whose rows are all invalid stays, with ``n = 0`` and null
        metrics).  When the metrics check different inputs, each metric whose
        checks differ from the union of the call's has its own Int64 count
        ``n_dropped_<name>`` (its alias or first output column) right after
        ``n_dropped``, and a group whose rows it drops entirely has it null;
        metrics that check the same inputs give one count, as before.  On
        lazy input ``"raise"`` runs the checks when called (the metrics stay
        lazy).
    progress : bool or None, default False
        A progress bar on stderr while work that runs in steps does
        (bootstrap chunks, worst-slab directions, per-group numpy steps):
        tqdm's when installed (``pip install conformal-frames[progress]``),
        a plain line otherwise.  ``None``: when stderr is a terminal.  Lazy
        input runs its work when collected, after the call: no bar.

    Returns
    -------
    frame
        A frame of the caller's type: group keys, one column per metric output,
        ``n`` (and ``n_invalid`` or ``n_dropped``, and under ``"drop"`` the
        ``n_dropped_<name>`` counts); sorted by the keys.  Eager in, eager
        out; lazy in, lazy out.

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
    with task("evaluate", progress):
        return nw.to_native(compute(frame, metrics, by, invalid=invalid))


def _long_table(result: nw.DataFrame | nw.LazyFrame, metric: Metric, keys: list[str]) -> Any:
    """The metric's long table; its columns must not collide with the keys."""
    lazy = result if isinstance(result, nw.LazyFrame) else result.lazy()
    ikeys = Query(schema={}, keys=keys).group
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


def evaluate_one(
    frame: Any, metric: Metric, by: Any = None, *, invalid: InvalidPolicy | None = None, progress: bool | None = False
) -> Any:
    """A single metric with the return contract of the ``.conformal`` methods."""
    frame, by = resolve_roles(frame, [metric], by)
    with task(metric.output_name, progress):
        result = _resolved(frame, [metric], by, invalid=invalid)  # resolved once (10 us of a 0.5 ms call)
    keys = as_keys(by)
    if metric.long:
        return _long_table(result, metric, keys)
    if isinstance(result, nw.LazyFrame) or keys:
        return nw.to_native(result)
    native = result.to_native()
    pl = sys.modules.get("polars")
    if pl is not None and isinstance(native, pl.DataFrame):  # natively: narwhals' row() costs ~3 us more
        values = dict(zip(native.columns, native.row(0)))
    else:
        values = dict(zip(result.columns, result.row(0)))
    main = values[metric.output_name]
    if metric.kind == "test":
        return metric.test_result(values)
    return _float(main)


def _float(value: Any) -> float:
    return float("nan") if value is None else float(value)
