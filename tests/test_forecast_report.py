"""Forecast family in the report and the CLI (quantile / interval scores), nested intervals, long-form errors.

Spark cost: the nesting checks run once per backend (one grouped query);
the report runs on the other backends (its tables are built from one
collected query, the same code on every engine).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
import oracle_forecast as of
from helpers import to_pandas

QUANTILES = {t: of.column(t) for t in of.LEVELS}
INTERVALS = {
    0.5: (of.column(0.25), of.column(0.75)),
    0.8: (of.column(0.1), of.column(0.9)),
    0.9: (of.column(0.05), of.column(0.95)),
}


def not_spark(backend, test: str) -> None:
    if backend.id == "pyspark":
        pytest.skip(f"a Spark query costs ~1 min here; the engine paths are covered by {test}[pyspark]")


def _as_list(frame, column: str) -> list:
    return to_pandas(frame)[column].tolist()


# ---------------------------------------------------------------------------
# report: the forecast tables equal direct evaluation (and the numpy oracles)
# ---------------------------------------------------------------------------
def _direct(frame, by: str) -> object:
    return cf.evaluate(
        frame,
        cf.pinball_loss("y", quantiles=QUANTILES),
        cf.wis("y", quantiles=QUANTILES),
        cf.quantile_coverage("y", quantiles=QUANTILES, per_level=False),
        cf.quantile_crps("y", quantiles=QUANTILES),
        by=by,
    )


def test_report_forecast_tables_equal_evaluate(constructor) -> None:
    not_spark(constructor, "test_nesting_checks_every_backend")
    data = of.forecast_data(21)
    frame = constructor(data)
    rep = cf.conformal(frame).report(y="y", quantiles=QUANTILES, intervals=INTERVALS, by="g")
    assert list(rep.tables) == ["forecast", "pit_histogram", "quantile_coverage", "interval_coverage"]
    t = to_pandas(rep.frame("forecast"))
    if constructor.lazy:  # lazy input: invalid="null" by default, with the count of invalid rows
        assert t.pop("n_invalid").tolist() == [0, 0, 0, 0]
    assert list(t.columns) == [
        "g",
        "quantile_crps",
        "pit_test",
        "pit_test_pvalue",
        "pinball_loss",
        "wis",
        "wis_dispersion",
        "wis_overprediction",
        "wis_underprediction",
        "quantile_coverage_mad",
        "n_crossing",
        "n",
    ]  # fmt: skip (the metrics' *_n_crossing columns agree: one n_crossing)
    direct = to_pandas(_direct(frame, "g"))
    assert t["g"].tolist() == direct["g"].tolist()
    for report_col, col in [
        ("pinball_loss", "pinball_loss"),
        ("wis", "wis"),
        ("wis_dispersion", "wis_dispersion"),
        ("wis_overprediction", "wis_overprediction"),
        ("wis_underprediction", "wis_underprediction"),
        ("quantile_coverage_mad", "quantile_coverage"),
        ("quantile_crps", "quantile_crps"),
    ]:
        assert t[report_col].tolist() == pytest.approx(direct[col].tolist(), rel=1e-12), report_col
    assert t["n"].tolist() == direct["n"].tolist()
    # the per-level tables: the metrics' own long tables
    for name, metric in [
        ("quantile_coverage", cf.quantile_coverage("y", quantiles=QUANTILES)),
        ("interval_coverage", cf.interval_coverage("y", intervals=INTERVALS)),
        ("pit_histogram", cf.pit_histogram("y", quantiles=QUANTILES)),
    ]:
        got = to_pandas(rep.frame(name))
        want = to_pandas(getattr(cf.conformal(frame), name)(**_args(metric), by="g"))
        assert list(got.columns) == list(want.columns)
        for c in got.columns:
            if c in ("g", "n", "bin"):
                assert got[c].tolist() == want[c].tolist(), c
            else:
                assert got[c].tolist() == pytest.approx(want[c].tolist(), rel=1e-12), f"{name}.{c}"
    # and the numpy oracle (group d_many)
    rows = np.flatnonzero(np.asarray(data["g"]) == "d_many")
    y = np.asarray(data["y"])[rows]
    qs = {t: np.asarray(data[c])[rows] for t, c in QUANTILES.items()}
    pairs = [(2 * t, qs[t], qs[round(1 - t, 10)]) for t in of.LEVELS if t < 0.5]
    expected = of.wis(y, qs[0.5], pairs)
    i = t["g"].tolist().index("d_many")
    assert t["wis"].iloc[i] == pytest.approx(expected["wis"], rel=1e-12)
    assert t["pinball_loss"].iloc[i] == pytest.approx(np.mean([of.pinball(y, qs[u], u) for u in of.LEVELS]), rel=1e-12)
    mad = np.mean([abs(np.mean(y <= qs[u]) - u) for u in of.LEVELS])
    assert t["quantile_coverage_mad"].iloc[i] == pytest.approx(mad, rel=1e-12)
    ic = to_pandas(rep.frame("interval_coverage"))
    sel = ic[ic["g"] == "d_many"]
    assert sel["confidence_level"].tolist() == [0.5, 0.8, 0.9]
    for (_, row), (c, (lo, hi)) in zip(sel.iterrows(), sorted(INTERVALS.items())):
        lo_v, hi_v = np.asarray(data[lo])[rows], np.asarray(data[hi])[rows]
        assert row["coverage"] == pytest.approx(np.mean((lo_v <= y) & (y <= hi_v)), rel=1e-12)
        assert row["width"] == pytest.approx(np.mean(hi_v - lo_v), rel=1e-12)
        assert row["winkler"] == pytest.approx(np.mean(of.interval_score(y, lo_v, hi_v, 1 - c)), rel=1e-12)
        k = round(row["coverage"] * len(rows))
        assert (row["coverage_ci_low"], row["coverage_ci_high"]) == pytest.approx(of.wilson(k, len(rows)), rel=1e-12)


def _args(metric) -> dict:
    out = {"y": metric.y}
    for name in ("quantiles", "intervals"):
        value = getattr(metric, name, None)
        if value is not None:
            out[name] = {t[0]: t[1] if len(t) == 2 else (t[1], t[2]) for t in value}
    return out


def test_report_forecast_rendering_and_options() -> None:
    df = pl.DataFrame(of.forecast_data(22))
    rep = df.conformal.report(y="y", quantiles=QUANTILES, intervals=INTERVALS, by="g")
    text = str(rep)
    assert (
        "quantile_coverage_mad" in text and "Interval coverage and mean width, one column per confidence level" in text
    )
    assert (
        "Quantile coverage: fraction of y <= quantile, one column per level" in text
        and "PIT histogram: frequency per bin" in text
    )
    assert "bin9" in text  # the histogram pivoted: one row per group
    assert "intervals='0.5=q0250:q0750,0.8=q0100:q0900,0.9=q0050:q0950'" in text.splitlines()[1]
    page = rep.to_html(plots=False)
    assert "<h3>Interval coverage and mean width" in page and "<th>width@0.9</th>" in page
    assert rep.summary["families"] == ["forecast"]
    assert rep.summary["rows"] == len(df)
    # metrics(): the per-group scores only (the per-level tables stay in rep.frame(...))
    long = rep.metrics()
    assert set(long["metric"]) >= {"wis", "pinball_loss", "quantile_coverage_mad"}
    assert "coverage" not in set(long["metric"])
    # intervals only: no per-group scores, the forecast table holds the counts and is not shown
    only = df.conformal.report(y="y", intervals=INTERVALS, by="g")
    assert list(only.tables) == ["forecast", "interval_coverage"]
    assert list(only.frame("forecast").columns) == ["g", "n"]
    assert "Forecast scores per group" not in str(only)
    assert only.summary["rows"] == len(df)
    # quantiles without the median: no WIS, the rest stays
    no_median = df.conformal.report(y="y", quantiles={0.1: of.column(0.1), 0.9: of.column(0.9)})
    assert "wis" not in no_median.frame("forecast").columns
    assert "pinball_loss" in no_median.frame("forecast").columns
    # ci_level reaches the Wilson intervals
    narrow = df.conformal.report(y="y", intervals=INTERVALS, ci_level=0.5).frame("interval_coverage")
    direct = df.conformal.interval_coverage("y", intervals=INTERVALS, ci_level=0.5)
    assert narrow["coverage_ci_low"].to_list() == pytest.approx(direct["coverage_ci_low"].to_list(), rel=1e-12)


def test_report_interval_arguments() -> None:
    df = pl.DataFrame(of.forecast_data(23))
    with pytest.raises(ValueError, match="forecast metrics need y="):
        df.conformal.report(intervals=INTERVALS)
    with pytest.raises(ValueError, match=r"column 'nope' \(intervals\[0.8\]\[1\]=\) not found"):
        df.conformal.report(y="y", intervals={0.8: (of.column(0.1), "nope")})
    with pytest.raises(ValueError, match=r"^intervals must be .*level 1.2 is outside"):
        df.conformal.report(y="y", intervals={1.2: (of.column(0.1), of.column(0.9))})
    with pytest.raises(TypeError, match=r"^intervals must be .*long form"):
        df.conformal.report(y="y", intervals=(of.column(0.1), of.column(0.9)))


def test_cli_intervals_and_quantile_scores(tmp_path, capsys) -> None:
    import json

    from conformal_frames import cli

    data = of.forecast_data(24)
    df = pl.DataFrame(data)
    path = tmp_path / "fc.parquet"
    df.write_parquet(path)
    spec = ",".join(f"{c:g}={lo}:{hi}" for c, (lo, hi) in INTERVALS.items())
    qspec = ",".join(f"{t:g}={c}" for t, c in QUANTILES.items())
    args = ["report", str(path), "--y", "y", "--quantiles", qspec, "--intervals", spec, "--by", "g", "--no-plots"]
    assert cli.main([*args, "--format", "json"]) == 0
    tables = json.loads(capsys.readouterr().out)["tables"]
    rep = df.conformal.report(y="y", quantiles=QUANTILES, intervals=INTERVALS, by="g")
    for name in ("forecast", "quantile_coverage", "interval_coverage"):
        want = rep.frame(name)
        got = tables[name]
        assert len(got) == len(want)
        for c in want.columns:
            values = [r[c] for r in got]
            if want[c].dtype == pl.Float64:
                assert values == pytest.approx(want[c].to_list(), rel=1e-12), f"{name}.{c}"
            else:
                assert values == want[c].to_list(), f"{name}.{c}"
    assert tables["interval_coverage"][0]["confidence_level"] == 0.5
    assert cli.main([*args, "--format", "text"]) == 0
    assert "Interval coverage and mean width" in capsys.readouterr().out
    for bad in ("0.8=lo", "0.8=lo:", "x=lo:hi", "0.8=a:b:c", "lo:hi"):
        assert cli.main(["report", str(path), "--y", "y", "--intervals", bad, "--no-plots"]) != 0
        assert "expected LEVEL=LO:HI pairs" in capsys.readouterr().err
    assert cli.main(["report", str(path), "--y", "y", "--intervals", "0.8=q0100:nope", "--no-plots"]) != 0
    assert "column 'nope' (--intervals 0.8 hi) not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["report", "--help"])
    assert "--intervals LEVEL=LO:HI,..." in capsys.readouterr().out


# ---------------------------------------------------------------------------
# nested intervals: lo90 <= lo80 <= hi80 <= hi90 per row
# ---------------------------------------------------------------------------
NESTED = {
    "g": ["a", "a", "a", "b", "b", "b"],
    "y": [0.0, 1.0, 2.0, 0.5, 3.0, -1.0],
    "lo80": [-1.0, 0.0, 1.0, 0.0, 2.0, -2.0],
    "hi80": [1.0, 2.0, 3.0, 1.0, 4.0, 0.0],
    "lo90": [-2.0, 0.5, 0.0, 0.0, 1.0, -3.0],  # row 1: lo90 > lo80
    "hi90": [2.0, 3.0, 3.0, 0.5, 4.0, 1.0],  # row 3: hi80 > hi90
    "m": [0.0, 1.0, 2.0, 0.5, 3.0, -1.0],
}
NESTED_INTERVALS = {0.8: ("lo80", "hi80"), 0.9: ("lo90", "hi90")}


def test_nesting_checks_every_backend(constructor) -> None:
    """One grouped query per backend: the violating rows are dropped and counted."""
    out = to_pandas(
        cf.evaluate(
            constructor(NESTED),
            cf.interval_coverage("y", intervals=NESTED_INTERVALS, crossing="invalid"),
            cf.wis("y", intervals=NESTED_INTERVALS, median="m", crossing="invalid"),
            by="g",
            invalid="drop",
        )
    )
    assert out["g"].tolist() == ["a", "b"]
    assert out["n"].tolist() == [2, 2]
    assert out["n_dropped"].tolist() == [1, 1]
    valid = [0, 2, 4, 5]
    y = np.asarray(NESTED["y"])
    for i, rows in enumerate([valid[:2], valid[2:]]):
        lo8, hi8 = np.asarray(NESTED["lo80"])[rows], np.asarray(NESTED["hi80"])[rows]
        lo9, hi9 = np.asarray(NESTED["lo90"])[rows], np.asarray(NESTED["hi90"])[rows]
        yy = y[rows]
        assert out["interval_coverage_level80"].iloc[i] == pytest.approx(np.mean((lo8 <= yy) & (yy <= hi8)), rel=1e-12)
        assert out["interval_coverage_level90_winkler"].iloc[i] == pytest.approx(
            np.mean(of.interval_score(yy, lo9, hi9, 0.1)), rel=1e-12
        )
        expected = of.wis(yy, np.asarray(NESTED["m"])[rows], [(0.2, lo8, hi8), (0.1, lo9, hi9)])
        assert out["wis"].iloc[i] == pytest.approx(expected["wis"], rel=1e-12)


def test_nesting_checks_raise_and_null(eager_constructor) -> None:
    frame = eager_constructor(NESTED)
    msg = r"^intervals not nested: 'lo90' \(level 0.9\) is greater than 'lo80' \(level 0.8\) in 1 row"
    with pytest.raises(ValueError, match=msg):
        cf.conformal(frame).interval_coverage("y", intervals=NESTED_INTERVALS, crossing="invalid")
    with pytest.raises(ValueError, match=r"intervals not nested: 'hi80' \(level 0.8\) is greater than 'hi90'"):
        cf.conformal(eager_constructor({k: v[3:] for k, v in NESTED.items()})).wis(
            "y", intervals=NESTED_INTERVALS, median="m", crossing="invalid"
        )
    nulls = to_pandas(
        cf.evaluate(
            frame, cf.interval_coverage("y", intervals=NESTED_INTERVALS, crossing="invalid"), by="g", invalid="null"
        )
    )
    assert nulls["n_invalid"].tolist() == [1, 1]
    assert nulls["interval_coverage_level80"].isna().all()
    # nested rows with equal bounds are valid
    same = {k: v for k, v in NESTED.items()}
    same["lo90"], same["hi90"] = same["lo80"], same["hi80"]
    out = cf.conformal(eager_constructor(same)).interval_coverage("y", intervals=NESTED_INTERVALS, crossing="invalid")
    assert _as_list(out, "n") == [6, 6]


def test_report_counts_nesting_violations() -> None:
    df = pl.DataFrame(NESTED)
    with pytest.raises(ValueError, match=r"intervals not nested: 'lo90' \(level 0.9\) is greater than 'lo80'"):
        df.conformal.report(y="y", intervals=NESTED_INTERVALS, by="g", crossing="invalid")
    rep = df.lazy().conformal.report(y="y", intervals=NESTED_INTERVALS, by="g", crossing="invalid")
    assert rep.summary["invalid_rows"] == 2
    causes = rep.summary["invalid_causes"]
    assert any("'lo90' (level 0.9) is greater than 'lo80' (level 0.8) in 1 row" in c for c in causes)
    assert any("'hi80' (level 0.8) is greater than 'hi90' (level 0.9) in 1 row" in c for c in causes)


# ---------------------------------------------------------------------------
# long form: which metrics read it, clear errors elsewhere
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda: cf.wis("y", quantiles="q"),
        lambda: cf.quantile_crps("y", quantiles="q"),
        lambda: cf.pit_test("y", quantiles="q"),
        lambda: cf.pit_histogram("y", quantiles="q"),
    ],
    ids=["wis", "quantile_crps", "pit_test", "pit_histogram"],
)
def test_long_form_unsupported_is_a_clear_error(make) -> None:
    with pytest.raises(TypeError, match=r"^quantiles must be a mapping .*'q' names one column: the long form") as info:
        make()
    assert "pinball_loss and quantile_coverage" in str(info.value)
    assert "pivot to one column per level" in str(info.value)


def test_long_form_intervals_point_to_the_interval_metrics() -> None:
    with pytest.raises(TypeError, match=r"^intervals must be .*use coverage, width and winkler with confidence_level="):
        cf.interval_coverage("y", intervals=("lo", "hi"))
    with pytest.raises(TypeError, match=r"^intervals must be .*long form"):
        cf.wis("y", intervals=["lo", "hi"], median="m")


def test_report_quantile_calibration_figure(tmp_path) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    df = pl.DataFrame(of.forecast_data(25))
    rep = df.conformal.report(y="y", quantiles=QUANTILES, by="g")
    figs = rep.figures()
    assert list(figs) == ["quantile_calibration", "pit_histogram"]
    ax = figs["quantile_calibration"].axes[0]
    table = rep.frame("quantile_coverage").filter(pl.col("g") == "d_many")
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "g=d_many")  # legends read key=value
    np.testing.assert_allclose(line.get_xdata(), table["quantile_level"].to_numpy(), rtol=0)
    np.testing.assert_allclose(line.get_ydata(), table["coverage"].to_numpy(), rtol=1e-12)
    assert [p.name for p in rep.save_plots(tmp_path)] == ["quantile_calibration.png", "pit_histogram.png"]
    both = df.with_columns(pl.col("y").alias("mu"), pl.lit(1.0).alias("sd")).conformal.report(
        y="y", quantiles=QUANTILES, mean="mu", std="sd", n_bins=4
    )
    assert list(both.tables)[:3] == ["forecast", "pit_histogram", "quantile_pit_histogram"]
    assert both.frame("quantile_pit_histogram")["bin"].to_list() == [0, 1, 2, 3]
    direct = df.conformal.pit_histogram("y", quantiles=QUANTILES, n_bins=4)
    assert both.frame("quantile_pit_histogram")["n"].to_list() == direct["n"].to_list()
    assert "quantile_pit_histogram" in both.figures()
