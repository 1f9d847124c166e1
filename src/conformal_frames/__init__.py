"""Conformal prediction and calibration metrics inside DataFrames.

``import conformal_frames`` registers a ``.conformal`` namespace on pandas
and polars frames (eager and lazy); :func:`evaluate` and :func:`conformal`
serve any frame narwhals supports (DuckDB, PySpark, Dask, ...).
"""

from __future__ import annotations

from conformal_frames.core import Metric, evaluate
from conformal_frames.intervals import coverage, cwc, hsic, ssc, ssc_score, width, winkler
from conformal_frames.namespace import ConformalNamespace, conformal, register_accessors
from conformal_frames.results import TestResult

__version__ = "0.1.0"

__all__ = [
    "ConformalNamespace",
    "Metric",
    "TestResult",
    "conformal",
    "coverage",
    "cwc",
    "evaluate",
    "hsic",
    "ssc",
    "ssc_score",
    "width",
    "winkler",
]

register_accessors()
