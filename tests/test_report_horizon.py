"""The report as a forecast comparison: ``horizon=`` (``--horizon``), by-horizon tables and charts.

A small backtest (three models, five horizons, two series, four origins, five
quantile levels) on every backend but Spark (the report's tables come from one
collected query, the same code on every engine; Spark's engine paths are
covered by tests/test_forecast_report.py), checked against a pandas groupby.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy.stats import norm

import conformal_frames as cf
from conformal_frames import cli
from helpers import to_pandas

LEVELS = (0.05, 0.25, 0.5, 0.75, 0.95)
QUANTILES = {lv: f"q{round(lv * 100):02d}" for lv in LEVELS}
INTERVALS = {0.5: ("q25", "q75"), 0.9: ("q05", "q95")}
MODELS = ("ets", "gbr", "naive")
HORIZONS = (1, 2, 3, 4, 5)
KEYS = ["model", "h"]


def backtest(seed: int = 0, models: tuple[str, ...] = MODELS, horizons: tuple[int, ...] = HORIZONS) -> dict:
    """Rows of (model, series, origin, h): y, a point forecast and Gaussian quantiles that never cross."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, model in enumerate(models):
        for series in ("a", "b"):
            for _origin in range(4):
                for h in horizons:
                    mu, sd = rng.normal(scale=0.3), 0.5 + 0.1 * h + 0.2 * i
                    row = {"model": model, "series": series, "h": h, "y": float(rng.normal()), "point": mu}
                    rows.append(row | {c: mu + sd * norm.ppf(lv) for lv, c in QUANTILES.items()})
    return {k: [r[k] for r in rows] for k in rows[0]}


def oracle(data: dict) -> pd.DataFrame:
    """Per (model, h): n, MAE, mean pinball loss, coverage of [q05, q95], and P(y <= q) per level."""
    df = pd.DataFrame(data)
    out = df[KEYS].copy()
    out["ae"] = (df["y"] - df["point"]).abs()
    pin = []
    for lv, c in QUANTILES.items():
        d = df["y"] - df[c]
        pin.append(np.maximum(lv * d, (lv - 1) * d))
        out[f"below_{lv:g}"] = (df["y"] <= df[c]).astype(float)
    out["pinball"] = np.mean(pin, axis=0)
    out["covered"] = ((df["q05"] <= df["y"]) & (df["y"] <= df["q95"])).astype(float)
    g = out.groupby(KEYS, sort=True)
    return g.mean().assign(n=g.size()).reset_index()


