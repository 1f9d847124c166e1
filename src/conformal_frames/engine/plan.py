"""The plan of one evaluation (:class:`Plan`): keys, checks, the invalid-row
policy, the main aggregation, completion and raising; :class:`Compiled`, a
plan over a frame, finishes it (numpy steps, the result's columns)."""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames.engine._steps import group_apply, numpy_apply, polars_lazy
from conformal_frames.engine.expr import Cells, aggregate, indicator, join_keys, over, sort_result
from conformal_frames.engine.frames import normalized_keys
from conformal_frames.engine.metric import Metric
from conformal_frames.engine.query import (
    _DROPPED,
    _INVALID,
    _N,
    _VALID,
    RESERVED,
    InvalidPolicy,
    Query,
    _Check,
    _GroupStep,
    _not_found,
    _NumpyStep,
)
from conformal_frames.engine.spec import Spec
from conformal_frames.errors import BackendLimitError, ColumnNotFoundError, InvalidRowsError

__all__ = [
    "Compiled",
    "Plan",
    "as_keys",
    "backend_name",
    "check_index_keys",
    "compile_query",
    "declared_dtypes",
    "has_invalid",
    "lazy_refusal",
    "normalized_keys",
    "policy",
    "to_lazy",
    "with_validity",
    "worded",
]

#: a summary row without a statistic the metrics need (:meth:`Plan.aggregate_counted`)
_UNMET = "__cf_unmet"


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
    pl = sys.modules.get("polars")
    if pl is not None and type(frame) is pl.DataFrame:
        # one narwhals wrapper, not two (about 10 us of a 0.5 ms call on 1,000 rows); a polars
        # frame's column names are distinct strings: nothing for _check_column_names to find
        return nw.from_native(frame.lazy()), True
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


def check_index_keys(frame: Any, keys: Sequence[str]) -> None:
    """A ``by=`` key naming a level of a pandas frame's index, not a column: an error that says ``reset_index()``.

    The metrics read columns only (narwhals drops the index); without this
    the error would list the columns and leave the index unmentioned.
    """
    native = nw.to_native(frame) if isinstance(frame, (nw.DataFrame, nw.LazyFrame)) else frame
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(native, pd.DataFrame):
        return
    for k in keys:
        if k not in native.columns and k in native.index.names:
            msg = (
                f"group column {k!r} (by=) is a level of the pandas index, not a column; "
                "call .reset_index() on the frame first (the metrics read columns only)"
            )
            raise ColumnNotFoundError(msg)


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


def backend_name(frame: Any) -> str:
    """The backend of a narwhals frame (or of its implementation), as users name it: ``"duckdb"``, ``"pyspark"``."""
    implementation = getattr(frame, "implementation", frame)
    return str(implementation).split(".")[-1].lower()


def lazy_refusal(what: str, frame: Any, *, way_out: str = "use polars") -> BackendLimitError:
    """The error for ``what`` that cannot stay lazy on ``frame``'s backend, naming the backend and the way out."""
    backend = backend_name(frame)
    msg = (
        f"{what} cannot stay lazy on the {backend} backend; collect the frame first "
        f"(e.g. .collect() / .toPandas()) and evaluate the eager frame, or {way_out}"
    )
    return BackendLimitError(msg, backend=backend)


def policy(invalid: Any, eager: bool) -> InvalidPolicy:
    """The invalid-row policy: ``invalid`` checked, or the default for the input (raise if eager, else null)."""
    if invalid is None:
        return "raise" if eager else "null"
    if invalid in ("raise", "drop", "null"):
        chosen: InvalidPolicy = invalid
        return chosen
    msg = f"invalid= must be 'raise', 'drop' or 'null', got {invalid!r}"
    raise (TypeError if not isinstance(invalid, str) else ValueError)(msg)


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


def null_keys(keys: Sequence[str], schema: Mapping[str, Any]) -> nw.Expr | None:
    """The rows whose group key is null (or NaN, for a float key); ``None`` without keys."""
    bad: nw.Expr | None = None
    for k in keys:
        this = nw.col(k).is_null()
        if k in schema and schema[k].is_float():
            this = this | nw.col(k).is_nan().fill_null(False)
        bad = this if bad is None else bad | this
    return bad


#: a group's invalid-row count joined to a frame of a function of a frame (:func:`with_validity`)
_GROUP_INVALID = "__cf_n_invalid"


