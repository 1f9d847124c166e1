"""CRPS and PIT (distributions.py) against independent numpy oracles, on every backend.

Spark cost: every metric runs once or twice on every backend (grouped); the
loops over seeds, ties and estimators run on the other backends only.
"""

from __future__ import annotations

import math

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy import integrate
from scipy.stats import norm

import conformal_frames as cf
from helpers import assert_close, group_dict, to_pandas


def not_spark(backend, test: str) -> None:
    if backend.id == "pyspark":
        pytest.skip(f"on the cheaper backends (a Spark query costs ~1 min here); pyspark covered by {test}[pyspark]")


# ---------------------------------------------------------------------------
# data and oracles
# ---------------------------------------------------------------------------
def forecast_data(seed: int, n: int = 60, m_max: int = 7) -> dict:
    """Gaussian and ensemble forecasts with tied members, y on a member, ragged
    ensembles (1..m_max members, for the list column) and groups of size 1 and 2."""
    rng = np.random.default_rng(seed)
    mu = np.round(rng.normal(size=n), 1)
    sd = np.round(rng.gamma(2.0, 0.5, size=n), 2) + 0.01
    y = np.round(mu + rng.normal(size=n) * sd * 1.3, 1)
    sizes = rng.integers(1, m_max + 1, size=n)
    ens = [list(np.round(mu[i] + rng.normal(size=sizes[i]) * sd[i], 1)) for i in range(n)]
    for i in range(0, n, 7):  # y equal to a member
        ens[i][0] = y[i]
    cols = {f"x{j}": np.round(mu + rng.normal(size=n) * sd, 1) for j in range(5)}
    cols["x4"][::5] = cols["x0"][::5]  # ties across member columns
    cols["x3"][::9] = y[::9]
    groups = rng.choice(["a", "b", "c"], size=n - 3)
    g = np.concatenate([groups, ["one", "two", "two"]])
    return {"y": y, "mu": mu, "sd": sd, "ens": ens, **cols, "g": g}


MEMBERS = ["x0", "x1", "x2", "x3", "x4"]


def crps_gauss_oracle(y, mu, sd):
    z = (y - mu) / sd
    return sd * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / math.sqrt(math.pi))


def crps_integral(y: float, mu: float, sd: float) -> float:
    """The CRPS integral int (F(x) - 1[y <= x])^2 dx, numerically."""
    lower = integrate.quad(lambda x: norm.cdf(x, mu, sd) ** 2, -np.inf, y, epsabs=1e-14, epsrel=1e-13)[0]
    upper = integrate.quad(lambda x: norm.sf(x, mu, sd) ** 2, y, np.inf, epsabs=1e-14, epsrel=1e-13)[0]
    return lower + upper


def crps_pairs(y: float, x, *, fair: bool = False) -> float:
    """The O(m^2) pair formula E|X - y| - (1/2) E|X - X'|."""
    x = np.asarray(x, dtype=float)
    m = len(x)
    pairs = np.abs(x[:, None] - x[None, :]).sum()
    return float(np.abs(x - y).mean() - pairs / (2 * m * (m - 1) if fair else 2 * m * m))


def grouped(d: dict, per_row: np.ndarray) -> np.ndarray:
    return np.array([per_row[idx].mean() for idx in group_dict(d["g"]).values()])


def ensemble_per_row(d: dict, which: str, fair: bool = False) -> np.ndarray:
    if which == "list":
        return np.array([crps_pairs(y, x, fair=fair) for y, x in zip(d["y"], d["ens"])])
    xs = np.column_stack([d[c] for c in MEMBERS])
    return np.array([crps_pairs(y, x, fair=fair) for y, x in zip(d["y"], xs)])


# ---------------------------------------------------------------------------
# the oracles themselves
# ---------------------------------------------------------------------------
def test_gaussian_closed_form_is_the_crps_integral():
    rng = np.random.default_rng(3)
    for y, mu, sd in zip(rng.normal(size=8) * 3, rng.normal(size=8), rng.gamma(2.0, 1.0, size=8)):
        assert crps_gauss_oracle(y, mu, sd) == pytest.approx(crps_integral(y, mu, sd), rel=1e-9)


def test_peer_libraries_agree_with_the_oracles():
    sr = pytest.importorskip("scoringrules")
    rng = np.random.default_rng(4)
    x = np.round(rng.normal(size=(20, 6)), 1)
    y = np.round(rng.normal(size=20), 1)
    plain = [crps_pairs(a, b) for a, b in zip(y, x)]
    fair = [crps_pairs(a, b, fair=True) for a, b in zip(y, x)]
    np.testing.assert_allclose(sr.crps_ensemble(y, x), plain, rtol=1e-12)  # its default estimator
    np.testing.assert_allclose(sr.crps_ensemble(y, x, estimator="fair"), fair, rtol=1e-12)
    np.testing.assert_allclose(sr.crps_normal(y, 0.3, 1.7), crps_gauss_oracle(y, 0.3, 1.7), rtol=1e-12)


