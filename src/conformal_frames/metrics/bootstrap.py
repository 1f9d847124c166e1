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
import functools
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames import engine
from conformal_frames._progress import advance
from conformal_frames._roles import Column, role
from conformal_frames._validate import check_column, check_positive_int, checked, choice, optional
from conformal_frames.engine import (
    PHASES,
    REPLICATE_WEIGHTS,
    InvalidPolicy,
    Metric,
    Query,
    TableRef,
    aggregate,
    no_weights,
    polars_in_memory,
    sort_result,
)
from conformal_frames.errors import BackendLimitError
from conformal_frames.numerics.resample import (
    clean_row,
    poisson_counts,
    replicate_constants,
    replicate_count_row,
    replicate_hash_rows,
    replicate_terms,
)

__all__ = ["bootstrap", "bootstrap_difference", "pairwise_comparison", "relative_skill", "skill_score"]
METHODS: list[str] = []  # metric wrappers: use them in evaluate
FRAME_METHODS = ["pairwise_comparison", "relative_skill"]


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
    replica: Metric = dataclasses.replace(metric, **{"weights": REPLICATE_WEIGHTS})
    return replica, own


def _one_pass(q: Query, metric: Metric) -> set[str]:
    """The metric's input columns; refuse a metric whose weighted version needs more than sums per group."""
    spec = metric.definition(q.schema, q.keys)
    extra = [PHASES[p] for p in ("table", "finalize", "numpy", "group_step") if p in spec.phases]
    if extra:
        msg = (
            f"bootstrap supports metrics computed in one aggregation (sums per group), and "
            f"{metric.output_name} needs {' and '.join(extra)}"
        )
        raise ValueError(msg)
    _replica(metric)  # a weighted version, no counts=
    return set(spec.input_dtypes)


def _replicate(q: Query, metric: Metric, counts: str) -> nw.Expr:
    """The metric's main output under the replicate counts ``counts``."""
    replica, own = _replica(metric)
    with q.replicate(counts, own) as rep:
        expr = replica.build(q)[""]
    if rep.weights is None or expr is None:  # pragma: no cover - a weighted metric asks for its weights
        msg = f"{metric.output_name} did not use its weights; bootstrap cannot resample it"
        raise TypeError(msg)
    return nw.when(q.sum(rep.weights) > 0.0).then(expr)


