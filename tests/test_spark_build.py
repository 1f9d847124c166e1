"""Building a wide query on Spark (issue 38 item 9): call sites off while building, the main aggregation in parts."""

from __future__ import annotations

import sys
import types
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
from conformal_frames.engine import _plan_cache
from conformal_frames.engine import plan as plan_module
from conformal_frames.engine.expr import spark_call_sites_off
from helpers import assert_close


def test_call_sites_are_off_while_building_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """PySpark's Python-side switch is False inside (nested too) and restored after, also on an error."""
    fake = types.ModuleType("pyspark.errors.utils")
    fake._enable_debugging_cache = None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyspark.errors.utils", fake)
    with spark_call_sites_off():
        assert fake._enable_debugging_cache is False  # type: ignore[attr-defined]
        with spark_call_sites_off():
            assert fake._enable_debugging_cache is False  # type: ignore[attr-defined]
        assert fake._enable_debugging_cache is False  # type: ignore[attr-defined]
    assert fake._enable_debugging_cache is None  # type: ignore[attr-defined]
    fake._enable_debugging_cache = True  # type: ignore[attr-defined]
    with pytest.raises(ZeroDivisionError), spark_call_sites_off():
        _ = 1 / 0
    assert fake._enable_debugging_cache is True  # type: ignore[attr-defined]


def test_call_sites_off_is_a_no_op_without_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "pyspark.errors.utils", raising=False)
    with spark_call_sites_off():
        pass
    old = types.ModuleType("pyspark.errors.utils")  # a PySpark without call-site capture
    monkeypatch.setitem(sys.modules, "pyspark.errors.utils", old)
    with spark_call_sites_off():
        assert not hasattr(old, "_enable_debugging_cache")


def _data(seed: int = 0, n: int = 120) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    g = rng.integers(0, 4, n).astype(float)
    g[:7] = np.nan  # NaN and null keys: one group, last
    h: list[Any] = list(rng.choice(["a", "b"], n))
    h[7:11] = [None] * 4
    g[11] = 9.0  # a group of one row
    score = rng.uniform(0.01, 0.99, n)
    return {
        "g": g,
        "h": h,
        "y": y,
        "yhat": y + rng.normal(size=n),
        "sd": rng.uniform(0.5, 2.0, n),
        "lo": y - rng.uniform(0, 2, n),
        "hi": y + rng.uniform(-0.5, 2, n),
        "label": (rng.random(n) < score).astype(np.int64),
        "score": score,
    }


METRICS = [
    cf.coverage("y", "lo", "hi"),
    cf.width("lo", "hi"),
    cf.winkler("y", "lo", "hi", confidence_level=0.9),
    cf.mae("y", "yhat"),
    cf.rmse("y", "yhat"),
    cf.crps("y", mean="yhat", std="sd"),
    cf.log_score("y", mean="yhat", std="sd"),
    cf.ece("label", "score", n_bins=5),
    cf.mce("label", "score", n_bins=5),
    cf.brier("label", "score"),
    cf.spiegelhalter_test("label", "score"),
]


def test_the_aggregation_in_parts_on_spark_equals_one_aggregation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A query cut into several parts gives the polars result (null keys, a group of one, ungrouped)."""
    pytest.importorskip("pyspark")
    from conftest import BACKENDS

    spark_backend = BACKENDS["pyspark"]
    if spark_backend.skip_reason() is not None:
        pytest.skip(spark_backend.skip_reason() or "")
    data = _data()
    frame = spark_backend(data)
    session = frame.sparkSession
    monkeypatch.setattr(plan_module, "SPARK_ROW_TEXT", 400)  # many parts
    lf = nw.from_native(frame)
    plan = plan_module.Plan.of(lf.collect_schema(), METRICS, ["g", "h"])
    aggs = {n: e for n, e in plan.query.aggs.values()}
    assert len(plan_module._parts(plan.query, aggs)) >= 4
    # the test session runs without whole-stage code generation: the parts are made for a session with it
    assert not plan_module._spark_fuses(lf)
    session.conf.set("spark.sql.codegen.wholeStage", "true")
    try:
        assert plan_module._spark_fuses(lf)
        _plan_cache.clear()
        for by in (["g", "h"], None):
            got = cf.evaluate(frame, *METRICS, by=by).toPandas()
            want = cf.evaluate(pl.DataFrame(data), *METRICS, by=by, invalid="null").to_pandas()
            assert list(got.columns) == list(want.columns)
            if by:
                assert got["h"].tolist() == want["h"].tolist()
                got, want = got.drop(columns="h"), want.drop(columns="h")
            assert_close(got, want, rtol=1e-12)
    finally:
        session.conf.unset("spark.sql.codegen.wholeStage")
