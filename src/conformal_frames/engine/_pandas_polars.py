"""Eager pandas input evaluated by polars, with the pandas path's result.

narwhals' pandas backend runs one groupby per aggregated column and
broadcasts literals to full columns; polars runs the whole query at once
(multithreaded).  When polars is installed, an eager pandas evaluation
(:func:`conformal_frames.engine.compute`) is therefore planned on the pandas
schema (errors about columns and dtypes are the pandas path's), run on a
polars copy of only the columns it uses (:func:`twin`) and turned back into
the pandas frame the pandas path returns (:func:`back`): the same column
names, dtypes, ``RangeIndex`` and values.

It applies only where the round trip is exact (a whitelist, checked column by
column): numpy ``bool``, integer, float and ``datetime64`` (ns, us, ms)
columns (NaN and NaT become null, as the pandas path reads them), pandas'
string dtypes (``str``, ``string``; as keys on pandas 3 only) and, as a
metric input (not a key), ``object`` columns holding only strings; no group
key may have missing values.  Other columns (nullable ``Int64``/``Float64``/
``boolean``, ``ArrowDtype``, categorical, time-zone aware datetimes,
``object`` keys, Python lists of prediction sets) keep the pandas path, and
so does any call that fails on the polars side: the pandas path then runs
and raises its own error.

The columns a call uses are cached per (schema, metrics, keys), and the
polars query is the compiled query of an eager polars frame
(:mod:`conformal_frames.engine._plan_cache`, a variant of its own): a repeated call
on small frames costs little more than on polars.

The outputs are computed with their own dtypes (``keep_dtypes`` of
:meth:`conformal_frames.engine.Plan.complete`): pandas keeps an integer output
(e.g. ``quantile_coverage_n``) int64 unless a group is invalid (then the
nullable ``Int64``), as the pandas path does.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping, Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames.engine._steps import boolean_series

__all__ = ["ENABLED", "applies", "back", "polars_errors", "twin"]

#: tests set this to ``False`` to compare with the pandas path
ENABLED = True


@functools.cache
def _polars_installed() -> bool:
    return importlib.util.find_spec("polars") is not None


@functools.cache
def _pandas_major() -> int:
    import pandas as pd

    return int(pd.__version__.split(".")[0])


@functools.cache
def polars_errors() -> tuple[type[BaseException], ...]:
    """What polars (or pyarrow, converting) raises on a column or an operation it cannot handle."""
    import polars as pl

    errors: tuple[type[BaseException], ...] = (pl.exceptions.PolarsError, pl.exceptions.PanicException)
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - depends on the environment
        return errors
    return (*errors, pa.ArrowException)


def applies(frame: nw.LazyFrame) -> bool:
    """Whether ``frame`` is an eager pandas frame that polars may evaluate."""
    return ENABLED and frame.implementation.is_pandas() and _polars_installed()


def _exact(series: Any, key: bool) -> bool:
    """Whether ``series`` goes to polars and back unchanged (see the module docstring).

    A group key must also come out of the pandas path with its own dtype:
    ``object`` keys come out as strings of pandas' default string dtype, and
    string keys are checked on pandas 3 only.
    """
    import pandas as pd

    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biufM":
        return True
    if isinstance(dtype, pd.StringDtype):
        return not key or _pandas_major() >= 3
    return not key and dtype == np.dtype(object) and pd.api.types.infer_dtype(series, skipna=False) == "string"


def twin(
    frame: nw.LazyFrame, keys: Sequence[str], inputs: Sequence[str], schema: Mapping[str, Any]
) -> nw.DataFrame | None:
    """A polars DataFrame of the ``keys`` and ``inputs`` of the pandas ``frame``, or ``None``.

    ``None`` when a column is not exact, or a key has missing values.
    ``schema`` is the pandas frame's narwhals schema: the polars columns must
    have the same narwhals dtypes, so that the planned query reads them alike.
    """
    import polars as pl

    native = frame.to_native()
    series = {c: native[c] for c in [*keys, *inputs]}
    if not all(_exact(s, c in keys) for c, s in series.items()):
        return None
    refused: tuple[type[BaseException], ...] = (*polars_errors(), TypeError, ValueError, OverflowError)
    try:
        converted = pl.DataFrame([pl.Series(c, s, nan_to_null=True) for c, s in series.items()])
    except refused:  # by polars or pyarrow: the pandas path
        return None
    result = nw.from_native(converted, eager_only=True)
    if any(result.schema[c] != schema[c] for c in series) or any(result[k].null_count() for k in keys):
        return None
    return result


def _output(column: Any, dtype: Any) -> Any:
    """The pandas path's column for an integer output (pandas ``column`` of polars ``dtype``), or ``None``.

    ``None`` when the column is already right (Float64) or cannot be made
    right: see :func:`back`.  An integer output (e.g. a count) stays int64
    unless a group is invalid (then pandas' nullable ``Int64``, as
    :func:`~conformal_frames.engine.plan.declared_dtypes`).
    """
    if dtype.is_integer():
        return column.astype("Int64") if column.isna().any() else column.astype(np.int64)
    return None


def back(result: nw.DataFrame, frame: nw.LazyFrame, keys: Sequence[str], outputs: Sequence[str]) -> nw.DataFrame | None:
    """The polars ``result`` as the pandas frame the pandas path returns for ``frame``.

    ``result`` has each output's own dtype (``keep_dtypes``): Float64 and
    integer outputs are converted (:func:`_output`); ``None`` for an output of
    another dtype.  Keys get the input's dtype back; the other columns (``n``,
    the invalid-row counts, Boolean outputs of numpy steps) are built as the
    pandas path builds them.
    """
    import pandas as pd

    native = frame.to_native()
    out = result.to_native().to_pandas()
    changed: dict[str, Any] = {}
    for c, dtype in result.schema.items():
        if c in keys:
            if out[c].dtype != native[c].dtype:
                changed[c] = out[c].astype(native[c].dtype)
        elif c in outputs:
            if dtype != nw.Float64:
                changed[c] = _output(out[c], dtype)
                if changed[c] is None:
                    return None
        elif dtype == nw.Boolean:
            changed[c] = boolean_series(c, result[c].to_list(), pd).to_native()
    for c, column in changed.items():
        out[c] = column
    return nw.from_native(out, eager_only=True)