# ---------------------------------------------------------------------------
# every backend
# ---------------------------------------------------------------------------
def test_gaussian_crps_matches_oracle(constructor):
    d = forecast_data(0)
    out = to_pandas(cf.evaluate(constructor(d), cf.crps("y", mean="mu", std="sd"), by="g"))
    assert list(out["g"]) == sorted(set(d["g"]))
    assert_close(out["crps"], grouped(d, crps_gauss_oracle(d["y"], d["mu"], d["sd"])), rtol=1e-12)
    assert list(out["n"]) == [len(i) for i in group_dict(d["g"]).values()]


def test_ensemble_crps_matches_pair_formula(constructor):
    d = forecast_data(1)
    metrics = [cf.crps("y", samples="ens"), cf.crps("y", samples=MEMBERS).alias("crps_cols")]
    out = to_pandas(cf.evaluate(constructor(d), *metrics, by="g"))
    assert_close(out["crps"], grouped(d, ensemble_per_row(d, "list")), rtol=1e-12, what=constructor.id)
    assert_close(out["crps_cols"], grouped(d, ensemble_per_row(d, "columns")), rtol=1e-12, what=constructor.id)


@pytest.mark.parametrize("seed", [2, 3, 4])
@pytest.mark.parametrize("fair", [False, True])
def test_ensemble_crps_seeds_and_estimators(constructor, seed, fair):
    not_spark(constructor, "test_ensemble_crps_matches_pair_formula")
    d = forecast_data(seed, m_max=9)
    if fair:  # the fair estimator needs 2+ members
        d["ens"] = [x if len(x) > 1 else [*x, x[0] + 0.5] for x in d["ens"]]
    est = "fair" if fair else "plain"
    metrics = [cf.crps("y", samples="ens", estimator=est), cf.crps("y", samples=MEMBERS, estimator=est).alias("c")]
    out = to_pandas(cf.evaluate(constructor(d), *metrics, by="g"))
    assert_close(out["crps"], grouped(d, ensemble_per_row(d, "list", fair)), rtol=1e-12)
    assert_close(out["c"], grouped(d, ensemble_per_row(d, "columns", fair)), rtol=1e-12)
    whole = to_pandas(cf.evaluate(constructor(d), *metrics))
    assert_close(whole["crps"], [ensemble_per_row(d, "list", fair).mean()], rtol=1e-12)


def test_ungrouped_float_and_peers(eager_constructor):
    sr = pytest.importorskip("scoringrules")
    d = forecast_data(5)
    frame = eager_constructor(d)
    xs = np.column_stack([d[c] for c in MEMBERS])
    got = frame.conformal.crps("y", samples=MEMBERS)
    assert isinstance(got, float)
    assert got == pytest.approx(float(np.mean(sr.crps_ensemble(d["y"], xs))), rel=1e-12)
    gauss = frame.conformal.crps("y", mean="mu", std="sd")
    assert gauss == pytest.approx(float(np.mean(sr.crps_normal(d["y"], d["mu"], d["sd"]))), rel=1e-12)


def test_lazy_stays_lazy(lazy_constructor):
    not_spark(lazy_constructor, "test_ensemble_crps_matches_pair_formula")
    d = forecast_data(6)
    native = lazy_constructor(d)
    out = cf.evaluate(native, cf.crps("y", samples="ens"), cf.crps("y", mean="mu", std="sd").alias("g_crps"), by="g")
    assert type(out) is type(native)
    frame = to_pandas(out)
    assert_close(frame["crps"], grouped(d, ensemble_per_row(d, "list")), rtol=1e-12)


def test_polars_array_and_pandas_object_columns():
    d = forecast_data(7)
    fixed = [x[:1] * 3 for x in d["ens"]]  # 3 members each, for the Array dtype
    arr = pl.DataFrame({"y": d["y"], "ens": fixed}).with_columns(pl.col("ens").cast(pl.Array(pl.Float64, 3)))
    expected = np.mean([crps_pairs(y, x) for y, x in zip(d["y"], fixed)])
    assert arr.conformal.crps("y", samples="ens") == pytest.approx(expected, rel=1e-12)
    objects = pd.DataFrame({"y": d["y"], "ens": [np.array(x) for x in d["ens"]]})
    before = objects.copy()
    assert objects.conformal.crps("y", samples="ens") == pytest.approx(ensemble_per_row(d, "list").mean(), rel=1e-12)
    assert objects["ens"].dtype == object and objects["ens"].map(type).eq(np.ndarray).all()  # not modified
    pd.testing.assert_frame_equal(objects.drop(columns="ens"), before.drop(columns="ens"))


