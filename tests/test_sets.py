"""Prediction-set metrics against the numpy oracle, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import conformal_frames as cf
import oracle_sets as osets
from helpers import assert_close, group_dict, to_pandas

SEEDS = [0, 1, 2]


def _sets_arg(d, list_column):
    return "s" if list_column else [f"m{j}" for j in range(d["m"].shape[1])]


def _metrics(d, list_column, num_bins):
    s, classes = _sets_arg(d, list_column), d["classes"]
    return [
        cf.set_coverage("y", s, classes=classes, ci_level=0.9),
        cf.set_size(s, classes=classes),
        cf.singleton_rate(s, classes=classes),
        cf.empty_rate(s, classes=classes),
        cf.set_ssc_score("y", s, classes=classes, n_bins=num_bins),
    ]


COLUMNS = [
    "set_coverage",
    "set_coverage_ci_low",
    "set_coverage_ci_high",
    "set_size",
    "singleton_rate",
    "empty_rate",
    "set_ssc_score",
    "n",
]


def _expected(d, idx, num_bins):
    from oracle import wilson

    yi, m = d["yi"][idx], d["m"][idx]
    k = osets.set_covered(yi, m).sum()
    low, high = wilson(k, len(idx), 0.9)
    return [
        osets.set_coverage(yi, m),
        low,
        high,
        osets.set_size(m),
        osets.size_rate(m, 1),
        osets.size_rate(m, 0),
        osets.set_ssc_score(yi, m, num_bins),
        len(idx),
    ]


# on Spark: each (strings, list_column) pair once, each (seed, num_bins) twice
@pytest.mark.spark_cases(
    [{"strings": s, "list_column": c, "seed": int(s != c)} for s in (False, True) for c in (False, True)]
)
@pytest.mark.parametrize(("seed", "num_bins"), [(0, None), (1, 2)])
@pytest.mark.parametrize("list_column", [False, True], ids=["membership", "list"])
@pytest.mark.parametrize("strings", [False, True], ids=["int", "str"])
def test_grouped_set_metrics_match_oracle(constructor, seed, list_column, strings, num_bins):
    d = osets.random_sets(seed, strings=strings)
    frame = constructor(osets.frame_dict(d, list_column=list_column))
    metrics = _metrics(d, list_column, num_bins)
    out = to_pandas(cf.evaluate(frame, *metrics, by="g"))
    groups = group_dict(d["g"])
    assert list(out["g"]) == sorted(groups)
    expected = np.array([_expected(d, idx, num_bins) for idx in groups.values()])
    assert_close(out[COLUMNS].to_numpy(), expected, rtol=1e-12, atol=1e-15, what=constructor.id)
    # ungrouped: same numbers over all rows
    whole = to_pandas(cf.evaluate(frame, *metrics))
    assert_close(whole[COLUMNS].to_numpy(), [_expected(d, np.arange(len(d["g"])), num_bins)], rtol=1e-12)


@pytest.mark.spark_cases(seed=0)  # every num_bins
@pytest.mark.parametrize("seed", SEEDS[:2])
@pytest.mark.parametrize("num_bins", [None, 1, 2, 5])
def test_set_ssc_long_matches_oracle(constructor, seed, num_bins):
    d = osets.random_sets(seed)
    frame = constructor(osets.frame_dict(d, list_column=False))
    out = to_pandas(
        cf.conformal(frame).set_ssc("y", _sets_arg(d, False), classes=d["classes"], n_bins=num_bins, by="g")
    )
    assert list(out.columns) == ["g", "size_min", "size_max", "set_ssc", "n"]
    expected = [
        (key, *row)
        for key, idx in group_dict(d["g"]).items()
        for row in osets.set_ssc(d["yi"][idx], d["m"][idx], num_bins)
    ]
    assert [tuple(r) for r in out[["g", "size_min", "size_max"]].itertuples(index=False)] == [e[:3] for e in expected]
    assert_close(out["set_ssc"], [e[3] for e in expected])
    assert_close(out["n"], [e[4] for e in expected])
    assert not out["set_ssc"].isna().any()  # strata without rows are absent, never NaN


# reference/003 worked example (4 classes, 5 rows)
Y_REF = [3, 3, 1, 2, 2]
M_REF = [
    [True, True, True, True],
    [False, True, False, True],
    [True, True, True, False],
    [False, False, True, True],
    [True, True, False, True],
]


def _ref_frame(constructor, list_column):
    data = {"y": Y_REF}
    if list_column:
        data["s"] = [[j for j in range(4) if row[j]] for row in M_REF]
    else:
        for j in range(4):
            data[f"m{j}"] = [row[j] for row in M_REF]
    return constructor(data)


@pytest.mark.parametrize("list_column", [False, True], ids=["membership", "list"])
def test_reference_ssc_example(constructor, list_column):
    sets = "s" if list_column else ["m0", "m1", "m2", "m3"]
    ns = cf.conformal(_ref_frame(constructor, list_column))
    out = to_pandas(ns.set_ssc("y", sets, classes=[0, 1, 2, 3], n_bins=2))
    assert_close(out["set_ssc"], [1.0, 2.0 / 3.0])  # baseline: [[1., 0.66666667]]
    score = ns.set_ssc_score("y", sets, classes=[0, 1, 2, 3], n_bins=2)
    score = score if isinstance(score, float) else float(to_pandas(score)["set_ssc_score"][0])
    assert score == pytest.approx(2.0 / 3.0, rel=1e-12)  # baseline: [0.66666667]


def test_reference_mean_width_example(constructor):
    # baseline: sets of 5 rows x 3 classes at two levels -> mean widths [2., 1.8];
    # levels are rows here (long format) and by="level"
    sets = np.array(
        [
            [[False, False], [False, True], [True, True]],
            [[False, True], [True, False], [True, True]],
            [[True, False], [True, True], [True, False]],
            [[False, False], [True, True], [True, True]],
            [[True, True], [False, True], [True, False]],
        ]
    )
    data = {"level": [0] * 5 + [1] * 5}
    for j in range(3):
        data[f"m{j}"] = list(sets[:, j, 0]) + list(sets[:, j, 1])
    out = to_pandas(cf.conformal(constructor(data)).set_size(["m0", "m1", "m2"], classes=[0, 1, 2], by="level"))
    assert_close(out["set_size"], [2.0, 1.8])


def test_scalar_and_namespace(constructor):
    frame = _ref_frame(constructor, False)
    sets = ["m0", "m1", "m2", "m3"]
    got = cf.conformal(frame).set_coverage("y", sets, classes=[0, 1, 2, 3])
    if constructor.lazy:
        assert_close(to_pandas(got)["set_coverage"], [0.8])
        assert int(to_pandas(got)["n_invalid"][0]) == 0
    else:
        assert got == pytest.approx(0.8, rel=1e-12)


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
def test_label_not_among_classes(constructor):
    frame = constructor({"y": [0, 1, 7, 7], "m0": [True, False, True, True], "m1": [False, True, True, True]})
    metric = cf.set_coverage("y", ["m0", "m1"], classes=[0, 1])
    if constructor.lazy:
        out = to_pandas(cf.evaluate(frame, metric))
        assert np.isnan(out["set_coverage"][0]) and int(out["n_invalid"][0]) == 2
    else:
        with pytest.raises(
            ValueError, match=r"label column 'y' has labels not among classes \[0, 1\] in 2 rows, e.g. 7$"
        ):
            cf.evaluate(frame, metric)


def test_list_member_not_among_classes(constructor):
    if constructor.id == "pandas":
        return
    frame = constructor({"y": ["a", "b"], "s": [["a", "z"], ["b"]]})
    metric = cf.set_size("s", classes=["a", "b"])
    if constructor.lazy:
        assert int(to_pandas(cf.evaluate(frame, metric))["n_invalid"][0]) == 1
    else:
        with pytest.raises(ValueError, match="set column 's' has labels not among classes"):
            cf.evaluate(frame, metric)


def test_wrong_set_column_types(constructor):
    frame = constructor({"y": [0, 1], "m0": [1, 0], "m1": [0, 1], "s": ["0", "1"]})
    with pytest.raises(TypeError, match="membership column 'm0' must be boolean"):
        cf.evaluate(frame, cf.set_size(["m0", "m1"], classes=[0, 1]))
    with pytest.raises(TypeError, match="set column 's' must be a list column"):
        cf.evaluate(frame, cf.set_size("s", classes=[0, 1]))
    with pytest.raises(TypeError, match="label column 'y' has dtype"):
        cf.evaluate(
            constructor({"y": ["a", "b"], "m0": [True, False], "m1": [True, True]}),
            cf.set_coverage("y", ["m0", "m1"], classes=[0, 1]),
        )


def test_pandas_object_lists_are_read_as_lists():
    import pandas as pd

    frame = pd.DataFrame({"y": [0, 1], "s": [[0], (0, 1)]})
    before = frame.copy(deep=True)
    assert frame.conformal.set_size("s", classes=[0, 1]) == 1.5
    assert frame.conformal.set_coverage("y", "s", classes=[0, 1]) == 1.0
    pd.testing.assert_frame_equal(frame, before)  # the caller's frame is untouched
    assert frame["s"].dtype == object


def test_missing_values_are_invalid(constructor):
    frame = constructor({"y": [0, None, 1], "m0": [True, False, True], "m1": [False, True, True]})
    metric = cf.set_coverage("y", ["m0", "m1"], classes=[0, 1])
    if constructor.lazy:
        assert int(to_pandas(cf.evaluate(frame, metric))["n_invalid"][0]) == 1
    else:
        with pytest.raises(ValueError, match="label column 'y' has missing values in 1 row"):
            cf.evaluate(frame, metric)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"sets": ["a", "b"], "classes": [0, 1, 2]}, ValueError, "mismatched classes and membership columns"),
        ({"sets": ["a", "b"], "classes": None}, ValueError, "classes= is required"),
        (
            {"sets": ["a", "b"], "classes": [0, 0]},
            ValueError,
            r"classes must be a list of distinct labels, all integers or all strings \(0 repeated\)",
        ),
        (
            {"sets": ["a", "b"], "classes": [0, "x"]},
            TypeError,
            r"classes must be a list of distinct labels, all integers or all strings, got \[0, 'x'\]",
        ),
        (
            {"sets": ["a", "b"], "classes": [True, False]},
            TypeError,
            r"classes must be a list of distinct labels, all integers or all strings, got \[True, False\]",
        ),
        ({"sets": 3, "classes": [0, 1]}, TypeError, "list column or a list of boolean"),
        ({"sets": "s", "classes": [0, 1], "n_bins": 4}, ValueError, "exceeds the 3 possible set sizes"),
        ({"sets": "s", "classes": [0, 1], "n_bins": 0}, ValueError, "positive integer"),
    ],
)
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        cf.set_ssc("y", **kwargs)


def test_empty_frame_gives_null():
    import polars as pl

    frame = pl.DataFrame({"y": [], "m0": [], "m1": []}, schema={"y": pl.Int64, "m0": pl.Boolean, "m1": pl.Boolean})
    out = to_pandas(cf.evaluate(frame, cf.set_coverage("y", ["m0", "m1"], classes=[0, 1])))
    assert np.isnan(out["set_coverage"][0]) and int(out["n"][0]) == 0


def test_string_label_not_among_classes_is_named(eager_constructor):
    frame = eager_constructor({"y": ["cat", "dog", "emu"], "s": [["cat"], ["dog", "cat"], ["dog"]]})
    if isinstance(frame, __import__("pandas").DataFrame) and frame["s"].dtype == object:
        frame = eager_constructor({"y": ["cat", "dog", "emu"], "m0": [True, True, False], "m1": [False, True, True]})
        metric = cf.set_coverage("y", ["m0", "m1"], classes=["cat", "dog"])
    else:
        metric = cf.set_coverage("y", "s", classes=["cat", "dog"])
    with pytest.raises(ValueError, match=r"not among classes \['cat', 'dog'\] in 1 row, e.g. 'emu'$"):
        cf.evaluate(frame, metric, by=None)


def test_categorical_labels(eager_constructor):
    import pandas as pd
    import polars as pl

    data = {"y": ["a", "b", "zz"], "m0": [True, False, False], "m1": [True, True, False]}
    frame = eager_constructor(data)
    if isinstance(frame, pl.DataFrame):
        frame = frame.with_columns(pl.col("y").cast(pl.Categorical))
    else:
        frame["y"] = frame["y"].astype("category")
    assert isinstance(frame, (pd.DataFrame, pl.DataFrame))
    with pytest.raises(ValueError, match="e.g. 'zz'$"):
        cf.evaluate(frame, cf.set_coverage("y", ["m0", "m1"], classes=["a", "b"]))
    ok = frame.head(2) if isinstance(frame, pl.DataFrame) else frame.iloc[:2]
    assert to_pandas(cf.evaluate(ok, cf.set_coverage("y", ["m0", "m1"], classes=["a", "b"])))["set_coverage"][0] == 1.0


def test_class_conditional_coverage_is_by_label(constructor):
    d = osets.random_sets(2)
    frame = constructor(osets.frame_dict(d, list_column=False))
    out = to_pandas(cf.conformal(frame).set_coverage("y", _sets_arg(d, False), classes=d["classes"], by="y"))
    groups = group_dict(d["yi"])
    assert list(out["y"]) == list(groups)
    assert_close(out["set_coverage"], [osets.set_coverage(d["yi"][i], d["m"][i]) for i in groups.values()])


# ---------------------------------------------------------------------------
# issue 15: the set SSC never splits a set size; set CIs contain the estimate
# ---------------------------------------------------------------------------
def test_set_ssc_keeps_each_size_in_one_stratum(constructor):
    # every set has size 2: one stratum whatever num_bins, the marginal coverage
    y = np.array([0, 1, 2, 0, 1, 2, 0, 2])
    m = np.array([[True, True, False]] * 8)
    data = {"y": y, "m0": m[:, 0], "m1": m[:, 1], "m2": m[:, 2]}
    for num_bins in (None, 2, 3, 4):
        out = to_pandas(
            cf.conformal(constructor(data)).set_ssc("y", ["m0", "m1", "m2"], classes=[0, 1, 2], n_bins=num_bins)
        )
        assert len(out) == 1 and list(out["n"]) == [8]
        assert int(out["size_min"][0]) <= 2 <= int(out["size_max"][0])
        assert_close(out["set_ssc"], [5 / 8])


def test_set_coverage_interval_contains_the_estimate(constructor):
    # coverage 0 and 1 in groups of every size 1..200
    sizes = np.arange(1, 201)
    g = np.concatenate([np.full(2 * k, k) for k in sizes])
    miss = np.concatenate([np.r_[np.zeros(k), np.ones(k)] for k in sizes]).astype(bool)
    key = np.char.add(g.astype(str), np.where(miss, "-miss", "-hit"))
    data = {"g": key, "y": np.where(miss, 1, 0), "m0": np.ones(len(g), dtype=bool), "m1": np.zeros(len(g), dtype=bool)}
    out = to_pandas(cf.conformal(constructor(data)).set_coverage("y", ["m0", "m1"], classes=[0, 1], by="g"))
    est, low, high = out["set_coverage"], out["set_coverage_ci_low"], out["set_coverage_ci_high"]
    assert len(out) == 400 and set(est) == {0.0, 1.0}
    assert ((low <= est) & (est <= high)).all()
