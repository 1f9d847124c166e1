"""Bounded work at real sizes (issue 23): bootstrap chunks, worst-slab defaults, progress, summary size.

Correctness only: the same results chunked or not, progress on stderr when
asked, the summary warning.  No timings.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
from conformal_frames.metrics import bootstrap as boot
from conformal_frames.numerics.slabs import default_directions, slab_directions


def _frame(n: int = 300, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    s = np.round(rng.random(n), 3)
    return pl.DataFrame(
        {"g": rng.integers(0, 3, n), "y": (rng.random(n) < s).astype(np.int64), "s": s, "w": rng.random(n) + 0.1}
    )


@pytest.mark.parametrize("weights", [None, "w"])
def test_bootstrap_chunks_give_the_same_interval(monkeypatch: pytest.MonkeyPatch, weights: str | None) -> None:
    df = _frame()
    metric = cf.bootstrap(cf.ece("y", "s", weights=weights), n_resamples=30, seed=3)
    cf.engine._plan_cache.clear()
    one = cf.evaluate(df, metric, by="g")  # one chunk: 30 replicates x 300 rows
    monkeypatch.setattr(boot, "CHUNK_CELLS", 700)  # 2 replicates per chunk of 300 rows
    cf.engine._plan_cache.clear()
    chunked = cf.evaluate(df, metric, by="g")
    for c in ("ece_ci_low", "ece_ci_high"):
        np.testing.assert_allclose(chunked[c].to_numpy(), one[c].to_numpy(), rtol=1e-12)
    ungrouped = cf.evaluate(df, metric)
    monkeypatch.setattr(boot, "CHUNK_CELLS", 10**9)
    cf.engine._plan_cache.clear()
    np.testing.assert_allclose(cf.evaluate(df, metric).to_numpy(), ungrouped.to_numpy(), rtol=1e-12)


def test_bootstrap_polars_chunks_match_the_per_replicate_query() -> None:
    duckdb = pytest.importorskip("duckdb")
    df = _frame(seed=1)
    metric = cf.bootstrap(cf.brier("y", "s"), n_resamples=25, seed=5)
    got = cf.evaluate(df, metric, by="g")  # polars: chunks of the cross-joined rows
    rel = duckdb.connect().from_arrow(df.to_arrow())
    other = cf.evaluate(rel, metric, by="g").pl().sort("g")  # DuckDB: one expression per replicate
    for c in ("brier_ci_low", "brier_ci_high"):
        np.testing.assert_allclose(got[c].to_numpy(), other[c].to_numpy(), rtol=1e-12)


@pytest.mark.parametrize("bar", ["tqdm", "plain"])
def test_progress_on_stderr_when_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, bar: str
) -> None:
    if bar == "tqdm":
        pytest.importorskip("tqdm")
    else:
        monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    df = _frame()
    metric = cf.bootstrap(cf.brier("y", "s"), n_resamples=10)
    cf.evaluate(df, metric, by="g")
    assert capsys.readouterr().err == ""
    cf.evaluate(df, metric, by="g", progress=True)
    assert "bootstrap" in capsys.readouterr().err
    rng = np.random.default_rng(0)
    slab = pl.DataFrame({"x": rng.random(200), "y": rng.random(200), "lo": 0.1, "hi": 0.9})
    slab.conformal.worst_slab_coverage("y", "lo", "hi", features=["x"], n_directions=5, progress=True)
    err = capsys.readouterr().err
    assert "worst_slab_coverage: directions" in err
    assert "worst_slab_coverage: worst_slab_coverage" not in err and "0it" not in err  # named once; no empty bar
    cf.summarize(df, cf.ks_test("y", "s"), by="g", progress=True)
    assert capsys.readouterr().err == ""  # no stepped work: an empty bar prints nothing
    with pytest.raises(TypeError, match="progress="):
        cf.evaluate(df, metric, progress="yes")


def test_worst_slab_default_directions() -> None:
    assert default_directions(1000) == 1000
    assert default_directions(100_000) == 1000
    assert default_directions(1_000_000) == 100
    assert default_directions(10**8) == 100
    np.testing.assert_array_equal(slab_directions(100, 2, 7), slab_directions(1000, 2, 7)[:100])
    rng = np.random.default_rng(2)
    df = pl.DataFrame({"x1": rng.random(400), "x2": rng.random(400), "y": rng.random(400)})
    df = df.with_columns(lo=pl.col("x1") * 0.2, hi=1.0 - pl.col("x2") * 0.2)
    default = df.conformal.worst_slab_coverage("y", "lo", "hi", features=["x1", "x2"])
    assert default == df.conformal.worst_slab_coverage("y", "lo", "hi", features=["x1", "x2"], n_directions=1000)


def test_summarize_warns_on_many_cells_and_rounds_scores() -> None:
    rng = np.random.default_rng(0)
    n = 12_000
    df = pl.DataFrame({"g": rng.integers(0, 2, n), "y": rng.integers(0, 2, n), "s": rng.random(n)})
    with pytest.warns(UserWarning, match="score_decimals="):
        cf.summarize(df, cf.ks_test("y", "s"), by="g")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        small = cf.summarize(df, cf.ks_test("y", "s"), cf.auroc("y", "s"), by="g", score_decimals=2)
    assert len(small) <= 2 + 2 * 2 * 101  # group rows + the cells of two cell sets
    rounded = df.with_columns(pl.col("s").round(2))
    want = cf.evaluate(rounded, cf.ks_test("y", "s"), cf.auroc("y", "s"), by="g")
    got = cf.finalize(small, cf.ks_test("y", "s"), cf.auroc("y", "s"), by="g")
    for c in ("ks_test", "auroc"):
        np.testing.assert_allclose(got[c].to_numpy(), want[c].to_numpy(), rtol=1e-12)
    # p ~ 1e-107: its relative error is about G^2 (~500) times that of the statistic G
    np.testing.assert_allclose(got["ks_test_pvalue"].to_numpy(), want["ks_test_pvalue"].to_numpy(), rtol=1e-9)
    with pytest.raises(ValueError, match="score_decimals"):
        cf.summarize(df, cf.ks_test("y", "s"), score_decimals=-1)


def test_report_progress_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    from conformal_frames.reporting import report

    df = pl.DataFrame(
        {"seg": ["a"] * 20 + ["b"] * 20, "y": [0.5] * 40, "lo": [0.0] * 30 + [0.6] * 10, "hi": [1.0] * 40}
    )
    report(df, y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9)
    assert capsys.readouterr().err == ""
    rep = report(df, y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9, progress=True)
    assert "report" in capsys.readouterr().err
    assert rep.table["coverage"].to_list() == [1.0, 0.5]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ungrouped_polars_cells_by_one_sort_equal_the_aggregation(seed: int) -> None:
    # polars builds ungrouped ordered cells by a sort and a cumulative sum read
    # at the end of each tie run; they are the per-score sums of the aggregation
    import narwhals.stable.v2 as nw

    from conformal_frames.engine.expr import ordered_cells, running_total

    rng = np.random.default_rng(seed)
    n = 400
    s = np.round(rng.random(n), 1)  # heavy ties; one score only once
    s[0] = 0.55
    d, k = rng.standard_normal(n), rng.integers(0, 3, n)
    rows = nw.from_native(pl.DataFrame({"s": s, "d": d, "k": k}).lazy())
    cells = ordered_cells(rows, [], "s", ["d", "k"], running=["d"]).collect().sort("s")
    values = np.unique(s)
    sums = np.array([d[s == v].sum() for v in values])
    np.testing.assert_array_equal(cells["s"].to_numpy(), values)
    np.testing.assert_allclose(cells["d"].to_numpy(), sums, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(cells["k"].to_numpy(), [k[s == v].sum() for v in values])
    assert cells["k"].dtype == nw.Float64
    np.testing.assert_allclose(cells[running_total("d")].to_numpy(), np.cumsum(sums), rtol=1e-12, atol=1e-12)
    # row order does not change the cells (to the rounding of the sums)
    perm = rng.permutation(n)
    shuffled = nw.from_native(pl.DataFrame({"s": s[perm], "d": d[perm], "k": k[perm]}).lazy())
    again = ordered_cells(shuffled, [], "s", ["d", "k"], running=["d"]).collect().sort("s")
    np.testing.assert_allclose(again[running_total("d")].to_numpy(), np.cumsum(sums), rtol=1e-12, atol=1e-12)
