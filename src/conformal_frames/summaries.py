"""Mergeable statistics: summarize once, finalize any coarser grouping later.

:func:`summarize` runs the first half of the engine (row columns and the
main aggregation, see :mod:`conformal_frames.engine`) and returns the
aggregated statistics as a frame of the caller's type; :func:`finalize` adds
the rows of coarser groups up (sums, minima, maxima) and runs the second half
(finalize expressions, tables, numpy steps).  :func:`rolling` finalizes
moving windows of an index (a day, a week ...) from the same statistics.

Schema (version 2) of a summary frame, one row per group plus, for metrics
that sort by a score (``ks_test``, ``kuiper_test``, ``auroc``), one row per
(group, distinct score):

- the group keys (``by=``);
- ``cf_version`` (Int64, 1), ``cf_inputs`` (String: JSON ``{input column:
  dtype}`` of the metric inputs);
- ``cf_cell`` (String): null on a group row; on a cell row, the id of its cell
  set, and ``cf_order`` (Float64) the distinct score of the cell;
- ``n`` (Int64; 0 on cell rows) and ``n_invalid`` (policy ``"null"``) or
  ``n_dropped`` (policy ``"drop"``);
- one Float64 column per statistic, ``cf_<sum|min|max>__<declared name>``
  (:attr:`conformal_frames.engine.Stat.state`, e.g. ``cf_sum__covered[y,lo,hi]``):
  the same statistic of two metrics is one column, so a frame summarized with
  more metrics finalizes any subset.  ``tests/test_summary_format.py`` pins
  every metric's names: a rename is a format change (a new version).

Version 1 (0.3) named the statistics ``cf_<how>_<what>_<hash of the key>``;
:func:`finalize`, :func:`rolling` and :func:`merge_summaries` still read it.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import narwhals.stable.v2 as nw

from conformal_frames import engine
from conformal_frames._progress import task
from conformal_frames._roles import Column, shown
from conformal_frames._validate import check_positive_int
from conformal_frames.engine import Cells, InvalidPolicy, Metric, Plan, Query
from conformal_frames.engine.spec import Spec, Stat, declared_name
from conformal_frames.errors import BooleanColumnError, ColumnNotFoundError, ListColumnError

__all__ = ["SCHEMA_VERSION", "finalize", "merge_summaries", "rolling", "summarize"]

#: version of the summary frame's column schema (see the module docstring)
SCHEMA_VERSION = 2
_VERSION, _INPUTS, _CELL, _ORDER = "cf_version", "cf_inputs", "cf_cell", "cf_order"
#: the key of ``cf_inputs`` that lists the summarized metrics with their parameters
_HELD = "cf_metrics"
F64 = nw.Float64


# ---------------------------------------------------------------------------
# the state columns: the statistics' declared names
# ---------------------------------------------------------------------------
def _v1_name(how: str, key: Hashable) -> str:
    """A statistic's column in a version-1 summary (0.3): ``cf_<how>_<tag>_<sha1 of its key>``."""
    first = key[0] if isinstance(key, tuple) and key and isinstance(key[0], str) else str(key)
    tag = re.sub(r"[^a-z0-9]+", "_", first.lower()).strip("_")[:24] or "stat"
    digest = hashlib.sha1(repr(key).encode()).hexdigest()[:10]
    return f"cf_{how}_{tag}_{digest}"


def _v2_name(how: str, key: Hashable) -> str:
    return f"cf_{how}__{declared_name(key)}"


def _v1_cell(key: Hashable) -> str:
    return _v1_name("cell", key)[len("cf_cell_") :]


def _stored_name(stat: Stat, version: int) -> str:
    """The summary column of ``stat`` in a summary of schema ``version``.

    Version 1 (0.3) has no count of the positive weights of a group (the
    positive-total rule) and no count of input rows under ``counts=``: the
    sum of the weights stands in for the first (the weights were checked
    finite and non-negative, so one is positive exactly when the other is),
    ``n`` for the second (0.3 counted invalid rows as represented rows).
    """
    key = stat.key
    head = key[0] if isinstance(key, tuple) and key else None
    if version == 1 and head == "input_rows":
        return "n"
    if version == 1 and head == "positive" and isinstance(key, tuple) and len(key) == 2:
        inner = key[1]
        key = inner[1] if isinstance(inner, tuple) and len(inner) == 2 and inner[0] == "row" else inner
    return _NAMES[version][0](stat.how, key)


_NAMES: dict[int, tuple[Callable[[str, Hashable], str], Callable[[Hashable], str]]] = {
    1: (_v1_name, _v1_cell),
    2: (_v2_name, declared_name),
}


