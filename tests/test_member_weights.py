"""member_weights= on crps and the PIT metrics: weighted ensembles (properscoring's weighted crps_ensemble)."""

from __future__ import annotations

import numpy as np
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas

M = 5
MEMBERS = [f"x{i}" for i in range(M)]
WEIGHTS = [f"w{i}" for i in range(M)]


def weighted_data(seed: int, n: int = 30) -> dict[str, list]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, M))
    x[: n // 3, 1] = x[: n // 3, 2]  # tied members
    w = rng.uniform(0.0, 2.0, size=(n, M))
    w[::4, 0] = 0.0  # zero weights
    y = rng.normal(size=n)
    data: dict[str, list] = {"g": [f"g{i % 3}" for i in range(n)], "y": y.tolist()}
    data |= {"ens": x.tolist(), "mw": w.tolist()}
    data |= {c: x[:, i].tolist() for i, c in enumerate(MEMBERS)} | {c: w[:, i].tolist() for i, c in enumerate(WEIGHTS)}
    return data


def crps_oracle(y: np.ndarray, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The CRPS of the weighted empirical distribution, by the pair sum (O(m^2), independent)."""
    p = w / w.sum(axis=1, keepdims=True)
    first = (p * np.abs(x - y[:, None])).sum(axis=1)
    pairs = (p[:, :, None] * p[:, None, :] * np.abs(x[:, :, None] - x[:, None, :])).sum(axis=(1, 2))
    return first - pairs / 2


def test_weighted_crps_matches_oracle(constructor) -> None:
    data = weighted_data(0)
    metrics = [cf.crps("y", samples=MEMBERS, member_weights=WEIGHTS).alias("cols")]
    if constructor.id not in ("duckdb", "pyspark"):  # two list columns cannot be exploded together there
        metrics.append(cf.crps("y", samples="ens", member_weights="mw").alias("lists"))
    out = to_pandas(cf.evaluate(constructor(data), *metrics, by="g"))
    arr = {k: np.asarray(v) for k, v in data.items()}
    per_row = crps_oracle(arr["y"], np.asarray(data["ens"]), np.asarray(data["mw"]))
    for i, g in enumerate(sorted(set(data["g"]))):
        expected = per_row[arr["g"] == g].mean()
        for m in metrics:
            assert_close(out[m.output_name].iloc[i], expected, rtol=1e-12, what=f"{m.output_name} {g}")


def test_weighted_crps_matches_properscoring() -> None:
    ps = pytest.importorskip("properscoring")
    import polars as pl

    for seed in (1, 2):
        data = weighted_data(seed, n=25)
        df = pl.DataFrame(data)
        x, w = np.asarray(data["ens"]), np.asarray(data["mw"])
        expected = ps.crps_ensemble(np.asarray(data["y"]), x, weights=w).mean()
        assert_close(df.conformal.crps("y", samples="ens", member_weights="mw"), expected, rtol=1e-12)
        assert_close(df.conformal.crps("y", samples=MEMBERS, member_weights=WEIGHTS), expected, rtol=1e-12)
    # equal weights: the unweighted CRPS
    df = pl.DataFrame(weighted_data(3)).with_columns(*[pl.lit(1.0).alias(c) for c in WEIGHTS])
    assert_close(
        df.conformal.crps("y", samples=MEMBERS, member_weights=WEIGHTS), df.conformal.crps("y", samples=MEMBERS)
    )


def test_weighted_pit_is_the_weighted_cdf(eager_constructor) -> None:
    from scipy.stats import kstest

    data = weighted_data(4, n=40)
    for c in MEMBERS:  # no member equal to y, no ties: the PIT is F(y), not randomized
        data[c] = [v + 1e-9 * i for i, v in enumerate(data[c])]
    x, w, y = (
        np.column_stack([data[c] for c in MEMBERS]),
        np.column_stack([data[c] for c in WEIGHTS]),
        np.asarray(data["y"]),
    )
    pit = (w * (x < y[:, None])).sum(axis=1) / w.sum(axis=1)
    res = cf.conformal(eager_constructor(data)).pit_test("y", samples=MEMBERS, member_weights=WEIGHTS)
    ref = kstest(pit, "uniform", method="asymp")
    assert_close([res.statistic, res.pvalue], [ref.statistic, ref.pvalue], rtol=1e-12)
    hist = to_pandas(
        cf.conformal(eager_constructor(data)).pit_histogram("y", samples=MEMBERS, member_weights=WEIGHTS, n_bins=4)
    )
    b = np.clip(np.floor(pit * 4), 0, 3).astype(int)
    assert_close(hist["frequency"], np.bincount(b, minlength=4) / len(pit), rtol=1e-15)


def test_member_weights_errors() -> None:
    import polars as pl

    with pytest.raises(ValueError, match=r"member_weights= weighs the members of an ensemble: it needs samples="):
        cf.crps("y", mean="m", std="s", member_weights="w")
    with pytest.raises(TypeError, match=r"member_weights= must have the form of samples="):
        cf.crps("y", samples="ens", member_weights=WEIGHTS)
    with pytest.raises(ValueError, match=r"one weight column per member: 5 members, 2 weight columns"):
        cf.crps("y", samples=MEMBERS, member_weights=WEIGHTS[:2])
    with pytest.raises(ValueError, match=r"estimator='fair' is for equally weighted members"):
        cf.crps("y", samples=MEMBERS, member_weights=WEIGHTS, estimator="fair")
    df = pl.DataFrame({"y": [0.0, 1.0], "ens": [[0.0, 1.0], [1.0, 2.0]], "mw": [[1.0, -1.0], [0.0, 0.0]]})
    with pytest.raises(cf.InvalidRowsError, match=r"member_weights column 'mw' has negative weights in 1 row"):
        df.conformal.crps("y", samples="ens", member_weights="mw")
    short = df.with_columns(pl.Series("mw", [[1.0], [1.0, 1.0]]))
    with pytest.raises(cf.InvalidRowsError, match=r"member_weights column 'mw' has lists of another length than 'ens'"):
        short.conformal.crps("y", samples="ens", member_weights="mw")
    zero = df.with_columns(pl.Series("mw", [[1.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(cf.InvalidRowsError, match=r"member_weights column 'mw' has a zero total weight in 1 row"):
        zero.conformal.crps("y", samples="ens", member_weights="mw")
