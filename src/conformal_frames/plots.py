"""Plots of conformal and calibration metrics (optional extra ``[plot]``).

Every function takes a frame (any backend narwhals supports) and either the
column names of the raw data (``y=``, ``lo=``, ``hi=``, ...), in which case the
needed aggregates are computed with the library first, or an already
aggregated table (a :class:`~conformal_frames.reporting.Report` table, or the
output of the matching metric).  Each accepts ``ax=`` (an existing matplotlib
Axes) and returns the Axes it drew on (``ax.figure`` is the Figure).  Only
aggregated tables are collected, never the raw rows.

Segment axes are horizontal (one row per segment) and the figure height grows
with the number of segments.  At most ``max_segments`` segments are drawn:
the worst ones (lowest by the under-coverage test, or the lowest coverage),
in key order, plus one summary row giving the range of the others.
Error bars are clipped so that they never cross their estimate (a bound one
rounding error on the wrong side of it draws as zero length).

This module never imports the report; :meth:`Report.figures` calls
:func:`report_figures` with the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames import engine
from conformal_frames._renames import renamed
from conformal_frames._widths import WIDTH_QUANTILES, collect, floats, widths_query

__all__ = [
    "corp_reliability_diagram",
    "coverage_by_segment",
    "coverage_over_time",
    "coverage_sequence",
    "coverage_vs_level",
    "pit_histogram",
    "quantile_calibration",
    "reliability_diagram",
    "reliability_table",
    "report_figures",
    "ssc_bars",
    "width_distribution",
]

#: segments drawn by default in each segment plot
MAX_SEGMENTS = 50
#: lines coloured in a line plot by default (matplotlib's ten colours), in key order; the others grey
MAX_COLOURS = 10

_NOMINAL = "#444444"
_FLAG = "#c0392b"
#: significantly above the target (intervals or sets too wide)
_OVER = "#d68910"
_REST = "0.6"


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
        msg = "conformal_frames.plots needs matplotlib: pip install 'conformal-frames[plot]'"
        raise ImportError(msg) from exc
    return plt


def _axes(ax: Any, n_rows: int = 0, *, width: float = 7.0, base: float = 2.2, per_row: float = 0.28) -> Any:
    if ax is not None:
        return ax
    plt = _pyplot()
    height = max(3.5, base + per_row * n_rows) if n_rows else 4.5
    _, ax = plt.subplots(figsize=(width, height), layout="constrained")
    return ax


def _legend(ax: Any) -> None:
    """Legend outside the axes (right), so it never hides data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, borderaxespad=0.0)


def _eager(frame: Any) -> nw.DataFrame:
    """A narwhals DataFrame of an aggregated table (collected if lazy)."""
    f = frame if isinstance(frame, (nw.DataFrame, nw.LazyFrame)) else nw.from_native(frame)
    return collect(f) if isinstance(f, nw.LazyFrame) else f


def _labels(t: nw.DataFrame, keys: list[str]) -> list[str]:
    if not keys:
        return ["all rows"] * len(t)
    cols = [t.get_column(k).to_list() for k in keys]
    return [" / ".join(str(v) for v in vals) for vals in zip(*cols)]


def _named(t: nw.DataFrame, keys: list[str]) -> list[str]:
    """Legend labels: ``key=value`` (``region=r3, model=m2``), so a numeric key reads as itself."""
    if not keys:
        return ["all rows"] * len(t)
    cols = [t.get_column(k).to_list() for k in keys]
    return [", ".join(f"{k}={v}" for k, v in zip(keys, vals)) for vals in zip(*cols)]


def _sorted(t: nw.DataFrame, seg: list[str], *within: str) -> nw.DataFrame:
    """Rows by segment, the segments in the order they first appear, sorted by ``within`` inside each.

    With a categorical key, the segments keep the table's order: the library's
    tables come sorted by their keys in the keys' own order (an ordered
    categorical keeps its category order), which sorting again could lose (a
    categorical may sort as strings).  Other keys sort by value.
    """
    if not seg:
        return t.sort(*within) if within else t
    if not any(t.schema[k] == nw.Categorical or t.schema[k] == nw.Enum for k in seg):
        return t.sort(*seg, *within)
    labels = _labels(t, seg)
    first: dict[str, int] = {}
    for i, g in enumerate(labels):
        first.setdefault(g, i)
    order = "__cf_segment_order"
    rank = nw.new_series(order, [first[g] for g in labels], nw.Int64, backend=nw.get_native_namespace(t))
    return t.with_columns(rank).sort(order, *within).drop(order)


def _need(t: nw.DataFrame, cols: Sequence[str], hint: str) -> None:
    missing = [c for c in cols if c not in t.columns]
    if missing:
        available = ", ".join(repr(c) for c in t.columns)
        msg = f"missing column(s) {', '.join(map(repr, missing))} ({hint}); available columns: {available}"
        raise ValueError(msg)


def _split_level(confidence_level: float | str | None) -> tuple[float | None, str | None]:
    if isinstance(confidence_level, str):
        return None, confidence_level
    return (None if confidence_level is None else float(confidence_level)), None


def _bar_errors(est: np.ndarray, low: np.ndarray, high: np.ndarray) -> list[np.ndarray]:
    """Error-bar lengths, never negative (a bound 1 ulp on the wrong side draws as zero)."""
    below = np.nan_to_num(est - low, nan=0.0)
    above = np.nan_to_num(high - est, nan=0.0)
    return [np.clip(below, 0.0, None), np.clip(above, 0.0, None)]


# ---------------------------------------------------------------------------
# at most max_segments segments
# ---------------------------------------------------------------------------
def _cap(labels: list[str], ranked: list[str], max_segments: int | None) -> tuple[list[str], list[str]]:
    """(segments drawn in their original order, the others)."""
    uniq = list(dict.fromkeys(labels))
    if max_segments is None or len(uniq) <= max_segments:
        return uniq, []
    chosen = set(ranked[:max_segments])
    return [g for g in uniq if g in chosen], [g for g in uniq if g not in chosen]


def _nan_stat(fn: Any, values: np.ndarray, empty: float = float("nan")) -> float:
    """``fn`` (``np.nanmax``, ``np.nanmin``, ``np.nanmean``) of ``values``; ``empty`` when every value is NaN.

    numpy warns ("All-NaN slice", "Mean of empty slice") on a group whose
    values are all null (e.g. a group with invalid rows): no warning here.
    """
    values = np.asarray(values, dtype=float)
    return float(fn(values)) if (~np.isnan(values)).any() else empty


def _runs(labels: list[str]) -> dict[str, slice]:
    """Each label's rows, for a table sorted by its segment columns (contiguous runs)."""
    out: dict[str, slice] = {}
    start = 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            out[labels[start]] = slice(start, i)
            start = i
    return out


def _rank(labels: list[str], *scores: np.ndarray) -> list[str]:
    """Segments ordered by their smallest score tuple (NaN last), worst first."""
    lab = np.array(labels, dtype=object)
    best: dict[str, tuple[float, ...]] = {}
    for i, g in enumerate(lab):
        s = tuple(float(np.nan_to_num(v[i], nan=np.inf)) for v in scores)
        if g not in best or s < best[g]:
            best[g] = s
    return sorted(best, key=lambda g: best[g])


#: each group's colour while a small-multiples figure is drawn: the same group, the same colour in every panel
_LINE_COLOURS: ContextVar[dict[str, str] | None] = ContextVar("_LINE_COLOURS", default=None)


def _colour(label: str, i: int) -> str:
    """The colour of the ``i``-th coloured line (``label``): the figure's own when a small multiple fixes it."""
    fixed = _LINE_COLOURS.get()
    return fixed[label] if fixed and label in fixed else f"C{i % 10}"


def _highlighted(runs: dict[str, slice], badness: dict[str, float], highlight: int) -> list[str]:
    """The ``highlight`` groups with the largest ``badness``, in key order (the legend's and the colours' order)."""
    if len(runs) <= highlight:
        return list(runs)
    worst = set(sorted(runs, key=lambda g: -badness[g])[:highlight])
    return [g for g in runs if g in worst]


