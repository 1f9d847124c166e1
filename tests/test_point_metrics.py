"""Point and scaled errors, log scores, whole-path coverage, skill: numpy oracles, peers, bad input."""

from __future__ import annotations

from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy.stats import norm

import conformal_frames as cf
from helpers import assert_close, group_dict, to_pandas

RTOL = 1e-9


def point_data(seed: int, n: int = 60) -> dict[str, Any]:
    """Forecast rows with ties, a zero-error row, groups of one and two rows; y never 0."""
    rng = np.random.default_rng(seed)
    y = np.round(rng.normal(size=n) * 3, 1)
    y[y == 0.0] = 0.5
    f = np.round(y + rng.normal(size=n), 1)
    f[0] = y[0]  # a zero error
    f[1] = -y[1]  # |y| + |f| != 0, error 2|y|
    groups = rng.choice(["a", "b", "c"], size=n - 3)
    return {
        "y": y,
        "f": f,
        "w": np.round(rng.gamma(2.0, 1.0, size=n), 1) + 0.1,
        "s": np.round(rng.gamma(2.0, 1.0, size=n), 2) + 0.05,
        "yb": (rng.random(n) < 0.5).astype(np.int64),
        "p": np.round(rng.random(n), 2),
        "mu": np.round(rng.normal(size=n), 1),
        "sd": np.round(rng.gamma(2.0, 0.5, size=n), 1) + 0.1,
        "g": np.concatenate([groups, ["one", "two", "two"]]),
    }


def _clip(p: np.ndarray) -> np.ndarray:
    eps = np.finfo(np.float64).eps
    return np.clip(p, eps, 1 - eps)


#: numpy oracles: (rows of one group, weights) -> value
ORACLES = {
    "mae": lambda d, w: np.average(np.abs(d["f"] - d["y"]), weights=w),
    "mse": lambda d, w: np.average((d["f"] - d["y"]) ** 2, weights=w),
    "rmse": lambda d, w: np.sqrt(np.average((d["f"] - d["y"]) ** 2, weights=w)),
    "bias": lambda d, w: np.average(d["f"] - d["y"], weights=w),
    "mape": lambda d, w: np.average(np.abs(d["f"] - d["y"]) / np.abs(d["y"]), weights=w),
    "smape": lambda d, w: np.average(
        np.where(
            np.abs(d["y"]) + np.abs(d["f"]) == 0,
            0.0,
            2
            * np.abs(d["f"] - d["y"])
            / np.where(np.abs(d["y"]) + np.abs(d["f"]) == 0, 1.0, np.abs(d["y"]) + np.abs(d["f"])),
        ),
        weights=w,
    ),
    "mase": lambda d, w: np.average(np.abs(d["f"] - d["y"]) / d["s"], weights=w),
    "rmsse": lambda d, w: np.sqrt(np.average((d["f"] - d["y"]) ** 2 / d["s"], weights=w)),
    "log_loss": lambda d, w: np.average(
        -(d["yb"] * np.log(_clip(d["p"])) + (1 - d["yb"]) * np.log(1 - _clip(d["p"]))), weights=w
    ),
    "log_score": lambda d, w: np.average(-norm.logpdf(d["y"], d["mu"], d["sd"]), weights=w),
}


def metrics(weights: str | None = None) -> list[cf.Metric]:
    kw = {"weights": weights}
    return [
        cf.mae("y", "f", **kw),
        cf.mse("y", "f", **kw),
        cf.rmse("y", "f", **kw),
        cf.bias("y", "f", **kw),
        cf.mape("y", "f", **kw),
        cf.smape("y", "f", **kw),
        cf.mase("y", "f", scale="s", **kw),
        cf.rmsse("y", "f", scale="s", **kw),
        cf.log_loss("yb", "p", **kw),
        cf.log_score("y", mean="mu", std="sd", **kw),
    ]