@dataclass
class _State:
    """The statistics of the metrics of one plan under their summary column names."""

    #: internal aggregated column -> (summary column, how)
    aggs: dict[str, tuple[str, str]]
    #: cell set id -> (order row, {summary column: row name})
    cells: dict[str, tuple[str, dict[str, str]]]
    #: input column -> dtype text
    inputs: dict[str, str]
    #: the summarized metrics with their parameters (:func:`_describe`), recorded in ``cf_inputs``
    held: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, specs: Sequence[Spec], version: int = SCHEMA_VERSION) -> _State:
        """The state of ``specs`` as a summary of schema ``version`` names it."""
        stat_name, cell_name = _NAMES[version]
        aggs: dict[str, tuple[str, str]] = {}
        cells: dict[str, tuple[str, dict[str, str]]] = {}
        for spec in specs:
            aggs.update({s.column: (_stored_name(s, version), s.how) for s in spec.stats})
            for table in spec.cells:
                sums = cells.setdefault(cell_name(table.order_key), (table.order, {}))[1]
                sums.update({stat_name("sum", key): row for key, row in table.sums})
        inputs = {c: str(t) for spec in specs for c, t in spec.inputs}
        return cls(aggs, cells, dict(sorted(inputs.items())))

    @property
    def columns(self) -> list[str]:
        """Every state column: statistics, then cell sums."""
        stats = [name for name, _ in self.aggs.values()]
        return list(dict.fromkeys([*stats, *[s for _, sums in self.cells.values() for s in sums]]))

    def inputs_json(self) -> str:
        """The ``cf_inputs`` text: the inputs' dtypes, and the metrics under ``"cf_metrics"``."""
        return json.dumps({**self.inputs, _HELD: self.held} if self.held else self.inputs)


def _refusal(metric: Metric, spec: Spec) -> str | None:
    """Why ``metric``'s statistics do not merge exactly (``None`` when they do)."""
    if spec.why_not is None:
        return None
    alternative = metric.mergeable_alternative or "evaluate it on the rows"
    inner = getattr(metric, "metric", None)
    if isinstance(inner, Metric):  # a wrapper such as cf.bootstrap(metric): name it, not only the metric inside
        what = type(metric).__name__.lower()
        return (
            f"{what}({inner.output_name}): resamples the rows of a group (evaluate it on the rows; "
            f"summarize {inner.output_name} without {what} to merge the estimate)"
        )
    return f"{metric.output_name}: {spec.why_not} (mergeable alternative: {alternative})"


def _check_mergeable(plan: Plan, metrics: Sequence[Metric]) -> None:
    refused = [reason for m, spec in zip(metrics, plan.specs) if (reason := _refusal(m, spec))]
    if refused:
        msg = "summarize: these metrics have statistics that do not merge exactly: " + "; ".join(refused)
        raise ValueError(msg)


def _describe(metric: Metric) -> str:
    """A metric with its parameters, as it was called: ``ece(y='y', score='p', n_bins=10, strategy='uniform')``."""
    try:
        shown = [(f.name, getattr(metric, f.name)) for f in fields(metric)]
    except TypeError:  # not a dataclass
        return metric.output_name
    args = ", ".join(f"{k}={v!r}" for k, v in shown if v is not None and k != "name" and not isinstance(v, Metric))
    inner = getattr(metric, "metric", None)
    if isinstance(inner, Metric):
        args = ", ".join([_describe(inner), *([args] if args else [])])
        return f"{type(metric).__name__.lower()}({args})"
    return f"{metric.output_name}({args})"


# ---------------------------------------------------------------------------
# summarize
# ---------------------------------------------------------------------------
def _group_part(
    table: nw.LazyFrame, eplan: Plan, state: _State, policy: InvalidPolicy, cell_cols: list[str]
) -> nw.LazyFrame:
    return table.select(
        *eplan.key_columns(),
        nw.lit(SCHEMA_VERSION).cast(nw.Int64).alias(_VERSION),
        nw.lit(state.inputs_json()).alias(_INPUTS),
        nw.lit(None, nw.String).alias(_CELL),
        nw.lit(None, F64).alias(_ORDER),
        *eplan.count_columns(policy),
        *[nw.col(internal).cast(F64).alias(name) for internal, (name, _) in state.aggs.items()],
        *[nw.lit(None, F64).alias(c) for c in cell_cols if c not in {name for name, _ in state.aggs.values()}],
    )


