"""Plots of conformal and calibration metrics (optional extra ``[plot]``).

Every function takes a frame (any backend narwhals supports) and either the
column names of the raw data (``y=``, ``lo=``, ``hi=``, ...), in which case the
needed aggregates are computed with the library first, or an already
aggregated table (a :class:`~conformal_frames.report.Report` table, or the
output of the matching metric).  Each accepts ``ax=`` (an existing matplotlib
Axes) and returns the Axes it drew on (``ax.figure`` is the Figure).  Only
aggregated tables are collected, never the raw rows.

Segment axes are horizontal (one row per segment) and the figure height grows
with the number of segments, so 50 segments stay readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames import core

__all__ = [
    "coverage_by_segment",
    "coverage_vs_level",
    "reliability_diagram",
    "reliability_table",
    "ssc_bars",
    "width_distribution",
]

_NOMINAL = "#444444"
_FLAG = "#c0392b"


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
    if isinstance(f, nw.LazyFrame):
        f = f.collect()
    return f


def _keys(by: str | Sequence[str] | None) -> list[str]:
    return core._as_keys(by)


def _labels(t: nw.DataFrame, keys: list[str]) -> list[str]:
    if not keys:
        return ["all rows"] * len(t)
    cols = [t.get_column(k).to_list() for k in keys]
    return [" / ".join(str(v) for v in vals) for vals in zip(*cols)]


def _floats(t: nw.DataFrame, name: str) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in t.get_column(name).to_list()])


def _need(t: nw.DataFrame, cols: Sequence[str], hint: str) -> None:
    missing = [c for c in cols if c not in t.columns]
    if missing:
        available = ", ".join(repr(c) for c in t.columns)
        msg = f"missing column(s) {', '.join(map(repr, missing))} ({hint}); available columns: {available}"
        raise ValueError(msg)


def _coverage_table(data: Any, y: str | None, lo: str | None, hi: str | None, keys: list[str]) -> nw.DataFrame:
    if y is not None or lo is not None or hi is not None:
        if None in (y, lo, hi):
            msg = "give all of y=, lo=, hi= (raw rows) or none (an aggregated coverage table)"
            raise ValueError(msg)
        from conformal_frames.intervals import coverage

        return _eager(core.compute(data, [coverage(y, lo, hi)], keys or None))
    t = _eager(data)
    _need(t, ["coverage", "coverage_ci_low", "coverage_ci_high"], "pass y=, lo=, hi= for raw rows")
    return t


def _targets(t: nw.DataFrame, confidence_level: float | None, level: str | None) -> np.ndarray:
    if level is not None:
        return _floats(t, level)
    if confidence_level is not None:
        return np.full(len(t), float(confidence_level))
    if "target" in t.columns:
        return _floats(t, "target")
    return np.full(len(t), np.nan)


def _level_colors(levels: Sequence[float]) -> dict[float, Any]:
    plt = _pyplot()
    cmap = plt.get_cmap("viridis")
    n = len(levels)
    return {lv: cmap(0.15 + 0.7 * i / max(n - 1, 1)) for i, lv in enumerate(levels)}


# ---------------------------------------------------------------------------
# coverage by segment
# ---------------------------------------------------------------------------
def coverage_by_segment(
    data: Any,
    *,
    by: str | Sequence[str] | None = None,
    y: str | None = None,
    lo: str | None = None,
    hi: str | None = None,
    confidence_level: float | None = None,
    level: str | None = None,
    ax: Any = None,
) -> Any:
    """Coverage per segment with its confidence interval and the nominal line.

    One row per segment (horizontal), the Wilson interval as an error bar,
    the nominal coverage as a dashed vertical line.  With ``level=`` (a column
    of nominal levels) each level has its own colour and nominal line.
    Segments flagged in an ``under_covered`` column (a report table) are drawn
    in red.

    Parameters
    ----------
    data
        Raw rows (give ``y, lo, hi``) or a table with ``coverage``,
        ``coverage_ci_low``, ``coverage_ci_high`` per group.
    by : str or list of str
        Segment columns (several are joined with `` / `` in the labels).
    confidence_level : float, optional
        Nominal coverage; else the ``level`` column or a ``target`` column.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    seg = _keys(by)
    keys = [*seg, *([level] if level is not None else [])]
    t = _coverage_table(data, y, lo, hi, keys)
    if level is not None:
        t = t.sort(*seg, level) if seg else t.sort(level)
    target = _targets(t, confidence_level, level)
    labels = _labels(t, seg)
    uniq = list(dict.fromkeys(labels))
    pos = {lab: i for i, lab in enumerate(uniq)}
    ax = _axes(ax, len(uniq))
    cov, low, high = _floats(t, "coverage"), _floats(t, "coverage_ci_low"), _floats(t, "coverage_ci_high")
    flag = (
        np.array(t.get_column("under_covered").to_list(), bool)
        if "under_covered" in t.columns
        else np.zeros(len(t), bool)
    )
    levels = sorted(set(target[~np.isnan(target)].tolist())) if level is not None else []
    colors = _level_colors(levels) if levels else {}
    offsets = {lv: (i - (len(levels) - 1) / 2) * 0.22 for i, lv in enumerate(levels)}
    ypos = np.array([pos[lab] + offsets.get(tv, 0.0) for lab, tv in zip(labels, target)])
    groups = [(lv, target == lv) for lv in levels] if levels else [(None, np.ones(len(t), bool))]
    for lv, sel in groups:
        color = colors.get(lv, "C0")
        for f in (False, True):
            s = sel & (flag == f)
            if not s.any():
                continue
            label = (f"level {lv:g}" if lv is not None else "coverage") if not f else None
            ax.errorbar(
                cov[s],
                ypos[s],
                xerr=[cov[s] - low[s], high[s] - cov[s]],
                fmt="o",
                ms=4,
                capsize=2,
                color=_FLAG if f else color,
                ecolor=_FLAG if f else color,
                label=label,
                lw=1,
            )
        if lv is not None:
            ax.axvline(lv, color=color, ls="--", lw=1)
    if not levels:
        nominal = sorted(set(target[~np.isnan(target)].tolist()))
        for i, tv in enumerate(nominal):
            ax.axvline(tv, color=_NOMINAL, ls="--", lw=1, label="nominal" if i == 0 else None)
    if flag.any():
        ax.plot([], [], "o", color=_FLAG, ms=4, label="significantly below target")
    ax.set_yticks(range(len(uniq)), uniq, fontsize=8 if len(uniq) > 25 else 9)
    ax.set_ylim(len(uniq) - 0.5, -0.5)
    ax.set_xlabel("coverage (with confidence interval)")
    ax.set_ylabel(" / ".join(seg) if seg else "")
    ax.set_title("Coverage by segment")
    ax.grid(axis="x", alpha=0.3)
    _legend(ax)
    return ax