@pytest.mark.spark_cases(weighted=True)
@pytest.mark.parametrize("weighted", [False, True])
def test_point_metrics_equal_the_numpy_oracle(constructor: Any, weighted: bool) -> None:
    data = point_data(0)
    data["p"][:3] = [0.0, 1.0, 1.0]  # clipped probabilities
    data["yb"][:3] = [1, 0, 1]
    out = to_pandas(cf.evaluate(constructor(data), *metrics("w" if weighted else None), by="g"))
    frame = {k: np.asarray(v) for k, v in data.items()}
    groups = group_dict(frame["g"])
    assert list(out["g"]) == sorted(groups)
    for name, oracle in ORACLES.items():
        expected = [
            oracle({k: v[i] for k, v in frame.items()}, frame["w"][i] if weighted else None) for i in groups.values()
        ]
        assert_close(out[name], expected, rtol=RTOL, what=name)
    assert out["n"].tolist() == [len(i) for i in groups.values()]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_point_metrics_equal_scikit_learn(seed: int) -> None:
    metrics_ = pytest.importorskip("sklearn.metrics")
    d = point_data(seed)
    df = pl.DataFrame(d)
    for w in (None, "w"):
        sw = None if w is None else d["w"]
        kw = {"sample_weight": sw}
        assert_close(df.conformal.mae("y", "f", weights=w), metrics_.mean_absolute_error(d["y"], d["f"], **kw))
        assert_close(df.conformal.mse("y", "f", weights=w), metrics_.mean_squared_error(d["y"], d["f"], **kw))
        assert_close(df.conformal.rmse("y", "f", weights=w), metrics_.root_mean_squared_error(d["y"], d["f"], **kw))
        ours = df.conformal.mape("y", "f", weights=w)
        assert_close(ours, metrics_.mean_absolute_percentage_error(d["y"], d["f"], **kw))
        p = np.where(np.arange(len(d["p"])) < 2, [0.0, 1.0] + [0.5] * (len(d["p"]) - 2), d["p"])
        frame = df.with_columns(pl.Series("p", p))
        assert_close(frame.conformal.log_loss("yb", "p", weights=w), metrics_.log_loss(d["yb"], p, **kw), rtol=1e-12)


def test_log_loss_clips_as_scikit_learn_float32() -> None:
    metrics_ = pytest.importorskip("sklearn.metrics")
    y, p = np.array([1, 0, 1, 0]), np.array([0.0, 1.0, 0.3, 0.2], dtype=np.float32)
    df = pl.DataFrame({"y": y, "p": p})
    assert_close(df.conformal.log_loss("y", "p"), metrics_.log_loss(y, p), rtol=1e-6)
    assert df.conformal.log_loss("y", "p") < 40  # clipped, finite


def test_log_score_is_exact_far_in_the_tail() -> None:
    df = pl.DataFrame({"g": ["a", "b"], "y": [40.0, -1e3], "mu": [0.0, 0.0], "sd": [1.0, 2.0]})
    with np.errstate(divide="ignore"):
        assert np.isinf(-np.log(norm.pdf(40.0)))  # the log of the density overflows
    expected = [800 + 0.5 * np.log(2 * np.pi), 0.5 * 500**2 + np.log(2.0) + 0.5 * np.log(2 * np.pi)]
    out = cf.evaluate(df, cf.log_score("y", mean="mu", std="sd"), by="g")
    assert_close(out["log_score"], expected, rtol=1e-14)
    assert_close(out["log_score"], -norm.logpdf(df["y"], df["mu"], df["sd"]), rtol=1e-14)


def test_smape_counts_zero_when_both_are_zero_and_is_twice_utilsforecast() -> None:
    df = pl.DataFrame({"y": [0.0, 1.0, 4.0], "f": [0.0, 3.0, 4.0]})
    assert df.conformal.smape("y", "f") == pytest.approx((0 + 1.0 + 0) / 3, rel=1e-15)


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
def test_mape_on_a_zero_is_an_invalid_row_never_inf() -> None:
    df = pl.DataFrame({"g": ["a", "a", "b"], "y": [0.0, 2.0, 1.0], "f": [1.0, 1.0, 2.0]})
    with pytest.raises(cf.InvalidRowsError, match=r"column 'y' \(y\) is 0 in 1 row.*mape"):
        df.conformal.mape("y", "f")
    lazy = to_pandas(df.lazy().conformal.mape("y", "f", by="g"))
    assert lazy["mape"].isna().tolist() == [True, False] and lazy["n_invalid"].tolist() == [1, 0]
    dropped = to_pandas(df.conformal.mape("y", "f", by="g", invalid="drop"))
    assert dropped["mape"].tolist() == [0.5, 1.0] and dropped["n_dropped"].tolist() == [1, 0]


