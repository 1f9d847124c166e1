"""``conformal_frames.polars``: binned forms whose bins read other rows equal ``cf.evaluate``.

Quantile bins are ranks of the score in its group (per predicted label for
``top_label_ece``), weighted and counted quantile bins cut the running weight
in score order: rows reading other rows, then a table of the bins
(``engine/native_window_tables.py``).  Each form x every polars context x both
policies, on ``tests/test_polars_expr.py``'s frame (ties, groups of 1-3 rows,
invalid rows) plus rows of weight and count 0, against ``cf.evaluate`` (1e-12).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
import conformal_frames.polars as cfx
from conformal_frames.engine import Metric
from conformal_frames.engine.native import compile_polars
from test_evaluate_native import _run
from test_polars_expr import FRAME, _assert_same, _wide, _windows

#: weights with zeros (rows that take no room); ``k`` (counts) has zeros too
DATA = FRAME.with_columns(
    w0=pl.Series(np.where(np.arange(FRAME.height) % 5 == 2, 0.0, 1.0 + np.arange(FRAME.height) % 3)),
    # Diebold-Mariano: time points of 3 series, a horizon constant per group (windows across groups mix two)
    tp=pl.col("t") // 3,
    h=pl.when(pl.col("g") == "g5").then(3).otherwise(2),
)
POLICIES = ("null", "drop")

FORMS: dict[str, Callable[[], Metric]] = {
    "reliability_quantile": lambda: cf.reliability("label", "score", n_bins=3, strategy="quantile"),
    "reliability_quantile_weighted": lambda: cf.reliability(
        "label", "score", n_bins=3, strategy="quantile", weights="w0"
    ),
    "top_label_ece_quantile": lambda: cf.top_label_ece(
        "label3", ["p0", "p1", "p2"], classes=[0, 1, 2], n_bins=2, strategy="quantile"
    ),
    "top_label_ece_quantile_counted": lambda: cf.top_label_ece(
        "label3", ["p0", "p1", "p2"], classes=[0, 1, 2], n_bins=2, strategy="quantile", counts="k", weighted=True
    ),
    "ece_quantile_weighted": lambda: cf.ece("label", "score", n_bins=3, strategy="quantile", weights="w0"),
    "mce_quantile_counted": lambda: cf.mce("label", "score", n_bins=2, strategy="quantile", counts="k"),
    "dm_horizon_column": lambda: cf.diebold_mariano_test("y", "score", "other", order_by="t", horizon="h"),
    "dm_series": lambda: cf.diebold_mariano_test("y", "score", "other", order_by="tp", series="day"),
    "dm_series_horizon_column": lambda: cf.diebold_mariano_test(
        "y", "score", "other", order_by="tp", series="day", horizon="h", loss="absolute", small_sample=None
    ),
}


def _every_context(metric: Metric, frame: pl.DataFrame, policy: str) -> None:
    """``metric`` compiled, in select, with_columns, group_by (eager, lazy, streaming), over,
    group_by_dynamic and rolling, equals ``cf.evaluate`` of the same rows."""
    compiled = compile_polars([metric], invalid=policy)  # type: ignore[arg-type]
    expr, outputs, out = compiled.expr, compiled.outputs, metric.output_name

    evaluated: dict[tuple[int, str | None], pl.DataFrame] = {}

    def same(got: pl.DataFrame, rows: pl.DataFrame, by: str | None, what: str) -> None:
        if (id(rows), by) not in evaluated:
            evaluated[id(rows), by] = cf.evaluate(rows, metric, by=by, invalid=policy)  # type: ignore[arg-type]
        _assert_same(_wide(got, out, outputs), evaluated[id(rows), by], outputs, what)

    same(frame.select(expr), frame, None, "select")
    same(frame.with_columns(expr).head(1).select(out), frame, None, "with_columns")
    same(frame.group_by("g").agg(expr).sort("g"), frame, "g", "eager")
    for engine in ("in-memory", "streaming"):
        lazy = frame.lazy().group_by("g").agg(expr).sort("g").collect(engine=engine)  # type: ignore[call-overload]
        same(lazy, frame, "g", engine)
    same(frame.select("g", expr.over("g")).unique("g").sort("g"), frame, "g", "over")
    dynamic = frame.group_by_dynamic("t", every="5i", period="5i").agg(expr).sort("t")
    same(dynamic, frame.with_columns(window=pl.col("t") // 5), "window", "group_by_dynamic")
    same(frame.rolling("t", period="4i").agg(expr).sort("t"), _windows(frame, 4), "win", "rolling")


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("form", list(FORMS))
def test_quantile_bins_in_every_context(form: str, policy: str) -> None:
    _every_context(FORMS[form](), DATA, policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_fused_with_windows_and_ordered_cells(policy: str) -> None:
    # auarc's ranks (a windowed aggregation), unweighted quantile bins (ordered cells of the
    # score: no window) and weighted ones (a window read by a table) in one block
    metrics = [
        cf.auarc("label", "score"),
        cf.ece("label", "score", n_bins=3, strategy="quantile"),
        cf.mce("label", "score", n_bins=2, strategy="quantile", weights="w0").alias("mce_w"),
        cf.coverage("y", "lo", "hi"),
    ]
    expr = cfx.metrics(*metrics, invalid=policy)  # type: ignore[arg-type]
    expected = cf.evaluate(DATA, *metrics, by="g", invalid=policy)  # type: ignore[arg-type]
    outputs = tuple(c for c in expected.columns if c not in ("g", "n", "n_invalid") and not c.startswith("n_dropped"))
    for engine in ("in-memory", "streaming"):
        got = DATA.lazy().group_by("g").agg(expr).sort("g").collect(engine=engine).unnest("metrics")  # type: ignore[call-overload]
        _assert_same(got, expected, outputs, f"fused {engine}")
    whole = cf.evaluate(DATA, *metrics, invalid=policy)  # type: ignore[arg-type]
    _assert_same(DATA.select(expr).unnest("metrics"), whole, outputs, "fused select")


def test_evaluate_keeps_its_own_query(monkeypatch: pytest.MonkeyPatch) -> None:
    # slower compiled (native_window_tables.applies), and integer horizon/order columns are not the
    # compiled path's Float64 inputs anyway: every form here takes evaluate's narwhals query
    for form in ("dm_series", "ece_quantile_weighted", "reliability_quantile"):
        got, taken = _run(monkeypatch, True, DATA.lazy(), FORMS[form](), "g", "drop")
        assert not taken, form


@pytest.mark.parametrize("policy", POLICIES)
def test_an_expression_as_the_score_of_weighted_quantile_bins(policy: str) -> None:
    # the windows' order row reads an expression role: bound to the expression, not a column
    expr = cfx.ece("label", pl.col("score") * 0.5, n_bins=3, strategy="quantile", weights="w0", invalid=policy)  # type: ignore[arg-type]
    metric = cf.ece("label", "half", n_bins=3, strategy="quantile", weights="w0")
    frame = DATA.with_columns(half=pl.col("score") * 0.5)
    expected = cf.evaluate(frame, metric, by="g", invalid=policy)  # type: ignore[arg-type]
    _assert_same(DATA.lazy().group_by("g").agg(expr).sort("g").collect(), expected, ("ece",), "group_by")


@pytest.mark.parametrize("policy", POLICIES)
def test_expressions_as_the_time_and_series_of_diebold_mariano(policy: str) -> None:
    # the checks' windows partition by order_by= and series=: an expression role is bound there too
    # (a string series as it is), for the pooled and the one-series forms
    frame = DATA.with_columns(tp2=pl.col("tp") * 2, t2=pl.col("t") * 2, s2="s" + pl.col("day").cast(pl.String))
    series = "s" + pl.col("day").cast(pl.String)
    forms = [
        (
            cfx.diebold_mariano_test("y", "score", "other", order_by=pl.col("tp") * 2, series=series, invalid=policy),  # type: ignore[arg-type]
            cf.diebold_mariano_test("y", "score", "other", order_by="tp2", series="s2"),
        ),
        (
            cfx.diebold_mariano_test("y", "score", "other", order_by=pl.col("t") * 2, horizon=2, invalid=policy),  # type: ignore[arg-type]
            cf.diebold_mariano_test("y", "score", "other", order_by="t2", horizon=2),
        ),
    ]
    for expr, metric in forms:
        got = DATA.lazy().group_by("g").agg(expr).sort("g").collect().unnest("diebold_mariano_test")
        expected = cf.evaluate(frame, metric, by="g", invalid=policy)  # type: ignore[arg-type]
        _assert_same(got, expected, ("diebold_mariano_test", "diebold_mariano_test_pvalue"), str(metric))
