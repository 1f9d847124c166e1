"""Mergeable statistics: summarize / finalize / rolling against evaluate and pandas."""

from __future__ import annotations

import datetime as dt
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas


def _data(seed: int = 0, n: int = 300) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    score = np.round(rng.uniform(0, 1, n), 2)  # tied scores
    score[:3] = [0.0, 1.0, 0.5]
    return {
        "day": rng.integers(0, 6, n).astype(np.int64),
        "seg": rng.choice(["a", "b", "c"], n),
        "y": np.round(rng.normal(size=n), 1),
        "lo": np.round(-1.0 + 0.2 * rng.normal(size=n), 1),
        "hi": np.round(1.0 + 0.2 * rng.normal(size=n), 1),
        "score": score,
        "label": (rng.random(n) < score).astype(np.int64),
    }


def _metrics() -> list[cf.Metric]:
    return [
        cf.coverage("y", "lo", "hi"),
        cf.width("lo", "hi"),
        cf.winkler("y", "lo", "hi", confidence_level=0.9),
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
        cf.coverage_test("y", "lo", "hi", confidence_level=0.9),
        cf.ks_test("label", "score"),
        cf.kuiper_test("label", "score"),
        cf.auroc("label", "score"),
        cf.ece("label", "score", n_bins=5),
        cf.ece("label", "score", n_bins=4, strategy="quantile").alias("ece_q"),
        cf.brier("label", "score"),
        cf.spiegelhalter_test("label", "score"),
    ]


def _lazy_ok(constructor: Any) -> list[cf.Metric]:
    # coverage_test's p-values are a numpy step: lazy only on polars
    lazy_other = constructor.lazy and constructor.id != "polars[lazy]"
    return [m for m in _metrics() if not (lazy_other and m.default_name == "coverage_test")]


def _compare(actual: Any, expected: Any, keys: list[str]) -> None:
    a, e = to_pandas(actual), to_pandas(expected)
    assert list(a.columns) == list(e.columns)
    assert a[keys].astype(str).values.tolist() == e[keys].astype(str).values.tolist()
    for c in e.columns:
        if c not in keys:
            assert_close(a[c], e[c], what=c)


def test_finalize_of_summary_equals_evaluate(constructor: Any) -> None:
    frame = constructor(_data())
    metrics = _lazy_ok(constructor)
    stats = cf.summarize(frame, *metrics, by=["day", "seg"])
    assert type(nw.from_native(stats)) is type(nw.from_native(frame)) or constructor.lazy
    if constructor.id == "pyspark":
        # as docs/monitoring.md advises: each finalize reads the summary twice
        # (its recorded input dtypes, then the merge); cached, it runs once
        stats = stats.cache()
    _compare(cf.finalize(stats, *metrics, by="seg"), cf.evaluate(frame, *metrics, by="seg"), ["seg"])
    _compare(cf.finalize(stats, *metrics), cf.evaluate(frame, *metrics), [])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_finalize_equals_evaluate_over_seeds(seed: int) -> None:
    data = _data(seed, n=500)
    frame = pl.DataFrame(data)
    metrics = _metrics()
    stats = cf.summarize(frame, *metrics, by=["seg", "day"])
    for by in (["seg"], ["day"], ["day", "seg"]):
        _compare(cf.finalize(stats, *metrics, by=by), cf.evaluate(frame, *metrics, by=by), by)


def test_summaries_concatenate_through_parquet(tmp_path: Any) -> None:
    frame = pl.DataFrame(_data(4))
    metrics = [cf.coverage("y", "lo", "hi"), cf.ks_test("label", "score"), cf.auroc("label", "score")]
    for day in range(6):
        part = frame.filter(pl.col("day") == day)
        cf.summarize(part, *metrics, by=["day", "seg"]).write_parquet(tmp_path / f"day={day}.parquet")
    stats = pl.scan_parquet(tmp_path / "*.parquet")
    out = cf.finalize(stats, *metrics, by="seg")
    assert isinstance(out, pl.LazyFrame)
    _compare(out, cf.evaluate(frame, *metrics, by="seg"), ["seg"])