def _cell_part(
    rows: nw.LazyFrame,
    q: Query,
    state: _State,
    cell_id: str,
    policy: InvalidPolicy,
    columns: list[str],
    decimals: int | None = None,
) -> nw.LazyFrame:
    order, sums = state.cells[cell_id]
    if decimals is not None:  # score_decimals=: every cell's order value (a score, a PIT value) rounded
        rows = rows.with_columns(nw.col(order).round(decimals))
    cells = rows.group_by(*q.group, order).agg(*[nw.col(r).sum().alias(name) for name, r in sums.items()])
    values: dict[str, nw.Expr] = {
        **{k: nw.col(ik).alias(k) for k, ik in zip(q.keys, q.group)},
        _VERSION: nw.lit(SCHEMA_VERSION).cast(nw.Int64).alias(_VERSION),
        _INPUTS: nw.lit(state.inputs_json()).alias(_INPUTS),
        _CELL: nw.lit(cell_id).alias(_CELL),
        _ORDER: nw.col(order).alias(_ORDER),
        **{name: nw.col(name).cast(F64) for name in sums},
    }
    ints = {"n", "n_invalid", "n_dropped"}
    # counts are 0 on cell rows (the group row carries them): summing n over any rows counts rows
    return cells.select(
        *[
            values.get(c, nw.lit(0).cast(nw.Int64).alias(c) if c in ints else nw.lit(None, F64).alias(c))
            for c in columns
        ]
    )


#: ``summarize`` warns when the (group, score) cells exceed this fraction of the rows ...
CELL_FRACTION = 0.5
#: ... on at least this many rows
CELL_ROWS = 10_000


def summarize(
    frame: Any,
    *metrics: Metric,
    by: Column | Sequence[Column] | None = None,
    invalid: InvalidPolicy | None = None,
    score_decimals: int | None = None,
    progress: bool | None = False,
) -> Any:
    """The sufficient statistics of ``metrics`` per group, as a mergeable frame.

    One row per group (and, for ``ks_test``, ``kuiper_test``, ``auroc``,
    unweighted quantile-binned ``ece`` / ``mce`` and a Gaussian ``pit_test``,
    one row per group and distinct score or PIT value) with the columns described in
    :mod:`conformal_frames.summaries` (schema version 2).  Summaries of several
    frames (days, partitions, Spark executors) concatenate; :func:`finalize`
    merges their rows into any coarser grouping and finalizes the metrics
    exactly as :func:`~conformal_frames.evaluate` on the rows would.

    Metrics whose statistics do not merge exactly (quantile bins, SSC's width
    strata, HSIC, AUARC, ...) are refused with an error naming them and a
    mergeable alternative.

    Parameters
    ----------
    frame
        Any frame narwhals supports (eager or lazy).
    *metrics
        Metric objects (at least one).
    by : Column or list of Column, optional
        Group column name(s) or expressions, e.g. ``["day", "segment"]``.
    invalid : {"raise", "drop", "null"}, optional
        As in :func:`~conformal_frames.evaluate`; with ``"null"`` the summary
        carries ``n_invalid`` (a group with invalid rows finalizes to null
        metrics), with ``"drop"`` it carries ``n_dropped``.  A summary has one
        ``n`` per row: under ``"drop"`` a row failing a check of any of its
        metrics leaves all of them (``evaluate`` drops it from the metrics
        whose inputs fail only); summarize families with different inputs
        in separate calls to finalize to ``evaluate``'s numbers.
    score_decimals : int, optional
        Round the score columns (``score=``) of the metrics with cells
        (``ks_test``, ``kuiper_test``, ``auroc``, quantile-binned ``ece`` /
        ``mce``) to this many decimals
        before the cells are formed, and every cell's order value (``pit_test``'s
        PIT values too): at most ``10^d + 1`` cells per group for
        scores in ``[0, 1]``.  The metrics are then those of the rounded
        scores (``pit_test``: of the rounded PIT values).  Without it, an eager summary whose cells exceed half of its
        rows (on at least 10,000 rows) warns: the summary would be nearly as
        large as the data.
    progress : bool or None, default False
        A progress bar on stderr (see :func:`~conformal_frames.evaluate`).

    Returns
    -------
    frame
        A frame of the caller's type (eager in, eager out; lazy in, lazy out),
        sorted by the keys; writable to Parquet.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> df = pl.DataFrame({"day": [1, 1, 2, 2], "y": [1.0, 2.0, 3.0, 4.0],
    ...                    "lo": [0.5, 2.5, 2.0, 3.0], "hi": [1.5, 3.5, 4.0, 5.0]})
    >>> stats = cf.summarize(df, cf.coverage("y", "lo", "hi"), by="day")
    >>> stats.select("day", "n").rows()
    [(1, 2), (2, 2)]
    >>> cf.finalize(stats, cf.coverage("y", "lo", "hi"))["coverage"].item()
    0.75
    """
    with task("summarize", progress):
        return _summarize(frame, metrics, by, invalid, score_decimals)


