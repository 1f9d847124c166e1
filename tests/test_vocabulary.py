"""The 0.2 vocabulary: renamed keywords fail clearly, outputs carry the factory names."""

from __future__ import annotations

import math
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy.stats import binom

import conformal_frames as cf
from conformal_frames._renames import renamed
from helpers import to_pandas

#: (factory, positional args, the old keyword and a value, the new keyword)
RENAMES: list[tuple[Any, tuple[Any, ...], str, Any, str]] = [
    (cf.coverage, ("y", "lo", "hi"), "ci", 0.9, "ci_level"),
    (cf.set_coverage, ("y", "s"), "ci", 0.9, "ci_level"),
    (cf.reliability, ("y", "s"), "ci", 0.9, "ci_level"),
    (cf.coverage_test, ("y", "lo", "hi"), "ci", 0.9, "ci_level"),
    (cf.ssc, ("y", "lo", "hi"), "num_bins", 2, "n_bins"),
    (cf.ssc_score, ("y", "lo", "hi"), "num_bins", 2, "n_bins"),
    (cf.set_ssc, ("y", "s"), "num_bins", 2, "n_bins"),
    (cf.set_ssc_score, ("y", "s"), "num_bins", 2, "n_bins"),
    (cf.ece, ("y", "s"), "num_bins", 2, "n_bins"),
    (cf.mce, ("y", "s"), "num_bins", 2, "n_bins"),
    (cf.reliability, ("y", "s"), "num_bins", 2, "n_bins"),
    (cf.top_label_ece, ("y", ["p0", "p1"]), "num_bins", 2, "n_bins"),
    (cf.classwise_ece, ("y", ["p0", "p1"]), "num_bins", 2, "n_bins"),
    (cf.coverage_test, ("y", "lo", "hi"), "alpha", 0.1, "significance"),
    (cf.efficiency_criteria, (None, ["p0", "p1"]), "significance", 0.1, "confidence_level"),
    (cf.auroc, (), "correct", "c", "y"),
    (cf.auroc, (), "confidence", "s", "score"),
    (cf.auarc, (), "correct", "c", "y"),
    (cf.auarc, (), "confidence", "s", "score"),
    *[
        (cf.report, (pl.DataFrame({"y": [1.0]}),), old, value, new)
        for old, value, new in [
            ("label", "y", "y"),
            ("prediction_set", "s", "sets"),
            ("level", 0.9, "confidence_level"),
            ("num_bins", 2, "n_bins"),
            ("ssc_bins", 2, "ssc_n_bins"),
            ("ci", 0.9, "ci_level"),
            ("alpha", 0.1, "significance"),
        ]
    ],
    (cf.excess_risk_target_coverage, (pd.DataFrame({"y": [1.0]}), "y", "lo", "hi"), "random_state", 1, "seed"),
]


@pytest.mark.parametrize(
    ("factory", "args", "old", "value", "new"), RENAMES, ids=lambda v: getattr(v, "__name__", None)
)
def test_old_keyword_names_the_new_one(factory, args, old, value, new):
    msg = rf"{factory.__name__}\(\) got an unexpected keyword argument '{old}'; it is called '{new}' since 0\.2"
    with pytest.raises(TypeError, match=msg):
        factory(*args, **{old: value})


@pytest.mark.parametrize(
    ("factory", "args", "old", "value", "new"), RENAMES[:-1], ids=lambda v: getattr(v, "__name__", None)
)
def test_old_keyword_fails_on_the_namespace_too(factory, args, old, value, new):
    frame = pl.DataFrame({"y": [1.0]})
    with pytest.raises(TypeError, match=rf"'{old}'; it is called '{new}' since 0\.2"):
        getattr(frame.conformal, factory.__name__)(*args, **{old: value})


def test_every_renamed_factory_is_tested():
    """Every factory carrying ``@renamed`` appears in RENAMES with each old keyword."""
    tested = {(f.__name__, old) for f, _, old, _, _ in RENAMES}
    declared = {(name, old) for name in cf.__all__ for old in getattr(getattr(cf, name), "__renamed__", {})}
    assert declared == tested


def test_efficiency_rename_says_the_meaning_changed():
    with pytest.raises(TypeError, match=r"eps is now 1 - confidence_level"):
        cf.efficiency_criteria(None, ["p0", "p1"], significance=0.1)


def test_renamed_keeps_name_doc_and_other_errors():
    @renamed(old="new")
    def f(*, new: int = 1) -> int:
        """Doc."""
        return new

    assert f.__name__ == "f" and f.__doc__ == "Doc." and f(new=3) == 3
    with pytest.raises(TypeError, match="unexpected keyword argument 'other'"):
        f(other=1)  # type: ignore[call-arg]