def with_validity(frame: nw.LazyFrame, validity: nw.LazyFrame, keys: list[str]) -> tuple[nw.LazyFrame, nw.Expr]:
    """The ``"null"`` policy for a function of a frame: ``frame`` with its group's invalid rows joined.

    ``validity`` is :meth:`Plan.apply_policy`'s table (the keys and
    ``n_invalid``); the expression is true where the row's group has no
    invalid row (a group without a validity row is invalid).  The caller
    nulls its values where it is false.
    """
    ok = validity.select(*keys, nw.col("n_invalid").alias(_GROUP_INVALID))
    joined = join_keys(frame, ok, keys)
    return joined, nw.col(_GROUP_INVALID).fill_null(1) == 0


def key_values(keys: Sequence[str], schema: Mapping[str, Any], names: Sequence[str]) -> list[nw.Expr]:
    """The group keys under the internal ``names``, a NaN float key null (one group with the nulls)."""
    out = []
    for k, ik in zip(keys, names):
        col = nw.col(k)
        if k in schema and schema[k].is_float():
            col = nw.when(~col.is_nan()).then(col)
        out.append(col.alias(ik))
    return out


def _build_outputs(q: Query, metrics: Sequence[Metric]) -> tuple[dict[str, nw.Expr | None], tuple[Spec, ...]]:
    outputs: dict[str, nw.Expr | None] = {}
    specs = []
    for m in metrics:
        if not isinstance(m, Metric):
            msg = f"expected metric objects such as cf.coverage(...), got {m!r}"
            raise TypeError(msg)
        built, spec = q.record(m)
        specs.append(spec)
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
    return outputs, tuple(specs)


def _rows_frame(lf: nw.LazyFrame, q: Query) -> nw.LazyFrame:
    layers: dict[int, list[nw.Expr]] = {}
    for r in q.rows.values():
        layers.setdefault(r.level, []).append(r.expr.alias(r.name))
    rows = lf.select(*key_values(q.keys, q.schema, q.group), *layers.get(0, []))
    for level in sorted(layers):
        if level > 0:
            rows = rows.with_columns(*layers[level])
    return rows


#: on Spark, the most expression text (narwhals' ``repr``) of row columns one part of the
#: main aggregation reads (:func:`_aggregate`); see docs/performance.md, issue 38 item 9
SPARK_ROW_TEXT = 5000

#: the invalid-row count (registered last, reading every check) may take the last part up to this
#: multiple of :data:`SPARK_ROW_TEXT` rather than scan the file in a part of its own (the trial's 23
#: metrics: 5,462 characters, a 7,359-byte method, 4 scans instead of 5)
_INVALID_SLACK = 1.1

#: HotSpot does not compile a method of more bytes of bytecode (``DontCompileHugeMethods``)
_JIT_LIMIT = 8000

_ROW_NAME = re.compile(r"__cf_r\d+")


def _row_text(q: Query) -> Callable[[nw.Expr], dict[str, int]]:
    """The row columns an expression reads, with the rows they read: name -> length of its expression's text."""
    rows = {r.name: r for r in q.rows.values()}
    found: dict[str, dict[str, int]] = {}

    def of_row(name: str) -> dict[str, int]:
        if name not in found:
            text = repr(rows[name].expr)
            found[name] = {name: len(text)}
            for other in _ROW_NAME.findall(text):
                if other in rows and other != name:
                    found[name] |= of_row(other)
        return found[name]

    def read(expr: nw.Expr) -> dict[str, int]:
        out: dict[str, int] = {}
        for name in _ROW_NAME.findall(repr(expr)):
            if name in rows:
                out |= of_row(name)
        return out

    return read


def _spark_fuses(frame: nw.LazyFrame) -> bool:
    """Whether Spark would fuse the row frame and the aggregation into one generated method.

    Read (not set) from the frame's session: whole-stage code generation on,
    and methods above HotSpot's limit not already refused
    (``spark.sql.codegen.hugeMethodLimit`` above 8,000).
    """
    if not frame.implementation.is_spark_like():
        return False
    session = getattr(frame.to_native(), "sparkSession", None)
    if session is None:
        return True
    try:
        conf = session.conf
        whole = str(conf.get("spark.sql.codegen.wholeStage", "true")).lower() == "true"
        limit = int(conf.get("spark.sql.codegen.hugeMethodLimit", "65535"))
    except Exception:  # a session that cannot say: Spark's defaults
        return True
    return whole and limit > _JIT_LIMIT