def _summarize(
    frame: Any, metrics: Sequence[Metric], by: Any, invalid: InvalidPolicy | None, score_decimals: int | None
) -> Any:
    frame, by = engine.resolve_roles(frame, metrics, by)
    lf, eager = engine.to_lazy(frame)
    keys = engine.as_keys(by)
    engine.check_index_keys(frame, keys)
    policy = engine.policy(invalid, eager)
    if score_decimals is not None:
        score_decimals = check_positive_int(score_decimals, "score_decimals", at_least=0)
    for m in metrics:
        lf = m.prepare(lf) if isinstance(m, Metric) else lf
    lf = engine.normalized_keys(lf, keys)
    schema = lf.collect_schema()
    _check_summary_keys(keys)
    if not metrics:
        msg = "summarize() needs at least one metric, e.g. cf.summarize(df, cf.coverage('y', 'lo', 'hi'), by='day')"
        raise ValueError(msg)
    eplan = Plan.of(schema, metrics, keys, caller="summarize")  # the one build of each metric
    q = eplan.query
    _check_mergeable(eplan, metrics)
    if score_decimals is not None:
        lf = _rounded_scores(lf, schema, eplan, metrics, score_decimals)
    state = _State.of(eplan.specs)
    eplan = eplan.defer_totals()  # a partition of zero total weight: checked on the merged totals (finalize)
    state.held = [_describe(m) for m in metrics]
    rows, table = eplan.aggregate(lf, policy)
    if eager:  # one pass: collect the group rows, raise on invalid rows, go on lazily
        collected = table.collect()
        if policy == "raise" and engine.has_invalid(collected):
            eplan.raise_failed(eplan.check_counts(lf))
        table = collected.lazy()
    elif policy == "raise" and eplan.has_checks:  # asked for: run the checks now (the summary stays lazy)
        eplan.raise_failed(eplan.check_counts(lf))
    cell_cols = sorted({name for _, sums in state.cells.values() for name in sums})
    out = _group_part(table, eplan, state, policy, cell_cols)
    columns = out.collect_schema().names()
    parts = [out, *[_cell_part(rows, q, state, cid, policy, columns, score_decimals) for cid in state.cells]]
    result = nw.concat(parts, how="vertical") if len(parts) > 1 else out
    result = result.sort(*keys, _CELL, _ORDER, nulls_last=False) if keys or state.cells else result
    if eager:
        collected = result.collect()
        if state.cells and score_decimals is None:
            _warn_cells(collected)
        return nw.to_native(nw.maybe_reset_index(_object_keys(collected, schema, keys)))
    return nw.to_native(result)


def _object_keys(summary: nw.DataFrame, schema: Any, keys: list[str]) -> nw.DataFrame:
    """``summary`` with the object key columns of the input kept object columns (pandas).

    pandas groups an object column whose values are all null (e.g. a day whose
    Boolean keys with nulls are all null) into a float64 key; concatenated with
    another day's summary, whose keys are ``bool``, ``False`` would become
    ``0.0`` before :func:`merge_summaries`.  An object key keeps the values.
    """
    if not summary.implementation.is_pandas_like():
        return summary
    out = summary.schema
    drifted = [k for k in keys if schema[k] in (nw.String, nw.Object) and out[k] != schema[k]]
    return summary.with_columns(*[nw.col(k).cast(nw.Object) for k in drifted]) if drifted else summary


def _rounded_scores(
    lf: nw.LazyFrame, schema: Any, plan: Plan, metrics: Sequence[Metric], decimals: int
) -> nw.LazyFrame:
    """``lf`` with the float score columns of the metrics with cells rounded to ``decimals``."""
    scores = set()
    for m, spec in zip(metrics, plan.specs):
        score = getattr(m, "score", None)
        if spec.cells and isinstance(score, str) and score in schema and schema[score].is_float():
            scores.add(score)
    return lf.with_columns(*[nw.col(c).round(decimals) for c in sorted(scores)]) if scores else lf


def _warn_cells(summary: nw.DataFrame) -> None:
    """Warn when the (group, score) cells approach the rows the summary stands for."""
    rows = int(summary.get_column("n").sum() or 0)
    cells = len(summary) - int(summary.get_column(_CELL).is_null().sum())
    if rows >= CELL_ROWS and cells > CELL_FRACTION * rows:
        msg = (
            f"summarize: {cells:,} (group, score) cells for {rows:,} rows: the summary is nearly as large "
            "as the data (ks_test, kuiper_test, auroc and quantile-binned ece keep one row per group and distinct "
            "score); "
            "round the scores with score_decimals=, e.g. score_decimals=3 (at most 1,001 cells per group "
            "for scores in [0, 1])"
        )
        warnings.warn(msg, UserWarning, stacklevel=4)


def _check_summary_keys(keys: list[str]) -> None:
    for k in keys:
        if k.startswith("cf_"):
            msg = f"group column {k!r} (by=): names starting with 'cf_' are the summary's own columns; rename it"
            raise ValueError(msg)


