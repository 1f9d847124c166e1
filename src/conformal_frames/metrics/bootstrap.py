"""Bootstrap intervals for score metrics, in the same one-pass query.

:func:`bootstrap` wraps a score metric (coverage, width, Brier, ...) and adds
a percentile interval ``<name>_ci_low`` / ``<name>_ci_high``;
:func:`bootstrap_difference` does the same for the difference of one score
between two models on the same rows.  Replicate ``b`` evaluates the metric with
the weights ``w_b = (weights or 1) * c_b``, where ``c_b ~ Poisson(1)`` is a
count derived from a hash of the row's content and the seed
(:mod:`conformal_frames.numerics.resample`): no row order, no random state, the same
counts on every backend.  All replicates are aggregations of the one
``group_by`` of :func:`~conformal_frames.evaluate`; the interval is the
percentile interval of the replicate values per group (a second, small
aggregation over ``n_groups * n_resamples`` values).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import narwhals.stable.v2 as nw

from conformal_frames import engine
from conformal_frames._progress import advance
from conformal_frames._validate import check_column, check_positive_int, optional
from conformal_frames.engine import FinalizeFn, Metric, Query, TableFn, TableRef, Weighting, aggregate
from conformal_frames.numerics.resample import (
    clean_row,
    replicate_constants,
    replicate_count_row,
    replicate_hash_rows,
)

__all__ = ["bootstrap", "bootstrap_difference"]
METHODS: list[str] = []  # metric wrappers: use them in evaluate


def _check_metric(value: Any, name: str) -> Metric:
    if not isinstance(value, Metric) or isinstance(value, _Bootstrapped):
        msg = f"{name} must be a score metric such as cf.coverage('y', 'lo', 'hi'), got {value!r}"
        raise TypeError(msg)
    if value.kind != "score":
        msg = (
            f"bootstrap intervals are for score metrics; {value.output_name} is a {value.kind} "
            "(tests have their own p-values, tables their own rows)"
        )
        raise TypeError(msg)
    return value


def _check_resamples(value: Any, name: str) -> int:
    return check_positive_int(value, name, at_least=2)


#: the ``weights=`` a replicate metric is built with: its weighting is the replicate's
_REPLICATE = "__cf_replicate_weights"


class _ReplicateQuery:
    """The query as one replicate sees it.

    The replicate metric is the metric with ``weights=_REPLICATE``, so that it
    takes its weighted path; its weighting is the metric's own weights (if
    any) times the replicate's counts.
    """

    def __init__(self, q: Query, counts: str, weights: str | None) -> None:
        self._q = q
        self._counts = counts
        self._weights = weights
        #: the replicate's weight row, once the metric asked for it
        self.weight_row: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._q, name)

    def weighting(self, weights: str | None, *, counts: str | None = None) -> Weighting:
        if weights != _REPLICATE:
            return self._q.weighting(weights, counts=counts)
        base = self._q.weighting(self._weights)
        row = self._counts
        if base.row is not None:
            key = ("boot_weight", base.row, self._counts)
            row = self._q.row(
                key,
                nw.col(base.row) * nw.col(self._counts),
                inputs=[base.row, self._counts],
            )
        self.weight_row = row
        return Weighting(self._q, row)


def _replica(metric: Metric) -> tuple[Metric, str | None]:
    """The metric with the replicate weights, and its own ``weights=``."""
    names = {f.name for f in dataclasses.fields(metric)}
    if "weights" not in names:
        msg = f"bootstrap needs a metric with a weighted version; {metric.output_name} has none"
        raise TypeError(msg)
    if getattr(metric, "counts", None) is not None:
        msg = f"bootstrap resamples rows, not the rows counts= represents; {metric.output_name} has counts="
        raise TypeError(msg)
    own = getattr(metric, "weights", None)
    replica: Metric = dataclasses.replace(metric, **{"weights": _REPLICATE})
    return replica, own


def _one_pass(q: Query, metric: Metric) -> set[str]:
    """The metric's input columns; refuse a metric whose weighted version needs more than sums per group."""
    probe = Query(schema=q.schema, keys=list(q.keys))
    metric.build(probe)
    replica, own = _replica(metric)
    counts = probe.row(("boot_probe_counts",), nw.lit(1.0))
    replica.build(cast(Query, _ReplicateQuery(probe, counts, own)))
    extra = [
        what
        for what, present in (
            ("a second aggregation level", probe.tables),
            ("a multi-step finalize", probe.finalizers),
            ("a numpy step", probe.numpy_steps),
            ("a per-group numpy step", probe.group_steps),
        )
        if present
    ]
    if extra:
        msg = (
            f"bootstrap supports metrics computed in one aggregation (sums per group), and "
            f"{metric.output_name} needs {' and '.join(extra)}"
        )
        raise ValueError(msg)
    return set(probe.used)