def test_summary_schema() -> None:
    frame = pl.DataFrame(_data())
    stats = cf.summarize(frame, cf.coverage("y", "lo", "hi"), cf.ks_test("label", "score"), by="seg")
    assert stats.columns[:6] == ["seg", "cf_version", "cf_inputs", "cf_cell", "cf_order", "n"]
    assert stats["cf_version"].unique().to_list() == [2]
    group_rows = stats.filter(pl.col("cf_cell").is_null())
    assert group_rows["seg"].to_list() == ["a", "b", "c"]
    assert group_rows["n"].sum() == frame.height
    # the KS state: one row per (group, distinct score)
    cells = stats.filter(pl.col("cf_cell").is_not_null())
    distinct = frame.group_by("seg").agg(pl.col("score").n_unique()).sort("seg")["score"].to_list()
    assert cells.group_by("seg").len().sort("seg")["len"].to_list() == distinct
    assert all(t == pl.Float64 for c, t in stats.schema.items() if c.startswith(("cf_sum", "cf_min", "cf_max")))


def test_finalize_subset_and_missing_statistics() -> None:
    frame = pl.DataFrame(_data())
    stats = cf.summarize(frame, cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), by=["day", "seg"])
    _compare(
        cf.finalize(stats, cf.width("lo", "hi"), by="seg"), cf.evaluate(frame, cf.width("lo", "hi"), by="seg"), ["seg"]
    )
    with pytest.raises(ValueError, match="no statistics of brier on these inputs.*'label' not found"):
        cf.finalize(stats, cf.brier("label", "score"), by="seg")
    other = cf.summarize(frame.with_columns(day=pl.lit(9, pl.Int64)), cf.coverage("y", "lo", "hi"), by=["day", "seg"])
    mixed = pl.concat([stats, other], how="diagonal")
    with pytest.raises(ValueError, match="without the statistics these metrics need.* in 3 rows"):
        cf.finalize(mixed, cf.width("lo", "hi"), by="seg")
    with pytest.raises(ValueError, match="in 3 rows"):  # lazy: checked when called, like invalid="raise"
        cf.finalize(mixed.lazy(), cf.width("lo", "hi"), by="seg")
    # a summary with n_invalid: the groups concerned are null instead
    lazy = cf.summarize(frame.lazy(), cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), by=["day", "seg"])
    other = cf.summarize(
        frame.lazy().with_columns(day=pl.lit(9, pl.Int64)), cf.coverage("y", "lo", "hi"), by=["day", "seg"]
    )
    out = cf.finalize(pl.concat([lazy, other], how="diagonal"), cf.width("lo", "hi"), by="seg").collect()
    assert out["width"].is_null().all()
    assert out["n_invalid"].to_list() == [1, 1, 1]


@pytest.mark.parametrize(
    ("metric", "named", "alternative"),
    [
        (cf.ece("label", "score", strategy="quantile", weights="w"), "ece", "strategy='uniform'"),
        (cf.ece("label", "score", n_bins=50), "ece", "n_bins <= 32"),
        (cf.ssc("y", "lo", "hi"), "ssc", "coverage by="),
        (cf.hsic("y", "lo", "hi"), "hsic", "coverage and width"),
        (cf.auarc("label", "score"), "auarc", "auroc"),
    ],
)
def test_summarize_refuses_metrics_that_do_not_merge(metric: cf.Metric, named: str, alternative: str) -> None:
    frame = pl.DataFrame(_data()).with_columns(w=pl.lit(1.5))
    with pytest.raises(ValueError, match=rf"do not merge exactly: {named}: .*alternative: .*{alternative}"):
        cf.summarize(frame, cf.coverage("y", "lo", "hi"), metric, by="seg")


