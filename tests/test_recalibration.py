"""Smooth ECE, CORP reliability and score decomposition against their references.

References: ``relplot.smECE`` (the smooth ECE authors' package, 1e-4),
scikit-learn's ``IsotonicRegression`` (the PAV recalibration, 1e-9) and
``model_diagnostics.scoring.decompose`` (1e-9), plus numpy oracles written
from the definitions.  The metrics need a per-group numpy step: they run on
eager frames and polars LazyFrames; lazy DuckDB / PySpark frames raise (one
cheap test each, no Spark query runs).  The seed/tie/size loops run on the
eager and polars-lazy backends only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import conformal_frames as cf
from conformal_frames.metrics.recalibration import smooth_ece_numpy
from helpers import assert_close, group_dict, to_pandas

relplot = pytest.importorskip("relplot")
isotonic = pytest.importorskip("sklearn.isotonic")
scoring = pytest.importorskip("model_diagnostics.scoring")

SEEDS = [0, 1, 2]
RUNS = {"pandas", "pandas[pyarrow]", "polars", "polars[lazy]"}


def runs_here(constructor) -> None:
    """Skip the lazy SQL backends: they raise (covered by test_lazy_sql_backends_raise)."""
    if constructor.id not in RUNS:
        pytest.skip(f"lazy {constructor.id} raises: covered by test_lazy_sql_backends_raise[{constructor.id}]")


def random_binary(seed: int, n: int = 300, n_groups: int = 3) -> dict[str, np.ndarray]:
    """Labels drawn from a miscalibrated score; scores rounded (ties), exact 0 and 1,
    groups of skewed sizes plus ``one`` (1 row) and ``two`` (2 rows)."""
    rng = np.random.default_rng(seed)
    s = np.round(rng.beta(0.9, 0.9, size=n), 2)
    s[rng.random(n) < 0.03] = 0.0
    s[rng.random(n) < 0.03] = 1.0
    y = (rng.random(n) < np.clip(s**1.6 * 0.9 + 0.05, 0, 1)).astype(float)
    p = rng.dirichlet(np.ones(n_groups))
    g = np.concatenate([rng.choice([f"g{i}" for i in range(n_groups)], size=n - 3, p=p), ["one", "two", "two"]])
    return {"y": y, "s": s, "g": g}


def breast_cancer_scores() -> dict[str, np.ndarray]:
    """Real model outputs: a logistic regression on scikit-learn's breast cancer data."""
    datasets = pytest.importorskip("sklearn.datasets")
    linear = pytest.importorskip("sklearn.linear_model")
    x, y = datasets.load_breast_cancer(return_X_y=True)
    x = (x - x[:300].mean(axis=0)) / x[:300].std(axis=0)
    model = linear.LogisticRegression(C=0.05, max_iter=2000).fit(x[:300], y[:300])
    s = model.predict_proba(x[300:])[:, 1]
    g = np.where(np.arange(len(s)) % 3 == 0, "a", "b")
    return {"y": y[300:].astype(float), "s": s, "g": g}


def isotonic_fit(s: np.ndarray, y: np.ndarray) -> np.ndarray:
    return isotonic.IsotonicRegression().fit(s, y).predict(s)


def decomposition_oracle(s: np.ndarray, y: np.ndarray, rule: str) -> dict[str, float]:
    """From the definitions, with scikit-learn's isotonic fit."""

    def mean_score(p: np.ndarray) -> float:
        if rule == "brier":
            return float(np.mean((p - y) ** 2))
        with np.errstate(divide="ignore"):
            return float(np.mean(np.where(y == 1, -np.log(p), -np.log(1 - p))))

    r = isotonic_fit(s, y)
    unc = mean_score(np.full_like(s, y.mean()))
    return {
        "score": mean_score(s),
        "miscalibration": mean_score(s) - mean_score(r),
        "discrimination": unc - mean_score(r),
        "uncertainty": unc,
    }


