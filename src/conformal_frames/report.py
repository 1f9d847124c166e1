"""Evaluation report: every applicable metric per group in one object.

:func:`report` evaluates the metric families that apply to the columns it is
given (intervals from ``y, lo, hi``; calibration from ``label, score``;
prediction sets from ``prediction_set`` when the sets family is installed),
finds the segments whose coverage is significantly below its target, and
returns a :class:`Report`: tidy frames, a compact summary, a terminal table
(``str``), HTML for notebooks (``_repr_html_``) and a self-contained HTML file
with the plots embedded (:meth:`Report.to_html`).

Only aggregated tables (one row per group, or per group and bin) are
collected: the raw rows never leave the engine, so a report over a lazily
scanned file larger than memory works (the width distribution plot uses
per-group quantiles, also an aggregation).

Under-coverage test
-------------------
For every group with a target level ``t`` (``confidence_level=`` or the value
of the ``level=`` column), ``H0: coverage >= t`` is tested against
``coverage < t``.  When :mod:`conformal_frames.conditional` provides grouped
inference it is used; otherwise the fallback in this module runs: the
one-sided exact binomial test ``p = P(K <= k)`` with ``K ~ Binomial(n, t)``
(``scipy.stats.binom.cdf``) and a Holm correction across all tested groups.
A group is flagged when its adjusted p-value is below ``alpha``.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
from scipy.stats import binom

from conformal_frames import core
from conformal_frames.conditional import benjamini_hochberg, holm

__all__ = ["Report", "report", "under_coverage_test"]

#: width quantiles collected per group for the width-distribution plot
WIDTH_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
#: histogram bins of the width quantiles with ``bounded_memory=True``
WIDTH_HISTOGRAM_BINS = 512


# ---------------------------------------------------------------------------
# fallback grouped inference
# ---------------------------------------------------------------------------
def under_coverage_test(
    covered: np.ndarray,
    n: np.ndarray,
    target: np.ndarray,
    *,
    alpha: float = 0.05,
    correction: str = "holm",
) -> dict[str, np.ndarray]:
    """Per-group one-sided exact binomial test of ``H0: coverage >= target``.

    ``pvalue = P(K <= covered)`` with ``K ~ Binomial(n, target)``
    (``scipy.stats.binom.cdf``), adjusted across groups with ``correction``
    (``"holm"``: family-wise error rate; ``"bh"``: Benjamini-Hochberg false
    discovery rate, ``scipy.stats.false_discovery_control``; ``"none"``).
    Groups with ``n = 0`` or no target get NaN and are not counted in the
    correction.

    Returns
    -------
    dict
        ``pvalue``, ``pvalue_adjusted`` and ``flag`` (adjusted p-value below
        ``alpha``), one entry per group.

    Examples
    --------
    >>> out = under_coverage_test([95, 80], [100, 100], [0.9, 0.9])
    >>> out["flag"].tolist()
    [False, True]
    """
    k = np.asarray(covered, dtype=float)
    n_ = np.asarray(n, dtype=float)
    t = np.asarray(target, dtype=float)
    ok = (n_ > 0) & np.isfinite(t) & np.isfinite(k)
    p = np.full(k.shape, np.nan)
    p[ok] = binom.cdf(k[ok], n_[ok], t[ok])
    if correction == "holm":
        adj = holm(p)
    elif correction == "bh":
        adj = benjamini_hochberg(p)
    elif correction == "none":
        adj = p.copy()
    else:
        msg = f"correction must be 'holm', 'bh' or 'none', got {correction!r}"
        raise ValueError(msg)
    flag = np.where(np.isnan(adj), False, adj < alpha)
    return {"pvalue": p, "pvalue_adjusted": adj, "flag": flag}


# ---------------------------------------------------------------------------
# the report object
# ---------------------------------------------------------------------------
@dataclass
class Report:
    """The result of :func:`report`.

    Attributes
    ----------
    tables : dict of str to frame
        Wide tidy tables by family, each with the group columns first:
        ``"intervals"`` (coverage with its interval, width, Winkler score,
        SSC score, target, test columns), ``"ssc"`` (coverage per width bin),
        ``"widths"`` (width quantiles per group), and when they apply
        ``"calibration"``, ``"reliability"``, ``"sets"``.
    summary : dict
        Rows, groups, pooled coverage per target with the coverage gap
        (mean ``|coverage_g - target|`` over the groups, unweighted and
        weighted by rows), worst group, the significantly under-covered
        groups, invalid rows, the test used.
    keys : list of str
        Group columns of the interval table (``by`` plus the level column).
    """

    tables: dict[str, Any]
    summary: dict[str, Any]
    keys: list[str]
    by: list[str]
    level: str | None = None
    columns: dict[str, str] = field(default_factory=dict)
    _figures: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- frames -----------------------------------------------------------
    @property
    def table(self) -> Any:
        """The main table: interval metrics per group (else the first family)."""
        for name in ("intervals", "sets", "calibration"):
            if name in self.tables:
                return _native(self.tables[name])
        msg = "the report has no metric table"
        raise ValueError(msg)

    @property
    def under_covered(self) -> Any:
        """Groups whose coverage is significantly below the target."""
        name = "intervals" if "intervals" in self.tables else "sets"
        t = self.tables.get(name)
        if t is None or "under_covered" not in t.columns:
            msg = "no under-coverage test: give y, lo, hi (or a prediction set) and a target (confidence_level= or level=)"
            raise ValueError(msg)
        cov = "coverage" if name == "intervals" else "set_coverage"
        cols = [*self.keys, cov, "target", "n", "pvalue", "pvalue_adjusted"]
        return _native(t.filter(nw.col("under_covered")).select(*cols))

    def frame(self, name: str) -> Any:
        """One table by family name, as a native frame."""
        return _native(self.tables[name])

    def metrics(self) -> Any:
        """All metrics in long (tidy) form: keys, ``family``, ``metric``, ``value``.

        Only numeric metric columns; keys of families grouped by fewer columns
        (calibration without the level column) are null in the extra columns.
        """
        records = self._long_records()
        first = next(iter(self.tables.values()))
        ns = nw.get_native_namespace(first)
        cols: dict[str, list[Any]] = {k: [r.get(k) for r in records] for k in [*self.keys, "family", "metric", "value"]}
        return nw.to_native(nw.from_dict(cols, backend=ns))

    def _long_records(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for family, t in self.tables.items():
            if family in ("ssc", "widths", "reliability"):
                continue
            keys = [k for k in self.keys if k in t.columns]
            values = [c for c in t.columns if c not in keys and _is_numeric(t.schema[c])]
            for row in t.iter_rows(named=True):
                for c in values:
                    rec = {k: row[k] for k in keys}
                    rec.update(family=family, metric=c, value=_plain(row[c]))
                    out.append(rec)
        return out

    # -- plots ------------------------------------------------------------
    def figures(self) -> dict[str, Any]:
        """The report's plots (matplotlib Figures) by name; needs ``[plot]``."""
        if not self._figures:
            from conformal_frames import plots

            self._figures = plots.report_figures(self)
        return self._figures

    # -- rendering --------------------------------------------------------
    def _header_lines(self) -> list[str]:
        s = self.summary
        lines = [
            f"conformal-frames report: {s['rows']:,} rows, {s['groups']:,} group{'s' if s['groups'] != 1 else ''}"
            + (f" by {', '.join(self.keys)}" if self.keys else "")
        ]
        cols = ", ".join(f"{k}={v!r}" for k, v in self.columns.items())
        if cols:
            lines.append(f"columns: {cols}")
        if s.get("families"):
            lines.append(f"metric families: {', '.join(s['families'])}")
        if s.get("target"):
            lines.append(f"target coverage: {s['target']}")
        for item in s.get("pooled_coverage", []):
            line = f"pooled coverage{_at(item['target'])}: {_fmt(item['coverage'])} over {item['n']:,} rows"
            if "gap" in item:
                line += (
                    f"; coverage gap mean |coverage - target| over groups {_fmt(item['gap'])}"
                    f" (weighted by rows {_fmt(item['gap_weighted'])})"
                )
            lines.append(line)
        if s.get("worst_group"):
            w = s["worst_group"]
            lines.append(
                f"worst group: {_label(w['group'])}: coverage {_fmt(w['coverage'])} ("
                + (f"target {w['target']:g}, " if w["target"] is not None else "")
                + f"n={w['n']:,})"
            )
        if "under_covered" in s:
            u = s["under_covered"]
            lines.append(f"significantly under-covered: {len(u)} of {s['tested']} tested groups ({s['test']})")
            for g in u:
                lines.append(
                    f"  - {_label(g['group'])}: coverage {_fmt(g['coverage'])} < target {g['target']:g}, "
                    f"n={g['n']:,}, adjusted p={_fmt(g['pvalue_adjusted'])}"
                )
        if s.get("invalid_rows"):
            lines.append(
                f"WARNING: {s['invalid_rows']:,} rows have invalid values (missing, infinite, lo > hi); "
                "their groups have null metrics"
            )
        for note in s.get("notes", []):
            lines.append(f"note: {note}")
        return lines

    def _display_tables(self) -> list[tuple[str, nw.DataFrame]]:
        """Tables as shown in text and HTML: long per-bin tables pivoted wide."""
        out = []
        for name, t in self.tables.items():
            if name == "widths":
                continue
            if name == "ssc":
                t = _pivot_bins(t, [k for k in self.keys if k in t.columns], "coverage")
            if name == "reliability":
                t = _pivot_bins(t, [k for k in self.keys if k in t.columns], "frequency")
            out.append((_TITLES.get(name, name), t))
        return out

    def __str__(self) -> str:
        parts = ["\n".join(self._header_lines())]
        for title, t in self._display_tables():
            parts.append(f"{title}\n{_text_table(t, self.keys)}")
        return "\n\n".join(parts)

    def __repr__(self) -> str:
        s = self.summary
        return f"<Report: {s['rows']} rows, {s['groups']} groups, families {s.get('families')}>"

    def _html_body(self, *, images: dict[str, str] | None = None) -> str:
        head = "".join(f"<li>{html.escape(line)}</li>" for line in self._header_lines()[1:])
        title = html.escape(self._header_lines()[0])
        body = [f'<div class="cf-report"><h2>{title}</h2><ul>{head}</ul>']
        if images:
            body.append("<h3>Plots</h3>")
            for name, data in images.items():
                body.append(
                    f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(name.replace('_', ' '))}</figcaption></figure>"
                )
        for title, t in self._display_tables():
            body.append(f"<h3>{html.escape(title)}</h3>{_html_table(t, self.keys)}")
        body.append("</div>")
        return "".join(body)

    def _repr_html_(self) -> str:
        return f"<style>{_CSS}</style>{self._html_body()}"

    def to_html(self, path: str | Path | None = None, *, plots: bool = True) -> str:
        """A self-contained HTML page (plots embedded as base64 PNG).

        Writes it to ``path`` when given; returns the HTML text.  ``plots=False``
        (or matplotlib missing) leaves the plots out.
        """
        images: dict[str, str] = {}
        if plots:
            try:
                figs = self.figures()
            except ImportError:
                figs = {}
            for name, fig in figs.items():
                images[name] = base64.b64encode(_png(fig)).decode("ascii")
        title = html.escape(self._header_lines()[0])
        page = (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{title}</title><style>{_CSS}</style></head><body>"
            f"{self._html_body(images=images)}</body></html>\n"
        )
        if path is not None:
            Path(path).write_text(page, encoding="utf-8")
        return page

    def save_plots(self, directory: str | Path) -> list[Path]:
        """Write every plot as ``<name>.png`` into ``directory``; returns the paths."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, fig in self.figures().items():
            p = out / f"{name}.png"
            p.write_bytes(_png(fig))
            paths.append(p)
        return paths

    def to_dict(self) -> dict[str, Any]:
        """Summary and every table as lists of records (JSON-ready)."""
        return {
            "summary": _jsonable(self.summary),
            "tables": {name: [_jsonable(r) for r in t.iter_rows(named=True)] for name, t in self.tables.items()},
        }

    def to_csv(self, path: str | Path | None = None) -> str:
        """All metrics in long form (:meth:`metrics`) as CSV; written to ``path`` if given."""
        import csv

        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        cols = [*self.keys, "family", "metric", "value"]
        writer.writerow(cols)
        for rec in self._long_records():
            writer.writerow(["" if rec.get(c) is None else rec.get(c) for c in cols])
        text = buf.getvalue()
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def to_json(self, path: str | Path | None = None) -> str:
        """:meth:`to_dict` as JSON (NaN written as null); written to ``path`` if given."""
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text


_TITLES = {
    "intervals": "Interval metrics per group",
    "ssc": "Size-stratified coverage (width bins, 0 = narrowest)",
    "calibration": "Calibration per group",
    "reliability": "Reliability: observed frequency per score bin (mean scores and intervals in .frame('reliability'))",
    "sets": "Prediction-set metrics per group",
    "conditional": "Conditional coverage",
}

_CSS = (
    ".cf-report{font-family:system-ui,sans-serif;font-size:14px}"
    ".cf-report table{border-collapse:collapse;margin:0 0 1em 0}"
    ".cf-report th,.cf-report td{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap}"
    ".cf-report th{background:#f0f0f0}.cf-report tr.cf-flag td{background:#fde2e1}"
    ".cf-report img{max-width:100%}.cf-report figure{display:inline-block;vertical-align:top;margin:0 1em 1em 0}"
)


# ---------------------------------------------------------------------------
# formatting helpers
# ---------------------------------------------------------------------------
def _is_numeric(dtype: Any) -> bool:
    return dtype.is_numeric() or dtype == nw.Boolean


def _plain(v: Any) -> Any:
    if isinstance(v, (np.generic,)):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    v = _plain(obj)
    if isinstance(v, float) and math.isinf(v):
        return None
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def _fmt(v: Any) -> str:
    v = _plain(v)
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) < 1e-3 or abs(v) >= 1e5:
            return f"{v:.3e}"
        return f"{v:.4f}" if abs(v) < 10 else f"{v:.2f}"
    return str(v)


def _at(target: Any) -> str:
    return f" at target {target:g}" if target is not None else ""


def _label(group: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_plain(v)}" for k, v in group.items()) or "all rows"


def _cell(v: Any, key: bool) -> str:
    v = _plain(v)
    if key:
        return "-" if v is None else str(v)
    return _fmt(v)


def _text_table(t: nw.DataFrame, keys: Sequence[str] = (), max_rows: int | None = None) -> str:
    cols = list(t.columns)
    is_key = [c in keys for c in cols]
    rows = [[_cell(v, k) for v, k in zip(r, is_key)] for r in t.iter_rows()]
    if max_rows is not None and len(rows) > max_rows:
        rows = [*rows[: max_rows // 2], ["..."] * len(cols), *rows[-(max_rows // 2) :]]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]
    numeric = [_is_numeric(t.schema[c]) for c in cols]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(cols), sep, *[line(r) for r in rows]])


def _html_table(t: nw.DataFrame, keys: Sequence[str] = ()) -> str:
    cols = list(t.columns)
    is_key = [c in keys for c in cols]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    flag = cols.index("under_covered") if "under_covered" in cols else None
    body = []
    for r in t.iter_rows():
        cls = ' class="cf-flag"' if flag is not None and r[flag] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(_cell(v, k))}</td>" for v, k in zip(r, is_key)) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _pivot_bins(t: nw.DataFrame, keys: list[str], value: str) -> nw.DataFrame:
    """Long (keys, bin, value, n) table as one row per group: ``bin0 .. binK``."""
    bins = sorted(set(t.get_column("bin").to_list()))
    groups: dict[tuple, dict[str, Any]] = {}
    for r in t.iter_rows(named=True):
        g = groups.setdefault(tuple(r[k] for k in keys), {k: r[k] for k in keys})
        g[f"bin{r['bin']}"] = r[value]
    cols = {k: [g[k] for g in groups.values()] for k in keys}
    cols |= {f"bin{b}": [g.get(f"bin{b}") for g in groups.values()] for b in bins}
    schema = {k: t.schema[k] for k in keys} | {f"bin{b}": nw.Float64 for b in bins}
    return nw.from_dict(cols, schema=schema, backend=nw.get_native_namespace(t))


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


# ---------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------
def _collect(frame: Any) -> nw.DataFrame:
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


def _schema_check(schema: Any, names: dict[str, str | None]) -> None:
    available = ", ".join(repr(c) for c in schema)
    for arg, col in names.items():
        if col is not None and col not in schema:
            msg = f"column {col!r} ({arg}=) not found; available columns: {available}"
            raise ValueError(msg)


def _level_values(frame: Any, level: str) -> list[float]:
    values = _collect(frame.select(nw.col(level)).unique()).get_column(level).to_list()
    bad = [
        v for v in values if v is None or isinstance(v, bool) or not (isinstance(v, (int, float)) and 0 < float(v) < 1)
    ]
    if bad:
        msg = f"level column {level!r} must hold confidence levels strictly between 0 and 1; found {bad[:5]!r}"
        raise ValueError(msg)
    return sorted(float(v) for v in values)


def _widths_query(frame: Any, lo: str, hi: str, keys: list[str]) -> Any:
    w = (nw.col(hi).cast(nw.Float64) - nw.col(lo).cast(nw.Float64)).alias("__w")
    rows = frame.select(*[nw.col(k) for k in keys], w).filter(nw.col("__w").is_finite() & (nw.col("__w") >= 0))
    aggs = [nw.col("__w").quantile(q, interpolation="linear").alias(f"q{round(q * 100):02d}") for q in WIDTH_QUANTILES]
    aggs += [nw.col("__w").min().alias("min"), nw.col("__w").max().alias("max"), nw.col("__w").mean().alias("mean")]
    out = rows.group_by(*keys).agg(*aggs) if keys else rows.select(*aggs)
    return out.sort(*keys) if keys else out


def _widths_histogram(frame: Any, lo: str, hi: str, keys: list[str], bins: int = WIDTH_HISTOGRAM_BINS) -> nw.DataFrame:
    """Width quantiles from a per-group histogram: memory independent of the rows.

    Two lazy aggregations joined in one plan: per group ``min``, ``max``,
    ``mean`` and count; then counts per (group, bin) of ``bins`` equal-width
    bins on ``[min, max]``.  Quantiles are interpolated linearly inside the
    bin where the cumulative count crosses ``q * n``: exact at the ends,
    within ``(max - min) / bins`` elsewhere.
    """
    w = (nw.col(hi).cast(nw.Float64) - nw.col(lo).cast(nw.Float64)).alias("__w")
    rows = frame.select(*[nw.col(k) for k in keys], w).filter(nw.col("__w").is_finite() & (nw.col("__w") >= 0))
    stats_aggs = [
        nw.col("__w").min().alias("min"),
        nw.col("__w").max().alias("max"),
        nw.col("__w").mean().alias("mean"),
    ]
    stats = rows.group_by(*keys).agg(*stats_aggs) if keys else rows.select(*stats_aggs)
    if isinstance(stats, nw.LazyFrame) and stats.implementation.is_polars():
        # a small collected table joins without buffering the rows (measured: the
        # lazy self-join made polars' streaming engine hold O(rows) memory)
        stats = nw.from_native(stats.collect(engine="streaming").to_native().lazy())
    joined = rows.join(stats, on=keys, how="inner") if keys else rows.join(stats, how="cross")
    span = nw.col("max") - nw.col("min")
    pos = nw.when(span > 0).then((nw.col("__w") - nw.col("min")) / span * bins).otherwise(nw.lit(0.0))
    b = pos.floor().clip(lower_bound=0, upper_bound=bins - 1).cast(nw.Int64).alias("__b")
    counts = joined.with_columns(b).group_by(*keys, "__b", "min", "max", "mean").agg(nw.len().alias("__c"))
    table = _collect(counts)
    table = table.sort(*keys, "__b") if keys else table.sort("__b")
    groups: dict[tuple, dict[str, Any]] = {}
    for r in table.iter_rows(named=True):
        g = groups.setdefault(
            tuple(r[k] for k in keys),
            {**{k: r[k] for k in keys}, "min": r["min"], "max": r["max"], "mean": r["mean"], "counts": np.zeros(bins)},
        )
        g["counts"][r["__b"]] += r["__c"]
    out: dict[str, list[Any]] = {
        k: [] for k in [*keys, *(f"q{round(q * 100):02d}" for q in WIDTH_QUANTILES), "min", "max", "mean"]
    }
    for g in groups.values():
        counts, lo_w, hi_w = g["counts"], float(g["min"]), float(g["max"])
        edges = np.linspace(lo_w, hi_w, bins + 1)
        cum = np.concatenate([[0.0], np.cumsum(counts)])
        for k in keys:
            out[k].append(g[k])
        for q in WIDTH_QUANTILES:
            target = q * cum[-1]
            i = int(np.clip(np.searchsorted(cum, target, side="left") - 1, 0, bins - 1))
            frac = (target - cum[i]) / counts[i] if counts[i] else 0.0
            out[f"q{round(q * 100):02d}"].append(float(edges[i] + frac * (edges[i + 1] - edges[i])))
        out["min"].append(lo_w)
        out["max"].append(hi_w)
        out["mean"].append(float(g["mean"]))
    schema = {k: table.schema[k] for k in keys} | {c: nw.Float64 for c in out if c not in keys}
    return nw.from_dict(out, schema=schema, backend=nw.get_native_namespace(table))


@dataclass
class _Plan:
    """Which metrics each family contributes for one target level."""

    y: str | None
    lo: str | None
    hi: str | None
    label: str | None
    score: str | None
    prediction_set: str | None
    classes: list[Any] | None
    num_bins: int
    ssc_bins: int
    ci: float
    alpha: float
    correction: str
    n_calibration: int | None
    hsic: bool
    use_conditional: bool

    def families(self, target: float | None) -> dict[str, list[core.Metric]]:
        import conformal_frames as cf
        from conformal_frames import intervals as iv

        out: dict[str, list[core.Metric]] = {}
        if self.y is not None and self.lo is not None and self.hi is not None:
            ms: list[core.Metric] = [
                iv.coverage(self.y, self.lo, self.hi, ci_level=self.ci),
                iv.width(self.lo, self.hi),
            ]
            if target is not None:
                ms.append(iv.winkler(self.y, self.lo, self.hi, confidence_level=target))
            if self.ssc_bins:
                ms += [
                    iv.ssc_score(self.y, self.lo, self.hi, n_bins=self.ssc_bins),
                    iv.ssc(self.y, self.lo, self.hi, n_bins=self.ssc_bins),
                ]
            if self.hsic:
                ms.append(iv.hsic(self.y, self.lo, self.hi))
            if target is not None and self.use_conditional:
                ms.append(self._test(target, lo=self.lo, hi=self.hi).alias("__cf_test"))
            out["intervals"] = ms
        if self.prediction_set is not None and self.label is not None and hasattr(cf, "set_coverage"):
            s, y, classes = self.prediction_set, self.label, self.classes
            ms = [
                cf.set_coverage(y, s, classes=classes, ci_level=self.ci),
                cf.set_size(s, classes=classes),
                cf.singleton_rate(s, classes=classes),
                cf.empty_rate(s, classes=classes),
            ]
            if target is not None and self.use_conditional:
                ms.append(self._test(target, sets=s, classes=classes).alias("__cf_settest"))
            out["sets"] = ms
        if self.score is not None and self.label is not None and hasattr(cf, "ece"):
            y, sc = self.label, self.score
            ms = [cf.ece(y, sc, n_bins=self.num_bins)]
            for name in ("brier", "ks_test", "kuiper_test", "spiegelhalter_test"):
                if hasattr(cf, name):
                    ms.append(getattr(cf, name)(y, sc))
            out["calibration"] = ms
            if hasattr(cf, "reliability"):
                out["reliability"] = [cf.reliability(y, sc, n_bins=self.num_bins, ci_level=self.ci)]
        return out

    def _test(self, target: float, **kw: Any) -> core.Metric:
        import conformal_frames as cf

        assert self.y is not None or self.label is not None
        y = self.y if "lo" in kw else self.label
        return cf.coverage_test(
            y,
            **kw,
            confidence_level=target,
            ci_level=self.ci,
            n_calibration=self.n_calibration,
            significance=self.alpha,
            correction=self.correction,
        )


def report(
    frame: Any,
    *,
    y: str | None = None,
    lo: str | None = None,
    hi: str | None = None,
    label: str | None = None,
    score: str | None = None,
    prediction_set: str | None = None,
    classes: Sequence[Any] | None = None,
    by: str | Sequence[str] | None = None,
    confidence_level: float | None = None,
    level: str | None = None,
    num_bins: int = 10,
    ssc_bins: int = 3,
    ci: float = 0.95,
    alpha: float = 0.05,
    correction: str = "holm",
    n_calibration: int | None = None,
    hsic: bool = False,
    bounded_memory: bool = False,
) -> Report:
    """Evaluate every applicable metric per group and return a :class:`Report`.

    All metrics of one target level are computed in one query (one pass over
    the data); with a ``level=`` column, one query per distinct level.

    Parameters
    ----------
    frame
        Any frame narwhals supports (pandas, polars eager or lazy, DuckDB, ...).
        Lazy input stays lazy until the aggregated tables are collected (with
        polars' streaming engine for polars LazyFrames).
    y, lo, hi : str, optional
        Observed value and interval bounds: interval metrics (coverage with a
        Wilson interval, width, Winkler score, size-stratified coverage).
    label, score : str, optional
        Binary label (0/1) and predicted probability: calibration metrics
        (ECE, Brier, Kolmogorov-Smirnov, Kuiper, Spiegelhalter, reliability
        table), when the calibration family is installed.
    prediction_set : str, optional
        List column of predicted labels, with ``label`` the true label:
        prediction-set metrics, when the sets family is installed.
    classes : list, optional
        The possible labels of the prediction sets (default: the distinct
        values of ``label``).
    by : str or list of str, optional
        Group columns.
    confidence_level : float, optional
        Nominal coverage (the target of the under-coverage test, and the
        Winkler score's level).
    level : str, optional
        A column of nominal levels (several levels stacked in long format);
        it becomes a group column and each group's target.  Exclusive with
        ``confidence_level``.
    num_bins : int, default 10
        Score bins of the calibration metrics and the reliability table.
    ssc_bins : int, default 3
        Width bins of the size-stratified coverage.
    ci : float, default 0.95
        Confidence of the per-group coverage intervals.
    alpha : float, default 0.05
        Significance level of the under-coverage test (after correction).
    correction : {"holm", "bh", "none"}, default "holm"
        Multiplicity correction across all tested groups (all levels together).
    n_calibration : int, optional
        Size of the split-conformal calibration set: the under-coverage test
        then uses the exact Beta-binomial law (needs the conditional family).
    hsic : bool, default False
        Also compute HSIC (collects the width and coverage columns of each
        group, so it is off by default).
    bounded_memory : bool, default False
        Keep the engine's memory independent of the number of rows, for
        inputs larger than memory: no size-stratified coverage (its
        equal-count width bins need a sort within each group) and width
        quantiles from a 512-bin histogram per group (within ``(max - min) /
        512`` of the exact ones) instead of exact quantiles.  Everything
        else is unchanged (sums and counts).

    Returns
    -------
    Report

    Examples
    --------
    >>> import polars as pl
    >>> from conformal_frames.report import report
    >>> df = pl.DataFrame({"seg": ["a"] * 50 + ["b"] * 50,
    ...                    "y": [0.5] * 100,
    ...                    "lo": [0.0] * 50 + [0.0] * 30 + [0.6] * 20,
    ...                    "hi": [1.0] * 100})
    >>> rep = report(df, y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9)
    >>> rep.table["coverage"].to_list()
    [1.0, 0.6]
    >>> rep.under_covered["seg"].to_list()
    ['b']
    """
    import conformal_frames as cf

    keys_by = core._as_keys(by)
    if confidence_level is not None and level is not None:
        msg = "give either confidence_level= (one target) or level= (a column of targets), not both"
        raise ValueError(msg)
    if confidence_level is not None:
        from conformal_frames._params import check_probability

        confidence_level = check_probability(confidence_level, "confidence_level")
    if correction not in ("holm", "bh", "none"):
        msg = f"correction must be 'holm', 'bh' or 'none', got {correction!r}"
        raise ValueError(msg)
    interval_cols = {"y": y, "lo": lo, "hi": hi}
    given = [k for k, v in interval_cols.items() if v is not None]
    if given and len(given) != 3:
        missing = [k for k, v in interval_cols.items() if v is None]
        msg = f"interval metrics need y=, lo= and hi=; missing {', '.join(m + '=' for m in missing)}"
        raise ValueError(msg)
    if score is not None and label is None:
        msg = "calibration metrics need label= with score="
        raise ValueError(msg)
    if prediction_set is not None and label is None:
        msg = "prediction-set metrics need label= (the true label) with prediction_set="
        raise ValueError(msg)

    if isinstance(frame, (nw.DataFrame, nw.LazyFrame)):
        base = frame
    else:
        core._to_lazy(frame)  # the core's clear TypeError for series and non-frames
        base = nw.from_native(frame)
    schema = base.collect_schema()
    _schema_check(
        schema,
        {"y": y, "lo": lo, "hi": hi, "label": label, "score": score, "prediction_set": prediction_set, "level": level}
        | {f"by[{i}]": k for i, k in enumerate(keys_by)},
    )
    if level is not None and level in keys_by:
        msg = f"level column {level!r} is also in by=; give it only as level="
        raise ValueError(msg)
    notes: list[str] = []
    if score is not None and not hasattr(cf, "ece"):
        notes.append("calibration metrics are not available in this version; score= ignored")
    if prediction_set is not None and not hasattr(cf, "set_coverage"):
        notes.append("prediction-set metrics are not available in this version; prediction_set= ignored")
    if prediction_set is not None and classes is None and hasattr(cf, "set_coverage"):
        classes = sorted(_collect(base.select(nw.col(label)).unique()).get_column(label).to_list())  # type: ignore[arg-type]
    lazy_other = isinstance(base, nw.LazyFrame) and not base.implementation.is_polars()
    use_conditional = hasattr(cf, "coverage_test") and not lazy_other
    if n_calibration is not None and not use_conditional:
        msg = "n_calibration= needs conformal_frames.coverage_test on eager or polars input"
        raise ValueError(msg)
    if bounded_memory:
        if hsic:
            msg = "hsic=True needs all rows of each group; it cannot run with bounded_memory=True"
            raise ValueError(msg)
        ssc_bins = 0
        notes.append("bounded memory: no size-stratified coverage; width quantiles from 512-bin histograms")
    plan = _Plan(
        y,
        lo,
        hi,
        label,
        score,
        prediction_set,
        list(classes) if classes is not None else None,
        num_bins,
        ssc_bins,
        ci,
        alpha,
        correction,
        n_calibration,
        hsic,
        use_conditional,
    )
    keys = [*keys_by, *([level] if level is not None else [])]
    levels: list[float | None] = _level_values(base, level) if level is not None else [confidence_level]
    families = plan.families(levels[0])
    if not families:
        msg = (
            "nothing to report: give y=, lo=, hi= (intervals), label= and score= (calibration) "
            "or label= and prediction_set= (prediction sets)"
        )
        raise ValueError(msg)

    # one query per level, stacked
    parts = []
    for v in levels:
        fam = plan.families(v)
        metrics = [m for ms in fam.values() for m in ms]
        sub = base if level is None else base.filter(nw.col(level) == v)
        part = core.compute(sub, metrics, keys_by or None)
        if level is not None:
            part = part.with_columns(nw.lit(v, nw.Float64).alias(level))
        parts.append(part)
    wide = _fresh_index(_collect(parts[0] if len(parts) == 1 else nw.concat(parts, how="vertical")))
    wide = wide.select(*keys, *[c for c in wide.columns if c not in keys])
    if keys:
        wide = wide.sort(*keys)
    invalid = int(wide.get_column("n_invalid").sum() or 0) if "n_invalid" in wide.columns else 0

    tables: dict[str, nw.DataFrame] = {}
    summary: dict[str, Any] = {}
    common = ["n", *(["n_invalid"] if invalid else [])]
    for name, ms in families.items():
        cols = [c for m in ms for c in m.output_names(schema, keys_by)]
        t = wide.select(*keys, *cols, *common)
        if name == "intervals":
            tables[name] = t
            if ssc_bins:
                t, tables["ssc"] = _split_bins(t, keys, "ssc", ssc_bins, {"ssc": "coverage"})
            tables[name] = _with_test(t, "coverage", "__cf_test", level, confidence_level, alpha, correction, summary)
            continue
        elif name == "sets":
            t = _with_test(t, "set_coverage", "__cf_settest", level, confidence_level, alpha, correction, summary)
        elif name == "reliability":
            _, t = _split_bins(t, keys, "reliability", num_bins, {})
        tables[name] = t
    if "intervals" in tables:
        assert lo is not None and hi is not None
        tables["widths"] = (
            _widths_histogram(base, lo, hi, keys) if bounded_memory else _collect(_widths_query(base, lo, hi, keys))
        )
    if "reliability" in tables:  # keep the display order: reliability last
        tables["reliability"] = tables.pop("reliability")
    summary = _summary(
        tables, keys, level, confidence_level, [f for f in families if f != "reliability"], notes, summary
    )
    summary["invalid_rows"] = invalid
    columns = {
        k: v
        for k, v in {
            "y": y,
            "lo": lo,
            "hi": hi,
            "label": label,
            "score": score,
            "prediction_set": prediction_set,
            "level": level,
        }.items()
        if v is not None
    }
    return Report(tables=tables, summary=summary, keys=keys, by=keys_by, level=level, columns=columns)


def _fresh_index(t: nw.DataFrame) -> nw.DataFrame:
    """pandas-like frames get a default 0..n-1 index (polars and pyarrow have none)."""
    if t.implementation.is_pandas_like():
        return nw.from_native(nw.to_native(t).reset_index(drop=True), eager_only=True)
    return t


def _native(t: nw.DataFrame) -> Any:
    return nw.to_native(_fresh_index(t))


def _split_bins(
    t: nw.DataFrame, keys: list[str], name: str, num_bins: int, rename: dict[str, str]
) -> tuple[nw.DataFrame, nw.DataFrame]:
    """Wide per-bin columns ``{name}_bin{b}[_{field}]`` to a long table ``keys, bin, fields..., n``."""
    prefix = f"{name}_bin"
    bin_cols = [c for c in t.columns if c.startswith(prefix)]
    fields = sorted(
        {c[len(prefix) :].partition("_")[2] for c in bin_cols} - {"n"},
        key=lambda f: [c[len(prefix) :].partition("_")[2] for c in bin_cols].index(f),
    )
    parts = []
    for b in range(num_bins):
        sel = [nw.col(f"{prefix}{b}{'_' + f if f else ''}").alias(rename.get(f or name, f or name)) for f in fields]
        parts.append(
            t.select(*keys, nw.lit(b, nw.Int64).alias("bin"), *sel, nw.col(f"{prefix}{b}_n").cast(nw.Int64).alias("n"))
        )
    long = nw.concat(parts, how="vertical").filter(nw.col("n") > 0)
    long = long.sort(*keys, "bin") if keys else long.sort("bin")
    return t.drop(*bin_cols), long


def _with_test(
    t: nw.DataFrame,
    cov: str,
    test: str,
    level: str | None,
    confidence_level: float | None,
    alpha: float,
    correction: str,
    summary: dict[str, Any],
) -> nw.DataFrame:
    """Target, p-values (conditional family, else the fallback), flag."""
    if level is not None:
        t = t.with_columns(nw.col(level).cast(nw.Float64).alias("target"))
    elif confidence_level is not None:
        t = t.with_columns(nw.lit(confidence_level, nw.Float64).alias("target"))
    else:
        return t
    n = t.get_column("n").to_numpy().astype(float)
    target = t.get_column("target").to_numpy().astype(float)
    names = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no correction"}
    if f"{test}_pvalue" in t.columns:  # the conditional family's grouped inference
        import conformal_frames.conditional as cond

        p = _floats(t, f"{test}_pvalue")
        adjust = {"holm": cond.holm, "bh": cond.benjamini_hochberg, "none": lambda x: np.asarray(x, float)}[correction]
        adj = np.full(p.shape, np.nan)
        ok = ~np.isnan(p)
        adj[ok] = adjust(p[ok])
        flag = np.where(np.isnan(adj), False, adj < alpha)
        source = "conformal_frames.coverage_test"
        t = t.drop(*[c for c in t.columns if c.startswith(test)])
    else:
        k = np.round(_floats(t, cov) * n)
        out = under_coverage_test(k, n, target, alpha=alpha, correction=correction)
        p, adj, flag = out["pvalue"], out["pvalue_adjusted"], out["flag"]
        source = "the report's fallback"
    ns = nw.get_native_namespace(t)
    t = t.with_columns(
        nw.new_series("pvalue", p, nw.Float64, backend=ns).fill_nan(None),
        nw.new_series("pvalue_adjusted", adj, nw.Float64, backend=ns).fill_nan(None),
        nw.new_series("under_covered", flag, nw.Boolean, backend=ns),
    )
    summary.setdefault(
        "test",
        f"one-sided exact binomial test of coverage >= target, {names[correction]}, alpha={alpha:g}; by {source}",
    )
    return t


def _floats(t: nw.DataFrame, name: str) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in t.get_column(name).to_list()], dtype=float)


def _summary(
    tables: dict[str, nw.DataFrame],
    keys: list[str],
    level: str | None,
    confidence_level: float | None,
    families: list[str],
    notes: list[str],
    summary: dict[str, Any],
) -> dict[str, Any]:
    main_name = next(k for k in ("intervals", "sets", "calibration") if k in tables)
    main = tables[main_name]
    n = main.get_column("n").to_numpy().astype(float)
    out: dict[str, Any] = {"rows": int(n.sum()), "groups": len(main), "families": families}
    if confidence_level is not None:
        out["target"] = confidence_level
    elif level is not None:
        out["target"] = f"column {level!r}"
    cov_col = {"intervals": "coverage", "sets": "set_coverage"}.get(main_name)
    if cov_col is not None:
        t = main
        cov = _floats(t, cov_col)
        target = _floats(t, "target") if "target" in t.columns else np.full(len(t), np.nan)
        pooled = []
        for tv in sorted(set(target[~np.isnan(target)].tolist())) or [None]:
            sel = np.ones(len(t), bool) if tv is None else target == tv
            sel &= ~np.isnan(cov)
            if sel.any():
                item = {
                    "target": tv,
                    "coverage": float((cov[sel] * n[sel]).sum() / n[sel].sum()),
                    "n": int(n[sel].sum()),
                }
                if tv is not None and keys:
                    dev = np.abs(cov[sel] - tv)
                    item["gap"] = float(dev.mean())
                    item["gap_weighted"] = float((dev * n[sel]).sum() / n[sel].sum())
                pooled.append(item)
        out["pooled_coverage"] = pooled
        gap = cov - target if "target" in t.columns else cov
        if keys and np.isfinite(gap).any():
            i = int(np.nanargmin(gap))
            named = dict(zip(t.columns, t.row(i)))
            out["worst_group"] = {
                "group": {k: _plain(named[k]) for k in keys},
                "coverage": float(cov[i]),
                "target": None if np.isnan(target[i]) else float(target[i]),
                "n": int(n[i]),
            }
        if "under_covered" in t.columns:
            flagged = t.filter(nw.col("under_covered"))
            out["tested"] = int(np.isfinite(_floats(t, "pvalue")).sum())
            out["test"] = summary.get("test")
            out["under_covered"] = [
                {
                    "group": {k: _plain(r[k]) for k in keys},
                    "coverage": _plain(r[cov_col]),
                    "target": _plain(r["target"]),
                    "n": int(r["n"]),
                    "pvalue_adjusted": _plain(r["pvalue_adjusted"]),
                }
                for r in flagged.iter_rows(named=True)
            ]
    out["notes"] = notes
    return out