def _quoted(name: str) -> str:
    """A SQL identifier: ``name`` in double quotes, its own double quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def _unpivot(frame: nw.LazyFrame, on: list[str], index: list[str], value: str, variable: str) -> nw.LazyFrame:
    """``frame.unpivot(...)``; on DuckDB through the relation's own connection.

    narwhals runs DuckDB's UNPIVOT on the default connection, which cannot read
    a relation of another connection (``duckdb.connect()``); a union of one
    select per replicate exceeds DuckDB's expression depth at 1,000 replicates.
    """
    if frame.implementation.is_duckdb():
        names = ", ".join(_quoted(c) for c in on)
        sql = f"unpivot _cf_rel on {names} into name {_quoted(variable)} value {_quoted(value)}"
        native = frame.to_native().query("_cf_rel", sql)
        return nw.from_native(native).select(*index, variable, value)
    return frame.unpivot(on=on, index=index, value_name=value, variable_name=variable)


def _interval(long: nw.LazyFrame, keys: list[str], ref: TableRef, ci_level: float) -> nw.LazyFrame:
    """The percentile interval (numpy's "linear" method) of the replicate values per group.

    ``long`` has one row per (group, replicate): the keys and the value
    ``ref.name("v")``.  The ``k``-th smallest value is ``max(v : rank_min(v)
    <= k)``, so two order statistics and their interpolation weight per
    bound are elementary aggregations.  Replicates with a missing value (e.g.
    a group whose counts are all zero) are left out.  Returns the keys and
    ``ref.name("low")``, ``ref.name("high")`` (one row without keys).
    """
    probs = {"low": (1.0 - ci_level) / 2.0, "high": 1.0 - (1.0 - ci_level) / 2.0}
    value, rank, m = ref.name("v"), ref.name("rank"), ref.name("m")
    idx = keys or [ref.name("one")]
    if not keys:
        long = long.with_columns(nw.lit(0).alias(idx[0]))
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
    stats = aggregate(long.with_columns(*parts), keys, aggs)  # without keys: one row, also when empty
    out = [
        (ref.col(f"{s}_a") + ref.col(f"{s}_t") * (ref.col(f"{s}_b") - ref.col(f"{s}_a"))).alias(ref.name(s))
        for s in probs
    ]
    return stats.select(*keys, *out)


@dataclass(frozen=True, kw_only=True)
class _Bootstrapped(Metric):
    """Shared machinery: replicate weights, replicates, percentile interval."""

    n_resamples: int = checked(_check_resamples, 1000)
    seed: int = 0
    ci_level: float = 0.95
    block: str | None = checked(optional(check_column), None)

    def _metrics(self) -> Sequence[Metric]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _combine(self, values: Sequence[nw.Expr]) -> nw.Expr:  # pragma: no cover - abstract
        raise NotImplementedError

    def counts_columns(self) -> set[str | None]:
        return set().union(*(m.counts_columns() for m in self._metrics()))

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
        replicates = _Replicates(q, metrics, self._combine, hashed, self.seed, self.n_resamples, self.ci_level)
        ref = q.table(key, replicates.table)
        # one resampling unit (one row, one block): every replicate repeats the value; no interval
        several = _units(q, self.block) > 1.5
        return {
            "": self._combine(points),
            "ci_low": nw.when(several).then(ref.col("low")),
            "ci_high": nw.when(several).then(ref.col("high")),
        }


#: (row, replicate) pairs per chunk on polars: ``CHUNK_CELLS // n`` replicates per chunk of ``n`` rows
#: (4 on 1e6 rows), so a chunk holds about this many values of each column it reads
CHUNK_CELLS = 4_000_000
#: replicates per chunk at most: a chunk query has an expression per replicate (building costs per node)
MAX_CHUNK_REPLICATES = 16


@dataclass
class _Replicates:
    """The table of the interval per group: the replicate values, chunk by chunk of replicates.

    Polars: a chunk of replicates is the row frame cross-joined with their
    constants (one row per row and replicate), so one replicate's
    expressions serve every replicate (building a query costs per expression
    node) and the memory is that of :data:`CHUNK_CELLS` (row, replicate)
    pairs of the columns the replicates read, whatever ``n_resamples``; the
    chunks run one after the other (a progress step each).  Other backends: one sub-query with an
    expression per replicate (DuckDB and Spark stream the rows).  Either way a
    replicate's counts are the same numbers and its value the same
    expression over its sums.
    """

    q: Query
    metrics: Sequence[Metric]
    combine: Any
    hashed: tuple[str, str, str]
    seed: int
    n_resamples: int
    ci_level: float

    def table(self, rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        if rows.implementation.is_polars():
            long = self._long(rows, keys, ref)
        else:
            wide, names = self._wide(rows, keys, ref, self._hashed_counts())
            long = (
                _unpivot(wide, names, keys, ref.name("v"), ref.name("var"))
                if keys
                else self._unpivot_one(wide, names, ref)
            )
        return _interval(long, keys, ref, self.ci_level)

    def _unpivot_one(self, wide: nw.LazyFrame, names: list[str], ref: TableRef) -> nw.LazyFrame:
        one = ref.name("one")
        wide = wide.with_columns(nw.lit(0).alias(one))
        return _unpivot(wide, names, [one], ref.name("v"), ref.name("var")).drop(one)

    def _wide(
        self, rows: nw.LazyFrame, keys: list[str], ref: TableRef, counts: Sequence[Callable[[Query], str]]
    ) -> tuple[nw.LazyFrame, list[str]]:
        """The values of one replicate per count row (``counts[i](sub)`` registers it) as columns per group."""
        sub = self.q.fork()
        values, names = [], []
        for i, count in enumerate(counts):
            names.append(ref.name(f"r{i}"))
            values.append(self.combine([_replicate(sub, m, count(sub)) for m in self.metrics]).alias(names[-1]))
        return self.q.aggregate_forked(rows, keys, sub).select(*keys, *values), names

    def _hashed_counts(self) -> list[Callable[[Query], str]]:
        """Count rows of every replicate as expressions (the per-replicate query of SQL engines)."""
        constants = replicate_constants(self.seed, self.n_resamples)
        return [
            functools.partial(replicate_count_row, hashed=self.hashed, seed=self.seed, b=b, k=k)
            for b, k in enumerate(constants)
        ]

    def _long(self, rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        """Polars: the replicate values, one row per (group, replicate), chunk after chunk.

        A chunk query of ``size`` replicates is built once (its source: the
        rows and one count column per replicate, computed in numpy by
        :func:`~conformal_frames.numerics.resample.poisson_counts`, read
        through a polars IO source) and run per chunk on the collected rows,
        in a ``map_batches`` step of the lazy query.
        """
        import polars as pl  # a polars row frame
        from polars.io.plugins import register_io_source

        terms = [replicate_terms(k) for k in replicate_constants(self.seed, self.n_resamples)]
        native_rows = rows.to_native()
        row_schema = dict(native_rows.collect_schema())
        now: dict[str, Any] = {}  # the rows and the count columns of the chunk being computed
        queries: dict[int, tuple[Any, list[str]]] = {}

        def read(with_columns: list[str] | None, predicate: Any, n_rows: int | None, batch_size: int | None) -> Any:
            df, counts = now["rows"], now["counts"]
            names = with_columns if with_columns is not None else [*df.columns, *counts]
            frame = df.select([c for c in names if c in row_schema]).with_columns(
                pl.Series(w, v) for w, v in counts.items() if w in names
            )
            frame = frame.select(names)
            if predicate is not None:
                frame = frame.filter(predicate)
            yield frame if n_rows is None else frame.head(n_rows)

        def chunk_query(size: int) -> tuple[Any, list[str]]:
            if size not in queries:
                w_cols = [ref.name(f"w{i}") for i in range(size)]
                schema = pl.Schema({**row_schema, **dict.fromkeys(w_cols, pl.Float64)})
                source = nw.from_native(register_io_source(read, schema=schema))
                counts = [functools.partial(_count_column, w) for w in w_cols]
                wide, _ = self._wide(source, keys, ref, counts)
                queries[size] = (wide.to_native(), w_cols)
            return queries[size]

        key = object()  # this bootstrap of this compiled query: its progress steps
        value = ref.name("v")

        def run(df: Any) -> Any:
            size = max(1, min(self.n_resamples, MAX_CHUNK_REPLICATES, CHUNK_CELLS // max(len(df), 1)))
            chunks = [terms[first : first + size] for first in range(0, self.n_resamples, size)]
            hashed = [df.get_column(c).to_numpy() for c in self.hashed]
            parts = []
            # the next chunk's counts (numpy) are computed while polars sums the current one
            with ThreadPoolExecutor(max_workers=1) as pool:
                try:
                    now["rows"] = df
                    pending = pool.submit(_chunk_counts, hashed, chunks[0])
                    for i, chunk in enumerate(chunks):
                        query, names = chunk_query(len(chunk))
                        now["counts"] = dict(zip(names, pending.result()))
                        if i + 1 < len(chunks):
                            pending = pool.submit(_chunk_counts, hashed, chunks[i + 1])
                        # in memory: the streaming engine takes twice as long on these wide sums (polars 2.1)
                        wide = query.collect(**polars_in_memory())
                        parts.append(wide.unpivot(index=keys, value_name=value).select(*keys, value))
                        advance(key, "bootstrap chunks", len(chunks))
                finally:
                    now.clear()  # the caller's data is not kept
            return pl.concat(parts)

        out_schema = pl.Schema({**{k: row_schema[k] for k in keys}, value: pl.Float64})
        return nw.from_native(native_rows.map_batches(run, schema=out_schema, streamable=False))


def _chunk_counts(hashed: Sequence[Any], terms: Sequence[tuple[float, float, float]]) -> list[Any]:
    """The count values of a chunk's replicates (numpy arrays)."""
    return [poisson_counts(hashed, t) for t in terms]


def _count_column(column: str, sub: Query) -> str:
    """The row of a count column the chunk's source computes."""
    return sub.row(("boot_count", column), nw.col(column))


def _units(q: Query, block: str | None) -> nw.Expr:
    """The number of resampling units of the group: its rows, or its distinct blocks."""
    if block is None:
        return q.n
    value = clean_row(q, block)  # the hashed block value: rows sharing it share their counts
    share = q.row(("boot_block_share", value), 1.0 / q.over(nw.col(value).count(), value), inputs=[value])
    return q.sum(share)


@dataclass(frozen=True, kw_only=True)
class Bootstrap(_Bootstrapped):
    metric: Metric = checked(_check_metric)

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
    metric: Metric = checked(_check_metric)
    other: Metric = checked(_check_metric)

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
    block: Column | None = None,
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
    block : Column, optional
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
        block=role(block),
    )


