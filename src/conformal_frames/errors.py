"""Typed errors: catch them by type, never by their text.

Both subclass the built-in error they refine, so ``except ValueError`` and
``except NotImplementedError`` keep working.  :func:`user_stacklevel` points
the package's warnings at the caller's line.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["BackendLimitError", "ColumnNotFoundError", "ExpressionBackendError", "InvalidRowsError"]


class InvalidRowsError(ValueError):
    """Rows fail a check of the metrics' inputs under ``invalid="raise"``.

    The message names the first failing check, its row count and, when
    available, the smallest offending value (``"..., e.g. 7"``).

    Attributes
    ----------
    counts : dict of str to int
        Every failing check, in the evaluation's own words (e.g. ``"column
        'y' has labels other than 0 and 1 in 3 rows"``), and its row count.
    example : object or None
        The smallest offending value of the first failing check (``None``
        when the check shows none).
    """

    def __init__(self, message: str, *, counts: Mapping[str, int] | None = None, example: Any = None) -> None:
        super().__init__(message)
        self.counts: dict[str, int] = dict(counts or {})
        self.example = example

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self),), self.__dict__)


class BackendLimitError(NotImplementedError):
    """The backend cannot run an operation the metrics need (or cannot run it lazily).

    The message names the backend and the way out (collect the frame to
    pandas or polars, or use polars).

    Attributes
    ----------
    backend : str
        The backend, e.g. ``"duckdb"``, ``"pyspark"``.
    """

    def __init__(self, message: str, *, backend: str = "") -> None:
        super().__init__(message)
        self.backend = backend

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self),), self.__dict__)


class ColumnNotFoundError(ValueError):
    """A column a metric (or ``by=``) names is not in the frame; the message lists the available ones."""


class ListColumnError(TypeError):
    """A column a role reads as a list column (prediction sets) has another dtype; ``.column`` names it.

    ``.inner``: the elements' dtype the role reads (``nw.Float64()`` for ensemble members), or ``None``
    for any (labels).
    """

    def __init__(self, message: str, *, column: str = "", inner: Any = None) -> None:
        super().__init__(message)
        self.column = column
        self.inner = inner

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self),), self.__dict__)


class BooleanColumnError(TypeError):
    """A column a role reads as boolean (membership columns) has another dtype; ``.column`` names it."""

    def __init__(self, message: str, *, column: str = "") -> None:
        super().__init__(message)
        self.column = column

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self),), self.__dict__)


class ExpressionBackendError(TypeError):
    """A role given as a polars expression (``pl.col("y") * 2``) on a frame of another backend.

    A polars expression evaluates on polars frames only; a narwhals expression
    (``nw.col("y") * 2``) evaluates on every backend.

    Attributes
    ----------
    backend : str
        The frame's backend, e.g. ``"pandas"``, ``"duckdb"``.
    """

    def __init__(self, message: str, *, backend: str = "") -> None:
        super().__init__(message)
        self.backend = backend

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self),), self.__dict__)


def user_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` in the calling function that names the user's line.

    The first frame outside ``conformal_frames`` (the caller's script, notebook
    cell or test), however deep the package's own calls go: ``evaluate``, a
    ``.conformal`` method, ``report`` and the CLI warn at the line that called
    them.
    """
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and str(frame.f_globals.get("__name__", "")).startswith("conformal_frames"):
        frame, level = frame.f_back, level + 1
    return level