def _replicate(q: Query, metric: Metric, counts: str) -> nw.Expr:
    """The metric's main output under the replicate counts ``counts``."""
    replica, own = _replica(metric)
    rq = _ReplicateQuery(q, counts, own)
    built = replica.build(cast(Query, rq))
    expr = built[""]
    if rq.weight_row is None or expr is None:  # pragma: no cover - a weighted metric asks for its weights
        msg = f"{metric.output_name} did not use its weights; bootstrap cannot resample it"
        raise TypeError(msg)
    return nw.when(q.sum(rq.weight_row) > 0.0).then(expr)


def _unpivot(frame: nw.LazyFrame, on: list[str], index: list[str], value: str, variable: str) -> nw.LazyFrame:
    """``frame.unpivot(...)``; on DuckDB through the relation's own connection.

    narwhals runs DuckDB's UNPIVOT on the default connection, which cannot read
    a relation of another connection (``duckdb.connect()``).
    """
    if frame.implementation.is_duckdb():
        from narwhals._duckdb.utils import (
            col as quoted,
        )  # the quoting narwhals itself uses

        names = ", ".join(str(quoted(c)) for c in on)
        sql = f"unpivot _cf_rel on {names} into name {quoted(variable)} value {quoted(value)}"
        native = frame.to_native().query("_cf_rel", sql)
        return nw.from_native(native).select(*index, variable, value)
    return frame.unpivot(on=on, index=index, value_name=value, variable_name=variable)


def _percentiles(values: list[nw.Expr], group: list[str], ci_level: float) -> FinalizeFn:
    """Finalize: the percentile interval (numpy's "linear" method) of the replicate values per group.

    The replicate values are unpivoted to one row per (group, replicate);
    the ``k``-th smallest value is ``max(v : rank_min(v) <= k)``, so two
    order statistics and their interpolation weight per bound are elementary
    aggregations.  Replicates with a missing value (e.g. a group whose counts
    are all zero) are left out.
    """
    probs = {"low": (1.0 - ci_level) / 2.0, "high": 1.0 - (1.0 - ci_level) / 2.0}

    def build(table: nw.LazyFrame, ref: TableRef) -> nw.LazyFrame:
        names = [ref.name(f"r{b}") for b in range(len(values))]
        value, rank, m = ref.name("v"), ref.name("rank"), ref.name("m")
        idx = group or [ref.name("one")]
        wide = table.with_columns(*[e.alias(c) for e, c in zip(values, names)])
        if not group:
            wide = wide.with_columns(nw.lit(0).alias(idx[0]))
        long = _unpivot(wide.select(*idx, *names), names, idx, value, ref.name("var"))
        long = long.filter(~nw.col(value).is_null()).filter(~nw.col(value).is_nan())
        long = long.with_columns(
            engine.over(nw.col(value).rank("min"), idx).cast(nw.Float64).alias(rank),
            engine.over(nw.col(value).count(), idx).cast(nw.Float64).alias(m),
        )
        parts, aggs = [], []
        for side, p in probs.items():
            h = (nw.col(m) - 1.0) * p
            j = h.floor()
            lower = nw.when(nw.col(rank) <= j + 1.0).then(nw.col(value))
            upper = nw.when(nw.col(rank) <= nw.min_horizontal(j + 2.0, nw.col(m))).then(nw.col(value))
            parts += [
                lower.alias(ref.name(f"{side}_a")),
                upper.alias(ref.name(f"{side}_b")),
                (h - j).alias(ref.name(f"{side}_t")),
            ]
            aggs += [nw.col(ref.name(f"{side}_{x}")).max() for x in "abt"]
        stats = long.with_columns(*parts).group_by(*idx).agg(*aggs)
        wide = wide.join(stats, on=idx, how="left")
        out = [
            (ref.col(f"{s}_a") + ref.col(f"{s}_t") * (ref.col(f"{s}_b") - ref.col(f"{s}_a"))).alias(ref.name(s))
            for s in probs
        ]
        wide = wide.with_columns(*out)
        return wide.drop(*names, *([idx[0]] if not group else []))

    return build