def _rest_row(ax: Any, row: int, values: np.ndarray, n_rest: int, what: str) -> None:
    """A grey line over the range of ``values`` of the segments not drawn."""
    finite = values[np.isfinite(values)]
    if finite.size:
        ax.hlines(row, finite.min(), finite.max(), color=_REST, lw=4, label=f"range of the other {n_rest:,} {what}")


def _segment_axis(ax: Any, shown: list[str], n_rest: int, seg: list[str]) -> None:
    ticks = [*shown, *([f"({n_rest:,} other segments)"] if n_rest else [])]
    ax.set_yticks(range(len(ticks)), ticks, fontsize=8 if len(ticks) > 25 else 9)
    ax.set_ylim(len(ticks) - 0.5, -0.5)
    ax.set_ylabel(" / ".join(seg) if seg else "")


def _capped_title(title: str, shown: list[str], n_rest: int, why: str) -> str:
    return f"{title}\n({len(shown)} of {len(shown) + n_rest:,} segments: {why})" if n_rest else title


# ---------------------------------------------------------------------------
# coverage by segment
# ---------------------------------------------------------------------------
def _coverage_table(data: Any, y: str | None, lo: str | None, hi: str | None, keys: list[str]) -> nw.DataFrame:
    if y is not None or lo is not None or hi is not None:
        if None in (y, lo, hi):
            msg = "give all of y=, lo=, hi= (raw rows) or none (an aggregated coverage table)"
            raise ValueError(msg)
        from conformal_frames.metrics.intervals import coverage

        return _eager(engine.compute(data, [coverage(y, lo, hi)], keys or None))  # type: ignore[arg-type]
    t = _eager(data)
    _need(t, ["coverage", "coverage_ci_low", "coverage_ci_high"], "pass y=, lo=, hi= for raw rows")
    return t


def _targets(t: nw.DataFrame, target: float | None, level: str | None) -> np.ndarray:
    if level is not None:
        return floats(t, level)
    if target is not None:
        return np.full(len(t), target)
    if "target" in t.columns:
        return floats(t, "target")
    return np.full(len(t), np.nan)


def _level_colors(levels: Sequence[float]) -> dict[float, Any]:
    cmap = _pyplot().get_cmap("viridis")
    n = len(levels)
    return {lv: cmap(0.15 + 0.7 * i / max(n - 1, 1)) for i, lv in enumerate(levels)}


def _coverage_rank(t: nw.DataFrame, labels: list[str], target: np.ndarray) -> list[str]:
    """Worst first: flagged, then the smallest adjusted p-value, then coverage - target."""
    m = len(t)
    flag = _flags(t)
    p = floats(t, "pvalue_adjusted") if "pvalue_adjusted" in t.columns else np.ones(m)
    gap = floats(t, "coverage") - np.nan_to_num(target, nan=0.0)
    return _rank(labels, np.where(flag, 0.0, 1.0), p, gap)


def _flags(t: nw.DataFrame, column: str = "under_covered") -> np.ndarray:
    if column not in t.columns:
        return np.zeros(len(t), bool)
    # True, 1 or 1.0; a null flag (None, pd.NA of a nullable column) is not flagged
    return np.array(
        [v is True or (isinstance(v, (int, float, np.number)) and v == 1) for v in t.get_column(column).to_list()], bool
    )


def _draw_coverage(
    ax: Any, sel: np.ndarray, ypos: np.ndarray, arrays: dict[str, np.ndarray], color: Any, name: str
) -> None:
    cov, low, high, flag, over = arrays["cov"], arrays["low"], arrays["high"], arrays["flag"], arrays["over"]
    kinds = ((~flag & ~over, color, name), (flag, _FLAG, None), (over & ~flag, _OVER, None))
    for which, c, label in kinds:
        s = sel & which
        if s.any():
            ax.errorbar(
                cov[s],
                ypos[s],
                xerr=_bar_errors(cov[s], low[s], high[s]),
                fmt="o",
                ms=4,
                capsize=2,
                color=c,
                ecolor=c,
                label=label,
                lw=1,
            )


def _coverage_plot(
    t: nw.DataFrame, seg: list[str], level: str | None, target: np.ndarray, max_segments: int | None, ax: Any
) -> Any:
    labels = _labels(t, seg)
    shown, rest = _cap(labels, _coverage_rank(t, labels, target), max_segments)
    pos = {lab: i for i, lab in enumerate(shown)}
    arrays = {"cov": floats(t, "coverage"), "low": floats(t, "coverage_ci_low")}
    arrays |= {"high": floats(t, "coverage_ci_high"), "flag": _flags(t), "over": _flags(t, "over_covered")}
    drawn = np.array([lab in pos for lab in labels], bool)
    ax = _axes(ax, len(shown) + bool(rest))
    levels = sorted(set(target[~np.isnan(target)].tolist())) if level is not None else []
    colors = _level_colors(levels) if levels else {}
    offsets = {lv: (i - (len(levels) - 1) / 2) * 0.22 for i, lv in enumerate(levels)}
    ypos = np.array([pos.get(lab, -1) + offsets.get(tv, 0.0) for lab, tv in zip(labels, target)])
    for lv in levels or [None]:
        sel = drawn & (target == lv if lv is not None else True)
        _draw_coverage(ax, sel, ypos, arrays, colors.get(lv, "C0"), f"level {lv:g}" if lv is not None else "coverage")
        if lv is not None:
            ax.axvline(lv, color=colors[lv], ls="--", lw=1)
    if not levels:
        for i, tv in enumerate(sorted(set(target[~np.isnan(target)].tolist()))):
            ax.axvline(tv, color=_NOMINAL, ls="--", lw=1, label="nominal" if i == 0 else None)
    if arrays["flag"][drawn].any():
        ax.plot([], [], "o", color=_FLAG, ms=4, label="significantly below target")
    if arrays["over"][drawn].any():
        ax.plot([], [], "o", color=_OVER, ms=4, label="significantly above target (too wide)")
    if rest:
        _rest_row(ax, len(shown), arrays["cov"][~drawn], len(rest), "segments")
    _segment_axis(ax, shown, len(rest), seg)
    ax.set_xlabel("coverage (with confidence interval)")
    ax.set_title(_capped_title("Coverage by segment", shown, len(rest), "the lowest by the test"))
    ax.grid(axis="x", alpha=0.3)
    _legend(ax)
    return ax


