"""Forecast inputs (quantiles=, intervals=, long form) and the quantile/interval scores."""

from __future__ import annotations

from dataclasses import dataclass

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
from conformal_frames._validate import checked
from conformal_frames.core import Metric, Query
from conformal_frames.forecast_inputs import (
    Intervals,
    Quantiles,
    check_intervals,
    check_quantiles,
    interval_rows,
    intervals_as_quantiles,
    quantile_rows,
)
from conformal_frames.stats import ratio


# ---------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------
def test_quantiles_are_sorted_pairs() -> None:
    assert check_quantiles({0.9: "q90", np.float64(0.1): "q10", 0.5: "q50"}) == (
        (0.1, "q10"),
        (0.5, "q50"),
        (0.9, "q90"),
    )
    assert check_quantiles("q", long=True) == "q"
    # the normalised form is accepted again (dataclasses.replace, .alias)
    assert check_quantiles(((0.1, "a"), (0.9, "b"))) == ((0.1, "a"), (0.9, "b"))


@pytest.mark.parametrize(
    ("value", "error", "fragment"),
    [
        (["q10", "q90"], TypeError, "must be a mapping {level: column}"),
        ("q", TypeError, "must be a mapping {level: column}"),
        ({"0.1": "q10"}, TypeError, "level '0.1' is not a number"),
        ({True: "q10"}, TypeError, "level True is not a number"),
        ({0.1: 3}, TypeError, "column 3 is not a string"),
        ({}, ValueError, "at least one level"),
        ({0.0: "q0"}, ValueError, "level 0.0 is outside (0, 1)"),
        ({1.5: "q"}, ValueError, "level 1.5 is outside (0, 1)"),
        ({0.1: "a", 0.9: "a"}, ValueError, "column 'a' repeated"),
    ],
)
def test_bad_quantiles(value: object, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error, match=r"^quantiles must be ") as info:
        check_quantiles(value)
    assert fragment in str(info.value)


def test_intervals_are_sorted_triples() -> None:
    assert check_intervals({0.9: ("l9", "h9"), 0.5: ["l5", "h5"]}) == ((0.5, "l5", "h5"), (0.9, "l9", "h9"))
    assert intervals_as_quantiles(check_intervals({0.8: ("l", "h"), 0.9: ("l9", "h9")})) == (
        (0.05, "l9"),
        (0.1, "l"),
        (0.9, "h"),
        (0.95, "h9"),
    )


@pytest.mark.parametrize(
    ("value", "error", "fragment"),
    [
        ({0.9: "lo"}, TypeError, "is not a (lo, hi) pair"),
        ({0.9: ("lo", "mid", "hi")}, TypeError, "is not a (lo, hi) pair"),
        ({0.9: ("lo", 2)}, TypeError, "are not column names"),
        ({"a": ("lo", "hi")}, TypeError, "is not a number"),
        ([("lo", "hi")], TypeError, "must be a mapping {confidence_level: (lo, hi)}"),
        ({}, ValueError, "at least one level"),
        ({1.0: ("lo", "hi")}, ValueError, "outside (0, 1)"),
        ({0.9: ("lo", "lo")}, ValueError, "same column 'lo' as lo and hi"),
        ({0.8: ("lo", "hi"), 0.9: ("lo", "hi9")}, ValueError, "column 'lo' repeated"),
    ],
)
def test_bad_intervals(value: object, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error, match=r"^intervals must be ") as info:
        check_intervals(value)
    assert fragment in str(info.value)


# ---------------------------------------------------------------------------
# rows: a minimal metric on the input layer (mean of the top quantile / of the widths)
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class _TopQuantile(Metric):
    quantiles: Quantiles = checked(check_quantiles)  # noqa: RUF009
    default_name = "top"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        rows = quantile_rows(q, self.quantiles)
        return {"": ratio(q.sum(rows[-1][1]), q.n)}


@dataclass(frozen=True, kw_only=True)
class _Widths(Metric):
    intervals: Intervals = checked(check_intervals)  # noqa: RUF009
    default_name = "w"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        out: dict[str, nw.Expr | None] = {}
        for k, (_, lo, hi) in enumerate(interval_rows(q, self.intervals)):
            w = q.row(("w", lo, hi), nw.col(hi) - nw.col(lo), inputs=[lo, hi])
            out[f"level{k}"] = ratio(q.sum(w), q.n)
        return out


CROSSING = {
    "g": ["a", "a", "b", "b"],
    "q10": [1.0, 2.0, 3.0, 0.5],
    "q50": [2.0, 1.0, 3.0, 1.0],  # row 1 crosses 10/50; row 2 is tied (valid)
    "q90": [3.0, 3.0, 3.0, 0.9],  # row 3 crosses 50/90
}


def test_crossing_quantiles_are_counted_never_scored(constructor) -> None:
    metric = _TopQuantile(quantiles={0.9: "q90", 0.1: "q10", 0.5: "q50"})
    if constructor.lazy:
        out = nw.from_native(cf.evaluate(constructor(CROSSING), metric, by="g")).lazy().collect().to_polars()
        assert out["top"].to_list() == [None, None]
        assert out["n_invalid"].to_list() == [1, 1]
        drop = nw.from_native(cf.evaluate(constructor(CROSSING), metric, by="g", invalid="drop"))
        drop = drop.lazy().collect().to_polars()
        assert drop["top"].to_list() == [3.0, 3.0]
        assert drop["n_dropped"].to_list() == [1, 1]
        return
    with pytest.raises(
        ValueError, match=r"^quantile columns cross: 'q10' \(level 0.1\) is greater than 'q50' \(level 0.5\) in 1 row$"
    ):
        cf.evaluate(constructor(CROSSING), metric, by="g")
    data = {**CROSSING, "q10": [1.0, 0.0, 3.0, 0.5]}
    with pytest.raises(ValueError, match=r"^quantile columns cross: 'q50' \(level 0.5\) is greater than 'q90'"):
        cf.evaluate(constructor(data), metric)


def test_interval_pairs_lo_above_hi_counted_per_level(eager_constructor) -> None:
    data = {"l8": [1.0, 2.0, 3.0], "h8": [2.0, 1.0, 0.0], "l9": [0.0, 0.0, 0.0], "h9": [5.0, 5.0, 5.0]}
    metric = _Widths(intervals={0.9: ("l9", "h9"), 0.8: ("l8", "h8")})
    with pytest.raises(ValueError, match=r"^column 'l8' is greater than column 'h8' in 2 rows$"):
        cf.evaluate(eager_constructor(data), metric)
    data["h8"] = [2.0, 3.0, 4.0]
    out = pl.from_pandas(nw.from_native(cf.evaluate(eager_constructor(data), metric)).to_pandas())
    assert out.row(0) == (1.0, 5.0, 3)


def test_null_forecast_is_an_invalid_row(eager_constructor) -> None:
    data = {"q10": [1.0, None, 0.0], "q90": [2.0, 3.0, 4.0]}
    with pytest.raises(ValueError, match=r"^column 'q10' has missing \(null/NaN\) or infinite values in 1 row$"):
        cf.evaluate(eager_constructor(data), _TopQuantile(quantiles={0.1: "q10", 0.9: "q90"}))
