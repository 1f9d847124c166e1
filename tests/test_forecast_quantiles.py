"""Forecast inputs (quantiles=, intervals=, long form) and the quantile/interval scores."""

from __future__ import annotations

from dataclasses import dataclass

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
from conformal_frames._validate import checked
from conformal_frames.engine import Metric, Query
from conformal_frames.inputs.forecasts import (
    Intervals,
    Quantiles,
    check_intervals,
    check_quantiles,
    interval_rows,
    intervals_as_quantiles,
    quantile_rows,
)
from conformal_frames.inputs.levels import level_name
from conformal_frames.numerics.stats import ratio


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
    quantiles: Quantiles = checked(check_quantiles)
    default_name = "top"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        rows = quantile_rows(q, self.quantiles)
        return {"": ratio(q.sum(rows[-1][1]), q.n)}


@dataclass(frozen=True, kw_only=True)
class _Widths(Metric):
    intervals: Intervals = checked(check_intervals)
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
    with pytest.raises(
        ValueError,
        match=r"^column 'l8' is greater than column 'h8' in 2 of 3 rows: are lo and hi swapped\? \(intervals 0.8: lo='l8', hi='h8'\)$",
    ):
        cf.evaluate(eager_constructor(data), metric)
    data["h8"] = [2.0, 3.0, 4.0]
    out = pl.from_pandas(nw.from_native(cf.evaluate(eager_constructor(data), metric)).to_pandas())
    assert out.row(0) == (1.0, 5.0, 3)


def test_null_forecast_is_an_invalid_row(eager_constructor) -> None:
    data = {"q10": [1.0, None, 0.0], "q90": [2.0, 3.0, 4.0]}
    with pytest.raises(ValueError, match=r"^column 'q10' has missing \(null/NaN\) or infinite values in 1 row$"):
        cf.evaluate(eager_constructor(data), _TopQuantile(quantiles={0.1: "q10", 0.9: "q90"}))


# ---------------------------------------------------------------------------
# the metrics against the numpy oracles
# ---------------------------------------------------------------------------
import oracle_forecast as of  # noqa: E402
from helpers import assert_close, to_pandas  # noqa: E402

QUANTILES = {level: of.column(level) for level in of.LEVELS}
INTERVALS = {
    0.5: (of.column(0.25), of.column(0.75)),
    0.8: (of.column(0.1), of.column(0.9)),
    0.9: (of.column(0.05), of.column(0.95)),
}
MEDIAN = of.column(0.5)
#: the smaller sets of the every-backend test (a Spark query's cost grows with the number of output columns)
QUANTILES_3 = {level: of.column(level) for level in (0.1, 0.5, 0.9)}
INTERVALS_2 = {0.8: (of.column(0.1), of.column(0.9)), 0.9: (of.column(0.05), of.column(0.95))}


def _oracle_wide(
    data: dict, rows: np.ndarray, quantiles: dict = QUANTILES, intervals: dict = INTERVALS
) -> dict[str, float]:
    """Every wide output of the four metrics for the rows ``rows`` (ungrouped names)."""
    y = np.asarray(data["y"])[rows]
    qs = {level: np.asarray(data[c])[rows] for level, c in quantiles.items()}
    levels = sorted(quantiles)
    out: dict[str, float] = {}
    per_level = [of.pinball(y, qs[t], t) for t in levels]
    out["pinball_loss"] = float(np.mean(per_level))
    out |= {f"pinball_loss_level{level_name(t)}": v for t, v in zip(levels, per_level)}
    # WIS: the central intervals (alpha = 2 tau) of the quantile set and its median
    pairs = [(2 * t, qs[t], qs[u]) for t in levels for u in levels if t < 0.5 and abs(t + u - 1) < 1e-12]
    out |= of.wis(y, qs[0.5], pairs)
    devs = []
    for t in levels:
        cov = float(np.mean(y <= qs[t]))
        low, high = of.wilson(cov * len(y), len(y))
        at = f"quantile_coverage_level{level_name(t)}"
        out |= {at: cov, f"{at}_ci_low": low, f"{at}_ci_high": high, f"{at}_deviation": cov - t}
        devs.append(abs(cov - t))
    out["quantile_coverage"] = float(np.mean(devs))
    bounds = [(c, np.asarray(data[lo])[rows], np.asarray(data[hi])[rows]) for c, (lo, hi) in sorted(intervals.items())]
    for c, lo, hi in bounds:
        cov = float(np.mean((lo <= y) & (y <= hi)))
        low, high = of.wilson(cov * len(y), len(y))
        at = f"interval_coverage_level{level_name(c)}"
        out |= {at: cov, f"{at}_ci_low": low, f"{at}_ci_high": high, f"{at}_width": float(np.mean(hi - lo))}
        out[f"{at}_winkler"] = float(np.mean(of.interval_score(y, lo, hi, 1 - c)))
    return out


