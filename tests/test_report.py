"""The evaluation report: tables, under-coverage test, rendering."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import binom, false_discovery_control

import conformal_frames as cf
from conformal_frames.metrics.conditional import holm
from conformal_frames.reporting import Report, report


def _data(n_per: int = 200, seed: int = 0) -> dict[str, list]:
    """Three segments x two levels; segment 'c' is under-covered (its intervals are too narrow)."""
    rng = np.random.default_rng(seed)
    out: dict[str, list] = {"seg": [], "level": [], "y": [], "lo": [], "hi": []}
    z = {0.8: 1.2816, 0.9: 1.6449}
    for seg, shrink in (("a", 1.0), ("b", 1.0), ("c", 0.5)):
        y = rng.standard_normal(n_per)
        for lv in (0.8, 0.9):
            half = z[lv] * shrink
            out["seg"] += [seg] * n_per
            out["level"] += [lv] * n_per
            out["y"] += y.tolist()
            out["lo"] += [-half] * n_per
            out["hi"] += [half] * n_per
    return out


def _to_py(frame) -> dict[str, list]:
    import narwhals.stable.v2 as nw

    f = nw.from_native(frame)
    if isinstance(f, nw.LazyFrame):
        f = f.collect()
    return f.to_dict(as_series=False)


# ---------------------------------------------------------------------------
# Holm
# ---------------------------------------------------------------------------
def _holm_bruteforce(p: list[float]) -> list[float]:
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adj = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adj[i] = running
    return adj


@pytest.mark.parametrize("seed", range(5))
def test_holm_matches_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.2, size=12).tolist()
    assert holm(p).tolist() == pytest.approx(_holm_bruteforce(p), rel=1e-15)


def test_holm_ignores_nan_and_caps_at_one() -> None:
    out = holm([0.5, float("nan"), 0.01])
    assert math.isnan(out[1])
    assert out[0] == pytest.approx(0.5) and out[2] == pytest.approx(0.02)  # m = 2, not 3
    assert holm([0.7, 0.8]).tolist() == [1.0, 1.0]
    assert np.isnan(holm([float("nan")])).all()


# ---------------------------------------------------------------------------
# the report on every backend
# ---------------------------------------------------------------------------
def test_report_matches_evaluate_on_every_backend(constructor) -> None:
    data = _data()
    frame = constructor(data)
    rep = report(frame, y="y", lo="lo", hi="hi", by="seg", confidence_level="level")
    assert isinstance(rep, Report)
    got = _to_py(rep.table)
    assert got["seg"] == ["a", "a", "b", "b", "c", "c"]
    assert got["level"] == [0.8, 0.9] * 3
    import polars as pl

    ref = cf.evaluate(pl.DataFrame(data), cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), by=["seg", "level"])
    assert got["coverage"] == pytest.approx(ref["coverage"].to_list(), rel=1e-12)
    assert got["width"] == pytest.approx(ref["width"].to_list(), rel=1e-12)
    assert got["n"] == [200] * 6
    assert got["target"] == [0.8, 0.9] * 3
    # segment c has coverage about 0.48 and 0.59: flagged at both levels, nothing else
    assert got["under_covered"] == [False, False, False, False, True, True]
    under = _to_py(rep.under_covered)
    assert under["seg"] == ["c", "c"]
    assert rep.summary["tested"] == 6
    assert [g["group"]["seg"] for g in rep.summary["under_covered"]] == ["c", "c"]


def test_winkler_uses_each_groups_level() -> None:
    import polars as pl

    data = _data(50)
    rep = report(pl.DataFrame(data), y="y", lo="lo", hi="hi", by="seg", confidence_level="level")
    df = pl.DataFrame(data)
    for lv in (0.8, 0.9):
        ref = cf.evaluate(df.filter(pl.col("level") == lv), cf.winkler("y", "lo", "hi", confidence_level=lv), by="seg")
        got = rep.table.filter(pl.col("level") == lv)["winkler"].to_list()
        assert got == pytest.approx(ref["winkler"].to_list(), rel=1e-12)


def test_pvalues_are_the_binomial_cdf_with_holm() -> None:
    import pandas as pd

    data = _data()
    rep = report(pd.DataFrame(data), y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9)
    t = rep.table
    assert isinstance(t, pd.DataFrame)
    k = np.round(t["coverage"].to_numpy() * t["n"].to_numpy())
    p = binom.cdf(k, t["n"].to_numpy(), 0.9)
    assert t["pvalue"].to_numpy() == pytest.approx(p, rel=1e-12)
    assert t["pvalue_adjusted"].to_numpy() == pytest.approx(_holm_bruteforce(p.tolist()), rel=1e-12)


def test_lazy_backends_get_coverage_tests_numbers() -> None:
    """Eager/polars input runs cf.coverage_test in the query; DuckDB (lazy) its p-values from the counts."""
    import duckdb
    import polars as pl

    data = _data()
    eager = report(pl.DataFrame(data), y="y", lo="lo", hi="hi", by="seg", confidence_level="level")
    lazy = report(
        duckdb.from_arrow(pl.DataFrame(data).to_arrow()), y="y", lo="lo", hi="hi", by="seg", confidence_level="level"
    )
    ref = cf.evaluate(
        pl.DataFrame(data), cf.coverage_test("y", "lo", "hi", confidence_level="level"), by=["seg", "level"]
    )
    for rep in (eager, lazy):
        assert "conformal_frames.coverage_test" in rep.summary["test"]
        assert rep.table["pvalue"].to_list() == pytest.approx(ref["coverage_test_pvalue"].to_list(), rel=1e-12)
        assert rep.table["pvalue_adjusted"].to_list() == pytest.approx(
            ref["coverage_test_pvalue_holm"].to_list(), rel=1e-12
        )
        assert rep.table["under_covered"].to_list() == [bool(f) for f in ref["coverage_test_flag"].to_list()]
        assert rep.table.schema["under_covered"] == pl.Boolean


def test_ssc_table_and_widths() -> None:
    import polars as pl

    data = _data(30)
    df = pl.DataFrame(data).with_columns(hi=pl.col("hi") + pl.col("y").abs())  # widths vary
    rep = report(df, y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9, ssc_n_bins=2)
    ssc = rep.frame("ssc")
    ref = df.conformal.ssc("y", "lo", "hi", n_bins=2, by="seg")
    assert ssc["coverage"].to_list() == pytest.approx(ref["ssc"].to_list(), rel=1e-12)
    assert ssc["n"].to_list() == ref["n"].to_list()
    widths = rep.frame("widths")
    w = df.with_columns(w=pl.col("hi") - pl.col("lo")).group_by("seg").agg(pl.col("w").median()).sort("seg")
    assert widths["q50"].to_list() == pytest.approx(w["w"].to_list(), rel=1e-12)


def test_ungrouped_report_without_target() -> None:
    import polars as pl

    rep = report(pl.DataFrame(_data(20)), y="y", lo="lo", hi="hi")
    assert rep.keys == []
    assert "under_covered" not in rep.table.columns
    assert "winkler" not in rep.table.columns
    assert rep.summary["groups"] == 1
    text = str(rep)
    assert "conformal-frames report: 120 rows, 1 group" in text
    with pytest.raises(ValueError, match="no under-coverage test"):
        rep.under_covered


def test_lazy_invalid_rows_are_reported() -> None:
    import polars as pl

    data = _data(20)
    data["y"][0] = float("nan")
    rep = report(pl.DataFrame(data).lazy(), y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9)
    assert rep.summary["invalid_rows"] == 1
    assert "WARNING: 1 row with invalid values" in str(rep)
    # the eager frame raises, like every eager evaluation
    with pytest.raises(ValueError, match="missing"):
        report(pl.DataFrame(data), y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9)


# ---------------------------------------------------------------------------
# argument errors
# ---------------------------------------------------------------------------
def test_errors_name_the_column_and_list_the_available_ones() -> None:
    import polars as pl

    df = pl.DataFrame(_data(5))
    with pytest.raises(
        ValueError, match=r"column 'upper' \(hi=\) not found; available columns: 'seg', 'level', 'y', 'lo', 'hi'"
    ):
        report(df, y="y", lo="lo", hi="upper")
    with pytest.raises(ValueError, match=r"'region' \(by\[0\]=\) not found"):
        report(df, y="y", lo="lo", hi="hi", by="region")
    with pytest.raises(ValueError, match="missing hi="):
        report(df, y="y", lo="lo")
    with pytest.raises(ValueError, match="also in by="):
        report(df, y="y", lo="lo", hi="hi", by=["seg", "level"], confidence_level="level")
    with pytest.raises(ValueError, match="nothing to report"):
        report(df)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        report(df.with_columns(level=pl.lit(90.0)), y="y", lo="lo", hi="hi", confidence_level="level")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("label", "y"),
        ("prediction_set", "sets"),
        ("level", "confidence_level"),
        ("num_bins", "n_bins"),
        ("ssc_bins", "ssc_n_bins"),
        ("ci", "ci_level"),
        ("alpha", "significance"),
    ],
)
def test_old_keywords_name_the_new_one(old: str, new: str) -> None:
    import polars as pl

    df = pl.DataFrame(_data(5))
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{old}'; it is called '{new}' since 0.2"):
        report(df, y="y", lo="lo", hi="hi", **{old: "level" if old == "level" else 0.9})


def test_input_frame_not_modified() -> None:
    import pandas as pd

    df = pd.DataFrame(_data(10))
    before = df.copy()
    report(df, y="y", lo="lo", hi="hi", by="seg", confidence_level="level")
    pd.testing.assert_frame_equal(df, before)


# ---------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rep() -> Report:
    import polars as pl

    return report(pl.DataFrame(_data()), y="y", lo="lo", hi="hi", by="seg", confidence_level="level")


def test_text_rendering(rep: Report) -> None:
    text = str(rep)
    lines = text.splitlines()
    assert lines[0] == "conformal-frames report: 1,200 rows, 6 groups by seg, level"
    assert (
        "significantly under-covered: 2 of 6 tested groups (one-sided exact binomial test of coverage >= target "
        "(conformal_frames.coverage_test; over-coverage: alternative='greater'), Holm, significance=0.05)" in text
    )
    assert "  - seg=c, level=0.8: coverage" in text
    headers = " ".join(line for line in lines if line.startswith("seg  level"))  # a wide table: blocks of columns
    assert "coverage" in headers and "under_covered" in headers
    # every table row has the same width as its header separator
    assert "Size-stratified coverage" in text


def test_html_rendering(rep: Report, tmp_path) -> None:
    snippet = rep._repr_html_()
    assert snippet.count("<table>") == 3 and '<tr class="cf-flag">' in snippet  # intervals: two blocks of columns
    assert "<img" not in snippet  # plots only in the file
    pytest.importorskip("matplotlib", reason="plots in the HTML file need matplotlib ([plot] extra)")
    path = tmp_path / "r.html"
    page = rep.to_html(path)
    assert path.read_text(encoding="utf-8") == page
    assert page.startswith("<!DOCTYPE html>")
    assert page.count('src="data:image/png;base64,') == 4  # coverage, vs level, ssc, widths
    assert "http://" not in page and "https://" not in page  # self-contained
    import base64

    first = page.split('src="data:image/png;base64,')[1].split('"')[0]
    assert base64.b64decode(first)[:8] == b"\x89PNG\r\n\x1a\n"


def test_json_and_csv(rep: Report, tmp_path) -> None:
    data = json.loads(rep.to_json(tmp_path / "r.json"))
    assert set(data["tables"]) == {"intervals", "ssc", "widths"}
    assert len(data["tables"]["intervals"]) == 6
    assert data["summary"]["under_covered"][0]["group"] == {"seg": "c", "level": 0.8}
    text = rep.to_csv()
    rows = text.strip().splitlines()
    assert rows[0] == "seg,level,family,metric,value"
    n_metrics = len([c for c in rep.table.columns if c not in ("seg", "level")])
    assert len(rows) == 1 + 6 * n_metrics
    long = rep.metrics()
    assert long.columns == ["seg", "level", "family", "metric", "value"]
    assert long.height == 6 * n_metrics


def test_bounded_memory_mode() -> None:
    """No SSC; width quantiles from 512-bin histograms, within one bin of the exact ones."""
    import polars as pl

    from conformal_frames.reporting import WIDTH_HISTOGRAM_BINS

    rng = np.random.default_rng(7)
    n = 20_000
    x = rng.normal(size=n)
    df = pl.DataFrame(
        {
            "g": rng.choice(["a", "b", "c"], n),
            "y": x + rng.normal(size=n),
            "lo": x - rng.gamma(2.0, 1.0, n),
            "hi": x + rng.gamma(2.0, 1.0, n),
        }
    )
    for frame in (df, df.lazy()):
        exact = report(frame, y="y", lo="lo", hi="hi", by="g", confidence_level=0.9)
        bounded = report(frame, y="y", lo="lo", hi="hi", by="g", confidence_level=0.9, bounded_memory=True)
        assert "ssc" not in bounded.tables and "ssc_score" not in bounded.table.columns
        assert bounded.table["coverage"].to_list() == pytest.approx(exact.table["coverage"].to_list(), rel=1e-12)
        assert bounded.table["pvalue"].to_list() == pytest.approx(exact.table["pvalue"].to_list(), rel=1e-12)
        a, b = bounded.frame("widths"), exact.frame("widths")
        assert a["min"].to_list() == b["min"].to_list() and a["max"].to_list() == b["max"].to_list()
        assert a["mean"].to_list() == pytest.approx(b["mean"].to_list(), rel=1e-12)
        bin_width = ((b["max"] - b["min"]) / WIDTH_HISTOGRAM_BINS).to_numpy()
        for q in ("q05", "q25", "q50", "q75", "q95"):
            assert (np.abs(a[q].to_numpy() - b[q].to_numpy()) <= bin_width).all(), q
    assert "bounded memory" in str(bounded)
    with pytest.raises(ValueError, match="hsic"):
        report(df, y="y", lo="lo", hi="hi", hsic=True, bounded_memory=True)


def test_pandas_tables_have_a_default_index() -> None:
    import pandas as pd

    rep = report(pd.DataFrame(_data(30)), y="y", lo="lo", hi="hi", by="seg", confidence_level="level")
    assert rep.table.index.tolist() == list(range(6))
    assert rep.under_covered.index.tolist() == [0, 1]
    assert rep.frame("ssc").index.tolist() == list(range(len(rep.frame("ssc"))))
    k = np.round(rep.table["coverage"] * rep.table["n"]).to_numpy()
    assert rep.table["pvalue"].to_numpy() == pytest.approx(
        binom.cdf(k, rep.table["n"].to_numpy(), rep.table["target"].to_numpy()), rel=1e-12
    )


def test_namespace_method() -> None:
    import pandas as pd
    import polars as pl

    data = _data(20)
    for frame in (pd.DataFrame(data), pl.DataFrame(data).lazy()):
        rep = frame.conformal.report(y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9)
        assert isinstance(rep, Report) and rep.summary["groups"] == 3
    rel = cf.conformal(pl.DataFrame(data).to_pandas()).report(y="y", lo="lo", hi="hi")
    assert rel.summary["rows"] == 120


def test_not_a_frame() -> None:
    with pytest.raises(TypeError, match="expected a DataFrame"):
        report([1, 2, 3], y="y", lo="lo", hi="hi")


def test_coverage_gap_in_summary(rep: Report) -> None:
    t = rep.table
    for item in rep.summary["pooled_coverage"]:
        sub = t.filter(t["target"] == item["target"])
        dev = (sub["coverage"] - item["target"]).abs()
        assert item["gap"] == pytest.approx(dev.mean(), rel=1e-12)
        assert item["gap_weighted"] == pytest.approx((dev * sub["n"]).sum() / sub["n"].sum(), rel=1e-12)
        assert item["coverage"] == pytest.approx((sub["coverage"] * sub["n"]).sum() / sub["n"].sum(), rel=1e-12)
    if hasattr(cf, "coverage_gap"):  # the conditional family's definition agrees
        import polars as pl

        data = pl.DataFrame(_data())
        for item in rep.summary["pooled_coverage"]:
            one = data.filter(pl.col("level") == item["target"])
            for weighted, key in ((False, "gap"), (True, "gap_weighted")):
                ref = one.conformal.coverage_gap(
                    "y", "lo", "hi", groups="seg", confidence_level=item["target"], weighted=weighted
                )
                assert item[key] == pytest.approx(ref, rel=1e-12)


def test_bh_correction_and_significance_come_from_coverage_test() -> None:
    import polars as pl

    data = pl.DataFrame(_data())
    rep = report(data, y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9, correction="bh", significance=1e-6)
    t = rep.table
    assert t["pvalue_adjusted"].to_list() == pytest.approx(
        false_discovery_control(t["pvalue"].to_numpy(), method="bh").tolist(), rel=1e-12
    )
    assert t["under_covered"].to_list() == (t["pvalue_adjusted"] < 1e-6).to_list()
    assert "Benjamini-Hochberg, significance=1e-06" in rep.summary["test"]
    with pytest.raises(ValueError, match="correction must be"):
        report(data, y="y", lo="lo", hi="hi", confidence_level=0.9, correction="bonferroni")


def test_many_segments_stay_readable() -> None:
    """2,000 segments: text and HTML tables capped with a count; the full table stays available."""
    import polars as pl

    rng = np.random.default_rng(11)
    n = 20_000
    seg = rng.integers(0, 2000, n)
    y = rng.standard_normal(n)
    half = np.where(seg == 1234, 0.0, 1.645)
    df = pl.DataFrame({"seg": [f"s{i:04d}" for i in seg], "y": y, "lo": -half, "hi": half})
    rep = report(df, y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9)
    groups = rep.summary["groups"]
    assert groups > 1900 and rep.table.height == groups  # the full table
    text = str(rep)
    assert len(text.splitlines()) < 200
    assert f"... {groups - 50:,} more groups not shown (the full table: rep.frame('intervals'))" in text
    interval_rows = text.split("Interval metrics per group\n")[1].split("\n\n")[0].splitlines()
    assert len(interval_rows) == 2 + 50 + 1  # header, separator, 50 groups, the count
    assert any(line.startswith("s1234 ") for line in interval_rows)  # the flagged segment is shown
    page = rep.to_html(plots=False)
    assert len(page) < 200_000
    assert page.count("<tr") == 3 * (1 + 50)  # intervals (two blocks of columns) and ssc: header and 50 groups
    assert f"{groups - 50:,} more groups not shown" in page
    rep.max_rows = None
    assert len(str(rep).splitlines()) > 2 * groups


def test_sets_and_calibration_in_one_report() -> None:
    """sets= without classes (labels from the data); score= with its own 0/1 outcome score_y=."""
    import polars as pl

    df = pl.DataFrame(
        {
            "g": ["a", "a", "b", "b"],
            "y": [0, 1, 2, 2],
            "s": [[0], [0, 2], [2], [1]],
            "p": [0.2, 0.7, 0.9, 0.4],
            "event": [0, 1, 1, 0],
        }
    )
    rep = report(df, y="y", sets="s", score="p", score_y="event", by="g", confidence_level=0.5)
    assert list(rep.tables) == ["sets", "calibration", "decomposition", "reliability"]
    sets = rep.frame("sets")
    assert sets["set_coverage"].to_list() == [0.5, 0.5]
    assert sets["set_size"].to_list() == [1.5, 1.0]
    assert sets["under_covered"].to_list() == [False, False]
    ref = cf.evaluate(df, cf.brier("event", "p"), by="g")
    assert rep.frame("calibration")["brier"].to_list() == pytest.approx(ref["brier"].to_list(), rel=1e-12)
    assert rep.columns == {"y": "y", "score": "p", "score_y": "event", "sets": "s"}
    with pytest.raises(ValueError, match="score_y= names the 0/1 outcome of score=; give score= too"):
        report(df, y="y", sets="s", score_y="event")


def test_invalid_policies() -> None:
    """raise (eager default), null (lazy default; the group is named untested), drop (n counts the valid rows)."""
    import polars as pl

    data = _data(20)
    data["y"][0] = float("nan")  # seg a, level 0.8
    df = pl.DataFrame(data)
    kw: dict = dict(y="y", lo="lo", hi="hi", by="seg", confidence_level="level")
    with pytest.raises(ValueError, match=r"column 'y' has missing \(null/NaN\) or infinite values in 1 row"):
        report(df, **kw, invalid="raise")
    null = report(df, **kw, invalid="null")
    assert null.summary["untested"] == [{"group": {"seg": "a", "level": 0.8}, "n": 20, "n_invalid": 1}]
    assert null.table["n_invalid"].to_list() == [1, 0, 0, 0, 0, 0]
    assert null.summary["tested"] == 5 and null.summary["invalid_rows"] == 1
    assert null.summary["pooled_coverage"][0]["n_excluded"] == 20
    assert "column 'y' has missing (null/NaN) or infinite values in 1 row" in null.summary["invalid_causes"]
    assert "NOT TESTED: 1 group could not be tested" in str(null)
    drop = report(df, **kw, invalid="drop")
    assert drop.table["n"].to_list() == [19, 20, 20, 20, 20, 20]
    assert drop.table["n_dropped"].to_list() == [1, 0, 0, 0, 0, 0]
    assert drop.summary["untested"] == [] and drop.summary["tested"] == 6
    assert drop.summary["dropped_rows"] == 1 and drop.summary["rows"] == 120
    ref = cf.evaluate(df.filter(pl.col("y").is_not_nan()), cf.coverage("y", "lo", "hi"), by=["seg", "level"])
    assert drop.table["coverage"].to_list() == pytest.approx(ref["coverage"].to_list(), rel=1e-12)
    assert "note: 1 row with invalid values dropped" in str(drop)
    with pytest.raises(ValueError, match="invalid must be 'raise', 'drop' or 'null'"):
        report(df, **kw, invalid="skip")
