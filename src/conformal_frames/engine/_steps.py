"""The numpy and per-group steps of a compiled plan, run on its collected table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._progress import steps
from conformal_frames.engine.expr import join_keys
from conformal_frames.engine.query import _GID, _INVALID, _N, Query

__all__ = ["group_apply", "numpy_apply", "polars_lazy"]


def _valid_mask(frame: nw.DataFrame) -> np.ndarray:
    return (frame.get_column(_INVALID).to_numpy() == 0) & (frame.get_column(_N).to_numpy() > 0)


def boolean_series(name: str, values: list[bool | None], ns: Any) -> nw.Series:
    """A Boolean output column with its nulls (pandas: the nullable ``boolean`` dtype, never None as False)."""
    if ns.__name__ == "pandas":
        return nw.from_native(ns.Series(values, dtype="boolean", name=name), series_only=True)
    return nw.new_series(name, values, nw.Boolean, backend=ns)


def numpy_apply(frame: nw.DataFrame, q: Query) -> nw.DataFrame:
    """Run the numpy steps of ``q`` on the collected aggregated ``frame``."""
    cols: dict[str, np.ndarray] = {}
    for step in q.numpy_steps:
        data = {c: frame.get_column(c).to_numpy().astype(float) for c in step.inputs}
        data.update({c: v for c, v in cols.items() if c in step.inputs})
        result = step.fn(data)
        cols.update({k: np.asarray(result[k], dtype=float) for k in step.outputs})
    if not cols:
        return frame
    valid = _valid_mask(frame)
    ns = nw.get_native_namespace(frame)
    boolean = {k for s in q.numpy_steps for k in s.boolean}
    return frame.with_columns(
        *[
            boolean_series(k, [bool(x == 1.0) if ok and x == x else None for x, ok in zip(v, valid)], ns)
            if k in boolean
            else nw.new_series(k, np.where(valid, v, np.nan), nw.Float64, backend=ns).fill_nan(None)
            for k, v in cols.items()
        ]
    )


def group_apply(frame: nw.DataFrame, rows: nw.LazyFrame, q: Query) -> nw.DataFrame:
    """Run per-group numpy steps; ``frame`` is the collected, sorted table."""
    if not q.group_steps:
        return frame
    keys = q.group
    n_groups = len(frame)
    needed = sorted({r for s in q.group_steps.values() for r in s.rows})
    if keys:
        gid = frame.select(*keys).with_row_index(_GID)
        narrow = rows.select(*keys, *needed).collect()
        narrow = (
            join_keys(narrow, gid, keys, how="inner") if len(narrow) else narrow.with_columns(nw.lit(0).alias(_GID))
        )
        group_index = narrow.get_column(_GID).to_numpy().astype(np.int64)
    else:
        narrow = rows.select(*needed).collect()
        group_index = np.zeros(len(narrow), dtype=np.int64)
    data = {c: narrow.get_column(c).to_numpy().astype(float) for c in needed}
    ns = nw.get_native_namespace(frame)
    new = []
    valid = _valid_mask(frame)
    for step in q.group_steps.values():
        with steps(step.what, 1) as tick:  # a step of the open progress bar, if any
            values = np.asarray(step.fn(group_index, n_groups, {c: data[c] for c in step.rows}), dtype=float)
            tick(1)
        new.append(nw.new_series(step.output, np.where(valid, values, np.nan), nw.Float64, backend=ns).fill_nan(None))
    return frame.with_columns(*new)


def polars_lazy(
    table: nw.LazyFrame,
    run: Callable[[nw.DataFrame], nw.DataFrame],
    *,
    keys: dict[str, str],
    names: list[str],
    booleans: set[str],
    counts: list[str],
) -> nw.LazyFrame:
    """``run`` on the collected polars ``table``, kept lazy with ``map_batches``.

    The output: the ``keys`` (public name -> internal column of ``table``),
    the outputs ``names`` (their dtype in ``table``, else Float64; Boolean
    for ``booleans``) and the Int64 ``counts``.
    """
    import polars as pl  # only reached for polars input

    native = table.to_native()
    schema = native.collect_schema()
    out_schema = {k: schema[ik] for k, ik in keys.items()}
    # outputs already in the table keep their dtype (e.g. a worst-group label); numpy outputs are Float64
    out_schema.update({name: schema.get(name, pl.Float64) for name in names})
    out_schema.update(dict.fromkeys(booleans, pl.Boolean))
    out_schema.update(dict.fromkeys(counts, pl.Int64))

    def batch(df: Any) -> Any:
        return run(nw.from_native(df, eager_only=True)).to_native()

    return nw.from_native(native.map_batches(batch, schema=pl.Schema(out_schema), streamable=False))
