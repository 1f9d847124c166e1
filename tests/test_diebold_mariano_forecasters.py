"""Diebold-Mariano as forecasters run it: the HLN correction, loss columns and per-row scores, pooled series."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy.stats import norm
from scipy.stats import t as student

import conformal_frames as cf
from conformal_frames.errors import BackendLimitError
from helpers import assert_close, to_pandas


def dm_oracle(d: np.ndarray, h: int, small_sample: str | None = "hln") -> tuple[float, float]:
    """DM from its definition (``1/n`` autocovariances up to lag ``h - 1``), HLN factor and Student-t p-value."""
    n = len(d)
    c = d - d.mean()
    gammas = [np.sum(c[k:] * c[: n - k]) / n for k in range(min(h, n))]
    v = gammas[0] + 2 * sum(gammas[1:])
    v = v if v > 0 else gammas[0]
    if v <= 0:
        return np.nan, np.nan
    dm = d.mean() / np.sqrt(v / n)
    if small_sample is None:
        return dm, 2 * norm.sf(abs(dm))
    if h >= n:  # HLN's factor (n - h)(n - h + 1) / n^2: 0 at h = n, n + 1, meaningless beyond
        return np.nan, np.nan
    dm *= np.sqrt((n + 1 - 2 * h + h * (h - 1) / n) / n)
    return dm, 2 * student.sf(abs(dm), n - 1) if n > 1 else np.nan


def _lazy_sql(constructor: Any) -> bool:
    return bool(constructor.lazy) and constructor.id != "polars[lazy]"


# the dieboldmariano package's own test cases (dm_test with harvey_correction=True, Student-t p-value)
PEER_P1 = [0.3675225224615024, 0.5450608127223211, 0.22044990720021074, 0.8688743471040006, 0.6072512228948467]
PEER_P1 += [0.8582283746501538, 0.41662295816718187, 0.3812100211114714, 0.7185133356116706, 0.30827323290318875]
PEER_P1 += [0.4297093624074402, 0.8615974488577858, 0.7240514514808826, 0.3450839595261038, 0.19675301374013598]
PEER_P2 = [0.12794132529988733, 0.3679643204341153, 0.768715420996091, 0.09972248964114683, 0.27197653636654284]
PEER_P2 += [0.28797629010039505, 0.9160213458582482, 0.6112628048698798, 0.5452873235576241, 0.06785907231746158]
PEER_P2 += [0.6072666485541124, 0.6241575753989782, 0.39998026828867217, 0.19895665605941748, 0.8094941215215619]


def test_hln_matches_the_dieboldmariano_package(constructor: Any) -> None:
    first = {"t": list(range(6)), "y": [0.0] * 6, "a": [0.0, 1, 2, 3, 4, 5], "b": [0.0, 2, 3, 3, 5, 6]}
    second = {"t": list(range(15)), "y": [0.0] * 15, "a": PEER_P1, "b": PEER_P2}
    cases = [(first, "squared", 1, -2.4905, 0.05513), (second, "absolute", 3, 1.2109, 2 * (1 - 0.877))]
    for data, loss, h, stat, p in cases:
        test = cf.diebold_mariano_test("y", "a", "b", order_by="t", loss=loss, horizon=h)  # type: ignore[arg-type]
        if _lazy_sql(constructor):
            with pytest.raises(BackendLimitError, match="small_sample=None"):
                to_pandas(cf.evaluate(constructor(data), test))
            return
        out = to_pandas(cf.evaluate(constructor(data), test))
        assert out["diebold_mariano_test"].item() == pytest.approx(stat, abs=5e-5)
        assert out["diebold_mariano_test_pvalue"].item() == pytest.approx(p, abs=5e-4)


def _panel(seed: int, n_series: int = 3, n_time: int = 14) -> dict[str, list[Any]]:
    """Series x horizons x time, one missing point, groups of size 1 and 2 when grouped by series and horizon."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list[Any]] = {k: [] for k in ("series", "h", "t", "y", "a", "b", "sd")}
    for s in range(n_series):
        for h in (1, 2, 3):
            for t in range(n_time if s else (1 if h == 1 else 2 if h == 2 else n_time)):
                if s == 2 and t == 5:
                    continue
                y = float(np.round(rng.normal(), 2))
                for k, v in zip(rows, [s, h, t, y, y + rng.normal(), y + 1.3 * rng.normal(), 1.0 + 0.2 * s]):
                    rows[k].append(v)
    return rows


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.spark_cases(seed=0)
def test_hln_matches_numpy_grouped(constructor: Any, seed: int) -> None:
    data = _panel(seed)
    test = cf.diebold_mariano_test("y", "a", "b", order_by="t", horizon="h", loss="absolute")
    if _lazy_sql(constructor):
        with pytest.raises(BackendLimitError):
            to_pandas(cf.evaluate(constructor(data), test, by=["series", "h"]))
        test = cf.diebold_mariano_test("y", "a", "b", order_by="t", horizon="h", loss="absolute", small_sample=None)
    out = to_pandas(cf.evaluate(constructor(data), test, by=["series", "h"]))
    arr = {k: np.asarray(v) for k, v in data.items()}
    for row in out.itertuples():
        rows = (arr["series"] == row.series) & (arr["h"] == row.h)
        d = np.abs(arr["y"][rows] - arr["a"][rows]) - np.abs(arr["y"][rows] - arr["b"][rows])
        expected = dm_oracle(d, int(row.h), test.small_sample)
        assert_close([row.diebold_mariano_test, row.diebold_mariano_test_pvalue], expected, rtol=1e-10)
    sizes = {(s, h): int(np.sum((arr["series"] == s) & (arr["h"] == h))) for s, h in zip(out["series"], out["h"])}
    no_test = sum(n == 1 or (test.small_sample == "hln" and h >= n) for (_, h), n in sizes.items())
    assert out["diebold_mariano_test"].isna().sum() == no_test >= 1  # the group of one row (and h >= n under HLN)


