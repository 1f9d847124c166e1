"""kupiec_test / christoffersen_test from a 0/1 miss column, and Christoffersen's pi_01, pi_11."""

from __future__ import annotations

import numpy as np
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas


def backtest_data(seed: int, n: int = 60) -> dict[str, list]:
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    lo, hi = np.full(n, -1.2), np.full(n, 1.2)
    t = rng.permutation(n)  # rows in any order
    miss = ((y < lo) | (y > hi)).astype(int)
    return {"g": [f"g{i % 2}" for i in range(n)], "t": t.tolist(), "y": y.tolist(), "lo": lo.tolist(),
            "hi": hi.tolist(), "miss": miss.tolist()}  # fmt: skip


def pi_oracle(miss: np.ndarray) -> tuple[float, float]:
    prev, cur = miss[:-1], miss[1:]
    n01, n00 = np.sum((prev == 0) & (cur == 1)), np.sum((prev == 0) & (cur == 0))
    n11, n10 = np.sum((prev == 1) & (cur == 1)), np.sum((prev == 1) & (cur == 0))
    return n01 / (n00 + n01) if n00 + n01 else np.nan, n11 / (n10 + n11) if n10 + n11 else np.nan


def test_miss_column_equals_the_interval(constructor) -> None:
    data = backtest_data(0)
    frame = constructor(data)
    ns = cf.conformal(frame)
    cols = ["christoffersen_test", "christoffersen_test_pvalue", "christoffersen_test_statistic_cc"]
    a = to_pandas(ns.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by="t", by="g"))
    b = to_pandas(ns.christoffersen_test(miss="miss", confidence_level=0.9, order_by="t", by="g"))
    for c in [*cols, "christoffersen_test_pi_01", "christoffersen_test_pi_11"]:
        assert_close(b[c], a[c], rtol=1e-12, what=c)
    ku_a = to_pandas(ns.kupiec_test("y", "lo", "hi", confidence_level=0.9, by="g"))
    ku_b = to_pandas(ns.kupiec_test(miss="miss", confidence_level=0.9, by="g"))
    assert_close(ku_b["kupiec_test"], ku_a["kupiec_test"], rtol=1e-12)
    arr = {k: np.asarray(v) for k, v in data.items()}
    for i, g in enumerate(sorted(set(data["g"]))):
        rows = arr["g"] == g
        miss = arr["miss"][rows][np.argsort(arr["t"][rows])]
        assert_close([b["christoffersen_test_pi_01"][i], b["christoffersen_test_pi_11"][i]], list(pi_oracle(miss)))


@pytest.mark.parametrize("seed", [1, 2])
def test_pi_oracle_seeds_and_booleans(eager_constructor, seed: int) -> None:
    data = backtest_data(seed, n=40 + seed)
    data["flag"] = [bool(v) for v in data["miss"]]
    res = cf.conformal(eager_constructor(data)).christoffersen_test(miss="flag", confidence_level=0.9, order_by="t")
    arr = {k: np.asarray(v) for k, v in data.items()}
    miss = arr["miss"][np.argsort(arr["t"])]
    assert_close([res.pi_01, res.pi_11], list(pi_oracle(miss)))
    ref = cf.conformal(eager_constructor(data)).christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by="t")
    assert_close([res.statistic, res.pvalue, res.pvalue_cc], [ref.statistic, ref.pvalue, ref.pvalue_cc], rtol=1e-12)


def test_miss_errors() -> None:
    import polars as pl

    with pytest.raises(ValueError, match=r"give either y, lo, hi .* or miss="):
        cf.kupiec_test("y", "lo", "hi", miss="m", confidence_level=0.9)
    with pytest.raises(ValueError, match=r"give y, lo and hi .*, or miss="):
        cf.christoffersen_test("y", confidence_level=0.9, order_by="t")
    with pytest.raises(TypeError, match=r"miss must be a column name"):
        cf.kupiec_test(miss=1, confidence_level=0.9)  # type: ignore[arg-type]
    df = pl.DataFrame({"t": [1, 2, 3], "m": [0.0, 2.0, 1.0]})
    with pytest.raises(cf.InvalidRowsError, match=r"column 'm' \(miss=\) has values other than 0 and 1 in 1 row"):
        df.conformal.kupiec_test(miss="m", confidence_level=0.9)
    lazy = df.lazy().conformal.christoffersen_test(miss="m", confidence_level=0.9, order_by="t").collect()
    assert lazy["n_invalid"].to_list() == [1]
    one = pl.DataFrame({"t": [1], "m": [1]}).conformal.christoffersen_test(miss="m", confidence_level=0.9, order_by="t")
    assert np.isnan(one.pi_01) and np.isnan(one.pi_11)