@renamed(level="confidence_level")
def coverage_by_segment(
    data: Any,
    *,
    by: str | Sequence[str] | None = None,
    y: str | None = None,
    lo: str | None = None,
    hi: str | None = None,
    confidence_level: float | str | None = None,
    max_segments: int | None = MAX_SEGMENTS,
    ax: Any = None,
) -> Any:
    """Coverage per segment with its confidence interval and the nominal line.

    One row per segment (horizontal), the Wilson interval as an error bar,
    the nominal coverage as a dashed vertical line.  With
    ``confidence_level=`` naming a column of nominal levels, each level has
    its own colour and nominal line.  Segments flagged in an ``under_covered``
    column (a report table) are drawn in red, those in an ``over_covered``
    column (too wide) in orange.

    Parameters
    ----------
    data
        Raw rows (give ``y, lo, hi``) or a table with ``coverage``,
        ``coverage_ci_low``, ``coverage_ci_high`` per group.
    by : str or list of str
        Segment columns (several are joined with `` / `` in the labels).
    confidence_level : float or str, optional
        Nominal coverage, or the column of nominal levels; else a ``target``
        column when there is one.
    max_segments : int or None, default 50
        Segments drawn: the lowest by the test (flagged first, then the
        smallest adjusted p-value, then coverage minus target), in key order,
        plus one grey row with the coverage range of the others.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    seg = engine.as_keys(by)
    target, level = _split_level(confidence_level)
    keys = [*seg, *([level] if level is not None else [])]
    t = _coverage_table(data, y, lo, hi, keys)
    if level is not None:
        t = _sorted(t, seg, level)
    return _coverage_plot(t, seg, level, _targets(t, target, level), max_segments, ax)


# ---------------------------------------------------------------------------
# coverage vs nominal level
# ---------------------------------------------------------------------------
def _grey_lines(ax: Any, xs: list[np.ndarray], ys: list[np.ndarray], label: str) -> None:
    """Many background lines as one collection (fast with thousands of groups)."""
    from matplotlib.collections import LineCollection

    if xs:
        segs = [np.column_stack([x, y]) for x, y in zip(xs, ys)]
        ax.add_collection(LineCollection(segs, colors=_REST, linewidths=0.8, zorder=1, label=label))
        ax.autoscale_view()


@renamed(level="confidence_level")
def coverage_vs_level(
    data: Any,
    *,
    confidence_level: str = "level",
    by: str | Sequence[str] | None = None,
    y: str | None = None,
    lo: str | None = None,
    hi: str | None = None,
    highlight: int = MAX_COLOURS,
    ax: Any = None,
) -> Any:
    """Empirical coverage against the nominal level (levels as data).

    ``confidence_level`` names the column of nominal levels (long format, one
    row per level and observation).  One line per group with error bars; the
    diagonal is perfect calibration of the intervals.  With more than
    ``highlight`` groups, the ``highlight`` groups furthest below their
    level are coloured and labelled and the others drawn in grey, so the
    legend stays readable.

    Returns
    -------
    matplotlib.axes.Axes
    """
    seg, level = engine.as_keys(by), confidence_level
    t = _sorted(_coverage_table(data, y, lo, hi, [*seg, level]), seg, level)
    ax = _axes(ax)
    labels = _named(t, seg)
    lv, cov = floats(t, level), floats(t, "coverage")
    low, high = floats(t, "coverage_ci_low"), floats(t, "coverage_ci_high")
    runs = _runs(labels)
    shown = _rank(labels, cov - lv)[:highlight]
    grid = np.array(sorted(set(lv.tolist())))
    ends = [grid.min() - 0.02, grid.max() + 0.02]
    ax.plot(ends, ends, ls="--", color=_NOMINAL, lw=1, label="nominal (y = x)")
    others = [g for g in runs if g not in shown]
    _grey_lines(ax, [lv[runs[g]] for g in others], [cov[runs[g]] for g in others], f"other groups ({len(others)})")
    for i, g in enumerate(g for g in runs if g in shown):
        s = runs[g]
        ax.errorbar(
            lv[s],
            cov[s],
            yerr=_bar_errors(cov[s], low[s], high[s]),
            marker="o",
            ms=4,
            capsize=2,
            lw=1.2,
            color=_colour(g, i),
            label=g if seg else "coverage",
            zorder=2,
        )
    ax.set_xlabel(f"nominal level ({level})")
    ax.set_ylabel("empirical coverage")
    ax.set_title("Coverage vs nominal level" + (f" ({len(shown)} lowest groups highlighted)" if others else ""))
    ax.grid(alpha=0.3)
    _legend(ax)
    return ax


# ---------------------------------------------------------------------------
# size-stratified coverage
# ---------------------------------------------------------------------------
def _ssc_table(data: Any, y: str | None, lo: str | None, hi: str | None, n_bins: int, seg: list[str]) -> nw.DataFrame:
    if y is None and lo is None and hi is None:
        t = _eager(data)
        cov_col = "coverage" if "coverage" in t.columns else "ssc"
        _need(t, ["bin", cov_col, "n"], "pass y=, lo=, hi= for raw rows")
        return t.rename({cov_col: "coverage"}) if cov_col != "coverage" else t
    if None in (y, lo, hi):
        msg = "give all of y=, lo=, hi= (raw rows) or none (a long ssc table)"
        raise ValueError(msg)
    from conformal_frames.metrics.intervals import ssc

    metric = ssc(y, lo, hi, n_bins=n_bins)  # type: ignore[arg-type]
    res = engine.compute(data, [metric], seg or None)
    t = _eager(metric.to_long(res if isinstance(res, nw.LazyFrame) else res.lazy(), seg))
    return t.rename({metric.output_name: "coverage"})


def _ssc_plot(
    t: nw.DataFrame, seg: list[str], target: float | None, ranked: list[str] | None, max_segments: int | None, ax: Any
) -> Any:
    t = _sorted(t, seg, "bin")
    labels = _labels(t, seg)
    cov, b = floats(t, "coverage"), np.array(t.get_column("bin").to_list())
    shown, rest = _cap(labels, ranked if ranked is not None else _rank(labels, cov), max_segments)
    pos = {lab: i for i, lab in enumerate(shown)}
    drawn = np.array([lab in pos for lab in labels], bool)
    bins = sorted(set(b.tolist()))
    ax = _axes(ax, (len(shown) + bool(rest)) if seg else 0, per_row=0.06 * len(bins) + 0.1)
    height, cmap = 0.8 / len(bins), _pyplot().get_cmap("Blues")
    for j, bn in enumerate(bins):
        s = drawn & (b == bn)
        yy = np.array([pos[lab] for lab, keep in zip(labels, s) if keep]) + (j - (len(bins) - 1) / 2) * height
        name = f"width bin {bn}" + (" (narrowest)" if j == 0 else " (widest)" if j == len(bins) - 1 else "")
        ax.barh(yy, cov[s], height=height * 0.95, color=cmap(0.35 + 0.55 * j / max(len(bins) - 1, 1)), label=name)
    if target is not None:
        ax.axvline(target, color=_NOMINAL, ls="--", lw=1, label=f"nominal {target:g}")
    if rest:
        _rest_row(ax, len(shown), cov[~drawn], len(rest), "segments (all bins)")
    _segment_axis(ax, shown, len(rest), seg)
    ax.set_xlim(0.0, 1.0)  # bars from 0: their lengths compare as the coverages do
    ax.set_xlabel("coverage within width bin")
    why = "the lowest coverage in a bin" if ranked is None else "the lowest by the test"
    ax.set_title(_capped_title("Size-stratified coverage", shown, len(rest), why))
    ax.grid(axis="x", alpha=0.3)
    _legend(ax)
    return ax


@renamed(num_bins="n_bins")
def ssc_bars(
    data: Any,
    *,
    by: str | Sequence[str] | None = None,
    y: str | None = None,
    lo: str | None = None,
    hi: str | None = None,
    n_bins: int = 3,
    confidence_level: float | None = None,
    max_segments: int | None = MAX_SEGMENTS,
    ax: Any = None,
) -> Any:
    """Size-stratified coverage: coverage per width bin, bars per segment.

    ``data`` is raw rows (give ``y, lo, hi``: computed with
    :func:`conformal_frames.ssc`) or a long table ``keys, bin, coverage, n``
    (the output of ``ssc`` or ``report.frame("ssc")``).  Bin 0 holds the
    narrowest intervals; the bars start at 0.  The nominal level is a dashed line.  At most
    ``max_segments`` segments: those with the lowest coverage in a bin.

    Returns
    -------
    matplotlib.axes.Axes
    """
    seg = engine.as_keys(by)
    t = _ssc_table(data, y, lo, hi, n_bins, seg)
    return _ssc_plot(t, seg, confidence_level, None, max_segments, ax)


# ---------------------------------------------------------------------------
# width distribution
# ---------------------------------------------------------------------------
_QUANTILE_COLUMNS = [f"q{round(q * 100):02d}" for q in WIDTH_QUANTILES]


def _width_plot(t: nw.DataFrame, seg: list[str], ranked: list[str] | None, max_segments: int | None, ax: Any) -> Any:
    labels = _labels(t, seg)
    shown, rest = _cap(labels, ranked if ranked is not None else labels, max_segments)
    drawn = {lab: i for i, lab in enumerate(labels) if lab in set(shown)}
    cols = [floats(t, k) for k in (*_QUANTILE_COLUMNS, "mean")]
    ax = _axes(ax, (len(shown) + bool(rest)) if seg else 0)
    stats = [
        dict(zip(("whislo", "q1", "med", "q3", "whishi", "mean"), (float(c[drawn[lab]]) for c in cols)))
        | {"label": lab, "fliers": []}
        for lab in shown
    ]
    ax.bxp(
        stats,
        positions=range(len(shown)),
        orientation="horizontal",
        showmeans=True,
        widths=0.6,
        patch_artist=True,
        boxprops={"facecolor": "#cfe2f3"},
        medianprops={"color": "#1f4e79"},
        meanprops={"marker": "D", "markerfacecolor": "#e67e22", "markeredgecolor": "#e67e22", "markersize": 4},
    )
    if rest:
        others = np.array([i for i, lab in enumerate(labels) if lab not in drawn], dtype=int)
        _rest_row(ax, len(shown), cols[2][others], len(rest), "segments (median widths)")
        _legend(ax)
    _segment_axis(ax, shown, len(rest), seg)
    ax.set_xlabel("interval width (box: 25-75 %, whiskers: 5-95 %, diamond: mean)")
    why = "the lowest by the test" if ranked is not None else "the first in key order"
    ax.set_title(_capped_title("Interval width by segment", shown, len(rest), why))
    ax.grid(axis="x", alpha=0.3)
    return ax


def width_distribution(
    data: Any,
    *,
    by: str | Sequence[str] | None = None,
    lo: str | None = None,
    hi: str | None = None,
    max_segments: int | None = MAX_SEGMENTS,
    ax: Any = None,
) -> Any:
    """Distribution of interval widths per segment (box plot from quantiles).

    The boxes are drawn from per-group quantiles computed in the engine
    (5 %, 25 %, 50 %, 75 %, 95 %: whiskers at 5 % and 95 %), so the raw rows
    are never collected; the mean is a diamond.  ``data`` is raw rows (give
    ``lo, hi``) or a table with ``q05, q25, q50, q75, q95`` and ``mean`` per
    group (``report.frame("widths")``).  At most ``max_segments`` segments
    (the first in key order; in a report, the lowest by the test) and a grey
    row with the range of the others' medians.

    Returns
    -------
    matplotlib.axes.Axes
    """
    seg = engine.as_keys(by)
    if lo is not None or hi is not None:
        if None in (lo, hi):
            msg = "give both lo= and hi= (raw rows) or neither (a quantile table)"
            raise ValueError(msg)
        f = data if isinstance(data, (nw.DataFrame, nw.LazyFrame)) else nw.from_native(data)
        t = _eager(widths_query(f, lo, hi, seg))  # type: ignore[arg-type]
    else:
        t = _eager(data)
        _need(t, [*_QUANTILE_COLUMNS, "mean"], "pass lo=, hi= for raw rows")
    return _width_plot(t, seg, None, max_segments, ax)


# ---------------------------------------------------------------------------
# reliability diagram
# ---------------------------------------------------------------------------
#: column names accepted for each quantity of a reliability table
_REL_COLUMNS = {
    "count": ("count", "n"),
    "score": ("mean_score", "score_mean", "avg_score", "confidence"),
    "freq": ("observed", "observed_frequency", "frequency", "freq", "mean_label", "accuracy"),
    "low": ("ci_low", "observed_ci_low", "frequency_ci_low", "lower"),
    "high": ("ci_high", "observed_ci_high", "frequency_ci_high", "upper"),
}


def _pick(t: nw.DataFrame, what: str) -> str | None:
    return next((c for c in _REL_COLUMNS[what] if c in t.columns), None)


@renamed(label="y", num_bins="n_bins", ci="ci_level")
def reliability_table(
    data: Any,
    *,
    y: str,
    score: str,
    n_bins: int = 10,
    by: str | Sequence[str] | None = None,
    ci_level: float = 0.95,
) -> Any:
    """The reliability table behind :func:`reliability_diagram`.

    :func:`conformal_frames.reliability` per group: per (group, non-empty
    bin) ``mean_score``, ``frequency`` (mean of ``y``), its Wilson interval
    ``frequency_ci_low``/``frequency_ci_high`` at confidence ``ci_level``
    and ``n``.

    Returns
    -------
    frame
        Native frame of the input's backend (collected if lazy).
    """
    from conformal_frames.metrics.calibration import reliability

    seg = engine.as_keys(by)
    metric = reliability(y, score, n_bins=n_bins, ci_level=ci_level)
    return nw.to_native(_eager(engine.evaluate_one(data, metric, seg or None)))


def _reliability_lines(ax: Any, t: nw.DataFrame, cols: dict[str, str | None], seg: list[str], highlight: int) -> None:
    labels = _named(t, seg)
    xs, ys = floats(t, cols["score"]), floats(t, cols["freq"])  # type: ignore[arg-type]
    counts = floats(t, cols["count"]) if cols["count"] else np.ones(len(t))
    runs = _runs(labels)
    err = counts * np.abs(ys - xs)
    gap = {g: float(np.nansum(err[s]) / np.nansum(counts[s])) for g, s in runs.items()}
    shown = _highlighted(runs, gap, highlight)
    others = [g for g in runs if g not in shown]
    _grey_lines(ax, [xs[runs[g]] for g in others], [ys[runs[g]] for g in others], f"other groups ({len(others)})")
    band = (floats(t, cols["low"]), floats(t, cols["high"])) if cols["low"] and cols["high"] else None
    for i, g in enumerate(shown):
        s, color = runs[g], _colour(g, i)
        if band is not None:
            ax.fill_between(xs[s], band[0][s], band[1][s], color=color, alpha=0.18, lw=0)
        ax.plot(xs[s], ys[s], marker="o", ms=4, color=color, lw=1.2, label=g if seg else "observed frequency")


@renamed(label="y", num_bins="n_bins")
def reliability_diagram(
    data: Any,
    *,
    y: str | None = None,
    score: str | None = None,
    n_bins: int = 10,
    by: str | Sequence[str] | None = None,
    highlight: int = MAX_COLOURS,
    ax: Any = None,
) -> Any:
    """Reliability diagram: observed frequency against mean score per bin.

    Each bin is a point at (mean score, observed frequency) with its binomial
    interval as a band; the diagonal is perfect calibration.  With ``by=``,
    one line per group (the ``highlight`` groups with the largest count-
    weighted calibration gap are coloured, the others grey).

    ``data`` is raw rows (give ``y`` (0/1) and ``score``; see
    :func:`reliability_table`) or a reliability table.

    Returns
    -------
    matplotlib.axes.Axes
    """
    seg = engine.as_keys(by)
    if y is not None and score is not None:
        t = _eager(reliability_table(data, y=y, score=score, n_bins=n_bins, by=seg or None))
    elif y is not None or score is not None:
        msg = "give both y= and score= (raw rows) or neither (a reliability table)"
        raise ValueError(msg)
    else:
        t = _eager(data)
    cols = {k: _pick(t, k) for k in _REL_COLUMNS}
    missing = [
        f"{k} (one of {', '.join(v)})" for k, v in _REL_COLUMNS.items() if cols[k] is None and k in ("score", "freq")
    ]
    if missing:
        _need(t, missing, "pass y=, score= for raw rows")
    t = _sorted(t, seg, cols["score"])  # type: ignore[arg-type]
    ax = _axes(ax)
    ax.plot([0, 1], [0, 1], ls="--", color=_NOMINAL, lw=1, label="perfect calibration")
    _reliability_lines(ax, t, cols, seg, highlight)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("mean predicted score in bin")
    ax.set_ylabel("observed frequency (band: binomial interval)")
    ax.set_title("Reliability diagram")
    ax.grid(alpha=0.3)
    _legend(ax)
    return ax


# ---------------------------------------------------------------------------
# the report's figures
# ---------------------------------------------------------------------------
def _report_coverage_table(rep: Any) -> nw.DataFrame | None:
    if "intervals" in rep.tables:
        return rep.tables["intervals"]
    if "joint_coverage" in rep.tables:  # several outputs: the joint coverage
        return rep.tables["joint_coverage"]
    if "sets" in rep.tables:
        t = rep.tables["sets"]
        return t.rename({c: c.replace("set_coverage", "coverage") for c in t.columns if c.startswith("set_coverage")})
    return None


#: panels of a small-multiples figure (``by`` with two keys), at most
MAX_PANELS = 12


def _panel_values(t: nw.DataFrame, first: str, priority: list[Any] | None) -> tuple[list[Any], int]:
    """The first key's values drawn as panels (key order; the worst first when capped), and how many are left out."""
    values = list(dict.fromkeys(t.get_column(first).to_list()))
    if len(values) <= MAX_PANELS:
        return values, 0
    chosen = set(list(dict.fromkeys([*(priority or []), *values]))[:MAX_PANELS])
    return [v for v in values if v in chosen], len(values) - MAX_PANELS


