"""The invalid-row policy ``invalid="raise" | "drop" | "null"`` on every backend.

Expected values are counted by hand from the data below (no call to the code
under test on other data).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas

# group a: rows 0-2, row 1 has a missing y; group b: rows 3-4, all valid;
# group c: rows 5-6, both invalid (lo > hi)
DATA = {
    "y": [1.0, None, 3.0, 4.0, 5.0, 6.0, 7.0],
    "lo": [0.0, 0.0, 4.0, 3.0, 4.0, 9.0, 9.0],
    "hi": [2.0, 2.0, 5.0, 5.0, 6.0, 8.0, 8.0],
    "g": ["a", "a", "a", "b", "b", "c", "c"],
}
METRICS = [cf.coverage("y", "lo", "hi"), cf.width("lo", "hi")]


def test_eager_default_raises_and_lazy_default_is_null(constructor):
    frame = constructor(DATA)
    if constructor.lazy:
        out = to_pandas(cf.evaluate(frame, *METRICS, by="g"))
        assert list(out.columns) == ["g", "coverage", "coverage_ci_low", "coverage_ci_high", "width", "n", "n_invalid"]
        assert list(out["n_invalid"]) == [1, 0, 2]
    else:
        with pytest.raises(ValueError, match=r"column 'lo' is greater than column 'hi' in 2 rows"):
            cf.evaluate(frame, *METRICS, by="g")


def test_raise_on_lazy_input_runs_the_checks(constructor):
    with pytest.raises(ValueError, match=r"column 'lo' is greater than column 'hi' in 2 rows"):
        cf.evaluate(constructor({k: v[3:] for k, v in DATA.items()}), *METRICS, by="g", invalid="raise")


def test_null_reports_the_invalid_groups(constructor):
    out = to_pandas(cf.evaluate(constructor(DATA), *METRICS, by="g", invalid="null"))
    assert list(out["g"]) == ["a", "b", "c"]
    assert list(out["n"]) == [3, 2, 2] and list(out["n_invalid"]) == [1, 0, 2]
    assert_close(out["coverage"], [math.nan, 1.0, math.nan])
    assert_close(out["width"], [math.nan, 2.0, math.nan])


def test_drop_uses_the_valid_rows_and_counts_the_others(constructor):
    out = to_pandas(cf.evaluate(constructor(DATA), *METRICS, by="g", invalid="drop"))
    # width reads no y: the row of a missing y stays in width (n_dropped_width), see tests/test_family_drop.py
    columns = ["g", "coverage", "coverage_ci_low", "coverage_ci_high", "width", "n", "n_dropped", "n_dropped_width"]
    assert list(out.columns) == columns
    assert list(out["g"]) == ["a", "b", "c"]  # c: every row dropped, still reported
    assert list(out["n"]) == [2, 2, 0] and list(out["n_dropped"]) == [1, 0, 2]
    assert list(out["n_dropped_width"]) == [0, 0, 2]
    assert_close(out["coverage"], [0.5, 1.0, math.nan])  # a: y=1 in [0, 2], y=3 not in [4, 5]
    assert_close(out["width"], [5 / 3, 2.0, math.nan])


def test_drop_ungrouped(constructor):
    out = to_pandas(cf.evaluate(constructor(DATA), *METRICS, invalid="drop"))
    assert list(out["n"]) == [4] and list(out["n_dropped"]) == [3]
    assert_close(out["coverage"], [3 / 4])
    value = cf.conformal(constructor(DATA)).coverage("y", "lo", "hi", invalid="drop")
    if not constructor.lazy:
        assert value == 0.75


def test_drop_with_a_table_metric_and_a_window_metric(constructor):
    """Sub-queries (ssc) and windows (auroc ranks) see only the valid rows."""
    d = {
        "y": [1.0, 2.0, None, 4.0, 5.0, 6.0],
        "lo": [0.0, 0.0, 0.0, 3.0, 0.0, 5.0],
        "hi": [2.0, 1.0, 1.0, 5.0, 1.0, 7.0],
        "ok": [1, 0, 1, 1, 0, 1],
        "s": [0.9, 0.2, 0.1, 0.8, 0.3, 0.7],
    }
    out = to_pandas(
        cf.evaluate(
            constructor(d),
            cf.ssc_score("y", "lo", "hi", n_bins=1),
            cf.auroc("ok", "s"),
            cf.coverage("y", "lo", "hi"),
            invalid="drop",
        )
    )
    assert list(out["n"]) == [5] and list(out["n_dropped"]) == [1]
    assert_close(out["coverage"], [3 / 5])
    assert_close(out["ssc_score"], [3 / 5])  # one bin: the coverage of the valid rows
    # auroc reads no y: the row of a missing y (correct, confidence 0.1) stays in it, 6 of 8 pairs ordered
    assert list(out["n_dropped_auroc"]) == [0]
    assert_close(out["auroc"], [0.75])


@pytest.mark.parametrize("invalid", ["drop", "null"])
def test_policies_with_a_numpy_step(eager_constructor, invalid):
    out = to_pandas(
        cf.evaluate(
            eager_constructor(DATA), cf.coverage_test("y", "lo", "hi", confidence_level=0.5), by="g", invalid=invalid
        )
    )
    pvalues = out["coverage_test_pvalue"].to_numpy(dtype=float)
    assert np.isnan(pvalues[2]) and not np.isnan(pvalues[1])
    assert np.isnan(pvalues[0]) == (invalid == "null")


def test_policy_is_checked():
    frame = pd.DataFrame(DATA)
    with pytest.raises(ValueError, match="invalid= must be 'raise', 'drop' or 'null', got 'skip'"):
        cf.evaluate(frame, *METRICS, invalid="skip")
    with pytest.raises(TypeError, match="invalid= must be"):
        frame.conformal.coverage("y", "lo", "hi", invalid=True)


def test_cumulative_differences_policies(constructor):
    d = {"y": [1.0, 0.0, None, 1.0, 0.0], "s": [0.5, 0.5, 0.25, 0.75, 0.75], "g": ["a", "a", "a", "b", "b"]}
    ns = cf.conformal(constructor(d))
    dropped = to_pandas(ns.cumulative_differences("y", "s", by="g", invalid="drop"))
    # a: the valid rows (1, 0.5) and (0, 0.5): C = (0.5 - 0.5) / 2 = 0; b: 0.25 - 0.75 = -0.5, / 2
    assert list(dropped["g"]) == ["a", "b"] and list(dropped["n"]) == [2, 2]
    assert_close(dropped["cumulative_difference"], [0.0, -0.25])
    nulled = to_pandas(ns.cumulative_differences("y", "s", by="g", invalid="null"))
    assert list(nulled["g"]) == ["a", "a", "b"]
    assert_close(nulled["cumulative_difference"], [math.nan, math.nan, -0.25])
    if not constructor.lazy:
        with pytest.raises(ValueError, match=r"column 'y' has missing \(null/NaN\) or infinite values in 1 row"):
            ns.cumulative_differences("y", "s", by="g")
