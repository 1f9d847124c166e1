"""``invalid="drop"`` per family: each metric of one call on the rows valid for its own inputs.

A row that fails a check of one metric (``lo > hi`` for ``coverage``) stays
in the metrics that do not read the bad input (``mae``).  The metrics of a
call are split by their *validity*, the set of checks they record
(:func:`split`); metrics with the same checks drop the same rows and run
together.  With one validity (the common case) nothing changes: the call is
one plan, as before.  With several, each part runs as an evaluation of its
own and the results join on the group keys (:func:`combine`), with the
counts of one more aggregation (:func:`counts`):

- ``n_dropped``: the rows of the group that at least one metric dropped;
- ``n``: the rows no metric dropped (``n + n_dropped`` = the group's rows;
  with ``counts=``, ``n`` is the rows they represent, as always);
- ``n_dropped_<metric>``: one Int64 count per metric whose checks differ from
  the union of the call's (its dropped rows can differ from ``n_dropped``),
  right after ``n_dropped``, in the metrics' order.

A group whose rows one metric drops entirely keeps its row, with that metric
null (as a group of an evaluation whose rows were all dropped).  Null group
keys are dropped by every metric, so the parts have the same groups.

Not here: a summary (one ``n`` per summary row and one column per statistic,
shared by its metrics: :func:`~conformal_frames.summarize` keeps the
call-level rule) and the report's tables (one ``n`` each:
``compute(..., per_metric=False)``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import narwhals.stable.v2 as nw

from conformal_frames.engine import _pandas_polars
from conformal_frames.engine.expr import aggregate, indicator, sort_result
from conformal_frames.engine.metric import Metric
from conformal_frames.engine.plan import Plan, key_values
from conformal_frames.engine.query import _DROPPED

__all__ = ["Split", "combine", "counts", "dropped_name", "run", "split"]

#: the row order of an eager result while its parts are joined
_ORDER = "__cf_family_order"


@dataclass(frozen=True)
class Split:
    """The metrics of a call by validity: positions in the call, in order of first appearance."""

    #: the metrics of each part (positions in the call)
    parts: tuple[tuple[int, ...], ...]
    #: each metric's output columns, in the call's order
    outputs: tuple[tuple[str, ...], ...]
    #: the metrics (positions) whose checks differ from the call's: a ``n_dropped_<name>`` each
    apart: tuple[int, ...]
    #: the input columns the metrics read, sorted
    inputs: tuple[str, ...] = ()
    #: the plan of each part's metrics (its checks say which rows the part drops: :func:`counts`)
    plans: tuple[Plan, ...] = field(default=(), compare=False)


def split(schema: Any, metrics: Sequence[Metric], keys: Sequence[str]) -> Split | None:
    """The metrics by validity, or ``None`` when they all check the same rows (one plan).

    Planned on the frame's schema (each metric alone: the checks it records);
    a pure function of its arguments, cached.
    """
    if len(metrics) < 2 or not all(isinstance(m, Metric) for m in metrics):
        return None
    args = (tuple(schema.items()), tuple(metrics), tuple(keys))
    try:
        return _split(*args)
    except TypeError:  # a metric parameter that is not hashable: plan without the cache
        return _split.__wrapped__(*args)


@functools.lru_cache(maxsize=128)
def _split(schema: tuple[tuple[str, Any], ...], metrics: tuple[Metric, ...], keys: tuple[str, ...]) -> Split | None:
    Plan.of(dict(schema), list(metrics), list(keys))  # the call's own checks: output names, one counts=
    checks, outputs, inputs = [], [], set()
    for m in metrics:
        plan = Plan.of(dict(schema), [m], list(keys))
        checks.append(frozenset(plan.query.checks))
        outputs.append(tuple(plan.outputs))
        inputs |= {c for spec in plan.specs for c, _ in spec.inputs}
    if len(set(checks)) == 1:
        return None
    parts: dict[frozenset[str], list[int]] = {}
    for i, c in enumerate(checks):
        parts.setdefault(c, []).append(i)
    union = frozenset().union(*checks)
    apart = tuple(i for i, c in enumerate(checks) if c != union)
    taken = {*keys, *(name for names in outputs for name in names)}
    for i in apart:
        if dropped_name(metrics[i]) in taken:
            msg = (
                f"{dropped_name(metrics[i])!r}, the count of the rows {metrics[i].output_name} drops "
                "(invalid='drop'), is also the name of an output or group column; rename the metric (.alias(...))"
            )
            raise ValueError(msg)
    plans = tuple(Plan.of(dict(schema), [metrics[i] for i in p], list(keys)) for p in parts.values())
    return Split(tuple(tuple(p) for p in parts.values()), tuple(outputs), apart, tuple(sorted(inputs)), plans)


def counts(lf: nw.LazyFrame, metrics: Sequence[Metric], keys: list[str], how: Split) -> nw.LazyFrame:
    """Per group: ``n``, ``n_dropped`` and the ``n_dropped_<metric>`` of the metrics apart (Int64).

    One aggregation over ``lf`` (the input as the metrics read it, keys
    normalized): each part's dropped rows are its plan's (:meth:`Plan.dropped`).
    """
    schema = lf.collect_schema()
    plans = how.plans  # planned on this schema (see split)
    q = plans[0].query
    names = [q._internal(f"__cf_fd{i}") for i in range(len(plans))]
    lf = plans[0].drop_null_keys(lf)
    for plan, name in zip(plans, names):
        lf = plan.dropped(lf).rename({_DROPPED: name})
    anyone = nw.any_horizontal(*[nw.col(c) for c in names], ignore_nulls=True)
    counted = {c for m in metrics for c in m.counts_columns()} - {None}
    size = nw.col(str(counted.pop())).cast(nw.Float64) if counted else nw.lit(1.0)
    rows = lf.select(
        *key_values(keys, schema, q.group),
        nw.when(anyone).then(0.0).otherwise(size).alias("n"),
        indicator(anyone).alias("n_dropped"),
        *[indicator(nw.col(c)).alias(c) for c in names],
    )
    table = aggregate(rows, q.group, [nw.col(c).sum() for c in ["n", "n_dropped", *names]])
    part_of = {i: names[p] for p, part in enumerate(how.parts) for i in part}
    apart = [nw.col(part_of[i]).alias(dropped_name(metrics[i])) for i in how.apart]
    table = table.select(
        *[nw.col(ik).alias(k) for k, ik in zip(keys, q.group)],
        *[e.cast(nw.Int64) for e in [nw.col("n"), nw.col("n_dropped"), *apart]],
    )
    return table


def dropped_name(metric: Metric) -> str:
    """The column counting the rows ``metric`` dropped: ``n_dropped_<output name>``."""
    return f"n_dropped_{metric.output_name}"


def _join(left: Any, right: Any, keys: list[str]) -> Any:
    """``left`` with ``right``'s columns, matched on the keys (never null: ``"drop"`` drops null keys)."""
    return left.join(right, on=keys, how="left") if keys else left.join(right, how="cross")


