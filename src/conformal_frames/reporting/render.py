"""Text and HTML rendering of a report: headline, capped tables.

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
    "quantile_coverage": "Quantile coverage per level: fraction of y <= quantile (Wilson interval), deviation from the level",
    "interval_coverage": "Interval coverage per confidence level: coverage (Wilson interval), mean width, mean Winkler score",
}

CSS = (
    ".cf-report{font-family:system-ui,sans-serif;font-size:14px}"
    ".cf-report table{border-collapse:collapse;margin:0 0 1em 0}"
    ".cf-report th,.cf-report td{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap}"
    ".cf-report th{background:#f0f0f0}.cf-report tr.cf-flag td{background:#fde2e1}"
    ".cf-report tr.cf-untested td{background:#fff3cd}.cf-report p.cf-more{color:#555;font-style:italic}"
    ".cf-report img{max-width:100%}.cf-report figure{display:inline-block;vertical-align:top;margin:0 1em 1em 0}"
)


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
    """Row indices, most important first (flagged, untested, lowest coverage vs target)."""
    m = len(t)
    cov_col = next((c for c in ("coverage", "set_coverage") if c in t.columns), None)
    if cov_col is not None:
        cov = floats(t, cov_col)
        target = floats(t, "target") if "target" in t.columns else np.zeros(m)
        p = floats(t, "pvalue_adjusted") if "pvalue_adjusted" in t.columns else np.ones(m)
        flags = t.get_column("under_covered").to_list() if "under_covered" in t.columns else [False] * m
        flagged = np.array([v is True for v in flags], dtype=bool)
        untested = np.isnan(cov) | np.isnan(p)
        score = np.where(flagged, 0, np.where(untested, 1, 2))
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


def html_table(t: nw.DataFrame, keys: Sequence[str] = ()) -> str:
    cols = list(t.columns)
    is_key = [c in keys for c in cols]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    flag = cols.index("under_covered") if "under_covered" in cols else None
    body = []
    for r in t.iter_rows():
        cls = ""
        if flag is not None:
            cls = ' class="cf-flag"' if r[flag] is True else ' class="cf-untested"' if r[flag] is None else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(_cell(v, k))}</td>" for v, k in zip(r, is_key)) + "</tr>")
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
    return lines
