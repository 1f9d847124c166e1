"""Sample weights (``weights=``): repetition, dropping, scaling, peers, bad input.

Properties, for every metric with a weighted version:

* an integer weight ``k`` gives the result of the row repeated ``k`` times
  (the point estimates and statistics; intervals, p-values and ``n_eff`` use
  Kish's effective sample size, which repetition changes, and ``n`` counts
  rows);
* a row of weight 0 gives the result without the row (every output except the
  group's ``n``);
* constant weights give the unweighted result (every output, intervals too).

Each property runs once grouped on every backend of the ``constructor``
fixture (one query per family); the seed loops run on polars eager and lazy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy.special import ndtri

import conformal_frames as cf
from helpers import assert_close, compare, run, side_by_side, to_pandas

SEEDS = range(4)
#: outputs that are row counts or inference (Kish's n_eff, the variance
#: sum w^2 v): not invariant under repetition
NOT_REPEATED = ("_ci_low", "_ci_high", "_n_eff", "_n", "_pvalue", "_pvalue_holm", "_pvalue_bh", "_flag")


def make_data(seed: int, n: int = 60) -> dict[str, Any]:
    """Columns for every family, integer weights 0..3 (zeros included), groups."""
    rng = np.random.default_rng(seed)
    center = rng.normal(size=n) * 2
    width = np.round(rng.gamma(2.0, 1.0, size=n), 1)
    lo = np.round(center - width / 2, 2)
    p = rng.dirichlet(np.ones(3), size=n).round(2)
    p[:, 2] = np.clip(1.0 - p[:, 0] - p[:, 1], 0.0, 1.0)
    label = rng.integers(0, 3, size=n)
    score = np.round(rng.random(n), 1)  # tied scores
    w = rng.integers(0, 4, size=n)
    g = rng.choice(["a", "b", "c"], size=n)
    # every group keeps a positive weight
    for key in ("a", "b", "c"):
        w[np.flatnonzero(g == key)[:1]] = 2
    return {
        "y": np.round(center + rng.normal(size=n), 2),
        "lo": lo,
        "hi": lo + width,
        "label": label,
        "c0": p[:, 0] > 0.2,
        "c1": p[:, 1] > 0.2,
        "c2": p[:, 2] > 0.2,
        "p0": p[:, 0],
        "p1": p[:, 1],
        "p2": p[:, 2],
        "yb": (rng.random(n) < score).astype(np.int64),
        "s": score,
        "w": w,
        "g": g,
    }


def metric_sets(weights: str | None) -> dict[str, list[cf.Metric]]:
    """The weighted metrics, one list per family (one query each)."""
    w = {"weights": weights} if weights is not None else {}
    sets = ["c0", "c1", "c2"]
    return {
        "intervals": [
            cf.coverage("y", "lo", "hi", **w),
            cf.width("lo", "hi", **w),
            cf.winkler("y", "lo", "hi", confidence_level=0.8, **w),
            cf.cwc("y", "lo", "hi", eta=2.0, confidence_level=0.8, **w),
            cf.ssc("y", "lo", "hi", n_bins=3, **w),
            cf.ssc_score("y", "lo", "hi", n_bins=2, **w),
            cf.coverage_gap("y", "lo", "hi", groups="label", confidence_level=0.8, **w),
            cf.coverage_gap("y", "lo", "hi", groups="label", confidence_level=0.8, weighted=True, **w).alias("gap_w"),
        ],
        "sets": [
            cf.set_coverage("label", sets, classes=[0, 1, 2], **w),
            cf.set_size(sets, classes=[0, 1, 2], **w),
            cf.singleton_rate(sets, classes=[0, 1, 2], **w),
            cf.empty_rate(sets, classes=[0, 1, 2], **w),
            cf.set_ssc("label", sets, classes=[0, 1, 2], **w),
            cf.set_ssc_score("label", sets, classes=[0, 1, 2], n_bins=2, **w),
            cf.efficiency_criteria("label", ["p0", "p1", "p2"], classes=[0, 1, 2], confidence_level=0.8, **w),
        ],
        "calibration": [
            cf.brier("yb", "s", **w),
            cf.ece("yb", "s", n_bins=4, **w),
            cf.mce("yb", "s", n_bins=4, **w),
            cf.ece("yb", "s", n_bins=3, strategy="quantile", **w).alias("ece_q"),
            cf.mce("yb", "s", n_bins=40, **w).alias("mce_wide"),
            cf.reliability("yb", "s", n_bins=3, **w),
            cf.reliability("yb", "s", n_bins=3, strategy="quantile", **w).alias("rel_q"),
            cf.top_label_ece("label", ["p0", "p1", "p2"], n_bins=3, **w),
            cf.top_label_ece("label", ["p0", "p1", "p2"], n_bins=3, strategy="quantile", weighted=True, **w).alias(
                "tl_q"
            ),
            cf.classwise_ece("label", ["p0", "p1", "p2"], n_bins=3, **w),
            cf.confidence_ece("label", ["p0", "p1", "p2"], n_bins=3, **w),
            cf.confidence_ece("label", ["p0", "p1", "p2"], n_bins=3, strategy="quantile", **w).alias("ce_q"),
            cf.auroc("yb", "s", **w),
        ],
    }


FAMILIES = ("intervals", "sets", "calibration")


def calibration_tests(weights: str | None) -> list[cf.Metric]:
    """The calibration tests: their statistics are inference (variance sum w^2 v)."""
    w = {"weights": weights} if weights is not None else {}
    return [cf.ks_test("yb", "s", **w), cf.kuiper_test("yb", "s", **w), cf.spiegelhalter_test("yb", "s", **w)]


def repeat_rows(data: dict[str, Any], weights: str = "w") -> dict[str, Any]:
    """Each row repeated ``weights`` times (0: dropped)."""
    k = np.asarray(data[weights])
    return {c: np.repeat(np.asarray(v), k) for c, v in data.items()}


def keep_rows(data: dict[str, Any], mask: np.ndarray) -> dict[str, Any]:
    return {c: np.asarray(v)[mask] for c, v in data.items()}


# ---------------------------------------------------------------------------
# the three properties, every backend (one grouped query per family)
# ---------------------------------------------------------------------------
def eager(constructor: Any) -> None:
    """The math below is the backend's as much as polars': Spark runs the repetition test only."""
    if constructor.id == "pyspark":
        pytest.skip("covered by test_integer_weight_is_repetition[pyspark] (one Spark query per family)")


#: on Spark (interpreted plans, minutes per wide query) the calibration family
#: runs its single-pass metrics and one binned table of each kind
SPARK_CALIBRATION = ("brier", "ece", "ece_q", "reliability", "auroc")


def _family(family: str, weights: str | None, constructor: Any) -> list[cf.Metric]:
    metrics = metric_sets(weights)[family]
    if getattr(constructor, "id", "") == "pyspark" and family == "calibration":
        metrics = [m for m in metrics if m.output_name in SPARK_CALIBRATION]
    return metrics


@pytest.mark.parametrize("family", FAMILIES)
def test_integer_weight_is_repetition(constructor: Any, family: str) -> None:
    data = make_data(0)
    weighted = run(constructor, data, _family(family, "w", constructor))
    repeated = run(pl.DataFrame, repeat_rows(data), _family(family, None, constructor))
    assert compare(weighted, repeated, skip=NOT_REPEATED, what=family) >= 4
    # every output (intervals and bin counts too) agrees with polars
    assert compare(weighted, run(pl.DataFrame, data, _family(family, "w", constructor)), what=family) >= 6


def test_weighted_calibration_tests(constructor: Any) -> None:
    """KS, Kuiper, Spiegelhalter against their weighted formulas (numpy)."""
    data = make_data(3)
    out = run(constructor, data, calibration_tests("w"))
    for i, key in enumerate(sorted(set(data["g"]))):
        m = data["g"] == key
        y, s, w = (np.asarray(data[c], dtype=float)[m] for c in ("yb", "s", "w"))
        scores = np.unique(s)
        path = np.array([0.0] + [np.sum((w * (y - s))[s <= v]) for v in scores])
        sigma = np.sqrt(np.sum(w**2 * s * (1 - s)))
        assert_close(out["ks_test"][i], np.max(np.abs(path)) / sigma, what="ks")
        assert_close(out["kuiper_test"][i], (path.max() - path.min()) / sigma, what="kuiper")
        z = np.sum(w * (y - s) * (1 - 2 * s)) / np.sqrt(np.sum(w**2 * (1 - 2 * s) ** 2 * s * (1 - s)))
        assert_close(out["spiegelhalter_test"][i], z, what="spiegelhalter")
    plain = run(pl.DataFrame, data, calibration_tests(None))
    assert_close(out["ks_test_pvalue"], cf.brownian_max_abs_sf(out["ks_test"].to_numpy()), what="ks p")
    assert not np.allclose(out["ks_test"], plain["ks_test"])  # the weights matter


def test_cumulative_differences_weighted(constructor: Any) -> None:
    data = make_data(5)
    out = to_pandas(cf.cumulative_differences(constructor(data), "yb", "s", weights="w", by="g"))
    repeated = to_pandas(cf.cumulative_differences(pl.DataFrame(repeat_rows(data)), "yb", "s", by="g"))
    assert list(out["g"]) == list(repeated["g"])
    assert_close(out["s"], repeated["s"])
    # the last cell's running total cancels to about 0 (1e-17 either way, summed in another order)
    assert_close(out["cumulative_difference"], repeated["cumulative_difference"], atol=1e-14)
    positive = keep_rows(data, np.asarray(data["w"]) > 0)
    rows = pd.DataFrame({"g": positive["g"], "s": positive["s"]}).groupby(["g", "s"]).size()
    assert list(out["n"]) == list(rows)  # rows of positive weight at each score


@pytest.mark.parametrize("family", [*FAMILIES, "tests"])
def test_zero_weight_is_a_dropped_row(constructor: Any, family: str) -> None:
    eager(constructor)
    data = make_data(1)
    assert (np.asarray(data["w"]) == 0).sum() > 5
    metrics = calibration_tests("w") if family == "tests" else metric_sets("w")[family]
    # one call: the rows as given (groups "1 a", ...) beside the rows of positive weight ("2 a", ...)
    weighted, dropped = side_by_side(constructor, [data, keep_rows(data, np.asarray(data["w"]) > 0)], metrics)
    assert compare(weighted, dropped, what=family) >= 6  # intervals, n_eff and bin counts too


#: outputs of bins cut at equal *weight* (quantile and SSC width bins): with
#: constant weights c they are the bins of the rows repeated c times, not the unweighted bins
WEIGHT_CUT = ("ece_q", "rel_q", "tl_q", "ssc")


@pytest.mark.parametrize("family", [*FAMILIES, "tests"])
def test_constant_weights_are_unweighted(constructor: Any, family: str) -> None:
    eager(constructor)
    data = make_data(2)
    data["w"] = np.full(len(data["w"]), 2.5)
    sets = {"tests": calibration_tests("w")} | metric_sets("w"), {"tests": calibration_tests(None)} | metric_sets(None)
    weighted = run(constructor, data, sets[0][family])
    plain = run(constructor, data, sets[1][family])
    cut = [c for c in plain.columns if c.startswith(WEIGHT_CUT)]
    assert compare(weighted, plain.drop(columns=cut), what=family) >= 4  # intervals and bin counts too
    for c in [c for c in weighted.columns if c.endswith("_n_eff")]:
        assert_close(weighted[c], weighted["n"], what=c)


# ---------------------------------------------------------------------------
# the seed loops: eager and lazy polars only (covered above on every backend)
# ---------------------------------------------------------------------------
POLARS = [pytest.param(pl.DataFrame, id="polars"), pytest.param(lambda d: pl.DataFrame(d).lazy(), id="polars[lazy]")]


@pytest.mark.parametrize("make", POLARS)
@pytest.mark.parametrize("seed", SEEDS)
def test_repetition_over_seeds(make: Any, seed: int) -> None:
    data = make_data(10 + seed, n=80)
    kept = keep_rows(data, np.asarray(data["w"]) > 0)
    for family in FAMILIES:
        weighted, dropped = side_by_side(make, [data, kept], metric_sets("w")[family])  # one call
        repeated = run(make, repeat_rows(data), metric_sets(None)[family])
        compare(weighted, repeated, skip=NOT_REPEATED, what=f"{family} seed {seed}")
        compare(weighted, dropped, what=f"{family} seed {seed} (zero weights)")


@pytest.mark.parametrize("seed", SEEDS)
def test_ungrouped_repetition(seed: int) -> None:
    data = make_data(20 + seed)
    for family in FAMILIES:
        weighted = to_pandas(cf.evaluate(pl.DataFrame(data), *metric_sets("w")[family]))
        repeated = to_pandas(cf.evaluate(pl.DataFrame(repeat_rows(data)), *metric_sets(None)[family]))
        weighted["g"] = repeated["g"] = 0
        compare(weighted, repeated, skip=NOT_REPEATED, what=f"{family} seed {seed}")


# ---------------------------------------------------------------------------
# Kish's effective sample size: the intervals against the formula
# ---------------------------------------------------------------------------
def wilson(k: float, n: float, level: float) -> tuple[float, float]:
    z = float(ndtri(0.5 + level / 2))
    center = (k + z * z / 2) / (n + z * z)
    half = z / (n + z * z) * np.sqrt(k * (n - k) / n + z * z / 4)
    return center - half, center + half


def test_coverage_interval_at_kish_n_eff(constructor: Any) -> None:
    rng = np.random.default_rng(5)
    n = 50
    w = rng.gamma(1.0, 2.0, size=n)
    lo = rng.normal(size=n)
    data = {"y": rng.normal(size=n) + 0.5, "lo": lo, "hi": lo + 1.2, "w": w, "g": rng.choice(["a", "b"], size=n)}
    out = run(constructor, data, [cf.coverage("y", "lo", "hi", ci_level=0.9, weights="w")])
    for i, key in enumerate(["a", "b"]):
        m = data["g"] == key
        c = ((data["lo"] <= data["y"]) & (data["y"] <= data["hi"]))[m]
        ww = w[m]
        p = float(np.sum(ww * c) / np.sum(ww))
        n_eff = float(np.sum(ww) ** 2 / np.sum(ww**2))
        low, high = wilson(p * n_eff, n_eff, 0.9)
        assert_close(out["coverage"][i], p, what="coverage")
        assert_close(out["coverage_n_eff"][i], n_eff, what="n_eff")
        assert_close(out["coverage_ci_low"][i], low, what="low")
        assert_close(out["coverage_ci_high"][i], high, what="high")
        assert out["n"][i] == m.sum()


def test_reliability_bins_at_kish_n_eff() -> None:
    rng = np.random.default_rng(6)
    n = 80
    s = rng.random(n)
    y = (rng.random(n) < s).astype(int)
    w = rng.gamma(1.0, 1.0, size=n)
    w[:5] = 0.0
    out = pl.DataFrame({"y": y, "s": s, "w": w}).conformal.reliability("y", "s", n_bins=4, weights="w")
    b = np.minimum(np.floor(s * 4), 3)
    pos = w > 0
    for row in out.iter_rows(named=True):
        m = (b == row["bin"]) & pos
        ww = w[m]
        freq = np.sum(ww * y[m]) / np.sum(ww)
        n_eff = np.sum(ww) ** 2 / np.sum(ww**2)
        low, high = wilson(freq * n_eff, n_eff, 0.95)
        assert_close(row["mean_score"], np.sum(ww * s[m]) / np.sum(ww))
        assert_close(row["frequency"], freq)
        assert_close([row["frequency_ci_low"], row["frequency_ci_high"]], [low, high])
        assert row["n"] == m.sum()


# ---------------------------------------------------------------------------
# peers: scikit-learn's sample_weight, numpy's average
# ---------------------------------------------------------------------------
def test_brier_equals_scikit_learn(constructor: Any) -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(7)
    n = 40
    s = rng.random(n)
    y = (rng.random(n) < s).astype(int)
    w = rng.gamma(1.0, 1.0, size=n)
    g = np.where(np.arange(n) < 25, "a", "b")
    out = run(constructor, {"y": y, "s": s, "w": w, "g": g}, [cf.brier("y", "s", weights="w")])
    expected = [metrics.brier_score_loss(y[g == k], s[g == k], sample_weight=w[g == k]) for k in ("a", "b")]
    assert_close(out["brier"], expected)


def test_auroc_equals_scikit_learn_with_ties(constructor: Any) -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(9)
    n = 60
    s = np.round(rng.random(n), 1)  # ties, also across classes
    y = (rng.random(n) < s).astype(int)
    w = rng.gamma(1.0, 1.0, size=n)
    w[:4] = 0.0
    g = np.where(np.arange(n) < 35, "a", "b")
    out = run(constructor, {"y": y, "s": s, "w": w, "g": g}, [cf.auroc("y", "s", weights="w")])
    expected = [metrics.roc_auc_score(y[g == k], s[g == k], sample_weight=w[g == k]) for k in ("a", "b")]
    assert_close(out["auroc"], expected, rtol=1e-14)  # scikit-learn integrates trapezoids


def test_coverage_test_weighted() -> None:
    """Estimate by repetition; interval and p-value at Kish's n_eff (binomial tail for real k, n)."""
    from scipy.special import betainc

    data = make_data(4)
    metric = {
        m: cf.coverage_test("y", "lo", "hi", confidence_level=0.8, method=m, weights="w")
        for m in ("wilson", "clopper-pearson")
    }
    for make in (pl.DataFrame, pd.DataFrame, lambda d: pl.DataFrame(d).lazy()):
        out = run(make, data, [metric["wilson"]])
        repeated = run(make, repeat_rows(data), [cf.coverage_test("y", "lo", "hi", confidence_level=0.8)])
        compare(out, repeated, skip=NOT_REPEATED, what="coverage_test")
        for i, key in enumerate(sorted(set(data["g"]))):
            m = data["g"] == key
            c = ((data["lo"] <= data["y"]) & (data["y"] <= data["hi"]))[m]
            w = data["w"][m].astype(float)
            p = np.sum(w * c) / np.sum(w)
            n_eff = np.sum(w) ** 2 / np.sum(w**2)
            k = p * n_eff
            assert_close(out["coverage_test_n_eff"][i], n_eff)
            assert_close([out["coverage_test_ci_low"][i], out["coverage_test_ci_high"][i]], wilson(k, n_eff, 0.95))
            assert_close(out["coverage_test_pvalue"][i], betainc(n_eff - k, k + 1, 0.2) if k < n_eff else 1.0)
    # constant weights: every output of the unweighted test, p-values and intervals included
    data["w"] = np.full(len(data["w"]), 3.0)
    for method, weighted in metric.items():
        plain = cf.coverage_test("y", "lo", "hi", confidence_level=0.8, method=method)
        out, expected = run(pl.DataFrame, data, [weighted]), run(pl.DataFrame, data, [plain])
        assert compare(out, expected, what=method) >= 7
    with pytest.raises(ValueError, match="n_calibration= .* has no weighted version"):
        cf.coverage_test("y", "lo", "hi", confidence_level=0.8, n_calibration=100, weights="w")


