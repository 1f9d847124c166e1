"""Bad input: clear errors on eager frames, visible outcomes on lazy ones."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
from helpers import to_pandas

BASE = {
    "y": [1.0, 2.0, 3.0, 4.0],
    "lo": [0.0, 2.5, 2.0, 3.0],
    "hi": [2.0, 3.0, 4.0, 5.0],
    "g": ["a", "a", "b", "b"],
}


def _with(**changes):
    d = {k: list(v) for k, v in BASE.items()}
    d.update(changes)
    return d


ALL_INTERVAL_METRICS = [
    cf.coverage("y", "lo", "hi"),
    cf.width("lo", "hi"),
    cf.ssc("y", "lo", "hi"),
    cf.ssc_score("y", "lo", "hi"),
    cf.winkler("y", "lo", "hi", confidence_level=0.9),
    cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
    cf.hsic("y", "lo", "hi"),
]


def test_missing_column_lists_available(constructor):
    with pytest.raises(ValueError, match=r"column 'yy' not found; available columns: 'y', 'lo', 'hi', 'g'"):
        cf.evaluate(constructor(BASE), cf.coverage("yy", "lo", "hi"))


def test_missing_group_column(constructor):
    with pytest.raises(ValueError, match=r"group column 'seg' \(by=\) not found"):
        cf.evaluate(constructor(BASE), cf.coverage("y", "lo", "hi"), by="seg")


def test_non_numeric_column_names_dtype(constructor):
    with pytest.raises(TypeError, match=r"column 'g' must be numeric, found dtype String"):
        cf.evaluate(constructor(BASE), cf.coverage("g", "lo", "hi"))


def test_by_column_that_is_also_an_input(constructor):
    with pytest.raises(ValueError, match=r"column 'y' is both a group key"):
        cf.evaluate(constructor(BASE), cf.coverage("y", "lo", "hi"), by="y")


@pytest.mark.spark_cases([{"column": "y"}, {"column": "lo", "bad": None}, {"column": "hi", "bad": math.inf}])
@pytest.mark.parametrize("bad", [None, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("column", ["y", "lo", "hi"])
def test_missing_or_infinite_values(constructor, column, bad):
    values = list(BASE[column])
    values[1] = bad
    frame = constructor(_with(**{column: values}))
    metrics = [m for m in ALL_INTERVAL_METRICS if not isinstance(m, cf.metrics.intervals.HSIC) or not constructor.lazy]
    if column == "y":  # the width does not read y
        metrics = [m for m in metrics if not isinstance(m, cf.metrics.intervals.Width)]
    if constructor.lazy:
        metrics = [m for m in metrics if not isinstance(m, cf.metrics.intervals.SSC)]
        out = to_pandas(cf.evaluate(frame, *metrics, by="g"))
        assert list(out["n_invalid"]) == [1, 0]
        assert out.drop(columns=["g", "n", "n_invalid"]).iloc[0].isna().all()  # group a: all null
        assert out.drop(columns=["g", "n", "n_invalid"]).iloc[1].notna().all()  # group b: computed
    else:
        for m in metrics:
            with pytest.raises(
                ValueError, match=rf"column '{column}' has missing \(null/NaN\) or infinite values in 1 row"
            ):
                cf.evaluate(frame, m)


def test_lower_bound_above_upper_bound(constructor):
    frame = constructor(_with(lo=[0.0, 3.5, 2.0, 3.0]))
    if constructor.lazy:
        out = to_pandas(cf.evaluate(frame, cf.width("lo", "hi"), cf.coverage("y", "lo", "hi"), by="g"))
        assert list(out["n_invalid"]) == [1, 0]
        assert np.isnan(out["width"][0]) and out["width"][1] == 2.0
    else:
        with pytest.raises(ValueError, match=r"column 'lo' is greater than column 'hi' in 1 row"):
            cf.evaluate(frame, cf.width("lo", "hi"))


def test_null_group_keys(constructor):
    # a null key is a group of its own, sorted last, its metrics computed (tests/test_null_keys.py)
    frame = constructor(_with(g=["a", None, "b", "b"]))
    out = to_pandas(cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by="g"))
    assert out["g"].isna().tolist() == [False, False, True]
    assert list(out["n"]) == [1, 2, 1]
    assert not np.isnan(out["coverage"][2])


@pytest.mark.parametrize(
    ("n_bins", "error"),
    [(0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError), ("3", TypeError), (None, TypeError)],
)
def test_invalid_n_bins(n_bins, error):
    with pytest.raises(error, match=rf"n_bins must be a positive integer, got {n_bins!r}"):
        cf.ssc("y", "lo", "hi", n_bins=n_bins)
    with pytest.raises(error, match="n_bins must be a positive integer"):
        cf.ssc_score("y", "lo", "hi", n_bins=n_bins)


@pytest.mark.parametrize(
    ("level", "error"),
    [
        (0, ValueError),
        (1, ValueError),
        (-0.1, ValueError),
        (1.5, ValueError),
        (math.nan, ValueError),
        (True, TypeError),
    ],
)
def test_invalid_confidence_level(level, error):
    with pytest.raises(error, match="confidence_level must be a number strictly between 0 and 1"):
        cf.winkler("y", "lo", "hi", confidence_level=level)
    with pytest.raises(error, match="confidence_level must be a number strictly between 0 and 1"):
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=level)


@pytest.mark.parametrize("ci_level", [0, 1, 2.0, math.nan])
def test_invalid_ci_level(ci_level):
    with pytest.raises(ValueError, match="ci_level must be a number strictly between 0 and 1"):
        cf.coverage("y", "lo", "hi", ci_level=ci_level)


@pytest.mark.parametrize(
    ("sizes", "error"),
    [
        ((1,), ValueError),
        ((1, 2, 3), ValueError),
        ((0, 1), ValueError),
        ((1, -2), ValueError),
        ((1, math.inf), ValueError),
        ((True, 1), TypeError),
        ("ab", TypeError),
        (3, TypeError),
    ],
)
def test_invalid_kernel_sizes(sizes, error):
    with pytest.raises(error, match="kernel_sizes must be two positive numbers"):
        cf.hsic("y", "lo", "hi", kernel_sizes=sizes)


@pytest.mark.parametrize(("eta", "error"), [(math.nan, ValueError), (math.inf, ValueError), ("1", TypeError)])
def test_invalid_eta(eta, error):
    with pytest.raises(error, match="eta must be a finite number"):
        cf.cwc("y", "lo", "hi", eta=eta, confidence_level=0.9)


def test_not_a_metric():
    import polars as pl

    with pytest.raises(TypeError, match="expected metric objects"):
        cf.evaluate(pl.DataFrame(BASE), "coverage")


def test_not_a_frame():
    with pytest.raises(TypeError, match="expected a DataFrame supported by narwhals"):
        cf.evaluate([1, 2, 3], cf.coverage("y", "lo", "hi"))


def test_duplicate_output_names():
    import polars as pl

    with pytest.raises(ValueError, match="two outputs are named 'coverage'; rename one with .alias"):
        cf.evaluate(pl.DataFrame(BASE), cf.coverage("y", "lo", "hi"), cf.coverage("y", "lo", "hi"))


def test_empty_frame(constructor):
    empty = constructor(
        {"y": np.array([], float), "lo": np.array([], float), "hi": np.array([], float), "g": np.array([], str)}
    )
    metrics = [
        m
        for m in ALL_INTERVAL_METRICS
        if not isinstance(m, (cf.metrics.intervals.HSIC, cf.metrics.intervals.SSC)) or not constructor.lazy
    ]
    out = to_pandas(cf.evaluate(empty, *metrics))
    assert len(out) == 1 and out["n"][0] == 0
    assert out.drop(columns=["n", *(["n_invalid"] if constructor.lazy else [])]).iloc[0].isna().all()
    grouped = to_pandas(cf.evaluate(empty, cf.coverage("y", "lo", "hi"), by="g"))
    assert len(grouped) == 0
    if not constructor.lazy:
        assert math.isnan(cf.conformal(empty).coverage("y", "lo", "hi"))


def test_group_emptied_by_a_filter_is_absent(constructor):
    import narwhals.stable.v2 as nw

    frame = nw.from_native(constructor(BASE)).filter(nw.col("g") == "a").to_native()
    out = to_pandas(cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by="g"))
    assert list(out["g"]) == ["a"]


def test_caller_frame_is_not_modified(eager_constructor):
    frame = eager_constructor(BASE)
    before = to_pandas(frame).copy()
    columns = list(frame.columns)
    cf.evaluate(frame, *ALL_INTERVAL_METRICS, by="g")
    cf.conformal(frame).ssc("y", "lo", "hi")
    assert list(frame.columns) == columns
    assert to_pandas(frame).equals(before)


# ---------------------------------------------------------------------------
# issue 15: key collisions, empty evaluate, by= a Series, near-miss names,
# integer column names, 64-bit integers, NaN keys, key order
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["n", "n_invalid", "n_dropped"])
def test_group_key_named_like_the_row_count(constructor, key):
    d = {"y": BASE["y"], "lo": BASE["lo"], "hi": BASE["hi"], key: BASE["g"]}
    with pytest.raises(ValueError, match=rf"group column '{key}' \(by=\) has the name of the result's row-count"):
        cf.evaluate(constructor(d), cf.coverage("y", "lo", "hi"), by=key)


def test_group_key_named_like_an_output(constructor):
    d = {"y": BASE["y"], "lo": BASE["lo"], "hi": BASE["hi"], "coverage_ci_low": BASE["g"]}
    with pytest.raises(ValueError, match=r"group column 'coverage_ci_low' \(by=\) has the name of an output column"):
        cf.evaluate(constructor(d), cf.coverage("y", "lo", "hi"), by="coverage_ci_low")


@pytest.mark.parametrize(
    ("key", "method", "args"),
    [
        ("bin", "ssc", ("y", "lo", "hi")),
        ("ssc", "ssc", ("y", "lo", "hi")),
        ("bin", "reliability", ("b", "s")),
        ("mean_score", "reliability", ("b", "s")),
        ("size_min", "set_ssc", ("c", ["m0", "m1"])),
    ],
)
def test_group_key_named_like_a_long_table_column(constructor, key, method, args):
    d = {
        "y": BASE["y"],
        "lo": BASE["lo"],
        "hi": BASE["hi"],
        "b": [0, 1, 1, 0],
        "s": [0.2, 0.7, 0.9, 0.4],
        "c": [0, 1, 1, 0],
        "m0": [True, False, True, True],
        "m1": [False, True, True, False],
        key: BASE["g"],
    }
    kwargs = {"classes": [0, 1]} if method == "set_ssc" else {}
    with pytest.raises(ValueError, match=rf"group column '{key}' \(by=\) has the name of a column of the"):
        getattr(cf.conformal(constructor(d)), method)(*args, by=key, **kwargs)


def test_evaluate_without_metrics(constructor):
    with pytest.raises(ValueError, match=r"evaluate\(\) needs at least one metric"):
        cf.evaluate(constructor(BASE), by="g")


def test_by_given_a_series():
    import pandas as pd
    import polars as pl

    for frame in (pd.DataFrame(BASE), pl.DataFrame(BASE)):
        with pytest.raises(TypeError, match=r"pass the column name, e.g. by='g', not the column itself"):
            cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by=frame["g"])


@pytest.mark.parametrize(
    ("columns", "suggestion"),
    [(("Y", "lo", "hi"), "y"), (("yy", "lo", "hi"), "y"), (("y", "lo", "hii"), "hi"), (("y", "LO", "hi"), "lo")],
)
def test_near_miss_column_names_get_a_suggestion(constructor, columns, suggestion):
    with pytest.raises(ValueError, match=rf"not found; available columns: .*; did you mean '{suggestion}'\?"):
        cf.evaluate(constructor(BASE), cf.coverage(*columns))


def test_near_miss_group_column(constructor):
    with pytest.raises(ValueError, match=r"group column 'G' \(by=\) not found; .*did you mean 'g'\?"):
        cf.evaluate(constructor(BASE), cf.coverage("y", "lo", "hi"), by="G")


def test_integer_column_names_get_a_clear_error():
    import pandas as pd

    frame = pd.DataFrame(np.array([[1.0, 0.0, 2.0], [2.0, 2.5, 3.0]]))
    with pytest.raises(TypeError, match=r"column names must be strings, found 0, 1, 2 .*rename the columns first"):
        frame.conformal.coverage(0, 1, 2)


@pytest.mark.parametrize("dtype", ["Int64", "UInt64"])
def test_64_bit_integers_beyond_2_53_are_refused(eager_constructor, dtype):
    import polars as pl

    big = 2**53 + 1
    d = {"y": [big, 3], "lo": [0, 0], "hi": [5, 4]}
    frame = eager_constructor(d)
    native_dtype = getattr(pl, dtype)
    if isinstance(frame, pl.DataFrame):
        frame = frame.cast({c: native_dtype for c in d})
    with pytest.raises(ValueError, match=r"column 'y' has integers beyond 2\^53 in absolute value.* in 1 row"):
        cf.evaluate(frame, cf.coverage("y", "lo", "hi"))


def test_64_bit_integers_within_2_53_are_exact(constructor):
    exact = 2**53
    out = to_pandas(cf.evaluate(constructor({"lo": [exact - 2, 0], "hi": [exact, 4]}), cf.width("lo", "hi")))
    assert out["width"][0] == 3.0


def test_nan_group_key_is_a_null_key_on_every_backend(constructor):
    d = {**BASE, "k": [1.0, math.nan, 2.0, 2.0]}
    out = to_pandas(cf.evaluate(constructor(d), cf.coverage("y", "lo", "hi"), by="k"))
    assert list(out["k"][:2]) == [1.0, 2.0] and out["k"].isna().tolist() == [False, False, True]  # NaN: null
    assert list(out["n"]) == [1, 2, 1] and not math.isnan(out["coverage"][2])


def test_keys_are_sorted_by_value(constructor):
    d = {**BASE, "k": [10, 9, 100, 9], "s": ["b", "B", "a", "B"]}
    out = to_pandas(cf.evaluate(constructor(d), cf.width("lo", "hi"), by=["k", "s"]))
    assert list(zip(out["k"], out["s"])) == [(9, "B"), (10, "b"), (100, "a")]


def test_categorical_keys_follow_the_category_order_where_the_backend_has_one():
    import pandas as pd
    import polars as pl

    cats = pd.Categorical(BASE["g"], categories=["b", "a"], ordered=False)
    out = pd.DataFrame({**BASE, "g": cats}).conformal.width("lo", "hi", by="g")
    assert list(out["g"]) == ["b", "a"]  # pandas: category order
    enum = pl.DataFrame(BASE).with_columns(pl.col("g").cast(pl.Enum(["b", "a"])))
    assert enum.conformal.width("lo", "hi", by="g")["g"].to_list() == ["b", "a"]  # polars Enum: its order
    lexical = pl.DataFrame(BASE).with_columns(pl.col("g").cast(pl.Categorical))
    assert lexical.conformal.width("lo", "hi", by="g")["g"].to_list() == ["a", "b"]  # polars Categorical: lexical


def test_confidence_level_string_is_a_column_name():
    """A string level names a by= column (since 0.2): checked when evaluated."""
    frame = pl.DataFrame({"y": [1.0], "lo": [0.0], "hi": [2.0], "g": ["a"]})
    with pytest.raises(ValueError, match="column '0.9' not found"):
        cf.evaluate(frame, cf.winkler("y", "lo", "hi", confidence_level="0.9"), by="g")


def test_bad_scores_raise_without_stray_warnings(eager_constructor):
    """Issue 15 item 8: the clean error only, no numpy RuntimeWarning first."""
    import warnings

    frame = eager_constructor({"y": [0, 1, 1], "s": [0.2, 1.5, -0.1]})
    for metric in (cf.ece("y", "s"), cf.brier("y", "s"), cf.ks_test("y", "s"), cf.reliability("y", "s")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(ValueError, match=r"column 's' has values outside \[0, 1\] in 2 rows"):
                cf.evaluate(frame, metric)


# ---------------------------------------------------------------------------
# one module of checks: the factories and the metric classes raise alike
# ---------------------------------------------------------------------------
def _target():
    from conformal_frames.inputs.target import Target

    return Target(y="y", lo="lo", hi="hi")


def _kind_cases():
    from conformal_frames.metrics.calibration import ECE, TopLabelECE
    from conformal_frames.metrics.conditional import CoverageGap, CoverageTest, WorstSlab
    from conformal_frames.metrics.efficiency import Efficiency
    from conformal_frames.metrics.intervals import CWC, HSIC, Coverage, Winkler

    p = ("pa", "pb")
    return {
        # kind: (factory call, metric class call, error, message)
        "probability-value": (
            lambda: cf.coverage("y", "lo", "hi", ci_level=2.0),
            lambda: Coverage(y="y", lo="lo", hi="hi", ci_level=2.0),
            ValueError,
            "ci_level must be a number strictly between 0 and 1, got 2.0",
        ),
        "probability-type": (
            lambda: cf.coverage("y", "lo", "hi", ci_level="x"),
            lambda: Coverage(y="y", lo="lo", hi="hi", ci_level="x"),
            TypeError,
            "ci_level must be a number strictly between 0 and 1, got 'x'",
        ),
        "level-value": (
            lambda: cf.winkler("y", "lo", "hi", confidence_level=1.5),
            lambda: Winkler(y="y", lo="lo", hi="hi", confidence_level=1.5),
            ValueError,
            "confidence_level must be a number strictly between 0 and 1, got 1.5",
        ),
        "level-type": (
            lambda: cf.winkler("y", "lo", "hi", confidence_level=[0.9]),
            lambda: Winkler(y="y", lo="lo", hi="hi", confidence_level=[0.9]),
            TypeError,
            "confidence_level must be a number strictly between 0 and 1 or a column name, got [0.9]",
        ),
        "positive-int-value": (
            lambda: cf.ece("y", "s", n_bins=0),
            lambda: ECE(y="y", score="s", n_bins=0),
            ValueError,
            "n_bins must be a positive integer, got 0",
        ),
        "positive-int-type": (
            lambda: cf.ece("y", "s", n_bins=2.5),
            lambda: ECE(y="y", score="s", n_bins=2.5),
            TypeError,
            "n_bins must be a positive integer, got 2.5",
        ),
        "positive-int-str": (
            lambda: cf.ece("y", "s", n_bins="3"),
            lambda: ECE(y="y", score="s", n_bins="3"),
            TypeError,
            "n_bins must be a positive integer, got '3'",
        ),
        "finite-value": (
            lambda: cf.cwc("y", "lo", "hi", eta=math.inf, confidence_level=0.9),
            lambda: CWC(y="y", lo="lo", hi="hi", eta=math.inf, confidence_level=0.9),
            ValueError,
            "eta must be a finite number, got inf",
        ),
        "positive-pair-value": (
            lambda: cf.hsic("y", "lo", "hi", kernel_sizes=(0, 1)),
            lambda: HSIC(y="y", lo="lo", hi="hi", kernel_sizes=(0, 1)),
            ValueError,
            "kernel_sizes must be two positive numbers, got (0, 1)",
        ),
        "column-type": (
            lambda: cf.coverage("y", 2, "hi"),
            lambda: Coverage(y="y", lo=2, hi="hi"),
            TypeError,
            "lo must be a column name (a string) or an expression, got 2",
        ),
        "columns-repeated": (
            lambda: cf.top_label_ece("y", ["pa", "pa"]),
            lambda: TopLabelECE(y="y", probs=("pa", "pa"), classes=(0, 1)),
            ValueError,
            "probs must be a list of distinct column names ('pa' repeated), got ['pa', 'pa']",
        ),
        "columns-type": (
            lambda: cf.coverage_gap("y", "lo", "hi", groups=["g", 1], confidence_level=0.9),
            lambda: CoverageGap(target=_target(), groups=["g", 1], confidence_level=0.9),
            TypeError,
            "groups must be a list of distinct column names, got ['g', 1]",
        ),
        "columns-at-least-two": (
            lambda: cf.efficiency_criteria(None, ["p0"], confidence_level=0.9),
            lambda: Efficiency(y=None, pvalues=("p0",), classes=None, confidence_level=0.9),
            ValueError,
            "pvalues must be a list of distinct column names (at least 2), got ['p0']",
        ),
        "choice-value": (
            lambda: cf.ece("y", "s", strategy="kmeans"),
            lambda: ECE(y="y", score="s", strategy="kmeans"),
            ValueError,
            "strategy must be one of 'uniform', 'quantile', got 'kmeans'",
        ),
        "choice-type": (
            lambda: cf.coverage_test("y", "lo", "hi", confidence_level=0.9, correction=None),
            lambda: CoverageTest(target=_target(), confidence_level=0.9, correction=None),
            TypeError,
            "correction must be one of 'holm', 'bh', 'none', got None",
        ),
        "bool": (
            lambda: cf.top_label_ece("y", list(p), weighted=1),
            lambda: TopLabelECE(y="y", probs=p, classes=(0, 1), weighted=1),
            TypeError,
            "weighted must be True or False, got 1",
        ),
        "classes-repeated": (
            lambda: cf.classwise_ece("y", list(p), classes=["a", "a"]),
            lambda: cf.metrics.calibration.ClasswiseECE(y="y", probs=p, classes=("a", "a")),
            ValueError,
            "classes must be a list of distinct labels, all integers or all strings ('a' repeated), got ['a', 'a']",
        ),
        "classes-type": (
            lambda: cf.top_label_ece("y", list(p), classes=[0, "b"]),
            lambda: TopLabelECE(y="y", probs=p, classes=(0, "b")),
            TypeError,
            "classes must be a list of distinct labels, all integers or all strings, got [0, 'b']",
        ),
        "seed-type": (
            lambda: cf.worst_slab_coverage("y", "lo", "hi", features=["x"], seed=1.5),
            lambda: WorstSlab(target=_target(), features=("x",), seed=1.5),
            TypeError,
            "seed must be an integer, got 1.5",
        ),
        "fraction-value": (
            lambda: cf.worst_slab_coverage("y", "lo", "hi", features=["x"], delta=0),
            lambda: WorstSlab(target=_target(), features=("x",), delta=0),
            ValueError,
            "delta must be a number in (0, 1], got 0",
        ),
    }


@pytest.mark.parametrize("kind", list(_kind_cases()))
def test_factory_and_metric_class_raise_alike(kind):
    factory, metric_class, error, message = _kind_cases()[kind]
    with pytest.raises(error) as from_factory:
        factory()
    with pytest.raises(error) as from_class:
        metric_class()
    assert str(from_factory.value) == message
    assert str(from_class.value) == message
    assert type(from_factory.value) is type(from_class.value) is error


def test_a_column_name_is_a_valid_confidence_level():
    from conformal_frames.metrics.intervals import Winkler

    assert cf.winkler("y", "lo", "hi", confidence_level="level").confidence_level == "level"
    assert Winkler(y="y", lo="lo", hi="hi", confidence_level="level").confidence_level == "level"


def test_metric_class_normalises_like_the_factory():
    from conformal_frames.metrics.calibration import ECE

    made = ECE(y="y", score="s", n_bins=np.int64(5))
    assert made == cf.ece("y", "s", n_bins=5)
    assert type(made.n_bins) is int


# every public factory (and frame function): a non-string column name is a TypeError naming the parameter
COLUMN_CASES = {
    "coverage": lambda: cf.coverage(1, "lo", "hi"),
    "width": lambda: cf.width(1, "hi"),
    "ssc": lambda: cf.ssc(1, "lo", "hi"),
    "ssc_score": lambda: cf.ssc_score(1, "lo", "hi"),
    "winkler": lambda: cf.winkler(1, "lo", "hi", confidence_level=0.9),
    "cwc": lambda: cf.cwc(1, "lo", "hi", eta=1.0, confidence_level=0.9),
    "hsic": lambda: cf.hsic(1, "lo", "hi"),
    "set_coverage": lambda: cf.set_coverage(1, "s"),
    "set_size": lambda: cf.set_size(1),
    "singleton_rate": lambda: cf.singleton_rate(1),
    "empty_rate": lambda: cf.empty_rate(1),
    "set_ssc": lambda: cf.set_ssc(1, "s", classes=[0, 1]),
    "set_ssc_score": lambda: cf.set_ssc_score(1, "s", classes=[0, 1]),
    "efficiency_criteria": lambda: cf.efficiency_criteria(1, ["p0", "p1"], classes=[0, 1], confidence_level=0.9),
    "coverage_gap": lambda: cf.coverage_gap(1, "lo", "hi", groups="g", confidence_level=0.9),
    "coverage_test": lambda: cf.coverage_test(1, "lo", "hi", confidence_level=0.9),
    "worst_slab_coverage": lambda: cf.worst_slab_coverage(1, "lo", "hi", features=["x"]),
    "ece": lambda: cf.ece(1, "s"),
    "mce": lambda: cf.mce(1, "s"),
    "brier": lambda: cf.brier(1, "s"),
    "reliability": lambda: cf.reliability(1, "s"),
    "top_label_ece": lambda: cf.top_label_ece(1, ["pa", "pb"]),
    "confidence_ece": lambda: cf.confidence_ece(1, ["pa", "pb"]),
    "classwise_ece": lambda: cf.classwise_ece(1, ["pa", "pb"]),
    "ks_test": lambda: cf.ks_test(1, "s"),
    "kuiper_test": lambda: cf.kuiper_test(1, "s"),
    "spiegelhalter_test": lambda: cf.spiegelhalter_test(1, "s"),
    "auroc": lambda: cf.auroc(1, "s"),
    "auarc": lambda: cf.auarc(1, "s"),
    "cumulative_differences": lambda: cf.cumulative_differences(pl.DataFrame(BASE), 1, "y"),
    "crps": lambda: cf.crps(1, samples="e"),
    "pit_histogram": lambda: cf.pit_histogram(1, mean="m", std="s"),
    "pit_test": lambda: cf.pit_test(1, quantiles={0.5: "q"}),
    "diebold_mariano_test": lambda: cf.diebold_mariano_test(1, "a", "b", order_by="t"),
    "smooth_ece": lambda: cf.smooth_ece(1, "s"),
    "score_decomposition": lambda: cf.score_decomposition(1, "s"),
    "corp_reliability": lambda: cf.corp_reliability(pl.DataFrame(BASE), 1, "y"),
    "pinball_loss": lambda: cf.pinball_loss(1, quantiles={0.5: "q"}),
    "wis": lambda: cf.wis(1, quantiles={0.5: "q"}),
    "quantile_coverage": lambda: cf.quantile_coverage(1, quantiles={0.5: "q"}),
    "quantile_crps": lambda: cf.quantile_crps(1, quantiles={0.5: "q"}),
    "interval_coverage": lambda: cf.interval_coverage(1, intervals={0.9: ("lo", "hi")}),
    "kupiec_test": lambda: cf.kupiec_test(1, "lo", "hi", confidence_level=0.9),
    "christoffersen_test": lambda: cf.christoffersen_test(1, "lo", "hi", confidence_level=0.9, order_by="t"),
    "longest_miss_run": lambda: cf.longest_miss_run(1, "lo", "hi", order_by="t"),
    "path_coverage": lambda: cf.path_coverage(1, "lo", "hi", path="p"),
    "mae": lambda: cf.mae(1, "f"),
    "mse": lambda: cf.mse(1, "f"),
    "rmse": lambda: cf.rmse(1, "f"),
    "bias": lambda: cf.bias(1, "f"),
    "mape": lambda: cf.mape(1, "f"),
    "smape": lambda: cf.smape(1, "f"),
    "mase": lambda: cf.mase(1, "f", scale="s"),
    "rmsse": lambda: cf.rmsse(1, "f", scale="s"),
    "scaled_pinball": lambda: cf.scaled_pinball(1, quantiles={0.5: "q"}, scale="s"),
    "scaled_crps": lambda: cf.scaled_crps(1, quantiles={0.5: "q"}),
    "naive_scale": lambda: cf.naive_scale(pl.DataFrame(BASE), 1, by="g", order_by="t"),
    "log_loss": lambda: cf.log_loss(1, "s"),
    "log_score": lambda: cf.log_score(1, mean="m", std="s"),
    "relative_skill": lambda: cf.relative_skill(pl.DataFrame(BASE), cf.mae(1, "f"), model="m"),
    "pairwise_comparison": lambda: cf.pairwise_comparison(pl.DataFrame(BASE), cf.mae(1, "f"), model="m"),
    "ence": lambda: cf.ence(1, mean="m", std="s"),
    "uce": lambda: cf.uce(1, mean="m", std="s"),
    "uncertainty_calibration_curve": lambda: cf.uncertainty_calibration_curve(1, mean="m", std="s"),
    "mean_absolute_calibration_error": lambda: cf.mean_absolute_calibration_error(1, mean="m", std="s"),
    "root_mean_squared_calibration_error": lambda: cf.root_mean_squared_calibration_error(1, mean="m", std="s"),
    "miscalibration_area": lambda: cf.miscalibration_area(1, mean="m", std="s"),
    "sharpness": lambda: cf.sharpness(1),
    "ence_table": lambda: cf.ence_table(1, mean="m", std="s"),
    "rps": lambda: cf.rps(1, ["p0", "p1"], classes=[0, 1]),
    "energy_score": lambda: cf.energy_score(1, [["a", "b"]]),
    "variogram_score": lambda: cf.variogram_score(1, [["a", "b"]]),
    "adversarial_group_calibration": lambda: cf.adversarial_group_calibration(1, mean="m", std="s"),
}
_PARAM = {"width": "lo", "set_size": "sets", "singleton_rate": "sets", "empty_rate": "sets", "sharpness": "std"}


def test_column_cases_cover_every_public_factory():
    from conformal_frames.namespace import FAMILIES

    factories = {name for module in FAMILIES for name in module.METHODS}
    frame_functions = {name for module in FAMILIES for name in getattr(module, "FRAME_METHODS", ())}
    assert set(COLUMN_CASES) | {"excess_risk_target_coverage"} == factories | frame_functions


@pytest.mark.parametrize("name", list(COLUMN_CASES))
def test_non_string_column_name_is_a_type_error(name):
    param = _PARAM.get(name, "y")
    with pytest.raises(TypeError, match=rf"^{param} must be .*, got 1$"):
        COLUMN_CASES[name]()


def _metric_classes() -> list[type]:
    from conformal_frames.engine import Metric

    found: list[type] = []
    todo = [Metric]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("conformal_frames") and sub not in found:
                found.append(sub)
                todo.append(sub)
    return found


def test_every_field_of_every_metric_has_a_check() -> None:
    """A field is checked by its vocabulary word (FIELD_CHECKS) or declares its own (``checked``)."""
    import dataclasses

    from conformal_frames._validate import FIELD_CHECKS

    classes = _metric_classes()
    assert len(classes) > 50
    unchecked = [
        f"{cls.__name__}.{f.name}"
        for cls in classes
        for f in dataclasses.fields(cls)
        if "check" not in f.metadata and f.name not in FIELD_CHECKS
    ]
    assert not unchecked, f"fields without a check: {unchecked}"


def test_a_field_declares_its_check_one_way() -> None:
    """``checked(check)``, never ``field(metadata={"check": ...})`` by hand."""
    from pathlib import Path

    root = Path(cf.__file__).parent
    by_hand = [
        str(p.relative_to(root)) for p in root.rglob("*.py") if p.name != "_validate.py" and '"check":' in p.read_text()
    ]
    assert not by_hand, by_hand