# ---------------------------------------------------------------------------
# finalize
# ---------------------------------------------------------------------------
def _parse_dtype(text: str) -> Any:
    """A narwhals dtype from its text (``"Float64"``, ``"List(String)"``, ...)."""
    text = text.strip()
    if text.startswith(("List(", "Array(")) and text.endswith(")"):
        inner = text[text.index("(") + 1 : -1].split(",")[0]
        return nw.List(_parse_dtype(inner))
    head = text.split("(")[0]
    if head == "Enum":
        return nw.Categorical()  # the same kind of label
    cls = getattr(nw, head, None)
    if isinstance(cls, type):
        try:
            return cls()
        except TypeError:
            return nw.Unknown()
    return nw.Unknown()


def _open_summary(stats: Any, by: Any, caller: str) -> tuple[nw.LazyFrame, bool, list[str], dict[str, Any], list[str]]:
    """The summary as a LazyFrame, whether it was eager, ``by=``, its schema and keys (``by=`` checked)."""
    lf, eager = engine.to_lazy(stats)
    keys = engine.as_keys(by)
    schema, summary_keys = _summary_schema(lf)
    unknown = [k for k in keys if k not in summary_keys]
    if unknown:
        msg = f"{caller}: by= columns {unknown!r} are not keys of the summary (its keys: {summary_keys!r})"
        raise ValueError(msg)
    return lf, eager, keys, schema, summary_keys


def _summary_schema(stats: nw.LazyFrame) -> tuple[dict[str, Any], list[str]]:
    """(stats schema, the summary's group key columns), the schema version checked."""
    schema = dict(stats.collect_schema())
    if _VERSION not in schema or _INPUTS not in schema or _CELL not in schema:
        msg = (
            "finalize() expects the output of cf.summarize (columns cf_version, cf_inputs, cf_cell, ...); "
            f"got columns {list(schema)!r}"
        )
        raise ValueError(msg)
    own = {_VERSION, _INPUTS, _CELL, _ORDER, *engine.RESERVED}
    keys = [c for c in schema if c not in own and not c.startswith("cf_")]
    return schema, keys


class _GuessedInputs(dict):
    """The inputs of a summary without rows (none recorded them): any column, Float64 unless known.

    Only the plan's shape matters for a summary without rows (its result
    has no rows either); a Boolean or list input is learned from the metric's error.
    """

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) or super().__contains__(name)

    def __missing__(self, name: str) -> Any:
        return nw.Float64()


def _plan_without_rows(keys_schema: dict[str, Any], metrics: Sequence[Metric], keys: list[str]) -> Plan:
    """The plan of ``metrics`` on guessed input dtypes (a summary without rows records none)."""
    guessed = _GuessedInputs(keys_schema)
    for _ in range(64):
        try:
            plan = Plan.of(guessed, metrics, keys, caller="finalize")
        except (BooleanColumnError, ListColumnError) as exc:
            # a list of labels of any kind (an Unknown inner dtype matches any label column)
            dtype = nw.Boolean() if isinstance(exc, BooleanColumnError) else nw.List(nw.Unknown())
            if dict.get(guessed, exc.column) == dtype:
                raise
            guessed[exc.column] = dtype
            continue
        # the inputs read, made known: internal names avoid them (an input named like a row, "__cf_r0")
        unknown = [c for spec in plan.specs for c, _ in spec.inputs if c not in dict.keys(guessed)]
        if not unknown:
            return plan
        for c in unknown:
            guessed[c] = guessed[c]
    msg = "finalize: cannot plan these metrics on a summary without rows"  # pragma: no cover
    raise ValueError(msg)  # pragma: no cover


#: the schema versions this release reads (1: written by 0.3, statistics named by a hash)
READABLE_VERSIONS = (1, 2)


def _schema_version(schema: dict[str, Any]) -> int:
    """The schema version of a summary, from its state column names (version 2: ``cf_sum__...``)."""
    stats = [c for c in schema if c.startswith(("cf_sum_", "cf_min_", "cf_max_"))]
    declared = {c.startswith(("cf_sum__", "cf_min__", "cf_max__")) for c in stats}
    if len(declared) > 1:
        msg = (
            "the summary mixes schema versions 1 and 2 (statistics named by a hash and by their declared "
            "names): finalize each version on its own, or summarize the rows of the older one again"
        )
        raise ValueError(msg)
    return 1 if declared == {False} else SCHEMA_VERSION


def _inputs_schema(stats: nw.LazyFrame, version: int) -> tuple[dict[str, Any], list[str]] | None:
    """The metric inputs' dtypes and the metrics recorded by summarize (and the schema version
    check); ``None`` for a summary without rows."""
    head = stats.select(_VERSION, _INPUTS).filter(~nw.col(_INPUTS).is_null()).head(1).collect()
    if len(head) == 0:
        return None
    written, inputs = head.row(0)
    if written not in READABLE_VERSIONS or written != version:
        msg = (
            f"summary schema version {written} is not supported (this release reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}, and its column names are of version {version})"
        )
        raise ValueError(msg)
    recorded = json.loads(inputs)
    held = list(recorded.pop(_HELD, []))
    return {name: _parse_dtype(text) for name, text in recorded.items()}, held