def reference_decomposition(s: np.ndarray, y: np.ndarray, rule: str) -> dict[str, float]:
    fn = scoring.SquaredError() if rule == "brier" else scoring.LogLoss()
    row = scoring.decompose(y, s, scoring_function=fn).row(0, named=True)
    return {k: float(row[k]) for k in ("score", "miscalibration", "discrimination", "uncertainty")}


# ---------------------------------------------------------------------------
# smooth ECE
# ---------------------------------------------------------------------------
def test_smooth_ece_matches_relplot_on_a_real_model(constructor):
    runs_here(constructor)
    d = breast_cancer_scores()
    out = to_pandas(cf.evaluate(constructor(d), cf.smooth_ece("y", "s"), by="g"))
    expected = [relplot.smECE(d["s"][i], d["y"][i]) for i in group_dict(d["g"]).values()]
    assert_close(out["smooth_ece"], expected, rtol=0, atol=1e-4)
    assert list(out["n"]) == [len(i) for i in group_dict(d["g"]).values()]


@pytest.mark.parametrize("seed", SEEDS)
def test_smooth_ece_matches_relplot_with_ties_and_tiny_groups(constructor, seed):
    runs_here(constructor)
    d = random_binary(seed)
    out = to_pandas(cf.conformal(constructor(d)).smooth_ece("y", "s", by="g"))
    groups = group_dict(d["g"])
    assert list(out["g"]) == list(groups)
    expected = [relplot.smECE(d["s"][i], d["y"][i]) for i in groups.values()]
    assert_close(out["smooth_ece"], expected, rtol=0, atol=1e-4)


def test_smooth_ece_ungrouped_float_and_bandwidth_fixed_point():
    d = random_binary(5, n=2000)
    value = cf.conformal(pd.DataFrame(d)).smooth_ece("y", "s")
    assert isinstance(value, float)
    expected, width = relplot.smECE(d["s"], d["y"], return_width=True)
    assert abs(value - expected) <= 1e-4
    ours, sigma = smooth_ece_numpy(d["s"], d["y"])
    assert ours == value
    assert abs(sigma - width) <= 1e-12  # the same bisection step
    assert abs(ours - sigma) <= 2.0**-10 + 1e-3  # the fixed point sigma* = smECE_sigma*, to the bisection step


def test_smooth_ece_of_calibrated_scores_is_small_and_of_a_constant_is_its_error():
    rng = np.random.default_rng(3)
    s = rng.random(20_000)
    y = (rng.random(20_000) < s).astype(float)
    assert cf.conformal(pd.DataFrame({"y": y, "s": s})).smooth_ece("y", "s") < 0.02
    # a constant score 0.8 with base rate 0.3: every residual is 0.5
    const = pd.DataFrame({"y": [1.0] * 3 + [0.0] * 7, "s": [0.8] * 10})
    assert (
        abs(const.conformal.smooth_ece("y", "s") - relplot.smECE(const["s"].to_numpy(), const["y"].to_numpy())) < 1e-4
    )


# ---------------------------------------------------------------------------
# score decomposition
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("rule", ["brier", "log"])
def test_score_decomposition_matches_model_diagnostics_on_a_real_model(constructor, rule):
    runs_here(constructor)
    d = breast_cancer_scores()
    out = to_pandas(cf.conformal(constructor(d)).score_decomposition("y", "s", scoring_rule=rule, by="g"))
    policy = ["n_invalid"] if constructor.lazy else []  # the lazy default invalid="null" counts invalid rows
    assert list(out.columns) == ["g", "score", "miscalibration", "discrimination", "uncertainty", "n", *policy]
    for row, idx in zip(out.itertuples(), group_dict(d["g"]).values()):
        ref = reference_decomposition(d["s"][idx], d["y"][idx], rule)
        mine = {k: getattr(row, k) for k in ref}
        assert_close(list(mine.values()), list(ref.values()), rtol=0, atol=1e-9, what=rule)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rule", ["brier", "log"])