# ---------------------------------------------------------------------------
# coverage vs nominal level
# ---------------------------------------------------------------------------
def coverage_vs_level(
    data: Any,
    *,
    level: str = "level",
    by: str | Sequence[str] | None = None,
    y: str | None = None,
    lo: str | None = None,
    hi: str | None = None,
    highlight: int = 6,
    ax: Any = None,
) -> Any:
    """Empirical coverage against the nominal level (levels as data).

    The levels are a column (long format, one row per level and observation).
    One line per group with error bars; the diagonal is perfect calibration of
    the intervals.  With more than ``highlight`` groups, the ``highlight``
    groups furthest below their level are coloured and labelled and the others
    drawn in grey, so the legend stays readable.

    Returns
    -------
    matplotlib.axes.Axes
    """
    seg = _keys(by)
    t = _coverage_table(data, y, lo, hi, [*seg, level])
    t = t.sort(*seg, level)
    ax = _axes(ax)
    labels = _labels(t, seg)
    lv, cov = _floats(t, level), _floats(t, "coverage")
    low, high = _floats(t, "coverage_ci_low"), _floats(t, "coverage_ci_high")
    groups = list(dict.fromkeys(labels))
    lab = np.array(labels, dtype=object)
    gap = {g: np.nanmin(cov[lab == g] - lv[lab == g]) for g in groups}
    shown = groups if len(groups) <= highlight else sorted(groups, key=lambda g: gap[g])[:highlight]
    grid = np.array(sorted(set(lv.tolist())))
    pad = 0.02
    ax.plot(
        [grid.min() - pad, grid.max() + pad],
        [grid.min() - pad, grid.max() + pad],
        ls="--",
        color=_NOMINAL,
        lw=1,
        label="nominal (y = x)",
    )
    others = [g for g in groups if g not in shown]
    for i, g in enumerate(others):
        s = lab == g
        ax.plot(
            lv[s],
            cov[s],
            color="0.7",
            lw=0.8,
            marker=".",
            ms=3,
            label=f"other groups ({len(others)})" if i == 0 else None,
            zorder=1,
        )
    for i, g in enumerate(shown):
        s = lab == g
        ax.errorbar(
            lv[s],
            cov[s],
            yerr=[cov[s] - low[s], high[s] - cov[s]],
            marker="o",
            ms=4,
            capsize=2,
            lw=1.2,
            color=f"C{i % 10}",
            label=g if seg else "coverage",
            zorder=2,
        )
    ax.set_xlabel(f"nominal level ({level})")
    ax.set_ylabel("empirical coverage")
    title = "Coverage vs nominal level"
    if others:
        title += f" ({len(shown)} lowest groups highlighted)"
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _legend(ax)
    return ax