def test_mergeability_is_declared_on_the_class() -> None:
    """``q.cells`` tables merge; a refused metric's error names its class's ``mergeable_alternative``."""
    from dataclasses import dataclass

    from conformal_frames.engine import Query, TableRef, aggregate, running_total

    @dataclass(frozen=True, kw_only=True)
    class Rows(cf.Metric):
        score: str
        default_name = "rows"
        mergeable_alternative = "coverage"

        def build(self, q: Query) -> dict[str, nw.Expr | None]:
            s = q.row(("value", self.score), q.number(self.score))
            one = q.row(("one",), nw.lit(1.0))
            return {"": self.table(q, s, one)}

        def table(self, q: Query, s: str, one: str) -> nw.Expr:
            def fn(cells: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
                return aggregate(cells, keys, [nw.col(running_total(one)).max().alias(ref.name("n"))])

            return q.cells(("rows", s), fn, order=s, sums=(one,)).col("n")

    @dataclass(frozen=True, kw_only=True)
    class Unsorted(Rows):
        default_name = "unsorted"

        def table(self, q: Query, s: str, one: str) -> nw.Expr:
            def fn(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
                return aggregate(rows, keys, [nw.col(one).sum().alias(ref.name("n"))])

            return q.table(("unsorted", s), fn).col("n")

    frame = pl.DataFrame(_data())
    stats = cf.summarize(frame, Rows(score="score"), by="seg")
    out = cf.finalize(stats, Rows(score="score"), by="seg")
    assert out["rows"].to_list() == out["n"].cast(pl.Float64).to_list()
    with pytest.raises(ValueError, match=r"unsorted: .*second time.*mergeable alternative: coverage\)"):
        cf.summarize(frame, Unsorted(score="score"), by="seg")


def test_bad_arguments() -> None:
    frame = pl.DataFrame(_data())
    stats = cf.summarize(frame, cf.coverage("y", "lo", "hi"), by=["day", "seg"])
    with pytest.raises(ValueError, match=r"by= columns \['region'\] are not keys of the summary"):
        cf.finalize(stats, cf.coverage("y", "lo", "hi"), by="region")
    with pytest.raises(ValueError, match="expects the output of cf.summarize"):
        cf.finalize(frame, cf.coverage("y", "lo", "hi"), by="seg")
    with pytest.raises(ValueError, match="'cf_day'.*summary's own columns"):
        cf.summarize(frame.rename({"day": "cf_day"}), cf.coverage("y", "lo", "hi"), by="cf_day")
    with pytest.raises(ValueError, match="at least one metric"):
        cf.summarize(frame, by="seg")
    with pytest.raises(TypeError, match="window must be an integer"):
        cf.rolling(stats, cf.coverage("y", "lo", "hi"), index="day", window=2.5)
    with pytest.raises(ValueError, match="positive number of periods"):
        cf.rolling(stats, cf.coverage("y", "lo", "hi"), index="day", window=0)
    with pytest.raises(TypeError, match="needs a date or datetime index"):
        cf.rolling(stats, cf.coverage("y", "lo", "hi"), index="day", window=dt.timedelta(days=2))
    with pytest.raises(ValueError, match="not a key of the summary"):
        cf.rolling(stats, cf.coverage("y", "lo", "hi"), index="week", window=2)


def test_invalid_rows_carry_through(constructor: Any) -> None:
    data = _data(n=60)
    data["y"] = data["y"].astype(float)
    data["y"][5] = np.nan
    frame = constructor(data)
    bad_seg = data["seg"][5]
    if not constructor.lazy:
        with pytest.raises(ValueError, match="column 'y' has missing"):
            cf.summarize(frame, cf.coverage("y", "lo", "hi"), by=["day", "seg"])
    for invalid in ("null", "drop"):
        stats = cf.summarize(frame, cf.coverage("y", "lo", "hi"), by=["day", "seg"], invalid=invalid)
        out = cf.finalize(stats, cf.coverage("y", "lo", "hi"), by="seg")
        _compare(out, cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by="seg", invalid=invalid), ["seg"])
        if invalid == "null":
            got = to_pandas(out)
            assert got.loc[got["seg"] == bad_seg, "coverage"].isna().all()


def _daily_pandas(data: dict[str, Any]) -> pd.DataFrame:
    df = pd.DataFrame(data)
    df["covered"] = ((df["lo"] <= df["y"]) & (df["y"] <= df["hi"])).astype(float)
    return df.groupby(["seg", "day"], as_index=False).agg(k=("covered", "sum"), n=("covered", "size"))


def test_rolling_matches_pandas_rolling_on_daily_sums(constructor: Any) -> None:
    data = _data(5, n=400)
    keep = ~((data["seg"] == "b") & (data["day"] == 3))  # a day without rows in one segment
    data = {k: v[keep] for k, v in data.items()}
    stats = cf.summarize(constructor(data), cf.coverage("y", "lo", "hi"), by=["day", "seg"])
    out = to_pandas(cf.rolling(stats, cf.coverage("y", "lo", "hi"), index="day", window=3, by="seg"))
    daily = _daily_pandas(data)
    # periods are the days of the whole summary (0..5): reindex each segment on them
    full = daily.set_index(["seg", "day"]).unstack("seg").reindex(range(6)).fillna(0.0).stack("seg", future_stack=True)
    rolled = full.groupby(level="seg").rolling(3, min_periods=1).sum().droplevel(0).reset_index()
    # a window ending on a day without rows in the segment is there too (it holds earlier days)
    expected = rolled[rolled["n"] > 0].sort_values(["seg", "day"]).reset_index(drop=True)
    assert ["b", 3] in expected[["seg", "day"]].values.tolist()
    assert out[["seg", "day"]].values.tolist() == expected[["seg", "day"]].values.tolist()
    assert_close(out["coverage"], expected["k"] / expected["n"], what="rolling coverage")
    assert out["n"].tolist() == expected["n"].astype(int).tolist()


def test_rolling_duration_window_on_dates() -> None:
    data = _data(6, n=300)
    start = dt.date(2026, 1, 1)
    data["date"] = np.array([start + dt.timedelta(days=int(d) * 2) for d in data["day"]], dtype="datetime64[D]")
    frame = pl.DataFrame(data).drop("day")  # a date every other day
    assert frame.schema["date"] == pl.Date
    stats = cf.summarize(frame, cf.coverage("y", "lo", "hi"), by=["date", "seg"])
    out = cf.rolling(stats, cf.coverage("y", "lo", "hi"), index="date", window=dt.timedelta(days=4), by="seg")
    daily = pd.DataFrame(data)
    daily["covered"] = ((daily["lo"] <= daily["y"]) & (daily["y"] <= daily["hi"])).astype(float)
    daily["date"] = pd.to_datetime(daily["date"])
    sums = daily.groupby(["seg", "date"])["covered"].agg(["sum", "size"]).reset_index()
    expected = []
    for seg, part in sums.groupby("seg"):
        roll = part.set_index("date")[["sum", "size"]].rolling("4D").sum()
        expected += [(seg, d, r["sum"] / r["size"], int(r["size"])) for d, r in roll.iterrows()]
    assert out["seg"].to_list() == [e[0] for e in expected]
    assert [pd.Timestamp(d) for d in out["date"].to_list()] == [e[1] for e in expected]
    assert_close(out["coverage"], [e[2] for e in expected], what="4-day coverage")
    assert out["n"].to_list() == [e[3] for e in expected]


def test_time_window_keys_on_every_backend(constructor: Any) -> None:
    stamps = [
        dt.datetime(2026, 3, 1, 10),
        dt.datetime(2026, 3, 1, 23),
        dt.datetime(2026, 3, 2, 1),
        dt.datetime(2026, 3, 9),
    ]
    data = {"ts": stamps, "y": [1.0, 5.0, 1.0, 1.0], "lo": [0.0] * 4, "hi": [2.0] * 4}
    frame = nw.from_native(constructor(data))
    days = frame.with_columns(nw.col("ts").dt.truncate("1d").alias("day"))
    out = to_pandas(cf.evaluate(days.to_native(), cf.coverage("y", "lo", "hi"), by="day"))
    assert out["coverage"].tolist() == [0.5, 1.0, 1.0]
    assert out["n"].tolist() == [2, 1, 1]


def test_merge_summaries_keeps_a_summary(constructor: Any) -> None:
    frame = constructor(_data(9))
    metrics = [cf.coverage("y", "lo", "hi"), cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9)]
    metrics += [cf.ks_test("label", "score"), cf.auroc("label", "score")]
    stats = cf.summarize(frame, *metrics, by=["day", "seg"])
    merged = cf.merge_summaries(stats, by="seg")
    got = to_pandas(merged)
    assert got.loc[got["cf_cell"].isna(), "seg"].tolist() == ["a", "b", "c"]
    assert got["n"].sum() == len(_data(9)["y"])
    _compare(cf.finalize(merged, *metrics, by="seg"), cf.evaluate(frame, *metrics, by="seg"), ["seg"])