@pytest.mark.parametrize("bad", [None, float("nan"), float("inf")])
def test_missing_values_are_invalid_rows(bad: float | None) -> None:
    df = pd.DataFrame({"y": [1.0, 2.0, 3.0], "f": [1.0, bad, 2.0]})
    for metric in metrics():
        if metric.output_name in ("log_loss", "log_score"):
            continue
        with pytest.raises(cf.InvalidRowsError, match=r"column 'f' has missing \(null/NaN\) or infinite values"):
            cf.evaluate(df.assign(s=1.0), metric)


@pytest.mark.parametrize("scale", [0.0, -1.0])
def test_zero_or_negative_scales_are_invalid_rows(scale: float) -> None:
    df = pl.DataFrame({"g": ["a", "a", "b"], "y": [1.0, 2.0, 1.0], "f": [1.5, 2.0, 2.0], "s": [1.0, 1.0, scale]})
    for metric in (cf.mase("y", "f", scale="s"), cf.rmsse("y", "f", scale="s")):
        with pytest.raises(
            cf.InvalidRowsError, match=r"scale column 's' \(scale=\) has zero or negative values in 1 row"
        ):
            cf.evaluate(df, metric)
        out = to_pandas(cf.evaluate(df.lazy(), metric, by="g"))
        assert out["n_invalid"].tolist() == [0, 1]
        assert out[metric.output_name].isna().tolist() == [False, True]


def test_log_scores_refuse_bad_inputs() -> None:
    df = pl.DataFrame({"y": [1, 2], "p": [0.5, 1.5], "mu": [0.0, 0.0], "sd": [1.0, 0.0]})
    with pytest.raises(cf.InvalidRowsError, match="labels other than 0 and 1"):
        df.conformal.log_loss("y", "p")
    with pytest.raises(cf.InvalidRowsError, match=r"values outside \[0, 1\]"):
        df.with_columns(pl.lit(1).alias("y")).conformal.log_loss("y", "p")
    with pytest.raises(cf.InvalidRowsError, match="std must be > 0"):
        df.conformal.log_score("y", mean="mu", std="sd")


# ---------------------------------------------------------------------------
# naive_scale, MASE, RMSSE, scaled pinball and CRPS
# ---------------------------------------------------------------------------
def series_data(seed: int, n_series: int = 4, season: int = 1) -> tuple[dict[str, Any], dict[str, Any]]:
    rng = np.random.default_rng(seed)
    train: dict[str, list[Any]] = {"series": [], "t": [], "y": []}
    test: dict[str, list[Any]] = {"series": [], "t": [], "y": [], "f": [], "q10": [], "q50": [], "q90": []}
    for k in range(n_series):
        m = 3 + 2 * k
        y = np.round(np.cumsum(rng.normal(size=m + 3)) + 10, 1)
        train["series"] += [f"s{k}"] * m
        train["t"] += list(range(m))
        train["y"] += list(y[:m])
        f = np.round(y[m:] + rng.normal(size=3), 1)
        test["series"] += [f"s{k}"] * 3
        test["t"] += list(range(m, m + 3))
        test["y"] += list(y[m:])
        test["f"] += list(f)
        test["q10"] += list(f - 1.3)
        test["q50"] += list(f)
        test["q90"] += list(f + 1.2)
    order = rng.permutation(len(train["t"]))  # unordered time
    shuffled = {c: [v[i] for i in order] for c, v in train.items()}
    return shuffled, test


def _naive_oracle(train: dict[str, Any], season: int) -> dict[str, tuple[float, float]]:
    out = {}
    s, t, y = (np.asarray(train[c]) for c in ("series", "t", "y"))
    for name in sorted(set(s)):
        yy = y[s == name][np.argsort(t[s == name])]
        d = yy[season:] - yy[:-season]
        out[name] = (np.mean(np.abs(d)), np.mean(d**2))
    return out


@pytest.mark.spark_cases(season=2)
@pytest.mark.parametrize("season", [1, 2])
def test_naive_scale_equals_the_numpy_oracle(constructor: Any, season: int) -> None:
    train, _ = series_data(0)
    out = to_pandas(cf.naive_scale(constructor(train), "y", by="series", order_by="t", season=season))
    oracle = _naive_oracle(train, season)
    assert list(out["series"]) == sorted(oracle)
    assert_close(out["naive_mae"], [v[0] for v in oracle.values()], rtol=RTOL)
    assert_close(out["naive_mse"], [v[1] for v in oracle.values()], rtol=RTOL)
    assert out["n"].tolist() == [3, 5, 7, 9]


