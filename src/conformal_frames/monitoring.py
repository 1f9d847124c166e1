"""Monitoring with guarantees: anytime-valid coverage sequences and alarms, from rows or summaries.

:func:`coverage_sequence` and :func:`coverage_alarms` count the covered rows
(or the misses) per segment and period of ``order_by`` in one grouped query
(:func:`~conformal_frames.evaluate` on rows, :func:`~conformal_frames.finalize`
on a summary), then cumulate them and compute the boundaries on the small
per-period table (:mod:`conformal_frames.metrics.monitoring`).
"""

from __future__ import annotations

from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames import engine
from conformal_frames._roles import Column
from conformal_frames._validate import check_choice, check_column, check_fraction, check_level
from conformal_frames.metrics.monitoring import Monitor, alarms, hits_metric, sequence
from conformal_frames.summaries import finalize

__all__ = ["coverage_alarms", "coverage_sequence"]

_SUMMARY_COLUMNS = ("cf_version", "cf_inputs", "cf_cell")


def _is_summary(lf: nw.LazyFrame) -> bool:
    names = lf.collect_schema().names()
    return all(c in names for c in _SUMMARY_COLUMNS)


def _monitor(
    caller: str, by: Any, order_by: str, confidence_level: Any, ci_level: Any, significance: Any, method: Any,
    alternative: Any, n_opt: Any, correction: Any, change_detection: Any,
) -> Monitor:  # fmt: skip
    keys = engine.as_keys(by)
    check_column(order_by, "order_by")
    if order_by in keys:
        msg = f"{caller}: order_by={order_by!r} is also a by= column"
        raise ValueError(msg)
    level = check_level(confidence_level)
    if isinstance(level, str):
        msg = f"{caller}: confidence_level must be a number in (0, 1) (one target per call), got {level!r}"
        raise TypeError(msg)
    if not (isinstance(n_opt, (int, float)) and not isinstance(n_opt, bool) and n_opt > 0):
        msg = f"{caller}: n_opt must be a positive number of rows, got {n_opt!r}"
        raise ValueError(msg)
    if correction is not None:
        check_choice(correction, "correction", ("bonferroni", "e-bh"))
    if not isinstance(change_detection, bool):
        msg = f"{caller}: change_detection must be True or False, got {change_detection!r}"
        raise TypeError(msg)
    return Monitor(
        keys=keys,
        order_by=order_by,
        confidence_level=level,
        ci_level=check_fraction(ci_level, "ci_level"),
        significance=check_fraction(significance, "significance"),
        method=check_choice(method, "method", ("beta_binomial", "normal_mixture")),  # type: ignore[arg-type]
        alternative=check_choice(alternative, "alternative", ("less", "greater", "two-sided")),
        n_opt=float(n_opt),
        correction=correction,
        change_detection=change_detection,
    )


def _path(frame: Any, m: Monitor, metric_args: tuple[Any, ...], invalid: Any, since: Any) -> tuple[Any, bool]:
    """The sequence as a narwhals LazyFrame, and whether the input was eager."""
    metric, misses = hits_metric("coverage_sequence", *metric_args)
    lf, eager = engine.to_lazy(frame)
    by = [*m.keys, m.order_by]
    if _is_summary(lf):
        counts = finalize(frame, metric, by=by)
    else:
        counts = engine.evaluate(frame, metric, by=by, invalid=invalid)
    table, _ = engine.to_lazy(counts)
    return sequence(table, m, misses=misses, eager=eager, since=since), eager


_PERIODS = ("first_excluded", "alarm_period")


def _native(lf: nw.LazyFrame, eager: bool, order_by: str) -> Any:
    out = nw.to_native(nw.maybe_reset_index(lf.collect()) if eager else lf)
    if eager and lf.implementation.is_pandas_like():
        out = _pandas_periods(out, order_by)
    return out


def _pandas_periods(out: Any, order_by: str) -> Any:
    """The period columns of a pandas result in the period's own type, nulls kept.

    pandas holds no null in a numpy integer column (the periods came out as
    float): they become the nullable integer of the same width; an extension
    (``int64[pyarrow]``, ``Int64``) or datetime period dtype is used as it is;
    other periods (e.g. ``datetime.date`` objects) are objects with ``None``.
    """
    import pandas as pd

    period = out[order_by].dtype
    kind = getattr(period, "kind", "O")
    cols = {}
    for c in _PERIODS:
        values = out[c]
        if isinstance(period, np.dtype) and kind in "iu":
            cols[c] = values.astype(str(period).replace("uint", "UInt").replace("int", "Int"))
        elif (isinstance(period, np.dtype) and kind == "M") or isinstance(period, pd.api.extensions.ExtensionDtype):
            cols[c] = values.astype(period)
        elif kind == "O":
            cols[c] = values.astype(object).where(values.notna(), None)
    return out.assign(**cols) if cols else out