def test_weighted_means_equal_numpy_average() -> None:
    rng = np.random.default_rng(8)
    n = 30
    lo = rng.normal(size=n)
    hi = lo + rng.gamma(2.0, 1.0, size=n)
    y = rng.normal(size=n)
    w = rng.gamma(1.0, 1.0, size=n)
    df = pd.DataFrame({"y": y, "lo": lo, "hi": hi, "w": w})
    assert_close(df.conformal.width("lo", "hi", weights="w"), np.average(hi - lo, weights=w))
    assert_close(df.conformal.coverage("y", "lo", "hi", weights="w"), np.average((lo <= y) & (y <= hi), weights=w))
    alpha = 0.2
    score = (hi - lo) + 2 / alpha * (np.maximum(lo - y, 0) + np.maximum(y - hi, 0))
    assert_close(df.conformal.winkler("y", "lo", "hi", confidence_level=0.8, weights="w"), np.average(score, weights=w))


def test_unweighted_is_unchanged() -> None:
    """``weights=None`` builds the very query of 0.2 (no weight rows at all)."""
    data = make_data(3)
    for family in FAMILIES:
        explicit = to_pandas(cf.evaluate(pl.DataFrame(data), *metric_sets(None)[family], by="g"))
        assert not [c for c in explicit.columns if c.endswith("_n_eff")]
    from conformal_frames.engine import Query

    q = Query(schema=pl.DataFrame(data).lazy().collect_schema(), keys=[])
    cf.coverage("y", "lo", "hi").build(q)
    assert not any("weight" in str(k) for k in q.rows)


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
BAD = [
    pytest.param([1.0, -1.0, 2.0, 1.0], "column 'w' (weights=) has negative values in 1 row, e.g. -1", id="negative"),
    pytest.param([1.0, None, 2.0, 1.0], "column 'w' has missing (null/NaN) or infinite values in 1 row", id="null"),
    pytest.param(
        [1.0, float("nan"), 2.0, 1.0], "column 'w' has missing (null/NaN) or infinite values in 1 row", id="nan"
    ),
    pytest.param(
        [1.0, 1.0, float("inf"), 1.0], "column 'w' has missing (null/NaN) or infinite values in 1 row", id="inf"
    ),
    pytest.param(
        [1.0, 2.0, 0.0, 0.0],
        "column 'w' (weights=) is zero on every row of a group, in 2 rows; a group needs a positive total weight",
        id="all-zero",
    ),
]