def bootstrap_difference(
    metric: Metric,
    other: Metric,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    ci_level: float = 0.95,
    block: Column | None = None,
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
        block=role(block),
    )


# ---------------------------------------------------------------------------
# skill: 1 - S / S_ref, with the paired replicates of bootstrap_difference
# ---------------------------------------------------------------------------
def _check_skill_resamples(value: Any, name: str) -> int | None:
    return None if value is None else check_positive_int(value, name, at_least=2)


def _skill(values: Sequence[nw.Expr]) -> nw.Expr:
    return 1.0 - nw.when(values[1] != 0.0).then(values[0] / values[1])


@dataclass(frozen=True, kw_only=True)
class SkillScore(_Bootstrapped):
    metric: Metric = checked(_check_metric)
    reference: Metric = checked(_check_metric)
    n_resamples: int | None = checked(_check_skill_resamples, None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        super().__post_init__()
        if type(self.metric) is not type(self.reference):
            msg = (
                f"skill_score compares one score of a forecast and of a reference: got {self.metric.output_name} "
                f"({type(self.metric).__name__}) and {self.reference.output_name} ({type(self.reference).__name__})"
            )
            raise TypeError(msg)

    @property
    def output_name(self) -> str:
        return self.name if self.name is not None else f"{self.metric.output_name}_skill"

    def _metrics(self) -> Sequence[Metric]:
        return [self.metric, self.reference]

    def _combine(self, values: Sequence[nw.Expr]) -> nw.Expr:
        return _skill(values)

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        if self.n_resamples is None:  # no interval: any score metric, its own statistics
            points = [m.build(q)[""] for m in self._metrics()]
            return {"": _skill([p for p in points if p is not None])}
        return super().build(q)

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        for m in self._metrics():
            frame = m.prepare(frame)
        return frame


def skill_score(
    metric: Metric,
    reference: Metric,
    *,
    n_resamples: int | None = None,
    seed: int = 0,
    ci_level: float = 0.95,
    block: Column | None = None,
) -> SkillScore:
    """Skill of a forecast against a reference: ``1 - S / S_ref`` per group.

    ``S`` is the score ``metric`` (a loss: lower is better, e.g.
    ``cf.mae("y", "f")``, ``cf.crps(...)``) of the forecast, ``S_ref`` the
    same score of the reference forecast on the same rows (e.g. a naive or
    climatological forecast, ``cf.mae("y", "naive")``).  1 is a perfect
    forecast, 0 no better than the reference, negative worse; null where
    ``S_ref = 0``.

    With ``n_resamples``, the percentile interval ``<name>_ci_low`` /
    ``<name>_ci_high`` of the skill over paired Poisson-bootstrap replicates:
    both scores are evaluated under the same replicate weights, those of
    :func:`bootstrap_difference` (same seed, same counts), so the interval
    reflects the correlation of the two forecasts' errors.  Method, limits
    and ``block=`` as in :func:`bootstrap` (the scores must then be one-pass
    weighted metrics).

    Parameters
    ----------
    metric, reference : Metric
        The same score metric (same class) on the forecast's and the
        reference's columns.
    n_resamples : int, optional
        Number of bootstrap replicates (at least 2); ``None``: no interval.
    seed, ci_level, block
        As in :func:`bootstrap`.

    Returns
    -------
    SkillScore
        A metric object for :func:`~conformal_frames.evaluate`; output columns
        ``<name>`` (default ``<metric name>_skill``), with ``n_resamples`` also
        ``<name>_ci_low`` and ``<name>_ci_high``, and ``n``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> df = pl.DataFrame({"y": [1.0, 2.0, 4.0, 3.0], "f": [1.5, 2.0, 3.0, 3.0],
    ...                    "naive": [0.0, 1.0, 2.0, 4.0]})
    >>> cf.evaluate(df, cf.skill_score(cf.mae("y", "f"), cf.mae("y", "naive")))["mae_skill"].item()
    0.7
    """
    return SkillScore(
        metric=metric,
        reference=reference,
        n_resamples=n_resamples,
        seed=seed,
        ci_level=ci_level,
        block=role(block),
    )


@no_weights("relative_skill", "weight the metric itself: its weights= and counts= enter each model's score")
def relative_skill(
    frame: Any,
    metric: Metric,
    *,
    model: str,
    baseline: str | None = None,
    by: str | Sequence[str] | None = None,
    compare: Compare = "common",
    forecast_unit: str | Sequence[str] | None = None,
    invalid: InvalidPolicy | None = None,
) -> Any:
    """Relative skill of several models in a long frame (one row per forecast and model).

    ``metric`` (a score, lower is better) is evaluated per group of ``by``
    and model: ``S_m``.  As in scoringutils' pairwise comparison, the ratio
    of two models is ``theta_ij = S_i / S_j`` and the relative skill of
    model ``i`` is the geometric mean of its ratios against every model
    ``j`` (itself included), ``theta_i = S_i / GM_j(S_j)``; with a
    ``baseline`` the baseline is left out of the geometric mean and
    ``scaled_relative_skill = theta_i / theta_baseline = S_i / S_baseline``.
    Below 1 is better than the typical model (than the baseline).

    ``compare="common"`` (default): as scoringutils, each pair ``(i, j)`` is
    compared on the forecasts both models made: ``theta_ij`` is the ratio
    of the two models' mean forecast scores over those forecasts (a
    forecast's score is the metric on its rows, a forecast is identified by
    ``forecast_unit``), and ``scaled_relative_skill = theta_i /
    theta_baseline``.  ``n_dropped`` counts each model's forecasts that
    another model of the group did not make (left out of that pair's
    comparison); the metric's column and ``n`` stay those of all the
    model's rows.  A pair without common forecasts is left out of the
    geometric means.  ``compare="all"``: the 0.3 rule, each model's score
    over all its rows (``theta_i = S_i / GM_j(S_j)``, ``scaled = S_i /
    S_baseline``), with a ``UserWarning`` on eager input when the models'
    forecast sets differ.  Both rules agree when every model scored the
    same forecasts (and the metric is a mean over forecasts).  A group
    without the baseline has a null ``scaled_relative_skill``; a baseline
    absent from the whole frame is an error on eager input.  Scores at or
    below 0 have no ratio: the group's relative skills are null.  See also
    :func:`pairwise_comparison` (the ratios with p-values).

    Parameters
    ----------
    frame : DataFrame or LazyFrame
        Long frame with a model column.
    metric : Metric
        A score metric, e.g. ``cf.mae("y", "yhat")`` or ``cf.crps(...)``.
    model : str
        Column naming the model of each row.
    baseline : str, optional
        The baseline model (a value of ``model``).
    by : str or list of str, optional
        Group columns (e.g. ``"horizon"``); the comparison is made per group.
    compare : {"common", "all"}, default "common"
        Which forecasts a pair of models is compared on: those both made, or
        all of each model's rows (0.3's rule).
    forecast_unit : str or list of str, optional
        Columns that identify one forecast across models (e.g.
        ``["series", "cutoff", "horizon"]``); default: every column that is
        not ``model``, a ``by=`` key or an input of ``metric`` (as
        scoringutils: an unrelated column that differs between models makes
        their forecasts different).  A forecast with a missing value in one
        of them matches no other model's.
    invalid : {"raise", "drop", "null"}, optional
        Invalid-row policy of the metric's evaluation.

    Returns
    -------
    frame
        The caller's type, one row per group and model, sorted: ``by``,
        ``model``, the metric's mean score, ``relative_skill``,
        ``scaled_relative_skill`` (with a baseline), ``n`` and (with
        ``compare="common"``) ``n_dropped``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> df = pl.DataFrame({"t": [1, 2] * 3, "m": ["a", "a", "b", "b", "naive", "naive"],
    ...                    "y": [1.0, 2.0, 1.0, 2.0, 1.0, 2.0], "f": [1.5, 2.5, 2.0, 3.0, 3.0, 4.0]})
    >>> out = cf.relative_skill(df, cf.mae("y", "f"), model="m", baseline="naive")
    >>> out["scaled_relative_skill"].to_list()
    [0.25, 0.5, 1.0]

    Model ``c`` made only forecast 1: each pair is compared on the forecasts
    both made.

    >>> long = pl.DataFrame({"id": [1, 2, 1, 2, 1], "model": list("aabbc"),
    ...                      "y": [0.0] * 5, "f": [1.0, 3, 2, 2, 1]})
    >>> out = cf.relative_skill(long, cf.mae("y", "f"), model="model")
    >>> [round(x, 4) for x in out["relative_skill"]], out["n_dropped"].to_list()
    ([1.0, 1.2599, 0.7937], [1, 1, 0])
    """
    metric = _check_metric(metric, "metric")
    keys = _check_comparison(model, by, compare)
    lf, eager = engine.to_lazy(frame)
    scored = nw.from_native(engine.evaluate(frame, metric, by=[*keys, model], invalid=invalid))
    scores = scored.lazy() if isinstance(scored, nw.DataFrame) else scored
    name = metric.output_name
    if eager and baseline is not None:
        _check_baseline(scores, model, baseline)
    ids = _forecast_unit(lf, metric, model, keys, forecast_unit, required=compare == "common")
    if compare == "common":
        common = _Common.of(frame, metric, model, keys, ids, invalid)
        joined = engine.join_keys(scores, common.skills(baseline), [*keys, model])
        rest = [c for c in scores.collect_schema().names() if c not in {*keys, model, name}]
        names = ["relative_skill", *(["scaled_relative_skill"] if baseline is not None else [])]
        result = sort_result(joined.select(*keys, model, name, *names, *rest, "n_dropped"), *keys, model)
        return nw.maybe_reset_index(result.collect()).to_native() if eager else result.to_native()
    if eager and ids:
        _warn_if_sets_differ(_Common.of(frame, metric, model, keys, ids, invalid))
    s = nw.col(name)
    log = "__cf_log"
    scores = scores.with_columns(nw.when(s > 0.0).then(s).log().alias(log))
    ok = engine.over(s.min(), keys) > 0.0
    others = nw.col(log) if baseline is None else nw.when(nw.col(model) != baseline).then(nw.col(log))
    out = [(nw.col(log) - engine.over(others.mean(), keys)).exp().alias("relative_skill")]
    if baseline is not None:
        base = engine.over(nw.when(nw.col(model) == baseline).then(nw.col(log)).max(), keys)
        out.append((nw.col(log) - base).exp().alias("scaled_relative_skill"))
    skills = ["relative_skill", *(["scaled_relative_skill"] if baseline is not None else [])]
    scores = scores.with_columns(*out).with_columns(*[nw.when(ok).then(nw.col(c)).alias(c) for c in skills])
    rest = [c for c in scores.collect_schema().names() if c not in {*keys, model, name, log, *skills}]
    columns = [*keys, model, name, *skills, *rest]
    result = sort_result(scores.select(*columns), *keys, model)
    return result.collect().to_native() if eager else result.to_native()


# ---------------------------------------------------------------------------
# comparisons on common forecasts: relative_skill(compare="common"), pairwise_comparison
# ---------------------------------------------------------------------------
Compare = Literal["common", "all"]
Test = Literal["permutation", "wilcoxon"]
_SCORE, _OTHER, _OTHER_SCORE = "__cf_score", "__cf_other", "__cf_other_score"
_SUM, _OTHER_SUM, _COMMON, _RATIO = "__cf_sum", "__cf_other_sum", "__cf_common", "__cf_ratio"


def _same(a: str, b: str) -> nw.Expr:
    """``a == b`` with a null equal to a null (a null model is a model of its own, as a null key is a group)."""
    x, y = nw.col(a), nw.col(b)
    return (x == y).fill_null(value=False) | (x.is_null() & y.is_null())


def _check_comparison(model: str, by: str | Sequence[str] | None, compare: str) -> list[str]:
    check_column(model, "model")
    choice("common", "all")(compare, "compare")
    keys = engine.as_keys(by)
    if model in keys:
        msg = f"model={model!r} is also a by= key; the models are compared within each group of by="
        raise ValueError(msg)
    return keys


def _check_baseline(scores: nw.LazyFrame, model: str, baseline: Any) -> None:
    present = scores.filter(nw.col(model) == baseline).select(nw.len()).collect().item()
    if not present:
        models = sorted(scores.select(model).unique().collect()[model].to_list())
        msg = f"baseline {baseline!r} is not a value of the model column {model!r}; models: {models}"
        raise ValueError(msg)


def _forecast_unit(
    lf: nw.LazyFrame,
    metric: Metric,
    model: str,
    keys: list[str],
    forecast_unit: str | Sequence[str] | None,
    *,
    required: bool,
) -> list[str]:
    """The columns that identify a forecast: ``forecast_unit``, or every column that is no model, key or input."""
    schema = dict(metric.prepare(lf).collect_schema())
    names = lf.collect_schema().names()
    probe = Query(schema=schema, keys=list(keys))
    if forecast_unit is not None:
        ids = engine.as_keys(forecast_unit)
        clash = [c for c in ids if c in {model, *keys}]
        if clash:
            msg = (
                f"forecast_unit= names {clash}, the model column or a by= key; it names the other columns of a forecast"
            )
            raise ValueError(msg)
        for c in ids:
            probe.column(c)  # exists
        return ids
    used = metric.definition(schema, keys).input_dtypes
    ids = [c for c in names if c not in {model, *keys, *used}]
    if not ids and required:
        msg = (
            f"compare='common' needs the columns that identify a forecast (e.g. series and date), and every "
            f"column is the model, a by= key or an input of {metric.output_name}; pass forecast_unit=, or "
            "compare='all' to compare each model's rows as they are"
        )
        raise ValueError(msg)
    return ids


@dataclass(frozen=True)
class _Common:
    """Per-forecast scores of every model and the pairs of models that made the same forecast."""

    keys: list[str]
    model: str
    ids: list[str]
    #: one row per forecast and model: keys, model, ids, the forecast's score ``_SCORE`` (not null)
    scores: nw.LazyFrame
    #: one row per forecast and ordered pair of models that both made it: scores' columns, ``_OTHER``, ``_OTHER_SCORE``
    pairs: nw.LazyFrame

    @classmethod
    def of(cls, frame: Any, metric: Metric, model: str, keys: list[str], ids: list[str], invalid: Any) -> _Common:
        scored = nw.from_native(engine.evaluate(frame, metric, by=[*keys, model, *ids], invalid=invalid))
        lazy = scored.lazy() if isinstance(scored, nw.DataFrame) else scored
        score = nw.col(metric.output_name).cast(nw.Float64).alias(_SCORE)
        scores = lazy.select(*keys, model, *ids, score).filter(~nw.col(_SCORE).is_null())
        right = scores.select(*keys, *ids, nw.col(model).alias(_OTHER), nw.col(_SCORE).alias(_OTHER_SCORE))
        pairs = engine.join_keys(scores, right, [*keys, *ids], how="inner").filter(~_same(model, _OTHER))
        return cls(keys, model, ids, scores, pairs)

    def ratios(self) -> nw.LazyFrame:
        """Per group and ordered pair: the sums of both scores, the common forecasts and their ratio."""
        group = [*self.keys, self.model, _OTHER]
        sums = [
            nw.col(_SCORE).sum().alias(_SUM),
            nw.col(_OTHER_SCORE).sum().alias(_OTHER_SUM),
            nw.len().alias(_COMMON),
        ]
        a, b = nw.col(_SUM), nw.col(_OTHER_SUM)
        ratio = nw.when((a > 0.0) & (b > 0.0)).then(a / b).alias(_RATIO)
        return aggregate(self.pairs, group, sums).with_columns(ratio, nw.col(_COMMON).cast(nw.Int64))

    def n_dropped(self) -> nw.LazyFrame:
        """Per group and model: its forecasts that another model of the group did not make."""
        keys, model = self.keys, self.model
        partners = aggregate(self.pairs, [*keys, model, *self.ids], [nw.len().alias("__cf_partners")])
        forecasts = engine.join_keys(self.scores.select(*keys, model, *self.ids), partners, [*keys, model, *self.ids])
        models = aggregate(self.scores, [*keys, model], [nw.len().alias("__cf_m")])
        n_models = aggregate(models, keys, [nw.len().alias("__cf_n_models")])
        forecasts = engine.join_keys(forecasts, n_models, keys)
        short = nw.col("__cf_partners").fill_null(0) < nw.col("__cf_n_models") - 1
        dropped = forecasts.with_columns(engine.indicator(short).alias("__cf_dropped"))
        n_dropped = aggregate(dropped, [*keys, model], [nw.col("__cf_dropped").sum().alias("n_dropped")])
        return n_dropped.with_columns(nw.col("n_dropped").cast(nw.Int64))

    def skills(self, baseline: Any) -> nw.LazyFrame:
        """Per group and model: ``relative_skill`` (and ``scaled_relative_skill``) from the pair ratios, ``n_dropped``.

        ``theta_i`` is the geometric mean of ``theta_ij`` over the models
        ``j`` of the group (``theta_ii = 1``; pairs without common forecasts
        left out; with a baseline, ``j`` runs over the other models).  A
        ratio of a sum at or below 0 nulls the group's skills.
        """
        keys, model = self.keys, self.model
        counted = nw.col(_OTHER) != baseline if baseline is not None else nw.lit(value=True)
        ratios = self.ratios().with_columns(
            nw.when(counted).then(nw.col(_RATIO).log()).fill_null(0.0).alias("__cf_log"),
            engine.indicator(counted & ~nw.col(_RATIO).is_null()).alias("__cf_k"),
            engine.indicator(nw.col(_RATIO).is_null()).alias("__cf_bad"),
        )
        logs = [nw.col(c).sum() for c in ("__cf_log", "__cf_k", "__cf_bad")]
        per_model = engine.join_keys(self.n_dropped(), aggregate(ratios, [*keys, model], logs), [*keys, model])
        own = nw.col(model) != baseline if baseline is not None else nw.lit(value=True)
        den = nw.col("__cf_k").fill_null(0.0) + engine.indicator(own)
        bad = engine.over(nw.col("__cf_bad").fill_null(0.0).max(), keys) > 0.0
        theta = nw.when(~bad & (den > 0.0)).then((nw.col("__cf_log").fill_null(0.0) / den).exp())
        out = per_model.with_columns(theta.alias("relative_skill"))
        columns = [*keys, model, "relative_skill", "n_dropped"]
        if baseline is not None:
            base = engine.over(nw.when(nw.col(model) == baseline).then(nw.col("relative_skill")).max(), keys)
            out = out.with_columns((nw.col("relative_skill") / base).alias("scaled_relative_skill"))
            columns.insert(-1, "scaled_relative_skill")
        return out.select(*columns)


def _warn_if_sets_differ(common: _Common) -> None:
    dropped = common.n_dropped().filter(nw.col("n_dropped") > 0).collect()
    if len(dropped):
        total = int(dropped["n_dropped"].sum())
        models = sorted({str(m) for m in dropped[common.model].to_list()})
        msg = (
            f"relative_skill(compare='all'): the models' forecast sets differ ({total} forecasts of "
            f"{', '.join(models)} were not made by every model of their group; a forecast is a value of "
            f"{common.ids}, pass forecast_unit= to name its columns), so their scores are over different "
            "forecasts; compare='common' compares each pair on the forecasts both made"
        )
        warnings.warn(msg, UserWarning, stacklevel=4)


def _label(value: Any) -> Any:
    """A key value as a plain Python value; every missing value (None, NaN, pandas' NA) is None."""
    try:
        return None if value is None or bool(value != value) else value
    except TypeError:  # pandas' NA: its comparisons are NA
        return None


def _labels(frame: nw.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
    return list(zip(*([_label(v) for v in frame[c].to_list()] for c in columns))) if len(frame) else []


def _pvalues(common: _Common, test: Test, n_permutations: int, seed: int) -> dict[tuple[Any, ...], tuple[float, float]]:
    """``(keys..., model, other) -> (pvalue, Holm-adjusted pvalue)`` for every pair with common forecasts.

    Pairs are tested once (in the sorted order of the first model of the
    pair, mirrored for the other order; model values need no ordering of
    their own, e.g. unordered categoricals), with one generator seeded by
    ``seed``; Holm's adjustment runs over the pairs of each group, as
    scoringutils.
    """
    from conformal_frames.numerics.paired import holm, permutation_pvalue, wilcoxon_pvalue

    keys, model = common.keys, common.model
    order = [*keys, model, _OTHER, *common.ids]
    rows = common.pairs.sort(*order, nulls_last=True).collect()
    labels = _labels(rows, [*keys, model, _OTHER])
    x, y = rows[_SCORE].to_numpy().astype(float), rows[_OTHER_SCORE].to_numpy().astype(float)
    starts = [i for i in range(len(labels)) if i == 0 or labels[i] != labels[i - 1]]
    rng = np.random.default_rng(seed)
    raw: dict[tuple[Any, ...], float] = {}
    for start, stop in zip(starts, [*starts[1:], len(labels)]):
        label = labels[start]
        if (*label[:-2], label[-1], label[-2]) in raw:  # the mirrored pair, tested already
            continue
        a, b = x[start:stop], y[start:stop]
        raw[label] = (
            permutation_pvalue(a, b, n_permutations=n_permutations, rng=rng)
            if test == "permutation"
            else wilcoxon_pvalue(a, b)
        )
    out: dict[tuple[Any, ...], tuple[float, float]] = {}
    groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for label in raw:
        groups.setdefault(label[: len(keys)], []).append(label)
    for members in groups.values():
        adjusted = holm(np.array([raw[m] for m in members]))
        for m, adj in zip(members, adjusted):
            mirrored = (*m[:-2], m[-1], m[-2])
            out[m] = out[mirrored] = (raw[m], float(adj))
    return out


def _with_pvalues(
    table: nw.DataFrame, pvalues: dict[tuple[Any, ...], tuple[float, float]], labels: list[str]
) -> nw.DataFrame:
    """``table`` (a row per group and ordered pair) with ``pvalue`` and ``adjusted_pvalue`` (1 for a model and itself)."""
    rows = _labels(table, labels)
    ns = nw.get_native_namespace(table)
    cols = []
    for i, name in enumerate(("pvalue", "adjusted_pvalue")):
        values = [1.0 if r[-1] == r[-2] else pvalues.get(r, (None, None))[i] for r in rows]
        cols.append(nw.new_series(name, values, nw.Float64, backend=ns))
    return table.with_columns(*cols)


def _pairwise_table(common: _Common, baseline: Any) -> nw.LazyFrame:
    """Per group and ordered pair of its models (a model and itself included): the ratio, ``n``, the relative skills.

    A pair without common forecasts has ``n = 0`` and a null ratio.
    """
    keys, model, other = common.keys, common.model, "compare_against"
    ratios = common.ratios().select(
        *keys, model, nw.col(_OTHER).alias(other), nw.col(_RATIO).alias("__cf_r"), nw.col(_COMMON).alias("__cf_n")
    )
    models = aggregate(common.scores, [*keys, model], [nw.len().alias("__cf_own")])
    grid = engine.join_keys(models, models.select(*keys, nw.col(model).alias(other)), keys, how="inner")
    table = engine.join_keys(grid, ratios, [*keys, model, other])
    same = _same(model, other)
    table = table.with_columns(
        nw.when(same).then(nw.lit(1.0, nw.Float64)).otherwise(nw.col("__cf_r")).alias("mean_scores_ratio"),
        nw.when(same).then(nw.col("__cf_own")).otherwise(nw.col("__cf_n").fill_null(0)).cast(nw.Int64).alias("n"),
    )
    table = table.select(*keys, model, other, "mean_scores_ratio", "n")
    return engine.join_keys(table, common.skills(baseline).drop("n_dropped"), [*keys, model])


@no_weights("pairwise_comparison", "weight the metric itself: its weights= and counts= enter each forecast's score")
def pairwise_comparison(
    frame: Any,
    metric: Metric,
    *,
    model: str,
    baseline: str | None = None,
    by: str | Sequence[str] | None = None,
    forecast_unit: str | Sequence[str] | None = None,
    test: Test | None = "permutation",
    n_permutations: int = 999,
    seed: int = 0,
    invalid: InvalidPolicy | None = None,
) -> Any:
    """Pairwise comparison of several models on the forecasts each pair made (scoringutils').

    ``metric`` (a score, lower is better) is evaluated per forecast (the
    rows of one ``forecast_unit`` value and model).  For every pair of
    models ``(i, j)`` of a group of ``by``: ``mean_scores_ratio`` =
    ``theta_ij`` = the ratio of their mean forecast scores over the ``n``
    forecasts both made, and a two-sided ``pvalue`` of equal mean scores on
    those paired forecast scores ``(x_t, y_t)``:

    - ``test="permutation"`` (default): the paired permutation test of
      scoringutils (``permutation_test``): statistic ``|mean(x) - mean(y)|``,
      ``n_permutations`` random swaps of each pair (generator seeded by
      ``seed``), ``p = (1 + #{permuted >= observed}) / (n_permutations + 1)``;
    - ``test="wilcoxon"``: the Wilcoxon signed-rank test of the differences
      (``scipy.stats.wilcoxon``'s defaults; scoringutils' default test,
      through R's ``wilcox.test``, adds a continuity correction);
    - ``None``: no p-values (the table then stays lazy on every backend).

    ``adjusted_pvalue`` is Holm's adjustment over the pairs of the group.
    ``relative_skill`` of model ``i`` is the geometric mean of its ratios
    (``theta_ii = 1`` included; pairs without common forecasts left out;
    with a ``baseline``, ratios against the baseline left out) and
    ``scaled_relative_skill = theta_i / theta_baseline``: the values of
    :func:`relative_skill` with ``compare="common"``.  A model against
    itself has ratio 1 and p-values 1.  Mean scores at or below 0 have no
    ratio (null), and null the group's relative skills.

    The p-values are computed in numpy on the paired forecast scores: on a
    polars LazyFrame the function runs when called (a LazyFrame of the
    result); DuckDB and PySpark relations need ``test=None`` or an eager
    frame (``BackendLimitError``).

    Parameters
    ----------
    frame : DataFrame or LazyFrame
        Long frame with a model column.
    metric : Metric
        A score metric, e.g. ``cf.wis(...)``, ``cf.mae("y", "yhat")``.
    model : str
        Column naming the model of each row.
    baseline : str, optional
        The baseline model (a value of ``model``).
    by : str or list of str, optional
        Group columns; the comparison is made per group.
    forecast_unit : str or list of str, optional
        Columns that identify one forecast across models; default every
        column that is not ``model``, a ``by=`` key or an input of
        ``metric`` (see :func:`relative_skill`).
    test : {"permutation", "wilcoxon"} or None, default "permutation"
        The paired test of each pair.
    n_permutations : int, default 999
        Permutations of the permutation test.
    seed : int, default 0
        Seed of the permutations.
    invalid : {"raise", "drop", "null"}, optional
        Invalid-row policy of the metric's evaluation.

    Returns
    -------
    frame
        The caller's type, one row per group and ordered pair of models,
        sorted: ``by``, ``model``, ``compare_against``,
        ``mean_scores_ratio``, ``n`` (common forecasts), ``relative_skill``,
        ``scaled_relative_skill`` (with a baseline), ``pvalue``,
        ``adjusted_pvalue``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> long = pl.DataFrame({"id": [1, 2, 3] * 2 + [1], "model": list("aaabbbc"),
    ...                      "y": [0.0] * 7, "f": [1.0, 3, 2, 2, 2, 3, 1]})
    >>> out = cf.pairwise_comparison(long, cf.mae("y", "f"), model="model", test="wilcoxon")
    >>> out.select("model", "compare_against", "mean_scores_ratio", "n").rows()[:3]
    [('a', 'a', 1.0, 3), ('a', 'b', 0.8571428571428571, 3), ('a', 'c', 1.0, 1)]
    """
    metric = _check_metric(metric, "metric")
    keys = _check_comparison(model, by, "common")
    if model == "compare_against":
        msg = "model='compare_against' clashes with the output column compare_against; rename the model column"
        raise ValueError(msg)
    if test is not None:
        choice("permutation", "wilcoxon")(test, "test")
    n_permutations = check_positive_int(n_permutations, "n_permutations")
    lf, eager = engine.to_lazy(frame)
    if test is not None and not eager and not lf.implementation.is_polars():
        backend = str(lf.implementation).split(".")[-1].lower()
        msg = (
            f"pairwise_comparison's p-values are computed in numpy and cannot stay lazy on the {backend} backend; "
            "collect the frame first, or pass test=None for the ratios and relative skills alone"
        )
        raise BackendLimitError(msg, backend=backend)
    ids = _forecast_unit(lf, metric, model, keys, forecast_unit, required=True)
    common = _Common.of(frame, metric, model, keys, ids, invalid)
    if eager and baseline is not None:
        _check_baseline(common.scores, model, baseline)
    table = sort_result(_pairwise_table(common, baseline), *keys, model, "compare_against")
    labels = [*keys, model, "compare_against"]
    skills = ["relative_skill", *(["scaled_relative_skill"] if baseline is not None else [])]
    columns = [*labels, "mean_scores_ratio", "n", *skills, "pvalue", "adjusted_pvalue"]
    if test is None:
        none = [nw.lit(None, nw.Float64).alias(c) for c in ("pvalue", "adjusted_pvalue")]
        lazy = table.with_columns(*none).select(*columns)
        return nw.maybe_reset_index(lazy.collect()).to_native() if eager else lazy.to_native()
    result = _with_pvalues(table.collect(), _pvalues(common, test, n_permutations, seed), labels).select(*columns)
    return nw.maybe_reset_index(result).to_native() if eager else result.to_native().lazy()