def _small_multiples(t: nw.DataFrame, seg: list[str], draw: Any, priority: list[Any] | None = None) -> Any:
    """One panel per value of the first key of ``seg``, one line per value of the second.

    ``draw(table, by, ax)`` draws one panel.  The legend is shared when every
    panel has the same lines (same colours), else each panel keeps its own.
    Returns the Figure.
    """
    plt = _pyplot()
    first, second = seg[0], seg[1:]
    values, left_out = _panel_values(t, first, priority)
    ncols = min(3, len(values))
    nrows = -(-len(values) // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(3.4 * ncols + 1.8, 3.0 * nrows + 0.8),
        sharex=True,
        sharey=True,
        layout="constrained",
        squeeze=False,
    )
    title, xlabel, ylabel, legends = "", "", "", []
    names = list(dict.fromkeys(_named(_sorted(t.select(*second).unique(), second), second))) if second else []
    fixed = {g: f"C{i}" for i, g in enumerate(names)} if 0 < len(names) <= MAX_COLOURS else None
    token = _LINE_COLOURS.set(fixed)
    try:
        for ax, v in zip(axes.flat, values):
            draw(t.filter(nw.col(first).is_null() if v is None else nw.col(first) == v), second, ax)
            title, xlabel, ylabel = ax.get_title(), ax.get_xlabel(), ax.get_ylabel()
            ax.set_title(f"{first}={v}", fontsize=9)
            ax.set_xlabel("")
            ax.set_ylabel("")
            ax.set_aspect("auto")
            legends.append(ax.get_legend_handles_labels())
            if ax.get_legend() is not None:
                ax.get_legend().remove()
    finally:
        _LINE_COLOURS.reset(token)
    for i, ax in enumerate(axes.flat[len(values) :], start=len(values)):
        ax.set_visible(False)
        if i >= ncols:  # the panel above an empty cell shows its x tick labels
            axes.flat[i - ncols].xaxis.set_tick_params(labelbottom=True)
    if all(labels == legends[0][1] for _, labels in legends):
        fig.legend(*legends[0], loc="outside right upper", fontsize=8, frameon=False)
    elif fixed is not None:  # one colour per group in every panel: one legend of them all, in key order
        handles = {label: h for hs, labels in legends for h, label in zip(hs, labels)}
        order = [k for k in handles if k not in fixed] + [g for g in names if g in handles]
        fig.legend([handles[k] for k in order], order, loc="outside right upper", fontsize=8, frameon=False)
    else:  # each panel's own legend, beside it (never over the data)
        for ax in axes.flat[: len(values)]:
            ax.legend(fontsize=6, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    more = f"\n({len(values)} of {len(values) + left_out} {first} values: the lowest by the test)" if left_out else ""
    fig.suptitle(f"{title} by {first}{more}")
    fig.supxlabel(xlabel, fontsize=10)
    fig.supylabel(ylabel, fontsize=10)
    return fig


def report_figures(rep: Any) -> dict[str, Any]:
    """All applicable plots of a :class:`~conformal_frames.reporting.Report`.

    At most ``rep.max_segments`` segments per plot, the same ones in every
    plot (the lowest by the under-coverage test).  With a column of levels,
    the per-bin plots (SSC, widths, reliability) show the middle level.
    When ``by`` has two keys, the line plots (coverage against the level,
    reliability, quantile calibration, PIT histograms) are small multiples:
    one panel per value of the first key (at most 12, those holding the
    lowest groups by the test), one line per value of the second.
    With ``rep.horizon`` (a forecast comparison), the horizon is the last
    segment key and ``score_by_horizon`` / ``coverage_by_horizon`` draw each
    score and coverage against it, one line per model (the ``by`` groups).
    Figures are closed in pyplot right away (no global state kept); they
    stay usable for ``savefig``.
    """
    plt = _pyplot()
    figs: dict[str, Any] = {}
    horizon = getattr(rep, "horizon", None)
    seg, level, cap = [*rep.by, *([horizon] if horizon else [])], rep.level_column, rep.max_segments
    target = rep.confidence_level if level is None else None
    cov = _report_coverage_table(rep)
    chosen = None
    if level is not None:
        levels = sorted(set(next(iter(rep.tables.values())).get_column(level).to_list()))
        chosen = target = levels[len(levels) // 2]

    def at(t: Any) -> Any:
        return t if chosen is None else t.filter(nw.col(level) == chosen)

    def keep(name: str, ax: Any) -> None:
        if chosen is not None and name != "coverage_by_segment":
            head, _, tail = ax.get_title().partition("\n")
            ax.set_title(f"{head} at {level} = {chosen:g}" + (f"\n{tail}" if tail else ""))
        figs[name] = ax.figure
        plt.close(ax.figure)

    ranked = None
    priority = None
    if cov is not None:
        goal = _targets(cov, target if level is None else None, level)
        ranked = _coverage_rank(cov, _labels(cov, seg), goal)
        if len(seg) == 2:
            first_of = dict(zip(_labels(cov, seg), cov.get_column(seg[0]).to_list()))
            priority = list(dict.fromkeys(first_of[g] for g in ranked))
        keep("coverage_by_segment", _coverage_plot(cov, seg, level, goal, cap, None))

    def lines(name: str, t: Any, draw: Any, *, at_level: bool = True) -> None:
        """A line plot: one Axes, or small multiples when by has two keys."""
        if len(seg) != 2:
            ax = draw(t, seg, None)
            if at_level:
                keep(name, ax)
            else:
                figs[name] = ax.figure
                plt.close(ax.figure)
            return
        fig = _small_multiples(t, seg, draw, priority)
        if at_level and chosen is not None:
            head, _, tail = fig.get_suptitle().partition("\n")
            fig.suptitle(f"{head} at {level} = {chosen:g}" + (f"\n{tail}" if tail else ""))
        figs[name] = fig
        plt.close(fig)

    if cov is not None and level is not None:
        lines(
            "coverage_vs_level",
            cov,
            lambda t, by, ax: coverage_vs_level(t, confidence_level=level, by=by, ax=ax),
            at_level=False,
        )
    if "ssc" in rep.tables:
        keep("ssc", _ssc_plot(at(rep.tables["ssc"]), seg, target, ranked, cap, None))
    if "widths" in rep.tables:
        keep("width_distribution", _width_plot(at(rep.tables["widths"]), seg, ranked, cap, None))
    if "reliability" in rep.tables:
        lines("reliability", at(rep.tables["reliability"]), lambda t, by, ax: reliability_diagram(t, by=by, ax=ax))
    if "quantile_coverage" in rep.tables:
        lines(
            "quantile_calibration",
            at(rep.tables["quantile_coverage"]),
            lambda t, by, ax: quantile_calibration(t, by=by, ax=ax),
        )
    for name in ("pit_histogram", "quantile_pit_histogram"):
        if name in rep.tables:
            lines(name, at(rep.tables[name]), lambda t, by, ax: pit_histogram(t, by=by, ax=ax))
    if "uncertainty_calibration_curve" in rep.tables:  # issue 41: mean=, std=
        lines("uncertainty_calibration_curve", at(rep.tables["uncertainty_calibration_curve"]), _uncertainty_curve)
    if horizon:
        for name, fig in _horizon_figures(rep, horizon, at).items():
            figs[name] = fig
            plt.close(fig)
    figs.update(_monitoring_figures(rep, cap))  # issue 40: report(order_by=)
    return figs


def _monitoring_figures(rep: Any, cap: int | None) -> dict[str, Any]:
    """The report's ``coverage_sequence`` figure when it has a monitoring section."""
    if not getattr(rep, "monitoring", None):
        return {}
    ax = coverage_sequence(rep.monitoring["sequence"], order_by=rep.summary["order_by"],
                           confidence_level=float(rep.confidence_level), by=rep.keys, max_segments=cap)  # fmt: skip
    _pyplot().close(ax.figure)
    return {"coverage_sequence": ax.figure}


# ---------------------------------------------------------------------------
# a forecast comparison: scores and coverage against the horizon, one line per model
# ---------------------------------------------------------------------------
#: the scores drawn against the horizon (lower is better), by table, in this order
HORIZON_SCORES = (
    ("forecast", ("wis", "crps", "quantile_crps", "mae")),
    ("intervals", ("winkler", "width")),
    ("sets", ("set_size",)),
)


def _horizon_x(t: nw.DataFrame, horizon: str) -> tuple[np.ndarray, list[Any] | None]:
    """The horizon as x positions: its values when numeric, else the rank of each value (with the tick labels)."""
    values = t.get_column(horizon).to_list()
    if t.schema[horizon].is_numeric():
        return np.array([np.nan if v is None else float(v) for v in values]), None
    ticks = list(dict.fromkeys(_sorted(t.select(horizon), [horizon]).get_column(horizon).to_list()))
    return np.array([ticks.index(v) for v in values], dtype=float), ticks


def _horizon_panel(
    ax: Any,
    t: nw.DataFrame,
    models: list[str],
    horizon: str,
    value: str,
    band: tuple[str, str] | None = None,
    reference: float | None = None,
) -> None:
    """``value`` against the horizon, one line per model (the first ``MAX_COLOURS`` in key order coloured)."""
    t = _sorted(t, models, horizon)
    x, ticks = _horizon_x(t, horizon)
    ys = floats(t, value)
    runs = _runs(_labels(t, models))  # the legend's title names the keys
    if reference is not None:
        ax.axhline(reference, ls="--", color=_NOMINAL, lw=1, label="target")
    for i, (g, s) in enumerate(runs.items()):
        coloured = i < MAX_COLOURS
        color = f"C{i}" if coloured else _REST
        name = g if coloured else f"other models ({len(runs) - MAX_COLOURS})" if i == MAX_COLOURS else None
        if band is not None and coloured:
            ax.fill_between(x[s], floats(t, band[0])[s], floats(t, band[1])[s], color=color, alpha=0.12, lw=0)
        ax.plot(x[s], ys[s], marker="o", ms=3.5, lw=1.3 if coloured else 0.8, color=color, label=name)
    if ticks is not None:
        ax.set_xticks(range(len(ticks)), [str(v) for v in ticks])
    else:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def _horizon_figure(panels: list[tuple[str, nw.DataFrame, dict[str, Any]]], models: list[str], horizon: str) -> Any:
    """Panels of :func:`_horizon_panel` (title, table, options), one legend of the models outside, on the right."""
    plt = _pyplot()
    panels = panels[:MAX_PANELS]
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.6 * ncols + 2.4, 2.9 * nrows + 0.9), layout="constrained", squeeze=False
    )
    for ax, (title, t, options) in zip(axes.flat, panels):
        _horizon_panel(ax, t, models, horizon, **options)
        ax.set_title(title, fontsize=9)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    keys = " / ".join(models) if models else None
    fig.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False, title=keys, title_fontsize=8)
    fig.supxlabel(horizon, fontsize=10)
    return fig


