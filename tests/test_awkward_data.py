"""Large and awkward data: many tiny groups, one huge group, many keys, dtypes.

Every test runs on every backend of the ``constructor`` fixture and compares
with the numpy oracles (or with the same data as float64), to 1e-12.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import conformal_frames as cf
import oracle
import oracle_calibration as ocal
from helpers import assert_close, to_pandas

RTOL = 1e-12
ATOL = 1e-14


def _data(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    center = rng.normal(size=n) * 3
    w = np.round(rng.gamma(2.0, 1.0, size=n), 1)
    lo = np.round(center - w / 2, 2)
    y = np.round(center + rng.normal(size=n) * 1.5, 2)
    s = np.round(rng.random(n), 2)
    label = (rng.random(n) < s).astype(float)
    return {"y": y, "lo": lo, "hi": lo + w, "score": s, "label": label}


METRICS = [
    cf.coverage("y", "lo", "hi"),
    cf.width("lo", "hi"),
    cf.winkler("y", "lo", "hi", confidence_level=0.9),
    cf.ssc_score("y", "lo", "hi", n_bins=3),
    cf.ece("label", "score", n_bins=10),
    cf.brier("label", "score"),
    cf.ks_test("label", "score"),
    cf.auroc("label", "score"),
    cf.auarc("label", "score"),
]
COLS = ["coverage", "width", "winkler", "ssc_score", "ece", "brier", "ks_test", "ks_test_pvalue", "auroc", "auarc", "n"]


def _expected(d: dict[str, np.ndarray], idx: np.ndarray) -> list[float]:
    from test_ranking import auarc_expected, auroc_pairs

    y, lo, hi, s, lab = (d[k][idx] for k in ("y", "lo", "hi", "score", "label"))
    return [
        oracle.coverage(y, lo, hi),
        oracle.width(lo, hi),
        oracle.winkler(y, lo, hi, 0.9),
        oracle.ssc_score(y, lo, hi, 3),
        ocal.ece(lab, s, 10),
        ocal.brier(lab, s),
        *ocal.ks(lab, s),
        auroc_pairs(lab, s),
        auarc_expected(lab, s),
        len(idx),
    ]


def test_ten_thousand_groups_of_one(constructor) -> None:
    n = 10_000
    d = _data(n, 0)
    d["g"] = np.array([f"row {i:05d}" for i in range(n)], dtype=object)
    out = to_pandas(cf.evaluate(constructor(d), *METRICS, by="g"))
    assert list(out["g"]) == list(d["g"])  # sorted keys, one row per group
    assert (out["n"] == 1).all()
    covered = oracle.covered(d["y"], d["lo"], d["hi"])
    assert_close(out["coverage"], covered, rtol=0.0, what="coverage of one row")
    assert_close(out["width"], d["hi"] - d["lo"], rtol=RTOL, what="width")
    assert_close(out["ssc_score"], covered, rtol=0.0, what="ssc of one row")
    assert_close(out["brier"], (d["label"] - d["score"]) ** 2, rtol=RTOL, atol=ATOL, what="brier")
    assert_close(out["ece"], np.abs(d["label"] - d["score"]), rtol=RTOL, atol=ATOL, what="ece of one row")
    assert out["auroc"].isna().all()  # one class per group: undefined
    assert_close(out["auarc"], d["label"], rtol=0.0, what="auarc of one row")
    some = np.random.default_rng(1).choice(n, size=20, replace=False)
    for i in some:  # the KS tests of single rows, against the oracle
        ks = ocal.ks(d["label"][i : i + 1], d["score"][i : i + 1])
        assert_close(
            out.loc[i, ["ks_test", "ks_test_pvalue"]].to_numpy(dtype=float, na_value=np.nan),
            ks,
            rtol=RTOL,
            what=f"ks row {i}",
        )


def test_one_group_holds_99_percent(constructor) -> None:
    n = 20_000
    d = _data(n, 2)
    g = np.array(["big"] * n, dtype=object)
    small = np.random.default_rng(3).choice(n, size=n // 100, replace=False)
    g[small] = [f"s{i:03d}" for i in range(len(small))]
    d["g"] = g
    out = to_pandas(cf.evaluate(constructor(d), *METRICS, by="g"))
    assert len(out) == 1 + len(small)
    big = out[out["g"] == "big"].iloc[0]
    exp = _expected(d, np.flatnonzero(g == "big"))
    assert_close(big[COLS].to_numpy(dtype=float, na_value=np.nan), exp, rtol=RTOL, atol=ATOL, what="the big group")
    assert big["n"] == n - len(small)
    for _, row in out[out["g"] != "big"].head(5).iterrows():
        exp = _expected(d, np.flatnonzero(g == row["g"]))
        assert_close(row[COLS].to_numpy(dtype=float, na_value=np.nan), exp, rtol=RTOL, atol=ATOL, what=row["g"])


def test_fifty_key_columns(constructor) -> None:
    n = 600
    d = _data(n, 4)
    rng = np.random.default_rng(5)
    keys = [f"key {j}" for j in range(50)]
    for j, k in enumerate(keys):
        if j < 48:  # constant-ish keys with a few values: the groups are set by the last two
            d[k] = np.full(n, j % 3) if j % 2 else np.array([f"v{j}"] * n, dtype=object)
    d["key 48"] = rng.integers(0, 4, size=n)
    d["key 49"] = rng.choice(np.array(["a", "b", "c"], dtype=object), size=n)
    out = to_pandas(cf.evaluate(constructor(d), *METRICS[:4], by=keys))
    assert list(out.columns[:50]) == keys
    pairs = sorted({(int(a), str(b)) for a, b in zip(d["key 48"], d["key 49"])})
    assert [(int(a), str(b)) for a, b in zip(out["key 48"], out["key 49"])] == pairs
    for (a, b), (_, row) in zip(pairs, out.iterrows()):
        idx = np.flatnonzero((d["key 48"] == a) & (d["key 49"] == b))
        exp = _expected(d, idx)[:4]
        assert_close(row[COLS[:4]].to_numpy(dtype=float), exp, rtol=RTOL, what=f"{a}, {b}")
        assert row["n"] == len(idx)


def _as_float64_of(d: dict[str, np.ndarray], cols: list[str], dtype: str) -> tuple[dict, dict]:
    low = dict(d)
    for c in cols:
        low[c] = d[c].astype(dtype)
    exact = dict(low)
    for c in cols:
        exact[c] = low[c].astype(np.float64)  # the same values, exactly
    return low, exact


def test_float32_inputs_match_float64(constructor) -> None:
    d = _data(2_000, 6)
    d["g"] = np.random.default_rng(7).choice(np.array(["a", "b b", "ç"], dtype=object), size=2_000)
    low, exact = _as_float64_of(d, ["y", "lo", "hi", "score"], "float32")
    a = to_pandas(cf.evaluate(constructor(low), *METRICS, by="g"))
    b = to_pandas(cf.evaluate(constructor(exact), *METRICS, by="g"))
    # every number but the uniform ECE: its bin edges m/M are compared in the
    # scores' own precision (a Float32 0.7 starts bin 7, its double 0.6999999881 does not)
    same = [c for c in COLS if c != "ece"]
    assert_close(
        a[same].to_numpy(dtype=float, na_value=np.nan),
        b[same].to_numpy(dtype=float, na_value=np.nan),
        rtol=RTOL,
        atol=ATOL,
    )
    ece = COLS.index("ece")
    for i, key in enumerate(a["g"]):  # and the float64 run is the oracle's
        idx = np.flatnonzero(d["g"] == key)
        exp = _expected({k: v for k, v in exact.items()}, idx)
        assert_close(b.loc[i, COLS].to_numpy(dtype=float, na_value=np.nan), exp, rtol=RTOL, atol=ATOL, what=key)
        exp[ece] = ocal.ece(low["label"][idx], low["score"][idx], 10)  # Float32 edges
        assert_close(a.loc[i, COLS].to_numpy(dtype=float, na_value=np.nan), exp, rtol=RTOL, atol=ATOL, what=key)


def test_integer_and_small_int_inputs(constructor) -> None:
    rng = np.random.default_rng(8)
    n = 500
    d = {
        "y": rng.integers(-50, 50, size=n).astype(np.int16),
        "lo": rng.integers(-60, 0, size=n).astype(np.int32),
        "hi": rng.integers(0, 60, size=n).astype(np.int64),
        "label": rng.integers(0, 2, size=n).astype(np.int8),
        "score": rng.integers(0, 2, size=n).astype(np.uint8),
        "g": rng.choice(np.array(["x", "y"], dtype=object), size=n),
    }
    if constructor.id == "pyspark":  # Spark has no unsigned integer types
        d["score"] = d["score"].astype(np.int16)
    exact = {k: (v.astype(np.float64) if k != "g" else v) for k, v in d.items()}
    a = to_pandas(cf.evaluate(constructor(d), *METRICS, by="g"))
    b = to_pandas(cf.evaluate(constructor(exact), *METRICS, by="g"))
    assert_close(
        a[COLS].to_numpy(dtype=float, na_value=np.nan),
        b[COLS].to_numpy(dtype=float, na_value=np.nan),
        rtol=RTOL,
        atol=ATOL,
    )


@pytest.mark.parametrize("kind", ["nullable", "pyarrow"])
def test_pandas_extension_dtypes_match_numpy(kind: str) -> None:
    """pandas nullable (Float64, Int64, boolean, string) and pyarrow dtypes give the numpy-dtype numbers."""
    d = _data(1_000, 9)
    d["g"] = np.random.default_rng(10).choice(np.array(["a", "b", "c"], dtype=object), size=1_000)
    d["flag"] = d["label"] == 1.0
    base = pd.DataFrame(d)
    if kind == "nullable":
        ext = base.astype(
            {
                "y": "Float64",
                "lo": "Float64",
                "hi": "Float64",
                "score": "Float64",
                "label": "Int64",
                "flag": "boolean",
                "g": "string",
            }
        )
    else:
        pytest.importorskip("pyarrow")
        ext = base.astype(
            {
                "y": "double[pyarrow]",
                "lo": "double[pyarrow]",
                "hi": "float[pyarrow]",
                "score": "double[pyarrow]",
                "label": "int64[pyarrow]",
                "flag": "bool[pyarrow]",
                "g": "string[pyarrow]",
            }
        )
        ext["hi"] = base["hi"].astype("double[pyarrow]")  # float32 would round the bounds
    snapshot = ext.copy(deep=True)
    metrics = [*METRICS, cf.auroc("flag", "score").alias("auroc_flag")]
    a = to_pandas(cf.evaluate(ext, *metrics, by="g"))
    b = to_pandas(cf.evaluate(base, *metrics, by="g"))
    assert [str(k) for k in a["g"]] == list(b["g"])
    cols = [*COLS, "auroc_flag"]
    assert_close(
        a[cols].to_numpy(dtype=float, na_value=np.nan),
        b[cols].to_numpy(dtype=float, na_value=np.nan),
        rtol=RTOL,
        atol=ATOL,
    )
    pd.testing.assert_frame_equal(ext, snapshot)  # never mutated
    # a missing value in a nullable column is an invalid row (pd.NA, not a NaN)
    bad = ext.copy()
    bad.loc[3, "y"] = pd.NA
    with pytest.raises(ValueError, match=r"column 'y' has missing \(null/NaN\) or infinite values in 1 row"):
        cf.evaluate(bad, cf.coverage("y", "lo", "hi"), by="g")


def test_float32_scores_at_bin_edges(constructor) -> None:
    """float32 scores that are decimal bin edges in float32 (0.3f != 0.3) follow their float64 value."""
    s32 = np.array([0.1, 0.2, 0.3, 0.7, 0.9, 1.0, 0.0], dtype=np.float32)
    y = np.array([0, 1, 0, 1, 1, 1, 0], dtype=float)
    frame = constructor({"label": y, "score": s32})
    got = to_pandas(cf.evaluate(frame, cf.ece("label", "score", n_bins=10)))["ece"][0]
    assert_close(got, ocal.ece(y, s32.astype(np.float64), 10), rtol=RTOL, atol=ATOL)
    assert not math.isnan(got)


def test_hsic_huge_widths(eager_constructor) -> None:
    h = float.fromhex
    d = {  # widths 1.5e100 (1 + 2^-52) and 1.5e100; the first row is covered (y == hi), the second not
        "y": np.array([h("0x1.0567fa71f3263p+333"), h("0x1.e8247d00c138ap+333")]),
        "lo": np.array([h("0x1.4f9ee577cfe26p+330"), h("0x1.f5c64b86b8b1dp+332")]),
        "hi": np.array([h("0x1.0567fa71f3263p+333"), h("0x1.d65743865582cp+333")]),
    }
    assert d["hi"][0] - d["lo"][0] != d["hi"][1] - d["lo"][1]
    got = cf.conformal(eager_constructor(d)).hsic("y", "lo", "hi", kernel_sizes=(2.0, 0.5))
    assert_close(got, oracle.hsic(d["y"], d["lo"], d["hi"], (2.0, 0.5)), rtol=1e-9)  # 0.9298734950321937
