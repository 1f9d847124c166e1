"""From the engine's wide result to the report's tables and summary.

Each family's table holds its metrics' output columns (found from the metric
objects); per-bin metrics are reshaped by their own ``to_long``; the
under-coverage test columns are coverage_test's own outputs (p-value, the
adjusted p-value of the chosen correction, the flag) under the report's
names ``pvalue``, ``pvalue_adjusted``, ``under_covered``; ``over_covered``
flags the groups significantly above the target (``alternative="greater"``,
same correction and significance): intervals wider than needed.
"""

from __future__ import annotations

from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames import engine
from conformal_frames._widths import collect, floats, widths_histogram, widths_query
from conformal_frames.metrics.conditional import benjamini_hochberg, coverage_pvalues, holm
from conformal_frames.reporting.plan import COVERAGE_COLUMN, ReportPlan

#: the engine's per-group counts of invalid rows, by policy
INVALID_COUNTS = ("n_invalid", "n_dropped")
_ADJUSTED = {"holm": "pvalue_holm", "bh": "pvalue_bh", "none": "pvalue"}
_CORRECTION_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no correction"}
#: the report's tables, in display order
TABLE_ORDER = (
    "intervals",
    "ssc",
    "sets",
    "calibration",
    "decomposition",
    "reliability",
    "forecast",
    "pit_histogram",
    "quantile_pit_histogram",
    "quantile_coverage",
    "interval_coverage",
    "joint_coverage",
    "uncertainty_calibration",
    "uncertainty_calibration_curve",
)
#: tables drawn, not displayed (one row per group and level: the report's figure and frame)
CURVES = ("uncertainty_calibration_curve",)
#: per-level tables: one row per group and level (not per group)
PER_LEVEL = ("quantile_coverage", "interval_coverage")
#: per-bin tables: one row per group and bin
PER_BIN = ("ssc", "reliability", "pit_histogram", "quantile_pit_histogram")
#: quantile_coverage's summary (the mean absolute deviation over levels) as a forecast-table column
FORECAST_RENAMES = {"quantile_coverage": "quantile_coverage_mad"}


def build_tables(
    wide: nw.DataFrame, plan: ReportPlan, families: dict[str, list[engine.Metric]], schema: Any
) -> dict[str, Any]:
    """Family tables (``intervals``, ``ssc``, ``sets``, ``calibration``, ``decomposition``, ``reliability``,
    ``forecast``, ``pit_histogram``, ``quantile_pit_histogram``, ``quantile_coverage``, ``interval_coverage``)."""
    keys = plan.keys
    common = ["n", *[c for c in INVALID_COUNTS if c in wide.columns]]
    lazy_wide = wide.lazy()
    tables: dict[str, nw.DataFrame] = {}
    for name, metrics in families.items():
        cols: list[str] = []
        for m in metrics:
            names = m.output_names(schema, keys)
            if m.long:  # per-bin metrics: their own long table
                long = nw.maybe_reset_index(m.to_long(lazy_wide.select(*keys, *names), keys).collect())
                if name == "intervals":
                    tables["ssc"] = long.rename({m.output_name: "coverage"})
                elif name == "forecast":  # per-level tables, their one-number summary in "forecast"
                    tables[m.output_name] = long
                    cols += [c for c in names if c == m.output_name]
                else:
                    tables[name] = long
                continue
            if name == "joint_coverage" and m.output_name.startswith("coverage_output"):
                names = names[:1]  # each output's coverage, without its interval
            cols += names
        if name in COVERAGE_COLUMN:
            t = with_test(wide.select(*keys, *cols, *common), plan, COVERAGE_COLUMN[name])
            tables = {name: t, **tables}
        elif name == "forecast":  # always: the per-group rows and counts (also with intervals only)
            t = wide.select(*keys, *cols, *common)
            tables[name] = one_n_crossing(t.rename({k: v for k, v in FORECAST_RENAMES.items() if k in t.columns}))
        elif cols:
            tables[name] = wide.select(*keys, *cols, *common)
    return {k: tables[k] for k in TABLE_ORDER if k in tables}


def one_n_crossing(t: nw.DataFrame) -> nw.DataFrame:
    """The metrics' ``<metric>_n_crossing`` columns as one ``n_crossing`` before ``n`` (when they agree).

    The forecast metrics read the same quantiles, so they count the same
    crossing rows: one column says it (the metrics' own columns stay in
    :func:`conformal_frames.evaluate`).  Columns that differ are kept apart.
    """
    counts = [c for c in t.columns if c.endswith("_n_crossing")]
    if not counts:
        return t
    first = t.get_column(counts[0]).to_list()
    if any(t.get_column(c).to_list() != first for c in counts[1:]):
        return t
    rest = [c for c in t.columns if c not in counts]
    at = rest.index("n") if "n" in rest else len(rest)
    return t.rename({counts[0]: "n_crossing"}).select(*rest[:at], "n_crossing", *rest[at:])