#: what the coverage panel shows, by the report's coverage table
_COVERAGE_WHAT = (("intervals", "intervals"), ("joint_coverage", "joint coverage (every output)"))


def _coverage_panels(rep: Any, at: Any) -> list[tuple[str, nw.DataFrame, dict[str, Any]]]:
    """The coverage panels: the intervals (or sets) at their target, then each interval and quantile level."""
    band = ("coverage_ci_low", "coverage_ci_high")
    panels: list[tuple[str, nw.DataFrame, dict[str, Any]]] = []
    cov = _report_coverage_table(rep)
    if cov is not None:
        level = rep.level_column
        goals = sorted(set(cov.get_column(level).to_list())) if level else [rep.confidence_level]
        for goal in goals:
            t = cov if level is None else cov.filter(nw.col(level) == goal)
            what = next((w for k, w in _COVERAGE_WHAT if k in rep.tables), "prediction sets")
            title = what + (f" at {goal:g}" if isinstance(goal, float) else "")
            panels.append((title, t, {"value": "coverage", "band": band, "reference": goal}))
    for name, column, title in (
        ("interval_coverage", "confidence_level", "central interval {:g}"),
        ("quantile_coverage", "quantile_level", "y <= quantile {:g}"),
    ):
        if name in rep.tables:
            t = at(rep.tables[name])
            for lv in sorted(set(t.get_column(column).to_list())):
                part = t.filter(nw.col(column) == lv)
                panels.append((title.format(lv), part, {"value": "coverage", "band": band, "reference": lv}))
    return panels


