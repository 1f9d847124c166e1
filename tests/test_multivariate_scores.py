"""Energy and variogram scores of multivariate ensembles: numpy oracle, scoringrules, every backend, both forms."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas

M, D = 4, 3
YS = [f"y{d}" for d in range(D)]
XS = [[f"x{d}_{m}" for m in range(M)] for d in range(D)]
XC = [f"x{m}" for m in range(M)]


def ensembles(seed: int, n: int = 25) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` forecasts: observations ``(n, D)``, members ``(n, M, D)`` with ties, and groups (sizes 1 and 2 included)."""
    rng = np.random.default_rng(seed)
    y = np.round(rng.normal(size=(n, D)), 1)
    x = np.round(y[:, None, :] + rng.normal(size=(n, M, D)), 1)
    x[0, 1] = x[0, 0]  # tied members
    x[1, :, 1] = x[1, :, 0]  # tied dimensions
    x[2] = y[2]  # every member equals the observation
    g = np.concatenate([rng.choice(["a", "b", "c"], n - 3), ["one", "two", "two"]])
    return y, x, g


UW = [f"u{j}" for j in range(M)]


def member_weights(n: int) -> np.ndarray:
    u = np.round(np.random.default_rng(n).uniform(0.0, 2.0, (n, M)), 1)
    u[0] = [1.0, 0.0, 0.0, 1.0]  # zero weights
    return u


def wide(y: np.ndarray, x: np.ndarray, g: np.ndarray) -> dict[str, Any]:
    data: dict[str, Any] = {"g": g, "w": np.round(np.linspace(0.5, 2.0, len(g)), 2)}
    data |= {UW[j]: member_weights(len(g))[:, j] for j in range(M)}
    data |= {YS[d]: y[:, d] for d in range(D)}
    data |= {XS[d][m]: x[:, m, d] for d in range(D) for m in range(M)}
    return data


