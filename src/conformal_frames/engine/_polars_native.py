"""``evaluate`` on polars frames through the compiled polars expressions (:mod:`.native`).

:func:`run` answers an evaluation of a polars DataFrame or LazyFrame with ONE
``group_by().agg()`` (or ``select``) of the metrics compiled by
:func:`~conformal_frames.engine.native.compile_polars`, plus ``n`` and the
policy's count column, or returns ``None`` when the call must take the
narwhals path.  It is taken only where its output is the narwhals path's
(``tests/test_evaluate_native.py`` checks it across the catalogue):

- every metric compiles (no refusal) and reshapes no input (a long table is
  made from the wide frame, as on the narwhals path);
- every input column has the dtype the compiler assumes (Float64, or Boolean
  where a reader asks for it): integer inputs (the 2^53 rule), Float32 inputs
  (ECE edges) and list columns take the narwhals path;
- no positive-total rule (``weights=``/``counts=``), whose group-level
  invalidity the narwhals path counts its own way;
- group keys are String, integer or Boolean columns of the frame (no
  categorical/enum/float keys: their order and NaN rules are the narwhals
  path's), none named like an output;
- no key or input named like the compiler's internal columns (``__cf...``);
- policy ``"null"``, ``"drop"``, or ``"raise"`` on an eager frame: the query
  runs with ``"null"`` and, if a row is invalid, the plan's check counts
  raise evaluate's own message (:meth:`Plan.raise_failed`).

Anything else returns ``None``.  And it is taken only where it was measured
faster (:func:`_worth_it`): one metric per call, on a lazy frame or an eager
one of at least ``MIN_EAGER_ROWS`` rows, and a sort-based metric only grouped
(ungrouped ``ks_test`` at 5e5 rows: 50 ms compiled, 40 ms through the
narwhals path's one sort) or, for ``ks_test``, on a lazy frame
(``LAZY_UNGROUPED_SORTS``).  Figures: bench/bench_routing.py and
docs/performance.md ("Which evaluate calls run the compiled expression").
The parity test lifts the limits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import narwhals.stable.v2 as nw

from conformal_frames.engine import native, native_tables, native_window_tables
from conformal_frames.engine.memo import cached_call
from conformal_frames.engine.metric import Metric
from conformal_frames.engine.plan import Plan
from conformal_frames.engine.query import RESERVED, InvalidPolicy

if TYPE_CHECKING:
    import polars as pl

__all__ = ["run"]


@dataclass(frozen=True)
class _Prepared:
    """A compiled evaluation: the outputs' struct, ``n`` and the policy's count, the inputs' dtypes."""

    outputs: pl.Expr
    names: tuple[str, ...]
    counts: tuple[pl.Expr, ...]
    inputs: tuple[tuple[str, Any], ...]
    #: the metrics group the rows into ordered cells (sort-based: KS, SSC, AUROC, quantile bins)
    sorts: bool


def _prepare(metrics: tuple[Metric, ...], policy: str) -> _Prepared | None:
    import polars as pl

    try:
        plan = native.record(metrics, caller="evaluate")
    except Exception:
        return None
    q = plan.query
    if q.positive or native.refusal(plan) is not None or any(e is None for e in plan.outputs.values()):
        return None
    if native_tables.widened(plan):  # a table the narwhals query groups faster (see native_tables.widened)
        return None
    if native_window_tables.applies(plan, native):  # windowed rows read by a table: slower compiled
        return None
    try:
        compiled = native.compile_polars(list(metrics), invalid=policy, name="__cf_outputs", caller="evaluate")  # type: ignore[arg-type]
    except Exception:
        return None
    rows = native._rows(q, native._inputs(plan))
    bad, zero = native._masks(plan, rows, policy)  # type: ignore[arg-type]
    if zero is not None:  # pragma: no cover - positive rules are excluded above
        return None
    flag = pl.lit(False) if bad is None else bad
    if q.count_row is not None:
        n = rows[q.count_row].filter(~flag).sum() if policy == "drop" else rows[q.count_row].sum()
    else:
        n = (~flag).sum() if policy == "drop" else pl.len()
    count = flag.sum().cast(pl.Int64).alias("n_dropped" if policy == "drop" else "n_invalid")
    inputs = {name: dtype for spec in plan.specs for name, dtype in spec.inputs}
    if any(isinstance(dtype, nw.List) for dtype in inputs.values()):
        return None  # a list column of members keeps the narwhals query (pit_histogram: 1.1-1.4x its time)
    counts = (n.cast(pl.Int64).alias("n"), count)
    return _Prepared(compiled.expr, compiled.outputs, counts, tuple(inputs.items()), bool(q.tables))


@functools.lru_cache(maxsize=256)
def _prepared(metrics: tuple[Metric, ...], policy: str) -> _Prepared | None:
    return _prepare(metrics, policy)


def _lookup(metrics: tuple[Metric, ...], policy: str) -> _Prepared | None:
    return cached_call(_prepared, metrics, policy)  # an unhashable metric parameter: prepared every call


def _key_ok(dtype: Any) -> bool:
    return dtype.is_integer() or dtype == nw.String or dtype == nw.Boolean


