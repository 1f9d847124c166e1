"""Frames as every engine groups them: :func:`normalized_keys` (pandas' Arrow keys).

A leaf of the engine: the plan and the expression helpers both use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import narwhals.stable.v2 as nw

__all__ = ["normalized_keys"]


def normalized_keys(lf: nw.LazyFrame, keys: Sequence[str]) -> nw.LazyFrame:
    """``lf`` with its group keys as every engine groups them (pandas only; a new frame).

    pandas with Arrow dtypes groups a float key's ``-0.0`` apart from ``0.0``
    (every other engine forms one group: the key becomes ``x + 0.0``, which is
    ``0.0`` for both) and cannot sort an Arrow dictionary key (what
    ``polars.DataFrame.to_pandas(use_pyarrow_extension_array=True)`` makes of
    a Categorical: the key becomes its value type).  The caller's frame is
    not modified.
    """
    if not keys or not lf.implementation.is_pandas_like():
        return lf
    import pandas as pd

    native = lf.to_native()
    if not isinstance(native, pd.DataFrame):  # pragma: no cover - modin / cuDF keep their own ways
        return lf
    changed: dict[str, Any] = {}
    for k in keys:
        if k not in native.columns:
            continue  # reported by the plan's key checks
        column = native[k]
        dtype = column.dtype
        arrow = getattr(dtype, "pyarrow_dtype", None) if isinstance(dtype, pd.ArrowDtype) else None
        if arrow is not None and getattr(arrow, "value_type", None) is not None and str(arrow).startswith("dictionary"):
            changed[k] = column.astype(pd.ArrowDtype(arrow.value_type))
        elif arrow is not None and str(arrow) in ("double", "float", "halffloat"):
            changed[k] = column + 0.0  # -0.0 + 0.0 == 0.0
    if not changed:
        return lf
    copy = native.copy(deep=False)
    for k, column in changed.items():
        copy[k] = column
    return nw.from_native(copy).lazy()
