"""Validation of metric parameters: one helper per kind of check.

Every message has one shape: ``"<param> must be <expected>, got <value>"``.
A value of the wrong *type* raises ``TypeError``; a value of the right type
outside the allowed *range* raises ``ValueError``.  The factories
(``cf.coverage(...)``) and the public metric classes
(``cf.intervals.Coverage(...)``, through ``Metric.__post_init__`` and the
``check`` metadata of their fields) call the same helpers, so both raise the
same error for the same mistake.

Column names are checked here for their type only (a string, or a list of
distinct strings); whether the column exists is known once a frame is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import MISSING, field, fields
from decimal import Decimal
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, NoReturn

import narwhals.stable.v2 as nw
import numpy as np

if TYPE_CHECKING:
    from conformal_frames.core import Query

Label = int | str
Check = Callable[[Any, str], Any]

__all__ = [
    "boolean",
    "checked",
    "choice",
    "classes",
    "column",
    "columns",
    "finite",
    "level",
    "optional",
    "positive_int",
    "positive_pair",
    "probability",
    "validate_fields",
]


def _fail(error: type[Exception], name: str, expected: str, value: Any) -> NoReturn:
    raise error(f"{name} must be {expected}, got {value!r}")


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, (bool, np.bool_))


# ---------------------------------------------------------------------------
# numbers
# ---------------------------------------------------------------------------
def probability(value: Any, name: str) -> float:
    """A number strictly inside (0, 1)."""
    expected = "a number strictly between 0 and 1"
    if not _is_number(value):
        _fail(TypeError, name, expected, value)
    if not 0 < float(value) < 1:
        _fail(ValueError, name, expected, value)
    return float(value)


def positive_int(value: Any, name: str) -> int:
    """A positive integer (not a bool, not a float)."""
    expected = "a positive integer"
    if not isinstance(value, Integral) or isinstance(value, (bool, np.bool_)):
        _fail(TypeError, name, expected, value)
    if value < 1:
        _fail(ValueError, name, expected, value)
    return int(value)


def finite(value: Any, name: str) -> float:
    """Any finite real number."""
    expected = "a finite number"
    if not _is_number(value):
        _fail(TypeError, name, expected, value)
    if not math.isfinite(float(value)):
        _fail(ValueError, name, expected, value)
    return float(value)


def positive_pair(value: Any, name: str) -> tuple[float, float]:
    """Two strictly positive finite numbers."""
    expected = "two positive numbers"
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        _fail(TypeError, name, expected, value)
    if len(value) != 2:
        _fail(ValueError, name, expected, value)
    if not all(_is_number(v) for v in value):
        _fail(TypeError, name, expected, value)
    if not all(0 < float(v) < math.inf for v in value):
        _fail(ValueError, name, expected, value)
    return float(value[0]), float(value[1])


# ---------------------------------------------------------------------------
# names, options, flags
# ---------------------------------------------------------------------------
def column(value: Any, name: str) -> str:
    """A column name: a non-empty string."""
    if not isinstance(value, str):
        _fail(TypeError, name, "a column name (a string)", value)
    if not value:
        _fail(ValueError, name, "a non-empty column name", value)
    return value


def columns(value: Any, name: str) -> tuple[str, ...]:
    """A non-empty list of distinct column names."""
    expected = "a list of distinct column names"
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        _fail(TypeError, name, expected, value)
    names = list(value)
    if not all(isinstance(v, str) for v in names):
        _fail(TypeError, name, expected, value)
    if not names:
        _fail(ValueError, name, "a non-empty list of distinct column names", value)
    repeated = sorted({v for v in names if names.count(v) > 1})
    if repeated:
        _fail(ValueError, name, f"{expected} ({', '.join(map(repr, repeated))} repeated)", names)
    return tuple(names)


def choice(value: Any, name: str, options: Sequence[str]) -> str:
    """One of ``options`` (strings)."""
    expected = "one of " + ", ".join(repr(o) for o in options)
    if not isinstance(value, str):
        _fail(TypeError, name, expected, value)
    if value not in options:
        _fail(ValueError, name, expected, value)
    return value


def boolean(value: Any, name: str) -> bool:
    """``True`` or ``False`` (not 0/1, not a string)."""
    if not isinstance(value, (bool, np.bool_)):
        _fail(TypeError, name, "True or False", value)
    return bool(value)


def classes(value: Any, name: str = "classes") -> tuple[Label, ...]:
    """Distinct class labels, all integers or all strings, at least one."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        _fail(TypeError, name, "a list of labels (integers or strings)", value)
    out: list[Label] = []
    for c in list(value):
        if isinstance(c, Integral) and not isinstance(c, (bool, np.bool_)):
            out.append(int(c))
        elif isinstance(c, str):
            out.append(c)
        else:
            _fail(TypeError, name, "a list of labels (integers or strings)", c)
    if not out:
        _fail(ValueError, name, "a non-empty list of labels", out)
    if len({type(c) for c in out}) > 1:
        _fail(TypeError, name, "labels of one kind (all integers or all strings)", out)
    repeated = sorted({c for c in out if out.count(c) > 1}, key=str)
    if repeated:
        _fail(ValueError, name, f"distinct labels ({', '.join(map(repr, repeated))} repeated)", out)
    return tuple(out)