def _metrics(quantiles: dict = QUANTILES, intervals: dict = INTERVALS) -> list[Metric]:
    return [
        cf.pinball_loss("y", quantiles=quantiles, per_level=True),
        cf.wis("y", quantiles=quantiles),
        cf.quantile_coverage("y", quantiles=quantiles),
        cf.interval_coverage("y", intervals=intervals),
    ]


def _check_wide(
    result: object, data: dict, grouped: bool, quantiles: dict = QUANTILES, intervals: dict = INTERVALS
) -> None:
    out = to_pandas(result)
    groups = sorted(set(data["g"])) if grouped else [None]
    assert len(out) == len(groups)
    for i, g in enumerate(groups):
        rows = np.flatnonzero(np.asarray(data["g"]) == g) if grouped else np.arange(len(data["y"]))
        expected = _oracle_wide(data, rows, quantiles, intervals)
        for column, value in expected.items():
            assert_close(out[column].iloc[i], value, rtol=1e-12, atol=1e-15, what=f"{column} group {g}")
        assert out["n"].iloc[i] == len(rows)


def test_metrics_match_oracles_every_backend(constructor) -> None:
    """One query for the four metrics (grouped), and each long table once."""
    data = of.forecast_data(0)
    sets = (QUANTILES_3, INTERVALS_2)
    _check_wide(cf.evaluate(constructor(data), *_metrics(*sets), by="g"), data, True, *sets)
    frame = constructor(data)
    long = to_pandas(cf.conformal(frame).interval_coverage("y", intervals=INTERVALS_2, by="g"))
    assert list(long.columns) == [
        "g",
        "confidence_level",
        "coverage",
        "coverage_ci_low",
        "coverage_ci_high",
        "width",
        "winkler",
        "n_crossing",
        "n",
    ]
    assert long["confidence_level"].tolist() == [0.8, 0.9] * 4
    for _, row in long.iterrows():
        rows = np.flatnonzero(np.asarray(data["g"]) == row["g"])
        expected = _oracle_wide(data, rows, *sets)
        at = f"interval_coverage_level{level_name(row['confidence_level'])}"
        assert_close(row["coverage"], expected[at], what="coverage")
        assert_close(row["winkler"], expected[f"{at}_winkler"], what="winkler")
        assert_close(row["width"], expected[f"{at}_width"], what="width")
        assert row["n"] == len(rows)


def _not_spark(backend) -> None:
    if backend.id in ("pyspark", "duckdb"):
        pytest.skip(
            "seed/tie/size loops run on the eager and polars-lazy backends; covered by test_metrics_match_oracles_every_backend"
        )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_metrics_match_oracles_seeds(constructor, seed: int) -> None:
    _not_spark(constructor)
    data = of.forecast_data(seed, n=60 + 17 * seed)
    _check_wide(cf.evaluate(constructor(data), *_metrics(), by="g"), data, grouped=True)
    _check_wide(cf.evaluate(constructor(data), *_metrics()), data, grouped=False)


def test_quantile_coverage_long_table(constructor) -> None:
    _not_spark(constructor)
    data = of.forecast_data(4)
    long = to_pandas(cf.conformal(constructor(data)).quantile_coverage("y", quantiles=QUANTILES, by="g"))
    assert list(long.columns) == [
        "g",
        "quantile_level",
        "coverage",
        "coverage_ci_low",
        "coverage_ci_high",
        "deviation",
        "n_crossing",
        "n",
    ]
    assert long["quantile_level"].tolist() == list(of.LEVELS) * 4
    for _, row in long.iterrows():
        rows = np.flatnonzero(np.asarray(data["g"]) == row["g"])
        expected = _oracle_wide(data, rows)
        at = f"quantile_coverage_level{level_name(row['quantile_level'])}"
        for column, suffix in [
            ("coverage", ""),
            ("coverage_ci_low", "_ci_low"),
            ("coverage_ci_high", "_ci_high"),
            ("deviation", "_deviation"),
        ]:
            assert_close(row[column], expected[f"{at}{suffix}"], what=column)
    per_level = to_pandas(cf.conformal(constructor(data)).pinball_loss("y", quantiles=QUANTILES, per_level=True))
    assert list(per_level.columns) == ["quantile_level", "pinball_loss", "n_crossing", "n"]
    expected = _oracle_wide(data, np.arange(len(data["y"])))
    assert_close(per_level["pinball_loss"], [expected[f"pinball_loss_level{level_name(t)}"] for t in of.LEVELS])


