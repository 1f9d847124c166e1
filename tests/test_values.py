"""Values of the aggregated table (``Query.value``): levels, sharing, and the plans they keep small."""

from __future__ import annotations

from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
from conformal_frames.engine import Query
from helpers import assert_close, to_pandas


def test_a_value_is_one_level_above_its_inputs() -> None:
    q = Query(schema={"a": nw.Float64, "b": nw.Float64}, keys=[])
    s = q.value(nw.col("a") + nw.col("b"))
    d = q.value(nw.col(s) * 2.0, inputs=[s])
    same = q.value(nw.col("a") - 1.0, key="shared")
    assert q.value(nw.col("b"), key="shared") == same  # one column per key
    assert [v.level for v in q.values.values()] == [0, 1, 0]
    frame = nw.from_native(pl.DataFrame({"a": [1.0, 2.0], "b": [3.0, 5.0]}))
    out = q.with_values(frame)
    assert out.get_column(d).to_list() == [8.0, 14.0]
    assert out.get_column(same).to_list() == [0.0, 1.0]


def _weighted(seed: int, n: int = 40) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "g": rng.choice(["a", "b"], size=n),
        "y": rng.normal(size=n),
        "lo": rng.normal(size=n) - 1.0,
        "hi": rng.normal(size=n) + 3.0,
        "w": rng.integers(1, 4, size=n).astype(float),
        "yb": rng.integers(0, 2, size=n),
        "s": rng.uniform(size=n),
    }


def test_weighted_interval_values_match_the_inline_formula(constructor: Any) -> None:
    """The Wilson interval at Kish's n_eff, from its values, equals the formula written out (numpy)."""
    from scipy.special import ndtri

    data = _weighted(3)
    out = to_pandas(cf.evaluate(constructor(data), cf.coverage("y", "lo", "hi", weights="w"), by="g"))
    z = float(ndtri(0.975))
    for i, key in enumerate(sorted(set(data["g"]))):
        m = data["g"] == key
        w = data["w"][m]
        hit = ((data["lo"][m] <= data["y"][m]) & (data["y"][m] <= data["hi"][m])).astype(float)
        n = w.sum() ** 2 / (w**2).sum()
        k = (w * hit).sum() / w.sum() * n
        center = (k + z * z / 2) / (n + z * z)
        half = z / (n + z * z) * np.sqrt(max(k * (n - k), 0.0) / n + z * z / 4)
        assert_close(out["coverage_n_eff"][i], n, what="n_eff")
        assert_close(out["coverage_ci_low"][i], min(max(center - half, 0.0), k / n), what="low")
        assert_close(out["coverage_ci_high"][i], min(max(center + half, k / n), 1.0), what="high")


def test_spark_plan_of_weighted_intervals_stays_small(constructor: Any) -> None:
    """Inlined, Kish's n_eff and the Wilson parts were copied into every CASE branch of
    Spark's divisions and clips: 179 KB of plan for one weighted coverage (4 s to build)."""
    if getattr(constructor, "id", "") != "pyspark":
        pytest.skip("a Spark plan")
    frame = constructor(_weighted(0))
    metrics = [cf.coverage("y", "lo", "hi", weights="w"), cf.reliability("yb", "s", n_bins=3, weights="w")]
    for metric in metrics:
        native = cf.evaluate(frame, metric, by="g")
        size = len(native._jdf.queryExecution().analyzed().toString())
        assert size < 40_000, (metric.output_name, size)
