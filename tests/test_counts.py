"""Frequency counts (``counts=``): a row of count ``k`` is ``k`` identical rows.

For every metric that takes ``counts=``, ``evaluate(frame, metric(counts="k"))``
equals ``evaluate(repeated_frame, metric())`` in every output column (``n``,
intervals, p-values, bin counts included) on every backend of the
``constructor`` fixture; groups of size 1 and 2, rows of count 0 and a group
whose counts are all 0 (invalid: absent from the repeated rows) included.
With ``weights=`` too: ``w`` on ``k`` copies (sums of ``k w``, Kish on the
repeated rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas

Q = {0.1: "q10", 0.5: "q50", 0.9: "q90"}
SETS = ["c0", "c1", "c2"]
PROBS = ["p0", "p1", "p2"]
#: a group whose counts are all zero: invalid rows, absent from the repeated frame
EMPTY = "z"


def make_data(seed: int) -> dict[str, Any]:
    """Every family's columns; ties; groups a, b (large), c (1 row), d (2 rows), z (counts all 0)."""
    rng = np.random.default_rng(seed)
    g = np.array(["a"] * 14 + ["b"] * 12 + ["c"] + ["d"] * 2 + [EMPTY] * 3)
    n = len(g)
    center = np.round(rng.normal(size=n) * 2, 1)
    width = np.round(rng.gamma(2.0, 1.0, size=n), 1)
    lo = np.round(center - width / 2, 2)
    p = rng.dirichlet(np.ones(3), size=n).round(2)
    p[:, 2] = np.clip(1.0 - p[:, 0] - p[:, 1], 0.0, 1.0)
    score = np.round(rng.random(n), 1)  # tied scores
    k = rng.integers(0, 4, size=n)
    k[g == EMPTY] = 0
    k[(g == "c") | (g == "d")] = [1, 2, 3]
    k[[0, 14]] = [0, 0]  # a row of count 0 in each large group
    k[[1, 15]] = [2, 3]
    mu = np.round(rng.normal(size=n), 1)
    q = np.sort(np.round(rng.normal(size=(n, 3)) + center[:, None], 1), axis=1)
    return {
        "y": np.round(center + rng.normal(size=n), 1),
        "lo": lo,
        "hi": lo + width,
        "label": rng.integers(0, 3, size=n),
        **{c: p[:, i] > 0.2 for i, c in enumerate(SETS)},
        **{c: p[:, i] for i, c in enumerate(PROBS)},
        "yb": (rng.random(n) < score).astype(np.int64),
        "s": score,
        "mu": mu,
        "sd": np.round(rng.gamma(2.0, 0.5, size=n), 1) + 0.1,
        "q10": q[:, 0],
        "q50": q[:, 1],
        "q90": q[:, 2],
        "e0": np.round(center + rng.normal(size=n), 1),
        "e1": np.round(center + rng.normal(size=n), 1),
        "e2": np.round(center + rng.normal(size=n), 1),
        "w": np.round(rng.gamma(2.0, 1.0, size=n), 1) + 0.1,
        "k": k,
        "g": g,
    }