def test_single_member_is_absolute_error():
    df = pl.DataFrame({"y": [1.0, 2.0, -1.0], "ens": [[3.0], [2.0], [0.5]]})
    assert df.conformal.crps("y", samples="ens") == pytest.approx((2.0 + 0.0 + 1.5) / 3, rel=1e-15)


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("std", "message"),
    [
        ([1.0, -1.0, 0.5], r"std column 'sd' has zero or negative values \(std must be > 0\) in 1 row, e.g. -1"),
        ([1.0, 0.0, 0.0], r"std column 'sd' has zero or negative values \(std must be > 0\) in 2 rows, e.g. 0"),
        ([1.0, None, 0.5], r"column 'sd' has missing \(null/NaN\) or infinite values in 1 row"),
    ],
)
def test_bad_std(eager_constructor, std, message):
    frame = eager_constructor({"y": [0.0, 1.0, 2.0], "mu": [0.0, 0.0, 0.0], "sd": std})
    with pytest.raises(ValueError, match=message):
        cf.evaluate(frame, cf.crps("y", mean="mu", std="sd"))


def test_bad_std_lazy_is_null(lazy_constructor):
    not_spark(lazy_constructor, "test_gaussian_crps_matches_oracle")
    frame = lazy_constructor({"y": [0.0, 1.0, 2.0], "mu": [0.0, 0.0, 0.0], "sd": [1.0, -1.0, 0.5]})
    out = to_pandas(cf.evaluate(frame, cf.crps("y", mean="mu", std="sd")))
    assert out["crps"].isna().all() and out["n_invalid"].tolist() == [1]


@pytest.mark.parametrize(
    ("ens", "message"),
    [
        ([[1.0], [], [2.0, 3.0]], r"samples column 'ens' has empty ensembles in 1 row"),
        ([[1.0], None, [2.0, 3.0]], r"samples column 'ens' has missing values in 1 row"),
        ([[1.0], [float("nan"), 1.0], [2.0, 3.0]], r"samples column 'ens' has NaN or infinite members in 1 row"),
        ([[1.0], [float("inf"), 1.0], [2.0, 3.0]], r"samples column 'ens' has NaN or infinite members in 1 row"),
    ],
)
def test_bad_ensembles(eager_constructor, ens, message):
    frame = eager_constructor({"y": [0.0, 1.0, 2.0], "ens": ens})
    with pytest.raises(ValueError, match=message):
        cf.evaluate(frame, cf.crps("y", samples="ens"))


def test_bad_ensembles_drop_and_null(lazy_constructor):
    not_spark(lazy_constructor, "test_ensemble_crps_matches_pair_formula")
    frame = lazy_constructor({"y": [0.0, 1.0, 2.0], "ens": [[1.0], [], [2.0, 4.0]]})
    out = to_pandas(cf.evaluate(frame, cf.crps("y", samples="ens"), invalid="drop"))
    assert out["crps"].tolist() == pytest.approx([(1.0 + 0.5) / 2]) and out["n_dropped"].tolist() == [1]
    out = to_pandas(cf.evaluate(frame, cf.crps("y", samples="ens")))
    assert out["crps"].isna().all() and out["n_invalid"].tolist() == [1]


def test_null_members_are_invalid_rows():
    # review 2026-11-23: a null member is an invalid row like a null member column
    # (raise names it; invalid="null" voids its group only), no longer a silent null
    df = pl.DataFrame({"y": [0.0, 1.0], "ens": [[1.0, None], [2.0, 3.0]], "g": ["a", "b"]})
    with pytest.raises(ValueError, match=r"samples column 'ens' has missing members in 1 row"):
        df.conformal.crps("y", samples="ens")
    out = df.conformal.crps("y", samples="ens", by="g", invalid="null")
    assert out["crps"].to_list() == [None, pytest.approx(1.5 - 0.25)]


def test_member_columns_are_checked():
    df = pl.DataFrame({"y": [0.0, 1.0], "x0": [1.0, None], "x1": [2.0, 3.0]})
    with pytest.raises(ValueError, match=r"column 'x0' has missing \(null/NaN\) or infinite values in 1 row"):
        df.conformal.crps("y", samples=["x0", "x1"])


def test_bad_parameters():
    with pytest.raises(ValueError, match="give a forecast"):
        cf.crps("y")
    with pytest.raises(ValueError, match="std= is missing"):
        cf.crps("y", mean="mu")
    with pytest.raises(ValueError, match="not several"):
        cf.crps("y", mean="mu", std="sd", samples="ens")
    with pytest.raises(TypeError, match="samples must be the name of a list column or a list of member column names"):
        cf.crps("y", samples=3)
    with pytest.raises(ValueError, match="'x' repeated"):
        cf.crps("y", samples=["x", "x"])
    with pytest.raises(ValueError, match="estimator must be one of 'plain', 'fair'"):
        cf.crps("y", samples="ens", estimator="pwm")
    with pytest.raises(ValueError, match="estimator='fair' needs at least 2 members"):
        cf.crps("y", samples=["x"], estimator="fair")
    df = pl.DataFrame({"y": [0.0], "ens": [1.0]})
    with pytest.raises(TypeError, match="samples column 'ens' must be a list column of numbers"):
        df.conformal.crps("y", samples="ens")
    with pytest.raises(ValueError, match="column 'mu' not found"):
        df.conformal.crps("y", mean="mu", std="ens")


