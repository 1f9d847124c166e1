"""Issue 39 items 3-4 (small-frame speed): what the faster paths must keep.

- On polars frames the normal tail of the frame steps is polars' ``erfc``
  (Mills' series on the other backends): within 1e-12 of scipy, and the
  same values as the compiled expressions (``conformal_frames.polars``).
- The eager polars result path (native invalid check, the count column
  dropped in place) gives the same frames and errors as before.
"""

from __future__ import annotations

import math

import narwhals.stable.v2 as nw
import numpy as np
import pytest
from scipy.special import ndtr

import conformal_frames as cf
from conformal_frames.engine.plan import _INVALID, _without, has_invalid
from conformal_frames.errors import InvalidRowsError
from conformal_frames.numerics import brownian

pl = pytest.importorskip("polars")


def test_polars_steps_take_erfc():
    x = np.concatenate([np.linspace(0.0, 40.0, 81), [1e-4, 1.999999, 2.0, math.inf]])
    z = np.concatenate([-x[::-1], x])[: len(x)]
    lf = nw.from_native(pl.DataFrame({"x": x, "z": z})).lazy()
    out = brownian.with_normal_sf(brownian.with_max_abs_sf(lf, "x", "ks", "_a_"), "z", "nz", "_c_").collect()
    nz = out["nz"].to_numpy()
    np.testing.assert_allclose(nz, ndtr(-z), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(out["ks"].to_numpy(), cf.brownian_max_abs_sf(x), rtol=1e-12, atol=1e-300)
    # erfc itself (not the Mills series): the upper tail is 0.5 erfc(z / sqrt 2), bit for bit
    upper = z >= 0
    erfc = pl.Series(z[upper] * 0.7071067811865476).erfc().to_numpy() * 0.5
    np.testing.assert_array_equal(nz[upper], erfc)
    assert out.columns == ["x", "z", "ks", "nz"]  # the scratch columns dropped
    kept = brownian.with_normal_sf(lf, "z", "nz", "_c_", keep_scratch=True).collect()
    assert kept.columns[:2] == ["x", "z"]
    assert "nz" in kept.columns
    assert len(kept.columns) > 3  # kept on polars (an aggregated table's final selection drops them)
    np.testing.assert_array_equal(kept["nz"].to_numpy(), nz)


def test_evaluate_pvalue_equals_the_compiled_expression():
    import conformal_frames.polars as cfx

    rng = np.random.default_rng(3)
    p = rng.random(200)
    df = pl.DataFrame({"y": (rng.random(200) < p).astype(float), "p": p, "g": rng.integers(0, 3, 200)})
    metric = cf.spiegelhalter_test("y", "p")
    ours = cf.evaluate(df, metric, by="g")
    compiled = df.group_by("g").agg(cfx.spiegelhalter_test("y", "p")).sort("g").unnest("spiegelhalter_test")
    np.testing.assert_array_equal(
        ours["spiegelhalter_test_pvalue"].to_numpy(), compiled["spiegelhalter_test_pvalue"].to_numpy()
    )
    pandas = cf.evaluate(df.to_pandas(), metric, by="g")  # through its polars twin: the same values
    np.testing.assert_allclose(pandas["spiegelhalter_test_pvalue"], ours["spiegelhalter_test_pvalue"], rtol=1e-12)


@pytest.mark.parametrize(
    ("values", "expected"),
    [([0.0, 0.0], False), ([0.0, 2.0], True), ([None, 0.0], False), ([math.nan, 0.0], False), ([math.nan, 1.0], True)],
)
def test_has_invalid_on_polars_equals_nansum(values, expected):
    table = nw.from_native(pl.DataFrame({_INVALID: values}, schema={_INVALID: pl.Float64}), eager_only=True)
    assert has_invalid(table) is expected
    assert has_invalid(nw.from_native(table.to_native().to_pandas(), eager_only=True)) is expected


def test_without_drops_in_place_and_keeps_the_frame():
    table = nw.from_native(pl.DataFrame({"a": [1.0], _INVALID: [0.0]}), eager_only=True)
    out = _without(table, _INVALID)
    assert out.columns == ["a"]
    assert out.to_native().columns == ["a"]


def test_eager_polars_results_and_errors_unchanged():
    df = pl.DataFrame({"y": [1.0, 2.0, 3.0, 4.0], "lo": [0.0, 2.5, 2.0, 3.0], "hi": [2.0, 3.0, 4.0, 5.0]})
    assert df.conformal.coverage("y", "lo", "hi") == 0.75
    out = cf.evaluate(df, cf.coverage("y", "lo", "hi"))
    assert isinstance(out, pl.DataFrame)
    assert out.columns == ["coverage", "coverage_ci_low", "coverage_ci_high", "n"]
    assert out["coverage"].item() == 0.75
    assert out["n"].dtype == pl.Int64
    bad = df.with_columns(pl.when(pl.col("y") > 3).then(None).otherwise(pl.col("y")).alias("y"))
    with pytest.raises(InvalidRowsError, match="1 row"):
        bad.conformal.coverage("y", "lo", "hi")
    assert math.isnan(bad.conformal.coverage("y", "lo", "hi", invalid="null"))
