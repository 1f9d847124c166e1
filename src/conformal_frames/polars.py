"""Metrics as native polars expressions: ``import conformal_frames.polars as cfx``.

Every metric factory of the library has a twin here with the same parameters,
checks and messages, plus ``invalid=`` and ``name=``, that returns a polars
expression instead of a metric object.  The expression is compiled from the
metric's own definition (the ``build`` that :func:`conformal_frames.evaluate`
runs), so it computes the same numbers, and works wherever polars takes an
aggregation: ``select``, ``group_by().agg()``, ``over``, ``with_columns``,
``group_by_dynamic``, ``rolling``, eager or lazy, and the streaming engine.

>>> import polars as pl
>>> import conformal_frames.polars as cfx
>>> df = pl.DataFrame({"g": ["a", "a", "b"], "y": [1.0, 2.0, 3.0], "lo": [0.0, 2.5, 2.0], "hi": [2.0, 3.0, 4.0]})
>>> out = df.group_by("g", maintain_order=True).agg(cfx.coverage("y", "lo", "hi"), cfx.width("lo", "hi"))
>>> out.unnest("coverage").select("g", "coverage", "width").rows()
[('a', 0.5, 1.25), ('b', 1.0, 2.0)]

Outputs: a metric with one output is a Float64 expression named after it; a
metric with several is a struct whose fields are ``evaluate``'s column names
(``coverage``, ``coverage_ci_low``, ``coverage_ci_high``), so ``unnest`` gives
``evaluate``'s frame.  ``.alias()`` renames the expression; ``name=`` renames
the fields too (as :meth:`Metric.alias <conformal_frames.engine.Metric.alias>`).

Roles take expressions as in ``cf.<name>``: ``cfx.coverage(pl.col("y") * 2,
"lo", "hi")`` reads the expression where the metric reads its column, in the
aggregation's context (an elementwise expression gives ``cf.evaluate``'s
numbers on the frame with the column added; see
:mod:`conformal_frames.engine.native_roles`).

Invalid rows: ``invalid="null"`` (default) nulls the outputs of a group with an
invalid row of the metric's inputs; ``"drop"`` leaves those rows out.  To raise
instead, call :func:`check` on the frame first.  :func:`metrics` compiles
several metric objects into one struct with ``evaluate``'s call-level
validity and shared inputs.  :func:`long_table` gives a long-table metric (``reliability``,
SSC bins, per-level coverage) as a list of structs per group.

Metrics with a numpy step (``coverage_test``, ``smooth_ece``, ``hsic`` ...) call
the library's numpy function through one polars UDF, once per group (it does not
stream; ``coverage_test`` leaves out its Holm/BH fields, which read every group).
Metrics that cannot be expressions (ordered windows over the rows, tables other
than ordered cells) raise :class:`NotAnExpressionError`, whose message names
``cf.evaluate``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import narwhals.stable.v2 as nw

from conformal_frames.engine import Metric, Plan, as_keys, native_roles, native_tables, resolve_roles
from conformal_frames.engine.memo import cached_call, kinds
from conformal_frames.engine.native import Compiled, NotAnExpressionError, Policy, compile_polars, record, to_polars
from conformal_frames.namespace import METRIC_FACTORIES

if TYPE_CHECKING:
    import polars as pl

    from conformal_frames._roles import Column

__all__ = [
    "NotAnExpressionError",
    "adjusted",
    "check",
    "long_table",
    "metrics",
    "to_expr",
    *sorted(METRIC_FACTORIES),
]


@functools.lru_cache(maxsize=1024)
def _compiled(metrics: tuple[Metric, ...], invalid: Policy, name: str | None, roles: tuple[bytes, ...]) -> Compiled:
    return compile_polars(list(metrics), invalid=invalid, name=name)


def _compile(metric: tuple[Metric, ...], invalid: Policy, name: str | None) -> Compiled:
    for m in metric:
        if not isinstance(m, Metric):
            msg = f"expected metric objects such as cf.coverage(...), got {m!r}"
            raise TypeError(msg)
    roles = native_roles.identity(
        metric, lambda e: to_polars(e, {})
    )  # expression roles: their serialized form is part of the key
    if roles is None:  # an expression polars cannot serialize: compiled every call
        return compile_polars(list(metric), invalid=invalid, name=name)
    return cached_call(_compiled, metric, invalid, name, roles)  # an unhashable metric: compiled every call


def to_expr(*metric: Metric, invalid: Policy = "null", name: str | None = None) -> pl.Expr:
    """Metric objects (``cf.coverage(...)``) compiled to one polars expression.

    One metric: its expression (as ``cfx.<name>``); several: one struct of
    every output, as :func:`metrics`.  Memoized on the (frozen) metric objects.

    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> import conformal_frames.polars as cfx
    >>> pl.DataFrame({"lo": [0.0, 1.0], "hi": [1.0, 3.0]}).select(cfx.to_expr(cf.width("lo", "hi"))).item()
    1.5
    """
    return _compile(metric, invalid, name).expr


def metrics(*metric: Metric, invalid: Policy = "null", name: str = "metrics") -> pl.Expr:
    """Several metric objects as ONE struct expression with ``evaluate``'s semantics.

    The fields are ``evaluate``'s output columns; the inputs, checks and
    statistics the metrics share are computed once, and under ``"null"`` a
    group with an invalid row of any metric's inputs has every output null
    (``evaluate``'s call-level validity).  Under ``"drop"`` each metric
    leaves out the rows its own inputs fail, as ``evaluate`` does (the
    metrics of each validity compiled together).

    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> import conformal_frames.polars as cfx
    >>> df = pl.DataFrame({"y": [1.0, 2.0], "lo": [0.0, 2.5], "hi": [2.0, 3.0]})
    >>> df.select(cfx.metrics(cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"))).unnest("metrics").columns
    ['coverage', 'coverage_ci_low', 'coverage_ci_high', 'width']
    """
    if not metric:
        msg = "metrics() needs at least one metric, e.g. cfx.metrics(cf.coverage('y', 'lo', 'hi'))"
        raise ValueError(msg)
    if invalid == "drop" and len(metric) > 1:  # each metric on the rows valid for its own inputs
        parts = _validity_parts(metric)
        if len(parts) > 1:
            return _per_family(metric, parts, name)
    compiled = _compile(metric, invalid, name)
    if len(compiled.outputs) == 1:
        import polars as pl

        return pl.struct(compiled.expr.alias(compiled.outputs[0])).alias(name)
    return compiled.expr


def _validity_parts(metric: tuple[Metric, ...]) -> list[tuple[Metric, ...]]:
    """The metrics by the checks they record (``invalid="drop"`` drops a row from the metrics it fails only)."""
    parts: dict[frozenset[str], list[Metric]] = {}
    for m in metric:
        _compile((m,), "drop", None)  # the metric's own refusal first
        checks = frozenset(record([m], caller="conformal_frames.polars").query.checks)
        parts.setdefault(checks, []).append(m)
    return [tuple(p) for p in parts.values()]


def _per_family(metric: tuple[Metric, ...], parts: list[tuple[Metric, ...]], name: str) -> pl.Expr:
    """One struct of every output, each part of :func:`_validity_parts` compiled on its own rows."""
    import polars as pl

    fields: list[pl.Expr] = []
    names: list[str] = []
    for part in parts:
        compiled = _compile(part, "drop", None)
        names += compiled.outputs
        one = len(compiled.outputs) == 1
        fields.append(compiled.expr.alias(compiled.outputs[0]) if one else compiled.expr.struct.unnest())
    joined = pl.struct(*fields)
    order = list(record(list(metric), caller="conformal_frames.polars").outputs)  # evaluate's column order
    if names != order:
        joined = pl.struct(*[joined.struct.field(k) for k in order])
    return joined.alias(name)


def long_table(metric: Metric, *, invalid: Policy = "null", name: str | None = None) -> pl.Expr:
    """A long-table metric (``reliability``, per-level coverage, SSC bins, ...) as a list of structs per group.

    The structs' fields are the columns of the metric's long table (what
    ``df.conformal.<metric>(..., by=)`` returns), one struct per row of it, so
    ``.explode(name).struct.unnest()`` after a ``group_by`` gives that table
    (an empty list where the group has no row, e.g. only empty bins).  The
    wide columns of ``evaluate`` are ``cfx.<metric>(...)``.  Memoized.

    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> import conformal_frames.polars as cfx
    >>> df = pl.DataFrame({"y": [0.0, 1.0, 1.0, 1.0], "s": [0.2, 0.4, 0.7, 0.9]})
    >>> table = df.select(cfx.long_table(cf.reliability("y", "s", n_bins=2)))
    >>> table.explode("reliability").unnest("reliability").select("bin", "frequency", "n").rows()
    [(0, 0.5, 2), (1, 1.0, 2)]
    """
    if not isinstance(metric, Metric):
        msg = f"expected a metric object such as cf.reliability(...), got {metric!r}"
        raise TypeError(msg)
    if not metric.long:
        msg = f"{metric.output_name} has no long table: its expression is cfx.to_expr(metric) (or cfx.<metric>(...))"
        raise TypeError(msg)
    if name is not None:
        metric = metric.alias(name)
    return cached_call(_long, metric, invalid)  # an unhashable metric (a list parameter): compiled every call


@functools.lru_cache(maxsize=256)
def _long(metric: Metric, invalid: Policy) -> pl.Expr:
    compiled = compile_polars([metric], invalid=invalid, rows=True)
    return native_tables.long_rows(metric, compiled.expr, compiled.outputs).alias(metric.output_name)


def check(frame: Any, *metric: Metric, by: Column | Sequence[Column] | None = None) -> None:
    """Raise :class:`~conformal_frames.InvalidRowsError` if a row of ``frame`` fails a check of ``metric``.

    The messages of ``cf.evaluate(..., invalid="raise")``; one pass over the
    frame (a lazy frame is collected for the counts).  Expressions do not
    raise: call this before the query when invalid rows must stop it.

    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> import conformal_frames.polars as cfx
    >>> df = pl.DataFrame({"y": [1.0, None], "lo": [0.0, 0.0], "hi": [2.0, 2.0]})
    >>> cfx.check(df, cf.coverage("y", "lo", "hi"))
    Traceback (most recent call last):
    ...
    conformal_frames.errors.InvalidRowsError: column 'y' has missing (null/NaN) or infinite values in 1 row
    """
    metrics = list(metric)
    resolved, by = resolve_roles(nw.from_native(frame), metrics, by)  # expression roles (and keys) as columns
    lf = resolved.lazy()
    plan = Plan.of(lf.collect_schema(), metrics, as_keys(by), caller="check")
    if plan.has_checks:
        plan.raise_failed(plan.check_counts(lf))


def adjusted(pvalue: str | pl.Expr, correction: Literal["holm", "bh"] = "holm") -> pl.Expr:
    """Holm or Benjamini-Hochberg adjusted p-values over the rows of a p-value column.

    ``cf.evaluate``'s ``<test>_pvalue_holm`` / ``_pvalue_bh``: the same
    functions over the groups' p-values, a null one left out of the family.
    An aggregation of one group cannot see the others, so ``cfx.coverage_test``
    gives the ``_pvalue`` field only: use this on the aggregated frame (one
    row per group), in ``select`` / ``with_columns`` (not inside ``group_by``,
    where it would adjust within each group).

    >>> import polars as pl
    >>> import conformal_frames.polars as cfx
    >>> pvalues = pl.DataFrame({"g": ["a", "b", "c"], "p": [0.01, 0.04, 0.03]})
    >>> pvalues.with_columns(cfx.adjusted("p", "holm").alias("p_holm"))["p_holm"].round(4).to_list()
    [0.03, 0.06, 0.06]
    """
    import polars as pl

    from conformal_frames.metrics.conditional import benjamini_hochberg, holm

    adjust = {"holm": holm, "bh": benjamini_hochberg}.get(correction)
    if adjust is None:
        msg = f"correction must be 'holm' or 'bh', got {correction!r}"
        raise ValueError(msg)
    column = pl.col(pvalue) if isinstance(pvalue, str) else pvalue

    def run(s: pl.Series) -> pl.Series:
        return pl.Series(s.name, adjust(s.cast(pl.Float64).to_numpy()), dtype=pl.Float64).fill_nan(None)

    return column.map_batches(run, return_dtype=pl.Float64)


def _factory(name: str, make: Callable[..., Metric]) -> Callable[..., pl.Expr]:
    signature = inspect.signature(make)

    @functools.wraps(make)
    def factory(*args: Any, invalid: Policy = "null", name: str | None = None, **kwargs: Any) -> pl.Expr:
        metric = _made(make, args, tuple(kwargs.items()))
        if name is not None:
            metric = metric.alias(name)
        return to_expr(metric, invalid=invalid)

    extra = [
        inspect.Parameter("invalid", inspect.Parameter.KEYWORD_ONLY, default="null", annotation="str"),
        inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="str | None"),
    ]
    params = list(signature.parameters.values())
    kinds = [p.kind for p in params]
    at = kinds.index(inspect.Parameter.VAR_KEYWORD) if inspect.Parameter.VAR_KEYWORD in kinds else len(params)
    factory.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*params[:at], *extra, *params[at:]], return_annotation="pl.Expr"
    )
    factory.__doc__ = (
        f"``cf.{name}`` as a polars expression (see :mod:`conformal_frames.polars`).\n\n"
        f"Parameters and checks are those of :func:`conformal_frames.{name}`; ``invalid=`` is ``'null'``\n"
        "(default) or ``'drop'``, ``name=`` renames the output (and a struct's fields).\n"
    )
    factory.__qualname__ = factory.__name__ = name
    factory.__module__ = __name__
    return factory


def _made(make: Callable[..., Metric], args: tuple[Any, ...], kwargs: tuple[tuple[str, Any], ...]) -> Metric:
    """The metric object of a factory call, memoized on hashable arguments (and their types: ``kinds``)."""
    return cached_call(_made_cached, make, args, kwargs, kinds((args, kwargs)))


@functools.lru_cache(maxsize=1024)
def _made_cached(
    make: Callable[..., Metric], args: tuple[Any, ...], kwargs: tuple[tuple[str, Any], ...], types: Any = None
) -> Metric:
    return make(*args, **dict(kwargs))


for _name, _make in METRIC_FACTORIES.items():
    globals()[_name] = _factory(_name, _make)
del _name, _make