def _holds(held: list[str]) -> str:
    """``"; the summary holds ece(...), brier(...)"`` (empty for a summary of an earlier release)."""
    return f"; the summary holds {', '.join(held)}" if held else ""


def finalize(stats: Any, *metrics: Metric, by: Any = None) -> Any:
    """Merge summary rows into the groups ``by`` and finalize ``metrics``.

    ``finalize(summarize(df, *metrics, by=["day", "seg"]), *metrics, by="seg")``
    equals ``evaluate(df, *metrics, by="seg")`` (to rounding: sums are added
    in another order).  ``by`` must be a subset of the summary's keys;
    ``metrics`` any subset of the summarized ones.  Sums are added, minima
    and maxima taken; a group with invalid rows (``n_invalid > 0``) has null
    metrics.  A summary row without a statistic the metrics need (e.g. a day
    summarized with other metrics) is an error (on lazy input, when called)
    for a summary made with ``invalid="raise"``; otherwise the group's
    metrics are null and ``n_invalid`` counts such summary rows too.

    Parameters
    ----------
    stats
        Output of :func:`summarize`, possibly several concatenated (eager or
        lazy, e.g. ``pl.scan_parquet("stats/*.parquet")``).
    *metrics
        Metric objects.
    by
        Group column name(s) among the summary's keys; ``None`` merges all rows.

    Returns
    -------
    frame
        As :func:`~conformal_frames.evaluate`: keys, metric columns, ``n``
        (and ``n_invalid`` / ``n_dropped`` when the summary has them).
        Reading the input dtypes recorded in ``cf_inputs`` collects one row of
        a lazy summary.
    """
    lf, eager, keys, schema, summary_keys = _open_summary(stats, by, "finalize")
    version = _schema_version(schema)
    recorded = _inputs_schema(lf, version)
    held = [] if recorded is None else recorded[1]
    eplan = _finalize_plan(recorded, {k: schema[k] for k in summary_keys}, metrics, keys, held)
    q = eplan.query
    _check_mergeable(eplan, metrics)
    state = _State.of(eplan.specs, version)
    policy: InvalidPolicy = "null" if "n_invalid" in schema else "drop" if "n_dropped" in schema else "raise"
    missing = [name for name in state.columns if name not in schema]
    if missing and recorded is None:  # no rows: nothing to miss
        lf = lf.with_columns(*[nw.lit(None, F64).alias(name) for name in missing])
    elif missing:
        lacking = [
            _describe(m)
            for m, spec in zip(metrics, eplan.specs)
            if any(c in missing for c in _State.of([spec], version).columns)
        ]
        msg = (
            f"finalize: the summary has no statistics of {', '.join(lacking)} ({len(missing)} missing){_holds(held)}; "
            "finalize with the summarized parameters, or summarize with these metrics first"
        )
        raise ValueError(msg)
    table, merged = _merged(lf, eplan, state, policy)
    tables = merged.tables(lambda cells: _merged_cells(lf, q, state, cells))
    return nw.to_native(merged.complete(table, tables, table, policy).finish(eager=eager))


def _finalize_plan(
    recorded: tuple[dict[str, Any], list[str]] | None,
    keys_schema: dict[str, Any],
    metrics: Sequence[Metric],
    keys: list[str],
    held: list[str],
) -> Plan:
    """The plan of ``metrics`` on the summary's recorded input dtypes (the one build of each)."""
    try:
        if recorded is None:  # no rows: the result has none either
            return _plan_without_rows(keys_schema, metrics, keys)
        return Plan.of({**recorded[0], **keys_schema}, metrics, keys, caller="finalize")
    except ColumnNotFoundError as exc:
        asked = ", ".join(m.output_name for m in metrics if isinstance(m, Metric))
        inputs = ", ".join(shown(c) for c in sorted(recorded[0])) if recorded is not None else ""
        msg = (
            f"finalize: the summary has no statistics of {asked} on these inputs ({exc}; "
            f"the summary's inputs: [{inputs}]){_holds(held)}; summarize with these metrics first"
        )
        raise ValueError(msg) from exc