def test_merge_summaries_keeps_missing_statistics_missing() -> None:
    frame = pl.DataFrame(_data())
    width = cf.width("lo", "hi")
    stats = cf.summarize(frame, cf.coverage("y", "lo", "hi"), width, by=["day", "seg"])
    other = cf.summarize(frame.with_columns(day=pl.lit(9, pl.Int64)), cf.coverage("y", "lo", "hi"), by=["day", "seg"])
    merged = cf.merge_summaries(pl.concat([stats, other], how="diagonal"), by="seg")
    width_stat = "cf_sum__width[lo,hi]"
    assert merged[width_stat].is_null().all()
    with pytest.raises(ValueError, match="without the statistics these metrics need.* in 3 rows"):
        cf.finalize(merged, width, by="seg")
    with pytest.raises(ValueError, match=r"by= columns \['week'\] are not keys"):
        cf.merge_summaries(stats, by="week")


def test_coverage_over_time_plot() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from conformal_frames import plots

    stats = cf.summarize(pl.DataFrame(_data(2)), cf.coverage("y", "lo", "hi"), by=["day", "seg"])
    weekly = cf.rolling(stats, cf.coverage("y", "lo", "hi"), index="day", window=3, by="seg")
    ax = plots.coverage_over_time(weekly.lazy(), index="day", by="seg", confidence_level=0.9)
    assert [line.get_label() for line in ax.get_lines()] == ["seg=a", "seg=b", "seg=c", "nominal"]
    first = weekly.filter(pl.col("seg") == "a")
    assert list(ax.get_lines()[0].get_ydata()) == first["coverage"].to_list()
    assert len(ax.collections) == 3  # one Wilson band per segment
    assert list(ax.get_lines()[3].get_ydata()) == [0.9, 0.9]
    with pytest.raises(ValueError, match="missing column.*'coverage_ci_low'"):
        plots.coverage_over_time(weekly.drop("coverage_ci_low"), index="day", by="seg")


