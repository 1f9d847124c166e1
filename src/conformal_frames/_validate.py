"""Validation of metric parameters: one helper per kind of check.

Every message has one shape: ``"<param> must be <expected>, got <value!r>"``.
A value of the wrong *type* raises ``TypeError``; a value of the right type
outside the allowed *range* raises ``ValueError``.  The factories
(``cf.coverage(...)``) and the public metric classes
(``cf.metrics.intervals.Coverage(...)``) run the same checks: ``Metric.__post_init__``
calls :func:`validate_fields`, which checks each field by its name (one name,
one concept: see :data:`FIELD_CHECKS`) unless the field declares its own check
with :func:`checked`.

Column names are checked here for their type only (a string, or a list of
distinct strings); whether the column exists is known once a frame is given.
A role that names a column also takes an expression (narwhals, or polars on
polars frames): the check returns its :class:`~conformal_frames._roles.ExprColumn`
(a column name that carries the expression, see :mod:`conformal_frames._roles`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import MISSING, field, fields
from decimal import Decimal
from numbers import Integral, Real
from typing import Any, NoReturn

import numpy as np

from conformal_frames._roles import ExprColumn, as_role

Label = int | str
Check = Callable[[Any, str], Any]


def fail(error: type[Exception], name: str, expected: str, value: Any) -> NoReturn:
    """Raise ``error("<name> must be <expected>, got <value!r>")``."""
    raise error(f"{name} must be {expected}, got {value!r}")


def is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, (bool, np.bool_))


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, (bool, np.bool_))


def _is_list(value: Any) -> bool:
    return not isinstance(value, (str, bytes)) and isinstance(value, Sequence | np.ndarray)


# ---------------------------------------------------------------------------
# numbers
# ---------------------------------------------------------------------------
def check_probability(value: Any, name: str) -> float:
    """A number strictly inside (0, 1)."""
    expected = "a number strictly between 0 and 1"
    if not is_number(value):
        fail(TypeError, name, expected, value)
    if not 0 < float(value) < 1:
        fail(ValueError, name, expected, value)
    return float(value)


def check_positive_int(value: Any, name: str, *, at_least: int = 1) -> int:
    """A positive integer (not a bool, not a float): ``n_bins``, ``n_directions``, ..."""
    expected = "a positive integer" if at_least == 1 else f"an integer >= {at_least}"
    if not _is_int(value):
        fail(TypeError, name, expected, value)
    if value < at_least:
        fail(ValueError, name, expected, value)
    return int(value)


def check_bins(value: Any, name: str = "n_bins") -> int:
    """``n_bins``: a positive integer."""
    return check_positive_int(value, name)


def check_seed(value: Any, name: str = "seed") -> int:
    """A random seed: an integer (not a bool)."""
    if not _is_int(value):
        fail(TypeError, name, "an integer", value)
    return int(value)


def check_fraction(value: Any, name: str) -> float:
    """A number in (0, 1] (e.g. the smallest slab mass ``delta``)."""
    expected = "a number in (0, 1]"
    if not is_number(value):
        fail(TypeError, name, expected, value)
    if not 0 < float(value) <= 1:
        fail(ValueError, name, expected, value)
    return float(value)


def check_finite(value: Any, name: str) -> float:
    """Any finite real number."""
    expected = "a finite number"
    if not is_number(value):
        fail(TypeError, name, expected, value)
    if not math.isfinite(float(value)):
        fail(ValueError, name, expected, value)
    return float(value)


def check_positive_pair(value: Any, name: str) -> tuple[float, float]:
    """Two strictly positive finite numbers."""
    expected = "two positive numbers"
    if not _is_list(value) or not all(is_number(v) for v in value):
        fail(TypeError, name, expected, value)
    if len(value) != 2 or not all(0 < float(v) < math.inf for v in value):
        fail(ValueError, name, expected, value)
    return float(value[0]), float(value[1])


# ---------------------------------------------------------------------------
# names, options, flags, labels
# ---------------------------------------------------------------------------
def check_column(value: Any, name: str) -> str:
    """A column name: a string, or an expression (its :class:`~conformal_frames._roles.ExprColumn`)."""
    value = as_role(value)
    if not isinstance(value, str):
        fail(TypeError, name, "a column name (a string) or an expression", value)
    return value


def check_columns(value: Any, name: str, *, at_least: int = 1) -> tuple[str, ...]:
    """A list of ``at_least`` or more distinct column names (or expressions)."""
    expected = "a list of distinct column names"
    if _is_list(value):
        value = [as_role(v) for v in value]
    if not _is_list(value) or not all(isinstance(v, str) for v in value):
        fail(TypeError, name, expected, value)
    names = [v if isinstance(v, ExprColumn) else str(v) for v in value]  # np.str_ read as str
    if len(names) < at_least:
        fail(ValueError, name, f"{expected} (at least {at_least})", names)
    repeated = sorted({v for v in names if names.count(v) > 1})
    if repeated:
        fail(ValueError, name, f"{expected} ({', '.join(map(repr, repeated))} repeated)", names)
    return tuple(names)


SETS = "the name of a list column or a list of boolean membership column names (one per class)"


def check_sets(value: Any, name: str = "sets") -> str | tuple[str, ...]:
    """Prediction sets: a list column's name or a list of membership column names."""
    value = as_role(value)
    if isinstance(value, str):
        return value
    if _is_list(value):
        value = [as_role(v) for v in value]
    if not _is_list(value) or not all(isinstance(v, str) for v in value):
        fail(TypeError, name, SETS, value)
    if not len(value):
        fail(ValueError, name, SETS, value)
    return check_columns(value, name)