# ---------------------------------------------------------------------------
# size-stratified coverage
# ---------------------------------------------------------------------------
def ssc_bars(
    data: Any,
    *,
    by: str | Sequence[str] | None = None,
    y: str | None = None,
    lo: str | None = None,
    hi: str | None = None,
    num_bins: int = 3,
    confidence_level: float | None = None,
    ax: Any = None,
) -> Any:
    """Size-stratified coverage: coverage per width bin, bars per segment.

    ``data`` is raw rows (give ``y, lo, hi``: computed with
    :func:`conformal_frames.ssc`) or a long table ``keys, bin, coverage, n``
    (the output of ``ssc`` or ``report.frame("ssc")``).  Bin 0 holds the
    narrowest intervals.  The nominal level is a dashed line.

    Returns
    -------
    matplotlib.axes.Axes
    """
    seg = _keys(by)
    if y is not None or lo is not None or hi is not None:
        if None in (y, lo, hi):
            msg = "give all of y=, lo=, hi= (raw rows) or none (a long ssc table)"
            raise ValueError(msg)
        from conformal_frames.intervals import ssc

        metric = ssc(y, lo, hi, n_bins=num_bins)
        res = core.compute(data, [metric], seg or None)
        t = _eager(metric.to_long(res if isinstance(res, nw.LazyFrame) else res.lazy(), seg))
        t = t.rename({metric.output_name: "coverage"})
    else:
        t = _eager(data)
        cov_col = "coverage" if "coverage" in t.columns else "ssc"
        _need(t, ["bin", cov_col, "n"], "pass y=, lo=, hi= for raw rows")
        if cov_col != "coverage":
            t = t.rename({cov_col: "coverage"})
    t = t.sort(*seg, "bin") if seg else t.sort("bin")
    labels = _labels(t, seg)
    uniq = list(dict.fromkeys(labels))
    pos = {lab: i for i, lab in enumerate(uniq)}
    bins = sorted(set(t.get_column("bin").to_list()))
    ax = _axes(ax, len(uniq) if seg else 0, per_row=0.06 * len(bins) + 0.1)
    cov = _floats(t, "coverage")
    b = np.array(t.get_column("bin").to_list())
    height = 0.8 / len(bins)
    plt = _pyplot()
    cmap = plt.get_cmap("Blues")
    for j, bn in enumerate(bins):
        s = b == bn
        yy = np.array([pos[lab] for lab, keep in zip(labels, s) if keep]) + (j - (len(bins) - 1) / 2) * height
        name = f"width bin {bn}" + (" (narrowest)" if j == 0 else " (widest)" if j == len(bins) - 1 else "")
        ax.barh(yy, cov[s], height=height * 0.95, color=cmap(0.35 + 0.55 * j / max(len(bins) - 1, 1)), label=name)
    if confidence_level is not None:
        ax.axvline(confidence_level, color=_NOMINAL, ls="--", lw=1, label=f"nominal {confidence_level:g}")
    ax.set_yticks(range(len(uniq)), uniq, fontsize=8 if len(uniq) > 25 else 9)
    ax.set_ylim(len(uniq) - 0.5, -0.5)
    finite = cov[np.isfinite(cov)]
    lo_x = min(float(finite.min()) if finite.size else 0.0, confidence_level or 1.0)
    ax.set_xlim(max(0.0, lo_x - 0.05), 1.0)
    ax.set_xlabel("coverage within width bin")
    ax.set_ylabel(" / ".join(seg) if seg else "")
    ax.set_title("Size-stratified coverage")
    ax.grid(axis="x", alpha=0.3)
    _legend(ax)
    return ax