def test_score_decomposition_matches_oracle_with_ties_and_tiny_groups(constructor, seed, rule):
    runs_here(constructor)
    d = random_binary(seed)
    if rule == "log":  # finite log scores: no certain score meets the opposite label
        d["s"] = np.clip(d["s"], 0.01, 0.99)
    out = to_pandas(cf.evaluate(constructor(d), cf.score_decomposition("y", "s", scoring_rule=rule), by="g"))
    for row, idx in zip(out.to_dict("records"), group_dict(d["g"]).values()):
        oracle = decomposition_oracle(d["s"][idx], d["y"][idx], rule)
        mine = [row["score_decomposition"], *[row[f"score_decomposition_{k}"] for k in list(oracle)[1:]]]
        assert_close(mine, list(oracle.values()), rtol=0, atol=1e-9, what=f"oracle {rule}")
        if len(idx) > 1:  # model-diagnostics cannot decompose a single row (its isotonic fit squeezes to 0-d)
            ref = reference_decomposition(d["s"][idx], d["y"][idx], rule)
            assert_close(mine, list(ref.values()), rtol=0, atol=1e-9, what=f"model-diagnostics {rule}")
        score, mcb, dsc, unc = mine
        assert abs(score - (mcb - dsc + unc)) <= 1e-12
        assert mcb >= -1e-12 and dsc >= -1e-12  # PAV is the best isotonic fit


def test_score_decomposition_brier_closed_forms():
    # uncertainty = ybar (1 - ybar); perfectly ordered scores: PAV recalibrates to y, discrimination = uncertainty
    df = pd.DataFrame({"y": [0.0, 0.0, 1.0, 1.0, 1.0], "s": [0.1, 0.2, 0.3, 0.5, 0.9]})
    out = df.conformal.score_decomposition("y", "s")
    assert_close(out["uncertainty"], [0.6 * 0.4])
    assert_close(out["discrimination"], [0.6 * 0.4])
    assert_close(out["score"], [np.mean((df["s"] - df["y"]) ** 2)])
    assert_close(out["miscalibration"], [np.mean((df["s"] - df["y"]) ** 2)])


# ---------------------------------------------------------------------------
# CORP reliability
# ---------------------------------------------------------------------------
def test_corp_reliability_matches_isotonic_regression_on_a_real_model(constructor):
    runs_here(constructor)
    d = breast_cancer_scores()
    out = to_pandas(cf.corp_reliability(constructor(d), "y", "s", by="g", n_resamples=50))
    assert list(out.columns) == ["g", "score", "n", "recalibrated", "band_low", "band_high"]
    for key, idx in group_dict(d["g"]).items():
        part = out[out["g"] == key]
        scores, counts = np.unique(d["s"][idx], return_counts=True)
        assert_close(part["score"], scores)
        assert list(part["n"]) == list(counts)
        fitted = isotonic.IsotonicRegression().fit(d["s"][idx], d["y"][idx]).predict(scores)
        assert_close(part["recalibrated"], fitted, rtol=0, atol=1e-9)
        assert (part["band_low"] <= part["band_high"]).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_corp_reliability_matches_isotonic_regression_with_ties_and_tiny_groups(constructor, seed):
    runs_here(constructor)
    d = random_binary(seed)
    out = to_pandas(cf.conformal(constructor(d)).corp_reliability("y", "s", by="g", n_resamples=20, seed=seed))
    groups = group_dict(d["g"])
    assert sorted(set(out["g"])) == list(groups)
    for key, idx in groups.items():
        part = out[out["g"] == key]
        scores = np.unique(d["s"][idx])
        fitted = isotonic.IsotonicRegression().fit(d["s"][idx], d["y"][idx]).predict(scores)
        assert_close(part["score"], scores)
        assert_close(part["recalibrated"], fitted, rtol=0, atol=1e-9)
        assert int(part["n"].sum()) == len(idx)


def test_corp_band_is_deterministic_and_does_not_depend_on_row_order_or_backend():
    d = random_binary(4, n=600)
    a = to_pandas(cf.corp_reliability(pd.DataFrame(d), "y", "s", by="g", seed=7))
    order = np.random.default_rng(0).permutation(len(d["y"]))
    shuffled = {k: v[order] for k, v in d.items()}
    import polars as pl

    b = to_pandas(cf.corp_reliability(pl.DataFrame(shuffled).lazy(), "y", "s", by="g", seed=7))
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)
    c = to_pandas(cf.corp_reliability(pd.DataFrame(d), "y", "s", by="g", seed=8))
    assert not np.allclose(a["band_low"], c["band_low"])  # the seed matters


