"""The :class:`Report` object: tables, summary, rendering and export."""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import narwhals.stable.v2 as nw

from conformal_frames.reporting import render
from conformal_frames.reporting.summary import main_family, plain
from conformal_frames.reporting.tables import CURVES, PER_BIN, PER_LEVEL

#: groups shown in text and HTML tables by default (``Report.max_rows``)
MAX_ROWS = 50
#: segments shown in each plot by default (``Report.max_segments``)
MAX_SEGMENTS = 50
#: one row per group and bin: pivoted for display, left out of the per-group long form (metrics())
_LONG = PER_BIN
#: one row per group and level: shown as they are, left out of the per-group long form (metrics())
_PER_LEVEL = PER_LEVEL


@dataclass
class Report:
    """The result of :func:`~conformal_frames.reporting.report`.

    Attributes
    ----------
    tables : dict of str to frame
        Tidy tables by family (narwhals frames; :meth:`frame` gives the
        native one), each with the group columns first: ``"intervals"``
        (coverage with its interval, width, Winkler score, SSC score, target,
        test columns), ``"ssc"`` (coverage per width bin), ``"widths"`` (width
        quantiles per group), and when they apply ``"sets"``,
        ``"calibration"``, ``"reliability"``, ``"forecast"`` (forecast scores
        per group), ``"pit_histogram"`` / ``"quantile_pit_histogram"`` (one
        row per group and PIT bin), ``"quantile_coverage"`` and
        ``"interval_coverage"`` (one row per group and level).
    summary : dict
        Rows, groups, pooled coverage per target (with the rows it
        excludes) and the coverage gap, worst group, the significantly
        under-covered groups, the groups that could not be tested, invalid
        and dropped rows, the test used.
    keys : list of str
        Group columns of the tables (``by`` plus a level column).
    by : list of str
        The ``by=`` columns.
    confidence_level : float or str or None
        The target: a number, or the column of nominal levels.
    columns : dict of str to str
        The columns of each role (``y``, ``lo``, ``hi``, ``score``, ...).
    max_rows : int or None, default 50
        Groups shown in the text and HTML tables (the most important ones,
        with a count of the rest); ``None`` shows every group.
    max_segments : int or None, default 50
        Segments drawn in each plot (the worst ones by the test, with a
        summary line of the rest); ``None`` draws every segment.
    horizon : str or None
        The column of the forecasts' lead time (a key after ``by``): the
        models are the ``by`` groups.
    monitoring : dict
        With ``order_by=``: ``"alarms"``, one row per segment at its last
        period (:func:`~conformal_frames.coverage_alarms`), and
        ``"sequence"``, the running coverage per segment and period
        (:func:`~conformal_frames.coverage_sequence`); empty otherwise.
    """

    tables: dict[str, Any]
    summary: dict[str, Any]
    keys: list[str]
    by: list[str]
    confidence_level: float | str | None = None
    columns: dict[str, str] = field(default_factory=dict)
    max_rows: int | None = MAX_ROWS
    max_segments: int | None = MAX_SEGMENTS
    horizon: str | None = None
    #: with ``order_by=``: ``"alarms"`` (one row per segment) and ``"sequence"`` (per segment and period)
    monitoring: dict[str, Any] = field(default_factory=dict)
    _figures: dict[str, Any] = field(default_factory=dict, repr=False)
    _figures_cap: int | None = field(default=None, repr=False)

    # -- frames -----------------------------------------------------------
    @property
    def level_column(self) -> str | None:
        """The column of nominal levels, when the target is a column."""
        return self.confidence_level if isinstance(self.confidence_level, str) else None

    @property
    def table(self) -> Any:
        """The main table: interval metrics per group (else sets, else calibration)."""
        return self.frame(main_family(self.tables))

    @property
    def under_covered(self) -> Any:
        """Groups whose coverage is significantly below the target."""
        return self._flagged("under_covered", "no under-coverage test", ["pvalue", "pvalue_adjusted"])

    @property
    def over_covered(self) -> Any:
        """Groups whose coverage is significantly above the target (intervals or sets too wide)."""
        return self._flagged("over_covered", "no coverage test", ["pvalue_over_adjusted"])

    def _flagged(self, flag: str, missing: str, pvalues: list[str]) -> Any:
        """The rows of the coverage table (intervals, else sets) whose ``flag`` is true."""
        name = next((k for k in ("intervals", "joint_coverage") if k in self.tables), "sets")
        t = self.tables.get(name)
        if t is None or flag not in t.columns:
            msg = f"{missing}: give y, lo, hi (or y and sets) and a target (confidence_level=)"
            raise ValueError(msg)
        cov = "set_coverage" if name == "sets" else "coverage"
        cols = [*self.keys, cov, "target", "n", *pvalues]
        return nw.to_native(nw.maybe_reset_index(t.filter(nw.col(flag).fill_null(False)).select(*cols)))

    def frame(self, name: str) -> Any:
        """One table by family name, as a native frame."""
        return nw.to_native(nw.maybe_reset_index(self.tables[name]))

    def metrics(self) -> Any:
        """All metrics in long (tidy) form: keys, ``family``, ``metric``, ``value``.

        Only numeric metric columns of the per-group tables (not the per-bin
        ``ssc``/``reliability``/PIT histogram tables, the per-level ``quantile_coverage`` /
        ``interval_coverage`` tables nor ``widths``).
        """
        records = self._long_records()
        ns = nw.get_native_namespace(next(iter(self.tables.values())))
        names = [*self.keys, "family", "metric", "value"]
        cols: dict[str, list[Any]] = {k: [r.get(k) for r in records] for k in names}
        return nw.to_native(nw.from_dict(cols, backend=ns))

    def _long_records(self, *, per_level: bool = False) -> list[dict[str, Any]]:
        """Keys, family, metric, value of each per-group metric (``per_level``: also each per-level one,
        as ``metric@level``, e.g. ``coverage@0.9``)."""
        out: list[dict[str, Any]] = []
        for family, t in self.tables.items():
            if per_level and family in _PER_LEVEL:
                keys = [k for k in self.keys if k in t.columns]
                out += _level_records(t, keys, family)
                continue
            if family in (*_LONG, *_PER_LEVEL, *CURVES, "widths"):
                continue
            keys = [k for k in self.keys if k in t.columns]
            values = [c for c in t.columns if c not in keys and render.is_numeric(t.schema[c])]
            for row in t.iter_rows(named=True):
                for c in values:
                    rec = {k: row[k] for k in keys}
                    rec.update(family=family, metric=c, value=_number(row[c]))
                    out.append(rec)
        return out

    # -- plots ------------------------------------------------------------
    def figures(self) -> dict[str, Any]:
        """The report's plots (matplotlib Figures) by name; needs the ``[plot]`` extra."""
        if not self._figures or self._figures_cap != self.max_segments:
            from conformal_frames.plots import report_figures  # plots never imports the report

            self._figures, self._figures_cap = report_figures(self), self.max_segments
        return self._figures

    # -- rendering --------------------------------------------------------
    def _header_lines(self) -> list[str]:
        return render.header_lines(self.summary, self.keys, self.columns, self.max_rows)

    def _display_tables(self) -> list[tuple[str, nw.DataFrame, str]]:
        """(title, table, left-out line) as shown in text and HTML: capped, per-bin tables pivoted."""
        return [(title, t, more) for _, title, t, more in self._named_tables()]

    def _named_tables(self) -> list[tuple[str, str, nw.DataFrame, str]]:
        """(name, title, table, left-out line) of each displayed table, in display order."""
        main = self.tables[main_family(self.tables)]
        shown = render.shown_keys(main, self.keys, self.max_rows)
        out = []
        for name, t in self.tables.items():
            keys = [k for k in self.keys if k in t.columns]
            if name in ("widths", *CURVES) or (
                name == "forecast" and set(t.columns) <= {*keys, "n", "n_invalid", "n_dropped"}
            ):
                continue  # widths: plotted; a forecast table without scores (intervals only): counts only
            if name in _LONG:
                t = render.pivot_bins(t, keys, "coverage" if name == "ssc" else "frequency")
            elif name in _PER_LEVEL:  # one row per group (the full table: frame, JSON, CSV)
                t = render.pivot_levels(t, keys, name)
            t, left = render.restrict(t, keys, shown)
            more = render.more_line(left, f"rep.frame({name!r})") if left else ""
            out.append((name, render.TITLES.get(name, name), t, more))
        return out

    def __str__(self) -> str:
        parts = ["\n".join(self._header_lines())]
        for title, t, more in self._display_tables():
            parts.append(f"{title}\n{render.split_text_table(t, self.keys)}" + (f"\n{more}" if more else ""))
        if self.monitoring:  # issue 40
            parts.append(f"{render.MONITORING_TITLE}\n{render.split_text_table(self.monitoring['alarms'], self.keys)}")
        return "\n\n".join(parts)

    def __repr__(self) -> str:
        s = self.summary
        return f"<Report: {s['rows']} rows, {s['groups']} groups, families {s.get('families')}>"

    def _html_body(self, *, images: dict[str, str] | None = None) -> str:
        """The page: title, the summary (verdict, worst and flagged groups), contents, tables, figures."""
        s = self.summary
        flagged = {tuple(g["group"].get(k) for k in self.keys) for g in s.get("under_covered") or []}
        tables = self._named_tables()
        toc = ['<li><a href="#summary">Summary</a></li>', '<li><a href="#tables">Tables</a><ol>']
        toc += [f'<li><a href="#table-{name}">{html.escape(title)}</a></li>' for name, title, _, _ in tables]
        toc.append("</ol></li>")
        if images:
            toc.append('<li><a href="#figures">Figures</a><ol>')
            toc += [f'<li><a href="#figure-{name}">{html.escape(_figure_title(name))}</a></li>' for name in images]
            toc.append("</ol></li>")
        body = [
            '<div class="cf-report">',
            f"<header><h1>{html.escape(self._header_lines()[0])}</h1>{render.html_meta(s, self.keys, self.columns)}</header>",
            render.html_headline(s, self.keys, self.columns, self.max_rows, self.tables.get("calibration")),
            f'<nav class="cf-toc" aria-label="Contents"><strong>Contents</strong><ol>{"".join(toc)}</ol></nav>',
            '<section id="tables"><h2>Tables</h2>',
        ]
        if any("under_covered" in t.columns for _, _, t, _ in tables):
            untested = (
                '<span class="cf-swatch" style="background:#fff3cd"></span>not tested (invalid rows)'
                if s.get("untested")
                else ""
            )
            body.append(
                '<p class="cf-legend">Highlighted rows:<span class="cf-swatch" style="background:#fbdedb"></span>'
                f"significantly below the target{untested}.</p>"
            )
        for name, title, t, more in tables:
            caption = render.CAPTIONS.get(name)
            body.append(f'<section id="table-{name}"><h3>{html.escape(title)}</h3>')
            if caption:
                body.append(f'<p class="cf-caption">{html.escape(caption)}</p>')
            for block in render.column_blocks(t, self.keys, width=render.HTML_WIDTH, html=True):
                body.append(f'<div class="cf-scroll">{render.html_table(block, self.keys, flagged)}</div>')
            if more:
                body.append(f'<p class="cf-more">{html.escape(more)}</p>')
            body.append("</section>")
        if self.monitoring:  # issue 40
            body.append(f'<section id="table-monitoring"><h3>{html.escape(render.MONITORING_TITLE)}</h3>')
            for block in render.column_blocks(self.monitoring["alarms"], self.keys, width=render.HTML_WIDTH, html=True):
                body.append(f'<div class="cf-scroll">{render.html_table(block, self.keys, set())}</div>')
            body.append("</section>")
        body.append("</section>")
        if images:
            body.append('<section id="figures"><h2>Figures</h2>')
            for i, (name, data) in enumerate(images.items(), start=1):
                caption = render.FIGURE_CAPTIONS.get(name, _figure_title(name) + ".")
                body.append(
                    f'<figure id="figure-{name}"><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption><strong>Figure {i}.</strong> {html.escape(caption)}</figcaption></figure>"
                )
            body.append("</section>")
        body.append("</div>")
        return "".join(body)

    def _repr_html_(self) -> str:
        return f"<style>{render.CSS}</style>{self._html_body()}"

    def to_html(self, path: str | Path | None = None, *, plots: bool = True) -> str:
        """A self-contained HTML page (plots embedded as base64 PNG, inline CSS for screen and print).

        The page opens with the verdict (the groups significantly below their
        target, the worst group, the pooled coverage), then a table of contents,
        the tables (flagged rows highlighted) and the figures, each captioned.

        Writes it to ``path`` when given; returns the HTML text.  ``plots=False``
        (or matplotlib missing) leaves the plots out.
        """
        images: dict[str, str] = {}
        if plots:
            try:
                figs = self.figures()
            except ImportError:
                figs = {}
            images = {name: base64.b64encode(_png(fig)).decode("ascii") for name, fig in figs.items()}
        title = html.escape(self._header_lines()[0])
        page = (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{title}</title><style>{render.CSS}</style></head><body style="margin:0">'
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

    # -- export -----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Summary and every table as lists of records (JSON-ready)."""
        return {
            "summary": _jsonable(self.summary),
            "tables": {name: [_jsonable(r) for r in t.iter_rows(named=True)] for name, t in self.tables.items()},
            **(
                {"monitoring": {k: [_jsonable(r) for r in t.iter_rows(named=True)] for k, t in self.monitoring.items()}}
                if self.monitoring
                else {}
            ),
        }

    def to_csv(self, path: str | Path | None = None) -> str:
        """All metrics in long form (:meth:`metrics`) as CSV, with the per-level tables' values as
        ``metric@level`` (``coverage@0.9``, ``coverage_ci_low@0.9``, ...); written to ``path`` if given."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        cols = [*self.keys, "family", "metric", "value"]
        writer.writerow(cols)
        for rec in self._long_records(per_level=True):
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


#: the figures' short names in the table of contents
_FIGURE_TITLES = {
    "coverage_by_segment": "Coverage by group",
    "coverage_vs_level": "Coverage against the nominal level",
    "ssc": "Size-stratified coverage",
    "width_distribution": "Interval widths",
    "reliability": "Reliability diagram",
    "quantile_calibration": "Quantile calibration",
    "pit_histogram": "PIT histogram",
    "quantile_pit_histogram": "PIT histogram of the quantile forecast",
    "score_by_horizon": "Scores by horizon",
    "coverage_by_horizon": "Coverage by horizon",
    "uncertainty_calibration_curve": "Uncertainty calibration curve",
}


def _figure_title(name: str) -> str:
    return _FIGURE_TITLES.get(name, name.replace("_", " ").capitalize())


def _level_records(t: nw.DataFrame, keys: list[str], family: str) -> list[dict[str, Any]]:
    """A per-level table's numbers in long form: ``metric@level`` (the level column's value, ``:g``)."""
    level = render.LEVEL_COLUMNS[family][0]
    values = [c for c in t.columns if c not in (*keys, level) and render.is_numeric(t.schema[c])]
    return [
        {k: row[k] for k in keys} | {"family": family, "metric": f"{c}@{row[level]:g}", "value": _number(row[c])}
        for row in t.iter_rows(named=True)
        for c in values
    ]


def _number(v: Any) -> Any:
    """A metric value for the long table: Booleans as 0.0/1.0 so the column stays numeric."""
    v = plain(v)
    return float(v) if isinstance(v, bool) else v


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    v = plain(obj)
    if isinstance(v, float) and math.isinf(v):
        return None
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()
