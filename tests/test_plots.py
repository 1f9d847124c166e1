"""Plots (optional [plot] extra): each returns the Axes, accepts ax=, is readable with 50 segments."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="matplotlib ([plot] extra) is not installed")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from conformal_frames import plots  # noqa: E402  # noqa: E402
from conformal_frames.reporting import report  # noqa: E402


def _fifty(n: int = 6000, seed: int = 0) -> dict[str, np.ndarray]:
    """50 segments x 3 levels (long format); segment_07 under-covered."""
    rng = np.random.default_rng(seed)
    seg = rng.integers(0, 50, n)
    x = rng.normal(size=n)
    scale = 0.5 + np.abs(x)
    y = x + scale * rng.standard_normal(n)
    parts = []
    for lv, z in ((0.8, 1.2816), (0.9, 1.6449), (0.95, 1.96)):
        half = z * scale * np.where(seg == 7, 0.6, 1.0)
        parts.append(
            {
                "seg": np.array([f"segment_{i:02d}" for i in seg]),
                "level": np.full(n, lv),
                "y": y,
                "lo": x - half,
                "hi": x + half,
                "label": (rng.uniform(size=n) < 1 / (1 + np.exp(-x))).astype(np.int64),
                "score": 1 / (1 + np.exp(-1.3 * x)),
            }
        )
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


@pytest.fixture(scope="module")
def df():
    import polars as pl

    return pl.DataFrame(_fifty())


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _ticks(ax) -> list[str]:
    return [t.get_text() for t in ax.get_yticklabels()]


def test_coverage_by_segment_fifty_segments(df) -> None:
    ax = plots.coverage_by_segment(df, by="seg", y="y", lo="lo", hi="hi", confidence_level="level")
    assert _ticks(ax) == [f"segment_{i:02d}" for i in range(50)]
    assert ax.figure.get_figheight() >= 0.25 * 50  # grows with the segments
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["level 0.8", "level 0.9", "level 0.95"]
    assert sorted(line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--") == [0.8, 0.9, 0.95]
    assert ax.get_xlabel() and ax.get_title() == "Coverage by segment"


def test_coverage_by_segment_accepts_ax_and_a_report_table(df) -> None:
    rep = report(df.filter(df["level"] == 0.9), y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9)
    fig, ax = plt.subplots()
    out = plots.coverage_by_segment(rep.table, by="seg", ax=ax)
    assert out is ax
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "significantly below target" in legend and "nominal" in legend


def test_coverage_vs_level_highlights_the_lowest_groups(df) -> None:
    ax = plots.coverage_vs_level(df, confidence_level="level", by="seg", y="y", lo="lo", hi="hi", highlight=5)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0] == "nominal (y = x)" and legend[1] == "other groups (45)"
    assert "seg=segment_07" in legend[2:] and len(legend) == 7  # legends read key=value
    fig, ax2 = plt.subplots()
    assert plots.coverage_vs_level(df, y="y", lo="lo", hi="hi", ax=ax2) is ax2  # ungrouped


def test_ssc_bars(df) -> None:
    one = df.filter(df["level"] == 0.9)
    ax = plots.ssc_bars(one, by="seg", y="y", lo="lo", hi="hi", n_bins=3, confidence_level=0.9)
    assert len(_ticks(ax)) == 50
    assert len(ax.patches) == 150
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["nominal 0.9", "width bin 0 (narrowest)", "width bin 1", "width bin 2 (widest)"]
    long = one.conformal.ssc("y", "lo", "hi", n_bins=3, by="seg")  # the metric's own table works too
    fig, ax2 = plt.subplots()
    assert plots.ssc_bars(long, by="seg", ax=ax2) is ax2


def test_width_distribution_from_quantiles(df) -> None:
    ax = plots.width_distribution(df.filter(df["level"] == 0.9), by="seg", lo="lo", hi="hi")
    assert len(_ticks(ax)) == 50
    fig, ax2 = plt.subplots()
    assert plots.width_distribution(df, lo="lo", hi="hi", ax=ax2) is ax2
    with pytest.raises(ValueError, match="q05"):
        plots.width_distribution(df, by="seg")


def test_reliability_diagram(df) -> None:
    one = df.filter(df["level"] == 0.9)
    ax = plots.reliability_diagram(one, y="label", score="score", n_bins=10)
    assert ax.get_xlim() == (0.0, 1.0) and ax.get_ylim() == (0.0, 1.0)
    assert len(ax.collections) == 1  # the binomial band
    ax = plots.reliability_diagram(one, y="label", score="score", by="seg")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:2] == ["perfect calibration", "other groups (40)"]  # ten of 50 coloured (0.3: six)
    table = plots.reliability_table(one, y="label", score="score", n_bins=10)
    assert table["n"].sum() == one.height
    assert set(table.columns) >= {"bin", "mean_score", "frequency", "frequency_ci_low", "frequency_ci_high", "n"}


def test_report_figures(df) -> None:
    rep = report(df, y="y", lo="lo", hi="hi", by="seg", confidence_level="level")
    figs = rep.figures()
    assert list(figs) == ["coverage_by_segment", "coverage_vs_level", "ssc", "width_distribution"]
    assert plt.get_fignums() == []  # closed in pyplot, still drawable
    assert figs["ssc"].axes[0].get_title() == "Size-stratified coverage at level = 0.9"


def test_raw_columns_must_come_together(df) -> None:
    with pytest.raises(ValueError, match="all of y=, lo=, hi="):
        plots.coverage_by_segment(df, by="seg", y="y")
    with pytest.raises(ValueError, match="coverage_ci_low"):
        plots.coverage_by_segment(df, by="seg")


def test_missing_matplotlib_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None; sys.modules['matplotlib.pyplot'] = None\n"
        "import polars as pl\n"
        "from conformal_frames import plots\n"
        "df = pl.DataFrame({'y': [1.0], 'lo': [0.0], 'hi': [2.0]})\n"
        "try:\n"
        "    plots.coverage_by_segment(df, y='y', lo='lo', hi='hi', confidence_level=0.9)\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'conformal-frames[plot]'" in out.stdout


def test_error_bars_are_clipped_when_a_bound_crosses_its_estimate() -> None:
    """A CI bound 1 ulp on the wrong side of its estimate (Wilson at coverage 1, n=65) must not crash."""
    import polars as pl

    table = pl.DataFrame(
        {
            "seg": ["a", "b", "c"],
            "coverage": [1.0, 0.0, 0.5],
            "coverage_ci_low": [0.94, 1.7e-18, 0.4],
            "coverage_ci_high": [0.9999999999999999, 0.05, float("nan")],
            "target": [0.9, 0.9, 0.9],
        }
    )
    table = table.with_columns(coverage_ci_low=pl.when(pl.col("seg") == "b").then(1e-17).otherwise("coverage_ci_low"))
    table = table.with_columns(coverage=pl.when(pl.col("seg") == "b").then(2e-17).otherwise("coverage"))
    ax = plots.coverage_by_segment(table, by="seg")
    assert _ticks(ax) == ["a", "b", "c"]
    bars = [c for c in ax.collections if c.get_segments()]
    for coll in bars:
        for seg in coll.get_segments():
            if seg[0][1] == seg[1][1]:  # horizontal error bar: left end <= right end
                assert seg[0][0] <= seg[1][0]
    long = pl.DataFrame({"level": [0.8, 0.9], "coverage": [1.0, 1.0], "n": [65, 65]}).with_columns(
        coverage_ci_low=pl.lit(0.95), coverage_ci_high=pl.lit(0.9999999999999999)
    )
    plots.coverage_vs_level(long, confidence_level="level")


def test_many_segments_are_capped_with_a_summary_row() -> None:
    import polars as pl

    rng = np.random.default_rng(3)
    n = 20_000
    seg = rng.integers(0, 400, n)
    x = rng.normal(size=n)
    half = 1.645 * np.where(seg == 123, 0.5, 1.0)
    df = pl.DataFrame({"seg": [f"s{i:03d}" for i in seg], "y": x, "lo": -half + 0 * x, "hi": half + 0 * x})
    rep = report(df, y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9)
    ax = plots.coverage_by_segment(rep.table, by="seg", max_segments=20)
    ticks = _ticks(ax)
    assert len(ticks) == 21 and ticks[-1] == "(380 other segments)"
    assert "s123" in ticks  # the flagged segment is among those drawn
    assert ticks[:-1] == sorted(ticks[:-1])  # key order
    assert "20 of 400 segments" in ax.get_title()
    assert any("range of the other 380 segments" in t.get_text() for t in ax.get_legend().get_texts())
    assert ax.figure.get_figheight() < 10
    rep.max_segments = 10
    figs = rep.figures()
    for name in ("coverage_by_segment", "ssc", "width_distribution"):
        labels = [t.get_text() for t in figs[name].axes[0].get_yticklabels()]
        assert len(labels) == 11 and "s123" in labels, name
    assert (
        plots.width_distribution(rep.frame("widths"), by="seg", max_segments=None).get_yticklabels()[-1].get_text()
        == "s399"
    )


def test_ssc_bars_start_at_zero(df) -> None:
    ax = plots.ssc_bars(df.filter(df["level"] == 0.9), by="seg", y="y", lo="lo", hi="hi", confidence_level=0.9)
    assert ax.get_xlim() == (0.0, 1.0)


def _days(metric: str = "coverage"):
    import datetime as dt

    import polars as pl

    days = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(10)]
    rows = {"day": days * 2, "model": [9] * 10 + [8] * 10, metric: np.linspace(0.8, 0.95, 20)}
    rows |= {f"{metric}_ci_low": rows[metric] - 0.05, f"{metric}_ci_high": rows[metric] + 0.03}
    return pl.DataFrame(rows)


def test_coverage_over_time_any_metric_concise_dates_named_legend() -> None:
    import matplotlib.dates as mdates

    ax = plots.coverage_over_time(_days("set_coverage"), index="day", metric="set_coverage", by="model")
    assert [line.get_label() for line in ax.get_lines()] == ["model=8", "model=9"]  # key=value, not "8", "9"
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), np.linspace(0.8, 0.95, 20)[10:])
    assert ax.get_ylabel() == "set_coverage (confidence band)" and ax.get_title() == "set_coverage over time"
    assert isinstance(ax.xaxis.get_major_formatter(), mdates.ConciseDateFormatter)
    ax.figure.canvas.draw()
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert len(ticks) <= 8 and len(set(ticks)) == len(ticks)  # 10 days: a few short, distinct labels
    with pytest.raises(ValueError, match="set_coverage_ci_high"):
        plots.coverage_over_time(_days("set_coverage").drop("set_coverage_ci_high"), index="day", metric="set_coverage")
    assert plots.coverage_over_time(_days(), index="day").get_lines()[0].get_label() == "coverage"  # the default


def test_two_keys_draw_small_multiples() -> None:
    """by with two keys: one panel per value of the first key, a shared legend of the second."""
    import polars as pl

    rng = np.random.default_rng(5)
    n = 4000
    region, model = rng.integers(0, 3, n), rng.integers(0, 2, n)
    x = rng.normal(size=n)
    half = np.where((region == 1) & (model == 1), 0.5, 1.0) * 1.6449
    rows = {"region": [f"r{i}" for i in region], "model": [f"m{i}" for i in model], "y": x + rng.standard_normal(n)}
    parts = [
        pl.DataFrame(rows | {"level": [lv] * n, "lo": x - z * half, "hi": x + z * half})
        for lv, z in ((0.8, 0.78), (0.9, 1.0))
    ]
    rep = report(pl.concat(parts), y="y", lo="lo", hi="hi", by=["region", "model"], confidence_level="level")
    fig = rep.figures()["coverage_vs_level"]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["region=r0", "region=r1", "region=r2"]
    assert fig.get_suptitle().startswith("Coverage vs nominal level by region")
    assert [t.get_text() for t in fig.legends[0].get_texts()][-2:] == ["model=m0", "model=m1"]
    assert all([c.get_label() for c in ax.containers] == ["model=m0", "model=m1"] for ax in panels)