def test_fair_single_member_rows_are_invalid():
    df = pl.DataFrame({"y": [0.0, 1.0], "ens": [[1.0], [2.0, 3.0]]})
    with pytest.raises(ValueError, match=r"single-member ensembles \(estimator='fair' needs 2\+\) in 1 row"):
        df.conformal.crps("y", samples="ens", estimator="fair")


def test_caller_frame_not_modified():
    d = forecast_data(8)
    df = pd.DataFrame({k: v for k, v in d.items() if k != "ens"})
    before = df.copy()
    cf.evaluate(df, cf.crps("y", samples=MEMBERS), cf.crps("y", mean="mu", std="sd").alias("gauss"), by="g")
    pd.testing.assert_frame_equal(df, before)
    assert nw.from_native(df).columns == list(before.columns)


# ---------------------------------------------------------------------------
# PIT: oracles from the definitions (Python integers for the hash)
# ---------------------------------------------------------------------------
P = 67108859  # the prime of the documented hash


def hash_uniform(index: int, seed: int) -> float:
    h = (index + (seed * 1000003 + 12345) % P) % P
    for c in (1013904223, 1664525, 22695477):
        h = (h * h + c + index) % P
    return (h + 0.5) / P


def hash_draws(lo: np.ndarray, hi: np.ndarray, keys: np.ndarray | None, seed: int) -> np.ndarray:
    """V of each forecast: the hash of its rank in its group ordered by (lo, hi) (docs/forecasts.md)."""
    key = keys if keys is not None else np.zeros(len(lo))
    order = np.lexsort((hi, lo, key))
    sorted_keys = np.asarray(key)[order]
    first = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]] if len(order) else np.zeros(0, bool)
    start = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    v = np.empty(len(lo))
    v[order] = [hash_uniform(int(i - s), seed) for i, s in zip(range(len(order)), start)]
    return v


def ensemble_pit(d: dict, seed: int, keys: np.ndarray | None, which: str = "list") -> np.ndarray:
    """Randomized verification rank; V by the forecast's rank in its group in (lo, hi) order."""
    members = d["ens"] if which == "list" else list(np.column_stack([d[c] for c in MEMBERS]))
    x = [np.asarray(e, dtype=float) for e in members]
    below = np.array([(e < y).sum() for e, y in zip(x, d["y"])], dtype=float)
    equal = np.array([(e == y).sum() for e, y in zip(x, d["y"])], dtype=float)
    m1 = np.array([len(e) + 1.0 for e in x])
    lo, hi = below / m1, (below + equal + 1.0) / m1
    return lo + hash_draws(lo, hi, keys, seed) * (hi - lo)


def histogram_oracle(pit: np.ndarray, n_bins: int) -> np.ndarray:
    b = np.clip(np.floor(pit * n_bins), 0, n_bins - 1).astype(int)
    return np.bincount(b, minlength=n_bins) / len(pit)


def band_oracle(n: int, n_bins: int, ci_level: float = 0.95) -> tuple[float, float]:
    p = 1 / n_bins
    half = norm.ppf(0.5 + ci_level / 2) * math.sqrt(p * (1 - p) / n)
    return max(p - half, 0.0), min(p + half, 1.0)


def ks_oracle(pit: np.ndarray) -> tuple[float, float]:
    from scipy.stats import kstest

    res = kstest(pit, "uniform", method="asymp")
    return float(res.statistic), float(res.pvalue)


def test_kolmogorov_series_matches_scipy():
    from scipy.stats import kstwobign

    from conformal_frames.metrics.distributions import with_kolmogorov_sf

    x = np.array([0.0, 1e-4, 0.05, 0.3, 0.5, 0.8, 0.99, 1.0, 1.01, 1.5, 2.0, 3.0, 5.0, 8.0])
    out = with_kolmogorov_sf(nw.from_native(pl.DataFrame({"x": x}).lazy()), "x", "p", "_t").collect()
    got = out["p"].to_numpy()
    np.testing.assert_allclose(got, kstwobign.sf(x), rtol=1e-12, atol=1e-300)


