"""Roles given as expressions, evaluated at the frame entry: :func:`resolve_roles`.

A metric holds an expression role as an :class:`~conformal_frames._roles.ExprColumn`
(a column name that carries its expression); the evaluation entries
(:func:`~conformal_frames.engine.compute`, ``summarize``, the report) call
:func:`resolve_roles` first, which evaluates each distinct expression once into
its internal column on a copy of the caller's frame (lazy stays lazy), and
each ``by=`` expression into a key column named by its output name.  Everything
after reads plain columns: one place resolves roles.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import narwhals.stable.v2 as nw

from conformal_frames._roles import ExprColumn, as_role, is_expression
from conformal_frames.engine.plan import backend_name
from conformal_frames.errors import ColumnNotFoundError, ExpressionBackendError

__all__ = ["expression_roles", "resolve_roles", "takes_roles"]

T = TypeVar("T")


def _walk(value: Any, seen: set[int]) -> Iterator[ExprColumn]:
    if isinstance(value, ExprColumn):
        yield value
    elif value is None or isinstance(value, (str, int, float)) or id(value) in seen:
        return
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _walk(v, seen)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk(v, seen)
    elif not isinstance(value, type) and (names := _field_names(type(value))) is not None:
        seen.add(id(value))
        for name in names:
            yield from _walk(getattr(value, name, None), seen)


_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _field_names(kind: type) -> tuple[str, ...] | None:
    """The field names of the dataclass ``kind`` (``None`` for another type), found once per type:
    ``dataclasses.fields`` on every call was most of an 8-metric ``evaluate``'s walk (1,000 rows)."""
    if kind not in _FIELDS:
        names = tuple(f.name for f in dataclasses.fields(kind)) if dataclasses.is_dataclass(kind) else None
        _FIELDS[kind] = names
    return _FIELDS[kind]


def expression_roles(metrics: Sequence[Any]) -> dict[str, ExprColumn]:
    """The expression roles of ``metrics`` (nested metrics, targets and set specs included), by column.

    Two polars expressions of the same text that polars does not find equal
    (e.g. two Python functions: polars prints both ``python_udf()``) would
    share one column: a ``ValueError`` says so.
    """
    seen: set[int] = set()
    out: dict[str, ExprColumn] = {}
    for m in metrics:
        for r in _walk(m, seen):
            first = out.setdefault(str(r), r)
            if first is not r and r.kind == "pl" and not first.expr.meta.eq(r.expr):
                msg = (
                    f"two different polars expressions print the same text {r!r}: add the column to the "
                    "frame first (df.with_columns(...)) and pass its name, or write one with narwhals"
                )
                raise ValueError(msg)
    return out


def _native_polars(frame: nw.DataFrame | nw.LazyFrame, exprs: list[Any]) -> nw.DataFrame | nw.LazyFrame:
    """``frame`` (polars) with the polars expressions ``exprs`` added."""
    return nw.from_native(frame.to_native().with_columns(*exprs))


def _refuse_polars(role: Any, where: str, frame: nw.DataFrame | nw.LazyFrame) -> None:
    backend = backend_name(frame)
    msg = (
        f"{where} {role!r} is a polars expression: it evaluates on polars frames only, and this frame is "
        f"{backend}; write it with narwhals (import narwhals as nw; nw.col(...)) to use it on every backend"
    )
    raise ExpressionBackendError(msg, backend=backend)


def _key_roles(by: Any) -> list[Any] | None:
    """``by=`` as a list with its expressions as roles, or ``None`` when it holds no expression."""
    items = [by] if is_expression(by) else list(by) if isinstance(by, (list, tuple)) else None
    if items is None or not any(is_expression(k) for k in items):
        return None
    return [as_role(k) for k in items]


def _output_name(frame: nw.DataFrame | nw.LazyFrame, role: ExprColumn) -> str:
    if role.kind == "pl":
        return str(role.expr.meta.output_name())
    return str(frame.lazy().select(role.expr).collect_schema().names()[0])


