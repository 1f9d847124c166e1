""":func:`report`: check the arguments, plan, evaluate in one query, build the tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import narwhals.stable.v2 as nw

from conformal_frames import engine
from conformal_frames._progress import steps, task
from conformal_frames._renames import renamed
from conformal_frames._roles import Column, as_role
from conformal_frames._widths import collect
from conformal_frames.reporting import plan as planning
from conformal_frames.reporting.model import MAX_ROWS, MAX_SEGMENTS, Report
from conformal_frames.reporting.summary import summarize
from conformal_frames.reporting.tables import TABLE_ORDER, build_tables, invalid_causes, test_description, widths_table


def _make_plan(base: Any, options: dict[str, Any]) -> tuple[planning.ReportPlan, list[str]]:
    """The plan (columns by role, options) after checking the columns against the schema."""
    o = options
    by = planning.names_of(o["by"])
    target, level = planning.split_target(o["confidence_level"])
    schema = base.collect_schema()
    roles = {k: o[k] for k in ("y", "lo", "hi", "score", "score_y", "sets")}
    # several outputs (lists of columns): tuples in the plan, each column checked by its position
    roles |= {k: tuple(o[k]) for k in ("y", "lo", "hi") if isinstance(o[k], (list, tuple))}
    columns = {k: v for k, v in roles.items() if not isinstance(v, tuple)}
    columns |= {f"{k}[{i}]": c for k, v in roles.items() if isinstance(v, tuple) for i, c in enumerate(v)}
    forecast = {
        "mean": o["mean"],
        "std": o["std"],
        "point": o["point"],
        "baseline": o["baseline"],
        **{f"quantiles[{lv:g}]": c for lv, c in _quantiles(o).items()},
    }
    for lv, (lo_c, hi_c) in _intervals(o).items():
        forecast |= {f"intervals[{lv:g}][0]": lo_c, f"intervals[{lv:g}][1]": hi_c}
    horizon = planning.check_horizon(o["horizon"], by, level)
    names = (
        columns | forecast | {"confidence_level": level, "horizon": horizon} | {f"by[{i}]": k for i, k in enumerate(by)}
    )
    engine.check_index_keys(base, [*by, *([horizon] if horizon else [])])
    planning.check_schema(schema, names)
    if level is not None and level in by:
        msg = f"confidence_level column {level!r} is also in by=; give it only as confidence_level="
        raise ValueError(msg)
    notes: list[str] = []
    classes = o["classes"]  # None: the labels come from the sets
    if o["bounded_memory"]:
        if o["hsic"]:
            msg = "hsic=True needs all rows of each group; it cannot run with bounded_memory=True"
            raise ValueError(msg)
        notes.append("bounded memory: no size-stratified coverage; width quantiles from 512-bin histograms")
    if level is not None:
        planning.level_values(base, level)
    lazy_other = isinstance(base, nw.LazyFrame) and not base.implementation.is_polars()
    if lazy_other and o["score"] is not None:
        notes.append("smooth ECE and the score decomposition need the rows of each group: collect the frame first")
    plan = planning.ReportPlan(
        **roles,
        classes=list(classes) if classes is not None else None,
        by=by,
        target=target,
        level_column=level,
        n_bins=o["n_bins"],
        ssc_n_bins=0 if o["bounded_memory"] else o["ssc_n_bins"],
        ci_level=o["ci_level"],
        significance=o["significance"],
        correction=o["correction"],
        n_calibration=o["n_calibration"],
        hsic=o["hsic"],
        bounded_memory=o["bounded_memory"],
        invalid=o["invalid"],
        test_in_query=not lazy_other,
        quantiles=_quantiles(o) or None,
        intervals=_intervals(o) or None,
        mean=o["mean"],
        std=o["std"],
        crossing=_crossing(o),
        point=o["point"],
        baseline=o["baseline"],
        horizon=horizon,
    )
    return plan, notes


def _crossing(options: dict[str, Any]) -> str:
    """``crossing=`` checked: "score", "sort" or "invalid"."""
    from conformal_frames.inputs.forecasts import check_crossing

    return check_crossing(options["crossing"])


def _quantiles(options: dict[str, Any]) -> dict[float, str]:
    """``quantiles=`` checked (levels in (0, 1), distinct columns) as a dict."""
    from conformal_frames.inputs.forecasts import check_quantiles

    value = options["quantiles"]
    return {} if value is None else dict(check_quantiles(value))


def _intervals(options: dict[str, Any]) -> dict[float, tuple[str, str]]:
    """``intervals=`` checked (levels in (0, 1), (lo, hi) pairs of distinct columns) as a dict."""
    from conformal_frames.inputs.forecasts import check_intervals

    value = options["intervals"]
    return {} if value is None else {lv: (lo, hi) for lv, lo, hi in check_intervals(value)}


def _prepared(base: Any, metrics: list[engine.Metric]) -> Any:
    """``base`` as the metrics read it (e.g. a pandas column of Python lists as an
    Arrow list): the schema the tables and the invalid-row causes are planned on."""
    lf, eager = engine.to_lazy(base)
    for m in metrics:
        lf = m.prepare(lf)
    return lf.collect() if eager else lf


def _wide(base: Any, metrics: list[engine.Metric], plan: planning.ReportPlan) -> nw.DataFrame:
    """The metrics evaluated in one query, collected (one row per group)."""
    # one n per table: a row leaves every metric of the query (the tables of other inputs run apart)
    wide = engine.compute(base, metrics, plan.keys or None, invalid=plan.invalid, per_metric=False)
    return nw.maybe_reset_index(collect(wide))


def _has_invalid(wide: nw.DataFrame) -> bool:
    return any(c in wide.columns and bool(wide.get_column(c).sum()) for c in ("n_invalid", "n_dropped"))


def _by_inputs(families: dict[str, list[engine.Metric]], schema: Any, keys: list[str]) -> list[list[str]]:
    """The families grouped by the input columns they read (families that read the same columns check the same rows)."""
    groups: dict[frozenset[str], list[str]] = {}
    for name, metrics in families.items():
        used = frozenset(c for m in metrics for c, _ in m.definition(schema, keys).inputs)
        groups.setdefault(used, []).append(name)
    return list(groups.values())


def _family_tables(
    base: Any, plan: planning.ReportPlan, families: dict[str, list[engine.Metric]]
) -> tuple[dict[str, Any], dict[str, int]]:
    """The family tables, and the rows invalid in some family (``invalid_rows`` / ``dropped_rows``, when any).

    One query for every family.  When it finds invalid rows (``invalid="null"``
    or ``"drop"``), the families that read other columns are evaluated apart:
    a bad row leaves (or nulls) only the families whose inputs are bad, each
    table with its own ``n`` and ``n_invalid`` / ``n_dropped``.
    """
    schema = base.collect_schema()
    wide = _wide(base, [m for ms in families.values() for m in ms], plan)
    if not _has_invalid(wide):
        return build_tables(wide, plan, families, schema), {}
    counts = {
        f"{what}_rows": int(wide.get_column(f"n_{what}").sum())
        for what in ("invalid", "dropped")
        if f"n_{what}" in wide.columns
    }
    parts = _by_inputs(families, schema, plan.keys)
    if len(parts) == 1:
        return build_tables(wide, plan, families, schema), counts
    tables: dict[str, Any] = {}
    for names in parts:
        part = {name: families[name] for name in names}
        tables |= build_tables(_wide(base, [m for ms in part.values() for m in ms], plan), plan, part, schema)
    return {k: tables[k] for k in TABLE_ORDER if k in tables}, counts


def _evaluate(base: Any, plan: planning.ReportPlan) -> Report:
    families = plan.families()
    metrics = [m for ms in families.values() for m in ms]
    base = _prepared(base, metrics)
    tables, counts = _family_tables(base, plan, families)
    if "intervals" in tables:
        tables["widths"] = widths_table(base, plan)
    rep = Report(tables=tables, summary={}, keys=plan.keys, by=plan.by, confidence_level=plan.confidence_level)
    rep.horizon = plan.horizon  # the models are the by= groups
    rep.summary["invalid_causes"] = invalid_causes(base, metrics, plan.keys) if counts else []
    rep.summary |= counts  # the rows invalid in some family (each table counts its own)
    return rep


@renamed(
    label="y",
    prediction_set="sets",
    level="confidence_level",
    num_bins="n_bins",
    ssc_bins="ssc_n_bins",
    ci="ci_level",
    alpha="significance",
)
def report(
    frame: Any,
    *,
    y: Column | Sequence[Column] | None = None,
    lo: Column | Sequence[Column] | None = None,
    hi: Column | Sequence[Column] | None = None,
    score: Column | None = None,
    score_y: Column | None = None,
    sets: Column | None = None,
    classes: Sequence[Any] | None = None,
    by: Column | Sequence[Column] | None = None,
    confidence_level: float | str | None = None,
    n_bins: int = 10,
    ssc_n_bins: int = 3,
    ci_level: float = 0.95,
    significance: float = 0.05,
    correction: Literal["holm", "bh", "none"] = "holm",
    n_calibration: int | None = None,
    hsic: bool = False,
    bounded_memory: bool = False,
    invalid: Literal["raise", "drop", "null"] | None = None,
    max_rows: int | None = MAX_ROWS,
    max_segments: int | None = MAX_SEGMENTS,
    quantiles: Mapping[float, Column] | None = None,
    mean: Column | None = None,
    std: Column | None = None,
    intervals: Mapping[float, tuple[Column, Column]] | None = None,
    crossing: Literal["score", "sort", "invalid"] = "score",
    point: Column | None = None,
    baseline: Column | None = None,
    horizon: str | None = None,
    progress: bool | None = False,
    order_by: Column | None = None,
) -> Report:
    """Evaluate every applicable metric per group and return a :class:`Report`.

    All metrics are computed in one query (one pass over the data), levels
    included when ``confidence_level`` names a column.

    Parameters
    ----------
    frame
        Any frame narwhals supports (pandas, polars eager or lazy, DuckDB, ...).
        Lazy input stays lazy until the aggregated tables are collected (with
        polars' streaming engine for polars LazyFrames).
    y, lo, hi : Column, optional
        Observed value and interval bounds: interval metrics (coverage with a
        Wilson interval, width, Winkler score, size-stratified coverage).
        Lists of columns (one per output, several outputs): the
        joint-coverage table alone (table ``"joint_coverage"``: the joint
        coverage with its interval and test, ``coverage_output<j>``, the
        mean box volume ``width`` and ``width_output<j>``).
    score : Column, optional
        Predicted probability of a binary event, with ``y`` (or ``score_y``)
        its 0/1 outcome: calibration metrics (ECE, Brier, Kolmogorov-Smirnov,
        Kuiper, Spiegelhalter, the reliability table; smooth ECE and the Brier
        score decomposition except on lazy DuckDB / PySpark / Dask input).
    score_y : Column, optional
        The 0/1 outcome of ``score`` when the frame also holds an interval
        target in ``y`` (one frame, two families).  Default: ``y``.
    sets : Column, optional
        List column of predicted labels (any form of
        :mod:`~conformal_frames.metrics.sets`: a native or Arrow list, or a
        pandas column of lists, tuples, sets or arrays), with ``y`` the true
        label: prediction-set metrics.
    classes : list, optional
        The possible labels of the prediction sets (then every true label and
        set member is checked to be one of them); default: the labels come
        from the sets.
    by : Column or list of Column, optional
        Group columns.
    confidence_level : float or str, optional
        Nominal coverage (the target of the under-coverage test, and the
        Winkler score's level); or the name of a column of nominal levels
        (several levels stacked in long format), which becomes a group
        column and each group's target.
    n_bins : int, default 10
        Score bins of the calibration metrics and the reliability table; PIT
        bins of the forecast family's PIT histograms.
    ssc_n_bins : int, default 3
        Width bins of the size-stratified coverage.
    ci_level : float, default 0.95
        Confidence of the per-group coverage intervals.
    significance : float, default 0.05
        A group is flagged when its adjusted p-value is below this.
    correction : {"holm", "bh", "none"}, default "holm"
        Multiplicity correction across all tested groups (all levels together).
    n_calibration : int, optional
        Size of the split-conformal calibration set: the under-coverage test
        then uses the exact Beta-binomial law.
    hsic : bool, default False
        Also compute HSIC (collects the width and coverage columns of each
        group, so it is off by default).
    bounded_memory : bool, default False
        Keep the engine's memory independent of the number of rows: no
        size-stratified coverage (its equal-count width bins need a sort
        within each group) and width quantiles from a 512-bin histogram per
        group (within ``(max - min) / 512`` of the exact ones).
    invalid : {"raise", "drop", "null"}, optional
        Rows with invalid values (missing, NaN/inf, ``lo > hi``, labels or
        scores out of range): raise (the default for eager input), drop them
        (``n`` counts the valid rows, ``n_dropped`` the others), or give their
        groups null metrics (the default for lazy input); such groups cannot
        be tested and are named in the headline and ``summary["untested"]``.
        A bad row leaves (or nulls) only the families whose inputs are bad
        (e.g. crossing quantiles with ``crossing="invalid"``: the forecast
        table, not the intervals table); each table has its own ``n`` and
        ``n_dropped`` / ``n_invalid``, ``summary["dropped_rows"]`` /
        ``["invalid_rows"]`` the rows bad in some family.
    max_rows, max_segments : int or None
        Groups shown in the text/HTML tables and segments drawn per plot
        (:attr:`Report.max_rows`, :attr:`Report.max_segments`).
    quantiles : dict, optional
        Quantile forecasts of ``y``, ``{level: column}``: the forecast family.
        The table ``"forecast"`` gets the quantile CRPS ``quantile_crps`` (the
        column ``crps`` is only ever an exact CRPS) and the PIT
        uniformity test (:func:`conformal_frames.quantile_crps`,
        :func:`conformal_frames.pit_test`; the PIT histogram with ``n_bins``
        bins is the table ``"pit_histogram"``), the mean ``pinball_loss``, the
        ``wis`` and its three components (when the levels hold the median
        and, for every level ``tau``, the level ``1 - tau``) and
        ``quantile_coverage_mad``, the mean over levels of ``|coverage -
        level|``; the long table ``"quantile_coverage"`` has one row per group
        and level (:func:`conformal_frames.quantile_coverage`).
    mean, std : Column, optional
        A Gaussian forecast of ``y``: its CRPS and PIT test in the
        ``"forecast"`` table and its PIT histogram (prefixed ``quantile_``
        are then the quantile forecast's); the table
        ``"uncertainty_calibration"`` (ENCE, UCE, the mean absolute and root
        mean squared calibration errors, the miscalibration area and the
        sharpness per group) and the long table
        ``"uncertainty_calibration_curve"`` (observed against expected
        proportion over 100 levels, drawn, not printed).
    intervals : dict, optional
        Central intervals of ``y`` at several levels, ``{confidence_level:
        (lo, hi)}``: the long table ``"interval_coverage"``, one row per group
        and level with the coverage, its Wilson interval, the mean width and
        Winkler score (:func:`conformal_frames.interval_coverage`).  Rows
        where ``lo > hi`` and intervals that are not nested are crossing
        quantiles: they follow ``crossing``.
    crossing : {"score", "sort", "invalid"}, default "score"
        Crossing quantiles (and intervals with ``lo > hi`` or not nested) in
        the forecast family: scored as given, rearranged in increasing order
        first (the intervals' coverage, width and Winkler score of the sorted
        bounds), or invalid rows (``crossing=`` of
        :func:`conformal_frames.pinball_loss`); with "score" and "sort" the
        tables have ``<metric>_n_crossing`` columns.
    point : Column, optional
        A point forecast of ``y``: ``mae``, ``rmse``, ``bias`` and ``smape``
        in the ``"forecast"`` table (:func:`conformal_frames.mae`, ...).
    baseline : Column, optional
        A baseline's point forecast of ``y`` (with ``point``): the skill of
        the MAE against it, ``mae_skill`` (:func:`conformal_frames.skill_score`).
    horizon : str, optional
        The column of the forecasts' lead time (``1, 2, ...``): the report
        becomes a forecast comparison.  It is a group key after ``by`` (every
        table has one row per model and horizon; the models are the ``by``
        groups, ``"all rows"`` without ``by``), and the figures gain
        ``score_by_horizon`` (the forecast scores, and the Winkler score,
        against the horizon, one line per model) and ``coverage_by_horizon``
        (the coverage of the intervals, and of each level of ``intervals=`` /
        ``quantiles=``, against the horizon, with the target).  Not also in
        ``by``.
    progress : bool or None, default False
        A progress bar on stderr over the report's stages and the steps of
        its metrics (see :func:`conformal_frames.evaluate`); ``None``: when
        stderr is a terminal (the command line's default).
    order_by : Column, optional
        A period column (a day, a batch): the report gains a monitoring
        section (``rep.monitoring``, the ``coverage_sequence`` figure, a
        headline ``ALARM`` line): per segment, the running coverage of the
        intervals (or sets) with an anytime-valid confidence sequence and
        the alarm of its e-process (:func:`~conformal_frames.coverage_alarms`,
        Bonferroni across segments, at ``significance``; the beta-binomial
        boundary, the normal mixture on lazy SQL frames).  Needs a numeric
        ``confidence_level``.

    Returns
    -------
    Report

    Examples
    --------
    >>> import polars as pl
    >>> from conformal_frames.reporting import report
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
    options = dict(locals())
    options.pop("progress")
    with task("report", progress), steps("report stages", 2) as tick:
        return _report(frame, options, tick)


#: the report's options that name one column each (a name or an expression)
_ROLE_OPTIONS = ("y", "lo", "hi", "score", "score_y", "sets", "mean", "std", "point", "baseline")


def _with_roles(frame: Any, options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The options with their expressions as roles, and the frame with them evaluated (``by=`` included)."""
    o = dict(options)
    for k in _ROLE_OPTIONS:
        o[k] = [as_role(v) for v in o[k]] if isinstance(o[k], list) else as_role(o[k])
    if isinstance(o["quantiles"], dict):
        o["quantiles"] = {lv: as_role(c) for lv, c in o["quantiles"].items()}
    if isinstance(o["intervals"], dict):
        o["intervals"] = {
            lv: tuple(as_role(c) for c in pair) if isinstance(pair, (list, tuple)) else pair
            for lv, pair in o["intervals"].items()
        }
    roles = [o[k] for k in (*_ROLE_OPTIONS, "quantiles", "intervals")]
    frame, o["by"] = engine.resolve_roles(frame, roles, o["by"])
    return frame, o


def _report(frame: Any, options: dict[str, Any], tick: Any) -> Report:
    base = planning.as_frame(frame)
    base, options = _with_roles(base, options)
    y, lo, hi, score, score_y, sets = (options[k] for k in ("y", "lo", "hi", "score", "score_y", "sets"))
    quantiles, intervals, mean, std = (options[k] for k in ("quantiles", "intervals", "mean", "std"))
    correction, invalid = options["correction"], options["invalid"]
    max_rows, max_segments = options["max_rows"], options["max_segments"]
    planning.check_roles(
        y,
        lo,
        hi,
        score,
        score_y,
        sets,
        forecast={
            "quantiles": quantiles,
            "intervals": intervals,
            "mean": mean,
            "std": std,
            "point": options["point"],
            "baseline": options["baseline"],
        },
    )
    others = {k: options[k] for k in ("score", "score_y", "sets", "quantiles", "intervals", "mean", "std", "point")}
    planning.check_joint_roles(y, lo, hi, others | {"horizon": options["horizon"]})
    planning.check_options(correction, invalid)
    plan, notes = _make_plan(base, options)
    rep = _evaluate(base, plan)
    tick(1)
    test = test_description(plan) if plan.has_target else None
    kept = {k: rep.summary[k] for k in ("invalid_causes", "invalid_rows", "dropped_rows") if k in rep.summary}
    rep.summary = summarize(rep.tables, plan.keys, plan.confidence_level, test, notes) | kept
    rep.columns = plan.columns()
    rep.max_rows, rep.max_segments = max_rows, max_segments
    _monitoring(rep, base, options, plan.keys)
    tick(1)
    return rep


# ---------------------------------------------------------------------------
# issue 40: monitoring with guarantees (order_by=)
# ---------------------------------------------------------------------------
def _monitoring(rep: Report, base: Any, options: dict[str, Any], keys: list[str]) -> None:
    """With ``order_by=``: the running coverage per segment and period, its alarms, a headline."""
    from conformal_frames.monitoring import coverage_sequence

    order_by = options.get("order_by")
    if order_by is None:
        return
    level, lo, sets = options["confidence_level"], options["lo"], options["sets"]
    if isinstance(level, str) or level is None:
        msg = "report: order_by= (monitoring) needs confidence_level= as a number (one target)"
        raise ValueError(msg)
    if lo is None and sets is None:
        msg = "report: order_by= monitors the coverage of intervals (y, lo, hi) or prediction sets (y, sets)"
        raise ValueError(msg)
    lazy_sql = isinstance(base, nw.LazyFrame) and not base.implementation.is_polars()
    inputs = {"sets": sets, "classes": options["classes"]} if lo is None else {"lo": lo, "hi": options["hi"]}
    seq = coverage_sequence(
        nw.to_native(base), options["y"], confidence_level=float(level), order_by=order_by, by=keys or None,
        ci_level=options["ci_level"], significance=options["significance"], invalid=options["invalid"],
        method="normal_mixture" if lazy_sql else "beta_binomial", **inputs,
    )  # fmt: skip
    seq_nw = nw.from_native(seq)
    sequence = seq_nw.collect() if isinstance(seq_nw, nw.LazyFrame) else seq_nw
    rows = list(sequence.iter_rows(named=True))
    last: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:  # sorted by the keys and the period: the last row of each segment wins
        last[tuple(r[k] for k in keys)] = r
    cols = [*keys, order_by, "n", "coverage", "coverage_cs_low", "coverage_cs_high", "e_value", "alarm_period", "alarm"]
    data = {c: [r[c] for r in last.values()] for c in cols}
    alarms = nw.from_dict(data, backend=nw.get_native_namespace(sequence)) if rows else sequence.select(cols)
    rep.monitoring = {"alarms": alarms, "sequence": sequence}
    rep.summary["order_by"] = order_by
    rep.summary["alarm_significance"] = options["significance"]
    rep.summary["alarms"] = [
        {"group": {k: r[k] for k in keys}, "alarm_period": r["alarm_period"]} for r in last.values() if r["alarm"]
    ]
