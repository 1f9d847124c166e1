"""Which metrics apply to the columns given, and the query that evaluates them.

The report is a consumer of the metrics: every number comes from a metric
object evaluated by the engine (one query, one pass over the data).  With a
column of nominal levels (``confidence_level="level"``) the level column is a
group key and the per-group target of the under-coverage test and the Winkler
score, so all levels share one query and one multiplicity correction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import narwhals.stable.v2 as nw

from conformal_frames import engine
from conformal_frames._roles import ExprColumn
from conformal_frames._validate import check_choice, check_probability
from conformal_frames._widths import collect
from conformal_frames.metrics.bootstrap import skill_score
from conformal_frames.metrics.calibration import brier, ece, ks_test, kuiper_test, reliability, spiegelhalter_test
from conformal_frames.metrics.conditional import coverage_test
from conformal_frames.metrics.distributions import crps, pit_histogram, pit_test, quantile_crps
from conformal_frames.metrics.intervals import coverage, hsic, ssc, ssc_score, width, winkler
from conformal_frames.metrics.point import bias, mae, rmse, smape
from conformal_frames.metrics.quantiles import interval_coverage, pinball_loss, quantile_coverage, wis, wis_pairs
from conformal_frames.metrics.recalibration import score_decomposition, smooth_ece
from conformal_frames.metrics.sets import empty_rate, set_coverage, set_size, singleton_rate
from conformal_frames.metrics.uncertainty_calibration import (
    ence,
    mean_absolute_calibration_error,
    miscalibration_area,
    root_mean_squared_calibration_error,
    sharpness,
    uce,
    uncertainty_calibration_curve,
)

#: the alias of coverage_test's outputs, per family: they become the coverage columns
COVERAGE_COLUMN = {"intervals": "coverage", "sets": "set_coverage", "joint_coverage": "coverage"}
CORRECTIONS = ("holm", "bh", "none")
INVALID_POLICIES = ("raise", "drop", "null")


@dataclass(frozen=True)
class ReportPlan:
    """The columns (by role) and options of one report."""

    #: one column each, or tuples of columns (several outputs: the joint-coverage table)
    y: Any
    lo: Any
    hi: Any
    score: str | None
    score_y: str | None
    sets: str | None
    classes: list[Any] | None
    by: list[str]
    target: float | None
    level_column: str | None
    n_bins: int
    ssc_n_bins: int
    ci_level: float
    significance: float
    correction: str
    n_calibration: int | None
    hsic: bool
    bounded_memory: bool
    invalid: engine.InvalidPolicy | None
    test_in_query: bool
    #: forecast columns (the forecast family): ``{level: column}`` and a Gaussian forecast
    quantiles: dict[float, str] | None = None
    intervals: dict[float, tuple[str, str]] | None = None
    mean: str | None = None
    std: str | None = None
    #: crossing quantiles in the forecast family (``crossing=`` of its metrics)
    crossing: str = "score"
    #: a point forecast of ``y`` (point errors) and a baseline's point forecast (skill)
    point: str | None = None
    baseline: str | None = None
    #: the forecasts' lead time (a group key after ``by``): the by-horizon charts
    horizon: str | None = None

    @property
    def keys(self) -> list[str]:
        """Group columns of the tables: ``by``, the horizon column, the level column."""
        return [
            *self.by,
            *([self.horizon] if self.horizon else []),
            *([self.level_column] if self.level_column else []),
        ]

    @property
    def confidence_level(self) -> float | str | None:
        return self.level_column if self.level_column is not None else self.target

    @property
    def has_target(self) -> bool:
        return self.confidence_level is not None

    @property
    def label(self) -> str | None:
        """The 0/1 outcome of the scores."""
        return self.score_y if self.score_y is not None else self.y

    def columns(self) -> dict[str, str]:
        """Role name to column, as given (quantiles / intervals as ``0.1=q10,...`` / ``0.8=lo80:hi80,...``;
        an expression as its text)."""
        s = shown
        roles = {
            **{
                r: ",".join(s(c) for c in v) if isinstance(v, tuple) else s(v)
                for r, v in (("y", self.y), ("lo", self.lo), ("hi", self.hi))
            },
            "score": s(self.score),
            "score_y": s(self.score_y),
            "sets": s(self.sets),
            "confidence_level": self.level_column,
            "horizon": self.horizon,
            "mean": s(self.mean),
            "std": s(self.std),
            "point": s(self.point),
            "baseline": s(self.baseline),
            "quantiles": ",".join(f"{lv:g}={s(c)}" for lv, c in (self.quantiles or {}).items()) or None,
            "intervals": ",".join(f"{lv:g}={s(lo)}:{s(hi)}" for lv, (lo, hi) in (self.intervals or {}).items()) or None,
        }
        return {k: v for k, v in roles.items() if v is not None}

    def families(self) -> dict[str, list[engine.Metric]]:
        """The metrics of each family that applies (the display order)."""
        out: dict[str, list[engine.Metric]] = {}
        if isinstance(self.y, tuple):  # several outputs: the joint-coverage table alone
            return {"joint_coverage": self._joint(self.y, self.lo, self.hi)}
        if self.y is not None and self.lo is not None and self.hi is not None:
            out["intervals"] = self._intervals(self.y, self.lo, self.hi)
        if self.sets is not None and self.y is not None:
            out["sets"] = self._sets(self.y, self.sets)
        if self.score is not None and self.label is not None:
            label, score = self.label, self.score
            out["calibration"] = [
                ece(label, score, n_bins=self.n_bins),
                brier(label, score),
                ks_test(label, score),
                kuiper_test(label, score),
                spiegelhalter_test(label, score),
            ]
            if self.test_in_query:  # per-group numpy steps: eager frames and polars
                out["calibration"].append(smooth_ece(label, score))
                out["decomposition"] = [score_decomposition(label, score)]
            out["reliability"] = [reliability(label, score, n_bins=self.n_bins, ci_level=self.ci_level)]
        if self.y is not None and (self.quantiles or self.intervals or self.mean is not None or self.point is not None):
            out["forecast"] = self._forecast(self.y)
        if self.y is not None and self.mean is not None and self.std is not None:  # issue 41: mean=, std=
            out |= self._uncertainty(self.y, self.mean, self.std)
        return out

    def _uncertainty(self, y: str, mean: str, std: str) -> dict[str, list[engine.Metric]]:
        """Regression uncertainty calibration: the scores per group and the calibration curve (100 levels,
        the sums the scores read)."""
        scores = [
            ence(y, mean=mean, std=std, n_bins=self.n_bins),
            uce(y, mean=mean, std=std, n_bins=self.n_bins),
            mean_absolute_calibration_error(y, mean=mean, std=std),
            root_mean_squared_calibration_error(y, mean=mean, std=std),
            miscalibration_area(y, mean=mean, std=std),
            sharpness(std),
        ]
        return {
            "uncertainty_calibration": scores,
            "uncertainty_calibration_curve": [uncertainty_calibration_curve(y, mean=mean, std=std)],
        }

    def _forecast(self, y: str) -> list[engine.Metric]:
        """Scores of quantile, interval and Gaussian forecasts (the Gaussian ones first, unprefixed).

        Gaussian and quantiles: CRPS, PIT test and PIT histogram (a long
        table by bin, ``n_bins`` bins).  Quantiles also: the mean pinball loss, WIS and its
        components (when the levels hold the median and central intervals)
        and the per-level coverage (its mean absolute deviation in the
        ``forecast`` table; the long table ``quantile_coverage``).  Intervals:
        the long table ``interval_coverage`` (coverage, Wilson interval,
        width, Winkler per level).
        """
        ms: list[engine.Metric] = []
        if self.mean is not None and self.std is not None:
            ms += [crps(y, mean=self.mean, std=self.std), pit_test(y, mean=self.mean, std=self.std)]
            ms.append(pit_histogram(y, mean=self.mean, std=self.std, n_bins=self.n_bins, ci_level=self.ci_level))
        if self.quantiles:
            prefix = "quantile_" if ms else ""
            qs, cross = self.quantiles, self.crossing
            ms += [
                quantile_crps(y, quantiles=qs, crossing=cross),  # never named crps: an approximation
                pit_test(y, quantiles=qs, crossing=cross).alias(f"{prefix}pit_test"),
                pit_histogram(y, quantiles=qs, n_bins=self.n_bins, ci_level=self.ci_level, crossing=cross).alias(
                    f"{prefix}pit_histogram"
                ),
                pinball_loss(y, quantiles=qs, crossing=cross),
            ]
            if has_wis_levels(qs):
                ms.append(wis(y, quantiles=qs, crossing=cross))
            ms.append(quantile_coverage(y, quantiles=qs, ci_level=self.ci_level, crossing=cross))
        if self.intervals:
            ms.append(interval_coverage(y, intervals=self.intervals, ci_level=self.ci_level, crossing=self.crossing))
        if self.point is not None:
            f = self.point
            ms += [mae(y, f), rmse(y, f), bias(y, f), smape(y, f)]
            if self.baseline is not None:
                ms.append(skill_score(mae(y, f), mae(y, self.baseline)))
        return ms

    def _coverage(self, family: str, y: str, **target: Any) -> engine.Metric:
        """coverage_test (with a target, when it runs in the query) or plain coverage."""
        name = COVERAGE_COLUMN[family]
        if self.has_target and self.test_in_query:
            return coverage_test(
                y,
                **target,
                confidence_level=self.confidence_level,  # type: ignore[arg-type]
                ci_level=self.ci_level,
                n_calibration=self.n_calibration,
                significance=self.significance,
                correction=self.correction,  # type: ignore[arg-type]
            ).alias(name)
        if family in ("intervals", "joint_coverage"):
            return coverage(y, target["lo"], target["hi"], ci_level=self.ci_level)
        return set_coverage(y, target["sets"], classes=target["classes"], ci_level=self.ci_level)

    def _intervals(self, y: str, lo: str, hi: str) -> list[engine.Metric]:
        ms = [self._coverage("intervals", y, lo=lo, hi=hi), width(lo, hi)]
        if self.has_target:
            ms.append(winkler(y, lo, hi, confidence_level=self.confidence_level))  # type: ignore[arg-type]
        if self.ssc_n_bins:
            ms += [ssc_score(y, lo, hi, n_bins=self.ssc_n_bins), ssc(y, lo, hi, n_bins=self.ssc_n_bins)]
        if self.hsic:
            ms.append(hsic(y, lo, hi))
        return ms

    def _joint(self, y: tuple[str, ...], lo: tuple[str, ...], hi: tuple[str, ...]) -> list[engine.Metric]:
        """Several outputs: the joint coverage (tested against the target), each output's coverage
        (``coverage_output<j>``), the mean box volume (``width``) and each output's mean width."""
        main = self._coverage("joint_coverage", y, lo=lo, hi=hi)  # type: ignore[arg-type]
        ms = [main]
        if main.default_name == "coverage_test":  # the outputs' coverage apart (coverage gives it with lists)
            ms += [coverage(*out).alias(f"coverage_output{j}") for j, out in enumerate(zip(y, lo, hi, strict=True))]
        return [*ms, width(lo, hi)]

    def _sets(self, y: str, sets: str) -> list[engine.Metric]:
        classes = self.classes  # None: the labels come from the sets
        return [
            self._coverage("sets", y, sets=sets, classes=classes),
            set_size(sets, classes=classes),
            singleton_rate(sets, classes=classes),
            empty_rate(sets, classes=classes),
        ]


