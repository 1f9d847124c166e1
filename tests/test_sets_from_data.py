"""Prediction sets from a list column without ``classes=``: labels come from the data."""

from __future__ import annotations

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest

import conformal_frames as cf
import oracle_sets as osets
from helpers import assert_close, group_dict, to_pandas

COLUMNS = ["set_coverage", "set_size", "singleton_rate", "empty_rate"]
METRICS = [cf.set_coverage("y", "s"), cf.set_size("s"), cf.singleton_rate("s"), cf.empty_rate("s")]


def _expected(d, idx):
    yi, m = d["yi"][idx], d["m"][idx]
    return [osets.set_coverage(yi, m), osets.set_size(m), osets.size_rate(m, 1), osets.size_rate(m, 0)]


def test_done_when_pandas_object_lists():
    frame = pd.DataFrame({"y": ["a", "b"], "s": [["a", "b"], ["c"]]})
    before = frame.copy(deep=True)
    assert frame.conformal.set_coverage("y", "s") == 0.5
    pd.testing.assert_frame_equal(frame, before)


@pytest.mark.spark_cases([{"strings": False, "seed": 0}, {"strings": True, "seed": 1}])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("strings", [False, True], ids=["int", "str"])
def test_without_classes_matches_oracle(constructor, seed, strings):
    d = osets.random_sets(seed, strings=strings)
    frame = constructor(osets.frame_dict(d, list_column=True))
    out = to_pandas(cf.evaluate(frame, *METRICS, by="g"))
    groups = group_dict(d["g"])
    assert list(out["g"]) == sorted(groups)
    assert list(out.columns) == [
        "g",
        *COLUMNS[:1],
        "set_coverage_ci_low",
        "set_coverage_ci_high",
        *COLUMNS[1:],
        "n",
    ] + (["n_invalid"] if constructor.lazy else [])
    expected = np.array([_expected(d, idx) for idx in groups.values()])
    assert_close(out[COLUMNS].to_numpy(), expected, rtol=1e-12, atol=1e-15, what=constructor.id)
    whole = to_pandas(cf.evaluate(frame, *METRICS))
    assert_close(whole[COLUMNS].to_numpy(), [_expected(d, np.arange(len(d["g"])))], rtol=1e-12)
    with_classes = [
        cf.set_coverage("y", "s", classes=d["classes"]).alias("c"),
        cf.set_size("s", classes=d["classes"]).alias("z"),
    ]
    both = to_pandas(cf.evaluate(frame, *METRICS, *with_classes, by="g"))
    assert_close(both["c"], both["set_coverage"])
    assert_close(both["z"], both["set_size"])


def test_lazy_stays_lazy(lazy_constructor):
    d = osets.random_sets(2)
    frame = lazy_constructor(osets.frame_dict(d, list_column=True))
    out = cf.evaluate(frame, *METRICS, by="g")
    assert isinstance(nw.from_native(out), nw.LazyFrame)
    assert type(out) is type(frame)


def test_ungrouped_namespace_floats(eager_constructor):
    frame = eager_constructor({"y": [1, 2, 3, 1], "s": [[1, 2], [1], [], [1, 3, 2]]})
    ns = cf.conformal(frame)
    assert ns.set_coverage("y", "s") == 0.5
    assert ns.set_size("s") == 1.5
    assert ns.singleton_rate("s") == 0.25
    assert ns.empty_rate("s") == 0.25


def test_pandas_object_cells_of_every_kind():
    frame = pd.DataFrame({"y": [0, 1, 2, 3], "s": [[0], (0, 1), {1, 2}, np.array([0, 1])]})
    assert frame.conformal.set_coverage("y", "s") == 0.75
    assert frame.conformal.set_size("s") == 1.75
    assert frame["s"].dtype == object


def test_a_repeated_label_counts_once_and_null_elements_are_no_label():
    frame = pl.DataFrame({"y": ["a", "b"], "s": [["a", "a"], ["b", None]]})
    assert frame.conformal.set_size("s") == 1.0
    assert frame.conformal.singleton_rate("s") == 1.0
    assert frame.conformal.set_coverage("y", "s") == 1.0


def test_missing_sets_and_labels_are_invalid(constructor):
    frame = constructor({"y": [0, None, 1], "s": [[0], [1], None]})
    metric = cf.set_coverage("y", "s")
    if constructor.lazy:
        out = to_pandas(cf.evaluate(frame, metric))
        assert int(out["n_invalid"][0]) == 2 and pd.isna(out["set_coverage"][0])
    else:
        with pytest.raises(ValueError, match=r"(set column 's'|label column 'y') has missing values in 1 row"):
            cf.evaluate(frame, metric)


def test_label_kinds_must_match():
    frame = pl.DataFrame({"y": [1, 2], "s": [["a"], ["b"]]})
    with pytest.raises(TypeError, match="label column 'y' has dtype Int64 but the sets hold String labels"):
        frame.conformal.set_coverage("y", "s")


def test_bad_object_cells_are_named():
    frame = pd.DataFrame({"y": [0, 1, 2], "s": [[0], "ab", 3]})
    with pytest.raises(
        TypeError, match=r"set column 's' \(dtype object\) holds values that are not lists .* in 2 rows"
    ):
        frame.conformal.set_size("s")
    mixed = pd.DataFrame({"y": [0, 1], "s": [[0], ["a"]]})
    with pytest.raises(TypeError, match="set column 's' mixes label types"):
        mixed.conformal.set_size("s")


def test_only_membership_columns_need_classes():
    frame = pd.DataFrame({"y": [2, 8, 3, 1], "s": [[2], [8, 1], [], [1]]})
    assert frame.conformal.set_ssc_score("y", "s") == 1.0  # the non-empty sets all cover
    assert frame.conformal.set_ssc_score("y", "s", include_empty=True) == 0.0
    assert frame.conformal.coverage_test("y", sets="s", confidence_level=0.9).statistic == 0.75
    with pytest.raises(ValueError, match="classes= is required"):
        cf.set_size(["m0", "m1"])  # membership columns always need their labels
