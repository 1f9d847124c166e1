"""``conformal_frames.polars``: the metrics whose rows read other rows (windows) equal ``cf.evaluate``.

``tests/test_polars_expr.py`` crosses the catalogue's ``auarc``,
``christoffersen_test`` and ``diebold_mariano_test`` (``small_sample=None``)
with every context; here the forms it does not call: ties in the
``order_by`` column (invalid rows, a group of 2 rows that are both ties),
``small_sample="hln"`` (scipy's Student-t p-value through ``map_batches``),
``horizon > 1``, score metrics as losses, ``miss=``, fused with a sum-based
metric, and the forms that stay ``evaluate``-only (``series=`` and a ``horizon=`` column compile:
``tests/test_polars_window_tables.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

import conformal_frames as cf
import conformal_frames.polars as cfx
from conformal_frames.engine import Metric
from conformal_frames.engine.native import NotAnExpressionError, compile_polars
from test_polars_expr import FRAME, N, _assert_same, _wide, _windows

#: ``o``: the order with ties: rows 1 and 2 (the group of 2 rows) and rows 7 and 8 (the group of 4)
TIED = FRAME.with_columns(o=pl.col("t").replace({2: 1, 8: 7}))

FORMS: dict[str, Callable[[], Metric]] = {
    "dm_hln": lambda: cf.diebold_mariano_test("y", "score", "other", order_by="o"),
    "dm_h3_scores": lambda: cf.diebold_mariano_test(
        None, cf.mae("y", "score"), cf.crps("y", mean="mu", std="sd"), order_by="o", horizon=3
    ),
    "christoffersen_miss": lambda: cf.christoffersen_test(miss="m0", confidence_level=0.8, order_by="o"),
}
POLICIES = ("null", "drop")


def _evaluate(metric: Metric, frame: pl.DataFrame, by: str | None, policy: str) -> Any:
    return cf.evaluate(frame, metric, by=by, invalid=policy)  # type: ignore[arg-type]


def _contexts(metric: Metric, policy: str, contexts: tuple[str, ...]) -> None:
    compiled = compile_polars([metric], invalid=policy)  # type: ignore[arg-type]
    expr, outputs, out = compiled.expr, compiled.outputs, metric.output_name

    def same(got: pl.DataFrame, frame: pl.DataFrame, by: str | None, what: str) -> None:
        _assert_same(_wide(got, out, outputs), _evaluate(metric, frame, by, policy), outputs, what)

    grouped = _evaluate(metric, TIED, "g", policy)
    for context in contexts:
        if context == "select":
            same(TIED.select(expr), TIED, None, context)
        elif context == "with_columns":
            same(TIED.with_columns(expr).head(1).select(out), TIED, None, context)
        elif context == "over":
            got = TIED.select("g", expr.over("g")).unique("g").sort("g")
            _assert_same(_wide(got, out, outputs), grouped, outputs, context)
        elif context == "dynamic":
            got = TIED.group_by_dynamic("t", every="5i", period="5i").agg(expr).sort("t")
            same(got, TIED.with_columns(window=pl.col("t") // 5), "window", context)
        elif context == "rolling":
            same(TIED.rolling("t", period="4i").agg(expr).sort("t"), _windows(TIED, 4), "win", context)
        else:  # group_by: eager, lazy, streaming
            lazy = TIED.lazy().group_by("g").agg(expr).sort("g")
            got = lazy.collect(engine=context) if context != "eager" else TIED.group_by("g").agg(expr).sort("g")
            _assert_same(_wide(got, out, outputs), grouped, outputs, context)


ALL_CONTEXTS = ("select", "with_columns", "eager", "in-memory", "streaming", "over", "dynamic", "rolling")


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("form", ["dm_hln", "dm_h3_scores"])
def test_diebold_mariano_forms_in_every_context(form: str, policy: str) -> None:
    _contexts(FORMS[form](), policy, ALL_CONTEXTS)


@pytest.mark.parametrize("policy", POLICIES)
def test_christoffersen_with_ties_in_the_order(policy: str) -> None:
    # its expression is large (the f series of LR_ind): three contexts keep the test short
    _contexts(FORMS["christoffersen_miss"](), policy, ("select", "in-memory", "rolling"))


def test_the_ties_make_rows_invalid() -> None:
    got = TIED.lazy().group_by("g").agg(cfx.diebold_mariano_test("y", "score", "other", order_by="o")).sort("g")
    values = got.collect().unnest("diebold_mariano_test")["diebold_mariano_test"].to_list()
    assert values[1] is None and values[3] is None  # the groups of 2 and 4 rows hold a tie
    dropped = TIED.group_by("g").agg(cfx.auarc("label", "score", invalid="drop")).sort("g")
    assert (
        dropped["auarc"].null_count() == _evaluate(cf.auarc("label", "score"), TIED, "g", "drop")["auarc"].null_count()
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_fused_with_a_sum_based_metric(policy: str) -> None:
    metrics = [
        cf.auarc("label", "score"),
        cf.coverage("y", "lo", "hi"),
        cf.diebold_mariano_test("y", "score", "other", order_by="t"),
    ]
    expr = cfx.metrics(*metrics, invalid=policy)  # type: ignore[arg-type]
    got = TIED.lazy().group_by("g").agg(expr).sort("g").collect().unnest("metrics")
    expected = cf.evaluate(TIED, *metrics, by="g", invalid=policy)  # type: ignore[arg-type]
    outputs = tuple(c for c in expected.columns if c not in ("g", "n", "n_invalid") and not c.startswith("n_dropped"))
    _assert_same(got, expected, outputs, "fused")


def test_names_rename_the_p_value_too() -> None:
    got = FRAME.select(cfx.diebold_mariano_test("y", "score", "other", order_by="t", invalid="drop", name="dm"))
    assert got.unnest("dm").columns == ["dm", "dm_pvalue"]


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (
            lambda: [  # two orders compile (test_polars_window_orders), not with windowed rows in a table
                cf.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by="t"),
                cf.diebold_mariano_test("y", "score", "other", order_by="o", horizon=2),
                cf.ece("label", "score", n_bins=3, strategy="quantile"),
            ],
            "several orders",
        ),
    ],
)
def test_what_stays_evaluate_only(make: Callable[[], Any], why: str) -> None:
    made = make()
    with pytest.raises(NotAnExpressionError, match=rf"{why}.*cf\.evaluate"):
        cfx.to_expr(*(made if isinstance(made, list) else [made]))


def test_a_group_of_one_row() -> None:
    one = FRAME.slice(1, 1)
    for metric in (cf.auarc("label", "score"), cf.diebold_mariano_test("y", "score", "other", order_by="t")):
        got = one.select(cfx.to_expr(metric))
        expected = cf.evaluate(one, metric)
        outputs = tuple(c for c in expected.columns if c not in ("n", "n_invalid"))
        _assert_same(got.unnest(got.columns[0]) if len(outputs) > 1 else got, expected, outputs, "one row")
    assert N > 20


def test_order_by_a_date_a_string_or_a_large_integer() -> None:
    frame = FRAME.with_columns(
        d=pl.date(2020, 1, 1) + pl.duration(days=pl.col("t")),
        s=pl.format("a{}", pl.col("t") + 100),
        big=2**60 - pl.col("t").cast(pl.Int64),
    )
    for order in ("d", "s", "big"):
        metric = cf.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by=order)
        got = frame.lazy().group_by("g").agg(cfx.to_expr(metric, invalid="drop")).sort("g").collect()
        expected = cf.evaluate(frame, metric, by="g", invalid="drop")
        outputs = tuple(c for c in expected.columns if c not in ("g", "n", "n_dropped"))
        _assert_same(got.unnest(metric.output_name), expected, outputs, order)