def _report(frame, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no crossing, no numpy warning
        return cf.report(
            frame,
            y="y",
            lo="q05",
            hi="q95",
            confidence_level=0.9,
            quantiles=QUANTILES,
            intervals=INTERVALS,
            point="point",
            **({"by": "model", "horizon": "h"} | options),
        )


def _sorted(frame, keys=KEYS) -> pd.DataFrame:
    return to_pandas(frame).sort_values(keys, kind="stable").reset_index(drop=True)


def test_tables_by_model_and_horizon_equal_a_pandas_groupby(constructor) -> None:
    if constructor.id == "pyspark":
        pytest.skip("a Spark report costs ~1 min here; its engine paths: tests/test_forecast_report.py")
    data = backtest()
    rep = _report(constructor(data))
    want = oracle(data)
    assert rep.keys == KEYS and rep.by == ["model"] and rep.horizon == "h"
    assert rep.columns["horizon"] == "h"
    forecast, intervals = _sorted(rep.frame("forecast")), _sorted(rep.frame("intervals"))
    assert len(forecast) == len(intervals) == len(MODELS) * len(HORIZONS) == rep.summary["groups"]
    assert forecast[KEYS].astype(str).values.tolist() == want[KEYS].astype(str).values.tolist()
    np.testing.assert_allclose(forecast["mae"], want["ae"], rtol=1e-12)
    np.testing.assert_allclose(forecast["pinball_loss"], want["pinball"], rtol=1e-12)
    np.testing.assert_allclose(intervals["coverage"], want["covered"], rtol=1e-12)
    assert forecast["n"].tolist() == want["n"].tolist() == [8] * len(want)
    levels = _sorted(rep.frame("quantile_coverage"), [*KEYS, "quantile_level"])
    assert len(levels) == len(want) * len(LEVELS)
    expected = want[[f"below_{lv:g}" for lv in LEVELS]].to_numpy().ravel()
    np.testing.assert_allclose(levels["coverage"], expected, rtol=1e-12)


def test_horizon_alone_is_one_model() -> None:
    data = backtest(models=("ets",))
    rep = _report(pl.DataFrame(data), by=None)
    assert rep.keys == ["h"] and len(rep.frame("forecast")) == len(HORIZONS)
    figs = rep.figures()
    ax = figs["score_by_horizon"].axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["all rows"]


@pytest.mark.parametrize("lazy", [False, True], ids=["polars", "polars[lazy]"])
def test_charts_draw_the_tables_one_line_per_model_in_key_order(lazy: bool) -> None:
    data = backtest(models=("naive", "ets", "gbr"))  # not in key order in the frame
    frame = pl.DataFrame(data)
    rep = _report(frame.lazy() if lazy else frame)
    figs = rep.figures()
    assert {"score_by_horizon", "coverage_by_horizon"} <= set(figs)
    want = oracle(data)
    scores = figs["score_by_horizon"].axes
    assert [ax.get_title() for ax in scores if ax.get_visible()] == ["wis", "quantile_crps", "mae", "winkler", "width"]
    mae = scores[2]
    lines = [line for line in mae.get_lines() if line.get_label() in MODELS]
    assert [line.get_label() for line in lines] == sorted(MODELS)
    for line in lines:
        rows = want[want["model"] == line.get_label()]
        np.testing.assert_array_equal(line.get_xdata(), HORIZONS)
        np.testing.assert_allclose(line.get_ydata(), rows["ae"], rtol=1e-12)
    coverage = [ax for ax in figs["coverage_by_horizon"].axes if ax.get_visible()]
    titles = [ax.get_title() for ax in coverage]
    assert titles == ["intervals at 0.9", "central interval 0.5", "central interval 0.9"] + [
        f"y <= quantile {lv:g}" for lv in LEVELS
    ]
    first = next(line for line in coverage[0].get_lines() if line.get_label() == "ets")
    np.testing.assert_allclose(first.get_ydata(), want[want["model"] == "ets"]["covered"], rtol=1e-12)
    target = next(line for line in coverage[0].get_lines() if line.get_label() == "target")
    assert set(target.get_ydata()) == {0.9}
    legend = figs["coverage_by_horizon"].legends[0]  # one legend, outside the panels
    assert [t.get_text() for t in legend.get_texts()] == ["target", *sorted(MODELS)]
    assert legend.get_title().get_text() == "model"


def test_the_page_holds_the_charts() -> None:
    rep = _report(pl.DataFrame(backtest()))
    page = rep.to_html()
    for name in ("score_by_horizon", "coverage_by_horizon"):
        assert f'id="figure-{name}"' in page and f'href="#figure-{name}"' in page
    assert "Scores by horizon" in page and "Coverage by horizon" in page


def test_horizon_is_checked() -> None:
    frame = pl.DataFrame(backtest())
    with pytest.raises(ValueError, match=r"horizon column 'h' is also in by=; give it only as horizon="):
        _report(frame, by=["model", "h"])
    with pytest.raises(ValueError, match=r"column 'lead' \(horizon=\) not found"):
        _report(frame, horizon="lead")
    with pytest.raises(TypeError, match=r"horizon= names one column"):
        _report(frame, horizon=["h"])
    with pytest.raises(ValueError, match="also the confidence_level column"):
        cf.report(frame.with_columns(lv=pl.lit(0.9)), y="y", lo="q05", hi="q95", confidence_level="lv", horizon="lv")
    assert frame.columns == list(backtest())  # the caller's frame is untouched


def test_cli_horizon(tmp_path, capsys) -> None:
    path = tmp_path / "backtest.parquet"
    pl.DataFrame(backtest()).write_parquet(path)
    q = ",".join(f"{lv:g}={c}" for lv, c in QUANTILES.items())
    args = ["report", str(path), "--y", "y", "--quantiles", q, "--point", "point", "--by", "model", "-q"]
    out = tmp_path / "out"
    assert cli.main([*args, "--horizon", "h", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "15 groups by model, h" in text and "horizon='h'" in text
    assert {"score_by_horizon.png", "coverage_by_horizon.png"} <= {p.name for p in out.iterdir()}
    assert cli.main([*args, "--by", "h", "--horizon", "h"]) == 2
    assert "horizon column 'h' is also in --by; give it only as --horizon" in capsys.readouterr().err
    assert cli.main([*args, "--horizon", "lead"]) == 2
    assert "column 'lead' (--horizon) not found" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# tables that fit a page: one n_crossing, wide tables split, per-level tables summarized
# ---------------------------------------------------------------------------
def _crossing(data: dict) -> dict:
    """Every third row of the model 'gbr' with q25 and q75 swapped (its quantiles cross)."""
    out = {k: list(v) for k, v in data.items()}
    for i, model in enumerate(out["model"]):
        if model == "gbr" and i % 3 == 0:
            out["q25"][i], out["q75"][i] = out["q75"][i], out["q25"][i]
    return out


def test_one_n_crossing_counts_the_crossing_rows(constructor) -> None:
    if constructor.id == "pyspark":
        pytest.skip("a Spark report costs ~1 min here; its engine paths: tests/test_forecast_report.py")
    data = _crossing(backtest())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the crossing warning
        rep = cf.report(constructor(data), y="y", quantiles=QUANTILES, by="model", horizon="h", crossing="sort")
    t = _sorted(rep.frame("forecast"))
    assert [c for c in t.columns if "crossing" in c] == ["n_crossing"]
    assert list(t.columns[-2:]) == ["n_crossing", "n"] or "n_invalid" in t.columns
    q = pd.DataFrame(data)[list(QUANTILES.values())].to_numpy()
    crossed = pd.DataFrame(data)[KEYS].assign(c=(np.diff(q, axis=1) < 0).any(axis=1))
    want = crossed.groupby(KEYS, sort=True)["c"].sum().reset_index()
    assert t["n_crossing"].tolist() == want["c"].tolist() and sum(want["c"]) > 0


def _table_lines(text: str, title: str) -> list[str]:
    """The lines of the text table under ``title`` (up to the next blank line after its last block)."""
    block = text.split(title, 1)[1].split("\n\n")
    lines = block[0].splitlines()[1:]
    for part in block[1:]:
        if not part.startswith("(columns, part"):
            break
        lines += part.splitlines()
    return lines


def test_printed_text_keeps_every_column_within_the_width() -> None:
    from conformal_frames.reporting.render import TEXT_WIDTH

    rep = _report(pl.DataFrame(backtest()))
    columns = rep.tables["forecast"].columns
    assert len(columns) >= 17
    text = str(rep)
    lines = _table_lines(text, "Forecast scores per group")
    headers = [line.split() for line in lines if line.startswith("model ")]
    assert len(headers) >= 2  # split into blocks, the keys first in each
    assert all(h[:2] == KEYS for h in headers)
    assert [c for h in headers for c in h[2:]] == columns[2:]  # every column, once, in order
    assert max(len(line) for line in lines) <= TEXT_WIDTH
    rows = [line for line in lines if line.startswith("gbr    3 ")]
    assert len(rows) == len(headers)  # each block holds every row


def test_printed_page_keeps_every_column() -> None:
    from html.parser import HTMLParser

    class Tables(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.section, self.tables, self.cell = "", {}, None

        def handle_starttag(self, tag, attrs) -> None:
            a = dict(attrs)
            if tag == "section" and (a.get("id") or "").startswith("table-"):
                self.section = a["id"][6:]
            elif tag == "table":
                self.tables.setdefault(self.section, []).append([])
            elif tag == "th":
                self.cell = ""

        def handle_data(self, data) -> None:
            if self.cell is not None:
                self.cell += data

        def handle_endtag(self, tag) -> None:
            if tag == "th":
                self.tables[self.section][-1].append(self.cell)
                self.cell = None

    rep = _report(pl.DataFrame(backtest()))
    parser = Tables()
    parser.feed(rep.to_html(plots=False))
    forecast = parser.tables["forecast"]
    assert len(forecast) >= 2 and all(h[:2] == KEYS for h in forecast)
    assert [c for h in forecast for c in h[2:]] == rep.tables["forecast"].columns[2:]
    assert all(len(h) <= 10 for h in forecast)  # a block fits a printed page


def test_per_level_tables_summarized_full_in_csv_and_json() -> None:
    import json

    rep = _report(pl.DataFrame(backtest()))
    groups = len(MODELS) * len(HORIZONS)
    full = to_pandas(rep.frame("quantile_coverage"))
    assert len(full) == groups * len(LEVELS)  # the table itself is whole
    text = str(rep)
    lines = _table_lines(text, "Quantile coverage: fraction of y <= quantile")
    assert lines[0].split() == [*KEYS, *[f"coverage@{lv:g}" for lv in LEVELS], "n"]
    assert len(lines) == 2 + groups  # one row per group, not per group and level
    row = lines[2 + 3].split()  # ets, h=4
    want = full[(full["model"] == "ets") & (full["h"] == 4)].sort_values("quantile_level")["coverage"]
    np.testing.assert_allclose([float(v) for v in row[2:-1]], want, atol=5e-5)
    lines = _table_lines(text, "Interval coverage and mean width")
    assert lines[0].split() == [*KEYS, "coverage@0.5", "coverage@0.9", "width@0.5", "width@0.9", "n"]
    tables = json.loads(rep.to_json())["tables"]
    assert len(tables["quantile_coverage"]) == groups * len(LEVELS)
    csv = pd.read_csv(__import__("io").StringIO(rep.to_csv()))
    per_level = csv[csv["family"] == "quantile_coverage"]
    assert set(per_level["metric"]) >= {f"coverage@{lv:g}" for lv in LEVELS} | {"coverage_ci_low@0.05"}
    got = per_level[per_level["metric"] == "coverage@0.25"].sort_values(KEYS)["value"].to_numpy()
    np.testing.assert_allclose(got, oracle(backtest())["below_0.25"], rtol=1e-12)
    assert "quantile_coverage" not in set(to_pandas(rep.metrics())["family"])  # metrics(): per group only


# ---------------------------------------------------------------------------
# small multiples: up to 10 coloured groups, legends sorted and off the data
# ---------------------------------------------------------------------------
def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _laid_out(fig) -> None:
    """The figure drawn (constrained layout run), as savefig draws it."""
    import io

    fig.savefig(io.BytesIO(), format="png")


@pytest.mark.parametrize("n_horizons", [8, 12])
def test_small_multiples_colour_ten_groups_in_key_order(n_horizons: int) -> None:
    horizons = tuple(range(1, n_horizons + 1))
    data = backtest(models=("naive", "ets"), horizons=horizons)
    rep = cf.report(pl.DataFrame(data), y="y", quantiles=QUANTILES, by="model", horizon="h")
    figs = rep.figures()
    for name in ("quantile_calibration", "pit_histogram"):
        fig = figs[name]
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title() for ax in panels] == ["model=ets", "model=naive"]
        # the same lines in every panel: one legend; else (the ten worst differ by panel) one beside each panel
        legends = fig.legends or [ax.get_legend() for ax in panels]
        assert len(legends) == (1 if n_horizons <= 10 else 2) or len(fig.legends) == 1
        for legend in legends:
            labels = [t.get_text() for t in legend.get_texts()]
            drawn = [label for label in labels if label.startswith("h=")]
            assert drawn == sorted(drawn, key=lambda t: int(t[2:]))  # key order, not worst first
            if n_horizons <= 10:
                assert drawn == [f"h={h}" for h in horizons] and not any("other" in t for t in labels)
            else:  # the ten furthest from calibration coloured, the rest grey
                assert len(drawn) == 10 and f"other groups ({n_horizons - 10})" in labels
        colours = [line.get_color() for line in panels[0].get_lines() if line.get_label().startswith("h=")]
        assert len(set(colours)) == min(n_horizons, 10)  # one colour each
        _laid_out(fig)
        for legend in legends:
            box = legend.get_window_extent()
            assert not any(_overlaps(box, ax.get_window_extent()) for ax in panels)  # off the data


def test_panels_with_different_lines_share_colours_and_one_legend() -> None:
    data = pd.DataFrame(backtest(models=("ets", "gbr")))
    data = data[(data["model"] == "ets") | (data["h"] <= 3)]  # gbr: three horizons, ets: five
    rep = cf.report(pl.from_pandas(data), y="y", quantiles=QUANTILES, by="model", horizon="h")
    fig = rep.figures()["quantile_calibration"]
    _laid_out(fig)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_legend() for ax in panels] == [None, None] and len(fig.legends) == 1
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert [x for x in labels if x.startswith("h=")] == [f"h={h}" for h in HORIZONS]  # the union, in key order
    colours = [
        {ln.get_label(): ln.get_color() for ln in ax.get_lines() if ln.get_label().startswith("h=")} for ax in panels
    ]
    assert all(colours[0][g] == c for g, c in colours[1].items())  # a group keeps its colour across panels
    assert len(colours[1]) == 3
    box = fig.legends[0].get_window_extent()
    assert not any(_overlaps(box, ax.get_window_extent()) for ax in panels)