def _horizon_figures(rep: Any, horizon: str, at: Any) -> dict[str, Any]:
    """``score_by_horizon`` and ``coverage_by_horizon``: one line per model (the ``by`` groups)."""
    models = list(rep.by)
    figs: dict[str, Any] = {}
    scores = [
        (column, at(rep.tables[name]), {"value": column})
        for name, columns in HORIZON_SCORES
        if name in rep.tables
        for column in columns
        if column in rep.tables[name].columns
    ]
    if scores:
        fig = _horizon_figure(scores, models, horizon)
        fig.suptitle("Scores by horizon (lower is better; width: narrower is sharper)")
        figs["score_by_horizon"] = fig
    panels = _coverage_panels(rep, at)
    if panels:
        fig = _horizon_figure(panels, models, horizon)
        fig.suptitle("Coverage by horizon (band: Wilson interval; dashed: the target)")
        figs["coverage_by_horizon"] = fig
    return figs


# ---------------------------------------------------------------------------
# CORP reliability diagram
# ---------------------------------------------------------------------------
def corp_reliability_diagram(
    data: Any,
    *,
    y: str,
    score: str,
    by: str | Sequence[str] | None = None,
    n_resamples: int = 100,
    ci_level: float = 0.9,
    seed: int = 0,
    highlight: int = 4,
    ax: Any = None,
) -> Any:
    """CORP reliability diagram: the PAV-recalibrated probability against the score.

    The curve is :func:`conformal_frames.corp_reliability`'s ``recalibrated``
    at each distinct score, the shaded band its consistency band under
    calibration (at ``ci_level``): a calibrated predictor's curve stays on
    the diagonal, within the band.  The legend gives each curve's Brier score
    decomposition (:func:`conformal_frames.score_decomposition`): ``MCB``
    (miscalibration), ``DSC`` (discrimination), ``UNC`` (uncertainty) and the
    score ``S = MCB - DSC + UNC``.  With ``by=``, one curve per group; the
    ``highlight`` groups with the largest ``n * MCB`` (excess score) are drawn.

    ``data`` is raw rows (``y`` 0/1, ``score`` in [0, 1]); an eager frame of
    any backend or a polars LazyFrame (the per-group isotonic fits run in
    numpy; only the per-score table is collected).

    Returns
    -------
    matplotlib.axes.Axes
    """
    from conformal_frames.metrics.recalibration import corp_reliability, score_decomposition

    seg = engine.as_keys(by)
    table = _eager(corp_reliability(data, y, score, n_resamples=n_resamples, ci_level=ci_level, seed=seed, by=by))
    parts = _eager(engine.evaluate_one(data, score_decomposition(y, score), by))
    labels, part_labels = _named(table, seg), _named(parts, seg)
    excess = dict(zip(part_labels, floats(parts, "miscalibration") * floats(parts, "n")))  # n * MCB
    shown = sorted(excess, key=lambda g: -np.nan_to_num(excess[g], nan=-1.0))[:highlight]
    ax = _axes(ax)
    ax.plot([0, 1], [0, 1], ls="--", color=_NOMINAL, lw=1, label="perfect calibration")
    runs, xs, fit = _runs(labels), floats(table, "score"), floats(table, "recalibrated")
    low, high = floats(table, "band_low"), floats(table, "band_high")
    for i, g in enumerate(g for g in part_labels if g in shown):
        s, color, row = runs[g], f"C{i % 10}", part_labels.index(g)
        mcb, dsc, unc, total = (
            floats(parts, c)[row] for c in ("miscalibration", "discrimination", "uncertainty", "score")
        )
        numbers = f"MCB {mcb:.3f}  DSC {dsc:.3f}\nUNC {unc:.3f}  S {total:.3f}"
        ax.fill_between(xs[s], low[s], high[s], color=color, alpha=0.18, lw=0, step="post")
        ax.step(xs[s], fit[s], where="post", color=color, lw=1.4, label=(f"{g}\n" if seg else "") + numbers)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("score")
    ax.set_ylabel("recalibrated probability (PAV)")
    hidden = len(runs) - len(shown)
    title = f"CORP reliability diagram\nband: {ci_level:.0%} consistency band under calibration"
    ax.set_title(title + (f"; {hidden} more groups not drawn" if hidden > 0 else ""))
    ax.grid(alpha=0.3)
    _legend(ax)
    return ax