def shown(column: Any) -> Any:
    """A role as the report shows it: a column's name, an expression's text."""
    return column.text if isinstance(column, ExprColumn) else column


def has_wis_levels(quantiles: dict[float, str]) -> bool:
    """The levels hold the median and, for every level ``tau``, the level ``1 - tau`` (what WIS needs)."""
    from conformal_frames.inputs.forecasts import check_quantiles

    try:
        wis_pairs(check_quantiles(quantiles))
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------
def keyword(role: str) -> str:
    """How an argument is spelled in the Python API: ``hi=``."""
    return f"{role}="


def check_roles(
    y: Any,
    lo: Any,
    hi: Any,
    score: Any,
    score_y: Any,
    sets: Any,
    spell: Callable[[str], str] = keyword,
    *,
    forecast: dict[str, Any] | None = None,
) -> None:
    """Each family gets all of its columns, or none (``spell`` names the arguments, e.g. CLI flags).

    ``forecast`` holds the forecast arguments (``quantiles``, ``intervals``, ``mean``, ``std``).
    """
    given = {k: v for k, v in (forecast or {}).items() if v is not None}
    if "baseline" in given and "point" not in given:
        msg = f"{spell('baseline')} is the baseline's point forecast, compared with {spell('point')}; missing {spell('point')}"
        raise ValueError(msg)
    if ("mean" in given) != ("std" in given):
        missing = spell("std") if "mean" in given else spell("mean")
        msg = f"Gaussian forecasts need {spell('mean')} and {spell('std')}; missing {missing}"
        raise ValueError(msg)
    if given and y is None:
        msg = f"forecast metrics need {spell('y')} (the observed value) with {', '.join(spell(k) for k in given)}"
        raise ValueError(msg)
    if given and lo is None and score is None and sets is None:
        return
    interval = {"y": y, "lo": lo, "hi": hi}
    if (lo is not None or hi is not None) and None in interval.values():
        missing = ", ".join(spell(k) for k, v in interval.items() if v is None)
        msg = f"interval metrics need {spell('y')}, {spell('lo')} and {spell('hi')}; missing {missing}"
        raise ValueError(msg)
    if score is not None and y is None and score_y is None:
        msg = (
            f"calibration metrics need the 0/1 outcome: {spell('y')} (or {spell('score_y')} when "
            f"{spell('y')} is an interval target) with {spell('score')}"
        )
        raise ValueError(msg)
    if score_y is not None and score is None:
        msg = f"{spell('score_y')} names the 0/1 outcome of {spell('score')}; give {spell('score')} too"
        raise ValueError(msg)
    if sets is not None and y is None:
        msg = f"prediction-set metrics need {spell('y')} (the true label) with {spell('sets')}"
        raise ValueError(msg)
    roles = (
        f"{spell('lo')} and {spell('hi')} (intervals), {spell('score')} (calibration), {spell('sets')} "
        f"(prediction sets), {spell('quantiles')}, {spell('intervals')} or {spell('mean')} and {spell('std')} "
        "(forecasts)"
    )
    if y is not None and lo is None and score is None and sets is None:
        msg = f"{spell('y')} alone is not enough: give {roles}"
        raise ValueError(msg)
    if y is None and score is None:
        msg = f"nothing to report: give {spell('y')} with {roles}"
        raise ValueError(msg)