@dataclass(frozen=True, kw_only=True)
class _Bootstrapped(Metric):
    """Shared machinery: replicate weights, replicates, percentile interval."""

    n_resamples: int = field(default=1000, metadata={"check": _check_resamples})
    seed: int = 0
    ci_level: float = 0.95
    block: str | None = field(default=None, metadata={"check": optional(check_column)})

    def _metrics(self) -> Sequence[Metric]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _combine(self, values: Sequence[nw.Expr]) -> nw.Expr:  # pragma: no cover - abstract
        raise NotImplementedError

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        for m in self._metrics():
            frame = m.prepare(frame)
        return frame

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        metrics = self._metrics()
        columns: set[str] = set()
        for m in metrics:
            columns |= _one_pass(q, m)
        if self.block is not None:
            q.column(self.block)  # exists, not a group key
        points = []
        for m in metrics:
            main = m.build(q)[""]
            assert main is not None  # one-pass metrics have expressions
            points.append(main)
        hashed = replicate_hash_rows(q, sorted(columns), block=self.block)
        key = (
            "bootstrap",
            self.output_name,
            self.seed,
            self.n_resamples,
            self.block,
            self.ci_level,
        )
        table = q.table(key, _replicate_table(q, metrics, self._combine, hashed, self.seed, self.n_resamples))
        values = [table.col(f"r{b}") for b in range(self.n_resamples)]
        ref = q.finalize(key, _percentiles(values, list(q.group), self.ci_level))
        # one resampling unit (one row, one block): every replicate repeats the value; no interval
        several = _units(q, self.block) > 1.5
        return {
            "": self._combine(points),
            "ci_low": nw.when(several).then(ref.col("low")),
            "ci_high": nw.when(several).then(ref.col("high")),
        }


#: row columns of replicate work per chunk of replicates on in-memory engines
#: (polars, pandas): the memory of a chunk is this many Float64 columns of the rows
CHUNK_COLUMNS = 96


def _sub_query(q: Query) -> Query:
    """A query that sees the rows ``q`` registered (same names), and nothing else of it."""
    return Query(schema=q.schema, keys=list(q.keys), group=list(q.group), rows=dict(q.rows))


def _ticking(part: nw.LazyFrame, column: str, key: object, total: int) -> nw.LazyFrame:
    """``part`` (a polars chunk) that reports a progress step when its ``column`` is computed."""
    import polars as pl  # the part is a polars frame

    def tick(values: Any) -> Any:
        advance(key, "bootstrap chunks", total)
        return values

    native = part.to_native().with_columns(pl.col(column).map_batches(tick, return_dtype=pl.Float64))
    return nw.from_native(native)


def _in_memory(frame: nw.LazyFrame) -> bool:
    """Engines that materialise every row column of a ``with_columns`` (polars in memory, pandas)."""
    impl = frame.implementation
    return bool(impl.is_polars() or impl.is_pandas_like())