def long(y: np.ndarray, x: np.ndarray, g: np.ndarray) -> dict[str, Any]:
    """The path form: one row per (forecast, dimension), rows shuffled."""
    n = len(g)
    order = np.random.default_rng(0).permutation(n * D)
    data = {
        "g": np.repeat(g, D),
        "series": np.repeat(np.arange(n) % 3, D),
        "cutoff": np.repeat(np.arange(n) // 3, D),
        "h": np.tile(np.arange(D), n),
        "w": np.repeat(np.round(np.linspace(0.5, 2.0, n), 2), D),
        "y": y.ravel(),
        **{XC[m]: x[:, m, :].ravel() for m in range(M)},
    }
    return {k: np.asarray(v)[order] for k, v in data.items()}


def es_oracle(y: np.ndarray, x: np.ndarray, fair: bool = False) -> np.ndarray:
    err = np.linalg.norm(x - y[:, None, :], axis=2).mean(axis=1)
    spread = np.linalg.norm(x[:, :, None, :] - x[:, None, :, :], axis=3).sum(axis=(1, 2))
    m = x.shape[1]
    return err - 0.5 * spread / (m * (m - 1) if fair else m * m)


def vs_oracle(y: np.ndarray, x: np.ndarray, p: float, w: np.ndarray | None = None, fair: bool = False) -> np.ndarray:
    w = np.ones((D, D)) if w is None else w
    b = np.abs(y[:, :, None] - y[:, None, :]) ** p  # (n, D, D)
    a = np.abs(x[:, :, :, None] - x[:, :, None, :]) ** p  # (n, M, D, D)
    if not fair:
        return (w * (b - a.mean(axis=1)) ** 2).sum(axis=(1, 2))
    m = x.shape[1]
    first = (w * (a - b[:, None]) ** 2).sum(axis=(2, 3)).mean(axis=1)
    second = (w * (a[:, :, None] - a[:, None, :]) ** 2).sum(axis=(1, 2, 3, 4)) / (m * (m - 1))
    return first - 0.5 * second


def es_weighted_oracle(y: np.ndarray, x: np.ndarray, u: np.ndarray, fair: bool = False) -> np.ndarray:
    v = u / u.sum(axis=1, keepdims=True)
    err = (v * np.linalg.norm(x - y[:, None, :], axis=2)).sum(axis=1)
    spread = (v[:, :, None] * v[:, None, :] * np.linalg.norm(x[:, :, None, :] - x[:, None, :, :], axis=3)).sum(
        axis=(1, 2)
    )
    return err - 0.5 * spread / ((1 - (v * v).sum(axis=1)) if fair else 1.0)


def vs_weighted_oracle(y: np.ndarray, x: np.ndarray, u: np.ndarray, p: float, fair: bool = False) -> np.ndarray:
    v = u / u.sum(axis=1, keepdims=True)
    b = np.abs(y[:, :, None] - y[:, None, :]) ** p
    a = np.abs(x[:, :, :, None] - x[:, :, None, :]) ** p  # (n, M, D, D)
    if not fair:
        return ((b - (v[:, :, None, None] * a).sum(axis=1)) ** 2).sum(axis=(1, 2))
    first = (v * ((a - b[:, None]) ** 2).sum(axis=(2, 3))).sum(axis=1)
    pair = ((a[:, :, None] - a[:, None, :]) ** 2).sum(axis=(3, 4))  # (n, M, M)
    second = (v[:, :, None] * v[:, None, :] * pair).sum(axis=(1, 2))
    return first - 0.5 * second / (1 - (v * v).sum(axis=1))


def by_group(values: np.ndarray, g: np.ndarray, w: np.ndarray | None = None) -> list[float]:
    w = np.ones(len(g)) if w is None else w
    return [float(np.sum(values[g == k] * w[g == k]) / np.sum(w[g == k])) for k in np.unique(g)]


@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", [0, 1])
def test_wide_form_equals_the_numpy_oracle(constructor: Any, seed: int) -> None:
    y, x, g = ensembles(seed)
    wts = np.array([[0.0, 1.0, 0.25], [1.0, 0.0, 0.5], [0.25, 0.5, 0.0]])
    metrics = [
        cf.energy_score(YS, XS),
        cf.energy_score(YS, XS, estimator="fair").alias("es_fair"),
        cf.energy_score(YS, XS, weights="w").alias("es_w"),
        cf.variogram_score(YS, XS),
        cf.variogram_score(YS, XS, p=1.0, estimator="fair").alias("vs_fair"),
        cf.variogram_score(YS, XS, p=2.0, pair_weights=wts, weights="w").alias("vs_w"),
        cf.energy_score(YS, XS, member_weights=UW, estimator="fair").alias("es_mw"),
        cf.variogram_score(YS, XS, member_weights=UW, p=1.0).alias("vs_mw"),
    ]
    data = wide(y, x, g)
    out = to_pandas(cf.evaluate(constructor(data), *metrics, by="g"))
    assert list(out["g"]) == sorted(set(g))
    w = np.asarray(data["w"])
    assert_close(out["energy_score"], by_group(es_oracle(y, x), g), what="es")
    assert_close(out["es_fair"], by_group(es_oracle(y, x, fair=True), g), what="es fair")
    assert_close(out["es_w"], by_group(es_oracle(y, x), g, w), what="es weighted")
    assert_close(out["variogram_score"], by_group(vs_oracle(y, x, 0.5), g), what="vs")
    assert_close(out["vs_fair"], by_group(vs_oracle(y, x, 1.0, fair=True), g), what="vs fair")
    assert_close(out["vs_w"], by_group(vs_oracle(y, x, 2.0, wts), g, w), what="vs weighted")
    u = member_weights(len(g))
    assert_close(out["es_mw"], by_group(es_weighted_oracle(y, x, u, fair=True), g), what="es member weights")
    assert_close(out["vs_mw"], by_group(vs_weighted_oracle(y, x, u, 1.0), g), what="vs member weights")


@pytest.mark.spark_cases(seed=-1)  # Spark: test_path_form_weights_and_positions
@pytest.mark.parametrize("seed", [0, 1])
def test_path_form_equals_the_wide_form(constructor: Any, seed: int) -> None:
    y, x, g = ensembles(seed)
    metrics = [
        cf.energy_score("y", XC, path=["series", "cutoff"]),
        cf.energy_score("y", XC, path=["series", "cutoff"], estimator="fair").alias("es_fair"),
        cf.variogram_score("y", XC, path=["series", "cutoff"]),
        cf.variogram_score("y", XC, path=["series", "cutoff"], p=1.0, estimator="fair").alias("vs_fair"),
    ]
    out = to_pandas(cf.evaluate(constructor(long(y, x, g)), *metrics, by="g"))
    assert list(out["g"]) == sorted(set(g))
    assert_close(out["energy_score"], by_group(es_oracle(y, x), g), what="es")
    assert_close(out["es_fair"], by_group(es_oracle(y, x, fair=True), g), what="es fair")
    assert_close(out["variogram_score"], by_group(vs_oracle(y, x, 0.5), g), what="vs")
    assert_close(out["vs_fair"], by_group(vs_oracle(y, x, 1.0, fair=True), g), what="vs fair")
    assert out["n"].tolist() == [int(np.sum(g == k)) * D for k in sorted(set(g))]  # rows, not paths


@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", [0, 1])
def test_path_form_weights_and_positions(constructor: Any, seed: int) -> None:
    y, x, g = ensembles(seed)
    data = long(y, x, g)
    wts = np.array([[0.0, 1.0, 0.25], [0.5, 0.0, 0.5], [0.25, 2.0, 0.0]])  # not symmetric: ordered pairs
    path = ["series", "cutoff"]
    metrics = [
        cf.energy_score("y", XC, path=path, weights="w").alias("es_w"),
        cf.variogram_score("y", XC, path=path, order_by="h", pair_weights=wts, p=1.0).alias("vs_pw"),
        cf.variogram_score("y", XC, path=path, order_by="h", estimator="fair", weights="w").alias("vs_w"),
    ]
    out = to_pandas(cf.evaluate(constructor(data), *metrics, by="g"))
    w = np.round(np.linspace(0.5, 2.0, len(g)), 2)
    assert_close(out["es_w"], by_group(es_oracle(y, x), g, w), what="es weighted")
    assert_close(out["vs_pw"], by_group(vs_oracle(y, x, 1.0, wts), g), what="vs pair weights by position")
    assert_close(out["vs_w"], by_group(vs_oracle(y, x, 0.5, fair=True), g, w), what="vs fair weighted")


LISTS = [f"ens{d}" for d in range(D)]


@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", [0, 1])
def test_wide_form_with_list_columns(constructor: Any, seed: int) -> None:
    y, x, g = ensembles(seed)
    data = wide(y, x, g)
    data |= {LISTS[d]: [list(row) for row in x[:, :, d]] for d in range(D)}
    wts = np.array([[0.0, 1.0, 0.25], [1.0, 0.0, 0.5], [0.25, 0.5, 0.0]])
    metrics = [
        cf.energy_score(YS, LISTS),
        cf.energy_score(YS, LISTS, estimator="fair", weights="w").alias("es_fair_w"),
        cf.variogram_score(YS, LISTS),
        cf.variogram_score(YS, LISTS, p=1.0, pair_weights=wts, estimator="fair", weights="w").alias("vs_fair_w"),
    ]
    if constructor.id in ("duckdb", "pyspark"):  # narwhals explodes one column at a time there
        with pytest.raises(cf.BackendLimitError, match="pass member columns instead"):
            to_pandas(cf.evaluate(constructor(data), *metrics, by="g"))
        return
    out = to_pandas(cf.evaluate(constructor(data), *metrics, by="g"))
    w = np.asarray(data["w"])
    assert_close(out["energy_score"], by_group(es_oracle(y, x), g), what="es")
    assert_close(out["es_fair_w"], by_group(es_oracle(y, x, fair=True), g, w), what="es fair weighted")
    assert_close(out["variogram_score"], by_group(vs_oracle(y, x, 0.5), g), what="vs")
    assert_close(out["vs_fair_w"], by_group(vs_oracle(y, x, 1.0, wts, fair=True), g, w), what="vs fair weighted")


def test_list_columns_bad_input() -> None:
    y, x, g = ensembles(6, n=5)
    data = wide(y, x, g) | {LISTS[d]: [list(row) for row in x[:, :, d]] for d in range(D)}
    data["ens1"][0] = data["ens1"][0][:2]
    data["ens2"][1] = [1.0, None, 2.0, 3.0]
    df = pl.DataFrame(data)
    with pytest.raises(
        cf.InvalidRowsError, match="samples columns 'ens0' and 'ens1' have lists of different lengths in 1 row"
    ):
        df[[0, 2]].conformal.energy_score(YS, LISTS)
    with pytest.raises(cf.InvalidRowsError, match="samples column 'ens2' has missing members in 1 row"):
        df[[1, 2]].conformal.variogram_score(YS, LISTS)
    kept = df.conformal.energy_score(YS, LISTS, invalid="drop")
    assert_close(kept, es_oracle(y[2:], x[2:]).mean())
    lazy = df.lazy().conformal.energy_score(YS, LISTS).collect()
    assert lazy["n_invalid"].item() == 2 and lazy["energy_score"].item() is None
    single = pl.DataFrame({"a": [0.0], "b": [1.0], "la": [[1.0]], "lb": [[2.0]]})
    with pytest.raises(cf.InvalidRowsError, match="single-member ensembles"):
        single.conformal.energy_score(["a", "b"], ["la", "lb"], estimator="fair")
    assert single.conformal.energy_score(["a", "b"], ["la", "lb"]) == pytest.approx(np.sqrt(2.0))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scores_equal_scoringrules(seed: int) -> None:
    sr = pytest.importorskip("scoringrules")
    y, x, g = ensembles(seed)
    df = pl.DataFrame(wide(y, x, g))
    paths = pl.DataFrame(long(y, x, g))
    wts = np.random.default_rng(seed).random((D, D))
    for ours, theirs in (("plain", "nrg"), ("fair", "fair")):
        es = np.mean(sr.es_ensemble(y, x, estimator=theirs, backend="numpy"))
        assert_close(df.conformal.energy_score(YS, XS, estimator=ours), es)
        assert_close(paths.conformal.energy_score("y", XC, path=["series", "cutoff"], estimator=ours), es)
        for p in (0.5, 1.0, 2.0):
            vs = np.mean(sr.vs_ensemble(y, x, p=p, estimator=theirs, backend="numpy"))
            assert_close(df.conformal.variogram_score(YS, XS, p=p, estimator=ours), vs)
            assert_close(paths.conformal.variogram_score("y", XC, path=["series", "cutoff"], p=p, estimator=ours), vs)
        vs_w = np.mean(sr.vs_ensemble(y, x, wts, p=0.5, estimator=theirs, backend="numpy"))
        assert_close(df.conformal.variogram_score(YS, XS, pair_weights=wts, estimator=ours), vs_w)
        u = member_weights(len(g))
        es_u = np.mean(sr.es_ensemble(y, x, ens_w=u, estimator=theirs, backend="numpy"))
        assert_close(df.conformal.energy_score(YS, XS, member_weights=UW, estimator=ours), es_u)
        vs_u = np.mean(sr.vs_ensemble(y, x, wts, p=1.0, ens_w=u, estimator=theirs, backend="numpy"))
        assert_close(
            df.conformal.variogram_score(YS, XS, p=1.0, pair_weights=wts, member_weights=UW, estimator=ours), vs_u
        )


def test_one_dimension_is_the_ensemble_crps() -> None:
    y, x, _ = ensembles(3)
    df = pl.DataFrame({"y": y[:, 0], **{f"m{j}": x[:, j, 0] for j in range(M)}})
    members = [f"m{j}" for j in range(M)]
    for estimator in ("plain", "fair"):
        es = df.conformal.energy_score(["y"], [members], estimator=estimator)
        assert_close(es, df.conformal.crps("y", samples=members, estimator=estimator))
    assert df.conformal.variogram_score(["y"], [members]) == 0.0
    lists = df.with_columns(pl.concat_list(members).alias("ens"))
    assert_close(lists.conformal.energy_score(["y"], ["ens"]), df.conformal.crps("y", samples=members))
    assert lists.conformal.variogram_score(["y"], ["ens"]) == 0.0


def test_wide_form_is_mergeable_and_counts_repeat_rows() -> None:
    y, x, g = ensembles(4)
    df = pl.DataFrame(wide(y, x, g)).with_columns(k=pl.Series(np.arange(len(g)) % 3))
    metrics = [cf.energy_score(YS, XS), cf.variogram_score(YS, XS, estimator="fair")]
    stats = pd.concat([to_pandas(cf.summarize(part, *metrics)) for part in (df[:10], df[10:])])
    whole = cf.evaluate(df, *metrics)
    merged = cf.finalize(pl.from_pandas(stats), *metrics)
    for name in ("energy_score", "variogram_score"):
        assert_close(merged[name], whole[name], rtol=1e-12)
    repeated = pl.DataFrame(df.to_pandas().loc[lambda d: d.index.repeat(d["k"])])
    counted = cf.evaluate(
        df, cf.energy_score(YS, XS, counts="k"), cf.variogram_score(YS, XS, estimator="fair", counts="k")
    )
    again = cf.evaluate(repeated, *metrics)
    for name in ("energy_score", "variogram_score"):
        assert_close(counted[name], again[name])
    with pytest.raises(ValueError, match="summarize"):
        cf.summarize(pl.DataFrame(long(y, x, g)), cf.energy_score("y", XC, path="cutoff"))


def test_bad_input() -> None:
    y, x, g = ensembles(5, n=6)
    df = pl.DataFrame(wide(y, x, g)).with_columns(
        pl.when(pl.col("g") == "two").then(None).otherwise(pl.col("x1_2")).alias("x1_2")
    )
    with pytest.raises(
        cf.InvalidRowsError, match=r"column 'x1_2' has missing \(null/NaN\) or infinite values in 2 rows"
    ):
        df.conformal.energy_score(YS, XS)
    lazy = to_pandas(df.lazy().conformal.variogram_score(YS, XS, by="g"))
    assert lazy.set_index("g").loc["two", "n_invalid"] == 2 and np.isnan(
        lazy.set_index("g").loc["two", "variogram_score"]
    )
    paths = pl.DataFrame(long(y, x, g)).with_columns(
        pl.when(pl.col("h") == 0).then(None).otherwise(pl.col("cutoff")).alias("cutoff")
    )
    with pytest.raises(cf.InvalidRowsError, match=r"column 'cutoff' \(path=\) has missing values in 6 rows"):
        paths.conformal.energy_score("y", XC, path=["series", "cutoff"])
    with pytest.raises(ValueError, match="one list of member columns \\(or one list column\\) per dimension of y"):
        cf.energy_score(YS, XC)
    with pytest.raises(ValueError, match="all of one length"):
        cf.energy_score(["a", "b"], [["a1", "a2"], ["b1"]])
    with pytest.raises(ValueError, match="pass path="):
        cf.energy_score("y", XC)
    with pytest.raises(ValueError, match="path= is for the path form"):
        cf.variogram_score(YS, XS, path="p")
    with pytest.raises(ValueError, match="member_weights= is read in the wide form with member columns"):
        cf.energy_score("y", XC, path="p", member_weights=UW)
    with pytest.raises(ValueError, match="one column per member: 4 members, 2 columns"):
        cf.energy_score(YS, XS, member_weights=["u0", "u1"])
    skewed = pl.DataFrame(wide(*ensembles(5, n=4))).with_columns(
        pl.lit(0.0).alias("u1"), pl.lit(0.0).alias("u2"), pl.lit(0.0).alias("u3")
    )
    with pytest.raises(
        cf.InvalidRowsError,
        match=r"member_weights put all the weight on one member \(estimator='fair' needs two\) in 4 rows",
    ):
        skewed.conformal.energy_score(YS, XS, member_weights=UW, estimator="fair")
    negative = skewed.with_columns(pl.lit(-1.0).alias("u3"))
    with pytest.raises(cf.InvalidRowsError, match="member_weights column 'u3' has negative values in 4 rows"):
        negative.conformal.variogram_score(YS, XS, member_weights=UW)
    with pytest.raises(ValueError, match="order_by= orders the rows of a path"):
        cf.energy_score(YS, XS, order_by="h")
    with pytest.raises(ValueError, match="pair_weights= in the path form needs order_by="):
        cf.variogram_score("y", XC, path="p", pair_weights=np.ones((3, 3)))
    paths = pl.DataFrame(long(y, x, g))
    path = ["series", "cutoff"]
    uneven = paths.with_columns(pl.when(pl.col("h") == 0).then(9.0).otherwise(pl.col("w")).alias("w"))
    with pytest.raises(
        cf.InvalidRowsError,
        match=r"column 'w' \(weights=\) is not constant within a path \(a path has one weight\) in 18 rows",
    ):
        uneven.conformal.energy_score("y", XC, path=path, weights="w")
    twice = paths.with_columns(pl.when(pl.col("h") == 2).then(1).otherwise(pl.col("h")).alias("h"))
    with pytest.raises(
        cf.InvalidRowsError, match=r"column 'h' \(order_by=\) has repeated values within a path in 12 rows"
    ):
        twice.conformal.variogram_score("y", XC, path=path, order_by="h")
    with pytest.raises(
        cf.InvalidRowsError, match=r"a path has more rows than pair_weights has dimensions \(2\) in 18 rows"
    ):
        paths.conformal.variogram_score("y", XC, path=path, order_by="h", pair_weights=np.ones((2, 2)))
    with pytest.raises(ValueError, match="needs at least 2 members"):
        cf.energy_score(["a"], [["a1"]], estimator="fair")
    with pytest.raises(ValueError, match="p must be a positive number"):
        cf.variogram_score(YS, XS, p=0)
    with pytest.raises(ValueError, match="3 x 3 matrix"):
        cf.variogram_score(YS, XS, pair_weights=np.ones((2, 2)))
    with pytest.raises(ValueError, match="non-negative finite"):
        cf.variogram_score(YS, XS, pair_weights=-np.ones((3, 3)))
    with pytest.raises(TypeError, match="a list column of members is read in the wide form only"):
        cf.energy_score("y", "ens", path="p")


def test_path_form_with_a_null_group_key() -> None:
    import duckdb

    y, x, g = ensembles(0)
    df = pl.DataFrame(long(y, x, g)).with_columns(
        pl.when(pl.col("g") == "a").then(None).otherwise(pl.col("g")).alias("g")
    )
    metrics = [
        cf.energy_score("y", XC, path=["series", "cutoff"]),
        cf.variogram_score("y", XC, path=["series", "cutoff"]),
    ]
    for native in (df, duckdb.from_arrow(df.to_arrow())):
        out = to_pandas(cf.evaluate(native, *metrics, by="g"))
        null = out[out["g"].isna()]
        assert len(null) == 1  # the null key is a group of its own (joined back on it)
        assert_close(null["energy_score"], [es_oracle(y, x)[g == "a"].mean()])
        assert_close(null["variogram_score"], [vs_oracle(y, x, 0.5)[g == "a"].mean()])
