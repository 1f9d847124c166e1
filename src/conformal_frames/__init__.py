"""Conformal prediction and calibration metrics inside DataFrames.

``import conformal_frames`` registers a ``.conformal`` namespace on pandas
and polars frames (eager and lazy); :func:`evaluate` and :func:`conformal`
serve any frame narwhals supports (DuckDB, PySpark, Dask, ...).

Metric families (one module each): :mod:`~conformal_frames.intervals`,
:mod:`~conformal_frames.sets`, :mod:`~conformal_frames.efficiency`,
:mod:`~conformal_frames.conditional`, :mod:`~conformal_frames.calibration`.
"""

from __future__ import annotations

from conformal_frames.calibration import *  # noqa: F403
from conformal_frames.conditional import *  # noqa: F403
from conformal_frames.core import Metric, evaluate
from conformal_frames.efficiency import *  # noqa: F403
from conformal_frames.intervals import *  # noqa: F403
from conformal_frames.namespace import FAMILIES, ConformalNamespace, conformal, register_accessors
from conformal_frames.ranking import *  # noqa: F403
from conformal_frames.results import (
    CoverageTestResult,
    KSTestResult,
    KuiperTestResult,
    SpiegelhalterTestResult,
    TestResult,
)
from conformal_frames.sets import *  # noqa: F403

__version__ = "0.1.0"

__all__ = [
    "ConformalNamespace",
    "CoverageTestResult",
    "KSTestResult",
    "KuiperTestResult",
    "Metric",
    "SpiegelhalterTestResult",
    "TestResult",
    "conformal",
    "evaluate",
    *[name for family in FAMILIES for name in family.__all__],
]

register_accessors()
