"""The API contract (DESIGN §3): return types, accessors, aliases, laziness."""

from __future__ import annotations

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest

import conformal_frames as cf
from helpers import assert_close, random_intervals, to_pandas

DATA = {
    "y": [1.0, 2.0, 3.0, 4.0, 5.0],
    "lo": [0.0, 2.5, 2.0, 3.0, 4.5],
    "hi": [2.0, 3.0, 4.0, 5.0, 6.0],
    "g": ["b", "a", "b", "a", "b"],
}


def test_pandas_accessor_returns_float_and_pandas_frames():
    df = pd.DataFrame(DATA)
    value = df.conformal.coverage("y", "lo", "hi")
    assert type(value) is float and value == 0.8
    grouped = df.conformal.coverage("y", "lo", "hi", by="g")
    assert isinstance(grouped, pd.DataFrame)
    assert list(grouped.columns) == ["g", "coverage", "coverage_ci_low", "coverage_ci_high", "n"]
    assert list(grouped["g"]) == ["a", "b"] and list(grouped.index) == [0, 1]
    assert isinstance(df.conformal.evaluate(cf.width("lo", "hi")), pd.DataFrame)


def test_polars_accessors():
    df = pl.DataFrame(DATA)
    assert df.conformal.width("lo", "hi") == pytest.approx((2 + 0.5 + 2 + 2 + 1.5) / 5, rel=1e-15)
    assert isinstance(df.conformal.width("lo", "hi", by="g"), pl.DataFrame)
    lazy = df.lazy().conformal.evaluate(cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), by="g")
    assert isinstance(lazy, pl.LazyFrame)
    assert isinstance(df.lazy().conformal.coverage("y", "lo", "hi"), pl.LazyFrame)
    assert lazy.collect()["g"].to_list() == ["a", "b"]


def test_evaluate_always_returns_a_frame():
    out = cf.evaluate(pl.DataFrame(DATA), cf.coverage("y", "lo", "hi"))
    assert isinstance(out, pl.DataFrame) and out.height == 1


def test_duckdb_relation_stays_lazy_and_works():
    import duckdb

    rel = duckdb.connect().from_arrow(pl.DataFrame(DATA).to_arrow())
    out = cf.evaluate(rel, cf.coverage("y", "lo", "hi"), by="g")
    assert isinstance(out, duckdb.DuckDBPyRelation)
    ns_out = cf.conformal(rel).width("lo", "hi", by="g")
    assert isinstance(ns_out, duckdb.DuckDBPyRelation)
    assert_close(to_pandas(ns_out)["width"], [(0.5 + 2) / 2, (2 + 2 + 1.5) / 3])


def test_lazy_polars_is_not_executed_until_collect():
    calls = []

    def spy(df: pl.DataFrame) -> pl.DataFrame:
        calls.append(len(df))
        return df

    lf = pl.LazyFrame(DATA).map_batches(spy, schema=pl.LazyFrame(DATA).collect_schema())
    out = lf.conformal.evaluate(
        cf.coverage("y", "lo", "hi"), cf.ssc_score("y", "lo", "hi"), cf.hsic("y", "lo", "hi"), by="g"
    )
    assert calls == []
    collected = out.collect()
    assert calls and collected.height == 2


def test_alias_renames_all_outputs():
    out = cf.evaluate(pl.DataFrame(DATA), cf.coverage("y", "lo", "hi").alias("cov"), cf.width("lo", "hi").alias("w"))
    assert out.columns == ["cov", "cov_ci_low", "cov_ci_high", "w", "n"]
    with pytest.raises(TypeError, match="alias must be a non-empty string"):
        cf.width("lo", "hi").alias("")


def test_metric_objects_are_immutable_values():
    a = cf.coverage("y", "lo", "hi")
    assert a == cf.coverage("y", "lo", "hi") and hash(a) == hash(cf.coverage("y", "lo", "hi"))
    assert a.alias("x") != a and a.name is None
    assert "Coverage" in repr(a)


def test_several_group_keys_sorted(constructor):
    d = random_intervals(3)
    d["h"] = np.where(np.arange(len(d["y"])) % 2 == 0, "x", "y y")
    out = to_pandas(cf.evaluate(constructor(d), cf.coverage("y", "lo", "hi"), by=["g", "h"]))
    keys = list(zip(out["g"], out["h"]))
    assert keys == sorted(set(zip(d["g"], d["h"])))


def test_column_names_with_spaces(constructor):
    d = {"y true": DATA["y"], "lower bound": DATA["lo"], "upper bound": DATA["hi"], "the segment": DATA["g"]}
    metrics = [
        cf.coverage("y true", "lower bound", "upper bound"),
        cf.width("lower bound", "upper bound"),
        cf.ssc_score("y true", "lower bound", "upper bound", n_bins=2),
    ]
    out = to_pandas(cf.evaluate(constructor(d), *metrics, by="the segment"))
    ref = to_pandas(
        cf.evaluate(
            pl.DataFrame(DATA),
            *[cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), cf.ssc_score("y", "lo", "hi", n_bins=2)],
            by="g",
        )
    )
    assert list(out["the segment"]) == ["a", "b"]
    assert_close(out[["coverage", "width", "ssc_score"]].to_numpy(), ref[["coverage", "width", "ssc_score"]].to_numpy())


def test_one_pass_scans_the_input_once():
    """Single-level metrics compile to one scan and one aggregation in polars."""
    lf = pl.LazyFrame(DATA)
    metrics = [
        cf.coverage("y", "lo", "hi"),
        cf.width("lo", "hi"),
        cf.winkler("y", "lo", "hi", confidence_level=0.9),
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
    ]
    plan = cf.evaluate(lf, *metrics, by="g").explain(optimized=True)
    assert plan.count("AGGREGATE") == 1
    assert plan.count("DF [") == 1


def test_shared_row_columns_are_registered_once():
    from conformal_frames.engine import Query, compile_query

    lf = nw.from_native(pl.LazyFrame(DATA))
    metrics = [
        cf.coverage("y", "lo", "hi"),
        cf.ssc_score("y", "lo", "hi"),
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
        cf.hsic("y", "lo", "hi"),
    ]
    q = compile_query(lf, metrics, ["g"]).query
    assert isinstance(q, Query)
    row_keys = [k for k in q.rows if isinstance(k, tuple) and k[0] in ("covered", "width")]
    assert sorted(k[0] for k in row_keys) == ["covered", "width"]


def test_test_result_unpacks_like_scipy():
    r = cf.TestResult(statistic=1.5, pvalue=0.1)
    stat, p = r
    assert (stat, p) == (1.5, 0.1)


def test_long_tables_of_pandas_have_a_fresh_index():
    df = pd.DataFrame(DATA)
    scores = pd.DataFrame({"label": [1, 0, 1, 0, 1], "score": [0.9, 0.2, 0.6, 0.6, 0.1], "g": DATA["g"]})
    for table in (
        df.conformal.ssc("y", "lo", "hi", n_bins=2),
        df.conformal.ssc("y", "lo", "hi", n_bins=2, by="g"),
        scores.conformal.reliability("label", "score", n_bins=2),
        scores.conformal.cumulative_differences("label", "score", by="g"),
    ):
        assert list(table.index) == list(range(len(table)))