def metric_sets(**counted: str) -> dict[str, list[cf.Metric]]:
    """Every metric that takes ``counts=``, one list per family (one query each)."""
    w = counted
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
            cf.coverage_test("y", "lo", "hi", confidence_level=0.8, **w),
            cf.coverage_test("y", "lo", "hi", confidence_level=0.8, method="clopper-pearson", **w).alias("ct_cp"),
        ],
        "sets": [
            cf.set_coverage("label", SETS, classes=[0, 1, 2], **w),
            cf.set_size(SETS, classes=[0, 1, 2], **w),
            cf.singleton_rate(SETS, classes=[0, 1, 2], **w),
            cf.empty_rate(SETS, classes=[0, 1, 2], **w),
            cf.set_ssc("label", SETS, classes=[0, 1, 2], **w),
            cf.set_ssc_score("label", SETS, classes=[0, 1, 2], n_bins=2, **w),
            cf.efficiency_criteria("label", PROBS, classes=[0, 1, 2], confidence_level=0.8, **w),
        ],
        "calibration": [
            cf.brier("yb", "s", **w),
            cf.ece("yb", "s", n_bins=4, **w),
            cf.mce("yb", "s", n_bins=4, **w),
            cf.ece("yb", "s", n_bins=3, strategy="quantile", **w).alias("ece_q"),
            cf.mce("yb", "s", n_bins=40, **w).alias("mce_wide"),
            cf.reliability("yb", "s", n_bins=3, **w),
            cf.reliability("yb", "s", n_bins=3, strategy="quantile", **w).alias("rel_q"),
            cf.top_label_ece("label", PROBS, n_bins=3, **w),
            cf.top_label_ece("label", PROBS, n_bins=3, strategy="quantile", weighted=True, **w).alias("tl_q"),
            cf.classwise_ece("label", PROBS, n_bins=3, **w),
            cf.auroc("yb", "s", **w),
            cf.ks_test("yb", "s", **w),
            cf.kuiper_test("yb", "s", **w),
            cf.spiegelhalter_test("yb", "s", **w),
        ],
        "forecasts": [
            cf.pinball_loss("y", quantiles=Q, **w),
            cf.pinball_loss("y", quantiles=Q, per_level=True, **w).alias("pin_levels"),
            cf.quantile_coverage("y", quantiles=Q, **w),
            cf.interval_coverage("y", intervals={0.8: ("q10", "q90")}, **w),
            cf.wis("y", quantiles=Q, **w),
            cf.crps("y", mean="mu", std="sd", **w).alias("crps_gauss"),
            cf.crps("y", samples=["e0", "e1", "e2"], **w).alias("crps_ens"),
            cf.quantile_crps("y", quantiles=Q, **w).alias("crps_q"),
        ],
        "recalibration": [cf.score_decomposition("yb", "s", **w)],
        "point": [
            cf.mae("y", "mu", **w),
            cf.mse("y", "mu", **w),
            cf.rmse("y", "mu", **w),
            cf.bias("y", "mu", **w),
            cf.mape("sd", "mu", **w),
            cf.smape("y", "mu", **w),
            cf.mase("y", "mu", scale="sd", **w),
            cf.rmsse("y", "mu", scale="sd", **w),
            cf.scaled_pinball("y", quantiles=Q, scale="sd", **w),
            cf.scaled_crps("y", quantiles=Q, **w),
            cf.log_loss("yb", "s", **w),
            cf.log_score("y", mean="mu", std="sd", **w),
        ],
    }


FAMILIES = tuple(metric_sets())


def repeat_rows(data: dict[str, Any]) -> dict[str, Any]:
    """Each row repeated ``k`` times (0: dropped)."""
    k = np.asarray(data["k"])
    return {c: np.repeat(np.asarray(v), k) for c, v in data.items()}


def evaluate(make: Any, data: dict[str, Any], metrics: list[cf.Metric]) -> pd.DataFrame:
    out = to_pandas(cf.evaluate(make(data), *metrics, by="g", invalid="null"))
    return out.sort_values("g").reset_index(drop=True)


def same(counted: pd.DataFrame, repeated: pd.DataFrame, what: str) -> None:
    """Every output column of the repeated rows, ``n`` too; the all-zero group is null."""
    empty = counted[counted["g"] == EMPTY]
    assert empty["n"].tolist() == [0], what
    # flags of a null group are False on pandas (numpy booleans)
    outputs = [c for c in repeated.columns if c not in ("g", "n", "n_invalid") and not c.endswith("_flag")]
    assert empty[outputs].isna().all(axis=None), what
    rest = counted[counted["g"] != EMPTY].reset_index(drop=True)
    assert list(rest.columns) == list(repeated.columns), what
    assert list(rest["g"]) == list(repeated["g"]), what
    assert rest["n_invalid"].tolist() == [0] * len(rest), what
    for c in [c for c in repeated.columns if c != "g"]:
        assert_close(rest[c].astype(float), repeated[c].astype(float), rtol=1e-12, what=f"{what}: {c}")


@pytest.mark.parametrize("family", FAMILIES)
def test_counts_are_repeated_rows(constructor: Any, family: str) -> None:
    if constructor.id == "pyspark" and family in ("calibration", "recalibration"):
        pytest.skip("one Spark query per family is minutes: the other families cover the engine")
    numpy_steps = ("coverage_test", "ct_cp", "score_decomposition")  # eager or polars only
    lazy_sql = constructor.id in ("duckdb", "pyspark")
    if lazy_sql and family == "recalibration":
        pytest.skip("score_decomposition needs the rows of each group in numpy: eager or polars only")
    sets = metric_sets(counts="k")[family], metric_sets()[family]
    counted_metrics, metrics = ([m for m in ms if not (lazy_sql and m.output_name in numpy_steps)] for ms in sets)
    data = make_data(0)
    counted = evaluate(constructor, data, counted_metrics)
    repeated = evaluate(pl.DataFrame, repeat_rows(data), metrics)
    same(counted, repeated, family)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_counts_over_seeds_polars(seed: int) -> None:
    data = make_data(seed)
    for family in FAMILIES:
        for make in (pl.DataFrame, lambda d: pl.DataFrame(d).lazy()):
            counted = evaluate(make, data, metric_sets(counts="k")[family])
            same(counted, evaluate(make, repeat_rows(data), metric_sets()[family]), f"{family} seed {seed}")