# ---------------------------------------------------------------------------
# width distribution
# ---------------------------------------------------------------------------
def width_distribution(
    data: Any,
    *,
    by: str | Sequence[str] | None = None,
    lo: str | None = None,
    hi: str | None = None,
    ax: Any = None,
) -> Any:
    """Distribution of interval widths per segment (box plot from quantiles).

    The boxes are drawn from per-group quantiles computed in the engine
    (5 %, 25 %, 50 %, 75 %, 95 %: whiskers at 5 % and 95 %), so the raw rows
    are never collected; the mean is a diamond.  ``data`` is raw rows (give
    ``lo, hi``) or a table with ``q05, q25, q50, q75, q95`` and ``mean`` per
    group (``report.frame("widths")``).

    Returns
    -------
    matplotlib.axes.Axes
    """
    from conformal_frames.report import _widths_query

    seg = _keys(by)
    if lo is not None or hi is not None:
        if None in (lo, hi):
            msg = "give both lo= and hi= (raw rows) or neither (a quantile table)"
            raise ValueError(msg)
        f = data if isinstance(data, (nw.DataFrame, nw.LazyFrame)) else nw.from_native(data)
        t = _eager(_widths_query(f, lo, hi, seg))
    else:
        t = _eager(data)
        _need(t, ["q05", "q25", "q50", "q75", "q95", "mean"], "pass lo=, hi= for raw rows")
    labels = _labels(t, seg)
    ax = _axes(ax, len(labels) if seg else 0)
    stats = [
        {"label": lab, "whislo": a, "q1": b, "med": c, "q3": d, "whishi": e, "mean": m, "fliers": []}
        for lab, a, b, c, d, e, m in zip(labels, *(_floats(t, k) for k in ("q05", "q25", "q50", "q75", "q95", "mean")))
    ]
    ax.bxp(
        stats,
        orientation="horizontal",
        showmeans=True,
        widths=0.6,
        patch_artist=True,
        boxprops={"facecolor": "#cfe2f3"},
        medianprops={"color": "#1f4e79"},
        meanprops={"marker": "D", "markerfacecolor": "#e67e22", "markeredgecolor": "#e67e22", "markersize": 4},
    )
    ax.set_yticks(range(1, len(labels) + 1), labels, fontsize=8 if len(labels) > 25 else 9)
    ax.set_ylim(len(labels) + 0.5, 0.5)
    ax.set_xlabel("interval width (box: 25-75 %, whiskers: 5-95 %, diamond: mean)")
    ax.set_ylabel(" / ".join(seg) if seg else "")
    ax.set_title("Interval width by segment")
    ax.grid(axis="x", alpha=0.3)
    return ax


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


def reliability_table(
    data: Any, *, label: str, score: str, num_bins: int = 10, by: str | Sequence[str] | None = None, ci: float = 0.95
) -> Any:
    """The reliability table behind :func:`reliability_diagram`.

    Uses :func:`conformal_frames.reliability` when the calibration family
    provides it.  Otherwise (fallback, documented): uniform bins
    ``[m/M, (m+1)/M)`` on ``[0, 1]`` (the last closed at 1), per (group, bin)
    ``mean_score``, ``frequency`` (mean label), its Wilson interval
    ``frequency_ci_low``/``frequency_ci_high`` at confidence ``ci`` and ``n``;
    empty bins absent (the same columns as the calibration family's table).

    Returns
    -------
    frame
        Native frame of the input's backend (collected if lazy).
    """
    import conformal_frames as cf

    seg = _keys(by)
    if hasattr(cf, "reliability"):
        out = cf.conformal(data).reliability(label, score, n_bins=num_bins, ci_level=ci, by=seg or None)
        return nw.to_native(_eager(out))
    from conformal_frames.stats import wilson_interval

    f = data if isinstance(data, (nw.DataFrame, nw.LazyFrame)) else nw.from_native(data)
    s = nw.col(score).cast(nw.Float64)
    b = (s * num_bins).floor().clip(lower_bound=0, upper_bound=num_bins - 1).cast(nw.Int64).alias("bin")
    rows = f.select(*[nw.col(k) for k in seg], b, s.alias("__s"), nw.col(label).cast(nw.Float64).alias("__y"))
    agg = rows.group_by(*seg, "bin").agg(
        nw.len().alias("n"), nw.col("__s").mean().alias("mean_score"), nw.col("__y").sum().alias("__k")
    )
    low, high = wilson_interval(nw.col("__k"), nw.col("n").cast(nw.Float64), ci)
    agg = agg.with_columns(
        (nw.col("__k") / nw.col("n")).alias("frequency"), low.alias("frequency_ci_low"), high.alias("frequency_ci_high")
    )
    out = agg.select(*seg, "bin", "mean_score", "frequency", "frequency_ci_low", "frequency_ci_high", "n")
    out = out.sort(*seg, "bin")
    return nw.to_native(_eager(out))


