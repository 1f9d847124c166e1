"""The bad-input catalogue: one parametrized test, every case on every backend.

Each case says what the user sees (the same table is ``docs/bad-input.md``):

- ``error``: a ValueError / TypeError naming the column or parameter and what
  was found, on eager *and* lazy input (raised when the query is built);
- ``rows``: invalid rows.  Eager input: ``ValueError("<message> in <count>
  rows")``.  Lazy input: the metrics of the group holding the bad row are null
  and ``n_invalid`` counts the bad rows; the other group is computed;
- ``value``: valid but awkward input with a documented outcome, checked
  against the numpy oracles.

For every case and backend the harness also checks that an exception, if
any, is a ValueError / TypeError / NotImplementedError raised by
``conformal_frames`` itself (never from inside numpy, narwhals, pandas,
polars or DuckDB), and that the input frame is unchanged afterwards.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import pytest

import conformal_frames as cf
import oracle
import oracle_calibration as ocal
from helpers import assert_close, to_pandas

PACKAGE = str(Path(cf.__file__).resolve().parent)

# ---------------------------------------------------------------------------
# the base frame: two groups of three rows, every kind of input column
# ---------------------------------------------------------------------------
BASE: dict[str, list[Any]] = {
    "g": ["a", "a", "a", "b", "b", "b"],
    "y": [1.0, 2.0, 3.0, 4.0, 5.0, 6.5],
    "lo": [0.0, 2.5, 2.0, 3.0, 4.5, 5.0],
    "hi": [2.0, 3.0, 4.0, 5.0, 6.0, 6.0],
    "label": [0.0, 1.0, 1.0, 1.0, 0.0, 1.0],
    "score": [0.2, 0.7, 0.9, 0.6, 0.3, 0.8],
    "correct": [1.0, 0.0, 1.0, 0.0, 1.0, 1.0],
    "conf": [0.9, 0.4, 0.6, 0.2, 0.7, 0.5],
    "label3": [0, 1, 2, 2, 1, 0],
    "p0": [0.8, 0.1, 0.05, 0.3, 0.2, 0.9],
    "p1": [0.1, 0.7, 0.2, 0.4, 0.6, 0.05],
    "p2": [0.02, 0.3, 0.8, 0.5, 0.1, 0.2],
    "m0": [True, False, False, True, False, True],
    "m1": [False, True, True, True, True, False],
    "m2": [False, True, True, False, False, False],
    "name": ["x", "y", "z", "x", "y", "z"],
    "flag": [True, False, True, False, True, False],
}
MEMBERS = ["m0", "m1", "m2"]


def data(**changes: list[Any]) -> dict[str, list[Any]]:
    d = {k: list(v) for k, v in BASE.items()}
    d.update(changes)
    return d


def replaced(column: str, value: Any, row: int = 1) -> dict[str, list[Any]]:
    values = list(BASE[column])
    values[row] = value
    return data(**{column: values})


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------
@dataclass
class Case:
    id: str
    what: str  # the input, as in the docs table
    kind: str  # "error" | "rows" | "value" | "special"
    frame: dict[str, list[Any]] = field(default_factory=data)
    metrics: Callable[[], list[cf.Metric]] | None = None
    by: str | None = "g"
    error: tuple[type[Exception], str] | None = None
    n_invalid: list[int] | None = None  # lazy "rows" outcome
    check: Callable[[pd.DataFrame, Any], None] | None = None  # "value" outcome
    run: Callable[[Any], None] | None = None  # "special": the whole check
    xfail: dict[str, str] = field(default_factory=dict)  # backend id -> exact bug
    #: backend id -> the error that backend gives instead (e.g. a dtype it cannot hold)
    backend_error: dict[str, tuple[type[Exception], str]] = field(default_factory=dict)


def _check_null_key(out: pd.DataFrame, case: Case) -> None:
    """A null (or NaN) key: a group of its own, sorted last, its metrics computed (row 1 is not covered)."""
    assert out["g"].isna().tolist() == [False, False, True]
    assert list(out["n"]) == [2, 3, 1]
    assert_close(out["coverage"], [1.0, 2 / 3, 0.0])


def interval_metrics(use_y: bool = True) -> Callable[[], list[cf.Metric]]:
    def make() -> list[cf.Metric]:
        out: list[cf.Metric] = [cf.width("lo", "hi")]
        if use_y:
            out = [
                cf.coverage("y", "lo", "hi"),
                cf.winkler("y", "lo", "hi", confidence_level=0.9),
                cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
                cf.ssc_score("y", "lo", "hi", n_bins=2),
            ]
        return out

    return make


def calibration_metrics() -> list[cf.Metric]:
    return [cf.ece("label", "score", n_bins=5), cf.brier("label", "score"), cf.ks_test("label", "score")]


def ranking_metrics() -> list[cf.Metric]:
    return [cf.auroc("correct", "conf"), cf.auarc("correct", "conf")]


def set_metrics() -> list[cf.Metric]:
    return [cf.set_coverage("label3", MEMBERS, classes=[0, 1, 2]), cf.set_size(MEMBERS, classes=[0, 1, 2])]


def efficiency_metrics() -> list[cf.Metric]:
    return [cf.efficiency_criteria("label3", ["p0", "p1", "p2"], classes=[0, 1, 2], confidence_level=0.75)]


MISSING = "has missing \\(null/NaN\\) or infinite values in 1 row"
BAD_VALUES = {"null": None, "nan": math.nan, "inf": math.inf}

CASES: list[Case] = [
    # -- columns and dtypes -------------------------------------------------
    Case(
        "missing-column",
        "a metric column that does not exist",
        "error",
        metrics=lambda: [cf.coverage("yy", "lo", "hi")],
        error=(ValueError, r"column 'yy' not found; available columns: 'g', 'y', 'lo'"),
    ),
    Case(
        "missing-by-column",
        "a by= column that does not exist",
        "error",
        by="seg",
        metrics=lambda: [cf.coverage("y", "lo", "hi")],
        error=(ValueError, r"group column 'seg' \(by=\) not found; available columns"),
    ),
    Case(
        "string-scores",
        "string scores",
        "error",
        metrics=lambda: [cf.ece("label", "name")],
        error=(TypeError, r"column 'name' must be numeric, found dtype String"),
    ),
    Case(
        "boolean-y-intervals",
        "boolean y for intervals",
        "error",
        metrics=lambda: [cf.coverage("flag", "lo", "hi")],
        error=(TypeError, r"column 'flag' must be numeric, found dtype Boolean"),
    ),
    Case(
        "by-is-metric-column",
        "a by= column that is also a metric column",
        "error",
        by="y",
        metrics=lambda: [cf.coverage("y", "lo", "hi")],
        error=(ValueError, r"column 'y' is both a group key \(by=\) and a metric input"),
    ),
    Case(
        "string-labels-int-classes",
        "string labels with integer classes",
        "error",
        metrics=lambda: [cf.set_coverage("name", MEMBERS, classes=[0, 1, 2])],
        error=(TypeError, r"label column 'name' has dtype String but classes are \[0, 1, 2\]"),
    ),
    Case(
        "sets-string-column",
        "sets of the wrong type: a string column",
        "error",
        metrics=lambda: [cf.set_coverage("label3", "name", classes=[0, 1, 2])],
        error=(TypeError, r"set column 'name' must be a list column of labels, found dtype String"),
    ),
    Case(
        "sets-float-membership",
        "sets of the wrong type: float membership columns",
        "error",
        metrics=lambda: [cf.set_coverage("label3", ["p0", "p1", "p2"], classes=[0, 1, 2])],
        error=(TypeError, r"membership column 'p0' must be boolean, found dtype Float64"),
    ),
    Case(
        "sets-not-a-list",
        "sets= neither a column name nor a list of names",
        "error",
        metrics=lambda: [cf.set_coverage("label3", 3, classes=[0, 1, 2])],  # type: ignore[arg-type]
        error=(TypeError, r"sets must be the name of a list column or a list of boolean membership column names"),
    ),
    Case(
        "pvalues-classes-mismatch",
        "p-value columns that do not match classes",
        "error",
        metrics=lambda: [cf.efficiency_criteria("label3", ["p0", "p1", "p2"], classes=[0, 1], confidence_level=0.9)],
        error=(ValueError, r"mismatched classes and p-value columns: 3 columns \['p0', 'p1', 'p2'\] but 2 classes"),
    ),
    Case(
        "membership-classes-mismatch",
        "membership columns that do not match classes",
        "error",
        metrics=lambda: [cf.set_size(MEMBERS, classes=[0, 1])],
        error=(ValueError, r"mismatched classes and membership columns: 3 columns"),
    ),
    # -- parameters -----------------------------------------------------------
    *[
        Case(
            f"n-bins-{v!r}",
            f"n_bins={v!r}",
            "error",
            metrics=lambda v=v: [cf.ece("label", "score", n_bins=v)],
            error=(
                ValueError if isinstance(v, int) and not isinstance(v, bool) else TypeError,
                rf"n_bins must be a positive integer, got {v!r}",
            ),
        )
        for v in (0, -1, 2.5, True)
    ],
    *[
        Case(
            f"confidence-level-{v!r}",
            f"confidence_level={v!r}",
            "error",
            metrics=lambda v=v: [cf.winkler("y", "lo", "hi", confidence_level=v)],
            error=(ValueError, rf"confidence_level must be a number strictly between 0 and 1, got {v!r}"),
        )
        for v in (0, 1, -0.1, 1.5, math.nan)
    ],
    *[
        Case(
            f"efficiency-confidence-level-{v!r}",
            f"efficiency_criteria(confidence_level={v!r})",
            "error",
            metrics=lambda v=v: [cf.efficiency_criteria(None, ["p0", "p1", "p2"], confidence_level=v)],
            error=(ValueError, rf"confidence_level must be a number strictly between 0 and 1, got {v!r}"),
        )
        for v in (0.0, 1.0, -0.5, 2)
    ],
    # -- invalid rows -------------------------------------------------------
    *[
        Case(
            f"{bad}-in-{col}",
            f"{bad} in {col} (intervals)",
            "rows",
            frame=replaced(col, value),
            metrics=interval_metrics(use_y=col == "y"),
            error=(ValueError, rf"column '{col}' {MISSING}"),
            n_invalid=[1, 0],
        )
        for col in ("y", "lo", "hi")
        for bad, value in BAD_VALUES.items()
    ],
    *[
        Case(
            f"{bad}-in-{col}",
            f"{bad} in {col} (calibration)",
            "rows",
            frame=replaced(col, value),
            metrics=calibration_metrics,
            error=(ValueError, rf"column '{col}' {MISSING}"),
            n_invalid=[1, 0],
        )
        for col in ("label", "score")
        for bad, value in BAD_VALUES.items()
    ],
    *[
        Case(
            f"{bad}-in-{col}",
            f"{bad} in {col} (ranking)",
            "rows",
            frame=replaced(col, value),
            metrics=ranking_metrics,
            error=(ValueError, rf"column '{col}' {MISSING}"),
            n_invalid=[1, 0],
        )
        for col in ("correct", "conf")
        for bad, value in BAD_VALUES.items()
    ],
    *[
        Case(
            f"{bad}-in-p0",
            f"{bad} in a p-value column",
            "rows",
            frame=replaced("p0", value),
            metrics=efficiency_metrics,
            error=(ValueError, rf"column 'p0' {MISSING}"),
            n_invalid=[1, 0],
        )
        for bad, value in BAD_VALUES.items()
    ],
    Case(
        "null-in-set-label",
        "null true label (sets)",
        "rows",
        frame=replaced("label3", None),
        metrics=set_metrics,
        error=(ValueError, r"label column 'label3' has missing values in 1 row"),
        n_invalid=[1, 0],
    ),
    Case(
        "null-in-membership",
        "null in a membership column",
        "rows",
        frame=replaced("m1", None),
        metrics=set_metrics,
        error=(ValueError, r"membership column 'm1' has missing values in 1 row"),
        n_invalid=[1, 0],
        # numpy-backed pandas stores a boolean column with a missing value as dtype object
        backend_error={"pandas": (TypeError, r"membership column 'm1' must be boolean, found dtype Object")},
    ),
    Case(
        "null-group-key",
        "null in a by= column",
        "value",
        frame=replaced("g", None),
        metrics=lambda: [cf.coverage("y", "lo", "hi")],
        check=_check_null_key,
    ),  # the null group sorts last
    Case(
        "nan-group-key",
        "NaN in a float by= column",
        "value",
        frame=data(g=[1.0, math.nan, 1.0, 2.0, 2.0, 2.0]),
        metrics=lambda: [cf.coverage("y", "lo", "hi")],
        check=_check_null_key,
    ),  # the NaN group sorts last: a null key
    Case(
        "int64-beyond-2-53",
        "64-bit integers beyond 2^53 (not exact as Float64)",
        "rows",
        frame=data(y=[1, 2**53 + 1, 3, 4, 5, 6]),
        metrics=interval_metrics(),
        error=(
            ValueError,
            r"column 'y' has integers beyond 2\^53 in absolute value, which Float64 cannot hold exactly in 1 row",
        ),
        n_invalid=[1, 0],
    ),
    Case(
        "lo-greater-than-hi",
        "lo > hi",
        "rows",
        frame=replaced("lo", 3.5),
        metrics=lambda: [cf.width("lo", "hi"), cf.coverage("y", "lo", "hi")],
        error=(ValueError, r"column 'lo' is greater than column 'hi' in 1 row"),
        n_invalid=[1, 0],
    ),
    Case(
        "scores-outside-01",
        "scores outside [0, 1]",
        "rows",
        frame=data(score=[0.2, 1.5, -0.2, 0.6, 0.3, 0.8]),
        metrics=calibration_metrics,
        error=(ValueError, r"column 'score' has values outside \[0, 1\] in 2 rows"),
        n_invalid=[2, 0],
    ),
    Case(
        "labels-not-binary",
        "labels outside {0, 1}",
        "rows",
        frame=replaced("label", 2.0),
        metrics=calibration_metrics,
        error=(ValueError, r"column 'label' has labels other than 0 and 1 in 1 row"),
        n_invalid=[1, 0],
    ),
    Case(
        "correct-not-binary",
        "correctness outside {0, 1}",
        "rows",
        frame=replaced("correct", -1.0),
        metrics=ranking_metrics,
        error=(ValueError, r"column 'correct' has labels other than 0 and 1 in 1 row"),
        n_invalid=[1, 0],
    ),
    Case(
        "label-not-in-classes",
        "labels outside the classes",
        "rows",
        frame=replaced("label3", 7),
        metrics=set_metrics,
        error=(ValueError, r"label column 'label3' has labels not among classes \[0, 1, 2\] in 1 row, e.g. 7"),
        n_invalid=[1, 0],
    ),
    Case(
        "negative-label",
        "negative labels (the baseline wraps them around)",
        "rows",
        frame=replaced("label3", -1),
        metrics=efficiency_metrics,
        error=(ValueError, r"label column 'label3' has labels not among classes \[0, 1, 2\] in 1 row, e.g. -1"),
        n_invalid=[1, 0],
    ),
    Case(
        "pvalue-outside-01",
        "p-values outside [0, 1]",
        "rows",
        frame=replaced("p1", 1.2),
        metrics=efficiency_metrics,
        error=(ValueError, r"p-value column 'p1' has values outside \[0, 1\] in 1 row"),
        n_invalid=[1, 0],
    ),
    Case(
        "zero-y-mape",
        "y = 0 in mape (an infinite percentage error)",
        "rows",
        frame=replaced("y", 0.0),
        metrics=lambda: [cf.mape("y", "score"), cf.mae("y", "score")],
        error=(ValueError, r"column 'y' \(y\) is 0 in 1 row, where the absolute percentage error is infinite"),
        n_invalid=[1, 0],
    ),
    *[
        Case(
            f"{kind}-scale",
            f"a {kind} scale in mase / rmsse",
            "rows",
            frame=replaced("conf", value),
            metrics=lambda: [cf.mase("y", "score", scale="conf"), cf.rmsse("y", "score", scale="conf")],
            error=(ValueError, r"scale column 'conf' \(scale=\) has zero or negative values in 1 row"),
            n_invalid=[1, 0],
        )
        for kind, value in (("zero", 0.0), ("negative", -1.0))
    ],
    # issue 41, item 4: class probabilities of the proper scores sum to 1
    Case(
        "probs-not-summing-to-1",
        "class probabilities that do not sum to 1 (log_loss, brier, rps)",
        "rows",
        frame=data(
            p0=[0.8, 0.1, 0.05, 0.3, 0.2, 0.75],
            p1=[0.1, 0.7, 0.15, 0.4, 0.6, 0.05],
            p2=[0.1, 0.3, 0.8, 0.3, 0.2, 0.2],  # row 1 sums to 1.1
        ),
        metrics=lambda: [
            cf.log_loss("label3", ["p0", "p1", "p2"], classes=[0, 1, 2]),
            cf.rps("label3", ["p0", "p1", "p2"]),
        ],
        error=(
            ValueError,
            r"probability columns \['p0', 'p1', 'p2'\] do not sum to 1 \(tolerance 1e-8 \+ 1.49e-08 x total\) in 1 row",
        ),
        n_invalid=[1, 0],
    ),
]


# ---------------------------------------------------------------------------
# "value" cases: valid, awkward input with a documented outcome
# ---------------------------------------------------------------------------
def _arrays(d: dict[str, list[Any]], *cols: str) -> list[np.ndarray]:
    return [np.asarray(d[c], dtype=float) for c in cols]


def _check_empty(out: pd.DataFrame, case: Case) -> None:
    if case.by is None:  # one row: n = 0, every metric null
        assert list(out["n"]) == [0]
        assert out.drop(columns=[c for c in ("n", "n_invalid") if c in out]).isna().all(axis=None)
    else:  # no groups, no rows
        assert len(out) == 0


def _empty_frame() -> dict[str, Any]:
    f = np.array([], dtype=float)
    return {"y": f, "lo": f, "hi": f, "label": f, "score": f, "g": np.array([], dtype=str)}


def _small_groups_check(out: pd.DataFrame, case: Case) -> None:
    d = case.frame
    y, lo, hi, label, score = _arrays(d, "y", "lo", "hi", "label", "score")
    g = np.asarray(d["g"])
    assert list(out["g"]) == ["one", "two"]
    assert list(out["n"]) == [1, 2]
    for row, key in enumerate(["one", "two"]):
        i = g == key
        assert_close(out["coverage"][row], oracle.coverage(y[i], lo[i], hi[i]), what=f"coverage {key}")
        assert_close(out["ssc_score"][row], oracle.ssc_score(y[i], lo[i], hi[i], 3), what=f"ssc {key}")
        assert_close(out["ece"][row], ocal.ece(label[i], score[i], 5), what=f"ece {key}")
        assert_close(out["ks_test"][row], ocal.ks(label[i], score[i])[0], what=f"ks {key}")


def _constant_width_check(out: pd.DataFrame, case: Case) -> None:
    y, lo, hi = _arrays(case.frame, "y", "lo", "hi")
    expected = oracle.ssc(y, lo, hi, 3)
    cols = [f"ssc_bin{b}" for b, _, _ in expected]
    assert_close(out[cols].iloc[0].to_numpy(dtype=float, na_value=np.nan), [c for _, c, _ in expected], what="ssc bins")
    assert_close(out["ssc_score"], [min(c for _, c, _ in expected)], what="ssc_score")
    _one_stratum_check(out, case)  # never split by the coverage indicator


def _one_stratum_check(out: pd.DataFrame, case: Case) -> None:
    # tied widths (up to rounding noise) are one stratum: the marginal coverage
    y, lo, hi = _arrays(case.frame, "y", "lo", "hi")
    marginal = oracle.coverage(y, lo, hi)
    assert list(out["ssc_bin0_n"]) == [len(y)]
    assert out[["ssc_bin1", "ssc_bin2"]].isna().all(axis=None)
    assert_close(out["ssc_bin0"], [marginal], what="ssc bin 0")
    assert_close(out["ssc_score"], [marginal], what="ssc_score")
    assert [(b, c, n) for b, c, n in oracle.ssc(y, lo, hi, 3)] == [(0, marginal, len(y))]


def _ci_contains_check(out: pd.DataFrame, case: Case) -> None:
    assert list(out["coverage"]) == [1.0]
    assert list(out["coverage_ci_high"]) == [1.0]  # not 0.9999999999999999
    assert out["coverage_ci_low"][0] < 1.0


def _edge_bins_check(out: pd.DataFrame, case: Case) -> None:
    # each edge m/M starts bin m; its neighbour 0.005 below sits in bin m - 1
    # with the opposite label: ECE and MCE are those of one row per bin
    label = np.asarray(case.frame["label"], dtype=float)
    gaps = np.abs(label - np.asarray(case.frame["score"]).astype(float))
    assert_close(out["ece"], [gaps.sum() / len(gaps)], what="ece")
    assert_close(out["mce"], [gaps.max()], what="mce")


def _extreme_scores_check(out: pd.DataFrame, case: Case) -> None:
    label, score = _arrays(case.frame, "label", "score")
    g = np.asarray(case.frame["g"])
    for row, key in enumerate(["a", "b"]):
        i = g == key
        ks, ks_p = ocal.ks(label[i], score[i])
        ku, ku_p = ocal.kuiper(label[i], score[i])
        assert_close(
            out[["ks_test", "ks_test_pvalue", "kuiper_test", "kuiper_test_pvalue"]]
            .iloc[row]
            .to_numpy(dtype=float, na_value=np.nan),
            [ks, ks_p, ku, ku_p],
            what=f"tests {key}",
        )
        assert_close(out["ece"][row], ocal.ece(label[i], score[i], 4), what=f"ece {key}")
        assert_close(out["brier"][row], ocal.brier(label[i], score[i]), what=f"brier {key}")


def _integer_check(out: pd.DataFrame, case: Case) -> None:
    d = {k: np.asarray(case.frame[k], dtype=float) for k in ("y", "lo", "hi", "label", "score")}
    g = np.asarray(case.frame["g"])
    for row, key in enumerate(["a", "b"]):
        i = g == key
        assert_close(out["winkler"][row], oracle.winkler(d["y"][i], d["lo"][i], d["hi"][i], 0.9), what="winkler")
        assert_close(out["width"][row], oracle.width(d["lo"][i], d["hi"][i]), what="width")
        assert_close(out["brier"][row], ocal.brier(d["label"][i], d["score"][i]), what="brier")


INT_FRAME = data(
    y=[1, 2, 3, 4, 5, 7],
    lo=[0, 3, 2, 3, 4, 5],
    hi=[2, 3, 4, 5, 6, 6],
    label=[0, 1, 1, 1, 0, 1],
    score=[0, 1, 1, 1, 0, 0],
)

CASES += [
    Case(
        "empty-frame",
        "empty frame (ungrouped)",
        "value",
        frame=_empty_frame(),
        by=None,  # type: ignore[arg-type]
        metrics=lambda: [
            cf.coverage("y", "lo", "hi"),
            cf.width("lo", "hi"),
            cf.ece("label", "score"),
            cf.brier("label", "score"),
        ],
        check=_check_empty,
    ),
    Case(
        "empty-frame-grouped",
        "empty frame (grouped)",
        "value",
        frame=_empty_frame(),  # type: ignore[arg-type]
        metrics=lambda: [cf.coverage("y", "lo", "hi"), cf.ece("label", "score")],
        check=_check_empty,
    ),
    Case(
        "empty-frame-ks",
        "empty frame, a calibration test",
        "value",
        frame=_empty_frame(),
        by=None,  # type: ignore[arg-type]
        metrics=lambda: [cf.ks_test("label", "score")],
        check=_check_empty,
    ),
    Case("empty-frame-ssc", "empty frame, SSC long table", "special", frame=_empty_frame(), by=None),  # type: ignore[arg-type]
    Case(
        "groups-of-size-1-and-2",
        "groups of size 1 and 2",
        "value",
        frame={"g": ["one", "two", "two"], **{k: BASE[k][:3] for k in ("y", "lo", "hi", "label", "score")}},
        metrics=lambda: [
            cf.coverage("y", "lo", "hi"),
            cf.ssc_score("y", "lo", "hi", n_bins=3),
            cf.ece("label", "score", n_bins=5),
            cf.ks_test("label", "score"),
        ],
        check=_small_groups_check,
    ),
    Case(
        "constant-widths-ssc",
        "constant widths for SSC",
        "value",
        by=None,
        frame=data(
            lo=[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], hi=[2.0, 3.0, 4.0, 5.0, 6.0, 7.0], y=[1.0, 3.5, 3.0, 1.0, 5.0, 8.0]
        ),
        metrics=lambda: [cf.ssc("y", "lo", "hi", n_bins=3), cf.ssc_score("y", "lo", "hi", n_bins=3)],
        check=_constant_width_check,
    ),
    Case(
        "noisy-constant-widths-ssc",
        "widths computed as (pred + q) - (pred - q): equal up to rounding noise",
        "value",
        by=None,
        frame={
            "y": [0.5, 103.0, -57.0, 3.0, 1230.0, 2.0],
            "lo": [p - 1.6449 for p in (0.1, 100.3, -57.77, 3.14159, 1234.5678, -0.003)],
            "hi": [p + 1.6449 for p in (0.1, 100.3, -57.77, 3.14159, 1234.5678, -0.003)],
        },
        metrics=lambda: [cf.ssc("y", "lo", "hi", n_bins=3), cf.ssc_score("y", "lo", "hi", n_bins=3)],
        check=_one_stratum_check,
    ),
    Case(
        "coverage-one-ci",
        "coverage 1.0 with n = 65 (the Wilson bound rounds below 1)",
        "value",
        by=None,
        frame={"y": [0.0] * 65, "lo": [-1.0] * 65, "hi": [1.0] * 65},
        metrics=lambda: [cf.coverage("y", "lo", "hi")],
        check=_ci_contains_check,
    ),
    Case(
        "decimal-edge-scores",
        "scores on decimal bin edges (0.29, 0.57 with 100 bins)",
        "value",
        by=None,
        frame={"label": [1.0, 0.0, 1.0, 0.0], "score": [0.285, 0.29, 0.565, 0.57]},
        metrics=lambda: [cf.ece("label", "score", n_bins=100), cf.mce("label", "score", n_bins=100)],
        check=_edge_bins_check,
    ),
    Case(
        "float32-edge-scores",
        "Float32 scores on decimal bin edges (0.7, 0.9 with 10 bins)",
        "value",
        by=None,
        frame={"label": [1.0, 0.0, 1.0, 0.0], "score": np.array([0.695, 0.7, 0.895, 0.9], dtype=np.float32)},  # type: ignore[dict-item]
        metrics=lambda: [cf.ece("label", "score", n_bins=10), cf.mce("label", "score", n_bins=10)],
        check=_edge_bins_check,
    ),
    Case(
        "scores-all-0-or-1",
        "all scores 0 or 1",
        "value",
        frame=data(score=[0.0, 1.0, 1.0, 1.0, 0.0, 0.0], label=[0.0, 1.0, 1.0, 1.0, 0.0, 1.0]),
        metrics=lambda: [
            cf.ks_test("label", "score"),
            cf.kuiper_test("label", "score"),
            cf.ece("label", "score", n_bins=4),
            cf.brier("label", "score"),
        ],
        check=_extreme_scores_check,
    ),
    Case(
        "integer-columns",
        "integer columns where floats are expected",
        "value",
        frame=INT_FRAME,
        metrics=lambda: [
            cf.winkler("y", "lo", "hi", confidence_level=0.9),
            cf.width("lo", "hi"),
            cf.brier("label", "score"),
        ],
        check=_integer_check,
    ),
    Case(
        "by-named-n",
        "a by= column named like the row count (`n`, `n_invalid`, `n_dropped`)",
        "error",
        frame=data(n=BASE["g"]),
        metrics=interval_metrics(),
        by="n",
        error=(ValueError, r"group column 'n' \(by=\) has the name of the result's row-count column 'n'"),
    ),
    Case(
        "by-named-like-output",
        "a by= column named like an output column",
        "error",
        frame=data(coverage=BASE["g"]),
        metrics=interval_metrics(),
        by="coverage",
        error=(ValueError, r"group column 'coverage' \(by=\) has the name of an output column of coverage"),
    ),
    Case("by-named-like-long-column", "a by= column named like a long table's column (`bin`)", "special"),
    Case(
        "no-metric",
        "evaluate() without a metric",
        "error",
        metrics=lambda: [],
        error=(ValueError, r"evaluate\(\) needs at least one metric"),
    ),
    Case(
        "near-miss-column",
        "a column name with a typo (case or a letter)",
        "error",
        metrics=lambda: [cf.coverage("Y", "lo", "hi")],
        error=(ValueError, r"column 'Y' not found; available columns: .*; did you mean 'y'\?"),
    ),
    Case("categorical-key", "categorical by= key", "special"),
    Case("enum-key", "Enum by= key", "special"),
    Case("empty-group-after-filter", "a group emptied by a filter (Enum key with an unused category)", "special"),
    Case("duplicate-column-names", "duplicate column names", "special"),
    Case("sets-float-list", "a list column of floats with integer classes", "special"),
    # -- found by the differential fuzz (issue 25) ---------------------------
    Case("empty-partition-monitoring", "a day without rows in the summarize / merge_summaries loop", "special"),
    Case("zero-weight-partition", "a day whose weights are all zero, summarized by (day, g)", "special"),
    Case("arrow-dictionary-key", "a key stored as an Arrow dictionary (pandas with Arrow dtypes)", "special"),
    Case("negative-zero-key", "a float key holding 0.0 and -0.0", "special"),
    Case("all-empty-sets", "a list column whose sets are all empty", "special"),
    Case("far-tail-forecast", "a Gaussian forecast with y far in the tail (|z| > 1e6)", "special"),
]


# ---------------------------------------------------------------------------
# the harness
# ---------------------------------------------------------------------------
def _snapshot(frame: Any) -> pd.DataFrame:
    """The frame's content; empty for a Spark DataFrame or a DuckDB relation (immutable query
    objects: nothing changes them in place, and reading one is a query each time)."""
    if type(frame).__module__.split(".")[0] in {"pyspark", "duckdb"}:
        return pd.DataFrame()
    return to_pandas(frame).copy(deep=True)


def _assert_ours(exc: BaseException) -> None:
    """The exception is one of ours, raised by conformal_frames code."""
    assert isinstance(exc, (ValueError, TypeError, NotImplementedError)), f"{type(exc).__name__}: {exc}"
    last = traceback.extract_tb(exc.__traceback__)[-1]
    assert str(Path(last.filename).resolve()).startswith(PACKAGE), (
        f"{type(exc).__module__}.{type(exc).__name__} raised from {last.filename}:{last.lineno}: {exc}"
    )


def _expect_error(fn: Callable[[], Any], error: tuple[type[Exception], str]) -> None:
    kind, pattern = error
    try:
        fn()
    except Exception as exc:
        _assert_ours(exc)
        assert isinstance(exc, kind), f"expected {kind.__name__}, got {type(exc).__name__}: {exc}"
        import re

        assert re.search(pattern, str(exc)), f"{str(exc)!r} does not match {pattern!r}"
    else:
        pytest.fail(f"no error; expected {kind.__name__} matching {pattern!r}")


def _evaluate(frame: Any, case: Case) -> pd.DataFrame:
    assert case.metrics is not None
    try:
        return to_pandas(cf.evaluate(frame, *case.metrics(), by=case.by))
    except Exception as exc:
        _assert_ours(exc)
        raise


def _keyed(constructor: Any, d: dict[str, Any], dtype: Any) -> Any:
    """The frame with its key ``g`` cast to ``dtype`` (Categorical / Enum)."""
    frame = nw.from_native(constructor(d))
    if constructor.id == "duckdb" and dtype == nw.Categorical:
        dtype = nw.Enum(sorted(set(d["g"])))  # DuckDB's categorical type is ENUM
    if constructor.id == "pyspark":
        return frame.to_native()  # Spark has no categorical type: the key stays a string
    return frame.with_columns(nw.col("g").cast(dtype)).to_native()


def _run_special(case: Case, constructor: Any) -> None:
    if case.id in ("categorical-key", "enum-key"):
        d = data(g=["b", "a", "b", "c", "c", "b"])
        plain = to_pandas(cf.evaluate(constructor(d), cf.coverage("y", "lo", "hi"), cf.ece("label", "score"), by="g"))
        dtype = nw.Categorical if case.id == "categorical-key" else nw.Enum(["c", "b", "a"])
        frame = _keyed(constructor, d, dtype)
        before = _snapshot(frame)
        out = to_pandas(cf.evaluate(frame, cf.coverage("y", "lo", "hi"), cf.ece("label", "score"), by="g"))
        pd.testing.assert_frame_equal(_snapshot(frame), before)
        got = {str(k): (c, e) for k, c, e in zip(out["g"], out["coverage"], out["ece"])}
        exp = {str(k): (c, e) for k, c, e in zip(plain["g"], plain["coverage"], plain["ece"])}
        assert got.keys() == exp.keys()
        for k in exp:
            assert_close(got[k], exp[k], what=f"key {k}")
        if case.id == "enum-key" and constructor.id != "pyspark":  # rows follow the Enum's category order
            assert [str(k) for k in out["g"]] == ["c", "b", "a"]
        return
    if case.id == "by-named-like-long-column":
        frame = constructor(data(bin=BASE["g"]))
        before = _snapshot(frame)
        _expect_error(
            lambda: cf.conformal(frame).ssc("y", "lo", "hi", by="bin"),
            (ValueError, r"group column 'bin' \(by=\) has the name of a column of the ssc table"),
        )
        pd.testing.assert_frame_equal(_snapshot(frame), before)
        return
    if case.id == "empty-group-after-filter":
        d = data()
        frame = nw.from_native(_keyed(constructor, d, nw.Enum(["a", "b", "unused"])))
        frame = frame.filter(nw.col("g") == "b").to_native()  # group 'a' loses all its rows
        out = to_pandas(cf.evaluate(frame, cf.coverage("y", "lo", "hi"), cf.auroc("correct", "conf"), by="g"))
        assert [str(k) for k in out["g"]] == ["b"]  # emptied and unused groups are absent rows
        assert list(out["n"]) == [3]
        y, lo, hi = (a[3:] for a in _arrays(d, "y", "lo", "hi"))
        assert_close(out["coverage"], [oracle.coverage(y, lo, hi)])
        return
    if case.id == "empty-frame-ssc":
        frame = constructor(case.frame)
        before = _snapshot(frame)
        out = to_pandas(cf.conformal(frame).ssc("y", "lo", "hi"))
        assert len(out) == 0  # no rows, no bins
        pd.testing.assert_frame_equal(_snapshot(frame), before)
        return
    if case.id == "duplicate-column-names":
        row = [[1.0, 9.0, 0.0, 2.0]]
        if constructor.id in ("pandas", "pandas[pyarrow]"):
            frame = pd.DataFrame(row, columns=["y", "y", "lo", "hi"])
            if constructor.id == "pandas[pyarrow]":
                frame = frame.astype("double[pyarrow]")
        elif constructor.id == "duckdb":
            import duckdb

            frame = duckdb.sql("select 1.0::double as y, 9.0::double as y, 0.0::double as lo, 2.0::double as hi")
        elif constructor.id == "pyspark":
            from conftest import spark_session

            frame = spark_session().createDataFrame(row, ["y", "y", "lo", "hi"])
        else:  # polars cannot hold two columns of one name: nothing to evaluate
            import polars as pl

            with pytest.raises(pl.exceptions.DuplicateError):
                pl.DataFrame(row, schema=["y", "y", "lo", "hi"], orient="row")
            return
        _expect_error(lambda: to_pandas(cf.evaluate(frame, cf.coverage("y", "lo", "hi"))), (ValueError, r"'y'"))
        return
    if case.id == "sets-float-list":
        d = data(s=[[0.0], [1.0, 2.0], [2.0], [0.0, 1.0], [], [0.0]])
        frame = constructor(d)
        try:
            out = to_pandas(cf.evaluate(frame, cf.set_coverage("label3", "s", classes=[0, 1, 2]), by="g"))
        except Exception as exc:
            _assert_ours(exc)  # acceptable: a TypeError naming the set column
            assert isinstance(exc, TypeError) and "set column 's'" in str(exc), str(exc)
            return
        assert_close(out["set_coverage"], [1.0, 1 / 3], what="floats 0.0/1.0/2.0 are the classes 0/1/2")
        return
    if case.id in _FUZZ_CASES:
        _FUZZ_CASES[case.id](constructor)
        return
    raise AssertionError(f"unknown special case {case.id}")


def _concat(frames: list[Any]) -> Any:
    return nw.to_native(nw.concat([nw.from_native(f) for f in frames], how="vertical"))


def _empty_partition_monitoring(constructor: Any) -> None:
    d = data()
    day = constructor(d)
    empty = nw.to_native(nw.from_native(constructor(d)).head(0))
    before = _snapshot(day)
    cov = cf.coverage("y", "lo", "hi")
    running = cf.summarize(empty, cov)  # the loop starts on an empty day
    for chunk in (day, empty, day):
        running = cf.merge_summaries(_concat([running, cf.summarize(chunk, cov)]))
    out = to_pandas(cf.finalize(running, cov))
    y, lo, hi = _arrays(d, "y", "lo", "hi")
    assert_close(out["coverage"], [oracle.coverage(y, lo, hi)])
    assert list(out["n"]) == [2 * len(y)]
    grouped = to_pandas(cf.finalize(cf.summarize(empty, cov, by="g"), cov, by="g"))
    assert len(grouped) == 0 and "coverage" in grouped  # as evaluate: no groups, no rows
    pd.testing.assert_frame_equal(_snapshot(day), before)


def _zero_weight_partition(constructor: Any) -> None:
    d = data(day=[1, 1, 1, 2, 2, 2], w=[0.0, 0.0, 0.0, 1.0, 2.0, 1.0], g=["a"] * 6)
    frame = constructor(d)
    cov = cf.coverage("y", "lo", "hi", weights="w")
    out = to_pandas(cf.finalize(cf.summarize(frame, cov, by=["day", "g"]), cov, by="g"))
    expected = to_pandas(cf.evaluate(frame, cov, by="g"))
    assert_close(out["coverage"], expected["coverage"])
    assert list(out["n"]) == list(expected["n"]) == [6]


def _arrow_dictionary_key(constructor: Any) -> None:
    import polars as pl

    d = data(g=["b", "a", "b", "c", "c", "b"])
    plain = to_pandas(cf.evaluate(constructor(d), cf.coverage("y", "lo", "hi"), by="g"))
    if constructor.id == "pandas[pyarrow]":
        frame = (
            pl.DataFrame(d).with_columns(pl.col("g").cast(pl.Categorical)).to_pandas(use_pyarrow_extension_array=True)
        )
        assert str(frame["g"].dtype).startswith("dictionary")
    else:  # elsewhere a dictionary key is the backend's categorical (see categorical-key)
        frame = _keyed(constructor, d, nw.Categorical)
    before = _snapshot(frame)
    out = to_pandas(cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by="g"))
    pd.testing.assert_frame_equal(_snapshot(frame), before)
    got = dict(zip(map(str, out["g"]), out["coverage"]))
    assert got.keys() == set(map(str, plain["g"]))
    assert_close([got[str(k)] for k in plain["g"]], plain["coverage"])


def _negative_zero_key(constructor: Any) -> None:
    d = data(g=[0.0, -0.0, 0.0, 1.0, 1.0, 1.0])
    out = to_pandas(cf.evaluate(constructor(d), cf.coverage("y", "lo", "hi"), by="g"))
    y, lo, hi = _arrays(d, "y", "lo", "hi")
    assert [float(k) for k in out["g"]] == [0.0, 1.0]
    assert_close(out["coverage"], [oracle.coverage(y[:3], lo[:3], hi[:3]), oracle.coverage(y[3:], lo[3:], hi[3:])])


def _all_empty_sets(constructor: Any) -> None:
    d = data(s=[[], [], [], [], [], []])
    out = to_pandas(cf.evaluate(constructor(d), cf.set_coverage("label3", "s", classes=[0, 1, 2]), by="g"))
    assert_close(out["set_coverage"], [0.0, 0.0])
    assert list(out["n"]) == [3, 3]
    if constructor.id == "pandas":  # a pandas column of Python lists without rows
        empty = pd.DataFrame({"label3": [0], "s": [[0]]}).head(0)
        got = to_pandas(cf.evaluate(empty, cf.set_coverage("label3", "s", classes=[0, 1, 2])))
        assert list(got["n"]) == [0] and got["set_coverage"].isna().all()


def _far_tail_forecast(constructor: Any) -> None:
    from scipy.stats import norm

    d = {"y": [1e7, 2.0, -3e12], "mu": [0.0, 0.0, 1.0], "sd": [1.0, 1e-8, 0.5]}
    y, mu, sd = (np.asarray(d[c]) for c in ("y", "mu", "sd"))
    out = to_pandas(
        cf.evaluate(
            constructor(d), cf.crps("y", mean="mu", std="sd"), cf.pit_histogram("y", mean="mu", std="sd", n_bins=2)
        )
    )
    # far in the tail Phi_c(|z|) = phi(z) = 0: CRPS = |y - mu| - sd / sqrt(pi)
    assert_close(out["crps"], [np.mean(np.abs(y - mu) - sd / math.sqrt(math.pi))])
    pit = norm.cdf((y - mu) / sd)
    assert_close(
        [out["pit_histogram_bin0"][0], out["pit_histogram_bin1"][0]], [np.mean(pit < 0.5), np.mean(pit >= 0.5)]
    )


_FUZZ_CASES: dict[str, Callable[[Any], None]] = {
    "empty-partition-monitoring": _empty_partition_monitoring,
    "zero-weight-partition": _zero_weight_partition,
    "arrow-dictionary-key": _arrow_dictionary_key,
    "negative-zero-key": _negative_zero_key,
    "all-empty-sets": _all_empty_sets,
    "far-tail-forecast": _far_tail_forecast,
}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, constructor: Any, request: pytest.FixtureRequest) -> None:
    if constructor.id in case.xfail:
        request.applymarker(pytest.mark.xfail(strict=True, reason=case.xfail[constructor.id]))
    if case.kind == "special":
        _run_special(case, constructor)
        return
    frame = constructor(case.frame)
    before = _snapshot(frame)
    try:
        if constructor.id in case.backend_error:
            _expect_error(lambda: cf.evaluate(frame, *case.metrics(), by=case.by), case.backend_error[constructor.id])  # type: ignore[misc]
        elif case.kind == "error":
            assert case.error is not None
            _expect_error(lambda: cf.evaluate(frame, *case.metrics(), by=case.by), case.error)  # type: ignore[misc]
        elif case.kind == "rows":
            assert case.error is not None and case.n_invalid is not None
            if not constructor.lazy:
                _expect_error(lambda: cf.evaluate(frame, *case.metrics(), by=case.by), case.error)  # type: ignore[misc]
            else:
                out = _evaluate(frame, case)
                assert list(out["n_invalid"]) == case.n_invalid
                values = out.drop(columns=["g", "n", "n_invalid"])
                for row, bad in enumerate(case.n_invalid):
                    if bad:
                        assert values.iloc[row].isna().all(), f"group {out['g'][row]} has bad rows but values"
                    else:
                        assert values.iloc[row].notna().any(), f"group {out['g'][row]} is valid but all null"
        else:
            assert case.check is not None
            case.check(_evaluate(frame, case), case)
    finally:
        pd.testing.assert_frame_equal(_snapshot(frame), before)


def test_catalogue_size() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


def test_docs_page_lists_every_case() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "bad-input.md").read_text()
    missing = [c.id for c in CASES if f"`{c.id}`" not in page]
    assert not missing, f"docs/bad-input.md does not list {missing}"
    for case in CASES:
        for _backend in case.xfail:  # every known bug is in the docs' table
            assert f"`{case.id}`" in page.split("## Known bugs")[1], case.id


# ---------------------------------------------------------------------------
# the report and the command line (docs/bad-input.md, "The report and the CLI")
# ---------------------------------------------------------------------------
def _report_untested(constructor: Any) -> None:
    """One invalid row: eager raises; lazy (and invalid="null") names the untested group."""
    from conformal_frames.reporting import report

    frame = constructor(replaced("y", None, row=1))
    before = _snapshot(frame)
    kw: dict[str, Any] = dict(y="y", lo="lo", hi="hi", by="g", confidence_level=0.9)
    if not constructor.lazy:
        _expect_error(lambda: report(frame, **kw), (ValueError, r"column 'y' has missing"))
    rep = report(frame, **kw) if constructor.lazy else report(frame, **kw, invalid="null")
    assert [g["group"] for g in rep.summary["untested"]] == [{"g": "a"}]
    assert rep.summary["tested"] == 1 and rep.summary["invalid_rows"] == 1
    assert rep.summary["pooled_coverage"][0]["n_excluded"] == 3
    assert "NOT TESTED: 1 group could not be tested" in str(rep)
    pd.testing.assert_frame_equal(_snapshot(frame), before)


def _report_ci_past_estimate(constructor: Any) -> None:
    """A CI bound 1 ulp on the wrong side of its estimate: the plot clips the error bar."""
    pytest.importorskip("matplotlib", reason="plots need matplotlib ([plot] extra)")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from conformal_frames import plots

    table = {
        "g": ["a", "b"],
        "coverage": [1.0, 0.0],
        "coverage_ci_low": [0.94, 1e-17],
        "coverage_ci_high": [0.9999999999999999, 0.05],
        "target": [0.9, 0.9],
    }
    ax = plots.coverage_by_segment(constructor(table), by="g")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    plt.close(ax.figure)


REPORT_CASES: dict[str, Callable[[Any], None]] = {
    "report-untested-group": _report_untested,
    "report-ci-bound-past-estimate": _report_ci_past_estimate,
}


@pytest.mark.parametrize("case", list(REPORT_CASES))
def test_report_bad_input(case: str, constructor: Any) -> None:
    REPORT_CASES[case](constructor)


@dataclass
class CLICase:
    id: str
    files: dict[str, str]  # name -> CSV text, written into a fresh directory
    argv: list[str]  # ``{dir}`` is that directory
    code: int
    words: list[str]  # on stderr, in the one error line


_XY = "g,y,lo,hi,p,c\na,1.5,0.5,2.5,0.2,0\na,2.0,0.0,1.0,0.7,1\nb,3.0,2.0,2.5,0.9,2\n"
_REPORT = ["report", "{dir}/r.csv"]
_INTERVALS = ["--y", "y", "--lo", "lo", "--hi", "hi", "--by", "g"]

CLI_CASES = [
    CLICase(
        "cli-missing-column",
        {"r.csv": _XY},
        [*_REPORT, "--y", "y", "--lo", "lo", "--hi", "upper"],
        2,
        ["column 'upper' (--hi) not found; available columns: 'g', 'y', 'lo', 'hi', 'p', 'c'"],
    ),
    CLICase(
        "cli-old-option",
        {"r.csv": _XY},
        [*_REPORT, "--label", "c", "--score", "p"],
        2,
        ["--label is called --y (or --score-y) since 0.2"],
    ),
    CLICase("cli-input-not-found", {}, [*_REPORT, *_INTERVALS], 3, ["input file not found"]),
    CLICase(
        "cli-input-unreadable",
        {"r.parquet": "not parquet"},
        ["report", "{dir}/r.parquet", *_INTERVALS],
        3,
        ["cannot read", "as parquet"],
    ),
    CLICase(
        "cli-out-existing-file",
        {"r.csv": _XY, "taken": "x"},
        [*_REPORT, *_INTERVALS, "--out", "{dir}/taken"],
        3,
        ["is an existing file, not a directory"],
    ),
    CLICase(
        "cli-out-forbidden",
        {"r.csv": _XY},
        [*_REPORT, *_INTERVALS, "--out", "/proc/forbidden"],
        3,
        ["--out '/proc/forbidden' cannot be created"],
    ),
    CLICase(
        "cli-csv-na-tokens",
        {"r.csv": "g,y,lo,hi\na,NA,0,1\na,0.5,0,1\n"},
        [*_REPORT, *_INTERVALS],
        2,
        ["'y'", "--null-values NA"],
    ),
    CLICase(
        "cli-csv-decimal-comma",
        {"r.csv": 'g;y;lo;hi\na;"0,5";"0,0";"1,0"\n'},
        [*_REPORT, "--separator", ";", *_INTERVALS],
        2,
        ["--decimal-comma"],
    ),
    CLICase(
        "cli-invalid-rows",
        {"r.csv": "g,y,lo,hi\na,,0,1\nb,0.5,0,1\n"},
        [*_REPORT, *_INTERVALS],
        4,
        ["1 row with invalid values", "g=a"],
    ),
    CLICase(
        "cli-untested-group-fails-the-check",
        {"r.csv": "g,y,lo,hi\na,,0,1\nb,0.5,0,1\n"},
        [*_REPORT, *_INTERVALS, "--confidence-level", "0.9", "--fail-on-under-coverage"],
        6,
        ["1 group could not be tested (g=a", "--fail-on-under-coverage cannot pass"],
    ),
]


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.id for c in CLI_CASES])
def test_cli_bad_input(case: CLICase, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("polars", reason="the CLI reads files with polars")
    from conformal_frames import cli

    for name, text in case.files.items():
        (tmp_path / name).write_text(text)
    code = cli.main([a.replace("{dir}", str(tmp_path)) for a in case.argv] + ["-q", "--no-plots"])
    err = capsys.readouterr().err
    assert code == case.code, err
    assert err.count("\n") == 1 and err.startswith("conformal-frames: error: "), err
    for words in case.words:
        assert words in err, err
    assert "Traceback" not in err


def test_docs_page_lists_every_report_and_cli_case() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "bad-input.md").read_text()
    missing = [c for c in [*REPORT_CASES, *(c.id for c in CLI_CASES)] if f"`{c}`" not in page]
    assert not missing, f"docs/bad-input.md does not list {missing}"
