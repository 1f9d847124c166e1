"""Evaluation report: every applicable metric per group in one object.

:func:`report` evaluates the metric families that apply to the columns it is
given (intervals from ``y, lo, hi``; calibration from ``score`` with its 0/1
outcome ``y`` or ``score_y``; prediction sets from ``y`` and ``sets``), finds
the segments whose coverage is significantly below its target, and returns a
:class:`Report`: tidy frames, a compact summary, a terminal table (``str``),
HTML for notebooks (``_repr_html_``) and a self-contained HTML file with the
plots embedded (:meth:`Report.to_html`).

The report is a consumer of the metrics: every number comes from a metric
object (the under-coverage test is :func:`conformal_frames.coverage_test`,
with its p-values and Holm / Benjamini-Hochberg adjustment; per-bin tables
are the metrics' own long tables).  Only aggregated tables (one row per
group, or per group and bin) are collected: the raw rows never leave the
engine, so a report over a lazily scanned file larger than memory works.

Modules: :mod:`~conformal_frames.reporting.plan` (which metrics apply),
:mod:`~conformal_frames.reporting.tables` (the engine's result as tables),
:mod:`~conformal_frames.reporting.summary`, :mod:`~conformal_frames.reporting.render`
(text and HTML), :mod:`~conformal_frames.reporting.model` (:class:`Report`),
:mod:`~conformal_frames._widths` (width quantiles, also used by the plots).
"""

from __future__ import annotations

from conformal_frames._widths import WIDTH_HISTOGRAM_BINS, WIDTH_QUANTILES
from conformal_frames.reporting.build import report
from conformal_frames.reporting.model import Report

__all__ = ["WIDTH_HISTOGRAM_BINS", "WIDTH_QUANTILES", "Report", "report"]
