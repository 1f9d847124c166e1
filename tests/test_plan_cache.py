"""The compiled queries reused across calls on eager polars frames, and the results kept per Spark frame (``_plan_cache``)."""

from __future__ import annotations

import concurrent.futures
import gc
import weakref
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
from conformal_frames.engine import _plan_cache

METRICS = [
    cf.coverage("y", "lo", "hi"),
    cf.width("lo", "hi"),
    cf.ece("label", "score", n_bins=5),
    cf.ks_test("label", "score"),
    cf.ssc_score("y", "lo", "hi", n_bins=2),
]


def _frame(seed: int, n: int = 500) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    centre = rng.normal(size=n)
    score = np.round(rng.uniform(size=n), 2)  # ties
    return pl.DataFrame(
        {
            "g": rng.integers(0, 7, n),
            "y": centre + rng.normal(size=n),
            "lo": centre - 1.0,
            "hi": centre + rng.uniform(0.5, 2.0, n),
            "score": score,
            "label": (rng.uniform(size=n) < score).astype(np.int64),
        }
    )


def _uncached(df: pl.DataFrame, by: str | None = "g") -> pl.DataFrame:
    """The same evaluation compiled on the frame itself (lazy input never uses the cache)."""
    return cf.evaluate(df.lazy(), *METRICS, by=by, invalid="raise").collect()


def _assert_same(got: pl.DataFrame, want: pl.DataFrame) -> None:
    assert got.columns == want.columns and got.dtypes == want.dtypes
    for c in got.columns:
        a, b = got[c].to_numpy(), want[c].to_numpy()
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=0.0)
        else:
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("by", ["g", None])
def test_reused_query_reads_each_call_frame(by: str | None) -> None:
    _plan_cache.clear()
    for seed in range(4):  # one compiled query, four frames of different sizes
        df = _frame(seed, n=200 + 150 * seed)
        _assert_same(cf.evaluate(df, *METRICS, by=by), _uncached(df, by))
    assert len(_plan_cache._PLANS) == 1


def test_the_caller_frame_is_not_kept() -> None:
    _plan_cache.clear()
    cf.evaluate(_frame(0), *METRICS, by="g")
    (plan,) = _plan_cache._PLANS.values()
    assert plan.frame is None


def test_an_invalid_frame_raises_then_a_valid_frame_evaluates() -> None:
    _plan_cache.clear()
    good = _frame(1)
    bad = good.with_columns(pl.when(pl.int_range(pl.len()) < 3).then(2.0).otherwise(pl.col("score")).alias("score"))
    with pytest.raises(ValueError, match=r"column 'score' has values outside \[0, 1\] in 3 rows"):
        cf.evaluate(bad, *METRICS, by="g")
    _assert_same(cf.evaluate(good, *METRICS, by="g"), _uncached(good))


def test_a_new_schema_gets_its_own_query() -> None:
    _plan_cache.clear()
    df = _frame(2)
    single = df.with_columns(pl.col("y", "lo", "hi").cast(pl.Float32))
    _assert_same(cf.evaluate(single, *METRICS, by="g"), _uncached(single))
    _assert_same(cf.evaluate(df, *METRICS, by="g"), _uncached(df))
    assert len(_plan_cache._PLANS) == 2


def test_concurrent_calls_each_read_their_own_frame() -> None:
    _plan_cache.clear()
    frames = [_frame(seed) for seed in range(8)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda f: cf.evaluate(f, *METRICS, by="g"), frames))
    for df, got in zip(frames, results):
        _assert_same(got, _uncached(df))


def test_the_cache_is_bounded() -> None:
    _plan_cache.clear()
    df = _frame(3)
    for k in range(_plan_cache.MAX_PLANS + 5):
        df.conformal.coverage("y", "lo", "hi", ci_level=0.5 + k / 1000)
    assert len(_plan_cache._PLANS) == _plan_cache.MAX_PLANS