def check_choice(value: Any, name: str, options: Sequence[str]) -> str:
    """One of ``options`` (strings)."""
    expected = "one of " + ", ".join(repr(o) for o in options)
    if not isinstance(value, str):
        fail(TypeError, name, expected, value)
    if value not in options:
        fail(ValueError, name, expected, value)
    return value


def check_boolean(value: Any, name: str) -> bool:
    """``True`` or ``False`` (not 0/1, not a string)."""
    if not isinstance(value, (bool, np.bool_)):
        fail(TypeError, name, "True or False", value)
    return bool(value)


def check_classes(value: Any, name: str = "classes") -> tuple[Label, ...]:
    """Distinct class labels, all integers or all strings, at least one."""
    expected = "a list of distinct labels, all integers or all strings"
    if value is None:
        msg = f"{name}= is required: the labels of the classes (integers or strings)"
        raise ValueError(msg)
    if not _is_list(value):
        fail(TypeError, name, expected, value)
    out: list[Label] = []
    for c in list(value):
        if _is_int(c):
            out.append(int(c))
        elif isinstance(c, str):
            out.append(c)
        else:
            fail(TypeError, name, expected, list(value))
    if len({type(c) for c in out}) > 1:
        fail(TypeError, name, expected, out)
    if not out:
        fail(ValueError, name, expected + " (at least one)", out)
    repeated = sorted({c for c in out if out.count(c) > 1}, key=str)
    if repeated:
        fail(ValueError, name, f"{expected} ({', '.join(map(repr, repeated))} repeated)", out)
    return tuple(out)


def check_level(value: Any, name: str = "confidence_level") -> float | str:
    """A target level in (0, 1), or the name of a ``by=`` column holding it."""
    if isinstance(value, str):
        return value
    if not is_number(value):
        fail(TypeError, name, "a number strictly between 0 and 1 or a column name", value)
    return check_probability(value, name)


def check_alias(value: Any, name: str = "name") -> str | None:
    """An output name: ``None`` (the default name) or a non-empty string."""
    if value is None:
        return None
    if not isinstance(value, str):
        fail(TypeError, name, "a non-empty string", value)
    if not value:
        fail(ValueError, name, "a non-empty string", value)
    return value


def optional(check: Check) -> Check:
    """``check`` that lets ``None`` through."""

    def run(value: Any, name: str) -> Any:
        return None if value is None else check(value, name)

    return run


def choice(*options: str) -> Check:
    """A field check: one of ``options``."""

    def run(value: Any, name: str) -> str:
        return check_choice(value, name, options)

    return run


# ---------------------------------------------------------------------------
# metric classes: fields that validate themselves
# ---------------------------------------------------------------------------
#: the check of a metric field, by the field's name (the vocabulary gives one
#: name to one concept); a field declared with :func:`checked` overrides it
FIELD_CHECKS: dict[str, Check] = {
    "name": check_alias,
    "y": check_column,
    "lo": check_column,
    "hi": check_column,
    "score": check_column,
    "order_by": check_column,
    "probs": check_columns,
    "features": check_columns,
    "groups": check_columns,
    "ci_level": check_probability,
    "significance": check_probability,
    "confidence_level": check_level,
    "n_bins": check_positive_int,
    "n_directions": optional(check_positive_int),
    "n_splits": check_positive_int,
    "strategy": choice("uniform", "quantile"),
    "eta": check_finite,
    "kernel_sizes": check_positive_pair,
    "weighted": check_boolean,
    "include_empty": check_boolean,
    "seed": check_seed,
    "classes": check_classes,
    "weights": optional(check_column),
    "counts": optional(check_column),
}


def instance_of(*types: type) -> Check:
    """A check that the value is one of ``types`` (a field the factory builds, e.g. a ``Target``)."""

    def check(value: Any, name: str) -> Any:
        if not isinstance(value, types):
            expected = " or ".join(t.__name__ for t in types)
            msg = f"{name} must be a {expected}, got {type(value).__name__}"
            raise TypeError(msg)
        return value

    return check


def check_classifier(value: Any, name: str) -> Any:
    """``None`` or an object with scikit-learn's ``fit`` and ``predict_proba``."""
    if value is not None and not (hasattr(value, "fit") and hasattr(value, "predict_proba")):
        msg = f"{name} must be a scikit-learn classifier (fit and predict_proba), got {type(value).__name__}"
        raise TypeError(msg)
    return value


def checked(check: Check, default: Any = MISSING) -> Any:
    """A dataclass field validated by ``check(value, field_name)`` on construction."""
    return field(default=default, metadata={"check": check})


def validate_fields(obj: Any) -> None:
    """Run the check of every field of the (frozen) dataclass ``obj``.

    Normalised values (e.g. ``0.9`` for ``np.float64(0.9)``, a tuple for a
    list) replace the given ones.
    """
    for f in fields(obj):
        check = f.metadata.get("check", FIELD_CHECKS.get(f.name))
        if check is not None:
            object.__setattr__(obj, f.name, check(getattr(obj, f.name), f.name))


# ---------------------------------------------------------------------------
# levels: numeric helpers shared by the families
# ---------------------------------------------------------------------------
def complement(level: float) -> float:
    """``1 - level`` as the decimal the user wrote: ``complement(0.9) == 0.1``.

    Float subtraction gives ``1 - 0.9 == 0.09999999999999998``; a p-value of
    exactly 0.1 must compare as with the significance level 0.1 itself.  The
    difference is taken on the shortest decimal form of ``level`` and rounded
    once to the nearest double.
    """
    return float(Decimal(1) - Decimal(repr(float(level))))