def _bad_frame(w: list[Any]) -> dict[str, Any]:
    return {"y": [1.0, 2.0, 3.0, 4.0], "lo": [0.0] * 4, "hi": [3.0] * 4, "w": w, "g": ["a", "a", "b", "b"]}


@pytest.mark.parametrize(("w", "message"), BAD)
def test_bad_weights_raise(w: list[Any], message: str) -> None:
    data = _bad_frame(w)
    for frame in (pl.DataFrame(data), pd.DataFrame(data)):
        with pytest.raises(ValueError, match=None) as info:
            cf.evaluate(frame, cf.coverage("y", "lo", "hi", weights="w"), by="g")
        assert str(info.value) == message


def test_bad_weights_follow_the_invalid_policy(constructor: Any) -> None:
    data = _bad_frame([1.0, -1.0, 0.0, 0.0])
    metric = cf.coverage("y", "lo", "hi", weights="w")
    null = to_pandas(cf.evaluate(constructor(data), metric, by="g", invalid="null"))
    assert list(null["n_invalid"]) == [1, 2]
    assert null["coverage"].isna().all()
    drop = to_pandas(cf.evaluate(constructor(data), metric, by="g", invalid="drop"))
    assert list(drop["n"]) == [1, 0]
    assert list(drop["n_dropped"]) == [1, 2]
    assert_close(drop["coverage"], [1.0, np.nan])


