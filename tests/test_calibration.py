"""Calibration metrics against the numpy oracle, on every backend."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import conformal_frames as cf
import oracle_calibration as oracle
from helpers import assert_close, group_dict, to_pandas

RTOL = 1e-12
ATOL = 1e-14  # sums of O(1) terms: cancellation leaves ~n * 1e-16 absolute


def random_calibration(seed: int, n: int = 160, n_groups: int = 3) -> dict[str, np.ndarray]:
    """Binary labels and scores with ties, exact 0 and 1 scores and tiny groups.

    Groups ``g0``.. with skewed sizes, plus ``one`` (1 row), ``two`` (2 rows)
    and ``sure`` (scores exactly 0 or 1: sigma = 0).  Scores are rounded to
    two decimals so that ties occur; labels are drawn from a miscalibrated
    version of the score.  Three class-probability columns ``p0 p1 p2``
    (rounded, so that the arg-max can tie) and a label ``c`` in 0..2.
    """
    rng = np.random.default_rng(seed)
    s = np.round(rng.beta(0.8, 0.8, size=n), 2)
    s[rng.random(n) < 0.05] = 0.0
    s[rng.random(n) < 0.05] = 1.0
    y = (rng.random(n) < np.clip(s * 0.8 + 0.1, 0, 1)).astype(float)
    p = rng.dirichlet(np.ones(n_groups) * 0.7)
    groups = rng.choice([f"g{i}" for i in range(n_groups)], size=n - 7, p=p)
    g = np.concatenate([groups, ["one", "two", "two", "sure", "sure", "sure", "sure"]])
    s[-4:] = [0.0, 1.0, 1.0, 0.0]
    y[-4:] = [0.0, 1.0, 0.0, 0.0]  # one label contradicts its certain score
    probs = np.round(rng.dirichlet(np.ones(3), size=n), 1)
    probs = probs / probs.sum(axis=1, keepdims=True)
    probs = np.round(probs, 2)  # rows need not sum exactly to 1
    c = rng.integers(0, 3, size=n)
    return {"y": y, "s": s, "g": g, "p0": probs[:, 0], "p1": probs[:, 1], "p2": probs[:, 2], "c": c}


def _binary_metrics(num_bins: int, strategy: str):
    return [
        cf.ece("y", "s", n_bins=num_bins, strategy=strategy),
        cf.mce("y", "s", n_bins=num_bins, strategy=strategy),
        cf.brier("y", "s"),
        cf.ks_test("y", "s"),
        cf.kuiper_test("y", "s"),
        cf.spiegelhalter_test("y", "s"),
    ]


BINARY_COLUMNS = [
    "ece",
    "mce",
    "brier",
    "ks_test",
    "ks_test_pvalue",
    "kuiper_test",
    "kuiper_test_pvalue",
    "spiegelhalter_test",
    "spiegelhalter_test_pvalue",
    "n",
]


def _expected_binary(y, s, num_bins, strategy):
    return [
        oracle.ece(y, s, num_bins, strategy),
        oracle.mce(y, s, num_bins, strategy),
        oracle.brier(y, s),
        *oracle.ks(y, s),
        *oracle.kuiper(y, s),
        *oracle.spiegelhalter(y, s),
        len(y),
    ]


@pytest.mark.spark_cases([{"seed": 0}, {"seed": 1}])  # one uniform, one quantile
@pytest.mark.parametrize(("seed", "num_bins", "strategy"), [(0, 10, "uniform"), (1, 3, "quantile"), (2, 7, "uniform")])
def test_grouped_binary_metrics_match_oracle(constructor, seed, num_bins, strategy):
    d = random_calibration(seed)
    out = to_pandas(cf.evaluate(constructor(d), *_binary_metrics(num_bins, strategy), by="g"))
    groups = group_dict(d["g"])
    assert list(out["g"]) == sorted(groups)
    expected = np.array([_expected_binary(d["y"][i], d["s"][i], num_bins, strategy) for i in groups.values()])
    assert_close(out[BINARY_COLUMNS].to_numpy(), expected, rtol=RTOL, atol=ATOL, what=constructor.id)
    # the degenerate group: sigma = 0 and a contradicted certain score
    sure = out[out["g"] == "sure"].iloc[0]
    assert sure["ks_test"] == math.inf and sure["ks_test_pvalue"] == 0.0 and sure["kuiper_test_pvalue"] == 0.0


@pytest.mark.spark_cases([{"seed": 0}, {"seed": 1}])  # one uniform, one quantile
@pytest.mark.parametrize(("seed", "num_bins", "strategy"), [(0, 1, "uniform"), (1, 10, "quantile"), (2, 1, "quantile")])
def test_ungrouped_binary_metrics_match_oracle(constructor, seed, num_bins, strategy):
    d = random_calibration(seed)
    keep = d["g"] != "sure"
    d = {k: v[keep] for k, v in d.items()}
    out = to_pandas(cf.evaluate(constructor(d), *_binary_metrics(num_bins, strategy)))
    assert len(out) == 1
    expected = np.array([_expected_binary(d["y"], d["s"], num_bins, strategy)])
    assert_close(out[BINARY_COLUMNS].to_numpy(), expected, rtol=RTOL, atol=ATOL, what=constructor.id)


def test_direct_calls_return_float_and_test_result(eager_constructor):
    d = random_calibration(3)
    keep = d["g"] != "sure"
    y, s = d["y"][keep], d["s"][keep]
    frame = eager_constructor({"y": y, "s": s})
    ns = cf.conformal(frame)
    assert ns.ece("y", "s", n_bins=5) == pytest.approx(oracle.ece(y, s, 5), rel=RTOL)
    assert isinstance(ns.brier("y", "s"), float)
    res = ns.ks_test("y", "s")
    assert isinstance(res, cf.KSTestResult) and isinstance(res, cf.TestResult)
    stat, p = res
    assert (stat, p) == pytest.approx(oracle.ks(y, s), rel=RTOL)
    assert res.n == len(y) and isinstance(res.n, int)
    ku = ns.kuiper_test("y", "s")
    assert isinstance(ku, cf.KuiperTestResult) and ku.n == len(y)
    assert tuple(ku) == pytest.approx(oracle.kuiper(y, s), rel=RTOL)
    sp = ns.spiegelhalter_test("y", "s")
    assert isinstance(sp, cf.SpiegelhalterTestResult) and sp.n == len(y)
    assert (sp.statistic, sp.pvalue) == pytest.approx(oracle.spiegelhalter(y, s), rel=RTOL)


def test_lazy_input_stays_lazy(lazy_constructor):
    d = random_calibration(0)
    result = cf.evaluate(lazy_constructor(d), *_binary_metrics(5, "quantile"), by="g")
    import narwhals.stable.v2 as nw

    assert isinstance(nw.from_native(result), nw.LazyFrame)


# ---------------------------------------------------------------------------
# reliability table, cumulative differences
# ---------------------------------------------------------------------------
@pytest.mark.spark_cases(seed=0)  # both strategies
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("num_bins", "strategy"), [(5, "uniform"), (4, "quantile")])
def test_reliability_matches_oracle(constructor, seed, num_bins, strategy):
    d = random_calibration(seed)
    out = to_pandas(
        cf.conformal(constructor(d)).reliability("y", "s", n_bins=num_bins, strategy=strategy, ci_level=0.9, by="g")
    )
    assert list(out.columns) == ["g", "bin", "mean_score", "frequency", "frequency_ci_low", "frequency_ci_high", "n"]
    expected = []
    for key, idx in group_dict(d["g"]).items():
        for row in oracle.reliability(d["y"][idx], d["s"][idx], num_bins, strategy, 0.9):
            expected.append((key, *row))
    assert [(k, int(b)) for k, b in zip(out["g"], out["bin"])] == [(e[0], e[1]) for e in expected]
    values = np.array([e[2:] for e in expected], dtype=float)
    assert_close(
        out[["mean_score", "frequency", "frequency_ci_low", "frequency_ci_high", "n"]].to_numpy(),
        values,
        rtol=1e-12,
        atol=1e-15,
    )


def test_reliability_in_evaluate_is_wide(constructor):
    d = random_calibration(1)
    out = to_pandas(cf.evaluate(constructor(d), cf.reliability("y", "s", n_bins=2), cf.ece("y", "s", n_bins=2)))
    assert {"reliability_bin0_mean_score", "reliability_bin1_n", "ece"} <= set(out.columns)
    assert out["reliability_bin0_n"].iloc[0] + out["reliability_bin1_n"].iloc[0] == len(d["y"])


@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", [0, 1])
def test_cumulative_differences_match_oracle(constructor, seed):
    d = random_calibration(seed)
    out = to_pandas(cf.cumulative_differences(constructor(d), "y", "s", by="g"))
    assert list(out.columns) == ["g", "s", "n", "cumulative_difference"]
    rows = []
    for key, idx in group_dict(d["g"]).items():
        values, counts, c = oracle.cumulative_differences(d["y"][idx], d["s"][idx])
        rows += [(key, v, n, ci) for v, n, ci in zip(values, counts, c)]
    assert list(out["g"]) == [r[0] for r in rows]
    assert_close(
        out[["s", "n", "cumulative_difference"]].to_numpy(),
        np.array([r[1:] for r in rows], dtype=float),
        rtol=RTOL,
        atol=ATOL,
    )


def test_cumulative_differences_ungrouped_and_types(constructor):
    d = {"y": np.array([1.0, 0.0, 1.0, 0.0]), "s": np.array([0.5, 0.5, 0.25, 0.75])}
    frame = constructor(d)
    result = cf.cumulative_differences(frame, "y", "s")
    assert type(result) is type(frame)  # caller's type, lazy stays lazy
    out = to_pandas(result)
    assert_close(out["s"], [0.25, 0.5, 0.75])
    assert_close(out["cumulative_difference"], [0.1875, 0.1875, 0.0], rtol=RTOL, atol=1e-16)


# ---------------------------------------------------------------------------
# multiclass
# ---------------------------------------------------------------------------
PROBS = ["p0", "p1", "p2"]


@pytest.mark.spark_cases([{"seed": 0}, {"seed": 1}])  # one uniform, one quantile
@pytest.mark.parametrize(("seed", "num_bins", "strategy"), [(0, 10, "uniform"), (1, 3, "quantile"), (2, 5, "uniform")])
def test_top_label_and_classwise_match_oracle(constructor, seed, num_bins, strategy):
    d = random_calibration(seed)
    metrics = [
        cf.top_label_ece("c", PROBS, classes=[0, 1, 2], n_bins=num_bins, strategy=strategy),
        cf.top_label_ece("c", PROBS, n_bins=num_bins, strategy=strategy, weighted=True).alias("tl_w"),
        cf.classwise_ece("c", PROBS, classes=[0, 1, 2], n_bins=num_bins, strategy=strategy),
    ]
    out = to_pandas(cf.evaluate(constructor(d), *metrics, by="g"))
    probs = np.column_stack([d[p] for p in PROBS])
    expected = []
    for idx in group_dict(d["g"]).values():
        args = (d["c"][idx], probs[idx], [0, 1, 2], num_bins, strategy)
        expected.append(
            [oracle.top_label_ece(*args), oracle.top_label_ece(*args, weighted=True), oracle.classwise_ece(*args)]
        )
    assert_close(out[["top_label_ece", "tl_w", "classwise_ece"]].to_numpy(), np.array(expected), rtol=RTOL, atol=ATOL)


def test_top_label_string_classes_and_argmax_ties(constructor):
    # rows 0 and 1 tie between the first two columns: the first column wins
    d = {
        "y": np.array(["a", "b", "b", "c", "a"]),
        "pa": np.array([0.4, 0.4, 0.1, 0.2, 0.9]),
        "pb": np.array([0.4, 0.4, 0.8, 0.2, 0.05]),
        "pc": np.array([0.2, 0.2, 0.1, 0.6, 0.05]),
    }
    out = to_pandas(
        cf.evaluate(constructor(d), cf.top_label_ece("y", ["pa", "pb", "pc"], classes=["a", "b", "c"], n_bins=4))
    )
    probs = np.column_stack([d["pa"], d["pb"], d["pc"]])
    expected = oracle.top_label_ece(d["y"], probs, ["a", "b", "c"], 4, "uniform")
    # by hand: label a (rows 0, 1, 4): bin 1 {0.4, 0.4} has y==a once: |0.5 - 0.4|;
    # bin 3 {0.9} correct: 0.1 -> (2*0.1 + 0.1)/3 = 0.1; label b: |1 - 0.8| = 0.2;
    # label c: |1 - 0.6| = 0.4; mean = 0.7 / 3
    assert expected == pytest.approx(0.7 / 3, rel=1e-12)
    assert_close(out["top_label_ece"], [expected], rtol=RTOL)


# ---------------------------------------------------------------------------
# order independence and the reference's worked numbers
# ---------------------------------------------------------------------------
def test_results_do_not_depend_on_row_order(constructor):
    d = random_calibration(4)
    perm = np.random.default_rng(5).permutation(len(d["y"]))
    shuffled = {k: v[perm] for k, v in d.items()}
    metrics = [*_binary_metrics(4, "quantile"), cf.top_label_ece("c", PROBS, strategy="quantile", n_bins=3)]
    a = to_pandas(cf.evaluate(constructor(d), *metrics, by="g"))
    b = to_pandas(cf.evaluate(constructor(shuffled), *metrics, by="g"))
    cols = [c for c in a.columns if c != "g"]
    assert_close(a[cols].to_numpy(), b[cols].to_numpy(), rtol=RTOL, atol=ATOL)


def test_reference_worked_numbers(constructor):
    # reference (003): KS 0.978, Spiegelhalter -0.757 on this tie-free-in-effect data
    d = {"y": np.array([0.0, 1, 0, 1, 0]), "s": np.array([0.1, 0.9, 0.21, 0.9, 0.5])}
    out = to_pandas(cf.evaluate(constructor(d), cf.ks_test("y", "s"), cf.spiegelhalter_test("y", "s")))
    assert round(out["ks_test"].iloc[0], 3) == 0.978
    assert round(out["spiegelhalter_test"].iloc[0], 3) == -0.757
    # reference: Spiegelhalter p 0.8486 (ties do not matter for sums)
    d2 = {"y": np.array([1.0, 0, 1, 0, 1, 0]), "s": np.array([0.8, 0.3, 0.5, 0.5, 0.7, 0.1])}
    out2 = to_pandas(cf.evaluate(constructor(d2), cf.spiegelhalter_test("y", "s", alternative="greater")))
    assert round(out2["spiegelhalter_test_pvalue"].iloc[0], 4) == 0.8486


def test_reference_ks_pvalue_on_tie_free_data(constructor):
    # the reference's KS p-value example with its tie (0.5, 0.5) broken by a
    # tiny offset in the direction its jitter happens to take: then our
    # definition and the reference's agree (0.7857)
    d = {"y": np.array([1.0, 0, 1, 0, 1, 0]), "s": np.array([0.8, 0.3, 0.5 + 1e-9, 0.5, 0.7, 0.1])}
    out = to_pandas(cf.evaluate(constructor(d), cf.ks_test("y", "s")))
    assert round(out["ks_test_pvalue"].iloc[0], 4) == 0.7857


# ---------------------------------------------------------------------------
# deliberate differences from the baseline (DESIGN §5), pinned
# ---------------------------------------------------------------------------
def test_diff_uniform_ece_has_m_real_bins(constructor):
    # M = 2: bins [0, 0.5) and [0.5, 1]; the baseline's edges are linspace(0, 1, 2)
    # so both scores land in one bin and it reports 0.0
    d = {"y": np.array([0.0, 1.0]), "s": np.array([0.25, 0.75])}
    out = to_pandas(cf.evaluate(constructor(d), cf.ece("y", "s", n_bins=2)))
    assert_close(out["ece"], [0.25])


def test_diff_kuiper_includes_c0(constructor):
    # reference data: baseline Kuiper 0.857 < its KS 0.978 (C_0 omitted); with
    # C_0 = 0 the path never rises above 0, so Kuiper = KS
    d = {"y": np.array([0.0, 1, 0, 1, 0]), "s": np.array([0.1, 0.9, 0.21, 0.9, 0.5])}
    out = to_pandas(cf.evaluate(constructor(d), cf.ks_test("y", "s"), cf.kuiper_test("y", "s")))
    assert round(out["kuiper_test"].iloc[0], 3) == 0.978
    assert out["kuiper_test"].iloc[0] >= out["ks_test"].iloc[0] - 1e-15


def test_diff_ties_are_deterministic(constructor):
    # the reference's KS example has tied scores 0.5 with labels 1 and 0; the
    # baseline orders them by random jitter (p = 0.7857); we take C at the
    # distinct score: G = 0.3698, p = 0.99985, for every row order
    y = np.array([1.0, 0, 1, 0, 1, 0])
    s = np.array([0.8, 0.3, 0.5, 0.5, 0.7, 0.1])
    for order in (np.arange(6), np.array([3, 2, 1, 0, 5, 4])):
        out = to_pandas(cf.evaluate(constructor({"y": y[order], "s": s[order]}), cf.ks_test("y", "s")))
        assert_close(out[["ks_test", "ks_test_pvalue"]].to_numpy(), [oracle.ks(y, s)], rtol=RTOL)
        assert round(out["ks_test"].iloc[0], 4) == 0.3698


def test_diff_quantile_bins_follow_scores_not_row_order(constructor):
    # equal-count bins by score: rows sorted or reversed give the same bins
    y = np.array([0.0, 0, 1, 1, 1, 0])
    s = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    a = to_pandas(cf.evaluate(constructor({"y": y, "s": s}), cf.ece("y", "s", n_bins=2, strategy="quantile")))
    b = to_pandas(
        cf.evaluate(constructor({"y": y[::-1], "s": s[::-1]}), cf.ece("y", "s", n_bins=2, strategy="quantile"))
    )
    assert_close(a["ece"], [oracle.ece(y, s, 2, "quantile")], rtol=RTOL)
    assert_close(b["ece"], a["ece"], rtol=RTOL)


def _invalid(constructor, d, metric, match):
    frame = constructor(d)
    if constructor.lazy:
        out = to_pandas(cf.evaluate(frame, metric))
        assert out["n_invalid"].iloc[0] >= 1
        assert out[metric.output_name].isna().all()
    else:
        with pytest.raises(ValueError, match=match):
            cf.evaluate(frame, metric)


def test_diff_scores_outside_unit_interval_are_errors(constructor):
    d = {"y": np.array([0.0, 1.0, 1.0]), "s": np.array([0.2, 1.2, 0.5])}
    _invalid(constructor, d, cf.ece("y", "s"), r"column 's' has values outside \[0, 1\] in 1 row")
    _invalid(constructor, d, cf.ks_test("y", "s"), r"outside \[0, 1\]")


def test_diff_a_single_missing_value_is_an_error(constructor):
    d = {"y": np.array([0.0, 1.0, 1.0]), "s": np.array([0.2, np.nan, 0.5])}
    _invalid(constructor, d, cf.ece("y", "s"), "column 's' has missing")
    _invalid(constructor, d, cf.kuiper_test("y", "s"), "column 's' has missing")


def test_diff_labels_are_never_remapped(constructor):
    d = {"y": np.array([1.0, 2.0, 2.0]), "s": np.array([0.2, 0.4, 0.5])}
    _invalid(constructor, d, cf.ece("y", "s"), "column 'y' has labels other than 0 and 1 in 2 rows")
    _invalid(constructor, d, cf.spiegelhalter_test("y", "s"), "labels other than 0 and 1")


def test_unknown_class_labels_are_errors(constructor):
    d = {"y": np.array([0, 1, -1]), "p0": np.array([0.2, 0.6, 0.5]), "p1": np.array([0.8, 0.4, 0.5])}
    _invalid(constructor, d, cf.top_label_ece("y", ["p0", "p1"]), "not among classes")
    _invalid(constructor, d, cf.classwise_ece("y", ["p0", "p1"]), "not among classes")


def test_input_frame_is_not_modified(eager_constructor):
    d = random_calibration(0)
    frame = eager_constructor(d)
    before = to_pandas(frame).copy()
    cf.evaluate(frame, *_binary_metrics(5, "quantile"), cf.top_label_ece("c", PROBS), by="g")
    cf.cumulative_differences(frame, "y", "s", by="g")
    after = to_pandas(frame)
    assert before.equals(after)


def test_boolean_labels(constructor):
    d = {"y": np.array([True, False, True, True]), "s": np.array([0.9, 0.2, 0.4, 0.6])}
    out = to_pandas(cf.evaluate(constructor(d), cf.ece("y", "s", n_bins=3), cf.ks_test("y", "s")))
    y = d["y"].astype(float)
    assert_close(
        out[["ece", "ks_test", "ks_test_pvalue"]].to_numpy(),
        [[oracle.ece(y, d["s"], 3), *oracle.ks(y, d["s"])]],
        rtol=RTOL,
    )


# ---------------------------------------------------------------------------
# degenerate groups and parameters
# ---------------------------------------------------------------------------
def test_sigma_zero_groups(constructor):
    d = {
        "g": np.array(["agree", "agree", "half", "half", "contra", "contra"]),
        "y": np.array([0.0, 1.0, 1.0, 0.0, 1.0, 1.0]),
        "s": np.array([0.0, 1.0, 0.5, 0.5, 0.0, 1.0]),
    }
    out = to_pandas(
        cf.evaluate(
            constructor(d), cf.ks_test("y", "s"), cf.kuiper_test("y", "s"), cf.spiegelhalter_test("y", "s"), by="g"
        )
    )
    out = out.set_index("g")
    # every label equals its certain score: no information -> null
    assert (
        out.loc["agree", ["ks_test", "ks_test_pvalue", "kuiper_test", "kuiper_test_pvalue", "spiegelhalter_test"]]
        .isna()
        .all()
    )
    # a label contradicting a certain score: statistic +inf, p-value 0
    assert out.loc["contra", "ks_test"] == math.inf and out.loc["contra", "ks_test_pvalue"] == 0.0
    assert out.loc["contra", "spiegelhalter_test"] == math.inf and out.loc["contra", "spiegelhalter_test_pvalue"] == 0.0
    # scores 1/2: Spiegelhalter's variance is 0 and so is its numerator -> null;
    # KS is defined (sigma > 0)
    assert pd.isna(out.loc["half", "spiegelhalter_test"])
    assert_close(
        out.loc["half", ["ks_test", "ks_test_pvalue"]].to_numpy(),
        oracle.ks(np.array([1.0, 0.0]), np.array([0.5, 0.5])),
        rtol=RTOL,
    )


@pytest.mark.parametrize(
    ("bad", "error"), [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError), (None, TypeError)]
)
def test_invalid_n_bins(bad, error):
    with pytest.raises(error, match="n_bins"):
        cf.ece("y", "s", n_bins=bad)
    with pytest.raises(error, match="n_bins"):
        cf.reliability("y", "s", n_bins=bad)


def test_invalid_parameters():
    with pytest.raises(ValueError, match="strategy"):
        cf.ece("y", "s", strategy="array split")
    with pytest.raises(ValueError, match="mismatched"):
        cf.top_label_ece("y", ["a", "b"], classes=[0, 1, 2])
    with pytest.raises(TypeError, match="probs"):
        cf.classwise_ece("y", "p0")
    with pytest.raises(ValueError, match="ci_level"):
        cf.reliability("y", "s", ci_level=1.0)


def test_probability_rows_need_not_sum_to_one(constructor):
    # documented: only the maximum and its position are used by top-label ECE
    d = {"y": np.array([0, 1]), "p0": np.array([0.9, 0.1]), "p1": np.array([0.3, 0.5])}
    out = to_pandas(cf.evaluate(constructor(d), cf.top_label_ece("y", ["p0", "p1"], n_bins=2)))
    assert_close(out["top_label_ece"], [(0.1 + 0.5) / 2], rtol=RTOL)


def test_cumulative_differences_invalid_rows(constructor):
    d = {"g": np.array(["a", "a", "b", "b"]), "y": np.array([1.0, 0.0, 1.0, 0.0]), "s": np.array([0.5, 0.2, 1.5, 0.3])}
    frame = constructor(d)
    if not constructor.lazy:
        with pytest.raises(ValueError, match=r"column 's' has values outside \[0, 1\] in 1 row"):
            cf.cumulative_differences(frame, "y", "s", by="g")
        return
    out = to_pandas(cf.cumulative_differences(frame, "y", "s", by="g"))
    assert list(out["g"]) == ["a", "a", "b", "b"]
    assert_close(out["cumulative_difference"], [-0.1, 0.15, np.nan, np.nan], rtol=RTOL)


# ---------------------------------------------------------------------------
# property-based: small samples with many ties, polars eager
# ---------------------------------------------------------------------------
def test_random_small_samples_match_oracle():
    import polars as pl
    from hypothesis import given, settings
    from hypothesis import strategies as st

    grid = [0.0, 0.1, 0.25, 0.3, 0.5, 0.7, 0.75, 0.9, 1.0]

    @settings(max_examples=40, deadline=None)
    @given(
        st.lists(st.tuples(st.sampled_from(grid), st.sampled_from([0.0, 1.0])), min_size=1, max_size=12),
        st.integers(1, 5),
    )
    def check(pairs, num_bins):
        s = np.array([p[0] for p in pairs])
        y = np.array([p[1] for p in pairs])
        out = cf.evaluate(
            pl.DataFrame({"y": y, "s": s}),
            cf.ece("y", "s", n_bins=num_bins),
            cf.ece("y", "s", n_bins=num_bins, strategy="quantile").alias("ece_q"),
            cf.ks_test("y", "s"),
            cf.kuiper_test("y", "s"),
        )
        expected = [
            oracle.ece(y, s, num_bins),
            oracle.ece(y, s, num_bins, "quantile"),
            *oracle.ks(y, s),
            *oracle.kuiper(y, s),
        ]
        got = out.select("ece", "ece_q", "ks_test", "ks_test_pvalue", "kuiper_test", "kuiper_test_pvalue").row(0)
        assert_close(np.array(got, dtype=object), expected, rtol=RTOL, atol=ATOL)

    check()


def test_uniform_bins_decimal_edges_start_their_bin(constructor):
    # 0.1 * k written as decimals go to bin k with M = 10 (M * s is rounded
    # identically on every backend); 1.0 goes to the last bin
    s = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    d = {"y": np.zeros(len(s)), "s": s}
    out = to_pandas(cf.conformal(constructor(d)).reliability("y", "s", n_bins=10))
    assert out["bin"].tolist() == list(range(10))
    assert out["n"].tolist() == [1] * 9 + [2]


# ---------------------------------------------------------------------------
# issue 15 finding 5: a score equal to a decimal edge m/M starts its bin, in
# Float64 and in Float32, with uniform bins on every backend
# ---------------------------------------------------------------------------
EDGE_BINS = [10, 15, 20, 50, 100]


def _edge_frame(num_bins: int, dtype: type) -> dict[str, np.ndarray]:
    # each edge as the decimal literal a user writes, parsed in the column's precision
    s = np.array([repr(m / num_bins) for m in range(num_bins + 1)]).astype(dtype)
    return {"y": (np.arange(num_bins + 1) % 2).astype(float), "s": s}


# The long table of many bins takes minutes on DuckDB/Spark (one union part per
# bin; a speed problem for the speed issue): every backend checks 10 bins, the
# eager backends check the other bin counts; the edge rule itself is checked
# on every backend for every M through ECE/MCE below.
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["Float64", "Float32"])
@pytest.mark.parametrize("num_bins", [10])
def test_every_decimal_edge_starts_its_bin(constructor, num_bins, dtype):
    _check_edge_reliability(constructor, num_bins, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["Float64", "Float32"])
@pytest.mark.parametrize("num_bins", [15, 20, 50])
def test_every_decimal_edge_starts_its_bin_eager(eager_constructor, num_bins, dtype):
    _check_edge_reliability(eager_constructor, num_bins, dtype)


def _check_edge_reliability(constructor, num_bins, dtype):
    d = _edge_frame(num_bins, dtype)
    out = to_pandas(cf.conformal(constructor(d)).reliability("y", "s", n_bins=num_bins))
    # edge m/M is the only row of bin m; 1.0 joins the last bin
    assert out["bin"].tolist() == list(range(num_bins))
    assert out["n"].tolist() == [1] * (num_bins - 1) + [2]
    assert_close(out["mean_score"][: num_bins - 1], d["s"][: num_bins - 1].astype(float))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["Float64", "Float32"])
@pytest.mark.spark_cases([{"num_bins": 10}, {"num_bins": 100}])  # both dtypes
@pytest.mark.parametrize("num_bins", EDGE_BINS)
def test_every_decimal_edge_starts_its_bin_in_ece(constructor, num_bins, dtype):
    # ECE / MCE (main aggregation up to 32 bins, a sub-query above).  Labels
    # alternate, so an edge that fell into the previous bin would merge two
    # rows and change both values: with every edge in its own bin, ECE is
    # the mean of |y - s| except for the last bin, which holds (M-1)/M and 1
    d = _edge_frame(num_bins, dtype)
    y, s = d["y"], d["s"].astype(float)
    last = abs(y[-2] + y[-1] - s[-2] - s[-1])
    expected_ece = (np.abs(y[:-2] - s[:-2]).sum() + last) / len(y)
    expected_mce = max(np.abs(y[:-2] - s[:-2]).max(), last / 2)
    metrics = [cf.ece("y", "s", n_bins=num_bins), cf.mce("y", "s", n_bins=num_bins)]
    out = to_pandas(cf.evaluate(constructor(d), *metrics))
    assert_close(out["ece"], [expected_ece], rtol=RTOL, atol=ATOL)
    assert_close(out["mce"], [expected_mce], rtol=RTOL, atol=ATOL)
    # the oracle follows the same documented rule
    assert oracle.uniform_bins(d["s"], num_bins).tolist() == [*range(num_bins), num_bins - 1]
    assert_close(out["ece"], [oracle.ece(y, d["s"], num_bins)], rtol=RTOL, atol=ATOL)


def _edge_neighbours(edges: list[float], dtype: type) -> tuple[dict[str, np.ndarray], float, float]:
    """Each edge with a score just below it (previous bin) and opposite labels.

    Returns the frame and the ECE / MCE when every edge starts its own bin
    (an edge that fell into the previous bin would share it with its
    neighbour and change both values).
    """
    s = np.array([v for e in edges for v in (e - 0.005, e)]).astype(dtype)
    y = np.tile([1.0, 0.0], len(edges))
    gaps = np.abs(y - s.astype(float))
    return {"y": y, "s": s}, float(gaps.sum() / len(y)), float(gaps.max())


@pytest.mark.parametrize(
    ("edges", "n_bins", "dtype"), [([0.29, 0.57], 100, np.float64), ([0.7, 0.9], 10, np.float32)], ids=["f64", "f32"]
)
def test_issue_edge_snippets(constructor, edges, n_bins, dtype):
    # the issue's scores: 0.57 and 0.29 with 100 bins, Float32 0.7 and 0.9 with 10
    d, ece, mce = _edge_neighbours(edges, dtype)
    metrics = [cf.ece("y", "s", n_bins=n_bins), cf.mce("y", "s", n_bins=n_bins)]
    out = to_pandas(cf.evaluate(constructor(d), *metrics))
    assert_close(out["ece"], [ece], rtol=RTOL, atol=ATOL)
    assert_close(out["mce"], [mce], rtol=RTOL, atol=ATOL)


def test_top_label_edges_follow_the_float32_rule(constructor):
    # the confidence of top-label ECE comes from Float32 probability columns:
    # 0.7 and 0.75 share bin 7, 0.9 is alone in bin 9 (all predict label 1)
    p1 = np.array([0.7, 0.75, 0.9], dtype=np.float32)
    d = {"c": np.array([1, 0, 1]), "p0": np.array([0.3, 0.25, 0.1], dtype=np.float32), "p1": p1}
    out = to_pandas(cf.evaluate(constructor(d), cf.top_label_ece("c", ["p0", "p1"], n_bins=10)))
    s = p1.astype(float)
    expected = (abs(1.0 - (s[0] + s[1])) + abs(1.0 - s[2])) / 3
    assert_close(out["top_label_ece"], [expected], rtol=RTOL, atol=ATOL)


def test_reliability_intervals_contain_the_frequency(constructor):
    # bins whose frequency is 0 or 1, of every size 1..200 (Wilson rounding)
    sizes = np.arange(1, 201)
    g = np.repeat(np.arange(200), 2 * sizes)
    y = np.concatenate([np.r_[np.zeros(k), np.ones(k)] for k in sizes])
    s = np.where(y == 1, 0.95, 0.05)  # all zeros in bin 0, all ones in bin 9
    out = to_pandas(cf.conformal(constructor({"g": g, "y": y, "s": s})).reliability("y", "s", by="g"))
    assert len(out) == 400 and set(out["frequency"]) == {0.0, 1.0}
    assert ((out["frequency_ci_low"] <= out["frequency"]) & (out["frequency"] <= out["frequency_ci_high"])).all()


@pytest.mark.parametrize(
    "column, values",
    [
        ("s", [0.2, 1.5, 0.5, 0.4]),
        ("s", [-0.5, -0.5, 2.0, 0.4]),
        ("y", [2.0, 2.0, 5.0, 1.0]),
        ("y", [-1.0, -1.0, 0.0, 0.0]),
    ],
)
def test_pandas_bad_values_raise_without_numpy_warnings(column, values):
    # issue 15 finding 8: no RuntimeWarning (e.g. "invalid value encountered
    # in sqrt") printed before the clean error
    import warnings

    d = {"y": [0.0, 1.0, 1.0, 0.0], "s": [0.2, 0.6, 0.5, 0.4], "g": ["a", "a", "b", "b"], "t": [0.5] * 4}
    d[column] = values
    frame = pd.DataFrame(d)
    for name in cf.metrics.calibration.METHODS:
        if name == "rps":  # class probabilities that sum to 1: its bad input in test_categorical_scores.py
            continue
        factory = getattr(cf, name)
        metric = (
            factory("y", ["s", "t"])
            if name in ("top_label_ece", "confidence_ece", "classwise_ece")
            else factory("y", "s")
        )
        for by in (None, "g"):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with pytest.raises(ValueError, match=f"column '{column}'"):
                    cf.evaluate(frame, metric, by=by)