def test_corp_band_covers_a_calibrated_predictor_and_not_a_miscalibrated_one():
    rng = np.random.default_rng(11)
    s = np.round(rng.random(4000), 2)
    calibrated = (rng.random(4000) < s).astype(float)
    skewed = (rng.random(4000) < s**3).astype(float)
    frame = pd.DataFrame({"s": np.concatenate([s, s]), "y": np.concatenate([calibrated, skewed])})
    frame["g"] = ["calibrated"] * 4000 + ["skewed"] * 4000
    out = cf.corp_reliability(frame, "y", "s", by="g", n_resamples=200)
    inside = (out["band_low"] <= out["recalibrated"]) & (out["recalibrated"] <= out["band_high"])
    share = inside.groupby(out["g"]).mean()
    assert share["calibrated"] > 0.8
    assert share["skewed"] < 0.3
    # under calibration the band surrounds the diagonal
    cal = out[out["g"] == "calibrated"]
    assert ((cal["band_low"] <= cal["score"] + 1e-12) & (cal["score"] <= cal["band_high"] + 1e-12)).mean() > 0.9


def test_corp_without_band_and_invalid_rows():
    df = pd.DataFrame({"y": [0.0, 1.0, 1.0, np.nan], "s": [0.2, 0.4, 0.9, 0.5], "g": ["a", "a", "b", "b"]})
    with pytest.raises(ValueError, match=r"column 'y' has missing .* in 1 row"):
        cf.corp_reliability(df, "y", "s", by="g")
    dropped = cf.corp_reliability(df, "y", "s", by="g", invalid="drop", n_resamples=0)
    assert list(dropped["score"]) == [0.2, 0.4, 0.9]
    assert dropped["band_low"].isna().all() and dropped["band_high"].isna().all()
    import polars as pl

    lazy = cf.corp_reliability(pl.DataFrame(df).lazy(), "y", "s", by="g").collect()
    assert lazy.filter(pl.col("g") == "a")["recalibrated"].to_list() == [0.0, 1.0]
    assert lazy.filter(pl.col("g") == "b")["recalibrated"].null_count() == 2
    with pytest.raises(ValueError, match="n_resamples must be an integer >= 0"):
        cf.corp_reliability(df, "y", "s", n_resamples=-1)
    with pytest.raises(TypeError, match="ci_level"):
        cf.corp_reliability(df, "y", "s", ci_level="0.9")
    with pytest.raises(ValueError, match="group column 'score'"):
        cf.corp_reliability(df.assign(score=1), "y", "s", by="score")


# ---------------------------------------------------------------------------
# backends, laziness, bad input
# ---------------------------------------------------------------------------
def test_lazy_sql_backends_raise(constructor):
    if constructor.id in RUNS:
        pytest.skip("runs on this backend: covered by the reference tests")
    frame = constructor(random_binary(0, n=30))
    for run in (
        lambda: cf.evaluate(frame, cf.smooth_ece("y", "s"), by="g"),
        lambda: cf.evaluate(frame, cf.score_decomposition("y", "s")),
        lambda: cf.corp_reliability(frame, "y", "s", by="g"),
    ):
        with pytest.raises(NotImplementedError, match=f"cannot stay lazy on the {constructor.id} backend.*collect"):
            run()


def test_polars_lazy_stays_lazy_and_matches_eager():
    import polars as pl

    d = random_binary(2)
    lf = pl.DataFrame(d).lazy()
    metrics = [cf.smooth_ece("y", "s"), cf.score_decomposition("y", "s", scoring_rule="brier")]
    lazy = cf.evaluate(lf, *metrics, by="g", invalid="raise")
    assert isinstance(lazy, pl.LazyFrame)
    eager = cf.evaluate(pl.DataFrame(d), *metrics, by="g")
    assert lazy.collect().equals(eager)
    corp = cf.corp_reliability(lf, "y", "s", by="g")
    assert isinstance(corp, pl.LazyFrame)
    assert corp.collect().equals(cf.corp_reliability(pl.DataFrame(d), "y", "s", by="g"))