@pytest.mark.parametrize("seed", [3, 4])
@pytest.mark.spark_cases(seed=3)
def test_series_pooled_per_time_point(constructor: Any, seed: int) -> None:
    data = _panel(seed)
    small = None if _lazy_sql(constructor) else "hln"
    test = cf.diebold_mariano_test("y", "a", "b", order_by="t", horizon="h", series="series", small_sample=small)  # type: ignore[arg-type]
    out = to_pandas(cf.evaluate(constructor(data), test, by="h"))
    frame = pl.DataFrame(data).with_columns(d=(pl.col("y") - pl.col("a")) ** 2 - (pl.col("y") - pl.col("b")) ** 2)
    for row in out.itertuples():
        per_t = frame.filter(pl.col("h") == row.h).group_by("t").agg(pl.col("d").mean()).sort("t")
        expected = dm_oracle(per_t["d"].to_numpy(), int(row.h), small)
        assert_close([row.diebold_mariano_test, row.diebold_mariano_test_pvalue], expected, rtol=1e-10)
        assert row.n == frame.filter(pl.col("h") == row.h).height  # n: the rows
    # one series: the same as no pooling
    one = {k: [v for v, s in zip(vals, data["series"]) if s == 1] for k, vals in data.items()}
    pooled = to_pandas(cf.evaluate(constructor(one), test, by="h"))
    plain = cf.diebold_mariano_test("y", "a", "b", order_by="t", horizon="h", small_sample=small)  # type: ignore[arg-type]
    assert_close(
        pooled["diebold_mariano_test"], to_pandas(cf.evaluate(constructor(one), plain, by="h"))["diebold_mariano_test"]
    )


def test_series_repeated_time_is_invalid() -> None:
    df = pl.DataFrame({"s": [0, 0, 1], "t": [1, 1, 1], "y": [1.0, 2, 3], "a": [1.0, 2, 2], "b": [0.0, 1, 3]})
    with pytest.raises(cf.InvalidRowsError, match="repeated values within a group and series"):
        cf.evaluate(df, cf.diebold_mariano_test("y", "a", "b", order_by="t", series="s"))


def _wis(y: np.ndarray, q: dict[float, np.ndarray]) -> np.ndarray:
    """WIS from its quantile definition: 2 / (K + 1/2) * sum of pinball losses... with K the intervals."""
    levels = sorted(q)
    pinball = sum(np.maximum(tau * (y - q[tau]), (tau - 1) * (y - q[tau])) for tau in levels)
    return 2 * pinball / len(levels)


