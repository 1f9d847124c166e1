"""Limiting laws of sup|B| and of the range of B on [0, 1]: numpy and in-engine."""

from __future__ import annotations

import math

import narwhals.stable.v2 as nw
import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import kstwobign

import conformal_frames as cf
import oracle_calibration as oracle
from conformal_frames.numerics import brownian
from helpers import assert_close, to_pandas

GRID = np.concatenate([np.linspace(0.0, 50.0, 5001), [1e-300, 1e-4, 1e-3, 0.01, 1.9999999999, 2.0, 2.0000000001]])


def theta_ks(x: float, terms: int = 200) -> float:
    """The reference's theta series of P(sup|B| <= x), many terms."""
    k = np.arange(terms)
    return float(2 / np.pi * np.sum((-1.0) ** k / (k + 0.5) * np.exp(-((k + 0.5) ** 2) * np.pi**2 / (2 * x**2))))


def theta_kuiper(x: float, terms: int = 200) -> float:
    """The reference's (Feller's) theta series of P(range <= x), many terms."""
    h = np.arange(terms) + 0.5
    return float(np.sum((8 / x**2 + 2 / (h**2 * np.pi**2)) * np.exp(-2 * h**2 * np.pi**2 / x**2)))


def test_reference_values_at_1_2_3():
    # reference (003): kolmogorov_smirnov_cdf(1) = 0.3708, kuiper_cdf(1) = 0.0634
    assert round(cf.kolmogorov_smirnov_cdf(1.0), 4) == 0.3708
    assert round(cf.kuiper_cdf(1.0), 4) == 0.0634
    for x in (1.0, 2.0, 3.0):
        assert cf.brownian_max_abs_cdf(x) == pytest.approx(theta_ks(x), abs=1e-14)
        assert cf.brownian_range_cdf(x) == pytest.approx(theta_kuiper(x), abs=1e-14)
    assert_close(cf.brownian_max_abs_cdf([1.0, 2.0, 3.0]), [0.37077743, 0.90899948, 0.99460041], rtol=2e-8)
    assert_close(cf.brownian_range_cdf([1.0, 2.0, 3.0]), [0.06336459, 0.81850566, 0.98920083], rtol=2e-7)