def test_naive_scale_bad_input() -> None:
    df = pl.DataFrame({"s": ["a", "a", "a", "b"], "t": [1, 1, 2, 1], "y": [1.0, 2.0, 3.0, None]})
    with pytest.raises(cf.InvalidRowsError, match=r"repeats a time point of its series in 1 row"):
        cf.naive_scale(df.fill_null(0.0), "y", by="s", order_by="t")
    with pytest.raises(cf.InvalidRowsError, match=r"column 'y' has missing \(null/NaN\) or infinite values in 1 row"):
        cf.naive_scale(df.filter(pl.col("s") == "b"), "y", by="s", order_by="t")
    out = to_pandas(cf.naive_scale(df.lazy(), "y", by="s", order_by="t"))
    assert out["n_invalid"].tolist() == [1, 1] and out["naive_mae"].isna().all()
    one = to_pandas(cf.naive_scale(df.filter(pl.col("s") == "b").fill_null(1.0), "y", by="s", order_by="t"))
    assert one["naive_mae"].isna().all() and one["n"].tolist() == [1]  # one row: no change, no scale
    with pytest.raises(ValueError, match="naive_scale needs by="):
        cf.naive_scale(df, "y", by=None, order_by="t")  # type: ignore[arg-type]


def _scaled_frames(seed: int, season: int = 1) -> tuple[pl.DataFrame, dict[str, Any], dict[str, Any]]:
    train, test = series_data(seed)
    scales = cf.naive_scale(pl.DataFrame(train), "y", by="series", order_by="t", season=season)
    return pl.DataFrame(test).join(scales.drop("n"), on="series"), train, test


@pytest.mark.parametrize("seed", [0, 1])
def test_scaled_errors_equal_utilsforecast(seed: int) -> None:
    losses = pytest.importorskip("utilsforecast.losses")
    for season in (1, 2):
        frame, train, test = _scaled_frames(seed, season)
        uf_test = pd.DataFrame(test).rename(columns={"series": "unique_id", "t": "ds"})
        uf_train = (
            pd.DataFrame(train).rename(columns={"series": "unique_id", "t": "ds"}).sort_values(["unique_id", "ds"])
        )
        ours = to_pandas(
            cf.evaluate(
                frame,
                cf.mase("y", "f", scale="naive_mae"),
                cf.rmsse("y", "f", scale="naive_mse"),
                cf.scaled_pinball("y", quantiles={0.1: "q10"}, scale="naive_mae"),
                cf.scaled_crps("y", quantiles={0.1: "q10", 0.5: "q50", 0.9: "q90"}),
                by="series",
            )
        )
        kw = {"seasonality": season, "train_df": uf_train}
        assert_close(ours["mase"], losses.mase(uf_test, ["f"], **kw)["f"], rtol=RTOL)
        assert_close(ours["rmsse"], losses.rmsse(uf_test, ["f"], **kw)["f"], rtol=RTOL)
        sql = losses.scaled_quantile_loss(uf_test, {"f": "q10"}, q=0.1, **kw)
        assert_close(ours["scaled_pinball"], sql["f"], rtol=RTOL)
        crps = losses.scaled_crps(uf_test, {"f": ["q10", "q50", "q90"]}, quantiles=np.array([0.1, 0.5, 0.9]))
        assert_close(ours["scaled_crps"], crps["f"], rtol=RTOL)


@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", [0, 1])
def test_scaled_errors_equal_the_numpy_oracle(constructor: Any, seed: int) -> None:
    frame, _, _ = _scaled_frames(seed)
    data = frame.with_columns(pl.col("series").alias("g")).to_dict(as_series=False)
    q = {0.1: "q10", 0.5: "q50", 0.9: "q90"}
    ours = to_pandas(
        cf.evaluate(
            constructor(data),
            cf.scaled_pinball("y", quantiles=q, scale="naive_mae"),
            cf.scaled_crps("y", quantiles=q),
            cf.mase("y", "f", scale="naive_mae"),
            by="g",
        )
    )
    d = {k: np.asarray(v) for k, v in data.items()}
    e = d["y"][:, None] - np.stack([d["q10"], d["q50"], d["q90"]], axis=1)
    tau = np.array([0.1, 0.5, 0.9])
    pin = np.mean(np.maximum(tau * e, (tau - 1) * e), axis=1)
    groups = group_dict(d["g"])
    assert_close(ours["scaled_pinball"], [np.mean(pin[i] / d["naive_mae"][i]) for i in groups.values()], rtol=RTOL)
    assert_close(ours["scaled_crps"], [2 * pin[i].sum() / np.abs(d["y"][i]).sum() for i in groups.values()], rtol=RTOL)