def test_a_narwhals_frame_reads_its_native_frame() -> None:
    _plan_cache.clear()
    df = _frame(4)
    got = nw.to_native(cf.engine.compute(nw.from_native(df), METRICS, by="g"))
    _assert_same(got, _uncached(df))


def test_a_frame_longer_than_one_batch() -> None:
    """The IO source yields the frame in the engine's batches: none is lost or repeated."""
    _plan_cache.clear()
    df = _frame(5, n=250_001)
    _assert_same(cf.evaluate(df, *METRICS, by="g"), _uncached(df))
    assert cf.evaluate(df, cf.width("lo", "hi"))["n"].item() == 250_001


def test_a_nested_call_of_the_same_query_restores_the_outer_frame() -> None:
    _plan_cache.clear()
    outer, inner = _frame(6), _frame(7)
    lf = cf.engine.to_lazy(outer)[0]
    with _plan_cache.bound(outer, lf, METRICS, ["g"], "raise", cf.engine.compile_query, reusable=True) as compiled:
        _assert_same(cf.evaluate(inner, *METRICS, by="g"), _uncached(inner))  # the same cached query
        got = compiled.finish(eager=True)
    _assert_same(nw.to_native(got), _uncached(outer))
    (plan,) = _plan_cache._PLANS.values()
    assert plan.frame is None


def _collected(result: object) -> pl.DataFrame:
    """A lazy result of any backend as a polars frame sorted by the key."""
    return pl.from_arrow(nw.from_native(result).collect("pyarrow").to_arrow()).sort("g")  # type: ignore[return-value]


def test_a_repeated_lazy_call_on_spark_returns_the_kept_result(lazy_constructor: Any) -> None:
    """Classic PySpark keeps the result per (frame, metrics, keys, policy); other lazy backends build again."""
    _plan_cache.clear()
    frame = lazy_constructor(_frame(8, n=300).to_dict(as_series=False))
    first = cf.evaluate(frame, *METRICS, by="g")
    again = cf.evaluate(frame, *METRICS, by="g")
    made_anew = cf.evaluate(frame, *[type(m)(**vars(m)) for m in METRICS], by="g")  # equal metrics
    kept = lazy_constructor.id == "pyspark"
    assert (again is first) is kept and (made_anew is first) is kept
    _assert_same(_collected(again), _collected(first))
    # another policy, other keys or other metrics: another result
    assert cf.evaluate(frame, *METRICS, by="g", invalid="drop") is not first
    assert cf.evaluate(frame, *METRICS[:2], by="g") is not first
    assert cf.evaluate(frame, *METRICS) is not first
    # "raise" runs its checks when called: built on every call
    checked = cf.evaluate(frame, *METRICS, by="g", invalid="raise")
    assert cf.evaluate(frame, *METRICS, by="g", invalid="raise") is not checked
    _assert_same(_collected(checked), _collected(first).drop("n_invalid"))


def test_a_kept_result_goes_with_its_frame(lazy_constructor: Any) -> None:
    _plan_cache.clear()
    frame = lazy_constructor(_frame(9, n=50).to_dict(as_series=False))
    cf.evaluate(frame, *METRICS, by="g")
    assert len(_plan_cache._RESULTS) == (lazy_constructor.id == "pyspark")
    alive = weakref.ref(frame)
    del frame
    gc.collect()
    assert alive() is None and len(_plan_cache._RESULTS) == 0


def test_kept_results_per_frame_are_bounded(lazy_constructor: Any) -> None:
    _plan_cache.clear()
    frame = lazy_constructor(_frame(10, n=50).to_dict(as_series=False))
    for k in range(_plan_cache.MAX_RESULTS + 3):
        cf.evaluate(frame, cf.coverage("y", "lo", "hi", ci_level=0.5 + k / 1000))
    want = [_plan_cache.MAX_RESULTS] if lazy_constructor.id == "pyspark" else []
    assert [len(kept) for kept in _plan_cache._RESULTS.values()] == want