def resolve_roles(frame: Any, metrics: Sequence[Any], by: Any = None) -> tuple[Any, Any]:
    """``(frame, by)`` with every expression role evaluated into its column (a new frame).

    Without expressions ``frame`` and ``by`` are returned as they are.  A
    metric's expression becomes the internal column the metric names (see
    :mod:`conformal_frames._roles`); a ``by=`` expression becomes a key column
    named by its output name (``nw.col("g").str.to_uppercase()`` replaces ``g``
    in the copy; ``.alias("G")`` names a new one).  A polars expression on a
    frame of another backend raises :class:`~conformal_frames.errors.ExpressionBackendError`.
    The caller's frame is not modified.
    """
    roles = expression_roles(metrics)
    keys = _key_roles(by)
    if not roles and keys is None:
        return frame, by
    if isinstance(frame, (nw.DataFrame, nw.LazyFrame)):
        nw_frame = frame
    else:
        try:
            nw_frame = nw.from_native(frame)
        except (TypeError, ValueError):  # not a frame: the entry's own check says so
            return frame, by
        if not isinstance(nw_frame, (nw.DataFrame, nw.LazyFrame)):
            return frame, by
    polars = nw_frame.implementation.is_polars()
    present = set(nw_frame.collect_schema().names())
    # (expression, kind) to add: each metric role once, under its internal column
    added = [(r.expr.alias(str(r)), r.kind, r, "the role") for name, r in roles.items() if name not in present]
    names: list[Any] = []
    for k in keys or []:
        if isinstance(k, ExprColumn):
            item = (k.expr, k.kind, k, "the group key (by=)")
            try:
                names.append(_output_name(nw_frame, k) if k.kind == "nw" or polars else str(k))
            except Exception as exc:
                raise _failure(nw_frame, [item], exc) from exc
            added.append(item)
        else:
            names.append(k)
    for _, kind, role, where in added:
        if kind == "pl" and not polars:
            _refuse_polars(role, where, nw_frame)
    try:
        return _added(nw_frame, added), (by if keys is None else names)
    except Exception as exc:  # the backend's own error: say which role
        raise _failure(nw_frame, added, exc) from exc


def _added(nw_frame: nw.DataFrame | nw.LazyFrame, added: list[tuple[Any, str, Any, str]]) -> Any:
    """``nw_frame`` with the expressions ``added``, its schema resolved (a lazy frame's errors surface here)."""
    plain = [e for e, kind, _, _ in added if kind == "nw"]
    native = [e for e, kind, _, _ in added if kind == "pl"]
    if plain:
        nw_frame = nw_frame.with_columns(*plain)
    if native:
        nw_frame = _native_polars(nw_frame, native)
    nw_frame.collect_schema()
    return nw_frame


def _failure(
    nw_frame: nw.DataFrame | nw.LazyFrame, added: list[tuple[Any, str, Any, str]], exc: Exception
) -> Exception:
    """The error of the first expression of ``added`` that the backend cannot evaluate, naming it."""
    culprit = next(iter(added))
    for item in added:
        try:
            _added(nw_frame, [item])
        except Exception:
            culprit = item
            break
    _, _, role, where = culprit
    reason = " ".join(str(exc).split())[:300]
    backend = backend_name(nw_frame)
    text = f"{where} {role!r} cannot be evaluated on this {backend} frame: {reason}"
    missing = any(w in reason.lower() for w in ("not found", "cannot be resolved")) or "NotFound" in type(exc).__name__
    return ColumnNotFoundError(text) if missing else TypeError(text)


def _renamed_outputs(out: Any, roles: dict[str, ExprColumn], frame: Any) -> Any:
    """``out`` (a native frame) with the columns named after internal role columns renamed to the roles' output names."""
    try:
        result = nw.from_native(out)
    except TypeError:  # not a frame (a float, a result object)
        return out
    if not isinstance(result, (nw.DataFrame, nw.LazyFrame)):
        return out
    names = result.collect_schema().names()
    mapping = {c: _output_name(frame, roles[c]) for c in names if c in roles}
    mapping = {c: new for c, new in mapping.items() if new not in names}  # never two columns of one name
    return nw.to_native(result.rename(mapping)) if mapping else out


def takes_roles(*params: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate a function of a frame whose ``params`` (and ``by=``) name columns: they take expressions too.

    The expressions are evaluated into their columns (:func:`resolve_roles`)
    before the function runs; an output column named after one (e.g. the
    score column of ``cumulative_differences``) is renamed to the
    expression's output name (``nw.col("p") * 0.5`` is ``p``).
    """

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return fn(*args, **kwargs)  # Python's own message
            given = bound.arguments
            for p in params:
                if p in given:
                    value = given[p]
                    given[p] = [as_role(v) for v in value] if isinstance(value, (list, tuple)) else as_role(value)
            roles = expression_roles([given.get(p) for p in params])
            if not roles and _key_roles(given.get("by")) is None:
                return fn(*bound.args, **bound.kwargs)
            frame = next(iter(given.values()))
            resolved, by = resolve_roles(frame, [given.get(p) for p in params], given.get("by"))
            given[next(iter(given))] = resolved
            if "by" in given:
                given["by"] = by
            out = fn(*bound.args, **bound.kwargs)
            return _renamed_outputs(out, roles, resolved) if roles else out

        wrapper.__roles__ = (*params, "by")  # type: ignore[attr-defined]  # read by the stub generator
        return wrapper

    return decorate