# ---------------------------------------------------------------------------
# distributional forecasts: quantile calibration curve and PIT histogram
# ---------------------------------------------------------------------------
def _segment_lines(
    ax: Any, t: nw.DataFrame, seg: list[str], x: str, cols: tuple[str, str, str], highlight: int, label: str
) -> None:
    """One line (with its band) per segment; beyond ``highlight`` segments, the others grey."""
    labels = _named(t, seg)
    xs, ys, lows, highs = (floats(t, c) for c in (x, *cols))
    runs = _runs(labels)
    worst = {g: _nan_stat(np.nanmax, np.abs(ys[s] - xs[s]), -np.inf) for g, s in runs.items()}
    shown = _highlighted(runs, worst, highlight)
    others = [g for g in runs if g not in shown]
    _grey_lines(ax, [xs[runs[g]] for g in others], [ys[runs[g]] for g in others], f"other groups ({len(others)})")
    for i, g in enumerate(shown):
        s, color = runs[g], _colour(g, i)
        ax.fill_between(xs[s], lows[s], highs[s], color=color, alpha=0.18, lw=0)
        ax.plot(xs[s], ys[s], marker="o", ms=4, color=color, lw=1.2, label=g if seg else label)


def _uncertainty_curve(t: Any, seg: list[str], ax: Any) -> Any:
    """The report's calibration curve of Gaussian predictions: observed against expected proportion (issue 41)."""
    t = _sorted(_eager(t), seg, "expected")
    ax = _axes(ax)
    ax.plot([0, 1], [0, 1], ls="--", color=_NOMINAL, lw=1, label="perfect calibration")
    _segment_lines(ax, t, seg, "expected", ("observed", "observed", "observed"), MAX_COLOURS, "observed proportion")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("expected proportion (central Gaussian interval)")
    ax.set_ylabel("observed proportion of y inside")
    ax.set_title("Uncertainty calibration curve")
    ax.grid(alpha=0.3)
    _legend(ax)
    return ax


def quantile_calibration(
    data: Any,
    *,
    y: str | None = None,
    quantiles: dict[float, str] | None = None,
    by: str | Sequence[str] | None = None,
    ci_level: float = 0.95,
    highlight: int = MAX_COLOURS,
    ax: Any = None,
) -> Any:
    """Quantile calibration curve: observed ``P(y <= q_tau)`` against the nominal level ``tau``.

    One line per segment (``by=``) with the Wilson interval of each level's
    observed frequency as a band; the diagonal is perfect calibration (a
    curve below it: the quantiles are too low).  With many segments the
    ``highlight`` ones furthest from the diagonal are coloured, the others
    grey.  ``data`` is raw rows (give ``y`` and ``quantiles={level:
    column}``; computed with :func:`conformal_frames.quantile_coverage`) or
    its long table (``quantile_level``, ``coverage``, ``coverage_ci_low``,
    ``coverage_ci_high``).

    Returns
    -------
    matplotlib.axes.Axes
    """
    seg = engine.as_keys(by)
    if (y is None) != (quantiles is None):
        msg = "give both y= and quantiles= (raw rows) or neither (a quantile_coverage table)"
        raise ValueError(msg)
    if y is not None:
        from conformal_frames.metrics.quantiles import quantile_coverage

        assert quantiles is not None  # checked above, with y
        metric = quantile_coverage(y, quantiles=quantiles, ci_level=ci_level)
        t = _eager(engine.evaluate_one(data, metric, seg or None))
    else:
        t = _eager(data)
    cols = ("coverage", "coverage_ci_low", "coverage_ci_high")
    _need(t, ["quantile_level", *cols], "pass y=, quantiles= for raw rows")
    t = _sorted(t, seg, "quantile_level")
    ax = _axes(ax)
    ax.plot([0, 1], [0, 1], ls="--", color=_NOMINAL, lw=1, label="perfect calibration")
    _segment_lines(ax, t, seg, "quantile_level", cols, highlight, "observed frequency")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("nominal quantile level")
    ax.set_ylabel("observed frequency of y <= quantile (band: Wilson interval)")
    ax.set_title("Quantile calibration")
    ax.grid(alpha=0.3)
    _legend(ax)
    return ax


def pit_histogram(
    data: Any,
    *,
    y: str | None = None,
    mean: str | None = None,
    std: str | None = None,
    samples: str | Sequence[str] | None = None,
    quantiles: dict[float, str] | None = None,
    n_bins: int = 10,
    by: str | Sequence[str] | None = None,
    ci_level: float = 0.95,
    seed: int = 0,
    highlight: int = MAX_COLOURS,
    ax: Any = None,
) -> Any:
    """PIT histogram: the frequency of the PIT values per bin, with the uniformity band.

    Without ``by=`` the bins are bars; with ``by=`` one step line per
    segment.  The dashed line is ``1/n_bins`` (a calibrated forecast); the
    shaded band is where a uniform PIT's bin frequencies stay with
    probability about ``ci_level``.  ``data`` is raw rows (give ``y`` and one
    forecast: ``mean``/``std``, ``samples`` or ``quantiles``; computed with
    :func:`conformal_frames.pit_histogram`) or its long table.

    Returns
    -------
    matplotlib.axes.Axes
    """
    from conformal_frames.metrics import distributions

    seg = engine.as_keys(by)
    if y is not None:
        metric = distributions.pit_histogram(
            y, mean=mean, std=std, samples=samples, quantiles=quantiles, n_bins=n_bins, ci_level=ci_level, seed=seed
        )
        t = _eager(engine.evaluate_one(data, metric, seg or None))
    else:
        t = _eager(data)
    _need(t, ["bin_low", "bin_high", "frequency", "band_low", "band_high"], "pass y= and a forecast for raw rows")
    t = _sorted(t, seg, "bin_low")
    ax = _axes(ax)
    lows, highs, freq = floats(t, "bin_low"), floats(t, "bin_high"), floats(t, "frequency")
    # the band of the smallest group (the widest), behind everything
    band_low, band_high = _nan_stat(np.nanmin, floats(t, "band_low")), _nan_stat(np.nanmax, floats(t, "band_high"))
    what = "smallest group, " if seg else ""
    ax.axhspan(band_low, band_high, color=_REST, alpha=0.25, lw=0, label=f"uniform band ({what}{ci_level:g})", zorder=0)
    if not seg:
        ax.bar(lows, freq, width=highs - lows, align="edge", color="C0", alpha=0.75, label="PIT frequency", zorder=2)
    else:
        runs = _runs(_named(t, seg))
        worst = {g: _nan_stat(np.nanmax, np.abs(freq[s] - (highs[s] - lows[s])), -np.inf) for g, s in runs.items()}
        shown = _highlighted(runs, worst, highlight)
        others = [g for g in runs if g not in shown]
        steps = {g: (np.r_[lows[runs[g]], highs[runs[g]][-1:]], np.r_[freq[runs[g]], freq[runs[g]][-1:]]) for g in runs}
        _grey_lines(ax, [steps[g][0] for g in others], [steps[g][1] for g in others], f"other groups ({len(others)})")
        for i, g in enumerate(shown):
            ax.step(*steps[g], where="post", color=_colour(g, i), lw=1.4, label=g, zorder=3)
    ax.axhline(_nan_stat(np.nanmean, highs - lows), ls="--", color=_NOMINAL, lw=1, label="uniform")
    ax.set_xlim(0, 1)
    ax.set_xlabel("PIT value")
    ax.set_ylabel("frequency")
    ax.set_title("PIT histogram")
    ax.grid(alpha=0.3)
    _legend(ax)
    return ax


