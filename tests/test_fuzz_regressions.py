"""Regression tests of the defects the differential fuzz found (issue 25).

One test per defect, on every backend where it applies, from the issue's
minimal reproductions.
"""

from __future__ import annotations

import math
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas

_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)


# -- 1. Gaussian CRPS far in the tail ------------------------------------------
@pytest.mark.spark_cases(y=1e7, sd=1.0)
@pytest.mark.parametrize(("y", "sd"), [(1e7, 1.0), (2.0, 1e-8), (-3e12, 0.5), (1e300, 1e-300)])
def test_gaussian_crps_far_tail(constructor: Any, y: float, sd: float) -> None:
    frame = constructor({"y": [y], "mu": [0.0], "sd": [sd]})
    out = to_pandas(cf.evaluate(frame, cf.crps("y", mean="mu", std="sd")))
    # Phi_c(|z|) and phi(z) are 0 in double precision: CRPS = |y - mu| - sd / sqrt(pi)
    assert_close(out["crps"], [abs(y) - sd * _INV_SQRT_PI])


# -- 2. merge_summaries with an empty chunk ------------------------------------
DAY = {"y": [1.0, 2.0, 3.0], "lo": [0.0, 2.5, 2.0], "hi": [1.5, 3.0, 4.0]}


def _concat(frames: list[Any]) -> Any:
    return nw.to_native(nw.concat([nw.from_native(f) for f in frames], how="vertical"))


def _no_rows(constructor: Any, data: dict[str, list[Any]]) -> Any:
    """A frame of ``data``'s columns and dtypes without rows."""
    return nw.to_native(nw.from_native(constructor(data)).head(0))


@pytest.mark.spark_cases(invalid="raise")
@pytest.mark.parametrize("invalid", ["raise", "drop", "null"])
def test_merge_summaries_with_an_empty_chunk(constructor: Any, invalid: str) -> None:
    cov = cf.coverage("y", "lo", "hi")
    frames = [constructor(DAY), _no_rows(constructor, DAY), constructor(DAY)]
    parts = [cf.summarize(f, cov, invalid=invalid) for f in frames]
    merged = cf.merge_summaries(_concat(parts))
    got = to_pandas(cf.finalize(merged, cov))
    expected = to_pandas(cf.evaluate(constructor({k: v * 2 for k, v in DAY.items()}), cov, invalid=invalid))
    assert_close(got["coverage"], [2 / 3])
    assert_close(got["coverage"], expected["coverage"])
    assert list(got["n"]) == [6]
    # the running merge of the monitoring loop: an empty chunk first
    running = cf.merge_summaries(_concat([parts[1], parts[0]]))
    assert_close(to_pandas(cf.finalize(running, cov))["coverage"], [2 / 3])


# -- 3. finalize of a grouped summary without rows -------------------------------
@pytest.mark.spark_cases(by=None)
@pytest.mark.parametrize("by", [None, "g"])
def test_finalize_summary_without_rows(constructor: Any, by: str | None) -> None:
    d = {"g": ["a"], "y": [1.0], "lo": [0.0], "hi": [2.0], "label": [1.0], "score": [0.5], "m0": [True], "m1": [False]}
    frame = _no_rows(constructor, d)
    metrics = [
        cf.coverage("y", "lo", "hi", weights="score"),
        cf.ks_test("label", "score"),
        cf.set_coverage("label", ["m0", "m1"], classes=[0, 1]),
    ]
    got = to_pandas(cf.finalize(cf.summarize(frame, *metrics, by="g"), *metrics, by=by))
    expected = to_pandas(cf.evaluate(frame, *metrics, by=by))
    assert list(got.columns) == list(expected.columns)
    assert len(got) == len(expected) == (1 if by is None else 0)
    assert list(got["n"]) == list(expected["n"])


# -- 8. a partition whose weights are all zero -----------------------------------
WEIGHTED = {
    "day": [1, 1, 2, 2],
    "g": ["a", "a", "a", "a"],
    "y": [1.0, 2.0, 1.0, 5.0],
    "lo": [0.0] * 4,
    "hi": [1.5] * 4,
    "w": [0.0, 0.0, 1.0, 1.0],
}


