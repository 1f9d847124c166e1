"""Building on Spark, issue 38 item 9 (third attempt): functions looked up once, the normal tail written once."""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np
import pytest

import conformal_frames as cf
from conformal_frames.engine._spark_build import spark_functions_kept
from conformal_frames.numerics.brownian import _mills_coefficients


def _fake_builtin(monkeypatch: pytest.MonkeyPatch) -> tuple[types.ModuleType, list[str]]:
    calls: list[str] = []

    def lookup(name: str, sc: Any) -> object:
        calls.append(name)
        return object()

    fake = types.ModuleType("pyspark.sql.functions.builtin")
    fake._get_jvm_function = lookup  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyspark.sql.functions.builtin", fake)
    return fake, calls


def test_functions_are_looked_up_once_inside_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """One lookup per (context, name) inside (nested too), the original lookup back after, also on an error."""
    fake, calls = _fake_builtin(monkeypatch)
    original = fake._get_jvm_function  # type: ignore[attr-defined]
    sc, other = object(), object()
    with spark_functions_kept():
        get = fake._get_jvm_function  # type: ignore[attr-defined]
        assert get("lit", sc) is get("lit", sc)
        with spark_functions_kept():
            get("lit", sc)
            get("col", sc)
            get("lit", other)
        assert fake._get_jvm_function is get  # type: ignore[attr-defined]
    assert calls == ["lit", "col", "lit"]
    assert fake._get_jvm_function is original  # type: ignore[attr-defined]
    with pytest.raises(ZeroDivisionError), spark_functions_kept():
        _ = 1 / 0
    assert fake._get_jvm_function is original  # type: ignore[attr-defined]
    with spark_functions_kept():  # a new block finds again
        fake._get_jvm_function("lit", sc)  # type: ignore[attr-defined]
    assert calls == ["lit", "col", "lit", "lit"]


def test_literals_and_columns_are_made_once_inside_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """``lit``/``col`` of the same typed value: one column inside a block; other calls, values
    and numpy scalars made anew; the original function back after."""
    fake, _ = _fake_builtin(monkeypatch)
    made: list[tuple[str, object]] = []

    def invoke(name: str, *args: Any) -> object:
        made.append((name, *args))
        return object()

    fake._invoke_function = invoke  # type: ignore[attr-defined]
    with spark_functions_kept():
        make = fake._invoke_function  # type: ignore[attr-defined]
        assert make("lit", 1.0) is make("lit", 1.0) and make("col", "y") is make("col", "y")
        assert make("lit", float("nan")) is make("lit", float("nan"))
        ones = {id(make("lit", v)) for v in (1, 1.0, True, "1")} | {id(make("col", "1"))}
        assert len(ones) == 5 and make("lit", 0.0) is not make("lit", -0.0)
        assert make("lit", np.float64(2.0)) is not make("lit", np.float64(2.0))
        assert make("abs", 1.0) is not make("abs", 1.0) and make("lit", 1, 2) is not make("lit", 1, 2)
    assert fake._invoke_function is invoke  # type: ignore[attr-defined]
    assert len(made) == 15
    with spark_functions_kept():
        fake._invoke_function("lit", 1.0)  # type: ignore[attr-defined]
    assert len(made) == 16


def test_functions_kept_is_a_no_op_without_the_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "pyspark.sql.functions.builtin", raising=False)
    with spark_functions_kept():
        pass
    other = types.ModuleType("pyspark.sql.functions.builtin")  # a PySpark that finds functions otherwise
    monkeypatch.setitem(sys.modules, "pyspark.sql.functions.builtin", other)
    with spark_functions_kept():
        assert not hasattr(other, "_get_jvm_function")