def test_eager_ungrouped_calls_return_floats(eager_constructor) -> None:
    data = of.forecast_data(5)
    frame = eager_constructor(data)
    expected = _oracle_wide(data, np.arange(len(data["y"])))
    ns = cf.conformal(frame)
    assert_close(ns.pinball_loss("y", quantiles=QUANTILES), expected["pinball_loss"])
    assert_close(ns.wis("y", quantiles=QUANTILES), expected["wis"])
    assert_close(ns.wis("y", intervals=INTERVALS, median=MEDIAN), expected["wis"])
    assert_close(ns.quantile_coverage("y", quantiles=QUANTILES, per_level=False), expected["quantile_coverage"])


def test_wis_components_add_up(eager_constructor) -> None:
    data = of.forecast_data(6)
    out = to_pandas(cf.evaluate(eager_constructor(data), cf.wis("y", quantiles=QUANTILES), by="g"))
    parts = out["wis_dispersion"] + out["wis_overprediction"] + out["wis_underprediction"]
    assert_close(parts, out["wis"], rtol=1e-14)


# ---------------------------------------------------------------------------
# peers: scikit-learn, scoringrules
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 7])
def test_pinball_matches_scikit_learn(seed: int) -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    data = of.forecast_data(seed)
    frame = pl.DataFrame(data)
    per_level = frame.conformal.pinball_loss("y", quantiles=QUANTILES, per_level=True)
    for level, value in zip(per_level["quantile_level"], per_level["pinball_loss"]):
        expected = metrics.mean_pinball_loss(data["y"], data[QUANTILES[level]], alpha=level)
        assert_close(value, expected, rtol=1e-12, what=f"level {level}")
    mean = np.mean([metrics.mean_pinball_loss(data["y"], data[c], alpha=t) for t, c in QUANTILES.items()])
    assert_close(frame.conformal.pinball_loss("y", quantiles=QUANTILES), mean)


@pytest.mark.parametrize("seed", [0, 8])
def test_wis_and_winkler_match_scoringrules(seed: int) -> None:
    sr = pytest.importorskip("scoringrules")
    data = of.forecast_data(seed)
    frame = pl.DataFrame(data)
    y = np.asarray(data["y"])
    levels = sorted(INTERVALS)
    lower = np.column_stack([data[INTERVALS[c][0]] for c in levels])
    upper = np.column_stack([data[INTERVALS[c][1]] for c in levels])
    alpha = 1.0 - np.asarray(levels)
    # scoringrules 0.10's numpy backend adds w_median * median (not |y - median|):
    # take its interval part (w_median=0) and add the median term of the definition
    intervals_part = sr.weighted_interval_score(
        y, np.asarray(data[MEDIAN]), lower, upper, alpha, w_median=0.0, backend="numpy"
    )
    expected = np.mean(intervals_part + 0.5 * np.abs(y - np.asarray(data[MEDIAN])) / (len(levels) + 0.5))
    assert_close(frame.conformal.wis("y", quantiles=QUANTILES), expected, rtol=1e-12)
    table = frame.conformal.interval_coverage("y", intervals=INTERVALS)
    for k, c in enumerate(levels):
        winkler = np.mean(sr.interval_score(y, lower[:, k], upper[:, k], 1.0 - c, backend="numpy"))
        assert_close(table["winkler"][k], winkler, rtol=1e-12, what=f"level {c}")


# ---------------------------------------------------------------------------
# long form
# ---------------------------------------------------------------------------
def _long_form(data: dict) -> dict:
    n = len(data["y"])
    return {
        "g": [g for g in data["g"] for _ in of.LEVELS],
        "y": [y for y in data["y"] for _ in of.LEVELS],
        "quantile_level": [t for _ in range(n) for t in of.LEVELS],
        "q": [data[QUANTILES[t]][i] for i in range(n) for t in of.LEVELS],
    }