def _parts(q: Query, aggs: dict[str, nw.Expr]) -> list[list[str]]:
    """The aggregations in parts (in order) that each read at most :data:`SPARK_ROW_TEXT` of row expressions."""
    read = _row_text(q)
    parts: list[list[str]] = [[]]
    used: dict[str, int] = {}
    for name, agg in aggs.items():
        more = used | read(agg)
        limit = SPARK_ROW_TEXT * (_INVALID_SLACK if name == _INVALID else 1.0)
        if parts[-1] and sum(more.values()) > limit:
            parts.append([])
            more = read(agg)
        parts[-1].append(name)
        used = more
    return parts


def _aggregate(rows: nw.LazyFrame, q: Query, aggs: dict[str, nw.Expr]) -> nw.LazyFrame:
    """The main aggregation ``{name: aggregation}`` of the row frame by the group.

    On Spark, whole-stage code generation fuses the row columns and the
    aggregation into one Java method; above 8,000 bytes of bytecode HotSpot
    never compiles it, and every row runs in the interpreter (an ``evaluate``
    of 23 metrics: a 35,868-byte method).  There the aggregations are cut
    into parts that read at most :data:`SPARK_ROW_TEXT` characters of row
    expressions (in the order registered: a metric's statistics stay
    together), each an aggregation of its own over the same rows (Spark prunes
    the row columns a part does not read).  The parts are stacked diagonally
    (each part's columns, nulls elsewhere) and aggregated again by the group
    with ``max``, which returns each part's one value unchanged; no join, so
    null keys group as in one aggregation.
    """
    keys = q.group
    parts = _parts(q, aggs) if _spark_fuses(rows) else []
    if len(parts) < 2:
        return aggregate(rows, keys, [e.alias(n) for n, e in aggs.items()])
    tables = [aggregate(rows, keys, [aggs[n].alias(n) for n in part]) for part in parts]
    return aggregate(nw.concat(tables, how="diagonal"), keys, [nw.col(n).max() for n in aggs])


def _join(left: nw.LazyFrame, right: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
    if keys:
        return join_keys(left, right, keys)
    return left.join(right, how="cross")


#: the column of :meth:`Plan.check_count_query` with the number of rows checked
_CHECKED = "__cf_checked"


def worded(message: str, count: int, *, total: int | None = None, hint: str | None = None) -> str:
    """A check's ``message`` with its row count: ``"... in 3 rows"`` (or ``{rows}`` filled in).

    With a ``hint`` and the ``total`` of rows, a check failing in more than
    half of them reads ``"... in 9 of 10 rows: <hint>"``.
    """
    majority = hint is not None and total is not None and 2 * count > total
    rows = f"{count} of {total} rows" if majority else f"{count} row{'s' if count != 1 else ''}"
    text = message.replace("{rows}", rows) if "{rows}" in message else f"{message} in {rows}"
    return f"{text}: {hint}" if majority else text


def _present(value: Any) -> bool:
    """Not null, not NaN, not a missing-value sentinel such as ``pd.NA``."""
    if value is None:
        return False
    try:
        return bool(value == value)
    except TypeError:  # pd.NA: "boolean value of NA is ambiguous"
        return False


def _smallest(values: list[Any]) -> Any:
    """The smallest offending value (``None`` when none is available)."""
    found = [v for v in values if _present(v)]
    if not found:
        return None
    value = min(found)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value


#: public count column -> internal column, after ``n``, for each policy
_POLICY_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "raise": [],
    "null": [("n_invalid", _INVALID)],
    "drop": [("n_dropped", _DROPPED)],
}


# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------
@dataclass
class Plan:
    """The plan of one evaluation: its :class:`Query` (keys, rows, statistics,
    checks) and the metrics' outputs.  Its phases are its methods:

    :meth:`of` (key checks, the metrics built), :meth:`aggregate` (row frame and
    main aggregation under the invalid-row policy), :meth:`complete` (tables,
    finalize expressions, sort; a :class:`Compiled` whose
    :meth:`~Compiled.finish` runs the numpy steps and raises on invalid rows),
    :meth:`apply_policy` (the policy for functions of a frame),
    :meth:`check_counts` and :meth:`raise_failed`.
    """

    query: Query
    #: output name -> expression over the aggregated table (``None``: made by a numpy step)
    outputs: dict[str, nw.Expr | None] = field(default_factory=dict)
    #: the definition of each metric, in order (:meth:`Query.record`)
    specs: tuple[Spec, ...] = ()

    @classmethod
    def of(
        cls, schema: Mapping[str, Any], metrics: Sequence[Metric], keys: list[str], *, caller: str = "evaluate"
    ) -> Plan:
        """The metrics' statistics registered on a new :class:`Query` of ``schema`` (keys checked)."""
        if not metrics:
            frame = "stats" if caller in ("finalize", "rolling") else "df"  # a summary, or rows
            msg = f"{caller}() needs at least one metric, e.g. cf.{caller}({frame}, cf.coverage('y', 'lo', 'hi'))"
            raise ValueError(msg)
        counts = set().union(*(m.counts_columns() for m in metrics if isinstance(m, Metric)))
        if len(counts) > 1:  # the group's n is the sum of the counts: one column for every metric
            shown = ", ".join(repr(c) for c in sorted(counts, key=str))
            msg = f"every metric of one evaluation takes the same counts= (it sets the group's n), got {shown}"
            raise ValueError(msg)
        plan = cls.inputs(schema, keys)
        outputs, specs = _build_outputs(plan.query, metrics)
        return cls(plan.query, outputs, specs)

    @classmethod
    def inputs(cls, schema: Mapping[str, Any], keys: list[str], read: Callable[[Query], Any] | None = None) -> Plan:
        """A plan of checks only: the keys' and those of the inputs ``read(query)`` registers.

        For functions of a frame that read their columns with the input
        readers (e.g. ``binary_row``, ``score_row``) and apply the policy
        themselves (:meth:`apply_policy`); no metric is built.
        """
        _check_keys(schema, keys)
        # null (and NaN) group keys are no invalid rows: their rows form one group (see null_keys)
        q = Query(schema=schema, keys=keys)
        if read is not None:
            read(q)
        return cls(q)

    @property
    def has_checks(self) -> bool:
        """Whether the plan checks any input row (a key of zero total aside, see :meth:`defer_totals`)."""
        return bool(self.query.checks)

    def tables(self, rows: Callable[[Cells | None], nw.LazyFrame]) -> list[nw.LazyFrame]:
        """Each table of the plan over the frame ``rows(cells)`` gives it: the row frame, or (for a
        table of ordered cells, ``cells`` not ``None``) merged cells of a summary."""
        q = self.query
        return [fn(rows(q.cell_tables.get(key)), q.group, ref) for key, (fn, ref) in q.tables.items()]

    # -- the invalid-row policy ---------------------------------------------
    def drop_null_keys(self, lf: nw.LazyFrame) -> nw.LazyFrame:
        """``lf`` without the rows of a null (or NaN) group key (``invalid="drop"``: their group goes)."""
        nulls = null_keys(self.query.keys, self.query.schema)
        return lf if nulls is None else lf.filter(~nulls)

    def invalid_mask(self) -> nw.Expr:
        """A boolean expression over the input columns: the row fails a check."""
        bad = [c.bad for c in self.query.checks.values()]
        return nw.any_horizontal(*bad, ignore_nulls=True) if bad else nw.lit(False)

    def apply_policy(self, lf: nw.LazyFrame, policy: InvalidPolicy) -> tuple[nw.LazyFrame, nw.LazyFrame | None]:
        """The policy for a function of a frame: the rows to use and, under
        ``"null"``, the invalid rows per group (the keys and ``n_invalid``).

        ``"raise"`` counts the failing rows now (one pass) and raises an
        :class:`~conformal_frames.errors.InvalidRowsError`; ``"drop"`` leaves
        the invalid rows out.
        """
        lf = normalized_keys(lf, self.query.keys)
        if policy == "raise":
            if self.query.checks:
                self.raise_failed(self.check_counts(lf))
            return lf, None
        if policy == "drop":
            return self.dropped(self.drop_null_keys(lf)).filter(~nw.col(_DROPPED)).drop(_DROPPED), None
        q = self.query
        flagged = lf.select(
            *key_values(q.keys, q.schema, q.group),
            self.invalid_mask().cast(nw.Float64).alias(_INVALID),
        )
        table = aggregate(flagged, q.group, [nw.col(_INVALID).sum()])
        return lf, table.select(*self.key_columns(), nw.col(_INVALID).alias("n_invalid"))

    def aggregate(self, lf: nw.LazyFrame, policy: InvalidPolicy) -> tuple[nw.LazyFrame, nw.LazyFrame]:
        """The row frame and the main aggregation (with the invalid / dropped counts).

        The invalid count is the rows failing at least one check: validation
        of every input rides in the one aggregation (:meth:`check_counts`
        tells which checks fail, when one does).
        """
        q = self.query
        bad = [c.bad for c in q.checks.values()]
        anybad = self.invalid_mask()
        if policy == "null" or (policy == "raise" and bad):
            q.row(_INVALID, indicator(anybad))
        counts = None
        if policy == "drop":
            lf = self.drop_null_keys(lf)
            flagged = self.dropped(lf)
            ikeys = key_values(q.keys, q.schema, q.group)
            marks = flagged.select(*ikeys, nw.col(_DROPPED).cast(nw.Float64))
            counts = aggregate(marks, q.group, [nw.col(_DROPPED).sum()])
            lf = flagged.filter(~nw.col(_DROPPED)).drop(_DROPPED)
        rows = _rows_frame(lf, q)
        # n: the rows, or the rows they represent (the sum of the counts=, see Query.counted)
        size = nw.len() if q.count_row is None else nw.col(q.count_row).sum()
        aggs = {_N: size, **dict(q.aggs.values())}
        if _INVALID in q.rows:
            aggs[_INVALID] = nw.col(q.rows[_INVALID].name).sum()
        table = _aggregate(rows, q, aggs)
        if policy == "raise" and not bad:
            table = table.with_columns(nw.lit(0.0).alias(_INVALID))
        if counts is not None:
            # every group of the input, also one whose rows were all dropped
            table = _join(counts, table.with_columns(nw.lit(0.0).alias(_INVALID)), q.group)
            table = table.with_columns(nw.col(_N).fill_null(0), nw.col(_INVALID).fill_null(0.0))
        return rows, table

    def dropped(self, lf: nw.LazyFrame) -> nw.LazyFrame:
        """``lf`` with the Boolean ``_DROPPED``: the row fails a check (``invalid="drop"``).

        A positive-total rule (:attr:`Query.positive`) reads the rows the
        other checks leave: a group whose remaining rows have no positive
        weight (count) is dropped whole, as :meth:`aggregate_counted` does on
        the merged totals of summaries.
        """
        q = self.query
        rules = {m: q.positive[m] for m in q.totals if m in q.checks and m in q.positive}
        if not rules:
            return lf.with_columns(self.invalid_mask().alias(_DROPPED))
        others = [c.bad for m, c in q.checks.items() if m not in rules]
        other = nw.any_horizontal(*others, ignore_nulls=True) if others else nw.lit(False)
        names = [q._internal(f"__cf_p{i}") for i in range(len(rules))]
        lf = lf.with_columns(
            other.fill_null(False).alias(_DROPPED),
            *[indicator(~other & p).alias(name) for name, p in zip(names, rules.values())],
        )
        zero = [~(over(nw.col(name).max(), q.keys) > 0) for name in names]
        return lf.with_columns((nw.col(_DROPPED) | nw.any_horizontal(*zero, ignore_nulls=True)).alias(_DROPPED)).drop(
            *names
        )

    def aggregate_counted(
        self,
        frame: nw.LazyFrame,
        policy: InvalidPolicy,
        aggs: Sequence[nw.Expr],
        *,
        carry: Sequence[str],
        unmet: nw.Expr,
        message: str,
    ) -> tuple[nw.LazyFrame, Plan]:
        """The main aggregation from rows that carry their counts (e.g. summary rows), and its plan.

        ``frame`` has the public keys, ``n`` and the policy's count column
        (``n_invalid`` / ``n_dropped``) and the statistics ``carry`` that
        ``aggs`` aggregate into the internal columns the outputs read.  Its rows were checked
        when counted: the one check left is ``unmet`` (a row without what
        the metrics need), worded by ``message``.  The plan returned completes
        the table: this plan with those checks instead of the rows' (this plan
        is not changed).
        """
        q = self.query
        f64 = nw.Float64
        rows = frame.select(
            *key_values(q.keys, q.schema, q.group),
            nw.col("n").cast(f64).alias(_N),
            (nw.col("n_invalid").cast(f64) if policy == "null" else nw.lit(0.0)).alias(_INVALID),
            *([nw.col("n_dropped").cast(f64).alias(_DROPPED)] if policy == "drop" else []),
            unmet.cast(f64).alias(_UNMET),
            *[nw.col(c) for c in carry],
        )
        sums = [nw.col(_N).sum(), nw.col(_INVALID).sum(), nw.col(_UNMET).sum()]
        sums += [nw.col(_DROPPED).sum()] if policy == "drop" else []
        table = aggregate(rows, q.group, [*sums, *aggs])
        checks = {message: _Check(_UNMET, nw.lit(False))}
        table = table.with_columns((nw.col(_INVALID) + nw.col(_UNMET)).alias(_INVALID))
        # the positive-total rules (Query.totals) on the merged totals: the rows of a group
        # of zero total are invalid (dropped under "drop"), as evaluate on the rows says;
        # counted as input rows (not the rows counts= represents), as every invalid row
        inputs = nw.col(q.physical_n if q.physical_n is not None else _N)
        for number, (rule, total) in enumerate(q.totals.items()):
            column = f"__cf_t{number}"
            zero = (inputs > 0) & (nw.col(_UNMET) == 0) & ~(nw.col(total) > 0)
            table = table.with_columns(nw.when(zero).then(inputs).otherwise(0.0).alias(column))
            checks[rule] = _Check(column, nw.lit(False))
        if q.totals:
            parts = [nw.col(f"__cf_t{i}") for i in range(len(q.totals))]
            zeros = parts[0] if len(parts) == 1 else nw.max_horizontal(*parts)  # Spark: greatest needs 2
            if policy == "drop":  # the rows left: every one of them
                n = nw.when(zeros > 0).then(0.0).otherwise(nw.col(_N))
                table = table.with_columns((nw.col(_DROPPED) + zeros).alias(_DROPPED), n.alias(_N))
            else:  # every row of the group is invalid, those already invalid included
                table = table.with_columns(nw.when(zeros > 0).then(zeros).otherwise(nw.col(_INVALID)).alias(_INVALID))
        merged = dataclasses.replace(q, checks=checks, examples={})
        return table, Plan(merged, self.outputs, self.specs)

    def defer_totals(self) -> Plan:
        """This plan with the positive-total rules (:attr:`Query.totals`) left to the merged totals.

        For :func:`~conformal_frames.summarize`: a partition (a day) of zero
        weight is no invalid row; :meth:`aggregate_counted` checks the total
        of the merged group.  This plan is not changed.
        """
        q = self.query
        checks = {m: c for m, c in q.checks.items() if m not in q.totals}
        examples = {m: e for m, e in q.examples.items() if m not in q.totals}
        return Plan(dataclasses.replace(q, checks=checks, examples=examples), self.outputs, self.specs)

    # -- checks ---------------------------------------------------------------
    def check_count_query(self, lf: nw.LazyFrame) -> nw.LazyFrame:
        """One row: the number of rows of ``lf`` failing each check (column
        ``check.row``) and the smallest offending value.

        A pass of its own, run only when a check fails (or when asked for on
        lazy input); the main aggregation counts the rows failing any check.
        """
        q = self.query
        marks = [c.bad.cast(nw.Float64).alias(c.row) for c in q.checks.values()]
        shown = [c.example.alias(q.examples[m]) for m, c in q.checks.items() if c.example is not None]
        sums = [nw.col(c.row).sum() for c in q.checks.values()] + [nw.col(e).min() for e in q.examples.values()]
        return lf.select(*marks, *shown).select(*sums, nw.len().alias(_CHECKED))

    def check_counts(self, lf: nw.LazyFrame) -> nw.DataFrame:
        """:meth:`check_count_query`, collected."""
        return self.check_count_query(lf).collect()

    def causes(self, counts: nw.DataFrame) -> dict[str, int]:
        """Each failing check in the evaluation's own words -> its row count (``counts``: :meth:`check_counts`)."""
        return {text: count for _, text, count in self._failing(counts)}

    def _failing(self, counts: nw.DataFrame) -> list[tuple[str, str, int]]:
        """``(message, worded message, count)`` of every failing check."""
        out = []
        total = None
        for column in (_CHECKED, _N):  # the rows checked: a count pass, or the aggregated table
            if column in counts.columns:
                total = int(np.nansum(counts.get_column(column).to_numpy().astype(float)))
                break
        for message, check in self.query.checks.items():
            count = int(np.nansum(counts.get_column(check.row).to_numpy().astype(float)))
            if count:
                out.append((message, worded(message, count, total=total, hint=check.hint), count))
        return out

    def raise_failed(self, counts: nw.DataFrame) -> None:
        """Raise :class:`~conformal_frames.errors.InvalidRowsError` naming the first failing check, if any."""
        failing = self._failing(counts)
        if not failing:
            return
        q = self.query
        causes = {text: count for _, text, count in failing}
        message, first, _ = failing[0]
        example = _smallest(counts.get_column(q.examples[message]).to_list()) if message in q.examples else None
        text = first + (f", e.g. {example!r}" if example is not None else "")
        raise InvalidRowsError(text, counts=causes, example=example)

    # -- completion -------------------------------------------------------------
    def compile(self, lf: nw.LazyFrame, policy: InvalidPolicy, *, keep_dtypes: bool = False) -> Compiled:
        """The plan over the frame ``lf`` (any frame with the columns the plan uses), as one lazy query."""
        rows, table = self.aggregate(lf, policy)
        tables = self.tables(lambda _: rows)
        counts = functools.partial(self.check_counts, lf)
        return self.complete(table, tables, rows, policy, keep_dtypes=keep_dtypes, counts=counts)

    def complete(
        self,
        table: nw.LazyFrame,
        tables: Sequence[nw.LazyFrame],
        rows: nw.LazyFrame,
        policy: InvalidPolicy,
        *,
        keep_dtypes: bool = False,
        counts: Callable[[], nw.DataFrame] | None = None,
    ) -> Compiled:
        """The aggregated ``table`` joined with the ``tables``, finalized (outputs, sort).

        ``counts``: the rows failing each check, computed when asked (:attr:`Compiled.counts`).

        The outputs of an invalid group are null Float64 values, which makes
        every output Float64 on engines with a common supertype;
        ``keep_dtypes`` keeps each output's own dtype instead (see
        :mod:`conformal_frames.engine._pandas_polars`).  An output of a declared
        dtype (``q.output_dtypes``, e.g. an Int64 count) is cast to it; on
        pandas after collecting (:func:`declared_dtypes`).
        """
        q = self.query
        for sub in tables:
            table = _join(table, sub, q.group)
        exprs = {k: v for k, v in self.outputs.items() if v is not None}
        # the mask once as a column (every expression node costs query-building time),
        # in the values' first with_columns (each is a plan analysis on Spark)
        mask = [((nw.col(_INVALID) == 0) & (nw.col(_N) > 0)).alias(_VALID)] if exprs else []
        table = q.with_values(table, *mask)
        for finalize, fref in q.finalizers.values():
            table = finalize(table, fref)
        if exprs:
            valid = nw.col(_VALID)
            null = None if keep_dtypes else nw.lit(None, nw.Float64)
            final = {k: nw.when(valid).then(e).otherwise(null) for k, e in exprs.items()}
            if not _cast_after_collect(table):
                final |= {k: final[k].cast(t) for k, t in q.output_dtypes.items() if k in final}
            table = table.with_columns(*[e.alias(k) for k, e in final.items()])
        if q.group:
            table = sort_result(table, *q.group, nulls_last=True)
        return Compiled(table=table, plan=self, names=list(self.outputs), rows=rows, policy=policy, counts=counts)

    def count_columns(self, policy: InvalidPolicy) -> list[nw.Expr]:
        """``n`` and the policy's count column (``n_invalid`` / ``n_dropped``) of an aggregated table, Int64."""
        return [
            nw.col(_N).cast(nw.Int64).alias("n"),
            *[nw.col(i).cast(nw.Int64).alias(p) for p, i in _POLICY_COLUMNS[policy]],
        ]

    def key_columns(self) -> list[nw.Expr]:
        """The group keys of an aggregated table, under their own names."""
        return [nw.col(ik).alias(k) for k, ik in zip(self.query.keys, self.query.group)]


