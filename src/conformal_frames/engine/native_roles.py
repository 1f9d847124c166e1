"""Expression roles in compiled polars expressions (:mod:`conformal_frames.polars`).

A role given as an expression (``cfx.coverage(pl.col("y") * 2, "lo", "hi")``)
is an :class:`~conformal_frames._roles.ExprColumn` in the metric: a column
name that carries its expression.  ``cf.evaluate`` adds that column to the
frame first (:func:`~conformal_frames.engine.resolve_roles`); a compiled
expression has no frame, so the compiler binds the input to the expression
itself (:func:`bound`): ``pl.col("y") * 2`` (a narwhals expression converted
through :func:`~conformal_frames.engine.native.to_polars`) wherever the metric
reads its column.

The expression is therefore evaluated in the aggregation's context: an
elementwise expression (``pl.col("y") * 2``, ``nw.col("y").log()``) gives
``cf.evaluate``'s numbers exactly, while an aggregation inside it
(``pl.col("y") - pl.col("y").mean()``) is taken over the group in
``group_by().agg()`` (``cf.evaluate`` takes it over the whole frame, before
grouping).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from conformal_frames._roles import ExprColumn
from conformal_frames.engine.roles import expression_roles

if TYPE_CHECKING:
    import polars as pl

__all__ = ["bound", "identity"]


#: narwhals expression -> polars expression (:func:`conformal_frames.engine.native.to_polars` unbound)
Convert = Callable[[Any], "pl.Expr"]


def _native(role: ExprColumn, convert: Convert) -> pl.Expr:
    """The polars expression of ``role`` (a narwhals one converted), without its aliases."""
    expr: pl.Expr = role.expr if role.kind == "pl" else convert(role.expr)
    return expr.meta.undo_aliases()


def bound(metrics: Sequence[Any], convert: Convert) -> dict[str, pl.Expr]:
    """The expression roles of ``metrics``: internal column name -> its polars expression."""
    return {name: _native(role, convert) for name, role in expression_roles(metrics).items()}


def identity(metrics: Sequence[Any], convert: Convert) -> tuple[bytes, ...] | None:
    """What tells the expression roles of ``metrics`` apart beyond their text, or ``None`` if unknown.

    Two expressions can print the same text (polars abbreviates long literals
    and prints every Python function ``python_udf()``): a memo of compiled
    expressions keys on their serialized form, and compiles every call when
    an expression cannot be serialized.
    """
    roles = bound(metrics, convert)
    try:
        return tuple(e.meta.serialize(format="binary") for e in roles.values())
    except Exception:  # any expression polars cannot serialize: no memo
        return None