def _merged(lf: nw.LazyFrame, eplan: Plan, state: _State, policy: InvalidPolicy) -> tuple[nw.LazyFrame, Plan]:
    """The group rows added up per group: the engine's aggregated table, and the plan that completes it."""
    group_rows = lf.filter(nw.col(_CELL).is_null())
    needed = list(dict.fromkeys(name for name, _ in state.aggs.values()))
    missing = nw.sum_horizontal(*[nw.col(c).is_null().cast(F64) for c in needed]) if needed else nw.lit(0.0)
    # a group whose rows were all dropped (invalid="drop") has n = 0 and no statistics: it adds nothing
    missing = nw.when(nw.col("n") > 0).then(missing).otherwise(0.0)
    aggs = [getattr(nw.col(name), how)().alias(internal) for internal, (name, how) in state.aggs.items()]
    # the rows were checked by summarize; what remains: summary rows without a needed statistic
    message = "summary rows without the statistics these metrics need (summarized with other metrics?)"
    return eplan.aggregate_counted(group_rows, policy, aggs, carry=needed, unmet=missing > 0, message=message)


def _merged_cells(lf: nw.LazyFrame, q: Query, state: _State, spec: Cells | None) -> nw.LazyFrame:
    """The cell rows of one table as the row frame its function reads."""
    assert spec is not None  # refused otherwise
    cell_id = next(cid for cid, (order, _) in state.cells.items() if order == spec.order)
    sums = state.cells[cell_id][1]
    cells = lf.filter(nw.col(_CELL) == cell_id)
    return cells.select(
        *[nw.col(k).alias(ik) for k, ik in zip(q.keys, q.group)],
        nw.col(_ORDER).alias(spec.order),
        *[nw.col(name).alias(row) for name, row in sums.items() if row in spec.sums],
    )


# ---------------------------------------------------------------------------
# merging summaries into a (smaller) summary
# ---------------------------------------------------------------------------
def merge_summaries(stats: Any, by: Any = None) -> Any:
    """Summary rows merged into the groups ``by``: a summary again (of the same schema version).

    Sums are added, minima and maxima taken, cell rows added per (group,
    cell set, distinct score); a statistic missing in one of the merged rows
    stays missing (null).  Use it to keep a running summary small, e.g.
    summarize each chunk of a large dataset and merge as you go (the memory
    then holds one chunk and the merged state), or to compact a Parquet
    dataset of daily summaries into weekly ones.

    Parameters
    ----------
    stats
        Output of :func:`summarize` (possibly several concatenated).
    by
        Group column name(s) among the summary's keys; ``None`` merges all rows.

    Returns
    -------
    frame
        A summary of the caller's type, one group row per ``by`` group.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames as cf
    >>> df = pl.DataFrame({"day": [1, 1, 2], "y": [1.0, 2.0, 3.0], "lo": [0.0] * 3, "hi": [1.5] * 3})
    >>> stats = cf.summarize(df, cf.coverage("y", "lo", "hi"), by="day")
    >>> cf.merge_summaries(stats)["n"].to_list()
    [3]
    """
    lf, eager, public, schema, _ = _open_summary(stats, by, "merge_summaries")
    # the keys under internal names while merging (DuckDB reads a key "a.b" as column b of table a)
    keys = [f"__cf_key{i}" for i in range(len(public))]
    lf = lf.rename(dict(zip(public, keys)))
    stat_cols = [c for c in schema if c.startswith(("cf_sum_", "cf_min_", "cf_max_"))]
    counts = [c for c in ("n", "n_invalid", "n_dropped") if c in schema]
    aggs = [nw.col(_VERSION).max(), nw.col(_INPUTS).max(), *[nw.col(c).sum() for c in counts]]
    for c in stat_cols:
        how = c.split("_")[1]
        aggs += [getattr(nw.col(c), how)().alias(c), nw.col(f"__cf_m_{c}").sum()]
    parts = []
    for cells in (False, True):
        rows = lf.filter(~nw.col(_CELL).is_null() if cells else nw.col(_CELL).is_null())
        # a statistic is missing when a row that counts lacks it; group rows with n = 0 (an
        # empty chunk, or all rows dropped under invalid="drop") add nothing unless they
        # carry every statistic (rows of counts 0: their input rows count); cell rows always count
        carried = nw.all_horizontal(*[~nw.col(c).is_null() for c in stat_cols], ignore_nulls=True)
        counts_row = nw.lit(True) if cells else (nw.col("n") > 0) | (carried if stat_cols else nw.lit(False))
        rows = rows.with_columns(
            *[(counts_row & nw.col(c).is_null()).cast(F64).alias(f"__cf_m_{c}") for c in stat_cols],
            counts_row.cast(F64).alias("__cf_present"),
        )
        merged = engine.aggregate(
            rows, [*keys, *([_CELL, _ORDER] if cells else [])], [*aggs, nw.col("__cf_present").sum().alias("__cf_len")]
        )
        kept = [
            nw.when((nw.col(f"__cf_m_{c}") == 0) & (nw.col("__cf_len") > 0)).then(nw.col(c)).alias(c) for c in stat_cols
        ]
        nulls = [] if cells else [nw.lit(None, nw.String).alias(_CELL), nw.lit(None, F64).alias(_ORDER)]
        # counts stay Int64 (DuckDB sums Int64 into Int128: the merged summary would not concatenate with a new one)
        merged = merged.with_columns(*kept, *nulls, *[nw.col(c).cast(nw.Int64) for c in counts])
        parts.append(merged.select(*keys, _VERSION, _INPUTS, _CELL, _ORDER, *counts, *stat_cols))
    result = nw.concat(parts, how="vertical").sort(*keys, _CELL, _ORDER, nulls_last=False)
    result = result.rename(dict(zip(keys, public)))
    return nw.to_native(nw.maybe_reset_index(result.collect()) if eager else result)