def with_test(t: nw.DataFrame, plan: ReportPlan, cov: str) -> nw.DataFrame:
    """Target, ``pvalue``, ``pvalue_adjusted`` and the Boolean ``under_covered``."""
    if not plan.has_target:
        return t
    if plan.level_column is not None:
        t = t.with_columns(nw.col(plan.level_column).cast(nw.Float64).alias("target"))
    else:
        t = t.with_columns(nw.lit(plan.target, nw.Float64).alias("target"))
    if not plan.test_in_query:
        t = _test_from_counts(t, plan, cov)
    adjusted = f"{cov}_{_ADJUSTED[plan.correction]}"
    t = t.with_columns(
        nw.col(f"{cov}_pvalue").alias("pvalue"),
        nw.col(adjusted).alias("pvalue_adjusted"),
        nw.col(f"{cov}_flag").cast(nw.Boolean).alias("under_covered"),
    )
    t = t.drop(*[c for c in t.columns if c.startswith(f"{cov}_pvalue") or c == f"{cov}_flag"])
    return _with_over_coverage(t, plan, cov)


def _with_over_coverage(t: nw.DataFrame, plan: ReportPlan, cov: str) -> nw.DataFrame:
    """The Boolean ``over_covered`` (after ``under_covered``) and its adjusted p-value ``pvalue_over_adjusted``.

    coverage_test's ``alternative="greater"`` on the collected table: the
    covered count of a group is ``coverage * n``; a group that could not be
    tested has nulls.
    """
    n = floats(t, "n")
    k = np.round(floats(t, cov) * n)
    p = coverage_pvalues(k, n, floats(t, "target"), plan.n_calibration, alternative="greater")
    p[np.isnan(floats(t, "pvalue"))] = np.nan  # untested under-coverage: untested here too
    chosen = {"holm": holm, "bh": benjamini_hochberg, "none": lambda x: x}[plan.correction](p)
    ns = nw.get_native_namespace(t)
    flag = [None if np.isnan(a) else bool(a < plan.significance) for a in chosen]
    cols = list(t.columns)
    at = cols.index("under_covered") + 1
    t = t.with_columns(
        nw.new_series("over_covered", flag, nw.Boolean, backend=ns),
        nw.new_series("pvalue_over_adjusted", chosen, nw.Float64, backend=ns).fill_nan(None),
    )
    return t.select(*cols[:at], "over_covered", *cols[at:], "pvalue_over_adjusted")


def _test_from_counts(t: nw.DataFrame, plan: ReportPlan, cov: str) -> nw.DataFrame:
    """coverage_test's p-values and flag on the collected table (lazy non-polars input).

    The covered count of a group is ``coverage * n`` (an integer up to
    rounding); groups with a null coverage are not tested.
    """
    n = floats(t, "n")  # with invalid="drop", the valid rows only
    k = np.round(floats(t, cov) * n)
    p = coverage_pvalues(k, n, floats(t, "target"), plan.n_calibration)
    p_holm, p_bh = holm(p), benjamini_hochberg(p)
    chosen = {"holm": p_holm, "bh": p_bh, "none": p}[plan.correction]
    flag = [None if np.isnan(a) else bool(a < plan.significance) for a in chosen]
    ns = nw.get_native_namespace(t)
    series = {"pvalue": p, "pvalue_holm": p_holm, "pvalue_bh": p_bh}
    return t.with_columns(
        *[nw.new_series(f"{cov}_{s}", v, nw.Float64, backend=ns).fill_nan(None) for s, v in series.items()],
        nw.new_series(f"{cov}_flag", flag, nw.Boolean, backend=ns),
    )


def invalid_causes(base: Any, metrics: list[engine.Metric], keys: list[str]) -> list[str]:
    """Each check that rows fail, in the evaluation's own words, with its row count.

    One more aggregation over the data, run only when a report has invalid
    rows: the engine's per-check counts (``"column 'y' has labels other than
    0 and 1 in 3 rows"``), as an eager evaluation would raise them.
    """
    lf = base.lazy() if isinstance(base, nw.DataFrame) else base
    plan = engine.Plan.of(lf.collect_schema(), metrics, keys)  # the checks only: no query to build
    if not plan.query.checks:
        return []
    return list(plan.causes(collect(plan.check_count_query(lf))))


def test_description(plan: ReportPlan) -> str:
    law = "exact Beta-binomial (split conformal)" if plan.n_calibration is not None else "exact binomial"
    return (
        f"one-sided {law} test of coverage >= target (conformal_frames.coverage_test; over-coverage: "
        f"alternative='greater'), {_CORRECTION_NAMES[plan.correction]}, significance={plan.significance:g}"
    )


def widths_table(base: Any, plan: ReportPlan) -> nw.DataFrame:
    assert plan.lo is not None and plan.hi is not None
    if plan.bounded_memory:
        return widths_histogram(base, plan.lo, plan.hi, plan.keys)
    return nw.maybe_reset_index(collect(widths_query(base, plan.lo, plan.hi, plan.keys)))