def combine(
    results: Sequence[nw.DataFrame | nw.LazyFrame],
    table: nw.LazyFrame | nw.DataFrame,
    keys: list[str],
    how: Split,
    *,
    eager: bool,
) -> nw.DataFrame | nw.LazyFrame:
    """The parts' ``results`` (one per part, in order) joined on the keys with the counts ``table``.

    Columns: keys, every output in the call's order, ``n``, ``n_dropped``, the
    counts of the metrics apart.  An eager result keeps the first part's row
    order (the evaluation's sort); a lazy one is sorted by the keys.
    """
    counted = table.collect_schema().names()[len(keys) :]
    outputs = [name for names in how.outputs for name in names]
    parts = [r.drop("n", "n_dropped") for r in results]
    if eager:
        assert isinstance(parts[0], nw.DataFrame)  # an eager part
        joined: Any = parts[0].with_row_index(_ORDER)
        for other in [*parts[1:], table if isinstance(table, nw.DataFrame) else table.collect()]:
            joined = _join(joined, other, keys)
        done = joined.sort(_ORDER) if keys else joined
        return nw.maybe_reset_index(done.select(*keys, *outputs, *counted))
    lazy: Any = parts[0]
    for other in [*parts[1:], table]:
        lazy = _join(lazy, other, keys)
    return sort_result(lazy.select(*keys, *outputs, *counted), *keys, nulls_last=True)


def run(
    frame: Any,
    lf: nw.LazyFrame,
    metrics: Sequence[Metric],
    keys: list[str],
    how: Split,
    evaluate: Callable[[Any, list[Metric]], nw.DataFrame | nw.LazyFrame],
    *,
    eager: bool,
    collect_options: Callable[[], Mapping[str, Any]],
) -> nw.DataFrame | nw.LazyFrame:
    """Each part evaluated by ``evaluate(frame, metrics)`` (under ``"drop"``), combined with the counts.

    ``lf``: ``frame`` as the metrics read it (keys normalized).  Each part
    is the evaluation it would be alone (its fast paths and plan caches: on
    eager frames that beats one lazy query, which compiles on every call);
    an eager pandas frame counts on its polars twin (see
    :mod:`conformal_frames.engine._pandas_polars`) when it has one.
    """
    parts = [evaluate(frame, [metrics[i] for i in part]) for part in how.parts]
    table = _counted_by_polars(lf, metrics, keys, how) if eager and _pandas_polars.applies(lf) else None
    if table is None:
        table = counts(lf, metrics, keys, how)
        table = table.collect(**collect_options()) if eager else table
    return combine(parts, table, keys, how, eager=eager)


def _counted_by_polars(lf: nw.LazyFrame, metrics: Sequence[Metric], keys: list[str], how: Split) -> Any:
    """:func:`counts` of an eager pandas frame run by polars, collected (``None``: no polars twin)."""
    twin = _pandas_polars.twin(lf, keys, how.inputs, lf.collect_schema())
    if twin is None:
        return None
    try:
        table = counts(twin.lazy(), metrics, keys, how).collect()
    except _pandas_polars.polars_errors():  # what polars cannot do on the copy: the pandas path
        return None
    return _pandas_polars.back(table, lf, keys, [])