@pytest.mark.spark_cases(invalid="drop")
@pytest.mark.parametrize("invalid", ["raise", "drop", "null"])
def test_zero_weight_partition_checked_on_merged_totals(constructor: Any, invalid: str) -> None:
    cov = cf.coverage("y", "lo", "hi", weights="w")
    frame = constructor(WEIGHTED)
    stats = cf.summarize(frame, cov, by=["day", "g"], invalid=invalid)  # day 1 alone has no weight: no error
    got = to_pandas(cf.finalize(stats, cov, by="g"))
    expected = to_pandas(cf.evaluate(frame, cov, by="g", invalid=invalid))
    assert_close(got["coverage"], [0.5])
    assert_close(got["coverage"], expected["coverage"])
    assert list(got["n"]) == list(expected["n"]) == [4]
    for count in ("n_invalid", "n_dropped"):
        if count in expected:
            assert list(got[count]) == list(expected[count]) == [0]
    # finalized per day, day 1 breaks the rule as evaluate by day says
    if invalid == "raise":
        rule = r"'w' \(weights=\) is zero on every row of a group, in 2 rows"
        with pytest.raises(cf.InvalidRowsError, match=rule):
            to_pandas(cf.finalize(stats, cov, by=["day", "g"]))
        with pytest.raises(cf.InvalidRowsError, match=rule):
            to_pandas(cf.evaluate(frame, cov, by=["day", "g"], invalid=invalid))
        return
    per_day_rows = to_pandas(cf.evaluate(frame, cov, by=["day", "g"], invalid=invalid))
    per_day = to_pandas(cf.finalize(stats, cov, by=["day", "g"]))
    assert_close(per_day["coverage"], per_day_rows["coverage"])
    assert list(per_day["n"]) == list(per_day_rows["n"])
    count = "n_invalid" if invalid == "null" else "n_dropped"
    assert list(per_day[count]) == list(per_day_rows[count]) == [2, 0]