def test_the_gaussian_tail_polynomial_is_written_once_on_spark() -> None:
    """narwhals' division on Spark repeats its numerator in the zero-divisor guards: the Mills
    polynomial of ``crps(mean=, std=)`` is a row column of its own: in the plan once."""
    pytest.importorskip("pyspark")
    from conftest import BACKENDS

    spark_backend = BACKENDS["pyspark"]
    if spark_backend.skip_reason() is not None:
        pytest.skip(spark_backend.skip_reason() or "")
    rng = np.random.default_rng(0)
    data = {"g": [0, 0, 1], "y": rng.normal(size=3), "mu": [0.0, 0.5, 1.0], "sd": [1.0, 2.0, 0.5]}
    out = cf.evaluate(spark_backend(data), cf.crps("y", mean="mu", std="sd"), by="g")
    plan = str(out._jdf.queryExecution().analyzed().toString())
    assert plan.count(repr(_mills_coefficients()[3])) == 1


def test_the_invalid_count_joins_the_last_part_within_its_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    """On Spark the invalid-row count takes the last part (no scan of its own) unless that part is full."""
    import narwhals.stable.v2 as nw
    import polars as pl

    from conformal_frames.engine import plan as plan_module
    from conformal_frames.engine.expr import indicator
    from conformal_frames.engine.query import _INVALID

    frame = pl.LazyFrame({"g": [0], "y": [0.0], "lo": [0.0], "hi": [1.0], "mu": [0.0], "sd": [1.0]})
    metrics = [cf.coverage("y", "lo", "hi"), cf.winkler("y", "lo", "hi", confidence_level=0.9)]
    plan = plan_module.Plan.of(
        nw.from_native(frame).collect_schema(), [*metrics, cf.crps("y", mean="mu", std="sd")], ["g"]
    )
    q = plan.query
    q.row(_INVALID, indicator(plan.invalid_mask()))
    aggs = {**dict(q.aggs.values()), _INVALID: nw.col(q.rows[_INVALID].name).sum()}
    read = plan_module._row_text(q)

    def text(names: list[str]) -> int:
        used: dict[str, int] = {}
        for name in names:
            used |= read(aggs[name])
        return sum(used.values())

    budget = max(text([name]) for name in aggs if name != _INVALID)
    monkeypatch.setattr(plan_module, "SPARK_ROW_TEXT", budget)
    monkeypatch.setattr(plan_module, "_INVALID_SLACK", 100.0)
    assert plan_module._parts(q, aggs)[-1][-1] == _INVALID and len(plan_module._parts(q, aggs)[-1]) > 1
    monkeypatch.setattr(plan_module, "_INVALID_SLACK", 1.0)
    last = plan_module._parts(q, aggs)[-1]
    assert last == [_INVALID] or text(last) <= budget


def test_kept_literals_build_the_same_query_on_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """On Spark: the same rows with literals and columns made once or anew (``crps``: ~70 literals)."""
    pytest.importorskip("pyspark")
    from conformal_frames.engine import _spark_build
    from conftest import BACKENDS

    spark_backend = BACKENDS["pyspark"]
    if spark_backend.skip_reason() is not None:
        pytest.skip(spark_backend.skip_reason() or "")
    rng = np.random.default_rng(1)
    mu = rng.normal(size=6)
    data = {"g": [0, 0, 0, 1, 1, 2], "y": mu + rng.normal(size=6), "mu": mu, "sd": [1.0, 2.0, 0.5, 1.0, 0.0, 3.0]}
    data |= {"lo": mu - 1.0, "hi": mu + 1.0}
    metrics = [
        cf.coverage("y", "lo", "hi"),
        cf.crps("y", mean="mu", std="sd"),
    ]
    kept = cf.evaluate(spark_backend(data), *metrics, by="g").toPandas()
    monkeypatch.setattr(_spark_build, "_KEPT_CALLS", frozenset())
    cf.engine._plan_cache.clear()
    fresh = cf.evaluate(spark_backend(data), *metrics, by="g").toPandas()
    assert kept.columns.tolist() == fresh.columns.tolist()
    for column in kept.columns:
        assert np.array_equal(kept[column].to_numpy(float), fresh[column].to_numpy(float), equal_nan=True), column