@pytest.mark.parametrize("family", FAMILIES)
def test_weights_and_counts_are_weighted_repeated_rows(family: str) -> None:
    """``weights=`` with ``counts=``: the weights ``w`` on ``k`` copies, every output (Kish's n_eff too)."""
    data = make_data(4)
    both = evaluate(pl.DataFrame, data, metric_sets(weights="w", counts="k")[family])
    repeated = evaluate(pl.DataFrame, repeat_rows(data), metric_sets(weights="w")[family])
    same(both, repeated, family)


def test_direct_calls_equal_repeated_rows() -> None:
    data = {c: v for c, v in make_data(5).items() if c != "g"}
    df, rep = pl.DataFrame(data), pl.DataFrame(repeat_rows(data))
    assert df.conformal.coverage("y", "lo", "hi", counts="k") == pytest.approx(
        rep.conformal.coverage("y", "lo", "hi"), rel=1e-12
    )
    counted, repeated = df.conformal.ks_test("yb", "s", counts="k"), rep.conformal.ks_test("yb", "s")
    assert counted.n == repeated.n == int(np.sum(data["k"]))
    assert counted.statistic == pytest.approx(repeated.statistic, rel=1e-12)
    assert counted.pvalue == pytest.approx(repeated.pvalue, rel=1e-12)
    table = to_pandas(df.conformal.coverage("y", "lo", "hi", counts="k", by="label"))
    expected = to_pandas(rep.conformal.coverage("y", "lo", "hi", by="label"))
    for c in expected.columns:
        assert_close(table[c].astype(float), expected[c].astype(float), rtol=1e-12, what=c)


def test_cumulative_differences_counts(constructor: Any) -> None:
    data = make_data(6)
    data = {c: np.asarray(v)[np.asarray(data["g"]) != EMPTY] for c, v in data.items()}
    out = to_pandas(cf.cumulative_differences(constructor(data), "yb", "s", counts="k", by="g"))
    repeated = to_pandas(cf.cumulative_differences(pl.DataFrame(repeat_rows(data)), "yb", "s", by="g"))
    assert list(out["g"]) == list(repeated["g"])
    assert_close(out["s"], repeated["s"])
    assert list(out["n"]) == list(repeated["n"])
    assert_close(out["cumulative_difference"], repeated["cumulative_difference"], rtol=1e-12)


def test_n_calibration_with_counts() -> None:
    data = {c: np.asarray(v)[np.asarray(make_data(7)["g"]) != EMPTY] for c, v in make_data(7).items()}
    metric = {"confidence_level": 0.8, "n_calibration": 50}
    counted = evaluate(pl.DataFrame, data, [cf.coverage_test("y", "lo", "hi", counts="k", **metric)])
    repeated = evaluate(pl.DataFrame, repeat_rows(data), [cf.coverage_test("y", "lo", "hi", **metric)])
    for c in repeated.columns:
        if c != "g":
            assert_close(counted[c].astype(float), repeated[c].astype(float), rtol=1e-12, what=c)


# ---------------------------------------------------------------------------
# bad counts, refusals
# ---------------------------------------------------------------------------
def _frame(k: list[Any], dtype: Any = None) -> pl.DataFrame:
    return pl.DataFrame({"y": [0.0, 1.0, 2.0, 3.0], "lo": [-1.0] * 4, "hi": [1.5] * 4, "k": pl.Series(k, dtype=dtype)})


BAD = [
    pytest.param([1, -1, 2, 1], None, "column 'k' (counts=) has negative values in 1 row, e.g. -1", id="negative"),
    pytest.param(
        [1.0, 2.5, 2.0, 1.0], None, "column 'k' (counts=) has non-integer values in 1 row, e.g. 2.5", id="frac"
    ),
    pytest.param(
        [1.0, None, 2.0, 1.0],
        None,
        "column 'k' (counts=) has missing (null/NaN) or infinite values in 1 row",
        id="null",
    ),
    pytest.param(
        [1, None, 2, 1], None, "column 'k' (counts=) has missing (null/NaN) or infinite values in 1 row", id="null-int"
    ),
    pytest.param(
        [1.0, float("nan"), 2.0, 1.0],
        None,
        "column 'k' (counts=) has missing (null/NaN) or infinite values in 1 row",
        id="nan",
    ),
    pytest.param(
        [1.0, float("inf"), 2.0, 1.0],
        None,
        "column 'k' (counts=) has missing (null/NaN) or infinite values in 1 row",
        id="inf",
    ),
    pytest.param(
        [1, 2**53 + 1, 2, 1],
        pl.Int64,
        "column 'k' (counts=) has integers beyond 2^53, which Float64 cannot hold exactly in 1 row",
        id="big",
    ),
    pytest.param([1, 2**60, 2, 1], pl.UInt64, "column 'k' (counts=) has integers beyond 2^53", id="big-unsigned"),
    pytest.param([0, 0, 0, 0], None, "column 'k' (counts=) is zero on every row of a group, in 4 rows", id="all-zero"),
]


