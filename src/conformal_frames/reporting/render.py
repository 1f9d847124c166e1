"""Text and HTML rendering of a report: headline, capped tables, the HTML page's parts.

The HTML page (:meth:`~conformal_frames.reporting.Report.to_html`) has a
summary block (:func:`html_headline`: the verdict, flagged, untested and worst
groups, pooled coverage, the test), tables with sentence captions
(:data:`CAPTIONS`), figures with sentence captions (:data:`FIGURE_CAPTIONS`)
and one inline style sheet (:data:`CSS`, screen and print).

Tables longer than ``max_rows`` groups show the groups that matter most (the
significantly under-covered ones, the untested ones, then the lowest
coverage relative to the target; calibration: the largest ECE), in key
order, followed by a line counting what was left out.  The full tables stay
available from the :class:`~conformal_frames.reporting.Report`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._widths import floats
from conformal_frames.reporting.summary import plain

TITLES = {
    "intervals": "Interval metrics per group",
    "ssc": "Size-stratified coverage (width bins, 0 = narrowest)",
    "calibration": "Calibration per group",
    "decomposition": "Brier score decomposition: score = miscalibration - discrimination + uncertainty",
    "reliability": "Reliability: observed frequency per score bin (mean scores and intervals in .frame('reliability'))",
    "sets": "Prediction-set metrics per group",
    "forecast": (
        "Forecast scores per group (CRPS; PIT uniformity test; pinball loss; WIS and its components; "
        "quantile_coverage_mad = mean |coverage - level| over the quantile levels; "
        "point errors; mae_skill = 1 - MAE / MAE of the baseline)"
    ),
    "pit_histogram": "PIT histogram: frequency per bin (uniform: 1/n_bins; band in .frame('pit_histogram'))",
    "quantile_pit_histogram": (
        "PIT histogram of the quantile forecast: frequency per bin (band in .frame('quantile_pit_histogram'))"
    ),
    "quantile_coverage": (
        "Quantile coverage: fraction of y <= quantile, one column per level (with Wilson intervals and "
        "deviations in .frame('quantile_coverage'), to_json(), to_csv())"
    ),
    "interval_coverage": (
        "Interval coverage and mean width, one column per confidence level (with Wilson intervals and "
        "Winkler scores in .frame('interval_coverage'), to_json(), to_csv())"
    ),
    "joint_coverage": (
        "Joint coverage per group (every output inside its interval; coverage_output<j>: output j alone; "
        "width: the mean box volume, width_output<j>: output j's mean width)"
    ),
    "uncertainty_calibration": (
        "Uncertainty calibration per group (mean=, std=): ENCE, UCE, mean absolute / root mean squared "
        "calibration error and miscalibration area of the central intervals over 100 levels, sharpness "
        "(the curve in .frame('uncertainty_calibration_curve'))"
    ),
}

#: one sentence under each table's heading (the HTML page)
CAPTIONS = {
    "intervals": (
        "One row per group: the share of rows whose interval holds y (with its confidence interval), the mean width, "
        "the Winkler score and the one-sided test of coverage against the target."
    ),
    "ssc": (
        "Coverage within each width bin of a group (equal-count bins, bin 0 the narrowest intervals): "
        "a conditional method keeps every bin near the target."
    ),
    "calibration": "One row per group: expected calibration error, Brier score and the calibration tests.",
    "decomposition": "The Brier score of each group split into miscalibration, discrimination and uncertainty.",
    "reliability": "The observed frequency of the event in each score bin: a calibrated score matches its bin.",
    "sets": "One row per group: the share of sets that hold the true label, the mean set size and the test.",
    "forecast": "One row per group: the forecast scores (lower is better) and the PIT uniformity test.",
    "pit_histogram": "The share of PIT values in each bin: a calibrated forecast puts 1/n_bins in every bin.",
    "quantile_pit_histogram": "The PIT histogram of the quantile forecast: a calibrated forecast is flat.",
    "quantile_coverage": "For each quantile level (a column), the share of rows with y at or below the quantile.",
    "interval_coverage": "For each confidence level (a column), the coverage of the central interval and its width.",
    "joint_coverage": (
        "One row per group: the share of rows whose every output lies in its interval (with its confidence "
        "interval and the test against the target), each output's coverage, the mean volume and widths."
    ),
}

#: one sentence under each figure (the HTML page), by figure name
FIGURE_CAPTIONS = {
    "coverage_by_segment": (
        "Coverage of each group with its confidence interval; the dashed line is the target "
        "and red points are groups significantly below it."
    ),
    "coverage_vs_level": "Coverage against the nominal level for each group; the diagonal is exact coverage.",
    "ssc": "Coverage within each width bin, bars from 0; the dashed line is the target.",
    "width_distribution": "Interval widths of each group: box from the 25th to the 75th percentile, whiskers 5-95.",
    "reliability": "Observed frequency against the mean score per bin; the diagonal is perfect calibration.",
    "quantile_calibration": "Observed share of y below each quantile against its level; the diagonal is calibration.",
    "pit_histogram": "PIT histogram of the forecast; a calibrated forecast stays inside the grey band.",
    "quantile_pit_histogram": "PIT histogram of the quantile forecast; a calibrated forecast stays inside the band.",
    "score_by_horizon": "Each forecast score against the horizon, one line per model (lower is better).",
    "coverage_by_horizon": (
        "Coverage against the horizon, one line per model with its Wilson interval: the intervals at their "
        "target, each central interval and each quantile level; the dashed line is the target."
    ),
}

#: the page's style: readable on screen and in print, scoped to ``.cf-report``
CSS = """
.cf-report{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:15px;line-height:1.45;
color:#1d2430;max-width:1200px;margin:0 auto;padding:16px 24px 48px;box-sizing:border-box}
.cf-report *{box-sizing:border-box}
.cf-report h1{font-size:1.55em;margin:0.2em 0 0.1em}
.cf-report h2{font-size:1.25em;margin:1.6em 0 0.4em;padding-bottom:0.2em;border-bottom:2px solid #e3e7ee}
.cf-report h3{font-size:1.05em;margin:1.4em 0 0.2em}
.cf-report p{margin:0.3em 0 0.6em}
.cf-report .cf-meta{color:#5a6473;font-size:0.9em;margin:0 0 1em}
.cf-report .cf-meta code{font-size:0.95em}
.cf-report .cf-verdict{border-left:6px solid #7a8699;background:#f4f6f9;padding:12px 18px;margin:0 0 1.2em;
border-radius:4px}
.cf-report .cf-verdict.cf-bad{border-color:#c0392b;background:#fdf0ef}
.cf-report .cf-verdict.cf-ok{border-color:#2e8b57;background:#eef8f1}
.cf-report .cf-verdict.cf-warn{border-color:#d4a017;background:#fff8e1}
.cf-report .cf-verdict-line{font-size:1.15em;font-weight:600;margin:0 0 0.4em}
.cf-report .cf-verdict ul{margin:0.2em 0 0.4em;padding-left:1.3em}
.cf-report .cf-verdict li{margin:0.1em 0}
.cf-report .cf-facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0.4em 0}
.cf-report .cf-facts dt{font-weight:600;color:#3d4756}.cf-report .cf-facts dd{margin:0}
.cf-report .cf-notes{color:#5a6473;font-size:0.9em}
.cf-report .cf-warning{color:#8a1f11;font-weight:600}
.cf-report nav.cf-toc{background:#fafbfc;border:1px solid #e3e7ee;border-radius:4px;padding:8px 18px;margin:0 0 1em}
.cf-report nav.cf-toc ol{margin:0.2em 0;padding-left:1.4em}
.cf-report nav.cf-toc a{color:#1f5fa8;text-decoration:none}.cf-report nav.cf-toc a:hover{text-decoration:underline}
.cf-report .cf-caption{color:#3d4756;font-size:0.92em;max-width:75ch}
.cf-report .cf-scroll{overflow-x:auto;max-width:100%;margin:0 0 0.6em}
.cf-report table{border-collapse:collapse;margin:0 0 0.4em 0;font-size:0.86em;font-variant-numeric:tabular-nums}
.cf-report th,.cf-report td{border-bottom:1px solid #e3e7ee;padding:3px 8px;text-align:right;white-space:nowrap}
.cf-report th{background:#f0f3f7;border-bottom:2px solid #c9d1dc;white-space:normal;vertical-align:bottom}
.cf-report th.cf-key,.cf-report td.cf-key{text-align:left;font-weight:600}
.cf-report tbody tr:nth-child(even) td{background:#fafbfc}
.cf-report tr.cf-flag td,.cf-report tbody tr.cf-flag:nth-child(even) td{background:#fbdedb}
.cf-report tr.cf-flag td:first-child{box-shadow:inset 4px 0 0 #c0392b}
.cf-report tr.cf-untested td,.cf-report tbody tr.cf-untested:nth-child(even) td{background:#fff3cd}
.cf-report .cf-legend{font-size:0.85em;color:#5a6473}
.cf-report .cf-swatch{display:inline-block;width:0.9em;height:0.9em;vertical-align:-0.1em;border-radius:2px;
margin:0 0.3em 0 0.8em}
.cf-report p.cf-more{color:#5a6473;font-style:italic}
.cf-report figure{margin:0 0 1.6em;break-inside:avoid;page-break-inside:avoid}
.cf-report img{max-width:100%;height:auto;display:block;border:1px solid #e3e7ee}
.cf-report figcaption{font-size:0.92em;color:#3d4756;margin-top:0.3em;max-width:75ch}
@media print{
.cf-report{max-width:none;padding:0;font-size:10.5pt;color:#000}
.cf-report nav.cf-toc{break-after:avoid}
.cf-report h2,.cf-report h3{break-after:avoid;page-break-after:avoid}
.cf-report .cf-scroll{overflow:visible}
.cf-report table{font-size:8.5pt}
.cf-report tr{break-inside:avoid;page-break-inside:avoid}
.cf-report tr.cf-flag td,.cf-report tr.cf-untested td,.cf-report .cf-verdict{-webkit-print-color-adjust:exact;
print-color-adjust:exact}
.cf-report img{border:none;max-height:24cm;width:auto}
.cf-report a{color:inherit}
}
"""


# ---------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------
def is_numeric(dtype: Any) -> bool:
    return bool(dtype.is_numeric() or dtype == nw.Boolean)


def fmt(v: Any) -> str:
    v = plain(v)
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) < 1e-3 or abs(v) >= 1e5:
            return f"{v:.3e}"
        return f"{v:.4f}" if abs(v) < 10 else f"{v:.2f}"
    return str(v)


def label(group: dict[str, Any]) -> str:
    return ", ".join(f"{k}={plain(v)}" for k, v in group.items()) or "all rows"


def _cell(v: Any, key: bool) -> str:
    if key:
        v = plain(v)
        return "-" if v is None else str(v)
    return fmt(v)


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# ---------------------------------------------------------------------------
# which groups to show
# ---------------------------------------------------------------------------
def rank(t: nw.DataFrame) -> np.ndarray:
    """Row indices, most important first (under-covered, untested, over-covered, lowest coverage vs target)."""
    m = len(t)
    cov_col = next((c for c in ("coverage", "set_coverage") if c in t.columns), None)
    if cov_col is not None:
        cov = floats(t, cov_col)
        target = floats(t, "target") if "target" in t.columns else np.zeros(m)
        p = floats(t, "pvalue_adjusted") if "pvalue_adjusted" in t.columns else np.ones(m)
        flags = t.get_column("under_covered").to_list() if "under_covered" in t.columns else [False] * m
        flagged = np.array([v is True for v in flags], dtype=bool)
        over = np.array(
            [v is True for v in t.get_column("over_covered").to_list()] if "over_covered" in t.columns else [False] * m,
            dtype=bool,
        )
        untested = np.isnan(cov) | np.isnan(p)
        score = np.where(flagged, 0, np.where(untested, 1, np.where(over, 2, 3)))
        return np.lexsort((np.nan_to_num(cov - target, nan=0.0), np.nan_to_num(p, nan=1.0), score))
    if "ece" in t.columns:
        return np.argsort(-np.nan_to_num(floats(t, "ece"), nan=np.inf), kind="stable")
    return np.arange(m)


def shown_keys(t: nw.DataFrame, keys: Sequence[str], max_rows: int | None) -> set[tuple[Any, ...]] | None:
    """Key tuples of the groups to show (None: all)."""
    if max_rows is None or len(t) <= max_rows or not keys:
        return None
    idx = rank(t)[:max_rows]
    cols = [t.get_column(k).to_list() for k in keys]
    return {tuple(c[i] for c in cols) for i in idx}


def restrict(t: nw.DataFrame, keys: Sequence[str], shown: set[tuple[Any, ...]] | None) -> tuple[nw.DataFrame, int]:
    """The rows of the shown groups, and how many groups were left out."""
    keys = [k for k in keys if k in t.columns]
    if shown is None or not keys:
        return t, 0
    width = len(keys)
    wanted = {s[:width] for s in shown}
    cols = [t.get_column(k).to_list() for k in keys]
    keep = [tuple(c[i] for c in cols) in wanted for i in range(len(t))]
    groups = {tuple(c[i] for c in cols) for i in range(len(t))}
    ns = nw.get_native_namespace(t)
    mask = nw.new_series("__cf_keep", keep, nw.Boolean, backend=ns)
    return t.filter(mask), len(groups - wanted)


def pivot_bins(t: nw.DataFrame, keys: list[str], value: str) -> nw.DataFrame:
    """Long (keys, bin, value, n) table as one row per group: ``bin0 .. binK``."""
    bins = sorted(set(t.get_column("bin").to_list()))
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in t.iter_rows(named=True):
        g = groups.setdefault(tuple(r[k] for k in keys), {k: r[k] for k in keys})
        g[f"bin{r['bin']}"] = r[value]
    cols = {k: [g[k] for g in groups.values()] for k in keys}
    cols |= {f"bin{b}": [g.get(f"bin{b}") for g in groups.values()] for b in bins}
    schema = {k: t.schema[k] for k in keys} | {f"bin{b}": nw.Float64 for b in bins}
    return nw.from_dict(cols, schema=schema, backend=nw.get_native_namespace(t))


#: per-level tables as displayed: (the level column, the values shown per level); the full tables in
#: ``rep.frame(name)``, ``to_json()`` and ``to_csv()``
LEVEL_COLUMNS = {
    "quantile_coverage": ("quantile_level", ("coverage",)),
    "interval_coverage": ("confidence_level", ("coverage", "width")),
}


def pivot_levels(t: nw.DataFrame, keys: list[str], name: str) -> nw.DataFrame:
    """A per-level table (keys, level, values, n) as one row per group: ``coverage@0.05 .. coverage@0.95``, ``n``."""
    level, values = LEVEL_COLUMNS[name]
    levels = sorted(set(t.get_column(level).to_list()))
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in t.iter_rows(named=True):
        g = groups.setdefault(tuple(r[k] for k in keys), {k: r[k] for k in keys} | {"n": r["n"]})
        g |= {f"{v}@{r[level]:g}": r[v] for v in values}
    names = [f"{v}@{lv:g}" for v in values for lv in levels]
    # the keys and n as the table has them (a nullable count stays one), the levels' values beside them
    first = t.unique(subset=keys, keep="first", maintain_order=True) if keys else t.head(1)
    base = nw.maybe_reset_index(first.select(*keys, "n"))
    ns = nw.get_native_namespace(t)
    made = [nw.new_series(c, [plain(g.get(c)) for g in groups.values()], nw.Float64, backend=ns) for c in names]
    return base.with_columns(*made).select(*keys, *names, "n")


def more_line(left_out: int, where: str) -> str:
    return f"... {plural(left_out, 'more group')} not shown (the full table: {where})"


# ---------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------
def text_table(t: nw.DataFrame, keys: Sequence[str] = ()) -> str:
    cols = list(t.columns)
    is_key = [c in keys for c in cols]
    rows = [[_cell(v, k) for v, k in zip(r, is_key)] for r in t.iter_rows()]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]
    numeric = [is_numeric(t.schema[c]) and c not in keys for c in cols]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(cols), sep, *[line(r) for r in rows]])


#: characters of a line of the text report: a wider table is split into blocks of columns
TEXT_WIDTH = 120
#: characters of a printed HTML table (A4 at 8.5 pt, cell padding included): wider tables are split
HTML_WIDTH = 100


def column_blocks(
    t: nw.DataFrame, keys: Sequence[str], *, width: int = TEXT_WIDTH, html: bool = False
) -> list[nw.DataFrame]:
    """``t`` as blocks of columns that each fit ``width`` characters, the key columns first in every block.

    Every column is kept (a printed page cuts off what is wider than it);
    a table that fits is one block.  ``html``: a header wraps after its
    underscores and a cell has padding, so widths are counted as the HTML
    table draws them.
    """
    cols = list(t.columns)
    key_cols = [c for c in cols if c in keys]
    rows = list(t.iter_rows(named=True))
    pad = 3 if html else 2

    def chars(c: str) -> int:
        head = max(len(part) for part in c.split("_")) if html else len(c)
        return max([head] + [len(_cell(r[c], c in keys)) for r in rows]) + pad

    base = sum(chars(c) for c in key_cols)
    blocks: list[list[str]] = [[]]
    used = base
    for c in (c for c in cols if c not in keys):
        if blocks[-1] and used + chars(c) > width:
            blocks.append([])
            used = base
        blocks[-1].append(c)
        used += chars(c)
    return [t.select(*key_cols, *block) for block in blocks]


def split_text_table(t: nw.DataFrame, keys: Sequence[str] = ()) -> str:
    """:func:`text_table` in blocks of columns no wider than :data:`TEXT_WIDTH` (every column kept)."""
    blocks = column_blocks(t, keys)
    if len(blocks) == 1:
        return text_table(t, keys)
    parts = [text_table(b, keys) for b in blocks]
    return "\n\n".join(f"(columns, part {i} of {len(parts)})\n{p}" for i, p in enumerate(parts, start=1))


def _header(column: str) -> str:
    """A column name that may wrap after its underscores (narrow columns, same text)."""
    return "_<wbr>".join(html.escape(part) for part in column.split("_"))


def html_table(t: nw.DataFrame, keys: Sequence[str] = (), flagged: set[tuple[Any, ...]] | None = None) -> str:
    """An HTML table: key columns left-aligned; flagged rows (``under_covered``, or whose keys are
    in ``flagged``) get the class ``cf-flag``, untested ones ``cf-untested``."""
    cols = list(t.columns)
    is_key = [c in keys for c in cols]
    head = "".join(
        f'<th class="cf-key">{_header(c)}</th>' if k else f"<th>{_header(c)}</th>" for c, k in zip(cols, is_key)
    )
    flag = cols.index("under_covered") if "under_covered" in cols else None
    key_idx = [i for i, k in enumerate(is_key) if k]
    body = []
    for r in t.iter_rows():
        cls = ""
        if flag is not None:
            cls = ' class="cf-flag"' if r[flag] is True else ' class="cf-untested"' if r[flag] is None else ""
        elif flagged and key_idx and tuple(plain(r[i]) for i in key_idx) in flagged:
            cls = ' class="cf-flag"'
        cells = "".join(
            f'<td class="cf-key">{html.escape(_cell(v, True))}</td>'
            if k
            else f"<td>{html.escape(_cell(v, False))}</td>"
            for v, k in zip(r, is_key)
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# ---------------------------------------------------------------------------
# headline
# ---------------------------------------------------------------------------
def _at(target: Any) -> str:
    return f" at target {target:g}" if target is not None else ""


def _pooled_line(item: dict[str, Any]) -> str:
    line = f"pooled coverage{_at(item['target'])}: {fmt(item['coverage'])} over {item['n']:,} rows"
    if item.get("n_excluded"):
        line += f" ({plural(item['n_excluded'], 'row')} of untested groups or with invalid values excluded)"
    if "gap" in item:
        line += (
            f"; coverage gap mean |coverage - target| over groups {fmt(item['gap'])}"
            f" (weighted by rows {fmt(item['gap_weighted'])})"
        )
    return line


def _untested_lines(s: dict[str, Any], max_rows: int | None) -> list[str]:
    u = s.get("untested") or []
    if not u:
        return []
    what = "could not be tested" if "under_covered" in s else "have no metrics"
    lines = [f"NOT TESTED: {plural(len(u), 'group')} {what} (rows with invalid values):"]
    limit = len(u) if max_rows is None else max_rows
    for g in u[:limit]:
        bad = g.get("n_invalid", 0)
        lines.append(f"  - {label(g['group'])}: n={g['n']:,}" + (f", {plural(bad, 'invalid row')}" if bad else ""))
    if len(u) > limit:
        lines.append(f"  ... {plural(len(u) - limit, 'more group')} (summary['untested'])")
    return lines


def _flagged_lines(s: dict[str, Any], max_rows: int | None) -> list[str]:
    if "under_covered" not in s:
        return []
    u = s["under_covered"]
    lines = [f"significantly under-covered: {len(u)} of {s['tested']} tested groups ({s['test']})"]
    limit = len(u) if max_rows is None else max_rows
    for g in u[:limit]:
        lines.append(
            f"  - {label(g['group'])}: coverage {fmt(g['coverage'])} < target {g['target']:g}, "
            f"n={g['n']:,}, adjusted p={fmt(g['pvalue_adjusted'])}"
        )
    if len(u) > limit:
        lines.append(f"  ... {plural(len(u) - limit, 'more group')} (rep.under_covered)")
    o = s.get("over_covered") or []
    if o:
        lines.append(f"significantly over-covered (intervals too wide): {len(o)} of {s['tested']} tested groups")
    for g in o[: len(o) if max_rows is None else max_rows]:
        lines.append(
            f"  - {label(g['group'])}: coverage {fmt(g['coverage'])} > target {g['target']:g}, "
            f"n={g['n']:,}, adjusted p={fmt(g['pvalue_adjusted'])}"
        )
    if max_rows is not None and len(o) > max_rows:
        lines.append(f"  ... {plural(len(o) - max_rows, 'more group')} (rep.over_covered)")
    return lines


def header_lines(s: dict[str, Any], keys: list[str], columns: dict[str, str], max_rows: int | None) -> list[str]:
    groups = f"{s['rows']:,} rows, {plural(s['groups'], 'group')}"
    lines = [f"conformal-frames report: {groups}" + (f" by {', '.join(keys)}" if keys else "")]
    cols = ", ".join(f"{k}={v!r}" for k, v in columns.items())
    if cols:
        lines.append(f"columns: {cols}")
    if s.get("families"):
        lines.append(f"metric families: {', '.join(s['families'])}")
    if s.get("target"):
        lines.append(f"target coverage: {s['target']}")
    lines += _untested_lines(s, max_rows)
    lines += [_pooled_line(item) for item in s.get("pooled_coverage", [])]
    if s.get("worst_group"):
        w = s["worst_group"]
        target = f"target {w['target']:g}, " if w["target"] is not None else ""
        lines.append(f"worst group: {label(w['group'])}: coverage {fmt(w['coverage'])} ({target}n={w['n']:,})")
    lines += _flagged_lines(s, max_rows)
    if s.get("invalid_rows"):
        causes = "; ".join(s.get("invalid_causes") or []) or "missing, infinite or out-of-range values"
        lines.append(
            f"WARNING: {plural(s['invalid_rows'], 'row')} with invalid values ({causes}); their groups have null metrics"
        )
    if s.get("dropped_rows"):
        causes = "; ".join(s.get("invalid_causes") or [])
        lines.append(
            f"note: {plural(s['dropped_rows'], 'row')} with invalid values dropped (n counts the valid rows)"
            + (f": {causes}" if causes else "")
        )
    lines += [f"note: {note}" for note in s.get("notes", [])]
    lines += monitoring_lines(s)
    return lines


# issue 40: the monitoring section (report(order_by=))
MONITORING_TITLE = (
    "Monitoring: running coverage per segment at its last period, with an anytime-valid confidence "
    "sequence (cs_low, cs_high) and the e-process alarm (Bonferroni across segments)"
)


def monitoring_lines(s: dict[str, Any]) -> list[str]:
    """The header line of the monitoring section: the segments whose e-process raised an alarm."""
    if "alarms" not in s:
        return []
    alarms = s["alarms"]
    if not alarms:
        return [f"monitoring by {s['order_by']}: no alarm (false-alarm probability <= {s['alarm_significance']:g})"]
    shown = "; ".join(f"{label(a['group'])} from {a['alarm_period']}" for a in alarms[:5])
    more = f"; and {len(alarms) - 5} more" if len(alarms) > 5 else ""
    return [f"ALARM: coverage below target (monitoring by {s['order_by']}): {shown}{more}"]


# ---------------------------------------------------------------------------
# the HTML headline: the verdict, the worst group, the flagged groups
# ---------------------------------------------------------------------------
def _group_html(group: dict[str, Any]) -> str:
    return f"<strong>{html.escape(label(group))}</strong>"


def _largest_ece(t: nw.DataFrame | None, keys: list[str]) -> str | None:
    """The sentence naming the group with the largest ECE (a calibration-only report)."""
    if t is None or "ece" not in t.columns or not len(t):
        return None
    ece = floats(t, "ece")
    if not np.isfinite(ece).any():
        return None
    row = dict(zip(t.columns, t.row(int(np.nanargmax(ece)))))
    where = f" in {label({k: row[k] for k in keys if k in row})}" if keys else ""
    return f"Largest expected calibration error{where}: ECE {fmt(row['ece'])} over {row['n']:,} rows."


def _verdict(s: dict[str, Any]) -> tuple[str, str]:
    """(CSS class, one sentence) of the under-coverage test."""
    untested = len(s.get("untested") or [])
    if "under_covered" in s:
        k, tested = len(s["under_covered"]), s["tested"]
        if k:
            are = "is" if k == 1 else "are"
            text = f"{k} of {plural(tested, 'tested group')} {are} significantly below the target coverage."
            cls = "cf-bad"
        else:
            text = f"No group is significantly below the target coverage ({plural(tested, 'group')} tested)."
            cls = "cf-ok" if not untested else ""
        over = len(s.get("over_covered") or [])
        if over:
            text += f" {over} {'is' if over == 1 else 'are'} significantly above it (intervals too wide)."
            cls = cls or "cf-warn"
        if untested:
            text += f" {plural(untested, 'group')} could not be tested."
            cls = cls or "cf-warn"
        return cls, text
    if s.get("pooled_coverage"):
        return "", "No coverage test: give a target coverage (confidence_level=) to test each group."
    families = ", ".join(s.get("families") or [])
    return "", f"Metrics of {families} per group; no coverage target applies to them."


def _flagged_html(s: dict[str, Any], which: str, title: str, max_rows: int | None) -> str:
    """The list of the summary's flagged groups ``which`` (``under_covered``, ``over_covered``), or ``""``."""
    flagged = s.get(which) or []
    if not flagged:
        return ""
    limit = len(flagged) if max_rows is None else max_rows
    items = [
        f"<li>{_group_html(g['group'])}: coverage {fmt(g['coverage'])}, target {g['target']:g}, "
        f"n = {g['n']:,}, adjusted p = {fmt(g['pvalue_adjusted'])}</li>"
        for g in flagged[:limit]
    ]
    if len(flagged) > limit:
        items.append(f"<li>... and {plural(len(flagged) - limit, 'more group')} (rep.{which})</li>")
    return f"<p>{title}</p><ul>{''.join(items)}</ul>"


def html_headline(
    s: dict[str, Any],
    keys: list[str],
    columns: dict[str, str],
    max_rows: int | None,
    calibration: nw.DataFrame | None = None,
) -> str:
    """The summary block of the HTML page: verdict, worst and flagged groups, then the facts.

    Without a coverage family, the ``calibration`` table (when given) names the
    group with the largest ECE as the verdict.
    """
    cls, text = _verdict(s)
    if not s.get("pooled_coverage"):
        text = _largest_ece(calibration, keys) or text
    classes = f"cf-verdict {cls}".strip()
    out = [f'<section id="summary" class="{classes}"><p class="cf-verdict-line">{html.escape(text)}</p>']
    out.append(_flagged_html(s, "under_covered", "Significantly under-covered:", max_rows))
    out.append(_flagged_html(s, "over_covered", "Significantly over-covered (intervals too wide):", max_rows))
    untested = s.get("untested") or []
    if untested:
        items = []
        for g in untested[: len(untested) if max_rows is None else max_rows]:
            bad = g.get("n_invalid", 0)
            items.append(
                f"<li>{_group_html(g['group'])}: n = {g['n']:,}"
                + (f", {plural(bad, 'invalid row')}" if bad else "")
                + "</li>"
            )
        out.append(f"<p>Not tested (rows with invalid values):</p><ul>{''.join(items)}</ul>")
    facts: list[tuple[str, str]] = []
    if s.get("worst_group"):
        w = s["worst_group"]
        target = f", target {w['target']:g}" if w["target"] is not None else ""
        facts.append(
            ("Worst group", f"{_group_html(w['group'])}: coverage {fmt(w['coverage'])}{target}, n = {w['n']:,}")
        )
    for item in s.get("pooled_coverage", []):
        name = "Pooled coverage" + (f" at {item['target']:g}" if item["target"] is not None else "")
        value = f"{fmt(item['coverage'])} over {item['n']:,} rows"
        if "gap" in item:
            value += (
                f"; mean |coverage - target| over groups {fmt(item['gap'])} (row-weighted {fmt(item['gap_weighted'])})"
            )
        if item.get("n_excluded"):
            value += f"; {plural(item['n_excluded'], 'row')} of untested groups or invalid excluded"
        facts.append((name, html.escape(value)))
    if s.get("test"):
        facts.append(("Test", html.escape(s["test"])))
    if facts:
        out.append('<dl class="cf-facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>")
    notes = _headline_notes(s)
    if notes:
        out.append(f'<ul class="cf-notes">{"".join(notes)}</ul>')
    out.append("</section>")
    return "".join(out)


def _headline_notes(s: dict[str, Any]) -> list[str]:
    """The notes under the summary block: invalid and dropped rows, then the report's notes."""
    notes = []
    if s.get("invalid_rows"):
        causes = "; ".join(s.get("invalid_causes") or []) or "missing, infinite or out-of-range values"
        notes.append(
            '<li class="cf-warning">'
            + html.escape(
                f"{plural(s['invalid_rows'], 'row')} with invalid values ({causes}): their groups have null metrics."
            )
            + "</li>"
        )
    if s.get("dropped_rows"):
        causes = "; ".join(s.get("invalid_causes") or [])
        notes.append(
            "<li>"
            + html.escape(
                f"{plural(s['dropped_rows'], 'row')} with invalid values dropped"
                + (f" ({causes})" if causes else "")
                + "; n counts the valid rows."
            )
            + "</li>"
        )
    notes += [f"<li>{html.escape(n[:1].upper() + n[1:])}.</li>" for n in s.get("notes", [])]
    return notes


def html_meta(s: dict[str, Any], keys: list[str], columns: dict[str, str]) -> str:
    """One line under the title: the columns of each role, the families, the target."""
    parts = []
    if columns:
        parts.append(
            "Columns " + ", ".join(f"{html.escape(k)} = <code>{html.escape(str(v))}</code>" for k, v in columns.items())
        )
    if s.get("families"):
        parts.append("families " + html.escape(", ".join(s["families"])))
    if s.get("target"):
        parts.append(f"target coverage {html.escape(str(s['target']))}")
    return f'<p class="cf-meta">{"; ".join(parts)}.</p>' if parts else ""