def test_invalid_rows_give_null_metrics_on_lazy_input_and_raise_on_eager():
    import polars as pl

    d = {"y": [0.0, 1.0, 2.0, 1.0], "s": [0.1, 0.8, 0.5, 0.7], "g": ["a", "a", "b", "b"]}
    out = cf.evaluate(pl.DataFrame(d).lazy(), cf.smooth_ece("y", "s"), cf.score_decomposition("y", "s"), by="g")
    out = out.collect()
    assert out["smooth_ece"].null_count() == 1 and out["score_decomposition_miscalibration"].null_count() == 1
    assert out["n_invalid"].to_list() == [0, 1]
    with pytest.raises(ValueError, match="column 'y' has labels other than 0 and 1 in 1 row"):
        cf.evaluate(pl.DataFrame(d), cf.smooth_ece("y", "s"))
    with pytest.raises(ValueError, match=r"scoring_rule must be one of"):
        cf.score_decomposition("y", "s", scoring_rule="spherical")
    with pytest.raises(TypeError, match="score must be a column name"):
        cf.smooth_ece("y", 3)


def test_corp_reliability_diagram_draws_the_fit_band_and_decomposition():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import polars as pl

    from conformal_frames import plots

    d = random_binary(1, n=1500, n_groups=4)
    ax = plots.corp_reliability_diagram(pl.DataFrame(d).lazy(), y="y", score="s", by="g", highlight=2)
    parts = cf.conformal(pl.DataFrame(d)).score_decomposition("y", "s", by="g")
    excess = (parts["miscalibration"] * parts["n"]).to_numpy()
    top = [parts["g"][int(i)] for i in np.argsort(-excess)[:2]]
    _, labels = ax.get_legend_handles_labels()
    assert labels[0] == "perfect calibration" and len(labels) == 3
    for label in labels[1:]:
        group = label.split("\n")[0].removeprefix("g=")
        assert group in top
        row = parts.filter(pl.col("g") == group).row(0, named=True)
        assert f"MCB {row['miscalibration']:.3f}" in label and f"S {row['score']:.3f}" in label
    # the drawn curve is the PAV fit of the group
    corp = cf.corp_reliability(pl.DataFrame(d), "y", "s", by="g")
    line = ax.get_lines()[1]
    fit = corp.filter(pl.col("g") == labels[1].split("\n")[0].removeprefix("g="))
    assert_close(line.get_ydata(), fit["recalibrated"].to_numpy())
    assert "4 more groups not drawn" in ax.get_title()  # g0..g3, one, two: 6 groups, 2 drawn
    plt.close(ax.figure)


def test_report_has_smooth_ece_and_the_decomposition_where_they_run():
    import duckdb
    import polars as pl
    from polars.testing import assert_frame_equal

    from conformal_frames.reporting import report

    d = random_binary(3, n=400)
    rep = report(pl.DataFrame(d).lazy(), y="y", score="s", by="g")
    assert list(rep.tables) == ["calibration", "decomposition", "reliability"]
    ref = cf.evaluate(pl.DataFrame(d), cf.smooth_ece("y", "s"), by="g")
    assert rep.frame("calibration")["smooth_ece"].to_list() == pytest.approx(ref["smooth_ece"].to_list(), rel=1e-12)
    parts = cf.conformal(pl.DataFrame(d)).score_decomposition("y", "s", by="g")
    # two differently-built queries: floats to 1e-12 (polars' parallel sums depend on the thread count)
    assert_frame_equal(rep.frame("decomposition"), parts.drop("n"), rel_tol=1e-12, abs_tol=0.0)
    lazy_sql = report(duckdb.from_arrow(pl.DataFrame(d).to_arrow()), y="y", score="s", by="g")
    assert list(lazy_sql.tables) == ["calibration", "reliability"]
    assert "smooth_ece" not in lazy_sql.frame("calibration").columns
    assert any("collect the frame first" in note for note in lazy_sql.summary["notes"])