def check_joint_roles(y: Any, lo: Any, hi: Any, others: dict[str, Any], spell: Callable[[str], str] = keyword) -> None:
    """Lists of columns for ``y``, ``lo``, ``hi`` (several outputs): the same lengths, and no other family.

    ``others`` maps the other roles' arguments to their values (``None``: not given).
    """
    from conformal_frames.inputs.intervals import interval_outputs

    if not any(isinstance(v, (list, tuple)) for v in (y, lo, hi)):
        return
    interval_outputs("report", y=y, lo=lo, hi=hi)
    given = [k for k, v in others.items() if v is not None]
    if given:
        msg = (
            f"lists of columns for {spell('y')}, {spell('lo')} and {spell('hi')} (several outputs) give the "
            f"joint-coverage table alone; report {', '.join(spell(k) for k in given)} in another call"
        )
        raise ValueError(msg)


def check_horizon(
    horizon: Any, by: Sequence[str], level: str | None, spell: Callable[[str], str] = keyword
) -> str | None:
    """``horizon=``: one column name, not also in ``by=`` nor the column of levels (the schema checks it exists)."""
    if horizon is None:
        return None
    if not isinstance(horizon, str):
        msg = f"{spell('horizon')} names one column (the forecasts' lead time), got {horizon!r}"
        raise TypeError(msg)
    if horizon in by:
        msg = (
            f"horizon column {horizon!r} is also in {spell('by')}; give it only as {spell('horizon')} "
            f"(the models are the {spell('by')} groups)"
        )
        raise ValueError(msg)
    if horizon == level:
        msg = f"horizon column {horizon!r} is also the confidence_level column"
        raise ValueError(msg)
    return horizon