def test_gaussian_pit_matches_oracle(constructor):
    d = forecast_data(10, n=80)
    frame = constructor(d)
    pit = norm.cdf((d["y"] - d["mu"]) / d["sd"])
    metrics = [cf.pit_histogram("y", mean="mu", std="sd", n_bins=4), cf.pit_test("y", mean="mu", std="sd")]
    out = to_pandas(cf.evaluate(frame, *metrics, by="g"))
    for row, idx in zip(out.itertuples(index=False), group_dict(d["g"]).values()):
        row = row._asdict()
        freq = [row[f"pit_histogram_bin{k}"] for k in range(4)]
        assert_close(freq, histogram_oracle(pit[idx], 4), rtol=1e-15, what=str(idx))
        assert_close([row["pit_histogram_band_low"], row["pit_histogram_band_high"]], band_oracle(len(idx), 4))
        assert_close([row["pit_test"], row["pit_test_pvalue"]], ks_oracle(pit[idx]), rtol=1e-12)


def test_ensemble_pit_matches_oracle(constructor):
    d = forecast_data(11, n=80)
    frame = constructor(d)
    metrics = [cf.pit_histogram("y", samples="ens", n_bins=5, seed=7), cf.pit_test("y", samples=MEMBERS, seed=7)]
    out = to_pandas(cf.evaluate(frame, *metrics, by="g"))
    pit_list = ensemble_pit(d, 7, d["g"])
    pit_cols = ensemble_pit(d, 7, d["g"], "columns")
    for row, idx in zip(out.itertuples(index=False), group_dict(d["g"]).values()):
        row = row._asdict()
        freq = [row[f"pit_histogram_bin{k}"] for k in range(5)]
        assert_close(freq, histogram_oracle(pit_list[idx], 5), rtol=1e-15)
        assert_close([row["pit_test"], row["pit_test_pvalue"]], ks_oracle(pit_cols[idx]), rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ensemble_pit_seeds_ungrouped_and_long(constructor, seed):
    not_spark(constructor, "test_ensemble_pit_matches_oracle")
    d = forecast_data(20 + seed, n=70, m_max=4)
    frame = constructor(d)
    pit = ensemble_pit(d, seed, None)
    out = to_pandas(cf.evaluate(frame, cf.pit_test("y", samples="ens", seed=seed)))
    assert_close([out["pit_test"][0], out["pit_test_pvalue"][0]], ks_oracle(pit), rtol=1e-12)
    long = to_pandas(cf.conformal(frame).pit_histogram("y", samples="ens", n_bins=3, seed=seed))
    assert list(long.columns) == ["bin", "bin_low", "bin_high", "frequency", "band_low", "band_high", "n"]
    assert long["bin"].tolist() == [0, 1, 2]
    assert_close(long["frequency"], histogram_oracle(pit, 3), rtol=1e-15)
    assert long["n"].tolist() == list(np.bincount(np.clip(np.floor(pit * 3), 0, 2).astype(int), minlength=3))
    assert_close(long["bin_high"], [1 / 3, 2 / 3, 1.0], rtol=1e-15)


def test_pit_test_result_object(eager_constructor):
    d = forecast_data(12)
    res = eager_constructor(d).conformal.pit_test("y", mean="mu", std="sd")
    assert isinstance(res, cf.PITTestResult) and res.n == len(d["y"])
    stat, p = res
    assert (stat, p) == pytest.approx(ks_oracle(norm.cdf((d["y"] - d["mu"]) / d["sd"])), rel=1e-12)


def test_randomized_pit_is_uniform_for_a_calibrated_ensemble_with_ties():
    # y and the members are exchangeable draws of a discrete law (many ties):
    # the randomized PIT is uniform, the non-randomized rank would not be
    rng = np.random.default_rng(13)
    n, m = 4000, 4
    draws = rng.poisson(1.0, size=(n, m + 1)).astype(float)
    df = pl.DataFrame({"y": draws[:, 0], "ens": [list(r) for r in draws[:, 1:]]})
    res = df.conformal.pit_test("y", samples="ens")
    assert res.pvalue > 0.01
    shifted = df.with_columns(pl.col("y") + 1.0).conformal.pit_test("y", samples="ens")
    assert shifted.pvalue < 1e-10


def test_pit_lazy_stays_lazy(lazy_constructor):
    not_spark(lazy_constructor, "test_ensemble_pit_matches_oracle")
    d = forecast_data(14)
    native = lazy_constructor(d)
    out = cf.conformal(native).pit_histogram("y", samples="ens", n_bins=2, by="g")
    assert type(out) is type(native)
    assert to_pandas(out).shape == (2 * len(set(d["g"])), 8)


def test_pit_bad_input():
    df = pl.DataFrame({"y": [0.0, 1.0, 2.0], "mu": [0.0, 0.0, 0.0], "sd": [1.0, 0.0, 1.0], "ens": [[1.0], [], [2.0]]})
    with pytest.raises(ValueError, match=r"std column 'sd' has zero or negative values .* in 1 row"):
        df.conformal.pit_test("y", mean="mu", std="sd")
    with pytest.raises(ValueError, match=r"samples column 'ens' has empty ensembles in 1 row"):
        df.conformal.pit_histogram("y", samples="ens")
    with pytest.raises(ValueError, match="give a forecast"):
        cf.pit_test("y")
    with pytest.raises(ValueError, match="n_bins must be"):
        cf.pit_histogram("y", samples="ens", n_bins=0)
    with pytest.raises(TypeError, match="seed must be"):
        cf.pit_test("y", samples="ens", seed=1.5)


# ---------------------------------------------------------------------------
# quantile forecasts
# ---------------------------------------------------------------------------
LEVELS = [0.1, 0.25, 0.5, 0.75, 0.9]
QCOLS = {0.1: "q10", 0.25: "q25", 0.5: "q50", 0.75: "q75", 0.9: "q90"}


def quantile_data(seed: int, n: int = 60) -> dict:
    """Rounded Gaussian quantiles: flat stretches (equal quantiles), y on a quantile, y outside."""
    d = forecast_data(seed, n=n)
    for level, col in QCOLS.items():
        d[col] = np.round(d["mu"] + norm.ppf(level) * d["sd"], 0)
    d["y"] = np.round(d["y"], 0)
    d["y"][::6] = d["q50"][::6]
    return d


def quantile_matrix(d: dict) -> np.ndarray:
    return np.column_stack([d[c] for c in QCOLS.values()])


def quantile_crps_oracle(d: dict) -> np.ndarray:
    qs, y, tau = quantile_matrix(d), d["y"][:, None], np.array(LEVELS)[None, :]
    pinball = np.where(y >= qs, tau * (y - qs), (1 - tau) * (qs - y))
    t = np.array(LEVELS)
    share = np.diff(np.concatenate([[0.0], (t[1:] + t[:-1]) / 2, [1.0]]))  # each level's share of (0, 1)
    return 2 * (pinball * share).sum(axis=1)


def quantile_pit_bounds(y: float, qs: np.ndarray) -> tuple[float, float]:
    taus = LEVELS
    if y < qs[0]:
        return 0.0, taus[0]
    if y > qs[-1]:
        return taus[-1], 1.0
    below = [k for k in range(len(qs)) if qs[k] < y]
    if below:
        k = below[-1]
        lo = taus[k] + (taus[k + 1] - taus[k]) * (y - qs[k]) / (qs[k + 1] - qs[k])
    else:
        lo = taus[0]
    above = [k for k in range(len(qs)) if qs[k] > y]
    if above:
        k = above[0]
        hi = taus[k] - (taus[k] - taus[k - 1]) * (qs[k] - y) / (qs[k] - qs[k - 1])
    else:
        hi = taus[-1]
    return lo, hi


def quantile_pit(d: dict, seed: int, keys) -> np.ndarray:
    bounds = np.array([quantile_pit_bounds(y, qs) for y, qs in zip(d["y"], quantile_matrix(d))])
    lo, hi = bounds[:, 0], bounds[:, 1]
    return lo + hash_draws(lo, hi, keys, seed) * (hi - lo)


def test_quantile_pit_oracle_on_hand_cases():
    qs = np.array([0.0, 1.0, 1.0, 2.0, 4.0])
    assert quantile_pit_bounds(-1.0, qs) == (0.0, 0.1)
    assert quantile_pit_bounds(0.0, qs) == (0.1, 0.1)
    assert quantile_pit_bounds(0.5, qs) == pytest.approx((0.175, 0.175))
    assert quantile_pit_bounds(1.0, qs) == (0.25, 0.5)  # flat stretch q25 = q50 = y
    assert quantile_pit_bounds(3.0, qs) == pytest.approx((0.825, 0.825))
    assert quantile_pit_bounds(5.0, qs) == (0.9, 1.0)


def test_quantile_crps_and_pit_match_oracle(constructor):
    d = quantile_data(30)
    metrics = [
        cf.quantile_crps("y", quantiles=QCOLS),
        cf.pit_histogram("y", quantiles=QCOLS, n_bins=4, seed=5),
        cf.pit_test("y", quantiles=QCOLS, seed=5),
    ]
    out = to_pandas(cf.evaluate(constructor(d), *metrics, by="g"))
    assert_close(out["quantile_crps"], grouped(d, quantile_crps_oracle(d)), rtol=1e-12)
    pit = quantile_pit(d, 5, d["g"])
    for row, idx in zip(out.itertuples(index=False), group_dict(d["g"]).values()):
        row = row._asdict()
        freq = [row[f"pit_histogram_bin{k}"] for k in range(4)]
        assert_close(freq, histogram_oracle(pit[idx], 4), rtol=1e-15)
        assert_close([row["pit_test"], row["pit_test_pvalue"]], ks_oracle(pit[idx]), rtol=1e-12)


@pytest.mark.parametrize("seed", [31, 32])
def test_quantile_forms_seeds(constructor, seed):
    not_spark(constructor, "test_quantile_crps_and_pit_match_oracle")
    d = quantile_data(seed, n=50)
    out = to_pandas(
        cf.evaluate(constructor(d), cf.quantile_crps("y", quantiles=QCOLS), cf.pit_test("y", quantiles=QCOLS))
    )
    assert_close(out["quantile_crps"], [quantile_crps_oracle(d).mean()], rtol=1e-12)
    assert_close([out["pit_test"][0], out["pit_test_pvalue"][0]], ks_oracle(quantile_pit(d, 0, None)), rtol=1e-12)


def test_quantile_crps_agrees_with_sklearn_pinball():
    metrics = pytest.importorskip("sklearn.metrics")
    d = quantile_data(33)
    df = pl.DataFrame({k: d[k] for k in ["y", *QCOLS.values()]})
    t = np.array(LEVELS)
    share = np.diff(np.concatenate([[0.0], (t[1:] + t[:-1]) / 2, [1.0]]))
    expected = sum(2 * w * metrics.mean_pinball_loss(d["y"], d[c], alpha=a) for (a, c), w in zip(QCOLS.items(), share))
    assert df.conformal.quantile_crps("y", quantiles=QCOLS) == pytest.approx(expected, rel=1e-12)


def test_crossing_quantiles_are_invalid():
    df = pl.DataFrame({"y": [0.0, 1.0], "a": [0.0, 2.0], "b": [1.0, 1.0]})
    with pytest.raises(ValueError, match=r"quantile columns cross: 'a' \(level 0.1\) is greater than 'b' .* in 1 row"):
        df.conformal.quantile_crps("y", quantiles={0.1: "a", 0.9: "b"}, crossing="invalid")
    with pytest.raises(ValueError, match="quantile columns cross"):
        df.conformal.pit_test("y", quantiles={0.1: "a", 0.9: "b"}, crossing="invalid")
    with pytest.raises(ValueError, match="quantiles must be"):
        cf.quantile_crps("y", quantiles={1.5: "a"})
    with pytest.raises(ValueError, match="not several"):
        cf.crps("y", mean="m", std="s", samples="ens")


# ---------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------
def test_pit_histogram_plot():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from conformal_frames import plots

    d = forecast_data(40, n=200)
    df = pl.DataFrame({k: v for k, v in d.items()})
    ax = plots.pit_histogram(df, y="y", mean="mu", std="sd", n_bins=5)
    heights = [p.get_height() for p in ax.containers[0]]  # the bars
    expected = histogram_oracle(norm.cdf((d["y"] - d["mu"]) / d["sd"]), 5)
    np.testing.assert_allclose(heights, expected, rtol=1e-15)
    table = cf.pit_histogram("y", samples="ens", n_bins=4)
    long = cf.evaluate(df, table, by="g")
    assert "pit_histogram_bin3" in long.columns
    ax = plots.pit_histogram(df.conformal.pit_histogram("y", samples="ens", n_bins=4, by="g"), by="g")
    assert [t.get_text() for t in ax.get_legend().get_texts()][1:-1] == [f"g={g}" for g in sorted(set(d["g"]))]
    with pytest.raises(ValueError, match="missing column"):
        plots.pit_histogram(df)


# ---------------------------------------------------------------------------
# report and CLI
# ---------------------------------------------------------------------------
def _forecast_frame(seed: int = 50) -> pl.DataFrame:
    d = quantile_data(seed, n=120)
    return pl.DataFrame({k: d[k] for k in ["g", "y", "mu", "sd", *QCOLS.values()]})


def test_report_forecast_family():
    df = _forecast_frame()
    rep = df.conformal.report(y="y", quantiles=QCOLS, mean="mu", std="sd", by="g")
    t = rep.frame("forecast")
    assert list(t.columns) == [
        "g", "crps", "pit_test", "pit_test_pvalue", "quantile_crps", "quantile_pit_test", "quantile_pit_test_pvalue",
        "pinball_loss", "wis", "wis_dispersion", "wis_overprediction", "wis_underprediction", "quantile_coverage_mad",
        "n_crossing", "n",
    ]  # fmt: skip
    direct = cf.evaluate(
        df, cf.crps("y", mean="mu", std="sd"), cf.quantile_crps("y", quantiles=QCOLS).alias("q"), cf.pit_test("y", mean="mu", std="sd"), by="g"
    )  # fmt: skip
    # The same metrics in a different query: equal up to summation order (polars'
    # parallel sums depend on the thread count).
    assert t["crps"].to_list() == pytest.approx(direct["crps"].to_list(), rel=1e-12)
    assert t["quantile_crps"].to_list() == pytest.approx(direct["q"].to_list(), rel=1e-12)
    assert t["pit_test_pvalue"].to_list() == pytest.approx(direct["pit_test_pvalue"].to_list(), rel=1e-12)
    assert "Forecast scores per group" in str(rep)
    with_intervals = df.conformal.report(y="y", lo="q10", hi="q90", mean="mu", std="sd", confidence_level=0.8)
    assert with_intervals.summary["families"] == ["intervals", "forecast", "uncertainty_calibration"]


def test_report_forecast_arguments():
    df = _forecast_frame()
    with pytest.raises(ValueError, match="Gaussian forecasts need mean= and std=; missing std="):
        df.conformal.report(y="y", mean="mu")
    with pytest.raises(ValueError, match="forecast metrics need y="):
        df.conformal.report(quantiles=QCOLS)
    with pytest.raises(ValueError, match=r"column 'nope' \(quantiles\[0.5\]=\) not found"):
        df.conformal.report(y="y", quantiles={0.5: "nope"})
    with pytest.raises(ValueError, match="quantiles must be"):
        df.conformal.report(y="y", quantiles={2.0: "q50"})


def test_cli_forecast_options(tmp_path, capsys):
    from conformal_frames import cli

    path = tmp_path / "fc.parquet"
    _forecast_frame().write_parquet(path)
    args = ["report", str(path), "--y", "y", "--quantiles", "0.1=q10,0.25=q25,0.5=q50,0.75=q75,0.9=q90"]
    assert cli.main([*args, "--mean", "mu", "--std", "sd", "--by", "g", "--no-plots", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert "quantile_crps" in out and "pit_test_pvalue" in out
    assert cli.main(["report", str(path), "--y", "y", "--quantiles", "0.1=q10,oops", "--no-plots"]) != 0
    assert "expected LEVEL=COLUMN pairs" in capsys.readouterr().err
    assert cli.main(["report", str(path), "--y", "y", "--std", "sd", "--no-plots"]) != 0
    assert "missing --mean" in capsys.readouterr().err


def test_quantile_calibration_plot():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    pytest.importorskip(
        "conformal_frames.metrics.quantiles", reason="quantile_coverage lands with the quantiles family"
    )
    from conformal_frames import plots

    df = _forecast_frame(51)
    ax = plots.quantile_calibration(df, y="y", quantiles=QCOLS, by="g")
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert "perfect calibration" in lines
    d = quantile_data(51, n=120)
    for g, idx in group_dict(d["g"]).items():
        observed = (d["y"][idx, None] <= quantile_matrix(d)[idx]).mean(axis=0)
        np.testing.assert_allclose(lines[f"g={g}"].get_ydata(), observed, rtol=1e-15)
        np.testing.assert_allclose(lines[f"g={g}"].get_xdata(), LEVELS, rtol=1e-15)
    with pytest.raises(ValueError, match="give both y= and quantiles="):
        plots.quantile_calibration(df, y="y")


@pytest.mark.parametrize("make", ["polars", "pandas"])
def test_missing_member_of_a_list_ensemble_follows_the_invalid_policy(make):
    # a null inside a list ensemble is an invalid row like a NaN member: raise names
    # it, null voids its group only, drop leaves out that row only
    data = {"g": ["A", "A", "B", "B", "B"], "y": [0.0, 1.0, 2.0, 3.0, 1.0]}
    ens = [[0.0, 1.0], [1.0, 2.0], [2.0, None], [2.0, 4.0], [0.0, 2.0]]
    if make == "polars":
        frame = pl.DataFrame({**data, "ens": ens})
    else:
        frame = pd.DataFrame({**data, "ens": [np.array(e, dtype=float) if None not in e else e for e in ens]})
    metrics = [cf.crps("y", samples="ens"), cf.pit_test("y", samples="ens")]
    with pytest.raises(ValueError, match=r"samples column 'ens' has missing members in 1 row"):
        cf.evaluate(frame, *metrics, by="g", invalid="raise")
    nulled = to_pandas(cf.evaluate(frame, *metrics, by="g", invalid="null"))
    assert nulled["n_invalid"].tolist() == [0, 1]
    assert nulled["crps"].isna().tolist() == [False, True]
    dropped = to_pandas(cf.evaluate(frame, *metrics, by="g", invalid="drop"))
    assert dropped["n"].tolist() == [2, 2]
    keep = [0, 1, 3, 4]
    clean = pl.DataFrame({k: [v[i] for i in keep] for k, v in {**data, "ens": ens}.items()})
    expected = to_pandas(cf.evaluate(clean, *metrics, by="g"))
    for col in ("crps", "pit_test", "pit_test_pvalue"):
        assert dropped[col].tolist() == pytest.approx(expected[col].tolist(), rel=1e-12), col
