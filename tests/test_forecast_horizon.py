"""diebold_mariano_test(horizon=<column>): one horizon per group, as one call per horizon."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

import conformal_frames as cf
from helpers import assert_close, to_pandas


def dm_oracle(y: np.ndarray, a: np.ndarray, b: np.ndarray, h: int) -> tuple[float, float]:
    d = (y - a) ** 2 - (y - b) ** 2
    n = len(d)
    c = d - d.mean()
    gamma = [np.sum(c[k:] * c[: n - k]) / n for k in range(h)]
    v = gamma[0] + 2 * sum(gamma[1:])
    v = v if v > 0 else gamma[0]
    z = d.mean() / np.sqrt(v / n)
    return z, min(1.0, 2 * norm.sf(abs(z)))


def horizon_data(seed: int, n: int = 30) -> dict[str, list]:
    rng = np.random.default_rng(seed)
    out: dict[str, list] = {k: [] for k in ("t", "horizon", "model", "y", "a", "b")}
    for h in (1, 2, 4):
        for model in ("m1", "m2"):
            e = rng.normal(size=n + 3)
            y = rng.normal(size=n)
            out["t"] += list(range(n))
            out["horizon"] += [h] * n
            out["model"] += [model] * n
            out["y"] += y.tolist()
            out["a"] += (y + np.convolve(e, [1.0, 0.7, 0.4, 0.2], "valid")[:n]).tolist()
            out["b"] += (y + 1.1 * rng.normal(size=n)).tolist()
    return out


def test_horizon_column_equals_one_call_per_horizon(constructor) -> None:
    data = horizon_data(0)
    frame = constructor(data)
    out = to_pandas(
        cf.conformal(frame).diebold_mariano_test(
            "y", "a", "b", order_by="t", small_sample=None, horizon="horizon", by=["model", "horizon"]
        )
    )
    assert len(out) == 6
    arr = {k: np.asarray(v) for k, v in data.items()}
    for _, row in out.iterrows():
        rows = (arr["model"] == row["model"]) & (arr["horizon"] == row["horizon"])
        expected = dm_oracle(arr["y"][rows], arr["a"][rows], arr["b"][rows], int(row["horizon"]))
        assert_close([row["diebold_mariano_test"], row["diebold_mariano_test_pvalue"]], list(expected), rtol=1e-10)
    # a horizon column that is not a by= key: constant within each (model, horizon) group, read from the rows
    data["h"] = list(data["horizon"])
    by_col = to_pandas(
        cf.conformal(constructor(data)).diebold_mariano_test(
            "y", "a", "b", order_by="t", small_sample=None, horizon="h", by=["model", "horizon"]
        )
    )
    assert_close(by_col["diebold_mariano_test"], out["diebold_mariano_test"], rtol=1e-10)


def test_horizon_one_call_per_horizon_eager(eager_constructor) -> None:
    data = horizon_data(1)
    arr = {k: np.asarray(v) for k, v in data.items()}
    out = to_pandas(
        cf.conformal(eager_constructor(data)).diebold_mariano_test(
            "y", "a", "b", order_by="t", small_sample=None, horizon="horizon", by=["model", "horizon"]
        )
    )
    for _, row in out.iterrows():
        rows = (arr["model"] == row["model"]) & (arr["horizon"] == row["horizon"])
        sub = {k: v[rows].tolist() for k, v in arr.items()}
        one = cf.conformal(eager_constructor(sub)).diebold_mariano_test(
            "y", "a", "b", order_by="t", small_sample=None, horizon=int(row["horizon"])
        )
        assert_close([row["diebold_mariano_test"], row["diebold_mariano_test_pvalue"]], [one.statistic, one.pvalue])


def test_horizon_errors() -> None:
    import polars as pl

    with pytest.raises(TypeError, match=r"^horizon must be a positive integer or the name of a column"):
        cf.diebold_mariano_test("y", "a", "b", order_by="t", small_sample=None, horizon=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^horizon must be a positive integer"):
        cf.diebold_mariano_test("y", "a", "b", order_by="t", small_sample=None, horizon=0)
    df = pl.DataFrame({"t": range(6), "y": [1.0, 2, 3, 2, 1, 2], "a": [1.1, 2.2, 2.9, 2.1, 1.2, 1.8],
                       "b": [1.3, 1.6, 3.1, 2.4, 0.9, 2.3], "h": [1, 1, 1, 2, 2, 2]})  # fmt: skip
    with pytest.raises(cf.InvalidRowsError, match=r"column 'h' \(horizon=\) is not constant within a group, in 6 rows"):
        df.conformal.diebold_mariano_test("y", "a", "b", order_by="t", small_sample=None, horizon="h")
    with pytest.raises(cf.InvalidRowsError, match=r"column 'h' \(horizon=\) has values that are not integers >= 1"):
        df.with_columns(h=pl.lit(0.5)).conformal.diebold_mariano_test(
            "y", "a", "b", order_by="t", small_sample=None, horizon="h"
        )
    with pytest.raises(cf.ColumnNotFoundError):
        df.conformal.diebold_mariano_test("y", "a", "b", order_by="t", small_sample=None, horizon="nope")