def coverage_sequence(
    frame: Any,
    y: Column | None = None,
    lo: Column | None = None,
    hi: Column | None = None,
    *,
    confidence_level: float,
    order_by: str,
    by: Any = None,
    ci_level: float = 0.95,
    significance: float = 0.05,
    method: str = "beta_binomial",
    alternative: str = "less",
    correction: str | None = "bonferroni",
    n_opt: float = 1000,
    since: Any = None,
    change_detection: bool = False,
    miss: Column | None = None,
    sets: Any = None,
    classes: Any = None,
    counts: Column | None = None,
    invalid: Any = None,
) -> Any:
    """Running coverage per segment and period, with a confidence sequence and an e-process alarm.

    Rows are counted per segment (``by=``) and period (each value of
    ``order_by``: a day, a week, a batch number); from the start (or from
    ``since=``) the cumulative counts give, at every period, the running
    coverage, a band that holds **at every period at once** with probability
    ``>= ci_level`` (a confidence sequence, Howard et al. 2021), and an
    e-process for ``H0: coverage >= confidence_level`` whose alarm (it
    crosses ``1 / significance``) is false with probability
    ``<= significance`` however often one looks.  A fixed-sample test
    checked every period has no such guarantee (see the monitoring docs).

    The outcomes of a segment are assumed independent (misses at a constant
    rate under the null); both boundaries depend on the cumulative counts only.

    Parameters
    ----------
    frame
        Rows (any frame narwhals supports, eager or lazy), or a summary from
        :func:`~conformal_frames.summarize` of :func:`~conformal_frames.coverage`
        (``set_coverage``, or ``kupiec_test(miss=)``) by the ``by=`` columns
        and ``order_by`` (daily partitions concatenated): the same result.
    y, lo, hi : Column, optional
        The observed value and the interval bounds; with ``sets=``, ``y`` is
        the label.
    confidence_level : float
        The target coverage in (0, 1).
    order_by : str
        The period column (any orderable type); one output row per segment
        and period.
    by : str or list of str, optional
        Segment columns: each segment has its own sequence.
    ci_level : float, default 0.95
        The confidence sequence's level (valid over all periods at once).
    significance : float, default 0.05
        The alarm's false-alarm probability (over all periods; with
        ``correction="bonferroni"`` over all periods and segments).
    method : {"beta_binomial", "normal_mixture"}
        ``"beta_binomial"``: the conjugate beta mixture of binomial
        likelihood ratios (exact for 0/1 outcomes; a numpy step on the
        per-period table: eager frames and polars LazyFrames).
        ``"normal_mixture"``: the sub-Gaussian normal mixture (closed form:
        lazy on every backend; wider, conservative).
    alternative : {"less", "greater", "two-sided"}, default "less"
        What the alarm looks for: coverage below the target, above it, or
        drift either way.
    correction : {"bonferroni", None}, default "bonferroni"
        ``"bonferroni"``: an alarm needs ``e >= G / significance`` with ``G``
        segments (family-wise control); ``None``: ``1 / significance`` per segment.
    n_opt : float, default 1000
        The rows after which the boundaries are tightest (the mixtures'
        tuning, fixed before looking at the data).
    since : optional
        The first period counted (a value comparable with ``order_by``).
    change_detection : bool, default False
        Alarm on a change detector instead of the e-process: a drop (with
        the default ``alternative``) is found soon after it happens however
        long the segment was on target before, without knowing when it
        happened (``since=`` needs that).  The detector (column
        ``e_detector``) is a mixture of CUSUM e-detectors (Shin, Ramdas and
        Rinaldo 2023) over six alternative miss rates, one likelihood ratio
        per period; its guarantee is on the **average run length**: on
        target, the mean number of periods to a false alarm is at least
        ``1 / significance`` (``G / significance`` per segment with
        Bonferroni: the first false alarm in any segment), not a bound on
        the probability of ever alarming (an e-detector alarms eventually).
        Choose ``significance = 1 / (periods between false alarms)``, e.g.
        ``0.001`` for one per 1000 days.  Lazy on every backend (ordered
        windows); ``n_opt`` does not tune it; the band and ``e_value`` are
        unchanged.
    miss : Column, optional
        Instead of ``y, lo, hi``: a 0/1 miss column (e.g. a VaR hit).
    sets, classes : optional
        Instead of ``lo, hi``: prediction sets as in :func:`~conformal_frames.set_coverage`.
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows (the result equals that of the repeated rows;
        ``n`` counts them).  A summary of ``coverage(counts=)`` serves.
    invalid : {"raise", "drop", "null"}, optional
        As :func:`~conformal_frames.evaluate`; a period with invalid rows
        under ``"null"`` nulls its segment from that period on.

    Returns
    -------
    frame
        One row per segment and period, sorted: the keys, ``order_by``,
        ``n`` (cumulative rows), ``coverage`` (running), ``coverage_cs_low``,
        ``coverage_cs_high``, ``e_value`` (``e_detector`` with
        ``change_detection=True``), ``excluded`` (the band excludes
        the target), ``alarm`` (the e-process, or with ``change_detection``
        the detector, has crossed its threshold at or before this period), and per segment ``first_excluded`` and
        ``alarm_period`` (the first such period, null if none).  Eager in,
        eager out; lazy in, lazy out.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames as cf
    >>> df = pd.DataFrame({"day": [1, 1, 2, 2, 3, 3], "miss": [0, 0, 0, 1, 1, 1]})
    >>> out = cf.coverage_sequence(df, miss="miss", confidence_level=0.9, order_by="day", n_opt=10)
    >>> out[["day", "n", "coverage", "alarm"]]
       day  n  coverage  alarm
    0    1  2  1.000000  False
    1    2  4  0.750000  False
    2    3  6  0.500000  False

    References
    ----------
    S. R. Howard, A. Ramdas, J. McAuliffe and J. Sekhon (2021),
    "Time-uniform, nonparametric, nonasymptotic confidence sequences",
    Annals of Statistics 49(2), 1055-1080.
    J. Shin, A. Ramdas and A. Rinaldo (2023), "E-detectors: a nonparametric
    framework for sequential change detection", New England Journal of
    Statistics in Data Science.
    """
    if correction == "e-bh":
        msg = "coverage_sequence: correction='e-bh' is a decision at one period: use coverage_alarms(correction='e-bh')"
        raise ValueError(msg)
    m = _monitor(
        "coverage_sequence", by, order_by, confidence_level, ci_level, significance, method, alternative, n_opt,
        correction, change_detection,
    )  # fmt: skip
    path, eager = _path(frame, m, (y, lo, hi, miss, sets, classes, counts), invalid, since)
    return _native(path, eager, order_by)