def reliability_diagram(
    data: Any,
    *,
    label: str | None = None,
    score: str | None = None,
    num_bins: int = 10,
    by: str | Sequence[str] | None = None,
    highlight: int = 6,
    ax: Any = None,
) -> Any:
    """Reliability diagram: observed frequency against mean score per bin.

    Each bin is a point at (mean score, observed frequency) with its binomial
    interval as a band; the diagonal is perfect calibration.  With ``by=``,
    one line per group (the ``highlight`` groups with the largest count-
    weighted calibration gap are coloured, the others grey).

    ``data`` is raw rows (give ``label, score``; see :func:`reliability_table`)
    or a reliability table.

    Returns
    -------
    matplotlib.axes.Axes
    """
    seg = _keys(by)
    if label is not None or score is not None:
        if None in (label, score):
            msg = "give both label= and score= (raw rows) or neither (a reliability table)"
            raise ValueError(msg)
        t = _eager(reliability_table(data, label=label, score=score, num_bins=num_bins, by=seg or None))
    else:
        t = _eager(data)
    cols = {k: _pick(t, k) for k in _REL_COLUMNS}
    missing = [
        f"{k} (one of {', '.join(v)})" for k, v in _REL_COLUMNS.items() if cols[k] is None and k in ("score", "freq")
    ]
    if missing:
        _need(t, missing, "pass label=, score= for raw rows")
    sort_by = [*seg, cols["score"]]
    t = t.sort(*sort_by)
    ax = _axes(ax)
    ax.plot([0, 1], [0, 1], ls="--", color=_NOMINAL, lw=1, label="perfect calibration")
    labels = np.array(_labels(t, seg), dtype=object)
    xs, ys = _floats(t, cols["score"]), _floats(t, cols["freq"])
    counts = _floats(t, cols["count"]) if cols["count"] else np.ones(len(t))
    groups = list(dict.fromkeys(labels.tolist()))
    gap = {
        g: float(np.nansum(counts[labels == g] * np.abs(ys - xs)[labels == g]) / np.nansum(counts[labels == g]))
        for g in groups
    }
    shown = groups if len(groups) <= highlight else sorted(groups, key=lambda g: -gap[g])[:highlight]
    others = [g for g in groups if g not in shown]
    for i, g in enumerate(others):
        s = labels == g
        ax.plot(
            xs[s],
            ys[s],
            color="0.75",
            lw=0.8,
            marker=".",
            ms=3,
            label=f"other groups ({len(others)})" if i == 0 else None,
        )
    for i, g in enumerate(shown):
        s = labels == g
        color = f"C{i % 10}"
        if cols["low"] and cols["high"]:
            ax.fill_between(
                xs[s], _floats(t, cols["low"])[s], _floats(t, cols["high"])[s], color=color, alpha=0.18, lw=0
            )
        ax.plot(xs[s], ys[s], marker="o", ms=4, color=color, lw=1.2, label=g if seg else "observed frequency")
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
def report_figures(rep: Any) -> dict[str, Any]:
    """All applicable plots of a :class:`~conformal_frames.report.Report`.

    With a level column, the per-bin plots (SSC, widths, reliability) show
    the middle level.  Figures are closed in pyplot right away (no global
    state kept); they stay usable for ``savefig``.
    """
    plt = _pyplot()
    figs: dict[str, Any] = {}
    seg = list(rep.by)
    level = rep.level
    target = rep.summary.get("target") if isinstance(rep.summary.get("target"), float) else None
    chosen = None
    if level is not None:
        first = next(iter(rep.tables.values()))
        levels = sorted(set(first.get_column(level).to_list()))
        chosen = levels[len(levels) // 2]
        target = chosen

    def at(t: Any) -> Any:
        return t if chosen is None else t.filter(nw.col(level) == chosen)

    def keep(name: str, ax: Any, title: str | None = None) -> None:
        if title is not None and chosen is not None:
            ax.set_title(f"{title} at {level} = {chosen:g}")
        figs[name] = ax.figure
        plt.close(ax.figure)

    cov_table = None
    if "intervals" in rep.tables:
        cov_table = rep.tables["intervals"]
    elif "sets" in rep.tables:
        t = rep.tables["sets"]
        cov_table = t.rename(
            {c: c.replace("set_coverage", "coverage") for c in t.columns if c.startswith("set_coverage")}
        )
    if cov_table is not None:
        keep("coverage_by_segment", coverage_by_segment(cov_table, by=seg, level=level))
        if level is not None:
            keep("coverage_vs_level", coverage_vs_level(cov_table, level=level, by=seg))
    if "intervals" in rep.tables:
        if "ssc" in rep.tables:
            keep("ssc", ssc_bars(at(rep.tables["ssc"]), by=seg, confidence_level=target), "Size-stratified coverage")
        keep("width_distribution", width_distribution(at(rep.tables["widths"]), by=seg), "Interval width by segment")
    if "reliability" in rep.tables:
        keep("reliability", reliability_diagram(at(rep.tables["reliability"]), by=seg), "Reliability diagram")
    return figs
