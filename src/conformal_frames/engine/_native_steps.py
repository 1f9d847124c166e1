"""Numpy steps in a polars expression: the recorded functions called through ONE polars UDF.

A metric whose plan records a numpy step on its aggregated statistics
(:meth:`Query.numpy`: ``coverage_test``'s exact binomial tails) or on every row
of a group (:meth:`Query.per_group`: ``smooth_ece``, ``score_decomposition``,
``hsic``, ``worst_slab_coverage``, ``adversarial_group_calibration``) compiles
to::

    pl.struct(<the compiled statistics and outputs>, <the group's step rows, imploded>)
      .map_batches(run, returns_scalar=True, return_dtype=<the outputs>)

polars calls ``run`` once per group (``group_by().agg``, ``over``,
``group_by_dynamic``, ``rolling``) or once (``select``) with that group's
values; ``run`` calls the SAME step functions ``cf.evaluate`` calls
(:mod:`conformal_frames.engine._steps`), on the group alone: a per-group step
sees ``n_groups = 1``, a numpy step a table of one row.  So nothing is written
twice, and a seeded step (worst slab, adversarial groups) draws as in
``evaluate``, whose steps restart the seed in every group.

What a group alone cannot give stays out: an output a numpy step computes
across the groups of the table (``across=``: ``coverage_test``'s Holm and
Benjamini-Hochberg p-values, and its flag unless ``correction="none"``) is not
a field of the expression (the docs say how to adjust the ``pvalue`` field).

A Python UDF does not stream: a query holding one runs on polars' in-memory
engine.  polars prints every Python function as ``python_udf()``; polars 2.1's
common-subexpression elimination compares the functions themselves, and each
compiled expression also carries a literal of its own, so two different
metrics over the same rows are never merged (tested), while one metric used
twice is computed once.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames.engine.plan import Plan
from conformal_frames.engine.query import Query

if TYPE_CHECKING:
    import polars as pl

Policy = Literal["null", "drop"]

__all__ = ["compile_steps", "has_steps"]

#: the compiled expressions' own literals (see the module docstring)
_TAGS = itertools.count()
_OK = "__cf_s_ok"
_IN = "__cf_s_in_"
_BASE, _ROWS, _TAG = "__cf_s_base", "__cf_s_rows", "__cf_s_tag"


def has_steps(plan: Plan) -> bool:
    """Whether ``plan`` records a numpy or per-group step."""
    return bool(plan.query.numpy_steps or plan.query.group_steps)


def compile_steps(
    plan: Plan,
    *,
    invalid: Policy,
    name: str,
    let: Literal["auto", "list", "inline"],
    native: ModuleType,
    roles: Mapping[str, pl.Expr] | None = None,
) -> Any:
    """``plan`` (with steps, see :func:`has_steps`) as one polars expression named ``name``.

    ``native``: the module :mod:`conformal_frames.engine.native`, whose compiler
    writes the statistics and outputs (passed in: it imports this module); returns
    its ``Compiled``.
    """
    import polars as pl

    q = plan.query
    _refuse_others(plan, native)
    across = {k for s in q.numpy_steps for k in s.across}
    stepped = {k for s in q.numpy_steps for k in s.outputs} | set(q.group_steps)
    missing = [k for k, e in plan.outputs.items() if e is None and k not in stepped]
    if missing:
        why = f"a table or step that fills {', '.join(missing)}"
        raise native.NotAnExpressionError(native._refused(plan.specs[0].metric, why))
    outputs = [k for k in plan.outputs if k not in across]
    stats, after_tables = native._statistics(plan, invalid, None, roles)
    levels = [*after_tables, *native._levels(plan)]
    inputs = sorted({c for s in q.numpy_steps for c in s.inputs} - stepped)
    # the base: the outputs an expression gives, the steps' inputs, and the validity (null when invalid)
    base_outputs: dict[str, nw.Expr] = {k: e for k, e in plan.outputs.items() if e is not None and k in outputs}
    base_outputs |= {_IN + c: nw.col(c) if _bound(c, stats, levels) else nw.lit(0.0) for c in inputs}
    base_outputs[_OK] = nw.lit(1.0)
    mode = let if let != "auto" else native._auto(stats, levels, base_outputs)
    if mode == "inline" and (levels or any(k.startswith(native._BLOCK) for k in stats)):
        mode = "list"
    base = native._compile(plan, stats, levels, base_outputs, mode)
    fields = [base.alias(_BASE), pl.lit(f"{name}#{next(_TAGS)}").alias(_TAG)]
    if q.group_steps:
        fields.append(_group_rows(plan, invalid, native, roles).alias(_ROWS))
    dtypes = _dtypes(q, outputs)
    run = _Run(q, outputs, dtypes, list(base_outputs))
    one = dtypes[outputs[0]] if len(outputs) == 1 else pl.Struct(dtypes)
    expr = pl.struct(*fields).map_batches(run, return_dtype=one, returns_scalar=True)
    return native.Compiled(expr.alias(name), tuple(outputs), mode)


def _refuse_others(plan: Plan, native: ModuleType) -> None:
    """Refuse what else the plan needs that no expression holds (a window over the rows)."""
    for spec in plan.specs:
        phases = set(spec.phases & native._REFUSED.keys()) - {"table", "numpy", "group_step"}
        if phases:
            why = " and ".join(native._REFUSED[p] for p in sorted(phases))
            raise native.NotAnExpressionError(native._refused(spec.metric, why))


def _bound(column: str, stats: Mapping[str, Any], levels: Sequence[Sequence[tuple[str, Any]]]) -> bool:
    """Whether the aggregated column ``column`` exists in the compiled expression (the invalid count is
    an aggregation under ``"null"`` only: under ``"drop"`` it is 0, as ``evaluate``'s table)."""
    return column in stats or any(column == n for level in levels for n, _ in level)


def _group_rows(plan: Plan, invalid: Policy, native: ModuleType, roles: Mapping[str, pl.Expr] | None) -> pl.Expr:
    """The row columns the per-group steps read, as the group's list of structs (the kept rows under ``"drop"``)."""
    import polars as pl

    q = plan.query
    rows = native._rows(q, native._inputs(plan, roles))
    bad, _ = native._masks(plan, rows, invalid)
    needed = sorted({r for s in q.group_steps.values() for r in s.rows})
    struct = pl.struct(*[rows[r].cast(pl.Float64).alias(r) for r in needed])
    if invalid == "drop" and bad is not None:
        struct = struct.filter(~bad)
    return struct.implode()


def _dtypes(q: Query, outputs: Sequence[str]) -> dict[str, pl.DataType]:
    import polars as pl

    boolean = {k for s in q.numpy_steps for k in s.boolean}
    out: dict[str, pl.DataType] = {}
    for k in outputs:
        out[k] = pl.Boolean() if k in boolean else pl.Int64() if k in q.output_dtypes else pl.Float64()
    return out


class _Run:
    """The UDF: a batch of groups' base values (and rows) -> their outputs, by the recorded steps."""

    def __init__(self, q: Query, outputs: list[str], dtypes: dict[str, pl.DataType], base: list[str]) -> None:
        self.q, self.outputs, self.dtypes, self.base = q, outputs, dtypes, base
        # polars may call a UDF from several threads, and the plan's shared step state (a memo of
        # every output of one evaluation, e.g. score_decomposition's) is read and written by each call
        self.lock = threading.Lock()

    def __call__(self, batch: pl.Series) -> pl.Series:
        import polars as pl

        bases = batch.struct.field(_BASE).to_list()
        rows: list[pl.Series | None] = [None] * len(bases)
        if self.q.group_steps:
            rows = list(batch.struct.field(_ROWS))
        with self.lock:
            results = [self.one(b, r) for b, r in zip(bases, rows)]
        if len(self.outputs) == 1:
            (k,) = self.outputs
            return pl.Series([r[k] for r in results], dtype=self.dtypes[k])
        return pl.Series(results, dtype=pl.Struct(self.dtypes))

    def one(self, base: Any, rows: pl.Series | None) -> dict[str, Any]:
        """One group: its base values (a dict, or the one value of a one-field base) and its rows."""
        values = base if isinstance(base, dict) else {self.base[0]: base}
        valid = values.get(_OK) is not None
        q = self.q
        out: dict[str, Any] = {k: values[k] for k in self.outputs if k in values}
        computed: dict[str, float] = {}
        if q.group_steps:
            data = _columns(rows, sorted({r for s in q.group_steps.values() for r in s.rows}))
            group = np.zeros(len(next(iter(data.values()))), dtype=np.int64)
            for step in q.group_steps.values():
                value = np.asarray(step.fn(group, 1, {c: data[c] for c in step.rows}), dtype=float)
                computed[step.output] = float(value[0])
        for np_step in q.numpy_steps:
            table = {c: np.array([_float(values.get(_IN + c, computed.get(c)))]) for c in np_step.inputs}
            result = np_step.fn(table)
            computed |= {k: float(np.asarray(result[k], dtype=float)[0]) for k in np_step.outputs}
        boolean = {k for s in q.numpy_steps for k in s.boolean}
        for k, v in computed.items():
            if k not in out and k in self.dtypes:
                ok = valid and not math.isnan(v)
                out[k] = (v == 1.0 if k in boolean else v) if ok else None
        return out


def _float(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _columns(rows: pl.Series | None, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The group's rows (a struct series) as one Float64 array per column (a null as NaN, as
    ``evaluate``'s collected rows)."""
    if rows is None:  # no rows (a list that is null)
        return {c: np.empty(0) for c in names}
    return {c: rows.struct.field(c).to_numpy().astype(float) for c in names}