def compile_query(
    lf: nw.LazyFrame,
    metrics: Sequence[Metric],
    keys: list[str],
    *,
    invalid: InvalidPolicy = "null",
    keep_dtypes: bool = False,
) -> Compiled:
    """``Plan.of(lf's schema, metrics, keys).compile(lf, invalid)``: the callback of the plan caches."""
    return Plan.of(lf.collect_schema(), metrics, keys).compile(lf, invalid, keep_dtypes=keep_dtypes)


def _cast_after_collect(table: nw.LazyFrame) -> bool:
    """Whether declared dtypes are set after collecting (pandas-like: a numpy int64 cannot hold a null)."""
    return table.implementation.is_pandas_like() or table.implementation.is_dask()


def declared_dtypes(frame: nw.DataFrame, q: Query) -> nw.DataFrame:
    """The collected result ``frame`` with the outputs of a declared dtype cast to it.

    Only pandas-like frames need it (elsewhere :meth:`Plan.complete` casts):
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


def _without(frame: nw.DataFrame, column: str) -> nw.DataFrame:
    """The collected ``frame`` without ``column`` (polars: in place, no second query)."""
    if frame.implementation.is_polars():
        frame.to_native().drop_in_place(column)  # our own collected frame, which ``frame`` wraps
        return frame
    return frame.drop(column)


def has_invalid(table: nw.DataFrame) -> bool:
    """Whether a collected aggregated table counts a row failing a check."""
    if table.implementation.is_polars():  # natively: about 20 us of the 0.5 ms of a call on 1,000 rows
        total = table.to_native().get_column(_INVALID).sum()  # nulls skipped
        if total == total:  # not NaN (NaN counts are skipped below, as nansum does)
            return bool((total or 0) > 0)
    return bool(np.nansum(table.get_column(_INVALID).to_numpy().astype(float)) > 0)


@dataclass
class Compiled:
    """One compiled evaluation: the lazy aggregated table and the plan that made it."""

    #: one row per group: internal keys, outputs, ``n``, invalid counts
    table: nw.LazyFrame
    plan: Plan
    #: output column names, in order
    names: list[str]
    #: the row-level frame (internal keys and row columns), for per-group steps
    rows: nw.LazyFrame
    policy: InvalidPolicy
    #: the rows failing each check (:meth:`Plan.check_counts`), computed when asked;
    #: ``None``: the table itself has a column per check (:meth:`Plan.aggregate_counted`)
    counts: Callable[[], nw.DataFrame] | None = None
    #: the final selection of an eager result, built once (a cached plan serves many calls)
    _selection: nw.LazyFrame | None = field(default=None, repr=False)

    @property
    def query(self) -> Query:
        return self.plan.query

    def _selected(self) -> nw.LazyFrame:
        """The table with the result's columns; under ``"raise"`` with the invalid count too.

        A group with invalid rows raises there: its count (NaN or inf under
        bad ``counts=``) is not cast.
        """
        if self._selection is None:
            plan = self.plan
            counts = plan.count_columns(self.policy)
            if self.policy == "raise":
                n = nw.when(nw.col(_INVALID) == 0).then(nw.col(_N)).otherwise(0)
                counts = [n.cast(nw.Int64).alias("n"), nw.col(_INVALID)]
            self._selection = self.table.select(*plan.key_columns(), *self.names, *counts)
        return self._selection

    def _failed(self, table: nw.LazyFrame | nw.DataFrame) -> nw.DataFrame:
        """The per-check counts (``table``: the aggregated table, collected or not)."""
        if self.counts is not None:
            return self.counts()
        if isinstance(table, nw.DataFrame):
            return table
        return table.select(*[ch.row for ch in self.query.checks.values()], *self.query.examples.values()).collect()

    def finish(self, *, eager: bool, collect_options: Mapping[str, Any] | None = None) -> nw.DataFrame | nw.LazyFrame:
        """The result: keys, outputs (numpy and per-group steps run), ``n`` and the policy's count.

        Under ``"raise"``, invalid rows raise :class:`~conformal_frames.errors.InvalidRowsError`
        (on lazy input when called: the metrics stay lazy).  Steps on a lazy
        frame other than polars raise :class:`~conformal_frames.errors.BackendLimitError`.
        """
        q, table = self.query, self.table
        frame = None
        if eager and not (q.group_steps or q.numpy_steps):
            # one collect with the final selection: a second query costs ~0.5 ms on small frames
            frame = self._selected().collect(**(collect_options or {}))
            if self.policy == "raise":
                if has_invalid(frame):
                    self.plan.raise_failed(self._failed(table))
                frame = _without(frame, _INVALID)
            if frame.implementation.is_polars():  # nothing to reset or cast (one check, not two)
                return frame
            return nw.maybe_reset_index(declared_dtypes(frame, q))
        final_cols: list[nw.Expr | str] = [*self.plan.key_columns(), *self.names, *self.plan.count_columns(self.policy)]
        if self.policy == "raise":
            if not eager:  # asked for: run the checks now (the metrics stay lazy)
                self.plan.raise_failed(self._failed(table))
            else:
                frame = table.collect()
                if has_invalid(frame):
                    self.plan.raise_failed(self._failed(frame))
        if eager:
            frame = table.collect() if frame is None else frame
            frame = numpy_apply(group_apply(frame, self.rows, q), q)
            return nw.maybe_reset_index(declared_dtypes(frame.select(*final_cols), q))
        if not (q.group_steps or q.numpy_steps):
            return table.select(*final_cols)
        if table.implementation.is_polars():
            return self._polars_lazy(final_cols)
        steps: list[_GroupStep | _NumpyStep] = [*q.group_steps.values(), *q.numpy_steps]
        raise lazy_refusal("; ".join(sorted({s.what for s in steps})), table)

    def _polars_lazy(self, final_cols: list[nw.Expr | str]) -> nw.LazyFrame:
        """Numpy steps on a polars LazyFrame, kept lazy with ``map_batches``."""
        q = self.query

        def run(frame: nw.DataFrame) -> nw.DataFrame:
            return numpy_apply(group_apply(frame, self.rows, q), q).select(*final_cols)

        return polars_lazy(
            self.table,
            run,
            keys=dict(zip(q.keys, q.group)),
            names=self.names,
            booleans={k for s in q.numpy_steps for k in s.boolean},
            counts=["n", *[p for p, _ in _POLICY_COLUMNS[self.policy]]],
        )