def test_dropped_group_does_not_void_the_merged_groups(constructor: Any) -> None:
    # invalid="drop" and a (day, seg) group whose rows are all invalid (the
    # outcome missing for a whole day of one segment): the summary row of that
    # group has n = 0 and no statistics; merged with the other days of the
    # segment it must leave them alone, as evaluate(..., invalid="drop") does.
    if constructor.module == "pyspark":
        pytest.skip("five queries; the same expressions run lazily on duckdb (passed on pyspark at review time)")
    data = _data(n=80)
    data["y"] = data["y"].astype(float)
    cell = (data["day"] == data["day"][0]) & (data["seg"] == data["seg"][0])
    data["y"][cell] = np.nan
    frame = constructor(data)
    # one summary per family: a summary drops a row from all its metrics (see tests/test_family_drop.py)
    for metrics in ([cf.coverage("y", "lo", "hi")], [cf.auroc("label", "score")]):
        stats = cf.summarize(frame, *metrics, by=["day", "seg"], invalid="drop")
        expected = cf.evaluate(frame, *metrics, by="seg", invalid="drop")
        assert not to_pandas(expected)[metrics[0].output_name].isna().any()
        _compare(cf.finalize(stats, *metrics, by="seg"), expected, ["seg"])
        merged = cf.merge_summaries(stats, by="seg")
        _compare(cf.finalize(merged, *metrics, by="seg"), expected, ["seg"])


@pytest.mark.parametrize("keys", [[], ["g"]])
def test_ordered_cells_sum_ties_then_run_in_order(constructor: Any, keys: list[str]) -> None:
    """``engine.ordered_cells``: ties summed first, running totals in ``order`` whatever the row order."""
    from conformal_frames.engine import ordered_cells, running_total

    data = {
        "g": ["a", "b", "a", "a", "b", "a"],
        "s": [0.5, 0.1, 0.2, 0.5, 0.1, 0.9],
        "one": [1.0] * 6,
        "x": [1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
    }
    lf = nw.from_native(constructor(data)).lazy()
    cells = ordered_cells(lf, keys, "s", ["one", "x"], running=["x"])
    out = to_pandas(cells.sort(*keys, "s")).to_dict("list")
    if keys:
        expected = {"g": ["a", "a", "a", "b"], "s": [0.2, 0.5, 0.9, 0.1], "one": [1.0, 2.0, 1.0, 2.0]}
        expected |= {"x": [4.0, 9.0, 32.0, 18.0], running_total("x"): [4.0, 13.0, 45.0, 18.0]}
    else:
        expected = {"s": [0.1, 0.2, 0.5, 0.9], "one": [2.0, 1.0, 2.0, 1.0], "x": [18.0, 4.0, 9.0, 32.0]}
        expected[running_total("x")] = [18.0, 22.0, 31.0, 63.0]
    assert out == expected