@pytest.mark.parametrize(("k", "dtype", "message"), BAD)
def test_bad_counts(k: list[Any], dtype: Any, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace("^", r"\^")):
        _frame(k, dtype).conformal.coverage("y", "lo", "hi", counts="k")


def test_bad_counts_are_invalid_rows() -> None:
    df = _frame([1.0, -1.0, 2.5, 3.0])
    out = df.conformal.coverage("y", "lo", "hi", counts="k", invalid="drop")
    assert out == pytest.approx(1 / 4)  # the rows of count 1 and 3 are left: y = 0 covered, y = 3 not
    kept = cf.evaluate(df, cf.coverage("y", "lo", "hi", counts="k"), invalid="drop")
    assert kept["n"].to_list() == [4] and kept["n_dropped"].to_list() == [2]
    assert kept["coverage"].to_list() == pytest.approx([1 / 4])


def test_counts_column_type_and_name() -> None:
    df = pl.DataFrame({**_frame([1, 1, 1, 1]).to_dict(as_series=False), "t": ["x"] * 4})
    with pytest.raises(TypeError, match=r"column 't' \(counts=\) must be numeric"):
        df.conformal.width("lo", "hi", counts="t")
    with pytest.raises(ValueError, match="column 'kk' not found"):
        df.conformal.width("lo", "hi", counts="kk")
    with pytest.raises(TypeError, match="counts must be a column name"):
        cf.width("lo", "hi", counts=1)  # type: ignore[arg-type]


def test_one_counts_column_per_evaluation() -> None:
    df = _frame([1, 2, 1, 1]).with_columns(k2=pl.lit(1))
    with pytest.raises(ValueError, match=r"every metric of one evaluation takes the same counts="):
        cf.evaluate(df, cf.coverage("y", "lo", "hi", counts="k"), cf.width("lo", "hi"))
    with pytest.raises(ValueError, match=r"every metric of one evaluation takes the same counts="):
        cf.evaluate(df, cf.coverage("y", "lo", "hi", counts="k"), cf.width("lo", "hi", counts="k2"))


REFUSED = {
    "hsic": lambda: cf.hsic("y", "lo", "hi", counts="k"),
    "auarc": lambda: cf.auarc("yb", "s", counts="k"),
    "pit_histogram": lambda: cf.pit_histogram("y", mean="mu", std="sd", counts="k"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused(name: str) -> None:
    with pytest.raises(TypeError, match=f"^{name} (has no weighted version|takes no counts=)"):
        REFUSED[name]()


def test_bootstrap_refuses_counts() -> None:
    with pytest.raises(TypeError, match="bootstrap resamples rows"):
        cf.evaluate(pl.DataFrame(make_data(0)), cf.bootstrap(cf.coverage("y", "lo", "hi", counts="k")), by="g")


def test_summaries_merge_counts() -> None:
    """summarize on two halves, then finalize: the evaluation of the whole (n is the sum of the counts)."""
    data = make_data(3)
    data = {c: np.asarray(v)[np.asarray(data["g"]) != EMPTY] for c, v in data.items()}
    metrics = [
        cf.coverage("y", "lo", "hi", counts="k"),
        cf.brier("yb", "s", counts="k"),
        cf.ece("yb", "s", n_bins=4, counts="k"),
        cf.auroc("yb", "s", counts="k"),
        cf.ks_test("yb", "s", counts="k"),
        cf.coverage_test("y", "lo", "hi", confidence_level=0.8, counts="k"),
    ]
    parts = [cf.summarize(pl.DataFrame({c: v[i::2] for c, v in data.items()}), *metrics, by="g") for i in range(2)]
    merged = to_pandas(cf.finalize(pl.concat(parts, how="diagonal_relaxed"), *metrics, by="g"))
    whole = evaluate(pl.DataFrame, data, metrics)
    merged = merged.sort_values("g").reset_index(drop=True)
    for c in [c for c in whole.columns if c not in ("g", "n_invalid")]:
        assert_close(merged[c].astype(float), whole[c].astype(float), rtol=1e-12, what=c)
