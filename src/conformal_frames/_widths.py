"""Aggregated tables shared by the report and the plots; width quantiles per group.

Used by the report and by :mod:`conformal_frames.plots` (this module imports
neither of them): collecting an aggregated table, a column as floats, and
the width quantiles of the width-distribution plot.  Only aggregated tables are
collected: exact quantiles (a per-group aggregation), or with bounded
memory quantiles interpolated in a fixed-size histogram per group.
"""

from __future__ import annotations

from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames import engine
from conformal_frames.engine import aggregate, sort_result

__all__ = ["WIDTH_HISTOGRAM_BINS", "WIDTH_QUANTILES", "collect", "floats", "widths_histogram", "widths_query"]

#: width quantiles collected per group for the width-distribution plot
WIDTH_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
#: histogram bins of the width quantiles with ``bounded_memory=True``
WIDTH_HISTOGRAM_BINS = 512

_W = "__cf_w"


def _qname(q: float) -> str:
    return f"q{round(q * 100):02d}"


def collect(frame: nw.DataFrame | nw.LazyFrame) -> nw.DataFrame:
    """Collect an aggregated narwhals frame (polars' streaming engine for polars)."""
    if isinstance(frame, nw.DataFrame):
        return frame
    if frame.implementation.is_polars():
        return frame.collect(engine="streaming")
    try:
        import polars  # noqa: F401
    except ImportError:  # pragma: no cover - depends on the environment
        return frame.collect()
    return frame.collect(backend="polars")


def _as_float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):  # None, pd.NA
        return np.nan


def floats(t: nw.DataFrame, name: str) -> np.ndarray:
    """A column of an aggregated table as float64 (null, pd.NA -> NaN)."""
    return np.array([_as_float(v) for v in t.get_column(name).to_list()], dtype=float)


def _width_rows(frame: Any, lo: str, hi: str, keys: list[str]) -> Any:
    w = (nw.col(hi).cast(nw.Float64) - nw.col(lo).cast(nw.Float64)).alias(_W)
    return frame.select(*[nw.col(k) for k in keys], w).filter(nw.col(_W).is_finite() & (nw.col(_W) >= 0))


def widths_query(frame: Any, lo: str, hi: str, keys: list[str]) -> Any:
    """Lazy per-group width quantiles ``q05 .. q95``, ``min``, ``max``, ``mean``."""
    rows = _width_rows(frame, lo, hi, keys)
    aggs = [nw.col(_W).quantile(q, interpolation="linear").alias(_qname(q)) for q in WIDTH_QUANTILES]
    aggs += [nw.col(_W).min().alias("min"), nw.col(_W).max().alias("max"), nw.col(_W).mean().alias("mean")]
    out = aggregate(rows, keys, aggs)
    return sort_result(out, *keys)


def _histogram_counts(frame: Any, lo: str, hi: str, keys: list[str], bins: int) -> nw.DataFrame:
    """Per (group, bin) counts of ``bins`` equal-width bins on each group's ``[min, max]``."""
    rows = _width_rows(frame, lo, hi, keys)
    stats_aggs = [nw.col(_W).min().alias("min"), nw.col(_W).max().alias("max"), nw.col(_W).mean().alias("mean")]
    stats = aggregate(rows, keys, stats_aggs)
    if isinstance(stats, nw.LazyFrame) and stats.implementation.is_polars():
        # a small collected table joins without buffering the rows (measured: the
        # lazy self-join made polars' streaming engine hold O(rows) memory)
        stats = nw.from_native(stats.collect(engine="streaming").to_native().lazy())
    joined = engine.join_keys(rows, stats, keys, how="inner") if keys else rows.join(stats, how="cross")
    span = nw.col("max") - nw.col("min")
    pos = nw.when(span > 0).then((nw.col(_W) - nw.col("min")) / span * bins).otherwise(nw.lit(0.0))
    b = pos.floor().clip(lower_bound=0, upper_bound=bins - 1).cast(nw.Int64).alias("__b")
    counts = joined.with_columns(b).group_by(*keys, "__b", "min", "max", "mean").agg(nw.len().alias("__c"))
    table = collect(counts)
    return table.sort(*keys, "__b") if keys else table.sort("__b")


def _quantiles(counts: np.ndarray, lo_w: float, hi_w: float) -> list[float]:
    """Linear interpolation inside the bin where the cumulative count crosses ``q * n``."""
    bins = len(counts)
    edges = np.linspace(lo_w, hi_w, bins + 1)
    cum = np.concatenate([[0.0], np.cumsum(counts)])
    out = []
    for q in WIDTH_QUANTILES:
        target = q * cum[-1]
        i = int(np.clip(np.searchsorted(cum, target, side="left") - 1, 0, bins - 1))
        frac = (target - cum[i]) / counts[i] if counts[i] else 0.0
        out.append(float(edges[i] + frac * (edges[i + 1] - edges[i])))
    return out


def widths_histogram(frame: Any, lo: str, hi: str, keys: list[str], bins: int = WIDTH_HISTOGRAM_BINS) -> nw.DataFrame:
    """Width quantiles from a per-group histogram: memory independent of the rows.

    Two lazy aggregations joined in one plan: per group ``min``, ``max``,
    ``mean`` and count; then counts per (group, bin) of ``bins`` equal-width
    bins on ``[min, max]``.  Quantiles are interpolated linearly inside the
    bin where the cumulative count crosses ``q * n``: exact at the ends,
    within ``(max - min) / bins`` elsewhere.
    """
    table = _histogram_counts(frame, lo, hi, keys, bins)
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in table.iter_rows(named=True):
        g = groups.setdefault(
            tuple(r[k] for k in keys),
            {**{k: r[k] for k in keys}, "min": r["min"], "max": r["max"], "mean": r["mean"], "counts": np.zeros(bins)},
        )
        g["counts"][r["__b"]] += r["__c"]
    names = [_qname(q) for q in WIDTH_QUANTILES]
    out: dict[str, list[Any]] = {k: [] for k in [*keys, *names, "min", "max", "mean"]}
    for g in groups.values():
        for k in keys:
            out[k].append(g[k])
        for name, value in zip(names, _quantiles(g["counts"], float(g["min"]), float(g["max"]))):
            out[name].append(value)
        out["min"].append(float(g["min"]))
        out["max"].append(float(g["max"]))
        out["mean"].append(float(g["mean"]))
    schema = {k: table.schema[k] for k in keys} | {c: nw.Float64 for c in out if c not in keys}
    return nw.from_dict(out, schema=schema, backend=nw.get_native_namespace(table))
