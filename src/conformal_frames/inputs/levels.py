"""Level columns: the one reader of a level given as a float or as a column.

A metric's ``confidence_level=`` (a target level) and the long form's
``quantile_level=`` (the level of each row's quantile) are read here, with one
set of checks and one wording.
"""

from __future__ import annotations

import narwhals.stable.v2 as nw

from conformal_frames.engine import Query

__all__ = ["level_column_row", "level_name", "level_row"]


def level_name(level: float) -> str:
    """The name of a level in output columns: its percentage, ``_`` for the decimal point.

    ``0.9 -> "90"``, ``0.975 -> "97_5"``, ``0.05 -> "5"``, ``0.005 -> "0_5"``.
    Per-level wide outputs are ``<name>_level<level_name(level)>...``, so a
    level's columns keep their names whatever other levels are present.  The
    digits are those of the shortest decimal that prints the float (Python's
    ``repr``, never in exponent form), moved two places: distinct levels get
    distinct names, with no dot (Spark reads it as a field access) and no minus.

    Parameters
    ----------
    level : float
        A level in (0, 1).

    Returns
    -------
    str
        The percentage, digits and ``_`` only.

    Examples
    --------
    >>> from conformal_frames.inputs.levels import level_name
    >>> [level_name(t) for t in (0.1, 0.5, 0.9, 0.975, 0.025, 0.001)]
    ['10', '50', '90', '97_5', '2_5', '0_1']
    """
    import numpy as np

    value = float(level)
    if not 0.0 < value < 1.0:
        msg = f"a level must be in (0, 1), got {level!r}"
        raise ValueError(msg)
    digits = np.format_float_positional(value, unique=True, trim="-").split(".")[1]
    digits = digits.ljust(2, "0")
    whole, frac = digits[:2].lstrip("0") or "0", digits[2:]
    return f"{whole}_{frac}" if frac else whole


def level_column_row(q: Query, column: str, *, param: str = "quantile_level", by_key: bool = False) -> str:
    """A level column as a Float64 row; values outside (0, 1) are invalid rows.

    ``param`` names the parameter in the messages.  With ``by_key=True`` the
    column must also be a ``by=`` key, so that each group has one level (a
    target level, or the coverage of one quantile level).  A column that is not
    a key is a per-row level: its missing values are invalid rows too.
    """
    if column not in q.schema:
        q.column(column)  # the usual "not found" message
    if by_key and column not in q.keys:
        msg = (
            f"{param}={column!r} names a column: it must also be a by= column, so that each group "
            f"has one level (e.g. by=[..., {column!r}])"
        )
        raise ValueError(msg)
    if not q.schema[column].is_numeric():
        msg = f"{param} column {column!r} must be numeric, found dtype {q.schema[column]}"
        raise TypeError(msg)
    t = nw.col(column).cast(nw.Float64)
    q.check(f"{param} column {column!r} has values outside (0, 1)", ~((t > 0.0) & (t < 1.0)))
    if column in q.keys:
        return q.row(("level_key", column), t)
    return q.row(("value", column), q.number(column))


def level_row(q: Query, level: float | str) -> str | None:
    """The row of a metric's target level ``confidence_level=`` when it names a column, else ``None``.

    The column must be a ``by=`` key (the target is constant within each
    group), numeric and inside (0, 1): see :func:`level_column_row`.
    """
    if not isinstance(level, str):
        return None
    return level_column_row(q, level, param="confidence_level", by_key=True)