# -- 9. Christoffersen's LR_ind without cancellation ----------------------------
def _lr_ind_exact(n00: int, n01: int, n10: int, n11: int) -> float:
    """LR_ind to 50 digits (the textbook difference of log-likelihoods in decimal arithmetic)."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 50
        d00, d01, d10, d11 = (Decimal(v) for v in (n00, n01, n10, n11))

        def xlog(k: Decimal, total: Decimal) -> Decimal:
            return k * (k / total).ln() if k > 0 else Decimal(0)

        f0, f1 = d00 + d01, d10 + d11
        alt = xlog(d00, f0) + xlog(d01, f0) + xlog(d10, f1) + xlog(d11, f1)
        null = xlog(d00 + d10, f0 + f1) + xlog(d01 + d11, f0 + f1)
        return float(2 * (alt - null))


def test_christoffersen_small_statistic_exact(constructor: Any) -> None:
    # transitions n00 = 1457, n01 = 93, n10 = 92, n11 = 6: LR_ind ~ 0.00243, where the
    # difference of log-likelihoods (~ -700 each) lost ~1e-10 relative
    misses = [0] * 1458 + [1] * 7 + [0, 1] * 92
    n = len(misses)
    frame = constructor({"t": list(range(n)), "y": [2.0 * m for m in misses], "lo": [0.0] * n, "hi": [1.0] * n})
    out = to_pandas(cf.evaluate(frame, cf.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by="t")))
    exact = _lr_ind_exact(1457, 93, 92, 6)
    assert abs(exact - 0.0024340055449587486) < 1e-18
    assert_close(out["christoffersen_test"], [exact])


# -- 10. the ensemble PIT draws of a group do not depend on the other groups ----
ENS_B = {
    "g": ["b"] * 8,
    "y": [2.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "s0": [0.0, 2.0, 1.0, 2.0, 1.0, 1.0, 2.0, 2.0],
    "s1": [1.0, 1.0, 1.0, 2.0, 0.0, 2.0, 2.0, 0.0],
    "s2": [1.0, 2.0, 1.0, 0.0, 2.0, 2.0, 2.0, 0.0],
}


@pytest.mark.spark_cases(form="list")
@pytest.mark.parametrize("form", ["columns", "list"])
def test_ensemble_pit_of_a_group_ignores_other_groups(constructor: Any, form: str) -> None:
    with_a = {k: [v[0], *v] for k, v in ENS_B.items()} | {"g": ["a", *ENS_B["g"]]}
    with_z = {k: [*v, v[0]] for k, v in ENS_B.items()} | {"g": [*ENS_B["g"], "z"]}
    outs = []
    for d in (ENS_B, with_a, with_z):
        samples: Any = ["s0", "s1", "s2"]
        if form == "list":
            d = {**d, "ens": [list(m) for m in zip(d["s0"], d["s1"], d["s2"])]}
            samples = "ens"
        out = to_pandas(cf.evaluate(constructor(d), cf.pit_test("y", samples=samples, seed=3), by="g"))
        outs.append(out[out["g"] == "b"].reset_index(drop=True))
    for out in outs[1:]:
        assert_close(out["pit_test"], outs[0]["pit_test"], rtol=0.0)
        assert_close(out["pit_test_pvalue"], outs[0]["pit_test_pvalue"], rtol=0.0)


def test_ensemble_pit_categorical_keys_pandas_and_polars() -> None:
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    d = {k: [*v, v[0]] for k, v in ENS_B.items()} | {"g": [*ENS_B["g"], "a"]}
    native_pd = pd.DataFrame(d)
    native_pd["g"] = pd.Categorical(native_pd["g"], categories=["b", "a"])  # not the lexical order
    native_pl = pl.DataFrame(d).with_columns(pl.col("g").cast(pl.Categorical))
    metric = cf.pit_test("y", samples=["s0", "s1", "s2"], seed=5)
    got_pd = to_pandas(cf.evaluate(native_pd, metric, by="g")).astype({"g": str}).sort_values("g")
    got_pl = to_pandas(cf.evaluate(native_pl, metric, by="g")).astype({"g": str}).sort_values("g")
    assert list(got_pd["g"]) == list(got_pl["g"]) == ["a", "b"]
    assert_close(got_pd["pit_test"], got_pl["pit_test"], rtol=0.0)
    assert_close(got_pd["pit_test_pvalue"], got_pl["pit_test_pvalue"], rtol=0.0)


# -- 4. pit_test without rows (pandas with Arrow dtypes made an object column of pd.NA) --
GAUSS = {"y": [1.0, 2.0], "mu": [0.0, 0.5], "sd": [1.0, 1.0]}


@pytest.mark.spark_cases(form="gaussian")
@pytest.mark.parametrize("form", ["gaussian", "ensemble"])
def test_pit_test_without_rows(constructor: Any, form: str) -> None:
    d = dict(GAUSS, s0=[0.0, 1.0], s1=[1.0, 3.0])
    metric = cf.pit_test("y", mean="mu", std="sd") if form == "gaussian" else cf.pit_test("y", samples=["s0", "s1"])
    out = to_pandas(cf.evaluate(_no_rows(constructor, d), metric))
    assert list(out["n"]) == [0]
    assert_close(out[["pit_test", "pit_test_pvalue"]].to_numpy(), [[math.nan, math.nan]])
    # every row dropped
    bad = constructor(dict(d, sd=[-1.0, -1.0], s0=[math.nan, math.nan]))
    out = to_pandas(cf.evaluate(bad, metric, invalid="drop"))
    assert list(out["n"]) == [0] and list(out["n_dropped"]) == [2]
    assert_close(out[["pit_test", "pit_test_pvalue"]].to_numpy(), [[math.nan, math.nan]])


# -- 5. a float key holding 0.0 and -0.0 is one group ----------------------------
def test_negative_zero_key_is_one_group(constructor: Any) -> None:
    d = {"g": [0.0, -0.0, 0.0, 1.0], "y": [1.0, 2.0, 3.0, 1.0], "lo": [0.0, 2.5, 2.0, 0.0], "hi": [1.5, 3.0, 4.0, 2.0]}
    frame = constructor(d)
    out = to_pandas(cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by="g"))
    assert [float(k) for k in out["g"]] == [0.0, 1.0]
    assert_close(out["coverage"], [2 / 3, 1.0])
    assert list(out["n"]) == [3, 1]
    merged = to_pandas(
        cf.finalize(cf.summarize(frame, cf.coverage("y", "lo", "hi"), by="g"), cf.coverage("y", "lo", "hi"), by="g")
    )
    assert_close(merged["coverage"], [2 / 3, 1.0])


# -- 6. an Arrow dictionary key on pandas ------------------------------------------
def test_arrow_dictionary_key_on_pandas() -> None:
    pl = pytest.importorskip("polars")
    pytest.importorskip("pyarrow")
    d = {"g": ["b", "a", "b", "c"], "y": [1.0, 2.0, 3.0, 1.0], "lo": [0.0, 2.5, 2.0, 0.0], "hi": [1.5, 3.0, 4.0, 2.0]}
    plain = pl.DataFrame(d)
    keyed = plain.with_columns(pl.col("g").cast(pl.Categorical)).to_pandas(use_pyarrow_extension_array=True)
    assert str(keyed["g"].dtype).startswith("dictionary")
    before = keyed.copy()
    metrics = [cf.coverage("y", "lo", "hi"), cf.ece("y", "lo", n_bins=2)]  # y is no label: invalid rows
    got = to_pandas(cf.evaluate(keyed, *metrics, by="g", invalid="null"))
    with_invalid = to_pandas(cf.evaluate(plain, *metrics, by="g", invalid="null"))
    assert [str(k) for k in got["g"]] == ["a", "b", "c"]
    assert_close(got[["coverage", "ece"]].to_numpy(), with_invalid[["coverage", "ece"]].to_numpy())
    assert list(got["n_invalid"]) == list(with_invalid["n_invalid"]) == [1, 1, 0]
    expected = to_pandas(cf.evaluate(plain, cf.coverage("y", "lo", "hi"), by="g"))
    stats = cf.summarize(keyed, cf.coverage("y", "lo", "hi"), by="g")
    assert_close(to_pandas(cf.finalize(stats, cf.coverage("y", "lo", "hi"), by="g"))["coverage"], expected["coverage"])
    assert keyed.equals(before) and str(keyed["g"].dtype) == str(before["g"].dtype)


# -- 7. sets and ensembles without any element -------------------------------------
@pytest.mark.spark_cases(classes=(0, 1))
@pytest.mark.parametrize("classes", [(0, 1), ("x", "y")])
def test_all_sets_empty(constructor: Any, classes: tuple[Any, ...]) -> None:
    frame = constructor({"label": list(classes), "sets": [[], []]})
    metrics = [cf.set_coverage("label", "sets", classes=list(classes)), cf.set_size("sets", classes=list(classes))]
    out = to_pandas(cf.evaluate(frame, *metrics))
    assert_close(out[["set_coverage", "set_size"]].to_numpy(), [[0.0, 0.0]])
    assert list(out["n"]) == [2]


@pytest.mark.parametrize("case", ["empty-sets", "no-rows-sets", "no-rows-crps", "no-rows-pit"])
def test_pandas_object_lists_without_elements(case: str) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    if case == "empty-sets":
        frame = pd.DataFrame({"label": [0, 1], "sets": [[], []]})
        out = to_pandas(cf.evaluate(frame, cf.set_coverage("label", "sets", classes=[0, 1])))
        assert_close(out["set_coverage"], [0.0])
        assert list(out["n"]) == [2]
        return
    if case == "no-rows-sets":
        frame = pd.DataFrame({"label": [0, 1], "sets": [[0], [0, 1]]}).head(0)
        metric: Any = cf.set_coverage("label", "sets", classes=[0, 1])
    else:
        frame = pd.DataFrame({"y": [1.0], "ens": [[1.0, 2.0]]}).head(0)
        metric = cf.crps("y", samples="ens") if case == "no-rows-crps" else cf.pit_test("y", samples="ens")
    out = to_pandas(cf.evaluate(frame, metric))
    assert list(out["n"]) == [0]
    assert out.drop(columns="n").isna().all().all()


# -- 8. input columns named like the engine's internal columns ------------------------
def test_columns_named_like_internal_columns(constructor: Any) -> None:
    odd = {"y": "__cf_r1", "p": "__cf_r0", "q": "__cf_r2", "g": "__cf_k0"}
    d = {"y": [1.0, 0.0, 1.0, 1.0, 0.0, 1.0], "p": [0.9, 0.2, 0.4, 0.7, 0.6, 0.1], "g": ["a", "a", "a", "b", "b", "b"]}
    d["q"] = [0.5, 0.5, 0.8, 0.3, 0.2, 0.9]

    def metrics(c: dict[str, str]) -> list[Any]:
        return [cf.ece(c["y"], c["p"], n_bins=2), cf.brier(c["y"], c["q"]), cf.auroc(c["y"], c["p"])]

    plain = to_pandas(cf.evaluate(constructor(d), *metrics({c: c for c in odd}), by="g"))
    frame = constructor({odd[c]: v for c, v in d.items()})
    got = to_pandas(cf.evaluate(frame, *metrics(odd), by=odd["g"]))
    stats = cf.summarize(frame, *metrics(odd), by=odd["g"])  # recursed without end on "__cf_r0"
    for ms in (metrics(odd), metrics(odd)[1:2]):  # finalize all metrics, or a subset
        merged = to_pandas(cf.finalize(stats, *ms, by=odd["g"]))
        names = [m.output_name for m in ms]
        assert_close(merged[names].to_numpy(), plain[names].to_numpy())
    assert_close(got[["ece", "brier", "auroc"]].to_numpy(), plain[["ece", "brier", "auroc"]].to_numpy())
    assert list(got[odd["g"]]) == ["a", "b"]


def test_columns_named_like_internal_columns_without_rows(constructor: Any) -> None:
    # issue 38 item 10: a grouped summary without rows plans finalize on guessed inputs, whose first
    # internal row was called "__cf_r0" like the input: _canonical_keys recursed without end
    odd = {"y": "__cf_r0", "p": "lower bound", "g": "y ✓"}
    frame = constructor({odd["y"]: np.array([], dtype=float), odd["p"]: np.array([], dtype=float), odd["g"]: []})
    for metric in (cf.auroc(odd["y"], odd["p"]), cf.ece(odd["y"], odd["p"]), cf.ks_test(odd["y"], odd["p"])):
        stats = cf.summarize(frame, metric, by=odd["g"])
        out = to_pandas(cf.finalize(stats, metric, by=odd["g"]))
        assert len(out) == 0 and metric.output_name in out.columns


# -- 9. pandas: a day whose Boolean keys with nulls are all null ----------------------
def test_all_null_boolean_key_day_concatenates_on_pandas() -> None:
    pd = pytest.importorskip("pandas")
    cov = cf.coverage("y", "lo", "hi")
    days = [
        pd.DataFrame({"g": pd.Series([None, None], dtype=object), **{k: v[:2] for k, v in DAY.items()}}),
        pd.DataFrame({"g": [True, False, False], **DAY}),  # bool dtype: no nulls this day
    ]
    # the null key is a group of its own (computed under "null"; "drop" drops it)
    for invalid, n in (("null", [2, 1, 2]), ("drop", [2, 1])):
        parts = [cf.summarize(day, cov, by="g", invalid=invalid) for day in days]
        assert parts[0]["g"].dtype == object  # pandas groups an all-null object key into float64
        merged = cf.merge_summaries(_concat(parts), by="g")
        got = cf.finalize(merged, cov, by="g")
        expected = cf.evaluate(pd.concat(days, ignore_index=True), cov, by="g", invalid=invalid)
        assert list(got["g"].iloc[:2]) == [False, True]  # not 0.0, 1.0
        assert [type(k) for k in got["g"].iloc[:2]] == [bool, bool]
        assert len(got) == len(n) and (len(n) == 2 or pd.isna(got["g"].iloc[2]))
        assert_close(got["coverage"], expected["coverage"])
        assert list(got["n"]) == list(expected["n"]) == n