# ---------------------------------------------------------------------------
# rolling windows
# ---------------------------------------------------------------------------
def rolling(stats: Any, *metrics: Metric, index: str, window: Any, by: Any = None) -> Any:
    """Metrics over moving windows of ``index`` from summary statistics.

    For each group of ``by`` and each value ``v`` of ``index`` in the
    summary, the metrics over the summary rows whose index is among the
    last ``window`` index values up to ``v``:

    - ``window`` an integer: the ``window`` most recent *distinct* index
      values of the whole summary up to ``v`` (periods with no row in a group
      still count as periods), e.g. ``window=7`` on a daily index is 7 days
      when every day has data;
    - ``window`` a duration (``datetime.timedelta``) on a date or datetime
      index: the rows with ``v - window < index <= v``.

    The first windows are shorter (``n`` tells how many rows they hold).  A
    window ending on an index value where a group has no row is there too
    when it holds earlier rows of the group.

    Parameters
    ----------
    stats
        Output of :func:`summarize` with ``index`` among its keys.
    *metrics
        Metric objects (as for :func:`finalize`).
    index : str
        The ordered key (a day, a week number, a timestamp truncated to a
        period ...).
    window : int or datetime.timedelta
        Window length (see above).
    by
        Other group keys of the summary.

    Returns
    -------
    frame
        One row per (``by``, ``index`` value) whose window holds rows: the
        keys, ``index``, the metrics and ``n``; a frame of the caller's type.
    """
    if not metrics:
        msg = "rolling() needs at least one metric, e.g. cf.rolling(stats, cf.coverage('y', 'lo', 'hi'), index='day', window=7)"
        raise ValueError(msg)
    lf, eager = engine.to_lazy(stats)
    keys = engine.as_keys(by)
    if not isinstance(index, str):
        msg = f"index= must be a column name, got {index!r}"
        raise TypeError(msg)
    if index in keys:
        msg = f"index= {index!r} is also in by=; pass it only as index="
        raise ValueError(msg)
    _, summary_keys = _summary_schema(lf)
    if index not in summary_keys:
        msg = f"rolling: index= {index!r} is not a key of the summary (its keys: {summary_keys!r})"
        raise ValueError(msg)
    expanded = _windows(lf, index, window)
    return finalize(expanded.collect() if eager else expanded, *metrics, by=[*keys, index])


_END, _RANK, _END_RANK = "__cf_end", "__cf_rank", "__cf_end_rank"


def _windows(lf: nw.LazyFrame, index: str, window: Any) -> nw.LazyFrame:
    """Each summary row repeated for every window end ``v`` it belongs to (``index`` := ``v``)."""
    import datetime as dt

    periods = lf.select(index).unique().filter(~nw.col(index).is_null())
    dtype = lf.collect_schema()[index]
    if isinstance(window, dt.timedelta):
        if not dtype.is_temporal():
            msg = f"a duration window needs a date or datetime index; {index!r} has dtype {dtype}"
            raise TypeError(msg)
        ends = periods.select(nw.col(index).alias(_END))
        pairs = lf.join(ends, how="cross")
        keep = (nw.col(index) <= nw.col(_END)) & (nw.col(index) > nw.col(_END) - window)
    elif isinstance(window, int) and not isinstance(window, bool):
        if window < 1:
            msg = f"window must be a positive number of periods, got {window}"
            raise ValueError(msg)
        ranked = periods.with_columns(nw.col(index).rank("dense").cast(nw.Int64).alias(_RANK))
        ends = ranked.select(nw.col(index).alias(_END), nw.col(_RANK).alias(_END_RANK))
        pairs = lf.join(ranked, on=index, how="left").join(ends, how="cross")
        gap = nw.col(_END_RANK) - nw.col(_RANK)
        keep = (gap >= 0) & (gap < window)
    else:
        msg = f"window must be an integer number of periods or a datetime.timedelta, got {window!r}"
        raise TypeError(msg)
    out = pairs.filter(keep).with_columns(nw.col(_END).alias(index))
    return out.select(*lf.collect_schema().names())
