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


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("column", ["y", "lo", "hi"])
def test_missing_or_infinite_values(constructor, column, bad):
    values = list(BASE[column])
    values[1] = bad
    frame = constructor(_with(**{column: values}))
    metrics = [m for m in ALL_INTERVAL_METRICS if not isinstance(m, cf.intervals.HSIC) or not constructor.lazy]
    if column == "y":  # the width does not read y
        metrics = [m for m in metrics if not isinstance(m, cf.intervals.Width)]
    if constructor.lazy:
        metrics = [m for m in metrics if not isinstance(m, cf.intervals.SSC)]
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
    frame = constructor(_with(g=["a", None, "b", "b"]))
    if constructor.lazy:
        out = to_pandas(cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by="g"))
        assert list(out["n_invalid"]) == [0, 0, 1]  # the null group sorts last
        assert np.isnan(out["coverage"][2])
    else:
        with pytest.raises(ValueError, match=r"group column 'g' \(by=\) has null values in 1 row; fill or drop"):
            cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by="g")


@pytest.mark.parametrize("n_bins", [0, -1, 2.5, True, "3", None])
def test_invalid_n_bins(n_bins):
    with pytest.raises(ValueError, match=rf"n_bins must be a positive integer, got {n_bins!r}"):
        cf.ssc("y", "lo", "hi", n_bins=n_bins)
    with pytest.raises(ValueError, match="n_bins must be a positive integer"):
        cf.ssc_score("y", "lo", "hi", n_bins=n_bins)


@pytest.mark.parametrize("level", [0, 1, -0.1, 1.5, math.nan, True])
def test_invalid_confidence_level(level):
    with pytest.raises(ValueError, match="confidence_level must be a number strictly between 0 and 1"):
        cf.winkler("y", "lo", "hi", confidence_level=level)
    with pytest.raises(ValueError, match="confidence_level must be a number strictly between 0 and 1"):
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=level)


@pytest.mark.parametrize("ci_level", [0, 1, 2.0, math.nan])
def test_invalid_ci_level(ci_level):
    with pytest.raises(ValueError, match="ci_level must be a number strictly between 0 and 1"):
        cf.coverage("y", "lo", "hi", ci_level=ci_level)


@pytest.mark.parametrize("sizes", [(1,), (1, 2, 3), (0, 1), (1, -2), (1, math.inf), (True, 1), "ab", 3])
def test_invalid_kernel_sizes(sizes):
    with pytest.raises(ValueError, match="kernel_sizes must be two positive numbers"):
        cf.hsic("y", "lo", "hi", kernel_sizes=sizes)


@pytest.mark.parametrize("eta", [math.nan, math.inf, "1"])
def test_invalid_eta(eta):
    with pytest.raises(ValueError, match="eta must be a finite number"):
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
        if not isinstance(m, (cf.intervals.HSIC, cf.intervals.SSC)) or not constructor.lazy
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


def test_confidence_level_string_is_a_column_name():
    """A string level names a by= column (since 0.2): checked when evaluated."""
    frame = pl.DataFrame({"y": [1.0], "lo": [0.0], "hi": [2.0], "g": ["a"]})
    with pytest.raises(ValueError, match="column '0.9' not found"):
        cf.evaluate(frame, cf.winkler("y", "lo", "hi", confidence_level="0.9"), by="g")