def level(value: Any, name: str = "confidence_level") -> float | str:
    """A target level in (0, 1), or the name of a ``by=`` column holding it."""
    if isinstance(value, str):
        return column(value, name)
    if not _is_number(value):
        _fail(TypeError, name, "a number strictly between 0 and 1 or a column name", value)
    return probability(value, name)


def optional(check: Check) -> Check:
    """``check`` that lets ``None`` through."""

    def run(value: Any, name: str) -> Any:
        return None if value is None else check(value, name)

    return run


# ---------------------------------------------------------------------------
# metric classes: fields that validate themselves
# ---------------------------------------------------------------------------
def checked(check: Check, default: Any = MISSING) -> Any:
    """A dataclass field validated by ``check(value, field_name)`` on construction."""
    return field(default=default, metadata={"check": check})


def validate_fields(obj: Any) -> None:
    """Run the ``check`` of every field of the (frozen) dataclass ``obj``.

    Normalised values (e.g. ``0.9`` for ``np.float64(0.9)``, a tuple for a
    list) replace the given ones.
    """
    for f in fields(obj):
        check = f.metadata.get("check")
        if check is not None:
            object.__setattr__(obj, f.name, check(getattr(obj, f.name), f.name))


# ---------------------------------------------------------------------------
# levels: numeric helpers shared by the families
# ---------------------------------------------------------------------------
def complement(value: float) -> float:
    """``1 - value`` as the decimal the user wrote: ``complement(0.9) == 0.1``.

    Float subtraction gives ``1 - 0.9 == 0.09999999999999998``; a p-value of
    exactly 0.1 must compare as with the significance level 0.1 itself.  The
    difference is taken on the shortest decimal form of ``value`` and rounded
    once to the nearest double.
    """
    return float(Decimal(1) - Decimal(repr(float(value))))


def level_row(q: Query, target: float | str) -> str | None:
    """Row column of the target level when it is a column (must be a ``by=`` key).

    ``None`` for a float level.  The one place where a metric's
    ``confidence_level=`` column is checked: it must be a ``by=`` key (so the
    target is constant within each group), numeric and inside (0, 1) (rows
    outside are invalid).  The row is Float64.
    """
    if not isinstance(target, str):
        return None
    if target not in q.keys:
        if target not in q.schema:
            q.column(target)  # the usual "not found" message
        msg = (
            f"confidence_level={target!r} names a column: it must also be a by= column, "
            "so that the target is constant within each group (e.g. by=[..., 'level'])"
        )
        raise ValueError(msg)
    if not q.schema[target].is_numeric():
        msg = f"confidence_level column {target!r} must be numeric, found dtype {q.schema[target]}"
        raise TypeError(msg)
    t = nw.col(target).cast(nw.Float64)
    q.check(f"confidence_level column {target!r} has values outside (0, 1)", ~((t > 0.0) & (t < 1.0)))
    return q.row(("target_level", target), t)