def test_scan_parquet_evaluation_stays_lazy(tmp_path: Any) -> None:
    frame, _, _ = _scaled_frames(0)
    frame = frame.with_columns(
        (pl.col("t") - pl.col("t").min().over("series")).alias("horizon"), pl.lit(0).alias("cutoff")
    )
    path = tmp_path / "fc.parquet"
    frame.write_parquet(path)
    lazy = pl.scan_parquet(path).conformal.evaluate(
        cf.mase("y", "f", scale="naive_mae"),
        cf.path_coverage("y", "q10", "q90", path=["series", "cutoff"]),
        by=["series", "horizon"],
    )
    assert isinstance(lazy, pl.LazyFrame)
    out = lazy.collect()
    assert out.height == 12 and out["path_coverage_n_single"].to_list() == [1] * 12


# ---------------------------------------------------------------------------
# whole-path coverage
# ---------------------------------------------------------------------------
def path_data(seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    rows: dict[str, list[Any]] = {"g": [], "series": [], "cutoff": [], "h": [], "y": [], "lo": [], "hi": []}
    for g, n_paths in (("a", 12), ("b", 5), ("one", 1)):
        for p in range(n_paths):
            length = 1 if g == "one" else int(rng.integers(1, 4))
            for h in range(length):
                y = float(np.round(rng.normal(), 1))
                rows["g"].append(g)
                rows["series"].append(f"s{p % 3}")
                rows["cutoff"].append(p // 3)
                rows["h"].append(h)
                rows["y"].append(y)
                rows["lo"].append(-1.2)
                rows["hi"].append(1.0 if rng.random() < 0.5 or y < -1.2 else y)  # on the bound: covered
    return rows


def _path_oracle(
    data: dict[str, Any], path: tuple[str, ...] = ("series", "cutoff")
) -> dict[str, tuple[float, int, int]]:
    df = pd.DataFrame(data)
    df["cov"] = (df["lo"] <= df["y"]) & (df["y"] <= df["hi"])
    per = df.groupby(["g", *path]).agg(cov=("cov", "min"), size=("cov", "size")).reset_index()
    return {g: (float(part["cov"].mean()), len(part), int((part["size"] == 1).sum())) for g, part in per.groupby("g")}


@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", [0, 1])
def test_path_coverage_equals_the_numpy_oracle(constructor: Any, seed: int) -> None:
    data = path_data(seed)
    out = to_pandas(
        cf.evaluate(constructor(data), cf.path_coverage("y", "lo", "hi", path=["series", "cutoff"]), by="g")
    )
    oracle = _path_oracle(data)
    assert list(out["g"]) == sorted(oracle)
    assert_close(out["path_coverage"], [v[0] for v in oracle.values()], rtol=1e-12)
    assert out["path_coverage_n_paths"].tolist() == [v[1] for v in oracle.values()]
    assert out["path_coverage_n_single"].tolist() == [v[2] for v in oracle.values()]
    z = norm.ppf(0.975)
    k, m = np.array([round(v[0] * v[1]) for v in oracle.values()]), np.array([v[1] for v in oracle.values()])
    center, half = (k + z * z / 2) / (m + z * z), z / (m + z * z) * np.sqrt(k * (m - k) / m + z * z / 4)
    low, high = np.clip(center - half, 0, 1), np.clip(center + half, 0, 1)
    assert_close(out["path_coverage_ci_low"], low, rtol=1e-9, atol=1e-15)
    assert_close(out["path_coverage_ci_high"], high, rtol=1e-9, atol=1e-15)


def test_path_coverage_ungrouped_and_with_a_path_key() -> None:
    data = path_data(2)
    df = pl.DataFrame(data)
    whole = df.with_columns(pl.col("g").alias("g0"), pl.lit("x").alias("g"))
    expected = _path_oracle(whole.to_dict(as_series=False), ("g0", "series", "cutoff"))["x"][0]
    assert df.conformal.path_coverage("y", "lo", "hi", path=["g", "series", "cutoff"]) == pytest.approx(expected)
    # a by= key inside the path: the rest of the path within each group
    by_series = to_pandas(df.conformal.path_coverage("y", "lo", "hi", path=["series", "cutoff", "g"], by="series"))
    for s, row in by_series.set_index("series").iterrows():
        part = df.filter(pl.col("series") == s)
        sub = part.with_columns(pl.col("g").alias("g0"), pl.lit("x").alias("g")).to_dict(as_series=False)
        expected = _path_oracle(sub, ("g0", "cutoff"))["x"]
        assert row["path_coverage_n_paths"] == expected[1]
        assert row["path_coverage"] == pytest.approx(expected[0], rel=1e-12)


def test_path_coverage_bad_input() -> None:
    df = pl.DataFrame({"p": ["a", None, "b"], "y": [1.0, 2.0, 3.0], "lo": [0.0, 0.0, 0.0], "hi": [2.0, 2.0, 2.0]})
    with pytest.raises(cf.InvalidRowsError, match=r"column 'p' \(path=\) has missing values"):
        df.conformal.path_coverage("y", "lo", "hi", path="p")
    out = df.conformal.path_coverage("y", "lo", "hi", path="p", by=None, invalid="drop")
    assert out == 0.5
    with pytest.raises(TypeError, match="path_coverage has no weighted version"):
        cf.path_coverage("y", "lo", "hi", path="p", weights="w")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="path must be a list of distinct column names"):
        cf.path_coverage("y", "lo", "hi", path=3)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# skill
# ---------------------------------------------------------------------------
def skill_data(seed: int) -> dict[str, Any]:
    d = point_data(seed)
    rng = np.random.default_rng(seed + 100)
    d["naive"] = np.round(d["y"] + rng.normal(size=len(d["y"])) * 2, 1)
    return d


@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", [0, 1])
def test_skill_score_equals_the_numpy_oracle(constructor: Any, seed: int) -> None:
    data = skill_data(seed)
    metric = cf.skill_score(cf.mse("y", "f"), cf.mse("y", "naive"))
    out = to_pandas(cf.evaluate(constructor(data), metric, by="g"))
    d = {k: np.asarray(v) for k, v in data.items()}
    expected = [
        1 - np.mean((d["f"][i] - d["y"][i]) ** 2) / np.mean((d["naive"][i] - d["y"][i]) ** 2)
        for i in group_dict(d["g"]).values()
    ]
    assert_close(out["mse_skill"], expected, rtol=RTOL)


def test_skill_score_bootstrap_shares_the_replicates_of_bootstrap_difference() -> None:
    df = pl.DataFrame(skill_data(3))
    a, b = cf.mae("y", "f"), cf.mae("y", "naive")
    skill = cf.evaluate(df, cf.skill_score(a, b, n_resamples=200, seed=4))
    diff = cf.evaluate(df, cf.bootstrap_difference(a, b, n_resamples=200, seed=4))
    mae_a, mae_b = df.conformal.mae("y", "f"), df.conformal.mae("y", "naive")
    assert skill["mae_skill"].item() == pytest.approx(1 - mae_a / mae_b, rel=1e-12)
    assert diff["mae_difference"].item() == pytest.approx(mae_a - mae_b, rel=1e-12)
    # paired: a reference whose errors are twice the forecast's has skill 1/2 in every replicate
    twice = df.with_columns((pl.col("y") + 2 * (pl.col("f") - pl.col("y"))).alias("naive"))
    paired = cf.evaluate(twice, cf.skill_score(a, b, n_resamples=50, seed=4))
    assert paired.row(0)[:3] == pytest.approx((0.5, 0.5, 0.5), rel=1e-12)
    low, high = skill["mae_skill_ci_low"].item(), skill["mae_skill_ci_high"].item()
    assert low < skill["mae_skill"].item() < high
    again = cf.evaluate(df.lazy(), cf.skill_score(a, b, n_resamples=200, seed=4)).collect()
    assert again["mae_skill_ci_low"].item() == pytest.approx(low, rel=1e-12)
    with pytest.raises(TypeError, match="skill_score compares one score"):
        cf.skill_score(cf.mae("y", "f"), cf.mse("y", "naive"))


def test_relative_skill_equals_the_pairwise_geometric_mean() -> None:
    rng = np.random.default_rng(5)
    models = ["a", "b", "c", "base"]
    rows = []
    for h in (1, 2):
        y = rng.normal(size=6)
        for k, m in enumerate(models):
            rows += [{"h": h, "i": i, "m": m, "y": v, "f": v + rng.normal() * (k + 1)} for i, v in enumerate(y)]
    df = pl.DataFrame(rows)
    out = to_pandas(cf.relative_skill(df, cf.mae("y", "f"), model="m", baseline="base", by="h"))
    for _, part in out.groupby("h"):
        s = dict(zip(part["m"], part["mae"]))
        # scoringutils: theta_i = geometric mean over the models but the baseline of S_i / S_j
        for m in models:
            theta = np.exp(np.mean([np.log(s[m] / s[j]) for j in models if j != "base"]))
            row = part[part["m"] == m].iloc[0]
            assert row["relative_skill"] == pytest.approx(theta, rel=1e-12)
            assert row["scaled_relative_skill"] == pytest.approx(s[m] / s["base"], rel=1e-12)
    plain = to_pandas(cf.relative_skill(df.lazy(), cf.mae("y", "f"), model="m", by="h"))
    first = plain[plain["h"] == 1]
    gm = np.exp(np.mean(np.log(first["mae"])))
    assert_close(first["relative_skill"], first["mae"] / gm, rtol=1e-12)
    assert "scaled_relative_skill" not in plain


def test_relative_skill_bad_input() -> None:
    df = pl.DataFrame({"h": [1, 1, 2], "i": [0, 0, 0], "m": ["a", "base", "a"], "y": [1.0] * 3, "f": [2.0, 3.0, 2.0]})
    with pytest.raises(
        ValueError, match=r"baseline 'nope' is not a value of the model column 'm'; models: \['a', 'base'\]"
    ):
        cf.relative_skill(df, cf.mae("y", "f"), model="m", baseline="nope")
    out = to_pandas(cf.relative_skill(df, cf.mae("y", "f"), model="m", baseline="base", by="h"))
    assert out["scaled_relative_skill"].isna().tolist() == [False, False, True]  # h = 2 has no baseline
    with pytest.raises(ValueError, match="is also a by= key"):
        cf.relative_skill(df, cf.mae("y", "f"), model="m", by="m")
    with pytest.raises(TypeError, match="relative_skill has no weighted version"):
        cf.relative_skill(df, cf.mae("y", "f"), model="m", weights="w")  # type: ignore[call-arg]
    zero = df.with_columns(pl.col("y").alias("f"))
    assert to_pandas(cf.relative_skill(zero, cf.mae("y", "f"), model="m"))["relative_skill"].isna().all()
    lazy = nw.from_native(cf.relative_skill(df.lazy(), cf.mae("y", "f"), model="m", baseline="nope"))
    assert lazy.collect()["scaled_relative_skill"].is_null().all()


# ---------------------------------------------------------------------------
# report and CLI
# ---------------------------------------------------------------------------
def test_report_adds_point_errors_and_skill() -> None:
    df = pl.DataFrame(skill_data(6))
    rep = df.conformal.report(y="y", point="f", baseline="naive", by="g")
    table = rep.frame("forecast")
    direct = df.conformal.evaluate(
        cf.mae("y", "f"),
        cf.rmse("y", "f"),
        cf.bias("y", "f"),
        cf.smape("y", "f"),
        cf.skill_score(cf.mae("y", "f"), cf.mae("y", "naive")),
        by="g",
    )
    for c in ("mae", "rmse", "bias", "smape", "mae_skill"):
        assert_close(table[c], direct[c], rtol=1e-12, what=c)
    assert rep.columns["point"] == "f" and rep.columns["baseline"] == "naive"
    only = df.conformal.report(y="y", point="f").frame("forecast")
    assert "mae_skill" not in only.columns and "mae" in only.columns
    with pytest.raises(
        ValueError, match=r"baseline= is the baseline's point forecast, compared with point=; missing point="
    ):
        df.conformal.report(y="y", baseline="naive")


def test_cli_point_and_baseline(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from conformal_frames import cli

    path = tmp_path / "fc.parquet"
    df = pl.DataFrame(skill_data(7))
    df.write_parquet(path)
    args = ["report", str(path), "--y", "y", "--point", "f", "--baseline", "naive", "--by", "g", "--format", "json"]
    assert cli.main(args) == 0
    assert "mae_skill" in capsys.readouterr().out
    assert cli.main(["report", str(path), "--y", "y", "--baseline", "naive"]) == cli.EXIT_USAGE
    assert "--baseline is the baseline's point forecast" in capsys.readouterr().err