def test_loss_column_and_per_row_scores(eager_constructor: Any) -> None:
    rng = np.random.default_rng(9)
    n = 30
    y = rng.normal(size=n)
    data: dict[str, Any] = {"t": np.arange(n), "y": y, "sd": np.full(n, 1.2)}
    for m, shift in (("a", 0.0), ("b", 0.4)):
        mid = y + rng.normal(size=n) + shift
        data |= {f"{m}10": mid - 1.3, f"{m}50": mid, f"{m}90": mid + 1.3}
    wis_a = _wis(y, {0.1: data["a10"], 0.5: data["a50"], 0.9: data["a90"]})
    wis_b = _wis(y, {0.1: data["b10"], 0.5: data["b50"], 0.9: data["b90"]})
    z = (y - data["a50"]) / 1.2
    crps_a = 1.2 * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))
    z = (y - data["b50"]) / 1.2
    crps_b = 1.2 * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))
    data |= {"wis_a": wis_a, "wis_b": wis_b, "crps_a": crps_a, "crps_b": crps_b}
    frame = cf.conformal(eager_constructor(data))
    qa = {0.1: "a10", 0.5: "a50", 0.9: "a90"}
    qb = {0.1: "b10", 0.5: "b50", 0.9: "b90"}
    pairs = [
        (cf.wis("y", quantiles=qa), cf.wis("y", quantiles=qb), wis_a - wis_b),
        (cf.crps("y", mean="a50", std="sd"), cf.crps("y", mean="b50", std="sd"), crps_a - crps_b),
        (cf.mae("y", "a50"), cf.mae("y", "b50"), np.abs(y - data["a50"]) - np.abs(y - data["b50"])),
    ]
    for a, b, d in pairs:
        res = frame.diebold_mariano_test(None, a, b, order_by="t", horizon=2)
        assert_close([res.statistic, res.pvalue], dm_oracle(d, 2), rtol=1e-9, what=a.output_name)
    column = frame.diebold_mariano_test(None, "wis_a", "wis_b", order_by="t", loss="column", horizon=2)
    assert_close([column.statistic, column.pvalue], dm_oracle(wis_a - wis_b, 2), rtol=1e-9)
    pinball = frame.diebold_mariano_test(
        None, cf.pinball_loss("y", quantiles=qa), cf.pinball_loss("y", quantiles=qb), order_by="t"
    )
    pa = sum(np.maximum(t * (y - data[c]), (t - 1) * (y - data[c])) for t, c in qa.items()) / 3
    pb = sum(np.maximum(t * (y - data[c]), (t - 1) * (y - data[c])) for t, c in qb.items()) / 3
    assert_close([pinball.statistic, pinball.pvalue], dm_oracle(pa - pb, 1), rtol=1e-9)


def test_loss_arguments_are_checked() -> None:
    df = pl.DataFrame({"t": [1, 2, 3], "y": [1.0, 2, 3], "a": [1.0, 2, 2], "b": [0.0, 1, 3], "w": [1.0] * 3})
    with pytest.raises(TypeError, match="two columns or two score metrics"):
        cf.diebold_mariano_test("y", cf.mae("y", "a"), "b", order_by="t")
    with pytest.raises(ValueError, match="loss='absolute' is for columns"):
        cf.diebold_mariano_test(None, cf.mae("y", "a"), cf.mae("y", "b"), order_by="t", loss="absolute")
    with pytest.raises(TypeError, match="needs y"):
        cf.diebold_mariano_test(None, "a", "b", order_by="t")
    with pytest.raises(TypeError, match="score metric"):
        cf.diebold_mariano_test(None, cf.ks_test("y", "a"), cf.ks_test("y", "b"), order_by="t")
    with pytest.raises(TypeError, match="not a mean of per-row values without weights"):
        cf.evaluate(df, cf.diebold_mariano_test(None, cf.mae("y", "a", weights="w"), cf.mae("y", "b"), order_by="t"))
    with pytest.raises(ValueError, match="small_sample"):
        cf.diebold_mariano_test("y", "a", "b", order_by="t", small_sample="bartlett")  # type: ignore[arg-type]
    bad = df.with_columns(pl.lit(None, pl.Float64).alias("b"))
    with pytest.raises(cf.InvalidRowsError, match="'b'"):
        cf.evaluate(bad, cf.diebold_mariano_test(None, "a", "b", order_by="t", loss="column"))


def test_diebold_mariano_hln_has_no_test_when_horizon_reaches_the_rows() -> None:
    """HLN's factor (n - h)(n - h + 1) / n^2 is 0 at h = n, n + 1 and meaningless beyond: no statistic."""
    data = {"t": [0, 1, 2, 3], "y": [0.2, -0.5, -0.4, -2.4], "f1": [1.1, 0.1, -0.6, -2.0], "f2": [0.4, -0.9, 0.3, -2.6]}
    for h in (4, 5, 6):
        out = cf.evaluate(pl.DataFrame(data), cf.diebold_mariano_test("y", "f1", "f2", order_by="t", horizon=h))
        assert out["diebold_mariano_test"].is_null().all() and out["diebold_mariano_test_pvalue"].is_null().all(), h
    out = cf.evaluate(pl.DataFrame(data), cf.diebold_mariano_test("y", "f1", "f2", order_by="t", horizon=3))
    assert out["diebold_mariano_test"].is_not_null().all()