def check_options(correction: Any, invalid: Any) -> None:
    check_choice(correction, "correction", CORRECTIONS)
    if invalid is not None and invalid not in INVALID_POLICIES:
        msg = f"invalid must be 'raise', 'drop' or 'null', got {invalid!r}"
        raise ValueError(msg)


def split_target(confidence_level: Any) -> tuple[float | None, str | None]:
    """``confidence_level=`` as (a number, a column name): one of them or neither."""
    if confidence_level is None:
        return None, None
    if isinstance(confidence_level, str):
        return None, confidence_level
    return check_probability(confidence_level, "confidence_level"), None


def check_schema(schema: Any, names: dict[str, str | None], spell: Callable[[str], str] = keyword) -> None:
    """Every named column exists (``names``: argument -> column; ``by[0]`` for the first ``by``)."""
    available = ", ".join(repr(c) for c in schema)
    for arg, col in names.items():
        if col is not None and col not in schema:
            msg = f"column {col!r} ({spell(arg)}) not found; available columns: {available}"
            raise ValueError(msg)


def level_values(frame: Any, level: str) -> list[float]:
    """The distinct levels of the level column (each strictly between 0 and 1)."""
    values = collect(frame.select(nw.col(level)).unique()).get_column(level).to_list()
    bad = [
        v for v in values if v is None or isinstance(v, bool) or not (isinstance(v, (int, float)) and 0 < float(v) < 1)
    ]
    if bad:
        msg = (
            f"confidence_level column {level!r} must hold confidence levels strictly between 0 and 1; found {bad[:5]!r}"
        )
        raise ValueError(msg)
    return sorted(float(v) for v in values)


def as_frame(frame: Any) -> nw.DataFrame | nw.LazyFrame:
    if isinstance(frame, (nw.DataFrame, nw.LazyFrame)):
        return frame
    engine.to_lazy(frame)  # the core's clear TypeError for series and non-frames
    return nw.from_native(frame)


def names_of(by: str | Sequence[str] | None) -> list[str]:
    return engine.as_keys(by)