def test_long_form_equals_wide_form(constructor) -> None:
    _not_spark(constructor)
    data = of.forecast_data(9)
    long = _long_form(data)
    mean = to_pandas(
        cf.conformal(constructor(long)).pinball_loss("y", quantiles="q", quantile_level="quantile_level", by="g")
    )
    wide = to_pandas(cf.conformal(constructor(data)).pinball_loss("y", quantiles=QUANTILES, by="g"))
    assert_close(mean["pinball_loss"], wide["pinball_loss"], rtol=1e-12)
    assert mean["n"].tolist() == (wide["n"] * len(of.LEVELS)).tolist()
    by = ["g", "quantile_level"]
    cov = to_pandas(
        cf.conformal(constructor(long)).quantile_coverage("y", quantiles="q", quantile_level="quantile_level", by=by)
    )
    assert list(cov.columns) == [*by, "coverage", "coverage_ci_low", "coverage_ci_high", "deviation", "n"]
    cov_wide = to_pandas(cf.conformal(constructor(data)).quantile_coverage("y", quantiles=QUANTILES, by="g"))
    for column in ["quantile_level", "coverage", "coverage_ci_low", "coverage_ci_high", "deviation", "n"]:
        assert_close(cov[column], cov_wide[column], rtol=1e-12, what=column)
    per_level = to_pandas(
        cf.conformal(constructor(long)).pinball_loss(
            "y", quantiles="q", quantile_level="quantile_level", per_level=True, by=by
        )
    )
    pl_wide = to_pandas(cf.conformal(constructor(data)).pinball_loss("y", quantiles=QUANTILES, per_level=True, by="g"))
    assert_close(per_level["pinball_loss"], pl_wide["pinball_loss"], rtol=1e-12)


def test_long_form_bad_levels(eager_constructor) -> None:
    data = {"y": [1.0, 2.0, 3.0], "q": [1.0, 2.0, 2.0], "tau": [0.5, 1.0, 0.0]}
    with pytest.raises(ValueError, match=r"^quantile_level column 'tau' has values outside \(0, 1\) in 2 rows$"):
        cf.conformal(eager_constructor(data)).pinball_loss("y", quantiles="q", quantile_level="tau")
    with pytest.raises(ValueError, match=r"quantile_level='tau' names a column: it must also be a by= column"):
        cf.conformal(eager_constructor(data)).quantile_coverage("y", quantiles="q", quantile_level="tau")
    with pytest.raises(ValueError, match=r"pass the column of levels too"):
        cf.pinball_loss("y", quantiles="q")
    with pytest.raises(ValueError, match=r"quantile_level='tau' is for the long form"):
        cf.quantile_coverage("y", quantiles={0.5: "q"}, quantile_level="tau")
    with pytest.raises(TypeError, match=r"^quantiles must be a mapping"):
        cf.wis("y", quantiles="q")


# ---------------------------------------------------------------------------
# bad input and laziness
# ---------------------------------------------------------------------------
def test_wis_parameters() -> None:
    with pytest.raises(ValueError, match=r"wis needs the median: quantiles= has no level 0.5"):
        cf.wis("y", quantiles={0.1: "a", 0.9: "b"})
    with pytest.raises(ValueError, match=r"has the level 0.1 but not 0.9"):
        cf.wis("y", quantiles={0.1: "a", 0.5: "m", 0.8: "b"})
    with pytest.raises(ValueError, match=r"has the level 0.95 but not 0.05"):
        cf.wis("y", quantiles={0.1: "a", 0.5: "m", 0.9: "b", 0.95: "c"})
    with pytest.raises(ValueError, match=r"exactly one of quantiles= .* or intervals="):
        cf.wis("y")
    with pytest.raises(ValueError, match=r"exactly one of"):
        cf.wis("y", quantiles={0.5: "m"}, intervals={0.8: ("a", "b")})
    with pytest.raises(ValueError, match=r"with intervals= needs median="):
        cf.wis("y", intervals={0.8: ("a", "b")})
    with pytest.raises(ValueError, match=r"median= is for intervals="):
        cf.wis("y", quantiles={0.5: "m"}, median="m")
    with pytest.raises(TypeError, match=r"^per_level must be True or False"):
        cf.pinball_loss("y", quantiles={0.5: "m"}, per_level=1)
    # the median alone is a valid quantile set: WIS = |y - m| (K = 0)
    assert pl.DataFrame({"y": [1.0, 4.0], "m": [2.0, 2.0]}).conformal.wis("y", quantiles={0.5: "m"}) == 1.5


