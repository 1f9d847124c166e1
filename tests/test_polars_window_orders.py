"""``conformal_frames.polars``: one struct of metrics ordered in different ``order_by`` orders (issue 39 item 1).

``cfx.metrics`` of windows in two orders builds one sorted block per order
(``engine.native_windows.blocks``) and equals ``cf.evaluate`` (1e-12) in the
contexts of ``tests/test_polars_expr.py`` (``select``, ``with_columns``,
``group_by`` eager, lazy and streaming, ``over``, ``group_by_dynamic``,
``rolling``), both policies, on its frame (invalid rows in three groups) with
a second order ``u`` (a permutation of ``t``) and an order ``o`` with ties
(invalid rows of Christoffersen and Diebold-Mariano).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
import conformal_frames.polars as cfx
from test_polars_expr import FRAME, N, _assert_same, _windows

ORDERED = FRAME.with_columns(
    u=pl.Series(np.random.default_rng(4).permutation(N)),
    o=pl.col("t").replace({2: 1, 8: 7}),  # ties: the group of 2 rows, and rows 7 and 8
)


def _christoffersen(order: str, name: str | None = None) -> Any:
    metric = cf.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by=order)
    return metric.alias(name) if name else metric


#: each case: its metrics and the contexts it runs in (Christoffersen's expression is large: three contexts)
CASES: dict[str, tuple[Callable[[], list[Any]], tuple[str, ...]]] = {
    "christoffersen_o_u": (
        lambda: [_christoffersen("o"), _christoffersen("u", "by_u")],
        ("select", "in-memory", "rolling"),
    ),
    "dm_two_orders_auarc_coverage": (
        lambda: [
            cf.diebold_mariano_test("y", "score", "other", order_by="o", horizon=2, small_sample=None),
            cf.diebold_mariano_test("y", "score", "other", order_by="u", small_sample=None).alias("dm_u"),
            cf.auarc("label", "score"),
            cf.coverage("y", "lo", "hi"),
        ],
        ("select", "with_columns", "eager", "in-memory", "streaming", "over", "dynamic", "rolling"),
    ),
}


def _evaluate(metrics: list[Any], frame: pl.DataFrame, by: str | None, policy: str) -> pl.DataFrame:
    return cf.evaluate(frame, *metrics, by=by, invalid=policy)  # type: ignore[arg-type, return-value]


@pytest.mark.parametrize("policy", ["null", "drop"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_two_orders_in_every_context(case: str, policy: str) -> None:
    make, contexts = CASES[case]
    metrics = make()
    expr = cfx.metrics(*metrics, invalid=policy)  # type: ignore[arg-type]
    whole = _evaluate(metrics, ORDERED, None, policy)
    skip = ("g", "t", "window", "win", "n", "n_invalid")
    outputs = tuple(c for c in whole.columns if c not in skip and not c.startswith("n_dropped"))
    grouped = _evaluate(metrics, ORDERED, "g", policy)
    for context in contexts:
        if context == "select":
            got, expected = ORDERED.select(expr), whole
        elif context == "with_columns":
            got, expected = ORDERED.with_columns(expr).head(1).select("metrics"), whole
        elif context == "over":
            got, expected = ORDERED.select("g", expr.over("g")).unique("g").sort("g"), grouped
        elif context == "dynamic":
            got = ORDERED.group_by_dynamic("t", every="5i", period="5i").agg(expr).sort("t")
            expected = _evaluate(metrics, ORDERED.with_columns(window=pl.col("t") // 5), "window", policy)
        elif context == "rolling":
            got = ORDERED.rolling("t", period="4i").agg(expr).sort("t")
            expected = _evaluate(metrics, _windows(ORDERED, 4), "win", policy)
        elif context == "eager":
            got, expected = ORDERED.group_by("g").agg(expr).sort("g"), grouped
        else:
            got = ORDERED.lazy().group_by("g").agg(expr).sort("g").collect(engine=context)  # type: ignore[call-overload]
            expected = grouped
        _assert_same(got.unnest("metrics"), expected, outputs, f"{case} {policy} {context}")
