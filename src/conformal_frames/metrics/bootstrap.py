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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import narwhals.stable.v2 as nw

from conformal_frames import engine
from conformal_frames._progress import advance
from conformal_frames._validate import check_column, check_positive_int, optional
from conformal_frames.engine import (
    PHASES,
    REPLICATE_WEIGHTS,
    Metric,
    Query,
    TableRef,
    aggregate,
    no_weights,
    polars_in_memory,
    sort_result,
)
from conformal_frames.numerics.resample import (
    clean_row,
    poisson_counts,
    replicate_constants,
    replicate_count_row,
    replicate_hash_rows,
    replicate_terms,
)

__all__ = ["bootstrap", "bootstrap_difference", "relative_skill", "skill_score"]
METHODS: list[str] = []  # metric wrappers: use them in evaluate
FRAME_METHODS = ["relative_skill"]


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

    n_resamples: int = field(default=1000, metadata={"check": _check_resamples})
    seed: int = 0
    ci_level: float = 0.95
    block: str | None = field(default=None, metadata={"check": optional(check_column)})

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


# ---------------------------------------------------------------------------
# skill: 1 - S / S_ref, with the paired replicates of bootstrap_difference
# ---------------------------------------------------------------------------
def _check_skill_resamples(value: Any, name: str) -> int | None:
    return None if value is None else check_positive_int(value, name, at_least=2)


def _skill(values: Sequence[nw.Expr]) -> nw.Expr:
    return 1.0 - nw.when(values[1] != 0.0).then(values[0] / values[1])


@dataclass(frozen=True, kw_only=True)
class SkillScore(_Bootstrapped):
    metric: Metric = field(metadata={"check": _check_metric})
    reference: Metric = field(metadata={"check": _check_metric})
    n_resamples: int | None = field(default=None, metadata={"check": _check_skill_resamples})  # type: ignore[assignment]

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
    block: str | None = None,
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
        metric=metric, reference=reference, n_resamples=n_resamples, seed=seed, ci_level=ci_level, block=block
    )


@no_weights("relative_skill", "weight the metric itself: its weights= and counts= enter each model's score")
def relative_skill(
    frame: Any,
    metric: Metric,
    *,
    model: str,
    baseline: str | None = None,
    by: str | Sequence[str] | None = None,
    invalid: engine.InvalidPolicy | None = None,
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

    The ratios are those of the models' mean scores over the rows of the
    group: scoringutils takes each pair's mean scores over the forecasts
    both models made, which is the same when every model scored the same
    forecasts.  Make the rows comparable first (filter to the forecasts all
    models made); ``n`` shows each model's rows.  A group without the
    baseline has a null ``scaled_relative_skill``; a baseline absent from
    the whole frame is an error on eager input.  Scores at or below 0 have
    no ratio: the group's relative skills are null.

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
    invalid : {"raise", "drop", "null"}, optional
        Invalid-row policy of the metric's evaluation.

    Returns
    -------
    frame
        The caller's type, one row per group and model, sorted: ``by``,
        ``model``, the metric's mean score, ``relative_skill``,
        ``scaled_relative_skill`` (with a baseline) and ``n``.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> df = pl.DataFrame({"m": ["a", "a", "b", "b", "naive", "naive"],
    ...                    "y": [1.0, 2.0, 1.0, 2.0, 1.0, 2.0], "f": [1.5, 2.5, 2.0, 3.0, 3.0, 4.0]})
    >>> out = cf.relative_skill(df, cf.mae("y", "f"), model="m", baseline="naive")
    >>> out["scaled_relative_skill"].to_list()
    [0.25, 0.5, 1.0]
    """
    metric = _check_metric(metric, "metric")
    check_column(model, "model")
    keys = engine.as_keys(by)
    if model in keys:
        msg = f"model={model!r} is also a by= key; the models are compared within each group of by="
        raise ValueError(msg)
    _, eager = engine.to_lazy(frame)
    scored = nw.from_native(engine.evaluate(frame, metric, by=[*keys, model], invalid=invalid))
    scores = scored.lazy() if isinstance(scored, nw.DataFrame) else scored
    name = metric.output_name
    if eager and baseline is not None:
        present = scores.filter(nw.col(model) == baseline).select(nw.len()).collect().item()
        if not present:
            models = sorted(scores.select(model).unique().collect()[model].to_list())
            msg = f"baseline {baseline!r} is not a value of the model column {model!r}; models: {models}"
            raise ValueError(msg)
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