def test_crossing_rows_in_each_metric(eager_constructor) -> None:
    data = {"y": [1.0, 2.0, 3.0], "lo": [0.0, 2.5, 0.0], "m": [1.0, 2.0, 3.0], "hi": [2.0, 3.0, 4.0]}
    q = {0.1: "lo", 0.5: "m", 0.9: "hi"}
    message = r"^quantile columns cross: 'lo' \(level 0.1\) is greater than 'm' \(level 0.5\) in 1 row$"
    invalid = {"crossing": "invalid"}
    for metric in [
        cf.pinball_loss("y", quantiles=q, **invalid),
        cf.wis("y", quantiles=q, **invalid),
        cf.quantile_coverage("y", quantiles=q, **invalid),
    ]:
        with pytest.raises(ValueError, match=message):
            cf.evaluate(eager_constructor(data), metric)
    with pytest.raises(
        ValueError,
        match=r"^column 'm' is greater than column 'lo' in 2 of 3 rows: are lo and hi swapped\? \((intervals 0.5: )?lo='m', hi='lo'\)$",
    ):
        cf.evaluate(eager_constructor(data), cf.interval_coverage("y", intervals={0.5: ("m", "lo")}, **invalid))
    # crossing="score" (default): lo > hi is scored as given (covers nothing) and counted, as any crossing
    with pytest.warns(UserWarning, match=r"^interval_coverage: crossing quantiles in 2 rows, scored as given"):
        given = to_pandas(cf.evaluate(eager_constructor(data), cf.interval_coverage("y", intervals={0.5: ("m", "lo")})))
    assert given["interval_coverage_level50"].tolist() == [pytest.approx(1 / 3)]  # row 1: 2 <= 2 <= 2.5
    assert given["interval_coverage_n_crossing"].tolist() == [2]
    with pytest.raises(
        ValueError,
        match=r"^column 'm' is greater than column 'lo' in 2 of 3 rows: are lo and hi swapped\? \((intervals 0.5: )?lo='m', hi='lo'\)$",
    ):
        cf.evaluate(eager_constructor(data), cf.wis("y", intervals={0.5: ("m", "lo")}, median="hi", **invalid))
    dropped = to_pandas(cf.evaluate(eager_constructor(data), cf.wis("y", quantiles=q, **invalid), invalid="drop"))
    assert dropped["n"].tolist() == [2]
    assert dropped["n_dropped"].tolist() == [1]


def test_scan_parquet_stays_lazy(tmp_path) -> None:
    data = of.forecast_data(10)
    data["horizon"] = [i % 3 for i in range(len(data["y"]))]
    path = tmp_path / "forecasts.parquet"
    pl.DataFrame(data).write_parquet(path)
    lf = pl.scan_parquet(path)
    by = ["g", "horizon"]
    out = lf.conformal.wis("y", quantiles=QUANTILES, by=by)
    assert isinstance(out, pl.LazyFrame)
    for result in [
        lf.conformal.pinball_loss("y", quantiles=QUANTILES, by=by),
        lf.conformal.pinball_loss("y", quantiles=QUANTILES, per_level=True, by=by),
        lf.conformal.quantile_coverage("y", quantiles=QUANTILES, by=by),
        lf.conformal.interval_coverage("y", intervals=INTERVALS, by=by),
        cf.evaluate(lf, *_metrics(), by=by),
    ]:
        assert isinstance(result, pl.LazyFrame)
    eager = pl.DataFrame(data).conformal.wis("y", quantiles=QUANTILES, by=by)
    collected = out.collect()
    assert collected["n_invalid"].to_list() == [0] * len(eager)
    assert collected.select("g", "horizon", "n").equals(eager.select("g", "horizon", "n"))
    for column in ["wis", "wis_dispersion", "wis_overprediction", "wis_underprediction"]:
        assert_close(collected[column], eager[column], rtol=1e-12, what=column)


def test_long_tables_of_an_invalid_group_every_backend(constructor) -> None:
    """invalid="null": the invalid group's rows of a long table have null scores and
    the group's row count as ``n`` (as evaluate's ``n``), on every backend (pandas
    used to fail casting the masked count to int64)."""
    data = {
        "g": ["a", "a", "a", "b", "b"],
        "y": [1.0, 2.0, 3.0, 4.0, 5.0],
        "q10": [0.5, 1.5, 3.5, None, 4.5],
        "q90": [1.5, 2.5, 3.5, 4.5, 5.5],
    }
    quantiles = {0.1: "q10", 0.9: "q90"}
    frame = constructor(data)
    for table in (
        cf.conformal(frame).quantile_coverage("y", quantiles=quantiles, by="g", invalid="null"),
        cf.conformal(frame).pinball_loss("y", quantiles=quantiles, by="g", per_level=True, invalid="null"),
    ):
        out = to_pandas(table)
        assert list(out["g"]) == ["a", "a", "b", "b"]
        assert list(out["n"]) == [3, 3, 2, 2]
        score = "coverage" if "coverage" in out else "pinball_loss"
        assert out[score].iloc[:2].notna().all() and out[score].iloc[2:].isna().all()
    assert out["quantile_level"].tolist() == [0.1, 0.9, 0.1, 0.9]