def _replicate_table(
    q: Query,
    metrics: Sequence[Metric],
    combine: Any,
    hashed: tuple[str, str, str],
    seed: int,
    n_resamples: int,
) -> TableFn:
    """The table of the replicate values ``r<b>`` per group, computed chunk by chunk of replicates.

    Every chunk is a sub-query over the row frame: its replicates' counts and
    weighted rows, their sums per group and the replicate values.  On
    in-memory engines a chunk holds about :data:`CHUNK_COLUMNS` row columns,
    so the memory does not grow with ``n_resamples``; elsewhere (DuckDB,
    Spark, ...) one chunk holds every replicate.  A replicate's value is the
    same expression over the same sums whatever the chunk.
    """
    constants = replicate_constants(seed, n_resamples)

    def chunk(rows: nw.LazyFrame, keys: list[str], ref: TableRef, first: int, last: int) -> tuple[nw.LazyFrame, int]:
        sub = _sub_query(q)
        values = []
        for b in range(first, last):
            counts = replicate_count_row(sub, hashed, seed=seed, b=b, k=constants[b])
            values.append(combine([_replicate(sub, m, counts) for m in metrics]).alias(ref.name(f"r{b}")))
        new = [r for k, r in sub.rows.items() if k not in q.rows]
        frame = rows
        for level in sorted({r.level for r in new}):
            frame = frame.with_columns(*[r.expr.alias(r.name) for r in new if r.level == level])
        aggs = [nw.len().alias(Query.count), *[e.alias(n) for n, e in sub.aggs.values()]]
        return aggregate(frame, keys, aggs).select(*keys, *values), len(new)

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        width = chunk(rows, keys, ref, 0, 1)[1]  # the row columns of one replicate
        size = max(1, CHUNK_COLUMNS // max(width, 1)) if _in_memory(rows) else n_resamples
        starts = range(0, n_resamples, size)
        parts = [chunk(rows, keys, ref, b, min(b + size, n_resamples))[0] for b in starts]
        if rows.implementation.is_polars():  # a progress step per chunk, when a bar is open
            key = object()  # this bootstrap of this compiled query
            parts = [_ticking(part, ref.name(f"r{b}"), key, len(parts)) for part, b in zip(parts, starts)]
        table = parts[0]
        for part in parts[1:]:
            table = table.join(part, on=keys, how="left") if keys else table.join(part, how="cross")
        return table

    return build


def _units(q: Query, block: str | None) -> nw.Expr:
    """The number of resampling units of the group: its rows, or its distinct blocks."""
    if block is None:
        return q.n
    value = clean_row(q, block)  # the hashed block value: rows sharing it share their counts
    share = q.row(("boot_block_share", value), 1.0 / q.over(nw.col(value).count(), value), inputs=[value])
    return q.sum(share)


@dataclass(frozen=True, kw_only=True)
class Bootstrap(_Bootstrapped):
    metric: Metric = field(metadata={"check": _check_metric})

    @property
    def output_name(self) -> str:
        return self.name if self.name is not None else self.metric.output_name

    def _metrics(self) -> Sequence[Metric]:
        return [self.metric]

    def _combine(self, values: Sequence[nw.Expr]) -> nw.Expr:
        return values[0]


def _check_pair(obj: BootstrapDifference) -> None:
    if type(obj.metric) is not type(obj.other):
        msg = (
            f"bootstrap_difference compares one score between two models: got {obj.metric.output_name} "
            f"({type(obj.metric).__name__}) and {obj.other.output_name} ({type(obj.other).__name__})"
        )
        raise TypeError(msg)


@dataclass(frozen=True, kw_only=True)
class BootstrapDifference(_Bootstrapped):
    metric: Metric = field(metadata={"check": _check_metric})
    other: Metric = field(metadata={"check": _check_metric})

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_pair(self)

    @property
    def output_name(self) -> str:
        return self.name if self.name is not None else f"{self.metric.output_name}_difference"

    def _metrics(self) -> Sequence[Metric]:
        return [self.metric, self.other]

    def _combine(self, values: Sequence[nw.Expr]) -> nw.Expr:
        return values[0] - values[1]


def bootstrap(
    metric: Metric,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    ci_level: float = 0.95,
    block: str | None = None,
) -> Bootstrap:
    """A score metric with a bootstrap percentile interval, in the same query.

    The output keeps the metric's value under its name and adds
    ``<name>_ci_low`` / ``<name>_ci_high``: the ``(1 - ci_level) / 2`` and
    ``(1 + ci_level) / 2`` percentiles (numpy's default "linear" method) of
    ``n_resamples`` replicate values.  Replicate ``b`` is the metric with
    weights ``w_i * c_ib`` (``w_i`` the metric's own ``weights=``, or 1)
    where ``c_ib ~ Poisson(1)`` is derived from a hash of row ``i``'s
    content (the metric's input columns), the seed and ``b``: the Poisson
    bootstrap, which needs no row order, so it runs grouped and lazily on
    every backend and gives the same interval everywhere (to the rounding of
    the sums).  The metric's other outputs (e.g. coverage's Wilson interval)
    are not repeated.

    Rows equal in every input column get independent counts (they are
    numbered within their group by a window function).  With ``block=``, the
    rows of a block share their counts (a cluster bootstrap: use it for
    clustered or serially dependent rows, e.g. a day or a customer).

    Limits: the percentile interval of a Poisson bootstrap is a large-sample
    approximation (it may under-cover for small groups or skewed metrics);
    replicates in which a group gets no weight at all (probability
    ``exp(-n)``) are left out; a group with one resampling unit (one row, or
    one block) has a null interval (every replicate would repeat its value); only metrics computed in one aggregation (sums
    per group) with a weighted version are supported (not binned tables, not
    rank- or sort-based tests).  The work grows like ``n_resamples`` times
    the metric's own sums.

    Parameters
    ----------
    metric : Metric
        A score metric with ``weights=`` support, e.g. ``cf.coverage(...)``.
    n_resamples : int, default 1000
        Number of bootstrap replicates (at least 2).
    seed : int, default 0
        Seed of the replicate counts; the same seed gives the same interval.
    ci_level : float, default 0.95
        Level of the percentile interval, in (0, 1).
    block : str, optional
        Column whose rows share one count per replicate (numeric, string,
        categorical or temporal).

    Returns
    -------
    Bootstrap
        A metric object for :func:`~conformal_frames.evaluate`
        (``df.conformal.evaluate(cf.bootstrap(...))``); output columns
        ``<name>``, ``<name>_ci_low``, ``<name>_ci_high`` and ``n``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> df = pl.DataFrame({"y": [0, 1, 1, 0, 1, 1, 0, 1],
    ...                    "p": [0.1, 0.8, 0.6, 0.3, 0.9, 0.4, 0.2, 0.7]})
    >>> out = cf.evaluate(df, cf.bootstrap(cf.brier("y", "p"), n_resamples=200, seed=1))
    >>> out.columns
    ['brier', 'brier_ci_low', 'brier_ci_high', 'n']

    References
    ----------
    A. B. Owen and D. Eckles (2012), "Bootstrapping data arrays of arbitrary
    order", Annals of Applied Statistics 6(3), 895-927 (the Poisson bootstrap).
    """
    return Bootstrap(
        metric=metric,
        n_resamples=n_resamples,
        seed=seed,
        ci_level=ci_level,
        block=block,
    )


def bootstrap_difference(
    metric: Metric,
    other: Metric,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    ci_level: float = 0.95,
    block: str | None = None,
) -> BootstrapDifference:
    """The difference of one score between two models, with a paired bootstrap interval.

    ``<name> = metric - other`` evaluated on the same rows, with the
    percentile interval ``<name>_ci_low`` / ``<name>_ci_high`` of the
    replicate differences: both metrics are evaluated under the *same*
    replicate counts (a paired bootstrap; the counts hash the input columns
    of both metrics), so the interval reflects the correlation between the
    two models' errors.  An interval that excludes 0 says the models differ
    at level ``ci_level``.  Method and limits as in :func:`bootstrap`; for
    time-ordered rows see also
    :func:`~conformal_frames.diebold_mariano_test`.

    Parameters
    ----------
    metric, other : Metric
        The same score metric (same class) on two models' columns, e.g.
        ``cf.brier("y", "p_a")`` and ``cf.brier("y", "p_b")``.
    n_resamples, seed, ci_level, block
        As in :func:`bootstrap`.

    Returns
    -------
    BootstrapDifference
        A metric object for :func:`~conformal_frames.evaluate`; output columns
        ``<name>`` (default ``<metric name>_difference``), ``<name>_ci_low``,
        ``<name>_ci_high`` and ``n``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> df = pl.DataFrame({"y": [0, 1, 1, 0, 1, 1, 0, 1],
    ...                    "a": [0.1, 0.8, 0.6, 0.3, 0.9, 0.4, 0.2, 0.7],
    ...                    "b": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]})
    >>> diff = cf.bootstrap_difference(cf.brier("y", "a"), cf.brier("y", "b"), n_resamples=200)
    >>> cf.evaluate(df, diff).columns
    ['brier_difference', 'brier_difference_ci_low', 'brier_difference_ci_high', 'n']
    """
    return BootstrapDifference(
        metric=metric,
        other=other,
        n_resamples=n_resamples,
        seed=seed,
        ci_level=ci_level,
        block=block,
    )
