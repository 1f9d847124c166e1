"""Conformal prediction and calibration metrics inside DataFrames.

``import conformal_frames`` registers a ``.conformal`` namespace on pandas
and polars frames (eager and lazy); :func:`evaluate` and :func:`conformal`
serve any frame narwhals supports (DuckDB, PySpark, Dask, ...).

Metric families (one module each): :mod:`~conformal_frames.metrics.intervals`,
:mod:`~conformal_frames.metrics.sequential`,
:mod:`~conformal_frames.metrics.sets`, :mod:`~conformal_frames.metrics.efficiency`,
:mod:`~conformal_frames.metrics.conditional`, :mod:`~conformal_frames.metrics.calibration`,
:mod:`~conformal_frames.metrics.recalibration`,
:mod:`~conformal_frames.metrics.ranking`, :mod:`~conformal_frames.metrics.quantiles`.
"""

from __future__ import annotations

from typing import Any

from conformal_frames._roles import Column
from conformal_frames._version import __version__ as __version__
from conformal_frames.engine import Metric, evaluate
from conformal_frames.errors import BackendLimitError, ColumnNotFoundError, ExpressionBackendError, InvalidRowsError
from conformal_frames.metrics.bootstrap import (
    bootstrap,
    bootstrap_difference,
    pairwise_comparison,
    relative_skill,
    skill_score,
)
from conformal_frames.metrics.calibration import (
    brier,
    brownian_max_abs_cdf,
    brownian_max_abs_sf,
    brownian_range_cdf,
    brownian_range_sf,
    classwise_ece,
    confidence_ece,
    cumulative_differences,
    ece,
    kolmogorov_smirnov_cdf,
    ks_test,
    kuiper_cdf,
    kuiper_test,
    mce,
    reliability,
    rps,
    spiegelhalter_test,
    top_label_ece,
)
from conformal_frames.metrics.comparison import diebold_mariano_test
from conformal_frames.metrics.conditional import coverage_gap, coverage_test, worst_slab_coverage
from conformal_frames.metrics.distributions import crps, pit_histogram, pit_test, quantile_crps
from conformal_frames.metrics.efficiency import efficiency_criteria
from conformal_frames.metrics.intervals import coverage, cwc, hsic, path_coverage, ssc, ssc_score, width, winkler
from conformal_frames.metrics.logscores import log_loss, log_score
from conformal_frames.metrics.multivariate import energy_score, variogram_score
from conformal_frames.metrics.point import (
    bias,
    mae,
    mape,
    mase,
    mse,
    naive_scale,
    rmse,
    rmsse,
    scaled_crps,
    scaled_pinball,
    smape,
)
from conformal_frames.metrics.quantiles import interval_coverage, pinball_loss, quantile_coverage, wis
from conformal_frames.metrics.ranking import auarc, auroc, excess_risk_target_coverage
from conformal_frames.metrics.recalibration import corp_reliability, score_decomposition, smooth_ece
from conformal_frames.metrics.sequential import christoffersen_test, kupiec_test, longest_miss_run
from conformal_frames.metrics.sets import empty_rate, set_coverage, set_size, set_ssc, set_ssc_score, singleton_rate
from conformal_frames.metrics.uncertainty_calibration import (
    adversarial_group_calibration,
    ence,
    ence_table,
    mean_absolute_calibration_error,
    miscalibration_area,
    root_mean_squared_calibration_error,
    sharpness,
    uce,
    uncertainty_calibration_curve,
)
from conformal_frames.monitoring import coverage_alarms, coverage_sequence
from conformal_frames.namespace import ConformalNamespace, conformal, register_accessors
from conformal_frames.reporting import Report, report
from conformal_frames.results import (
    ChristoffersenTestResult,
    CoverageTestResult,
    DieboldMarianoTestResult,
    KSTestResult,
    KuiperTestResult,
    KupiecTestResult,
    PITTestResult,
    SpiegelhalterTestResult,
    TestResult,
)
from conformal_frames.slices import find_slices
from conformal_frames.summaries import finalize, merge_summaries, rolling, summarize


def __getattr__(name: str) -> Any:
    """``cf.plots``: imported on first use (matplotlib stays an optional extra)."""
    if name == "plots":
        import importlib

        return importlib.import_module("conformal_frames.plots")
    msg = f"module 'conformal_frames' has no attribute {name!r}"
    raise AttributeError(msg)


__all__ = [
    "BackendLimitError",
    "ChristoffersenTestResult",
    "Column",
    "ColumnNotFoundError",
    "ConformalNamespace",
    "CoverageTestResult",
    "DieboldMarianoTestResult",
    "ExpressionBackendError",
    "InvalidRowsError",
    "KSTestResult",
    "KuiperTestResult",
    "KupiecTestResult",
    "Metric",
    "PITTestResult",
    "Report",
    "SpiegelhalterTestResult",
    "TestResult",
    "adversarial_group_calibration",
    "auarc",
    "auroc",
    "bias",
    "bootstrap",
    "bootstrap_difference",
    "brier",
    "brownian_max_abs_cdf",
    "brownian_max_abs_sf",
    "brownian_range_cdf",
    "brownian_range_sf",
    "christoffersen_test",
    "classwise_ece",
    "confidence_ece",
    "conformal",
    "corp_reliability",
    "coverage",
    "coverage_alarms",
    "coverage_gap",
    "coverage_sequence",
    "coverage_test",
    "crps",
    "cumulative_differences",
    "cwc",
    "diebold_mariano_test",
    "ece",
    "efficiency_criteria",
    "empty_rate",
    "ence",
    "ence_table",
    "energy_score",
    "evaluate",
    "excess_risk_target_coverage",
    "finalize",
    "find_slices",
    "hsic",
    "interval_coverage",
    "kolmogorov_smirnov_cdf",
    "ks_test",
    "kuiper_cdf",
    "kuiper_test",
    "kupiec_test",
    "log_loss",
    "log_score",
    "longest_miss_run",
    "mae",
    "mape",
    "mase",
    "mce",
    "mean_absolute_calibration_error",
    "merge_summaries",
    "miscalibration_area",
    "mse",
    "naive_scale",
    "pairwise_comparison",
    "path_coverage",
    "pinball_loss",
    "pit_histogram",
    "pit_test",
    "quantile_coverage",
    "quantile_crps",
    "relative_skill",
    "reliability",
    "report",
    "rmse",
    "rmsse",
    "rolling",
    "root_mean_squared_calibration_error",
    "rps",
    "scaled_crps",
    "scaled_pinball",
    "score_decomposition",
    "set_coverage",
    "set_size",
    "set_ssc",
    "set_ssc_score",
    "sharpness",
    "singleton_rate",
    "skill_score",
    "smape",
    "smooth_ece",
    "spiegelhalter_test",
    "ssc",
    "ssc_score",
    "summarize",
    "top_label_ece",
    "uce",
    "uncertainty_calibration_curve",
    "variogram_score",
    "width",
    "winkler",
    "wis",
    "worst_slab_coverage",
]


def _check_keywords(names: list[str]) -> None:
    """Every public function answers a misspelt keyword with "did you mean" (here and in its own module)."""
    import inspect
    import sys

    from conformal_frames._renames import keywords_checked

    scope = globals()
    for name in names:
        fn = scope[name]
        if inspect.isfunction(fn):
            checked = keywords_checked(fn)
            scope[name] = checked
            home = sys.modules.get(fn.__module__)
            if home is not None and getattr(home, name, None) is fn:
                setattr(home, name, checked)


_check_keywords(__all__)
register_accessors()
