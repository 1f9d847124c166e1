"""Monitoring with guarantees: running coverage with a confidence sequence, and e-process alarms.

The family's pieces, used by :func:`conformal_frames.coverage_sequence` and
:func:`conformal_frames.coverage_alarms` (which read rows or summaries):

- the hit-count metrics (:func:`hits_metric`): per group, the number of
  covered rows (an interval, a prediction set) or of misses (``miss=``), and ``n``;
  the statistics are those of :func:`~conformal_frames.coverage`,
  :func:`~conformal_frames.set_coverage` and :func:`~conformal_frames.kupiec_test`,
  so their summaries serve;
- :func:`sequence`: from a table of per-period counts (one row per segment
  and period of ``order_by``), the cumulative counts (an ordered window per
  segment), the running coverage, the confidence sequence and the
  e-process (see :mod:`conformal_frames.numerics.sequences`), the first period
  at which the sequence excludes the target and the first alarm;
- :func:`alarms`: one row per segment at a chosen period, with the decision
  adjusted across segments (Bonferroni on the e-processes, or e-BH).

Everything is narwhals expressions on the small per-period table (lazy on
every backend) except the beta-binomial boundary, a numpy step (a root solve
and the incomplete beta function): eager frames and polars LazyFrames.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._validate import check_column, checked, instance_of, optional
from conformal_frames.engine import Metric, Query, indicator, lazy_refusal, over, sort_result
from conformal_frames.inputs.intervals import covered_row, miss_column_row
from conformal_frames.inputs.sets import SetMetric, SetSpec, set_covered_row, set_spec
from conformal_frames.numerics import sequences as seq
from conformal_frames.numerics.brownian import with_normal_sf

__all__ = ["METHODS", "Monitor", "alarms", "hits_metric", "sequence"]
METHODS: list[str] = []  # frame functions only (cf.coverage_sequence, cf.coverage_alarms)

F64 = nw.Float64
Method = Literal["beta_binomial", "normal_mixture"]
Correction = Literal["bonferroni", "e-bh"] | None


# ---------------------------------------------------------------------------
# per-period counts
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class IntervalHits(Metric):
    """Per group: the covered rows (``y`` in ``[lo, hi]``), or the misses of a ``miss=`` column."""

    y: str | None = checked(optional(check_column), None)
    lo: str | None = checked(optional(check_column), None)
    hi: str | None = checked(optional(check_column), None)
    miss: str | None = checked(optional(check_column), None)
    counts: str | None = checked(optional(check_column), None)
    default_name = "hits"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        w = q.weighting(None, counts=self.counts)  # n is then the rows counted (the sum of the counts)
        if self.miss is not None:
            return {"": w.sum(miss_column_row(q, self.miss))}
        assert self.y is not None and self.lo is not None and self.hi is not None
        return {"": w.sum(covered_row(q, self.y, self.lo, self.hi))}


@dataclass(frozen=True, kw_only=True)
class SetHits(SetMetric):
    """Per group: the rows whose label is in their prediction set."""

    y: str
    spec: SetSpec = checked(instance_of(SetSpec))
    counts: str | None = checked(optional(check_column), None)
    default_name = "hits"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        return {"": q.weighting(None, counts=self.counts).sum(set_covered_row(q, self.y, self.spec))}


def hits_metric(
    caller: str, y: str | None, lo: str | None, hi: str | None, miss: str | None, sets: Any, classes: Any,
    counts: str | None = None,
) -> tuple[Metric, bool]:  # fmt: skip
    """The counting metric of one of the three inputs, and whether it counts misses (``counts=``:
    frequency counts, read by the engine's counts role as in :func:`~conformal_frames.coverage`)."""
    given = {"y, lo, hi": lo is not None or hi is not None, "miss=": miss is not None, "sets=": sets is not None}
    chosen = [k for k, v in given.items() if v]
    if len(chosen) != 1:
        msg = (
            f"{caller}: give one of y, lo, hi (intervals), y and sets= (prediction sets) "
            f"or miss= (a 0/1 miss column); got {' and '.join(chosen) or 'none'}"
        )
        raise ValueError(msg)
    if sets is not None:
        if y is None:
            msg = f"{caller}: sets= needs y (the label column)"
            raise ValueError(msg)
        return SetHits(y=y, spec=set_spec(sets, classes), counts=counts), False
    if miss is not None:
        if y is not None:
            msg = f"{caller}: give either y, lo, hi (the interval) or miss= (a 0/1 miss column), not both"
            raise ValueError(msg)
        return IntervalHits(miss=miss, counts=counts), True
    if y is None or lo is None or hi is None:
        msg = f"{caller}: give y, lo and hi (the interval)"
        raise ValueError(msg)
    return IntervalHits(y=y, lo=lo, hi=hi, counts=counts), False


# ---------------------------------------------------------------------------
# the sequence
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Monitor:
    """The parameters of one monitoring call (checked by the caller)."""

    keys: Sequence[str]
    order_by: str
    confidence_level: float
    ci_level: float
    significance: float
    method: Method
    alternative: str
    n_opt: float
    correction: Correction
    change_detection: bool = False

    @property
    def p0(self) -> float:
        """The target miss rate ``1 - confidence_level``."""
        return 1.0 - self.confidence_level

    @property
    def miss_alternative(self) -> str:
        """The alternative on the miss rate (coverage "less" = miss rate "greater")."""
        return {"less": "greater", "greater": "less"}.get(self.alternative, "two-sided")


def _cumulated(table: nw.LazyFrame, m: Monitor, misses: bool) -> nw.LazyFrame:
    """Per row (segment, period): the cumulative misses ``K``, rows ``t`` and invalid periods."""
    keys, order = list(m.keys), m.order_by
    hits, n = nw.col("hits"), nw.col("n").cast(F64)
    period_k = hits if misses else n - hits
    table = table.with_columns(
        period_k.fill_null(0.0).cast(F64).alias("__cf_kp"),
        n.alias("__cf_np"),
        indicator(hits.is_null()).alias("__cf_bp"),
    )
    # the cast above, not inside the window: on pandas a cast-then-cum_sum window ignores order_by
    return table.with_columns(
        over(nw.col("__cf_kp").cum_sum(), keys, order_by=order).alias("__cf_k"),
        over(nw.col("__cf_np").cum_sum(), keys, order_by=order).alias("__cf_t"),
        over(nw.col("__cf_bp").cum_sum(), keys, order_by=order).alias("__cf_bad"),
    )


def _normal(table: nw.LazyFrame, m: Monitor) -> nw.LazyFrame:
    """The normal-mixture band (coverage scale) and ``log`` e-process, as expressions.

    Written in shallow steps, one function of plain columns each: on Spark a
    ``log`` or ``sqrt`` of a compound expression repeats it in guards, and the
    analysis of the nested result took seconds per ``with_columns``.
    """
    col = nw.col
    level = 1.0 - m.ci_level
    rho_ci, rho_e = seq.normal_rho(m.n_opt, level), seq.normal_rho(m.n_opt, m.significance)
    sign = 1.0 if m.miss_alternative == "greater" else -1.0
    # V + rho at the band's and the test's tuning, S = K - t p0, the rate
    table = table.with_columns(
        (col("__cf_t") / 4.0 + rho_ci).alias("__cf_vc"),
        (col("__cf_t") / 4.0 + rho_e).alias("__cf_ve"),
        (col("__cf_k") - col("__cf_t") * m.p0).alias("__cf_s"),
        (col("__cf_k") / col("__cf_t")).alias("__cf_rate"),
    )
    table = table.with_columns(
        (col("__cf_vc") / (rho_ci * level * level)).log().alias("__cf_lc"),
        (rho_e / col("__cf_ve")).log().alias("__cf_le"),
        col("__cf_ve").sqrt().alias("__cf_re"),
    )
    # radius sqrt((V + rho) log((V + rho) / (rho a^2))) / t; log M = log(rho / (V + rho)) / 2 + S^2 / (2 (V + rho))
    table = table.with_columns((col("__cf_vc") * col("__cf_lc")).alias("__cf_r2"))
    table = table.with_columns(
        (col("__cf_r2").sqrt() / col("__cf_t")).alias("__cf_radius"),
        (0.5 * col("__cf_le") + col("__cf_s") * col("__cf_s") / (2.0 * col("__cf_ve"))).alias("__cf_two"),
        (-sign * col("__cf_s") / col("__cf_re")).alias("__cf_mz"),
    )
    table = table.with_columns(
        (1.0 - col("__cf_rate") - col("__cf_radius")).alias("__cf_low"),
        (1.0 - col("__cf_rate") + col("__cf_radius")).alias("__cf_high"),
    )
    table = table.with_columns(col("__cf_low").clip(0.0, 1.0), col("__cf_high").clip(0.0, 1.0))
    if m.alternative == "two-sided":
        return table.with_columns(col("__cf_two").alias("__cf_loge"))
    # the one-sided mixture: 2 M(two-sided) Phi(z), Phi(z) = 1 - Phi(-z) (the project's lazy normal tail)
    table = with_normal_sf(table, "__cf_mz", "__cf_phi", "__cf_tail_")
    table = table.with_columns(col("__cf_phi").clip(lower_bound=1e-300).alias("__cf_phi"))
    table = table.with_columns(col("__cf_phi").log().alias("__cf_lphi"))
    return table.with_columns((math.log(2.0) + col("__cf_two") + col("__cf_lphi")).alias("__cf_loge"))


def _detector(table: nw.LazyFrame, m: Monitor) -> nw.LazyFrame:
    """``__cf_logd``: ``log`` of the change detector, a mixture of CUSUM e-detectors (expressions).

    Per alternative miss rate ``q`` (:func:`~conformal_frames.numerics.sequences.detector_grid`),
    the CUSUM recursion ``D_t = max(D_{t-1}, 1) e_t`` over the periods'
    likelihood ratios ``e_t`` is, in logs, ``S_t - min(S_0, ..., S_{t-1})``
    with ``S`` the cumulative ``log`` likelihood ratio (``S_0 = 0``): a running
    minimum (an ordered window), lazy on every backend.  The detector is the
    weighted sum ``sum_q w_q D_t(q)`` (a log-sum-exp).
    """
    col, keys, order = nw.col, list(m.keys), m.order_by
    grid = seq.detector_grid(m.p0, m.miss_alternative)
    fk, fn = col("__cf_k") - col("__cf_kp"), col("__cf_t") - col("__cf_np")  # the counts before the period
    table = table.with_columns(
        *[(col("__cf_k") * a + (col("__cf_t") - col("__cf_k")) * b).alias(f"__cf_ds{i}") for i, (a, b, _) in enumerate(grid)],
        *[(fk * a + (fn - fk) * b).alias(f"__cf_dp{i}") for i, (a, b, _) in enumerate(grid)],
    )  # fmt: skip
    table = table.with_columns(
        *[over(col(f"__cf_dp{i}").cum_min(), keys, order_by=order).alias(f"__cf_dm{i}") for i in range(len(grid))]
    )
    parts = [f"__cf_dw{i}" for i in range(len(grid))]
    table = table.with_columns(
        *[(col(f"__cf_ds{i}") - col(f"__cf_dm{i}") + lw).alias(parts[i]) for i, (_, _, lw) in enumerate(grid)]
    )
    table = table.with_columns(nw.max_horizontal(*parts).alias("__cf_dx"))
    table = table.with_columns(*[(col(c) - col("__cf_dx")).exp().alias(c) for c in parts])
    table = table.with_columns(nw.sum_horizontal(*parts).log().alias("__cf_dl"))
    table = table.with_columns((col("__cf_dl") + col("__cf_dx")).alias("__cf_logd"))
    scratch = [f"__cf_d{x}{i}" for x in "spmw" for i in range(len(grid))]
    return table.drop(*scratch, "__cf_dx", "__cf_dl")


def _beta_numpy(m: Monitor) -> Any:
    """The numpy step of the beta-binomial boundary on the collected per-period table."""
    a_ci, b_ci = seq.beta_prior(m.p0, m.n_opt, 1.0 - m.ci_level)
    a_e, b_e = seq.beta_prior(m.p0, m.n_opt, m.significance)

    def run(frame: nw.DataFrame) -> nw.DataFrame:
        k = frame.get_column("__cf_k").to_numpy().astype(float)
        t = frame.get_column("__cf_t").to_numpy().astype(float)
        low, high = seq.beta_binomial_cs(k, t, a_ci, b_ci, 1.0 - m.ci_level)
        log_e = seq.beta_binomial_log_e(k, t, m.p0, a_e, b_e, m.miss_alternative)
        ns = nw.get_native_namespace(frame)
        return frame.with_columns(
            nw.new_series("__cf_low", 1.0 - high, F64, backend=ns),
            nw.new_series("__cf_high", 1.0 - low, F64, backend=ns),
            nw.new_series("__cf_loge", log_e, F64, backend=ns),
        )

    return run


def _beta(table: nw.LazyFrame, m: Monitor, eager: bool) -> nw.LazyFrame:
    """The beta-binomial band and ``log`` e-process: a numpy step (eager, or polars' ``map_batches``)."""
    run = _beta_numpy(m)
    if eager:
        return run(table.collect()).lazy()
    if not table.implementation.is_polars():
        raise lazy_refusal(
            "coverage_sequence(method='beta_binomial') (a numpy root solve on the per-period table)",
            table,
            way_out="use method='normal_mixture' (closed form: lazy on every backend), or polars",
        )
    import polars as pl  # a polars LazyFrame

    native = table.to_native()
    schema = dict(native.collect_schema())
    schema.update(dict.fromkeys(("__cf_low", "__cf_high", "__cf_loge"), pl.Float64))

    def batch(df: Any) -> Any:
        return run(nw.from_native(df, eager_only=True)).to_native()

    return nw.from_native(native.map_batches(batch, schema=pl.Schema(schema), streamable=False))


def _first(table: nw.LazyFrame, m: Monitor, flag: str, out: str) -> nw.LazyFrame:
    """``out``: per segment, the first period where ``flag`` holds (null if never): a window, no join."""
    at = f"__cf_at_{out}"
    table = table.with_columns(nw.when(nw.col(flag)).then(nw.col(m.order_by)).alias(at))
    return table.with_columns(over(nw.col(at).min(), m.keys).alias(out)).drop(at)


def n_segments(table: nw.LazyFrame, keys: Sequence[str], order: str) -> nw.LazyFrame:
    """``table`` with ``__cf_g``, the number of segments (1 without keys): windows, no join."""
    if not keys:
        return table.with_columns(nw.lit(1.0).alias("__cf_g"))
    first = indicator(nw.col(order) == over(nw.col(order).min(), keys)).alias("__cf_first")
    return table.with_columns(first).with_columns(nw.col("__cf_first").sum().alias("__cf_g")).drop("__cf_first")


def sequence(table: Any, m: Monitor, *, misses: bool, eager: bool, since: Any = None) -> nw.LazyFrame:
    """The running coverage, its confidence sequence and the e-process per segment and period.

    ``table``: a LazyFrame of per-period counts (keys, ``order_by``, ``hits``,
    ``n``); ``misses``: whether ``hits`` counts misses.  A period with a null
    count (invalid rows under ``invalid="null"``) nulls its segment from then on.
    """
    keys, order = list(m.keys), m.order_by
    if since is not None:
        table = table.filter(nw.col(order) >= since)
    table = _cumulated(table, m, misses)
    table = _beta(table, m, eager) if m.method == "beta_binomial" else _normal(table, m)
    if m.change_detection:
        table = _detector(table, m)
    alarm_on = "__cf_logd" if m.change_detection else "__cf_loge"
    threshold = nw.lit(math.log(1.0 / m.significance))
    if m.correction == "bonferroni":
        table = n_segments(table, keys, order)
        threshold = threshold + nw.col("__cf_g").log()
    ok = (nw.col("__cf_bad") == 0.0) & (nw.col("__cf_t") > 0.0)
    target = m.confidence_level
    table = table.with_columns(
        (ok & ((nw.col("__cf_low") > target) | (nw.col("__cf_high") < target))).alias("__cf_out"),
        (ok & (nw.col(alarm_on) >= threshold)).alias("__cf_cross"),
    )
    table = _first(_first(table, m, "__cf_out", "first_excluded"), m, "__cf_cross", "alarm_period")
    alarm_period = nw.col("alarm_period")
    out = table.select(
        *keys,
        order,
        nw.col("__cf_t").cast(nw.Int64).alias("n"),
        nw.when(ok).then(1.0 - nw.col("__cf_k") / nw.col("__cf_t")).alias("coverage"),
        nw.when(ok).then(nw.col("__cf_low")).alias("coverage_cs_low"),
        nw.when(ok).then(nw.col("__cf_high")).alias("coverage_cs_high"),
        nw.when(ok).then(nw.col("__cf_loge").exp()).alias("e_value"),
        *([nw.when(ok).then(nw.col("__cf_logd").exp()).alias("e_detector")] if m.change_detection else []),
        nw.when(ok).then(nw.col("__cf_out")).alias("excluded"),
        nw.when(ok).then(~alarm_period.is_null() & (nw.col(order) >= alarm_period)).alias("alarm"),
        "first_excluded",
        "alarm_period",
    )
    return sort_result(out, *keys, order)


def alarms(path: nw.LazyFrame, m: Monitor, at: Any = None) -> nw.LazyFrame:
    """One row per segment at period ``at`` (default: each segment's last) with the adjusted decision.

    ``path``: the output of :func:`sequence` (its ``alarm_period`` already at
    the Bonferroni threshold when ``m.correction == "bonferroni"``).  The
    decision ``alarm``: Bonferroni or none, the e-process crossed its
    threshold by ``at``; e-BH, the segment is among the e-BH discoveries of
    the e-values at ``at`` (``e_(k) >= G / (k significance)``).
    """
    keys, order = list(m.keys), m.order_by
    if at is not None:
        path = path.filter(nw.col(order) <= at)
    path = path.with_columns(over(nw.col(order).max(), keys).alias("__cf_last"))
    rows = path.filter(nw.col(order) == nw.col("__cf_last")).drop("__cf_last")
    crossed = ~nw.col("alarm_period").is_null()
    if at is not None:
        crossed = crossed & (nw.col("alarm_period") <= at)
    rows = rows.with_columns(
        crossed.alias("alarm"), nw.when(crossed).then(nw.col("alarm_period")).alias("alarm_period")
    )
    if m.correction == "e-bh":
        rows = _ebh(rows, keys, m.significance)
    return sort_result(rows, *keys)


def _ebh(rows: nw.LazyFrame, keys: list[str], significance: float) -> nw.LazyFrame:
    """e-BH (Wang and Ramdas 2022) over the segments' e-values: ``alarm`` is the discovery set.

    ``k_g = #{h : e_h >= e_g}`` (the rank, ties at the largest); the ``k*``
    largest e-values are discoveries, ``k* = max{k_g : e_g k_g significance >= G}``.
    Windows over the small per-segment table (lazy on every backend).
    """
    e = nw.col("__cf_e")
    rows = rows.with_columns(nw.col("e_value").fill_null(0.0).alias("__cf_e"))
    rows = rows.with_columns(
        e.rank("max", descending=True).cast(F64).alias("__cf_k"), nw.len().cast(F64).alias("__cf_g")
    )
    ok = nw.when(e * nw.col("__cf_k") * significance >= nw.col("__cf_g")).then(nw.col("__cf_k")).otherwise(0.0)
    rows = rows.with_columns(ok.alias("__cf_ok")).with_columns(nw.col("__cf_ok").max().alias("__cf_kstar"))
    decided = (nw.col("__cf_kstar") > 0.0) & (nw.col("__cf_k") <= nw.col("__cf_kstar"))
    return rows.with_columns(decided.alias("alarm")).drop("__cf_e", "__cf_k", "__cf_g", "__cf_ok", "__cf_kstar")


def numpy_ebh(e_values: np.ndarray, significance: float) -> np.ndarray:
    """e-BH discoveries of ``e_values`` (a numpy reference of :func:`_ebh`)."""
    e = np.nan_to_num(np.asarray(e_values, dtype=float), nan=0.0)
    g = len(e)
    k = np.array([(e >= x).sum() for x in e], dtype=float)
    ok = e * k * significance >= g
    kstar = k[ok].max() if ok.any() else 0.0
    return (k <= kstar) & (kstar > 0)
