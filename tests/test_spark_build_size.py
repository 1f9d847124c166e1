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


def _spark() -> Any:
    pytest.importorskip("pyspark")
    from conftest import BACKENDS, spark_session

    if BACKENDS["pyspark"].skip_reason() is not None:
        pytest.skip(BACKENDS["pyspark"].skip_reason() or "")
    return spark_session()


def test_division_inside_writes_the_numerator_twice_with_ieee_values() -> None:
    """narwhals' division on Spark inside a block: the numerator twice (not four times), narwhals'
    values (``NaN / 0`` is inf on Spark, which orders NaN above every number); outside, narwhals' own form."""
    import narwhals._spark_like.expr as spark_expr
    import narwhals.stable.v2 as nw

    spark = _spark()
    x = [0.0, 1.0, -2.0, float("nan"), None, 3.0, -0.0, 6.0, None]
    d = [0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 4.0, None, None]
    frame = nw.from_native(spark.createDataFrame(list(zip(x, d, strict=True)), "x double, d double"))
    quotient = (nw.col("x") / nw.col("d")).alias("q")
    original = spark_expr.true_divide
    with spark_functions_kept():
        assert spark_expr.true_divide is not original
        thirds = frame.select((nw.col("x") / 3.0).alias("t")).to_native()
        assert "CASE" not in str(thirds._jdf.queryExecution().analyzed())
        by_zero = frame.select((nw.col("x") / 0.0).alias("z")).to_native()
        assert str(by_zero._jdf.queryExecution().analyzed()).count("x#") == 3  # twice, and the leaf
        inside = frame.select(quotient).to_native()
        text = str(inside._jdf.queryExecution().analyzed()).splitlines()[0]  # the Project
    assert spark_expr.true_divide is original
    assert text.count("x#") == 2, text
    got = np.array(inside.toPandas()["q"].to_numpy(float))
    expected = [np.nan, np.inf, -np.inf, np.inf, np.nan, 1.5, -0.0, np.nan, np.nan]
    assert np.array_equal(got, expected, equal_nan=True)
    assert np.signbit(got[6])
    third = thirds.toPandas()["t"].to_numpy(float)
    assert np.array_equal(third, np.array(x, dtype=float) / 3.0, equal_nan=True)
    by_zeros = [*expected[:5], np.inf, np.nan, np.inf, np.nan]  # -0.0 / 0 is NaN, 3 / 0 and 6 / 0 inf
    assert np.array_equal(by_zero.toPandas()["z"].to_numpy(float), by_zeros, equal_nan=True)
    null = inside.toPandas()["q"].isna().to_numpy()
    assert null.tolist() == [True, False, False, False, True, False, False, True, True]  # NaN or null alike
    outside = frame.select(quotient).to_native().toPandas()["q"].to_numpy(float)
    assert np.array_equal(outside, got, equal_nan=True)


def test_lists_and_lookups_inside_are_one_round_trip_and_the_same() -> None:
    """Inside: a list of 1-10 members is one ``List.of``, a longer one ``List.of`` calls joined (a None
    member: py4j's ``ArrayList``), a class or method found once; outside and in other threads, py4j's own."""
    import threading

    from py4j.java_collections import ListConverter

    spark = _spark()
    jvm, client = spark.sparkContext._jvm, spark.sparkContext._gateway._gateway_client
    with spark_functions_kept():
        assert jvm.PythonUtils is jvm.PythonUtils and jvm.PythonUtils.toSeq is jvm.PythonUtils.toSeq
        short = ListConverter().convert(["a", "b", "c"], client)
        long_ = ListConverter().convert([str(i) for i in range(25)], client)
        holed = ListConverter().convert(["a", None], client)
        assert short.getClass().getName() != "java.util.ArrayList"
        assert long_.getClass().getName() == holed.getClass().getName() == "java.util.ArrayList"
        assert list(short) == ["a", "b", "c"] and list(long_) == [str(i) for i in range(25)]
        assert list(holed) == ["a", None]
        seen: list[bool] = []
        thread = threading.Thread(target=lambda: seen.append(jvm.PythonUtils is jvm.PythonUtils))
        thread.start()
        thread.join()
        assert seen == [False]
    assert jvm.PythonUtils is not jvm.PythonUtils
    assert ListConverter().convert(["a"], client).getClass().getName() == "java.util.ArrayList"


def test_a_rename_of_names_to_themselves_inside_is_the_frame() -> None:
    """After each ``group_by().agg()`` narwhals renames the keys to themselves: inside, no ``select``."""
    import narwhals.stable.v2 as nw

    spark = _spark()
    frame = nw.from_native(spark.createDataFrame([(1, 2.0)], "g long, y double"))
    compliant = frame._compliant_frame
    with spark_functions_kept():
        assert compliant.rename({"g": "g"}) is compliant
        assert compliant.rename({"g": "k"}).columns == ["k", "y"]
    assert compliant.rename({"g": "g"}) is not compliant


def test_the_built_query_is_the_same_without_the_thread_patches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 23-metric kinds that divide most (per-class ECE, Gaussian CRPS, cwc, quantiles) give bit-identical
    results with and without the division, list and lookup patches."""
    from conformal_frames.engine import _spark_build
    from conftest import BACKENDS

    _spark()
    rng = np.random.default_rng(3)
    n = 40
    mu = rng.normal(size=n)
    probs = rng.dirichlet([1.0, 1.0, 1.0], size=n)
    data = {"g": rng.integers(0, 3, n).tolist(), "y": (mu + rng.normal(size=n)).tolist(), "mu": mu.tolist()}
    data |= {"sd": rng.uniform(0.5, 2.0, n).tolist(), "lo": (mu - 1.0).tolist(), "hi": (mu + 1.0).tolist()}
    data |= {"y3": rng.integers(0, 3, n).tolist(), **{f"p{k}": probs[:, k].tolist() for k in range(3)}}
    data |= {"q1": (mu - 0.5).tolist(), "q9": (mu + 0.5).tolist()}
    metrics = [
        cf.classwise_ece("y3", ["p0", "p1", "p2"], classes=[0, 1, 2]),
        cf.crps("y", mean="mu", std="sd"),
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
        cf.wis("y", quantiles={0.1: "q1", 0.5: "mu", 0.9: "q9"}),
        cf.mape("y", "mu"),
    ]
    kept = cf.evaluate(BACKENDS["pyspark"](data), *metrics, by="g").toPandas()
    monkeypatch.setattr(_spark_build, "_thread_patches", list)
    cf.engine._plan_cache.clear()
    plain = cf.evaluate(BACKENDS["pyspark"](data), *metrics, by="g").toPandas()
    assert kept.columns.tolist() == plain.columns.tolist()
    for column in kept.columns:
        assert np.array_equal(kept[column].to_numpy(float), plain[column].to_numpy(float), equal_nan=True), column