@pytest.mark.parametrize(
    ("cdf", "sf", "oracle_sf"),
    [
        (cf.brownian_max_abs_cdf, cf.brownian_max_abs_sf, oracle.max_abs_sf),
        (cf.brownian_range_cdf, cf.brownian_range_sf, oracle.range_sf),
    ],
)
def test_cdfs_match_the_normal_tail_series(cdf, sf, oracle_sf):
    x = np.concatenate([np.linspace(0.3, 12.0, 400), [19.0, 30.0, 37.0]])
    expected_sf = np.array([oracle_sf(v) for v in x])
    # absolute accuracy of the CDF, relative accuracy of the (small) p-values
    np.testing.assert_allclose(cdf(x), 1.0 - expected_sf, rtol=0, atol=1e-14)
    np.testing.assert_allclose(sf(x), expected_sf, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("cdf", [cf.brownian_max_abs_cdf, cf.brownian_range_cdf])
def test_cdfs_are_monotone_within_unit_interval_with_limits(cdf):
    values = cdf(np.sort(GRID))
    assert np.all(values >= 0.0) and np.all(values <= 1.0)
    assert np.all(np.diff(values) >= 0.0)
    assert cdf(0.0) == 0.0 and cdf(-1.0) == 0.0  # 0 at 0: no ZeroDivisionError
    assert cdf(math.inf) == 1.0 and cdf(50.0) == 1.0
    assert math.isnan(cdf(math.nan))
    assert isinstance(cdf(1.0), float) and cdf(np.array([1.0, 2.0])).shape == (2,)


def test_diff_ks_cdf_stays_below_one_for_large_x():
    # the baseline's truncated series exceeds 1 for x >= 7 (negative p-values)
    x = np.linspace(7.0, 50.0, 200)
    assert np.all(cf.brownian_max_abs_cdf(x) <= 1.0)
    assert np.all(cf.brownian_max_abs_sf(x) >= 0.0)
    # and the p-value keeps its relative accuracy: P(sup|B| > 8) ~ 4 Phi_c(8)
    assert cf.brownian_max_abs_sf(8.0) == pytest.approx(4 * ndtr(-8.0), rel=1e-12)


def test_brownian_bridge_is_a_different_law():
    # scipy's kstwobign is sup|bridge|: not the law of sup|B| (documented)
    assert kstwobign.cdf(1.0) == pytest.approx(0.7300003283)
    assert abs(kstwobign.cdf(1.0) - cf.brownian_max_abs_cdf(1.0)) > 0.3


def test_range_dominates_max_abs():
    # range >= sup|B| pathwise, so P(range <= x) <= P(sup|B| <= x)
    x = np.linspace(0.1, 8.0, 300)
    assert np.all(cf.brownian_range_cdf(x) <= cf.brownian_max_abs_cdf(x) + 1e-16)


def test_in_engine_series_match_numpy(constructor):
    x = np.concatenate([np.linspace(0.0, 12.0, 241), [1e-4, 1.999999, 2.0, 37.0, math.inf]])
    z = np.concatenate([np.linspace(-12.0, 12.0, 241), [-2.0, 2.0, 0.0, 30.0, -30.0]])
    frame = nw.from_native(constructor({"x": x, "z": z}))
    lf = frame.lazy() if isinstance(frame, nw.DataFrame) else frame
    lf = brownian.with_max_abs_sf(lf, "x", "ks", "_a_")
    lf = brownian.with_range_sf(lf, "x", "ku", "_b_")
    lf = brownian.with_normal_sf(lf, "z", "nz", "_c_")
    out = to_pandas(lf.collect())
    assert list(out.columns) == ["x", "z", "ks", "ku", "nz"]  # scratch columns dropped
    assert_close(out["ks"], cf.brownian_max_abs_sf(x), rtol=1e-12, atol=1e-300)
    assert_close(out["ku"], cf.brownian_range_sf(x), rtol=1e-12, atol=1e-300)
    assert_close(out["nz"], ndtr(-z), rtol=1e-12, atol=1e-300)


def test_single_expressions_match_numpy():
    import polars as pl

    x = np.concatenate([np.linspace(0.0, 12.0, 241), [math.inf]])
    z = np.linspace(-12.0, 12.0, 242)
    out = nw.from_native(pl.DataFrame({"x": x, "z": z})).select(
        brownian.max_abs_sf_expr(nw.col("x")).alias("ks"),
        brownian.range_sf_expr(nw.col("x")).alias("ku"),
        brownian.normal_sf_expr(nw.col("z")).alias("nz"),
    )
    assert_close(out["ks"].to_numpy(), cf.brownian_max_abs_sf(x), rtol=1e-12, atol=1e-300)
    assert_close(out["ku"].to_numpy(), cf.brownian_range_sf(x), rtol=1e-12, atol=1e-300)
    assert_close(out["nz"].to_numpy(), ndtr(-z), rtol=1e-12, atol=1e-300)


def test_frame_steps_equal_the_single_expressions_bit_for_bit():
    # the frame steps evaluate the Mills polynomial in steps of intermediate columns:
    # the same operations in the same order as the one expression (on pandas: polars
    # frames take erfc in the steps, tests/test_small_frame_speed.py)
    import pandas as pd

    x = np.concatenate([np.linspace(0.0, 40.0, 401), [1e-4, 1.999999, 2.0, math.inf]])
    lf = nw.from_native(pd.DataFrame({"x": x, "z": np.concatenate([-x[::-1], x])[: len(x)]})).lazy()
    steps = brownian.with_normal_sf(brownian.with_max_abs_sf(lf, "x", "ks", "_a_"), "z", "nz", "_c_")
    steps = brownian.with_range_sf(steps, "x", "ku", "_b_").collect()
    single = lf.select(
        brownian.max_abs_sf_expr(nw.col("x")).alias("ks"),
        brownian.range_sf_expr(nw.col("x")).alias("ku"),
        brownian.normal_sf_expr(nw.col("z")).alias("nz"),
    ).collect()
    for c in ("ks", "ku", "nz"):
        np.testing.assert_array_equal(steps[c].to_numpy(), single[c].to_numpy())


def test_null_statistic_gives_null_pvalue(constructor):
    frame = nw.from_native(constructor({"x": [1.0, None, 3.0]}))
    lf = frame.lazy() if isinstance(frame, nw.DataFrame) else frame
    out = to_pandas(brownian.with_range_sf(brownian.with_max_abs_sf(lf, "x", "ks", "_a_"), "x", "ku", "_b_").collect())
    assert out["ks"].isna().tolist() == [False, True, False]
    assert out["ku"].isna().tolist() == [False, True, False]


def test_normal_sf_of_several_columns_in_the_same_steps(constructor):
    # several tails share the steps (one projection each on Spark): each equals its own call
    z = np.concatenate([np.linspace(-12.0, 12.0, 49), [0.0, 37.0]])
    frame = nw.from_native(constructor({"z": z, "w": z[::-1] / 3.0}))
    lf = frame.lazy() if isinstance(frame, nw.DataFrame) else frame
    both = to_pandas(brownian.with_normal_sf(lf, ["z", "w"], ["pz", "pw"], "_s_", absolute=True).collect())
    assert list(both.columns) == ["z", "w", "pz", "pw"]  # scratch columns dropped
    one = brownian.with_normal_sf(
        brownian.with_normal_sf(lf, "z", "pz", "_a_", absolute=True), "w", "pw", "_b_", absolute=True
    )
    one = to_pandas(one.collect())
    for c in ("pz", "pw"):
        np.testing.assert_array_equal(both[c].to_numpy(float), one[c].to_numpy(float))
    assert_close(both["pz"], ndtr(-np.abs(z)), rtol=1e-12, atol=1e-300)