def coverage_alarms(
    frame: Any,
    y: Column | None = None,
    lo: Column | None = None,
    hi: Column | None = None,
    *,
    confidence_level: float,
    order_by: str,
    by: Any = None,
    ci_level: float = 0.95,
    significance: float = 0.05,
    method: str = "beta_binomial",
    alternative: str = "less",
    correction: str | None = "bonferroni",
    n_opt: float = 1000,
    since: Any = None,
    change_detection: bool = False,
    at: Any = None,
    miss: Column | None = None,
    sets: Any = None,
    classes: Any = None,
    counts: Column | None = None,
    invalid: Any = None,
) -> Any:
    """Per segment: the coverage sequence at one period, and the alarm decision adjusted across segments.

    The row of each segment at period ``at`` (default: its last period) of
    :func:`coverage_sequence`, with ``alarm`` the decision:

    - ``correction="bonferroni"`` (default): the segment's e-process crossed
      ``G / significance`` (``G`` segments) at some period up to ``at``: the
      chance of any false alarm, over all segments and periods, is at most
      ``significance``;
    - ``correction="e-bh"``: the segments that e-BH (Wang and Ramdas 2022)
      selects from the e-values at ``at``: the expected fraction of false
      alarms among the alarms is at most ``significance`` (under any
      dependence between segments), for that period;
    - ``None``: each segment's e-process crossed ``1 / significance``.

    With ``change_detection=True`` the decision is the change detector's
    (Bonferroni or none; its guarantee is on the average run length).

    ``alarm_period`` is the first period at which the e-process crossed the
    threshold (Bonferroni's or, otherwise, ``1 / significance``); null if
    not by ``at``.  Other parameters as :func:`coverage_sequence`.

    Returns
    -------
    frame
        One row per segment: the keys, ``order_by`` (the period of the row),
        the columns of :func:`coverage_sequence`, ``alarm`` the decision.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames as cf
    >>> df = pd.DataFrame({"day": [1, 2, 3] * 4, "seg": ["a"] * 6 + ["b"] * 6,
    ...                    "miss": [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]})
    >>> out = cf.coverage_alarms(df, miss="miss", confidence_level=0.9, order_by="day", by="seg",
    ...                          n_opt=10, correction="e-bh")
    >>> out[["seg", "day", "n", "coverage", "alarm"]]
      seg  day  n  coverage  alarm
    0   a    3  6       1.0  False
    1   b    3  6       0.0   True
    """
    path_correction = "bonferroni" if correction == "bonferroni" else None
    m = _monitor(
        "coverage_alarms", by, order_by, confidence_level, ci_level, significance, method, alternative, n_opt,
        path_correction, change_detection,
    )  # fmt: skip
    if correction is not None:
        check_choice(correction, "correction", ("bonferroni", "e-bh"))
    if change_detection and correction == "e-bh":
        msg = "coverage_alarms: correction='e-bh' needs e-values: the change detector is not one (use 'bonferroni')"
        raise ValueError(msg)
    path, eager = _path(frame, m, (y, lo, hi, miss, sets, classes, counts), invalid, since)
    m = Monitor(**{**m.__dict__, "correction": correction})
    return _native(alarms(path, m, at), eager, order_by)
