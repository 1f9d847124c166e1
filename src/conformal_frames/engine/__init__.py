"""The engine: compile metrics into one narwhals query and run it.

The surface other layers use (nothing private crosses this boundary):

- :mod:`~conformal_frames.engine.query`: what a metric registers (:class:`Query`,
  :class:`Weighting`, :class:`TableRef`, :class:`Cells`, :class:`Metric`) and
  the expression helpers shared by every family;
- :mod:`~conformal_frames.engine.plan`: the plan of one evaluation (keys,
  checks, the invalid-row policy, compilation);
- :mod:`~conformal_frames.engine.execute`: running a plan (:func:`evaluate`).
"""

from __future__ import annotations

from conformal_frames.engine.execute import compute, evaluate, evaluate_one
from conformal_frames.engine.plan import (
    Compiled,
    as_keys,
    check_count_query,
    check_counts,
    compile_query,
    complete_query,
    has_invalid,
    invalid_mask,
    policy,
    to_lazy,
)
from conformal_frames.engine.query import (
    RESERVED,
    Cells,
    FinalizeFn,
    GroupFn,
    InvalidPolicy,
    Metric,
    NumpyFn,
    Query,
    TableFn,
    TableRef,
    Weighting,
    aggregate,
    indicator,
    no_counts,
    no_weights,
    ordered_cells,
    over,
    running_total,
    stack,
    total,
)

__all__ = [
    "RESERVED",
    "Cells",
    "Compiled",
    "FinalizeFn",
    "GroupFn",
    "InvalidPolicy",
    "Metric",
    "NumpyFn",
    "Query",
    "TableFn",
    "TableRef",
    "Weighting",
    "aggregate",
    "as_keys",
    "check_count_query",
    "check_counts",
    "compile_query",
    "complete_query",
    "compute",
    "evaluate",
    "evaluate_one",
    "has_invalid",
    "indicator",
    "invalid_mask",
    "no_counts",
    "no_weights",
    "ordered_cells",
    "over",
    "policy",
    "running_total",
    "stack",
    "to_lazy",
    "total",
]