def test_classes_is_keyword_only():
    with pytest.raises(TypeError):
        cf.top_label_ece("y", ["p0", "p1"], [0, 1])  # type: ignore[misc]
    with pytest.raises(TypeError):
        cf.classwise_ece("y", ["p0", "p1"], [0, 1])  # type: ignore[misc]


def test_output_names_are_factory_names(eager_constructor):
    data = {"y": [1, 0, 1, 0, 1, 0], "s": [0.8, 0.3, 0.55, 0.5, 0.7, 0.1], "p1": [0.8, 0.3, 0.55, 0.5, 0.7, 0.1]}
    data["p0"] = [1 - v for v in data["p1"]]
    out = to_pandas(
        cf.evaluate(
            eager_constructor(data),
            cf.ks_test("y", "s"),
            cf.kuiper_test("y", "s"),
            cf.spiegelhalter_test("y", "s"),
            cf.efficiency_criteria(None, ["p0", "p1"], confidence_level=0.9),
        )
    )
    expected = [
        "ks_test",
        "ks_test_pvalue",
        "kuiper_test",
        "kuiper_test_pvalue",
        "spiegelhalter_test",
        "spiegelhalter_test_pvalue",
        *[f"efficiency_criteria_{c}" for c in ("S", "N", "U", "F", "M", "E", "credibility", "empty")],
        "n",
    ]
    assert list(out.columns) == expected


def test_set_ssc_wide_columns_match_ssc(eager_constructor):
    data = {"y": [0, 1, 1], "c0": [True, True, False], "c1": [False, True, True]}
    out = to_pandas(cf.evaluate(eager_constructor(data), cf.set_ssc("y", ["c0", "c1"], classes=[0, 1])))
    assert list(out.columns) == [
        "set_ssc_bin0",
        "set_ssc_bin0_n",
        "set_ssc_bin1",
        "set_ssc_bin1_n",
        "set_ssc_bin2",
        "set_ssc_bin2_n",
        "n",
    ]
    assert out.iloc[0].tolist()[:6] == pytest.approx([np.nan, 0, 1.0, 2, 1.0, 1], nan_ok=True)


DATA = {
    "seg": ["a"] * 20 + ["b"] * 20,
    "y": [0.0] * 40,
    "lo": [-1.0] * 20 + [-1.0] * 8 + [1.0] * 12,
    "hi": [1.0] * 40,
}


def test_coverage_test_flag_is_boolean_on_every_backend(constructor):
    frame = constructor(DATA)
    metric = cf.coverage_test("y", "lo", "hi", confidence_level=0.9)
    lazy = constructor.lazy
    if lazy and not isinstance(frame, pl.LazyFrame):
        with pytest.raises(NotImplementedError, match="collect the frame first"):
            cf.evaluate(frame, metric, by="seg")
        return
    result = nw.from_native(cf.evaluate(frame, metric, by="seg"))
    assert isinstance(result, nw.LazyFrame) == lazy
    assert result.collect_schema()["coverage_test_flag"] == nw.Boolean
    out = to_pandas(result)
    assert out["coverage_test_flag"].tolist() == [False, True]


def test_coverage_test_result_fields(eager_constructor):
    data = {k: v[20:] for k, v in DATA.items()}  # segment b: 8 of 20 covered
    res = cf.conformal(eager_constructor(data)).coverage_test(
        "y", "lo", "hi", confidence_level=0.9, correction="bh", significance=0.01
    )
    assert isinstance(res, cf.CoverageTestResult)
    p = float(binom.cdf(8, 20, 0.9))
    assert res.statistic == 0.4 and res.pvalue == pytest.approx(p, rel=1e-12)
    assert res.pvalue_adjusted == res.pvalue  # one group: the adjustment is the identity
    assert 0 < res.ci_low < 0.4 < res.ci_high < 1
    assert res.flag is True and res.n == 20 and isinstance(res.n, int)
    stat, pvalue = res
    assert (stat, pvalue) == (res.statistic, res.pvalue)
    with pytest.raises(AttributeError):
        res.flag = False  # type: ignore[misc]  # frozen


def test_empty_frame_test_results_are_nan():
    res = pl.DataFrame({"y": [], "s": []}, schema={"y": pl.Float64, "s": pl.Float64}).conformal.ks_test("y", "s")
    assert math.isnan(res.statistic) and math.isnan(res.pvalue) and res.n == 0


def test_cumulative_differences_counts_are_n():
    out = cf.cumulative_differences(pl.DataFrame({"y": [1.0, 0.0], "s": [0.5, 0.5]}), "y", "s")
    assert out.columns == ["s", "n", "cumulative_difference"]
