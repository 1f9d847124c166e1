"""Crossing quantiles (crossing=), the quantile CRPS, against numpy oracles and peer libraries."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from scipy.stats import norm

import conformal_frames as cf
from helpers import assert_close, to_pandas

LEVELS = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)
QCOLS = {tau: f"q{i}" for i, tau in enumerate(LEVELS)}
INTERVALS = {0.5: ("q2", "q4"), 0.8: ("q1", "q5"), 0.9: ("q0", "q6")}


def crossing_data(seed: int, n: int = 40) -> dict[str, list]:
    """Quantiles with noise: about half the rows cross; ties between levels on some rows."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    base = norm.ppf(LEVELS)[None, :] + rng.normal(scale=0.6, size=(n, len(LEVELS)))
    base[: n // 8, 2] = base[: n // 8, 3]  # ties
    data: dict[str, list] = {"g": [f"g{i % 3}" for i in range(n)], "y": y.tolist()}
    data |= {c: base[:, i].tolist() for i, c in enumerate(QCOLS.values())}
    return data


def _matrix(data: dict, rows: np.ndarray) -> np.ndarray:
    return np.column_stack([np.asarray(data[c])[rows] for c in QCOLS.values()])


def _pinball(y: np.ndarray, q: np.ndarray, taus: np.ndarray) -> np.ndarray:
    d = y[:, None] - q
    return np.where(d >= 0, taus * d, (taus - 1.0) * d)


def oracle(data: dict, rows: np.ndarray, sort: bool) -> dict[str, float]:
    y = np.asarray(data["y"])[rows]
    q = _matrix(data, rows)
    crossing = int((np.diff(q, axis=1) < 0).any(axis=1).sum())
    if sort:
        q = np.sort(q, axis=1)
    taus = np.asarray(LEVELS)
    loss = _pinball(y, q, taus)
    cuts = np.concatenate([[0.0], (taus[1:] + taus[:-1]) / 2, [1.0]])
    out = {
        "pinball_loss": loss.mean(),
        "wis": loss.sum(axis=1).mean() / (3 + 0.5),
        "quantile_crps": (2.0 * loss * np.diff(cuts)).sum(axis=1).mean(),
        "quantile_coverage": np.abs((y[:, None] <= q).mean(axis=0) - taus).mean(),
    }
    for name in ("pinball_loss", "wis", "quantile_crps", "quantile_coverage"):
        out[f"{name}_n_crossing"] = crossing
    # interval_coverage reads the intervals' quantiles only (no median), sorted among themselves
    inner = _matrix(data, rows)[:, [0, 1, 2, 4, 5, 6]]
    out["interval_coverage_n_crossing"] = int((np.diff(inner, axis=1) < 0).any(axis=1).sum())
    if sort:
        inner = np.sort(inner, axis=1)
    col = {c: i for i, c in enumerate(["q0", "q1", "q2", "q4", "q5", "q6"])}
    for level, (lo, hi) in INTERVALS.items():
        a, b = inner[:, col[lo]], inner[:, col[hi]]
        at = f"interval_coverage_level{round(level * 100)}"
        out[at] = ((a <= y) & (y <= b)).mean()
        out[f"{at}_width"] = (b - a).mean()
        miss = np.clip(a - y, 0.0, None) + np.clip(y - b, 0.0, None)
        out[f"{at}_winkler"] = ((b - a) + 2.0 / (1.0 - level) * miss).mean()
    return out


def _metrics(crossing: str) -> list[cf.Metric]:
    return [
        cf.pinball_loss("y", quantiles=QCOLS, crossing=crossing),
        cf.wis("y", quantiles=QCOLS, crossing=crossing),
        cf.quantile_crps("y", quantiles=QCOLS, crossing=crossing),
        cf.quantile_coverage("y", quantiles=QCOLS, per_level=False, crossing=crossing),
        cf.interval_coverage("y", intervals=INTERVALS, crossing=crossing),
    ]


def _has_swapped_interval(data: dict) -> bool:
    return any((np.asarray(data[lo]) > np.asarray(data[hi])).any() for lo, hi in INTERVALS.values())


@pytest.mark.spark_cases(crossing="sort")
@pytest.mark.parametrize("crossing", ["score", "sort"])
def test_crossing_scores_match_numpy(constructor, crossing: str) -> None:
    data = crossing_data(0, n=60)
    assert _has_swapped_interval(data)  # lo > hi: scored (as given or sorted), never an invalid row
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = to_pandas(cf.evaluate(constructor(data), *_metrics(crossing), by="g"))
    groups = sorted(set(data["g"]))
    assert out["g"].tolist() == groups
    for i, g in enumerate(groups):
        rows = np.flatnonzero(np.asarray(data["g"]) == g)
        for column, value in oracle(data, rows, crossing == "sort").items():
            assert_close(out[column].iloc[i], value, rtol=1e-12, atol=1e-15, what=f"{column} {g}")
    assert out["pinball_loss_n_crossing"].sum() > 0


@pytest.mark.spark_cases(crossing="sort")
@pytest.mark.parametrize("crossing", ["score", "sort"])
def test_crossing_scores_match_numpy_ungrouped(constructor, crossing: str) -> None:
    data = crossing_data(8, n=25)
    assert _has_swapped_interval(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = to_pandas(cf.evaluate(constructor(data), *_metrics(crossing)))
    for column, value in oracle(data, np.arange(25), crossing == "sort").items():
        assert_close(out[column].iloc[0], value, rtol=1e-12, atol=1e-15, what=column)
    assert out["n"].iloc[0] == 25


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_crossing_ungrouped_seeds_and_small_groups(eager_constructor, seed: int) -> None:
    data = crossing_data(seed, n=30 + 7 * seed)
    for sort in (False, True):
        mode = "sort" if sort else "score"
        with pytest.warns(UserWarning, match=r"crossing quantiles in \d+ rows?"):
            out = to_pandas(cf.evaluate(eager_constructor(data), *_metrics(mode)))
        for column, value in oracle(data, np.arange(len(data["y"])), sort).items():
            assert_close(out[column].iloc[0], value, rtol=1e-12, atol=1e-15, what=column)
    one = {k: v[:1] for k, v in data.items()}
    two = {k: v[:2] for k, v in data.items()}
    for small in (one, two):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            out = to_pandas(cf.evaluate(eager_constructor(small), *_metrics("sort")))
        for column, value in oracle(small, np.arange(len(small["y"])), True).items():
            assert_close(out[column].iloc[0], value, rtol=1e-12, atol=1e-15, what=column)


def test_sort_never_increases_the_pinball_loss() -> None:
    for seed in range(4):
        df = pl.DataFrame(crossing_data(seed, n=50))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            given = df.conformal.pinball_loss("y", quantiles=QCOLS)
            s = df.conformal.pinball_loss("y", quantiles=QCOLS, crossing="sort")
        assert s <= given + 1e-15


def test_warning_names_the_count_and_lazy_stays_silent() -> None:
    data = {"y": [1.0, 2.0, 3.0], "a": [0.0, 2.5, 0.0], "m": [1.0, 2.0, 3.0], "b": [2.0, 3.0, 4.0]}
    q = {0.1: "a", 0.5: "m", 0.9: "b"}
    df = pl.DataFrame(data)
    msg = r"^pinball_loss: crossing quantiles in 1 row, scored as given \(crossing='score'\)"
    with pytest.warns(UserWarning, match=msg):
        df.conformal.pinball_loss("y", quantiles=q)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = df.lazy().conformal.wis("y", quantiles=q)  # lazy: nothing computed, no warning
        assert out.collect()["wis_n_crossing"].to_list() == [1]
        # no crossing row: no warning
        df.filter(pl.col("a") <= pl.col("m")).conformal.pinball_loss("y", quantiles=q)
    with pytest.raises(cf.InvalidRowsError, match=r"quantile columns cross: 'a' \(level 0.1\) is greater than 'm'"):
        df.conformal.pinball_loss("y", quantiles=q, crossing="invalid")


def test_interval_crossing_rules() -> None:
    df = pl.DataFrame({"y": [1.0, 2.0], "lo8": [0.0, 1.0], "hi8": [2.0, 3.0], "lo9": [0.5, 0.0], "hi9": [2.5, 4.0]})
    iv = {0.8: ("lo8", "hi8"), 0.9: ("lo9", "hi9")}
    with pytest.warns(UserWarning, match="interval_coverage: crossing quantiles in 1 row"):
        t = df.conformal.interval_coverage("y", intervals=iv)
    assert t["n_crossing"].to_list() == [1.0, 1.0]
    with pytest.warns(UserWarning):
        s = df.conformal.interval_coverage("y", intervals=iv, crossing="sort")
    # sorted row 0: 0, 0.5, 2, 2.5 -> 80%: (0.5, 2), 90%: (0, 2.5)
    assert s["width"].to_list() == pytest.approx([(1.5 + 2.0) / 2, (2.5 + 4.0) / 2])
    with pytest.raises(cf.InvalidRowsError, match="intervals not nested"):
        df.conformal.interval_coverage("y", intervals=iv, crossing="invalid")
    bad = df.with_columns(pl.Series("hi8", [-1.0, 3.0]))
    # a single interval with lo > hi is two quantiles crossing: the same rule as any crossing
    with pytest.warns(UserWarning, match="interval_coverage: crossing quantiles in 1 row, scored as given"):
        given = bad.conformal.interval_coverage("y", intervals=iv)
    # row 0 as given: 80% = (0, -1): covers nothing, width -1, Winkler -1 + 10 * (0 + 2) = 19
    assert given["coverage"].to_list() == [0.5, 1.0]
    assert given["width"].to_list() == pytest.approx([(-1.0 + 2.0) / 2, (2.0 + 4.0) / 2])
    assert given["winkler"].to_list() == pytest.approx([(19.0 + 2.0) / 2, (2.0 + 4.0) / 2])
    with pytest.warns(UserWarning, match="rearranged in increasing order first"):
        s = bad.conformal.interval_coverage("y", intervals=iv, crossing="sort")
    # sorted row 0: -1, 0, 0.5, 2.5 -> 80%: (0, 0.5), 90%: (-1, 2.5)
    assert s["width"].to_list() == pytest.approx([(0.5 + 2.0) / 2, (3.5 + 4.0) / 2])
    assert s["n_crossing"].to_list() == [1, 1]
    with pytest.raises(cf.InvalidRowsError, match=r"column 'lo8' is greater than column 'hi8' in 1 row"):
        bad.conformal.interval_coverage("y", intervals=iv, crossing="invalid")
    # the single-interval metrics have no crossing=: lo > hi is an invalid row there
    with pytest.raises(cf.InvalidRowsError, match=r"column 'lo8' is greater than column 'hi8' in 1 row"):
        bad.conformal.coverage("y", "lo8", "hi8")
    # WIS of intervals through its quantile form: lo > hi is scored (and counted)
    with pytest.warns(UserWarning, match="wis: crossing quantiles in"):
        w = cf.evaluate(bad, cf.wis("y", intervals=iv, median="lo8"))
    assert w["wis_n_crossing"].to_list() == [1]


def test_crossing_parameter_checks() -> None:
    with pytest.raises(ValueError, match=r"^crossing must be one of 'score', 'sort', 'invalid'"):
        cf.pinball_loss("y", quantiles={0.5: "m"}, crossing="drop")
    with pytest.raises(TypeError, match=r"^crossing must be one of"):
        cf.wis("y", quantiles={0.5: "m"}, crossing=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"crossing='sort' needs all quantiles of a forecast on one row"):
        cf.pinball_loss("y", quantiles="q", quantile_level="tau", crossing="sort")


# ---------------------------------------------------------------------------
# peers on a real crossing model: gradient boosting per level on diabetes
# ---------------------------------------------------------------------------
def test_diabetes_gbm_quantiles_match_sklearn_and_scoringrules() -> None:
    datasets = pytest.importorskip("sklearn.datasets")
    ensemble = pytest.importorskip("sklearn.ensemble")
    metrics = pytest.importorskip("sklearn.metrics")
    sr = pytest.importorskip("scoringrules")
    x, y = datasets.load_diabetes(return_X_y=True)
    train, test = slice(0, 300), slice(300, None)
    preds = {}
    for i, tau in enumerate(LEVELS):
        model = ensemble.GradientBoostingRegressor(
            loss="quantile", alpha=tau, n_estimators=30, max_depth=2, random_state=0
        )
        preds[f"q{i}"] = model.fit(x[train], y[train]).predict(x[test])
    df = pl.DataFrame({"y": y[test], **preds})
    q = np.column_stack(list(preds.values()))
    n_cross = int((np.diff(q, axis=1) < 0).any(axis=1).sum())
    assert n_cross > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = cf.evaluate(df, cf.pinball_loss("y", quantiles=QCOLS), cf.wis("y", quantiles=QCOLS))
        s = cf.evaluate(
            df, cf.pinball_loss("y", quantiles=QCOLS, crossing="sort"), cf.wis("y", quantiles=QCOLS, crossing="sort")
        )
    expected = np.mean([metrics.mean_pinball_loss(y[test], preds[c], alpha=t) for t, c in QCOLS.items()])
    assert_close(out["pinball_loss"][0], expected, rtol=1e-12)
    assert out["pinball_loss_n_crossing"][0] == n_cross
    alphas = np.array([0.1, 0.2, 0.5])  # intervals (q0, q6), (q1, q5), (q2, q4)
    # scoringrules 0.10's numpy backend adds w_median * median (not |y - median|): take its
    # interval part (w_median=0) and add the median term of the definition
    part = sr.weighted_interval_score(
        y[test], preds["q3"], q[:, [0, 1, 2]], q[:, [6, 5, 4]], alphas, w_median=0.0, backend="numpy"
    )
    ref = part + 0.5 * np.abs(y[test] - preds["q3"]) / 3.5
    assert_close(out["wis"][0], float(np.mean(ref)), rtol=1e-12)
    assert out["wis_n_crossing"][0] == n_cross
    assert s["pinball_loss"][0] <= out["pinball_loss"][0]
    assert s["wis"][0] <= out["wis"][0]
    # interval_coverage's Winkler score of the crossing bounds as given is scoringrules' interval score
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        iv = cf.evaluate(df, cf.interval_coverage("y", intervals=INTERVALS))
    for level, (lo, hi) in INTERVALS.items():
        ref = sr.interval_score(y[test], preds[lo], preds[hi], 1.0 - level, backend="numpy")
        at = f"interval_coverage_level{round(level * 100)}"
        assert_close(iv[f"{at}_winkler"][0], float(np.mean(ref)), rtol=1e-12, what=at)
        covered = (preds[lo] <= y[test]) & (y[test] <= preds[hi])
        assert_close(iv[at][0], float(covered.mean()), rtol=1e-12, what=at)
    assert iv["interval_coverage_n_crossing"][0] > 0  # intervals not nested (no lo > hi on this model)
    # lo > hi: scoringrules scores the interval as given too (y = 1, (0, -1) at 80 %: -1 + 10 * 2)
    assert float(sr.interval_score(np.array([1.0]), np.array([0.0]), np.array([-1.0]), 0.2, backend="numpy")) == 19.0


# ---------------------------------------------------------------------------
# quantile CRPS
# ---------------------------------------------------------------------------
HUB9 = (0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.975)
HUB23 = (0.01, 0.025, *[round(0.05 * k, 2) for k in range(1, 20)], 0.975, 0.99)


@pytest.mark.parametrize(("levels", "tolerance"), [(HUB9, 0.05), (HUB23, 0.01)])
def test_quantile_crps_close_to_the_gaussian_crps(levels: tuple, tolerance: float) -> None:
    n = 20000
    y = norm.ppf((np.arange(n) + 0.5) / n)  # y ~ N(0, 1), a deterministic sample
    cols = {tau: f"q{i}" for i, tau in enumerate(levels)}
    df = pl.DataFrame(
        {"y": y, "mu": np.zeros(n), "sd": np.ones(n), **{c: np.full(n, norm.ppf(t)) for t, c in cols.items()}}
    )
    exact = df.conformal.crps("y", mean="mu", std="sd")
    approx = df.conformal.quantile_crps("y", quantiles=cols)
    assert abs(exact - 1 / np.sqrt(np.pi)) < 1e-4
    assert abs(approx / exact - 1.0) < tolerance
    assert approx < exact  # the tails beyond the end levels are missing


def test_crps_quantiles_points_to_quantile_crps() -> None:
    with pytest.raises(ValueError, match=r"use cf.quantile_crps\(y, quantiles=...\)"):
        cf.crps("y", quantiles={0.5: "m"})


def test_report_and_cli_crossing(tmp_path, capsys) -> None:
    import json

    from conformal_frames import cli

    data = crossing_data(7, n=40)
    df = pl.DataFrame(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        t = df.conformal.report(y="y", quantiles=QCOLS, by="g", crossing="sort").frame("forecast")
        direct = cf.evaluate(df, cf.pinball_loss("y", quantiles=QCOLS, crossing="sort"), by="g")
    assert "crps" not in t.columns  # the approximation is quantile_crps, never crps
    assert t["pinball_loss"].to_list() == pytest.approx(direct["pinball_loss"].to_list(), rel=1e-12)
    assert t["n_crossing"].to_list() == direct["pinball_loss_n_crossing"].to_list()  # one column in the report
    path = tmp_path / "fc.parquet"
    df.write_parquet(path)
    qspec = ",".join(f"{tau:g}={c}" for tau, c in QCOLS.items())
    args = ["report", str(path), "--y", "y", "--quantiles", qspec, "--by", "g", "--no-plots", "--format", "json"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert cli.main([*args, "--crossing", "sort"]) == 0
    got = json.loads(capsys.readouterr().out)["tables"]["forecast"]
    assert [r["pinball_loss"] for r in got] == pytest.approx(direct["pinball_loss"].to_list(), rel=1e-12)
    assert cli.main([*args, "--crossing", "invalid"]) != 0  # crossing rows: invalid (null groups, exit code)


@pytest.mark.spark_cases(crossing="sort")
@pytest.mark.parametrize("crossing", ["score", "sort"])
def test_scaled_quantile_errors_follow_crossing(constructor, crossing: str) -> None:
    data = crossing_data(4, n=45)
    data["s"] = [0.5 + (i % 4) for i in range(len(data["y"]))]
    metrics = [
        cf.scaled_pinball("y", quantiles=QCOLS, scale="s", crossing=crossing),
        cf.scaled_crps("y", quantiles=QCOLS, crossing=crossing),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = to_pandas(cf.evaluate(constructor(data), *metrics, by="g"))
    for i, g in enumerate(sorted(set(data["g"]))):
        rows = np.flatnonzero(np.asarray(data["g"]) == g)
        y, q, s = np.asarray(data["y"])[rows], _matrix(data, rows), np.asarray(data["s"])[rows]
        n_crossing = int((np.diff(q, axis=1) < 0).any(axis=1).sum())
        if crossing == "sort":
            q = np.sort(q, axis=1)
        loss = _pinball(y, q, np.asarray(LEVELS)).mean(axis=1)
        assert_close(out["scaled_pinball"].iloc[i], (loss / s).mean(), rtol=1e-12, what=f"scaled_pinball {g}")
        assert_close(out["scaled_crps"].iloc[i], 2 * loss.sum() / np.abs(y).sum(), rtol=1e-12, what=g)
        assert out["scaled_pinball_n_crossing"].iloc[i] == n_crossing
        assert out["scaled_crps_n_crossing"].iloc[i] == n_crossing


def test_scaled_pinball_invalid_crossing_and_long_sort() -> None:
    df = pl.DataFrame({"y": [1.0, 2.0], "a": [0.0, 2.5], "b": [2.0, 1.0], "s": [1.0, 1.0]})
    qs = {0.1: "a", 0.9: "b"}
    out = df.conformal.scaled_pinball("y", quantiles=qs, scale="s", crossing="invalid", invalid="drop")
    assert out == pytest.approx(0.1, rel=1e-12)  # the crossing row leaves the score: (0.1 * 1 + 0.9 * 1) / 2 / 1
    with pytest.raises(ValueError, match="crossing='sort'"):
        cf.scaled_pinball("y", quantiles="q", quantile_level="tau", scale="s", crossing="sort")


# ---------------------------------------------------------------------------
# regressions of the 0.3 review: crossing quantiles broke interval_coverage, the report and the CLI
# ---------------------------------------------------------------------------
@pytest.mark.spark_cases(crossing="sort")
@pytest.mark.parametrize("crossing", ["score", "sort"])
def test_review_interval_coverage_of_crossing_quantiles(constructor, crossing: str) -> None:
    data = {"y": [1.0, 2.0, 3.0], "q25": [0.5, 2.5, 2.0], "q50": [1.0, 2.0, 3.0], "q75": [1.5, 1.5, 4.0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = to_pandas(
            cf.evaluate(
                constructor(data), cf.interval_coverage("y", intervals={0.5: ("q25", "q75")}, crossing=crossing)
            )
        )
    lo, hi, y = np.array(data["q25"]), np.array(data["q75"]), np.array(data["y"])
    if crossing == "sort":
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    assert_close(out["interval_coverage_level50"].iloc[0], ((lo <= y) & (y <= hi)).mean(), rtol=1e-12)
    assert_close(out["interval_coverage_level50_width"].iloc[0], (hi - lo).mean(), rtol=1e-12)
    assert out["interval_coverage_n_crossing"].iloc[0] == 1
    assert out["n"].iloc[0] == 3


def _intervals_spec() -> str:
    return ",".join(f"{level:g}={lo}:{hi}" for level, (lo, hi) in INTERVALS.items())


@pytest.mark.parametrize("crossing", ["score", "sort"])
def test_review_report_and_cli_with_intervals_of_crossing_quantiles(tmp_path, capsys, crossing: str) -> None:
    import json

    from conformal_frames import cli

    data = crossing_data(7, n=40)
    assert _has_swapped_interval(data)
    df = pl.DataFrame(data)
    metrics = [
        cf.pinball_loss("y", quantiles=QCOLS, crossing=crossing),
        cf.wis("y", quantiles=QCOLS, crossing=crossing),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        report = df.conformal.report(y="y", quantiles=QCOLS, intervals=INTERVALS, by="g", crossing=crossing)
        direct = cf.evaluate(df, *metrics, by="g")
        levels = df.conformal.interval_coverage("y", intervals=INTERVALS, by="g", crossing=crossing)
    t, iv = report.frame("forecast"), report.frame("interval_coverage")
    for column in ("pinball_loss", "wis"):
        assert t[column].to_list() == pytest.approx(direct[column].to_list(), rel=1e-12), column
    for column in ("coverage", "width", "winkler", "n_crossing", "n"):
        assert iv[column].to_list() == pytest.approx(levels[column].to_list(), rel=1e-12), column
    assert int(t["n"].sum()) == 40  # no row left out, no group null
    assert iv["n_crossing"].sum() > 0
    path = tmp_path / "fc.parquet"
    df.write_parquet(path)
    qspec = ",".join(f"{tau:g}={c}" for tau, c in QCOLS.items())
    args = ["report", str(path), "--y", "y", "--quantiles", qspec, "--intervals", _intervals_spec()]
    args += ["--by", "g", "--no-plots", "--format", "json", "--crossing", crossing]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert cli.main(args) == 0
    got = json.loads(capsys.readouterr().out)["tables"]
    assert [r["wis"] for r in got["forecast"]] == pytest.approx(direct["wis"].to_list(), rel=1e-12)
    assert [r["winkler"] for r in got["interval_coverage"]] == pytest.approx(levels["winkler"].to_list(), rel=1e-12)


@pytest.mark.spark_cases(crossing="sort")
@pytest.mark.parametrize("crossing", ["score", "sort"])
def test_crossing_intervals_summaries_counts_and_weights(constructor, crossing: str) -> None:
    """lo > hi under score/sort through summarize/finalize, counts= (repeated rows) and weights=, vs numpy."""
    data = crossing_data(11, n=36)
    assert _has_swapped_interval(data)
    k = [1 + (i % 3) for i in range(len(data["y"]))]
    data["k"] = k
    data["w"] = [0.5 + (i % 4) for i in range(len(data["y"]))]
    metric = cf.interval_coverage("y", intervals=INTERVALS, crossing=crossing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        direct = to_pandas(cf.evaluate(constructor(data), metric, by="g"))
        merged = to_pandas(cf.finalize(cf.summarize(constructor(data), metric, by="g"), metric, by="g"))
        counted = to_pandas(
            cf.evaluate(
                constructor(data), cf.interval_coverage("y", intervals=INTERVALS, crossing=crossing, counts="k"), by="g"
            )
        )
        weighted = to_pandas(
            cf.evaluate(
                constructor(data),
                cf.interval_coverage("y", intervals=INTERVALS, crossing=crossing, weights="w"),
                by="g",
            )
        )
    columns = [c for c in direct.columns if c.startswith("interval_coverage_level")]
    for c in [*columns, "interval_coverage_n_crossing", "n"]:
        assert merged[c].tolist() == pytest.approx(direct[c].tolist(), rel=1e-12), c
    for i, g in enumerate(sorted(set(data["g"]))):
        rows = np.flatnonzero(np.asarray(data["g"]) == g)
        expanded = np.repeat(rows, np.asarray(k)[rows])
        for column, value in oracle(data, expanded, crossing == "sort").items():
            if column.startswith("interval_coverage"):
                assert_close(counted[column].iloc[i], value, rtol=1e-12, atol=1e-15, what=f"counts {column} {g}")
        # weights: the weighted means of the per-row values
        y, w = np.asarray(data["y"])[rows], np.asarray(data["w"])[rows]
        inner = _matrix(data, rows)[:, [0, 1, 2, 4, 5, 6]]
        if crossing == "sort":
            inner = np.sort(inner, axis=1)
        for level, a, b in [(0.5, 2, 3), (0.8, 1, 4), (0.9, 0, 5)]:
            lo, hi = inner[:, a], inner[:, b]
            at = f"interval_coverage_level{round(level * 100)}"
            hit = ((lo <= y) & (y <= hi)).astype(float)
            wink = (hi - lo) + 2.0 / (1.0 - level) * (np.clip(lo - y, 0, None) + np.clip(y - hi, 0, None))
            assert_close(weighted[at].iloc[i], np.average(hit, weights=w), rtol=1e-12, atol=1e-15, what=f"w {at}")
            assert_close(weighted[f"{at}_width"].iloc[i], np.average(hi - lo, weights=w), rtol=1e-12, what=at)
            assert_close(weighted[f"{at}_winkler"].iloc[i], np.average(wink, weights=w), rtol=1e-12, what=at)


@pytest.mark.parametrize("invalid", ["drop", "null"])
def test_report_invalid_crossing_rows_leave_only_the_forecast_family(eager_constructor, invalid: str) -> None:
    """crossing="invalid": the crossing rows are bad inputs of the forecast family only (review finding 1)."""
    data = crossing_data(5, n=48)
    q = _matrix(data, np.arange(48))
    data["lo"] = (np.asarray(data["y"]) - 1.0).tolist()
    data["hi"] = (np.asarray(data["y"]) + np.where(np.arange(48) % 5 == 0, -2.0, 1.0)).tolist()  # some misses
    data["hi"] = np.maximum(np.asarray(data["hi"]), np.asarray(data["lo"])).tolist()  # lo <= hi: a clean family
    crossing_rows = (np.diff(q, axis=1) < 0).any(axis=1)
    g = np.asarray(data["g"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        rep = cf.report(
            eager_constructor(data),
            y="y",
            lo="lo",
            hi="hi",
            quantiles=QCOLS,
            by="g",
            crossing="invalid",
            invalid=invalid,
        )
        alone = to_pandas(
            cf.evaluate(
                eager_constructor(data), cf.wis("y", quantiles=QCOLS, crossing="invalid"), by="g", invalid=invalid
            )
        )
    intervals, forecast = to_pandas(rep.frame("intervals")), to_pandas(rep.frame("forecast"))
    groups = sorted(set(data["g"]))
    assert intervals["n"].tolist() == [int((g == x).sum()) for x in groups]  # every row: lo, hi and y are good
    assert intervals["coverage"].notna().all()
    bad = [int(crossing_rows[g == x].sum()) for x in groups]
    assert sum(bad) > 0
    if invalid == "drop":
        assert intervals["n_dropped"].tolist() == [0] * len(groups)
        assert forecast["n_dropped"].tolist() == bad
        assert forecast["n"].tolist() == [int((g == x).sum()) - b for x, b in zip(groups, bad)]
        assert forecast["wis"].tolist() == pytest.approx(alone["wis"].tolist(), rel=1e-12)
        assert rep.summary["dropped_rows"] == sum(bad)
    else:
        assert intervals["n_invalid"].tolist() == [0] * len(groups)
        assert forecast["n_invalid"].tolist() == bad
        assert forecast["wis"].isna().tolist() == [b > 0 for b in bad]
        assert rep.summary["invalid_rows"] == sum(bad)


def test_cli_invalid_crossing_rows_with_drop(tmp_path, capsys) -> None:
    import json

    from conformal_frames import cli

    data = crossing_data(5, n=48)
    data["lo"] = (np.asarray(data["y"]) - 1.0).tolist()
    data["hi"] = (np.asarray(data["y"]) + 1.0).tolist()
    path = tmp_path / "fc.parquet"
    pl.DataFrame(data).write_parquet(path)
    qspec = ",".join(f"{tau:g}={c}" for tau, c in QCOLS.items())
    args = ["report", str(path), "--y", "y", "--lo", "lo", "--hi", "hi", "--quantiles", qspec, "--by", "g"]
    args += ["--no-plots", "--format", "json", "--crossing", "invalid", "--invalid", "drop"]
    assert cli.main(args) == 0
    captured = capsys.readouterr()
    tables = json.loads(captured.out)["tables"]
    assert [r["n"] for r in tables["intervals"]] == [16, 16, 16]
    assert [r["n_dropped"] for r in tables["intervals"]] == [0, 0, 0]
    assert sum(r["n_dropped"] for r in tables["forecast"]) > 0
    assert "with invalid values dropped (quantile columns cross" in captured.err
