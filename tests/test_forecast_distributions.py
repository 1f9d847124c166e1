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
        pytest.skip(f"seed/size loop on the cheaper backends; pyspark covered by {test}[pyspark]")


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
    frame = lazy_constructor({"y": [0.0, 1.0, 2.0], "ens": [[1.0], [], [2.0, 4.0]]})
    out = to_pandas(cf.evaluate(frame, cf.crps("y", samples="ens"), invalid="drop"))
    assert out["crps"].tolist() == pytest.approx([(1.0 + 0.5) / 2]) and out["n_dropped"].tolist() == [1]
    out = to_pandas(cf.evaluate(frame, cf.crps("y", samples="ens")))
    assert out["crps"].isna().all() and out["n_invalid"].tolist() == [1]


def test_null_members_make_the_score_null():
    df = pl.DataFrame({"y": [0.0, 1.0], "ens": [[1.0, None], [2.0, 3.0]], "g": ["a", "b"]})
    assert math.isnan(df.conformal.crps("y", samples="ens"))
    assert df.conformal.crps("y", samples="ens", by="g")["crps"].to_list() == [None, pytest.approx(1.5 - 0.25)]


def test_member_columns_are_checked():
    df = pl.DataFrame({"y": [0.0, 1.0], "x0": [1.0, None], "x1": [2.0, 3.0]})
    with pytest.raises(ValueError, match=r"column 'x0' has missing \(null/NaN\) or infinite values in 1 row"):
        df.conformal.crps("y", samples=["x0", "x1"])


def test_bad_parameters():
    with pytest.raises(ValueError, match="give a forecast"):
        cf.crps("y")
    with pytest.raises(ValueError, match="std= is missing"):
        cf.crps("y", mean="mu")
    with pytest.raises(ValueError, match="not both"):
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
