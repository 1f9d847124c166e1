"""The engine: compile metrics into one narwhals query and run it.

The surface other layers use (nothing private crosses this boundary):

- :mod:`~conformal_frames.engine.query`: what a metric registers (:class:`Query`,
  the recorder, and :class:`Weighting`); :mod:`~conformal_frames.engine.metric`:
  :class:`Metric` and the factory decorators; :mod:`~conformal_frames.engine.expr`:
  the expression helpers shared by every family (:class:`TableRef`, :class:`Cells`,
  :func:`aggregate`, :func:`over`, :func:`join_keys` ...);
- :mod:`~conformal_frames.engine.spec`: a metric's definition as a value
  (:class:`Spec`, from :meth:`Query.record` / :meth:`Metric.definition`): its
  inputs, named statistics, cells, mergeability, phases and outputs, which
  summaries, bootstrap and the report read instead of building probes;
- :mod:`~conformal_frames.engine.plan`: the :class:`Plan` of one evaluation,
  whose phases are its methods (keys and checks, the main aggregation under
  the invalid-row policy, completion, raising), and :class:`Compiled`;
- :mod:`~conformal_frames.engine.execute`: running a plan (:func:`evaluate`);
  :mod:`~conformal_frames.engine.roles`: roles given as expressions, evaluated
  at the frame entry (:func:`resolve_roles`).
"""

from __future__ import annotations

from conformal_frames.engine.execute import compute, evaluate, evaluate_one
from conformal_frames.engine.expr import (
    Cells,
    FinalizeFn,
    TableFn,
    TableRef,
    aggregate,
    indicator,
    join_keys,
    ordered_cells,
    over,
    polars_in_memory,
    running_total,
    sort_result,
    stack,
    total,
)
from conformal_frames.engine.metric import Metric, no_counts, no_weights
from conformal_frames.engine.plan import (
    Compiled,
    Plan,
    as_keys,
    backend_name,
    check_index_keys,
    compile_query,
    has_invalid,
    lazy_refusal,
    normalized_keys,
    policy,
    to_lazy,
    with_validity,
    worded,
)
from conformal_frames.engine.query import (
    REPLICATE_WEIGHTS,
    RESERVED,
    GroupFn,
    InvalidPolicy,
    NotPerRowError,
    NumpyFn,
    PerRow,
    Query,
    Replicate,
    Weighting,
)
from conformal_frames.engine.roles import expression_roles, resolve_roles, takes_roles
from conformal_frames.engine.spec import PHASES, CellTable, Spec, Stat, declared_name

__all__ = [
    "PHASES",
    "REPLICATE_WEIGHTS",
    "RESERVED",
    "CellTable",
    "Cells",
    "Compiled",
    "FinalizeFn",
    "GroupFn",
    "InvalidPolicy",
    "Metric",
    "NotPerRowError",
    "NumpyFn",
    "PerRow",
    "Plan",
    "Query",
    "Replicate",
    "Spec",
    "Stat",
    "TableFn",
    "TableRef",
    "Weighting",
    "aggregate",
    "as_keys",
    "backend_name",
    "check_index_keys",
    "compile_query",
    "compute",
    "declared_name",
    "evaluate",
    "evaluate_one",
    "expression_roles",
    "has_invalid",
    "indicator",
    "join_keys",
    "lazy_refusal",
    "no_counts",
    "no_weights",
    "normalized_keys",
    "ordered_cells",
    "over",
    "polars_in_memory",
    "policy",
    "resolve_roles",
    "running_total",
    "sort_result",
    "stack",
    "takes_roles",
    "to_lazy",
    "total",
    "with_validity",
    "worded",
]