def test_all_zero_weights_ungrouped() -> None:
    df = pl.DataFrame(_bad_frame([0.0, 0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match=r"is zero on every row of a group, in 4 rows"):
        df.conformal.width("lo", "hi", weights="w")


def test_weights_column_type_and_name() -> None:
    df = pl.DataFrame({**_bad_frame([1.0] * 4), "t": ["x"] * 4})
    with pytest.raises(TypeError, match="column 't' must be numeric"):
        df.conformal.width("lo", "hi", weights="t")
    with pytest.raises(ValueError, match="column 'wt' not found"):
        df.conformal.width("lo", "hi", weights="wt")
    with pytest.raises(TypeError, match="weights must be a column name"):
        cf.width("lo", "hi", weights=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="both a group key"):
        df.conformal.width("lo", "hi", weights="w", by="w")


def test_integer_and_boolean_weights() -> None:
    data = _bad_frame([1, 2, 3, 1])
    a = pl.DataFrame(data).conformal.width("lo", "hi", weights="w")
    b = pl.DataFrame({**data, "w": [1.0, 2.0, 3.0, 1.0]}).conformal.width("lo", "hi", weights="w")
    assert a == b


def test_caller_frame_unchanged() -> None:
    df = pd.DataFrame(make_data(4))
    before = df.copy()
    cf.evaluate(df, *metric_sets("w")["intervals"], by="g")
    pd.testing.assert_frame_equal(df, before)


NO_WEIGHTS = {
    "hsic": lambda: cf.hsic("y", "lo", "hi", weights="w"),
    "auarc": lambda: cf.auarc("yb", "s", weights="w"),
    "worst_slab_coverage": lambda: cf.worst_slab_coverage("y", "lo", "hi", features=["s"], weights="w"),
    "excess_risk_target_coverage": lambda: pl.DataFrame(make_data(0)).conformal.excess_risk_target_coverage(
        "y", "lo", "hi", features=["s"], confidence_level=0.9, weights="w"
    ),
}


@pytest.mark.parametrize("name", list(NO_WEIGHTS))
def test_no_weighted_version(name: str) -> None:
    with pytest.raises(TypeError, match=f"^{name} has no weighted version"):
        NO_WEIGHTS[name]()


#: every public metric factory and frame function (the ``.conformal`` methods but ``report``):
#: either it takes ``weights=`` or it refuses it with "<name> has no weighted version (<why>)"
WEIGHTED = {
    "auroc",
    "bias",
    "log_loss",
    "log_score",
    "mae",
    "mape",
    "mase",
    "mse",
    "rmse",
    "rmsse",
    "scaled_crps",
    "scaled_pinball",
    "smape",
    "brier",
    "classwise_ece",
    "coverage",
    "coverage_gap",
    "coverage_test",
    "crps",
    "cumulative_differences",
    "cwc",
    "ece",
    "efficiency_criteria",
    "empty_rate",
    "interval_coverage",
    "ks_test",
    "kuiper_test",
    "mce",
    "pinball_loss",
    "pit_histogram",
    "quantile_coverage",
    "quantile_crps",
    "reliability",
    "score_decomposition",
    "set_coverage",
    "set_size",
    "set_ssc",
    "set_ssc_score",
    "singleton_rate",
    "spiegelhalter_test",
    "ssc",
    "ssc_score",
    "top_label_ece",
    "confidence_ece",
    "width",
    "winkler",
    "wis",
    # issue 41, item 1: regression uncertainty calibration
    "ence",
    "ence_table",
    "mean_absolute_calibration_error",
    "miscalibration_area",
    "root_mean_squared_calibration_error",
    "sharpness",
    "uce",
    "uncertainty_calibration_curve",
    "rps",
    "energy_score",
    "variogram_score",
}
#: weighted metrics whose outputs cannot be those of repeated rows: they refuse ``counts=``
NO_COUNTS = {"pit_histogram"}
UNWEIGHTED = {
    "auarc",
    "naive_scale",
    "path_coverage",
    "pairwise_comparison",
    "relative_skill",
    "christoffersen_test",
    "corp_reliability",
    "diebold_mariano_test",
    "excess_risk_target_coverage",
    "hsic",
    "kupiec_test",
    "longest_miss_run",
    "pit_test",
    "smooth_ece",
    "worst_slab_coverage",
    "adversarial_group_calibration",  # issue 41, item 1
}


def test_every_metric_is_weighted_or_refuses_weights() -> None:
    import inspect

    from conformal_frames.namespace import FRAME_FUNCTIONS, METRIC_FACTORIES

    # report and find_slices take weights through the metrics they are given
    names = (set(METRIC_FACTORIES) | set(FRAME_FUNCTIONS)) - {"report", "find_slices"}
    assert names == WEIGHTED | UNWEIGHTED  # a new metric must be classified here
    assert not WEIGHTED & UNWEIGHTED
    for name in sorted(names):
        fn = getattr(cf, name)
        params = inspect.signature(fn).parameters
        if name in WEIGHTED:
            assert params["weights"].kind is inspect.Parameter.KEYWORD_ONLY, name
            assert params["weights"].default is None, name
            if name in NO_COUNTS:
                assert "counts" not in params, name
                with pytest.raises(TypeError, match=rf"^{name} takes no counts= \("):
                    fn(counts="k")
            else:  # frequency counts next to the weights (tests/test_counts.py)
                assert list(params).index("counts") == list(params).index("weights") + 1, name
                assert params["counts"].kind is inspect.Parameter.KEYWORD_ONLY, name
                assert params["counts"].default is None, name
        else:
            assert "weights" not in params, name
            with pytest.raises(TypeError, match=rf"^{name} has no weighted version\b.*: weights= is not supported"):
                fn(weights="w")
            with pytest.raises(TypeError, match=rf"^{name} has no weighted version\b.*: counts= is not supported"):
                fn(counts="k")


@pytest.mark.parametrize("make", [pd.DataFrame, pl.DataFrame])
def test_group_left_without_weight_by_drop_is_null_not_nan(make: Any) -> None:
    # invalid="drop" removes the only row of positive weight of group A: the
    # rest has total weight 0, so every output of A is null (never NaN from 0/0)
    data = {
        "g": ["A", "A", "A", "B", "B", "B"],
        "y": [0.0, 0.0, np.nan, 0.0, 5.0, 0.0],
        "lo": [-1.0] * 6,
        "hi": [1.0] * 6,
        "w": [0.0, 0.0, 5.0, 1.0, 1.0, 1.0],
    }
    metrics = [
        cf.coverage("y", "lo", "hi", weights="w"),
        cf.interval_coverage("y", intervals={0.8: ("lo", "hi")}, weights="w"),
        cf.quantile_coverage("y", quantiles={0.1: "lo", 0.9: "hi"}, weights="w"),
        cf.pit_histogram("y", quantiles={0.1: "lo", 0.9: "hi"}, weights="w", n_bins=2),
    ]
    out = to_pandas(cf.evaluate(make(data), *metrics, by="g", invalid="drop"))
    a = out[out["g"] == "A"].drop(columns=["g", "n"]).filter(regex="^(?!n_dropped)")  # n_dropped(_<metric>)
    outputs = [c for c in a.columns if not c.endswith(("_n", "_n_crossing"))]  # counts, not outputs
    assert a[outputs].isna().all(axis=None), a[outputs].T
    if make is pl.DataFrame:
        native = cf.evaluate(make(data), *metrics, by="g", invalid="drop")
        floats = [c for c in outputs if native[c].dtype == pl.Float64]
        assert not any(native[c].is_nan().any() for c in floats)
    b = out[out["g"] == "B"]
    assert b["coverage"].tolist() == pytest.approx([2.0 / 3.0], rel=1e-12)