# ---------------------------------------------------------------------------
# coverage over time (monitoring)
# ---------------------------------------------------------------------------
def _date_axis(ax: Any, values: list[Any]) -> None:
    """Concise date ticks (``AutoDateLocator`` + ``ConciseDateFormatter``) when the index holds dates."""
    import datetime as dt

    sample = next((v for v in values if v is not None), None)
    if isinstance(sample, (dt.date, np.datetime64)) or type(sample).__name__ == "Timestamp":
        import matplotlib.dates as mdates

        locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def coverage_over_time(
    data: Any,
    *,
    index: str,
    metric: str = "coverage",
    by: str | Sequence[str] | None = None,
    confidence_level: float | None = None,
    ax: Any = None,
) -> Any:
    """A metric against time with its confidence band (coverage by default) and the nominal line.

    One line per group of ``by`` (the metric at each ``index`` value), its
    interval ``<metric>_ci_low`` / ``<metric>_ci_high`` as a shaded band,
    the nominal coverage as a dashed line.  Typically the output of
    :func:`~conformal_frames.rolling` with :func:`~conformal_frames.coverage`
    (e.g. 7-day rolling coverage by segment), or of
    ``evaluate(..., by=[..., "day"])``.  Dates get concise ticks
    (matplotlib's ``ConciseDateFormatter``); legends read ``key=value``.

    Parameters
    ----------
    data
        A table with ``index``, ``metric``, ``<metric>_ci_low`` and
        ``<metric>_ci_high`` per (``by``, ``index``) (collected if lazy).
    index : str
        The time column (x axis).
    metric : str, default "coverage"
        The metric drawn: any column with its ``_ci_low`` / ``_ci_high``
        columns, e.g. ``"set_coverage"`` or ``"coverage_mondrian"``.
    by : str or list of str, optional
        Group columns: one line per group.
    confidence_level : float, optional
        Nominal coverage, drawn as a dashed horizontal line.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import datetime as dt, matplotlib, polars as pl
    >>> matplotlib.use("Agg")
    >>> from conformal_frames import plots
    >>> days = [dt.date(2024, 1, d) for d in range(1, 11)]
    >>> t = pl.DataFrame({"day": days, "set_coverage": [0.9] * 10,
    ...                   "set_coverage_ci_low": [0.85] * 10, "set_coverage_ci_high": [0.94] * 10})
    >>> ax = plots.coverage_over_time(t, index="day", metric="set_coverage", confidence_level=0.9)
    >>> ax.get_ylabel()
    'set_coverage (confidence band)'
    >>> matplotlib.pyplot.close(ax.figure)
    """
    seg = engine.as_keys(by)
    t = _eager(data)
    bounds = [f"{metric}_ci_low", f"{metric}_ci_high"]
    hint = "e.g. cf.rolling(..., cf.coverage(...)); metric= names a column with _ci_low/_ci_high columns"
    _need(t, [index, metric, *bounds, *seg], hint)
    t = _sorted(t, seg, index)
    ax = _axes(ax, width=8.0)
    labels = _named(t, seg)
    xs = t.get_column(index).to_list()
    for name, rows in _runs(labels).items():
        x = xs[rows]
        low, high, value = (floats(t, c)[rows] for c in (*bounds, metric))
        (line,) = ax.plot(x, value, marker=".", linewidth=1.2, label=name if seg else metric)
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    if confidence_level is not None:
        ax.axhline(float(confidence_level), color=_NOMINAL, linestyle="--", linewidth=1, label="nominal")
    _date_axis(ax, xs)
    ax.set_xlabel(index)
    ax.set_ylabel(f"{metric} (confidence band)" if metric != "coverage" else "coverage (Wilson band)")
    ax.set_title("Coverage over time" if metric == "coverage" else f"{metric} over time")
    ax.grid(alpha=0.3)
    _legend(ax)
    return ax


# ---------------------------------------------------------------------------
# monitoring with guarantees (issue 40)
# ---------------------------------------------------------------------------
def coverage_sequence(
    data: Any,
    *,
    order_by: str,
    confidence_level: float,
    by: str | Sequence[str] | None = None,
    max_segments: int | None = MAX_COLOURS,
    ax: Any = None,
) -> Any:
    """Running coverage per segment with its confidence sequence, the target and the alarms.

    ``data``: the output of :func:`conformal_frames.coverage_sequence` (one
    row per segment and period).  Per segment: the running coverage (a line),
    its band (shaded: it holds at every period at once), the target (dashed)
    and the first alarm (a red marker with the period).  Segments with an
    alarm are drawn first; at most ``max_segments`` are drawn.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames as cf
    >>> df = pd.DataFrame({"day": [1, 1, 2, 2, 3, 3], "miss": [0, 0, 0, 1, 1, 1]})
    >>> seq = cf.coverage_sequence(df, miss="miss", confidence_level=0.9, order_by="day")
    >>> ax = cf.plots.coverage_sequence(seq, order_by="day", confidence_level=0.9)
    """
    seg = engine.as_keys(by)
    t = _eager(data)
    _need(t, [order_by, "coverage", "coverage_cs_low", "coverage_cs_high", "alarm_period"],
          "the output of cf.coverage_sequence")  # fmt: skip
    t = _sorted(t, seg, order_by)
    labels = _named(t, seg)
    runs = _runs(labels)
    cov, low, high = (floats(t, c) for c in ("coverage", "coverage_cs_low", "coverage_cs_high"))
    periods = t.get_column(order_by).to_list()
    alarm_at = t.get_column("alarm_period")  # nulls: None, NaN (pandas floats) or pd.NA (nullable integers)
    first = [None if null else v for v, null in zip(alarm_at.to_list(), alarm_at.is_null().to_list(), strict=True)]
    order = sorted(runs, key=lambda g: (first[runs[g].start] is None, list(runs).index(g)))
    shown = order if max_segments is None else order[:max_segments]
    ax = _axes(ax, width=8.0)
    for i, g in enumerate(g for g in runs if g in shown):
        r, colour = runs[g], _colour(g, i)
        x = periods[r]
        ax.plot(x, cov[r], color=colour, lw=1.4, label=g if seg else "coverage")
        ax.fill_between(x, low[r], high[r], color=colour, alpha=0.15, lw=0)
        at = first[r.start]
        if at is not None:
            k = r.start + [p == at for p in x].index(True)
            ax.plot([periods[k]], [cov[k]], marker="X", ms=9, color=_FLAG, ls="none", zorder=5)
            ax.annotate(f"alarm {periods[k]}", (periods[k], cov[k]), xytext=(4, -12), textcoords="offset points",
                        fontsize=8, color=_FLAG)  # fmt: skip
    ax.axhline(confidence_level, color=_NOMINAL, ls="--", lw=1, label=f"target {confidence_level:g}")
    ax.set_xlabel(order_by)
    ax.set_ylabel("running coverage (band: confidence sequence)")
    n_rest = len(runs) - len(shown)
    ax.set_title("Coverage monitoring" + (f" ({n_rest} more segments not drawn)" if n_rest else ""))
    _legend(ax)
    return ax