#: the most metrics one call runs through the compiled expressions.  Measured (polars 1.x,
#: 2 loaded cores, same run): one fused struct of 8 single-pass metrics is 0.47x (eager) /
#: 0.74x (lazy) the narwhals path's speed at 1e6 rows, 1,000 groups, and slower still at
#: 1e3 rows; one metric is at parity (coverage) or 1.8-2.1x faster (KS)
MAX_METRICS = 1

#: an eager frame of fewer rows keeps the narwhals path, whose compiled queries are kept
#: between calls (engine/_plan_cache): at 1e3 rows it answered faster than planning the
#: compiled expression again (coverage 4.4 vs 15 ms per call on a loaded machine)
MIN_EAGER_ROWS = 10_000

#: whether an ungrouped sort-based metric takes the compiled path (no: see the module docstring),
#: but for the metrics of ``LAZY_UNGROUPED_SORTS`` on a lazy frame
_SORTS_UNGROUPED = False

#: the sort-based metrics an ungrouped LAZY call runs through the compiled path: measured at
#: parity or faster at every size (bench/bench_routing.py --sorts, CPU time, two runs, the
#: compiled path's time over the narwhals path's, which builds its query on every lazy call:
#: 1e3 rows 0.36x, 1e5 0.57-0.61x, 1e6 0.91-1.09x, 5e6 0.98-1.00x).  Not ``kuiper_test``
#: (1.03x at 1e6, 1.03-1.20x at 5e6), ``ssc`` or ``auroc`` (1.3-1.6x from 1e6 rows), nor an
#: eager frame (1.04-2.1x slower than the kept plan of engine/_plan_cache)
LAZY_UNGROUPED_SORTS = frozenset({"ks_test"})


def _sorts_ungrouped(metrics: Sequence[Metric], *, eager: bool) -> bool:
    """Whether an ungrouped call of these sort-based metrics takes the compiled path."""
    if _SORTS_UNGROUPED:
        return True
    return not eager and all(type(m).default_name in LAZY_UNGROUPED_SORTS for m in metrics)


def _worth_it(frame: Any, metrics: Sequence[Metric], *, eager: bool) -> bool:
    """Whether the compiled path is measured faster for this call (see ``MAX_METRICS``, ``MIN_EAGER_ROWS``)."""
    if len(metrics) > MAX_METRICS:
        return False
    if not eager:
        return True
    native_frame = frame.to_native() if isinstance(frame, nw.DataFrame) else frame
    return len(native_frame) >= MIN_EAGER_ROWS


def run(
    frame: Any,
    lf: nw.LazyFrame,
    metrics: Sequence[Metric],
    keys: list[str],
    policy: InvalidPolicy,
    *,
    eager: bool,
    collect_options: Callable[[Any, nw.LazyFrame], Mapping[str, Any]],
) -> nw.DataFrame | nw.LazyFrame | None:
    """The evaluation through the compiled expressions, or ``None`` for the narwhals path.

    ``collect_options(frame, lf)``: the ``collect`` options of an eager call (execute's).
    """
    if not lf.implementation.is_polars() or not metrics or (policy == "raise" and not eager):
        return None
    if not _worth_it(frame, metrics, eager=eager):
        return None
    if not all(isinstance(m, Metric) and not m.reshapes for m in metrics):
        return None
    prepared = _lookup(tuple(metrics), "null" if policy == "raise" else policy)
    if prepared is None:
        return None
    schema = lf.collect_schema()
    if any(schema.get(c) != dtype for c, dtype in prepared.inputs):
        return None
    if prepared.sorts and not keys and not _sorts_ungrouped(metrics, eager=eager):
        return None  # ungrouped, the narwhals path sorts once (_polars_ordered_cells): faster
    if any(c.startswith("__cf") for c in [*keys, *(c for c, _ in prepared.inputs)]):
        return None  # named like the compiler's internal names (which would bind them)
    taken = {*prepared.names, *RESERVED}
    if len(set(keys)) != len(keys) or any(k not in schema or k in taken or not _key_ok(schema[k]) for k in keys):
        return None
    result = _query(nw.to_native(lf), prepared, keys, policy)
    if not eager:
        return nw.from_native(result)
    out = result.collect(**collect_options(frame, lf))
    if policy == "raise":
        if out.get_column("n_invalid").sum() > 0:
            plan = Plan.of(schema, list(metrics), keys)
            plan.raise_failed(plan.check_counts(lf))
        out = out.drop("n_invalid")
    return nw.from_native(out)


def _query(native_lf: pl.LazyFrame, prepared: _Prepared, keys: list[str], policy: str) -> pl.LazyFrame:
    import polars as pl

    aggs = [prepared.outputs, *prepared.counts]
    if not keys:
        table = native_lf.select(*aggs)
    else:
        if policy == "drop":
            native_lf = native_lf.filter(*[pl.col(k).is_not_null() for k in keys])
        table = native_lf.group_by(keys).agg(*aggs).sort(keys, nulls_last=True)
    one = len(prepared.names) == 1
    outputs = [pl.col("__cf_outputs").alias(prepared.names[0])] if one else [pl.col("__cf_outputs").struct.unnest()]
    return table.select(
        *[pl.col(k) for k in keys], *outputs, pl.col("n"), pl.col(prepared.counts[1].meta.output_name())
    )
