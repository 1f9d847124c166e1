"""Regression uncertainty calibration (metrics/uncertainty_calibration.py) against numpy oracles and peers.

Oracles: the definitions written out in numpy (per group, ties in ``std``,
groups of 1 and 2 rows).  Peers: uncertainty-toolbox (``sharpness``, the
calibration errors, the miscalibration area, adversarial group calibration;
skipped when it is not installed), netcal's ENCE/UCE and Levi et al.'s ENCE
through their formulas in numpy (netcal pulls torch: not installed).
Spark: one compact test (every metric in one query).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy.stats import norm

import conformal_frames as cf
from conformal_frames.engine import Query
from helpers import assert_close, group_dict, to_pandas

# ---------------------------------------------------------------------------
# data and oracles
# ---------------------------------------------------------------------------


def gaussian_data(seed: int, n: int = 60, *, ties: bool = True) -> dict[str, Any]:
    """Gaussian predictions (std rounded: ties), overdispersed errors, groups a/b/c plus groups of 1 and 2 rows."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.gamma(2.0, 0.5, size=n) + 0.05
    if ties:
        sd = np.round(sd, 1) + 0.05
    y = mu + rng.normal(size=n) * sd * rng.choice([0.7, 1.4], size=n)
    g = np.concatenate([rng.choice(["a", "b", "c"], size=n - 3), ["one", "two", "two"]])
    w = np.round(rng.gamma(2.0, 1.0, size=n), 1) + 0.1
    k = rng.integers(0, 4, size=n)
    k[n - 3 :] = [1, 2, 1]
    return {"y": y, "mu": mu, "sd": sd, "w": w, "k": k, "g": g}


def np_cut(position: np.ndarray, total: float, n_bins: int) -> np.ndarray:
    """Quantile bins: runs of (near) equal weight, the first ``W % M`` one longer (``np.array_split`` for rows)."""
    size = np.floor(total / n_bins)
    extra = total - size * n_bins
    cuts = np.array([size * k + min(k, extra) for k in range(1, n_bins)])
    return (position[:, None] >= cuts[None, :]).sum(axis=1)


def np_bins(y, mu, sd, w, n_bins: int, strategy: str, by_variance: bool) -> dict[str, Any]:
    """Per bin: weight, rows, RMV, RMSE, std range; ENCE and UCE."""
    err, var = (y - mu) ** 2, sd**2
    keep = w > 0
    if strategy == "quantile":
        before = np.array([w[sd < s].sum() for s in sd])  # the weight of smaller std: ties share a bin
        b = np_cut(before, w.sum(), n_bins)
    else:
        v = var if by_variance else sd
        lo, hi = v[keep].min(), v[keep].max()
        b = np.clip(np.floor((v - lo) / (hi - lo if hi > lo else 1.0) * n_bins), 0, n_bins - 1).astype(int)
    rows = []
    for k in range(n_bins):
        m = (b == k) & keep
        if m.any():
            wk = w[m].sum()
            rows.append((k, wk, np.sqrt((w[m] * var[m]).sum() / wk), np.sqrt((w[m] * err[m]).sum() / wk), m))
    ence = np.mean([abs(rmv - rmse) / rmv for _, _, rmv, rmse, _ in rows])
    uce = sum(abs((w[m] * err[m]).sum() - (w[m] * var[m]).sum()) for *_, m in rows) / w.sum()
    return {"rows": rows, "ence": ence, "uce": uce, "sd": sd}


def np_curve(y, mu, sd, w, n_levels: int, proportion: str) -> tuple[np.ndarray, np.ndarray]:
    """Expected and observed proportions (z against scipy's normal quantiles)."""
    p = np.linspace(0, 1, n_levels)
    z = (y - mu) / sd
    if proportion == "interval":
        inside = np.abs(z)[:, None] <= norm.ppf(0.5 + p / 2)[None, :]
    else:
        inside = z[:, None] <= norm.ppf(p)[None, :]
    return p, (w[:, None] * inside).sum(axis=0) / w.sum()


def np_area(p: np.ndarray, obs: np.ndarray) -> float:
    """int |obs - p| with obs linear between levels (each crossing of the diagonal split exactly)."""
    d = obs - p
    area = 0.0
    for i in range(len(p) - 1):
        dl, dr, dx = d[i], d[i + 1], p[i + 1] - p[i]
        area += dx * (dl**2 + dr**2) / (2 * (abs(dl) + abs(dr))) if dl * dr < 0 else dx * abs(dl + dr) / 2
    return area


def per_group(d: dict[str, Any], fn, weighted: bool = False) -> np.ndarray:
    w = d["w"] if weighted else np.ones(len(d["y"]))
    return np.array([fn(d["y"][i], d["mu"][i], d["sd"][i], w[i]) for i in group_dict(d["g"]).values()])


def scores(**kw: Any) -> list[cf.Metric]:
    g = {"mean": "mu", "std": "sd"}
    return [
        cf.sharpness("sd", **kw),
        cf.ence("y", **g, n_bins=3, **kw),
        cf.ence("y", **g, n_bins=3, strategy="uniform", **kw).alias("ence_u"),
        cf.uce("y", **g, n_bins=3, **kw),
        cf.uce("y", **g, n_bins=3, strategy="quantile", **kw).alias("uce_q"),
        cf.mean_absolute_calibration_error("y", **g, n_levels=11, **kw),
        cf.root_mean_squared_calibration_error("y", **g, n_levels=11, **kw),
        cf.miscalibration_area("y", **g, n_levels=11, **kw),
        cf.miscalibration_area("y", **g, n_levels=11, proportion="quantile", **kw).alias("area_q"),
    ]


def expected_scores(d: dict[str, Any], weighted: bool = False) -> dict[str, np.ndarray]:
    def curve(prop: str, what: str):
        def fn(y, mu, sd, w):
            p, obs = np_curve(y, mu, sd, w, 11, prop)
            gap = obs - p
            return {"mace": np.mean(np.abs(gap)), "rmsce": np.sqrt(np.mean(gap**2)), "area": np_area(p, obs)}[what]

        return fn

    return {
        "sharpness": per_group(d, lambda y, mu, sd, w: np.sqrt((w * sd**2).sum() / w.sum()), weighted),
        "ence": per_group(d, lambda *a: np_bins(*a, 3, "quantile", False)["ence"], weighted),
        "ence_u": per_group(d, lambda *a: np_bins(*a, 3, "uniform", False)["ence"], weighted),
        "uce": per_group(d, lambda *a: np_bins(*a, 3, "uniform", True)["uce"], weighted),
        "uce_q": per_group(d, lambda *a: np_bins(*a, 3, "quantile", True)["uce"], weighted),
        "mean_absolute_calibration_error": per_group(d, curve("interval", "mace"), weighted),
        "root_mean_squared_calibration_error": per_group(d, curve("interval", "rmsce"), weighted),
        "miscalibration_area": per_group(d, curve("interval", "area"), weighted),
        "area_q": per_group(d, curve("quantile", "area"), weighted),
    }


def check_scores(out: pd.DataFrame, expected: dict[str, np.ndarray], what: str) -> None:
    for name, values in expected.items():
        assert_close(out[name], values, rtol=1e-12, atol=1e-15, what=f"{what}: {name}")


# ---------------------------------------------------------------------------
# oracles on every backend
# ---------------------------------------------------------------------------
def test_scores_match_oracle(constructor: Any) -> None:
    """Every score grouped (groups of 1 and 2 rows, tied std), on every backend, lazy in lazy out."""
    d = gaussian_data(0)
    table = cf.uncertainty_calibration_curve("y", mean="mu", std="sd", n_levels=5)
    bins = cf.ence_table("y", mean="mu", std="sd", n_bins=3)
    metrics = scores()
    if constructor.id == "pyspark":  # one cells table per binning on Spark (each a join): the four kinds run elsewhere
        metrics = [
            m for m in metrics if m.output_name not in ("ence_u", "uce_q", "root_mean_squared_calibration_error")
        ]
    native = cf.evaluate(constructor(d), *metrics, table, bins, by="g")
    assert type(native).__module__.split(".")[0] == type(constructor(d)).__module__.split(".")[0]
    out = to_pandas(native).sort_values("g").reset_index(drop=True)
    expected = expected_scores(d)
    check_scores(out, {m.output_name: expected[m.output_name] for m in metrics}, constructor.id)
    for j, idx in enumerate(group_dict(d["g"]).values()):
        _, obs = np_curve(d["y"][idx], d["mu"][idx], d["sd"][idx], np.ones(len(idx)), 5, "interval")
        got = [out[f"uncertainty_calibration_curve_level{i}"][j] for i in range(5)]
        assert_close(got, obs, what=f"{constructor.id}: curve")
        rows = np_bins(d["y"][idx], d["mu"][idx], d["sd"][idx], np.ones(len(idx)), 3, "quantile", False)["rows"]
        for k, wk, rmv, rmse, m in rows:
            assert out[f"ence_table_bin{k}_n"][j] == wk
            assert_close([out[f"ence_table_bin{k}_rmv"][j], out[f"ence_table_bin{k}_rmse"][j]], [rmv, rmse])
            assert out[f"ence_table_bin{k}_lo"][j] == d["sd"][idx][m].min()


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("ties", [True, False])
def test_scores_over_seeds(seed: int, ties: bool) -> None:
    d = gaussian_data(seed, n=80, ties=ties)
    out = to_pandas(cf.evaluate(pl.DataFrame(d), *scores(), by="g")).sort_values("g").reset_index(drop=True)
    check_scores(out, expected_scores(d), f"seed {seed}")
    whole = cf.evaluate(pl.DataFrame(d), *scores())
    d1 = {**d, "g": np.zeros(len(d["y"]))}
    check_scores(to_pandas(whole), expected_scores(d1), f"seed {seed}, ungrouped")


def test_weighted_scores_match_oracle() -> None:
    d = gaussian_data(4, n=70)
    for make in (pl.DataFrame, pd.DataFrame):
        out = to_pandas(cf.evaluate(make(d), *scores(weights="w"), by="g")).sort_values("g").reset_index(drop=True)
        check_scores(out, expected_scores(d, weighted=True), f"{make.__module__}: weights")


@pytest.mark.parametrize("make", [pl.DataFrame, pd.DataFrame])
def test_counts_are_repeated_rows(make: Any) -> None:
    d = gaussian_data(5, n=60)
    k = d["k"]
    repeated = {c: np.repeat(v, k) for c, v in d.items()}

    def extra(**kw: Any) -> list[cf.Metric]:
        return [
            cf.uncertainty_calibration_curve("y", mean="mu", std="sd", n_levels=5, **kw),
            cf.ence_table("y", mean="mu", std="sd", n_bins=3, **kw),
        ]

    counted = to_pandas(cf.evaluate(make(d), *scores(counts="k"), *extra(counts="k"), by="g", invalid="null"))
    plain = to_pandas(cf.evaluate(make(repeated), *scores(), *extra(), by="g"))
    counted = counted[counted["g"].isin(set(repeated["g"]))].reset_index(drop=True)
    for c in plain.columns:
        if c not in ("g", "n_invalid"):
            assert_close(counted[c].astype(float), plain[c].astype(float), what=c)


def test_peer_formulas_levi_and_netcal() -> None:
    """ENCE of Levi et al. (sorted by std, np.array_split) and netcal's ENCE / UCE (equal-width bins), continuous std."""
    rng = np.random.default_rng(7)
    n = 503
    mu, sd = rng.normal(size=n), rng.uniform(0.2, 3.0, size=n)
    y = mu + rng.normal(size=n) * sd * 1.2
    df = pl.DataFrame({"y": y, "mu": mu, "sd": sd})
    err, var = (y - mu) ** 2, sd**2
    order = np.argsort(sd)
    levi = np.mean(
        [
            abs(np.sqrt(var[b].mean()) - np.sqrt(err[b].mean())) / np.sqrt(var[b].mean())
            for b in np.array_split(order, 10)
        ]
    )
    assert abs(df.conformal.ence("y", mean="mu", std="sd") - levi) < 1e-12

    def equal_width(v: np.ndarray, n_bins: int) -> list[np.ndarray]:
        edges = np.linspace(v.min(), v.max(), n_bins + 1)
        idx = np.clip(np.digitize(v, edges[1:-1], right=False), 0, n_bins - 1)
        return [idx == b for b in range(n_bins) if (idx == b).any()]

    netcal_ence = np.mean(
        [abs(np.sqrt(var[m].mean()) - np.sqrt(err[m].mean())) / np.sqrt(var[m].mean()) for m in equal_width(sd, 10)]
    )
    netcal_uce = sum(m.mean() * abs(err[m].mean() - var[m].mean()) for m in equal_width(var, 10))
    assert abs(df.conformal.ence("y", mean="mu", std="sd", strategy="uniform") - netcal_ence) < 1e-12
    assert abs(df.conformal.uce("y", mean="mu", std="sd") - netcal_uce) < 1e-12


@pytest.mark.parametrize("seed", [0, 1])
def test_uncertainty_toolbox_values(seed: int) -> None:
    uct = pytest.importorskip("uncertainty_toolbox")
    rng = np.random.default_rng(seed)
    n = 300
    mu, sd = rng.normal(size=n), rng.uniform(0.3, 2.0, size=n)
    y = mu + rng.normal(size=n) * sd * 1.3 + 0.2
    df = pl.DataFrame({"y": y, "mu": mu, "sd": sd})
    ns = df.conformal
    assert abs(ns.sharpness("sd") - uct.sharpness(sd)) < 1e-12
    for prop in ("interval", "quantile"):
        kw = {"mean": "mu", "std": "sd", "proportion": prop}
        peer = {"prop_type": prop}
        pairs = [
            (ns.mean_absolute_calibration_error("y", **kw), uct.mean_absolute_calibration_error(mu, sd, y, **peer)),
            (
                ns.root_mean_squared_calibration_error("y", **kw),
                uct.root_mean_squared_calibration_error(mu, sd, y, **peer),
            ),
            (ns.miscalibration_area("y", **kw), uct.miscalibration_area(mu, sd, y, **peer)),
        ]
        for ours, theirs in pairs:
            assert abs(ours - theirs) < 1e-12, (prop, ours, theirs)
    exp, obs = uct.metrics_calibration.get_proportion_lists_vectorized(mu, sd, y)
    curve = ns.uncertainty_calibration_curve("y", mean="mu", std="sd")
    assert_close(curve["expected"].to_numpy(), exp)
    assert_close(curve["observed"].to_numpy(), obs)
    for cal, cali_type in [(("mean_absolute", "mean_abs"), ("root_mean_squared", "root_mean_sq"))[seed]]:
        table = ns.adversarial_group_calibration("y", mean="mu", std="sd", calibration_error=cal, seed=seed + 5)
        np.random.seed(seed + 5)
        peer_table = uct.adversarial_group_calibration(mu, sd, y, cali_type=cali_type)
        assert_close(table["group_fraction"].to_numpy(), peer_table.group_size)
        assert_close(table["worst_error"].to_numpy(), peer_table.score_mean)
        assert_close(table["worst_error_sd"].to_numpy(), peer_table.score_stderr)


def test_adversarial_grouped_and_lazy() -> None:
    d = gaussian_data(8, n=40)
    m = cf.adversarial_group_calibration("y", mean="mu", std="sd", n_group_sizes=3, n_trials=3, n_draws=4, seed=2)
    eager = pl.DataFrame(d).conformal.adversarial_group_calibration(
        "y", mean="mu", std="sd", n_group_sizes=3, n_trials=3, n_draws=4, seed=2, by="g"
    )
    lazy = cf.evaluate(pl.DataFrame(d).lazy(), m, by="g")
    assert isinstance(lazy, pl.LazyFrame)
    wide = lazy.collect().sort("g")
    assert wide.filter(pl.col("g") == "one")["adversarial_group_calibration_size0"].to_list() == [None]
    two = eager.filter(pl.col("g") == "two")
    assert two["group_size"].to_list() == [2, 2, 2]
    # a group of 2 rows: every draw is the whole group
    idx = np.flatnonzero(d["g"] == "two")
    _, obs = np_curve(d["y"][idx], d["mu"][idx], d["sd"][idx], np.ones(2), 100, "interval")
    assert_close(two["worst_error"].to_numpy(), [np.mean(np.abs(obs - np.linspace(0, 1, 100)))] * 3)
    with pytest.raises(cf.BackendLimitError, match="adversarial_group_calibration"):
        cf.evaluate(pd.DataFrame(d).pipe(lambda f: __import__("duckdb").from_df(f)), m, by="g")
    with pytest.raises(TypeError, match="no weighted version"):
        cf.adversarial_group_calibration("y", mean="mu", std="sd", weights="w")  # type: ignore[call-arg]


# ---------------------------------------------------------------------------
# bad input, merging, definitions
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sd", "message"),
    [
        (-1.0, r"std column 'sd' has zero or negative values"),
        (0.0, r"std column 'sd' has zero or negative values"),
        (np.nan, r"column 'sd' has missing \(null/NaN\) or infinite values"),
    ],
)
def test_bad_std(sd: float, message: str) -> None:
    d = gaussian_data(9, n=12)
    d["sd"] = d["sd"].copy()
    d["sd"][3] = sd
    df = pl.DataFrame(d)
    for m in [*scores(), cf.adversarial_group_calibration("y", mean="mu", std="sd", n_trials=2)]:
        with pytest.raises(cf.InvalidRowsError, match=message):
            cf.evaluate(df, m)
    out = cf.evaluate(df, *scores(), invalid="drop")
    assert out["n_dropped"].item() == 1 if "n_dropped" in out.columns else out["n"].item() == 11
    nulls = cf.evaluate(df.lazy(), *scores()).collect()
    assert nulls["n_invalid"].item() == 1 and nulls["ence"].item() is None


def test_mergeable_except_adversarial() -> None:
    d = gaussian_data(10, n=50)
    df = pl.DataFrame(d)
    metrics = [*scores(), cf.uncertainty_calibration_curve("y", mean="mu", std="sd", n_levels=7)]
    metrics.append(cf.ence_table("y", mean="mu", std="sd", n_bins=3))
    half = len(d["y"]) // 2
    parts = [cf.summarize(df[:half], *metrics, by="g"), cf.summarize(df[half:], *metrics, by="g")]
    merged = cf.finalize(pl.concat(parts), *metrics, by="g")
    whole = cf.evaluate(df, *metrics, by="g")
    for c in whole.columns:
        if c != "g":
            assert_close(merged.sort("g")[c].to_numpy(), whole.sort("g")[c].to_numpy(), what=c)
    spec = cf.adversarial_group_calibration("y", mean="mu", std="sd").definition(df.collect_schema())
    assert not spec.mergeable and spec.why_not
    with pytest.raises(Exception, match="mean_absolute_calibration_error"):
        cf.summarize(df, cf.adversarial_group_calibration("y", mean="mu", std="sd"))


def test_levels_and_shared_rows() -> None:
    """n_levels=2 is the levels 0 and 1 (error 0 without a zero residual); the curve metrics share one sum per level."""
    d = gaussian_data(11, n=20)
    df = pl.DataFrame(d)
    assert df.conformal.mean_absolute_calibration_error("y", mean="mu", std="sd", n_levels=2) == 0.0
    q = Query(schema=pl.DataFrame(d).lazy().collect_schema(), keys=[])
    metrics = [cf.mean_absolute_calibration_error("y", mean="mu", std="sd", n_levels=11)]
    metrics += [cf.miscalibration_area("y", mean="mu", std="sd", n_levels=11)]
    specs = [q.record(m)[1] for m in metrics]
    assert [s.state for s in specs[0].stats] == [s.state for s in specs[1].stats]
    assert len(specs[0].stats) == 10  # the level 0 (z == 0) and 0 < p < 1; none for p = 1
    with pytest.raises(ValueError, match="n_levels"):
        cf.miscalibration_area("y", mean="mu", std="sd", n_levels=1)
    with pytest.raises(ValueError, match="proportion"):
        cf.miscalibration_area("y", mean="mu", std="sd", proportion="central")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="strategy"):
        cf.ence("y", mean="mu", std="sd", strategy="equal")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("lazy", [False, True])
def test_report_section(lazy: bool) -> None:
    d = gaussian_data(12, n=80)
    frame = pl.DataFrame(d).lazy() if lazy else pl.DataFrame(d)
    rep = cf.report(frame, y="y", mean="mu", std="sd", by="g")
    table = rep.frame("uncertainty_calibration")
    names = ["ence", "uce", "mean_absolute_calibration_error", "root_mean_squared_calibration_error"]
    names += ["miscalibration_area", "sharpness"]
    assert table.columns == ["g", *names, "n", *(["n_invalid"] if lazy else [])]  # lazy input: invalid="null"
    g = {"mean": "mu", "std": "sd"}
    direct = cf.evaluate(pl.DataFrame(d), cf.ence("y", **g), cf.miscalibration_area("y", **g), by="g").sort("g")
    assert_close(table.sort("g")["ence"].to_numpy(), direct["ence"].to_numpy())
    assert_close(table.sort("g")["miscalibration_area"].to_numpy(), direct["miscalibration_area"].to_numpy())
    curve = rep.frame("uncertainty_calibration_curve")
    assert curve.columns == ["g", "level", "expected", "observed"] and curve.height == 5 * 100
    assert "uncertainty_calibration" in rep.summary["families"]
    assert "Uncertainty calibration per group" in str(rep)
    assert "uncertainty_calibration_curve" not in rep.summary["families"]
    pytest.importorskip("matplotlib")
    assert "uncertainty_calibration_curve" in rep.figures()


# ---------------------------------------------------------------------------
# quantiles=: the curve of quantile forecasts
# ---------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:.*crossing quantiles in 1 row")
def test_quantile_forecasts(constructor: Any) -> None:
    if constructor.id == "pyspark":
        pytest.skip("Spark: one compact test (test_scores_match_oracle); the quantile rows are quantile_coverage's")
    levels = (0.1, 0.25, 0.5, 0.75, 0.9)
    quantiles = {t: f"q{i}" for i, t in enumerate(levels)}
    d = gaussian_data(13, n=50)
    for i, t in enumerate(levels):
        d[f"q{i}"] = d["mu"] + d["sd"] * norm.ppf(t) * 0.8
    d["q3"][5] = d["q0"][5] - 1.0  # one crossing row
    kw = {"quantiles": quantiles}
    metrics = [
        cf.mean_absolute_calibration_error("y", **kw),
        cf.root_mean_squared_calibration_error("y", **kw),
        cf.miscalibration_area("y", **kw),
        cf.uncertainty_calibration_curve("y", **kw),
    ]
    out = to_pandas(cf.evaluate(constructor(d), *metrics, by="g")).sort_values("g").reset_index(drop=True)
    p = np.array(levels)
    for j, idx in enumerate(group_dict(d["g"]).values()):
        obs = np.array([(d["y"][idx] <= d[f"q{i}"][idx]).mean() for i in range(len(levels))])
        gap = obs - p
        assert_close(out["mean_absolute_calibration_error"][j], np.mean(np.abs(gap)), what=constructor.id)
        assert_close(out["root_mean_squared_calibration_error"][j], np.sqrt(np.mean(gap**2)), what=constructor.id)
        assert_close(out["miscalibration_area"][j], np_area(np.r_[0, p, 1], np.r_[0, obs, 1]), what=constructor.id)
        assert_close([out[f"uncertainty_calibration_curve_level{i}"][j] for i in range(5)], obs)
        assert out["miscalibration_area_n_crossing"][j] == int(5 in idx)
    # the mean absolute error over the quantile levels is quantile_coverage's summary
    if constructor.id == "polars":
        qc = cf.evaluate(constructor(d), cf.quantile_coverage("y", quantiles=quantiles, per_level=False), by="g")
        assert_close(out["mean_absolute_calibration_error"], to_pandas(qc).sort_values("g")["quantile_coverage"])


def test_quantile_arguments() -> None:
    with pytest.raises(ValueError, match="proportion='interval' reads a Gaussian prediction"):
        cf.miscalibration_area("y", quantiles={0.5: "q"}, proportion="interval")
    with pytest.raises(ValueError, match="give a prediction: mean= and std="):
        cf.miscalibration_area("y")
    with pytest.raises(ValueError, match="needs both mean= and std="):
        cf.miscalibration_area("y", mean="mu")
    with pytest.raises(ValueError, match="give one forecast"):
        cf.miscalibration_area("y", mean="mu", std="sd", quantiles={0.5: "q"})
    d = gaussian_data(14, n=20)
    d["q"], d["q2"] = d["mu"], d["mu"] - 1.0
    with pytest.raises(cf.InvalidRowsError, match="quantile columns cross"):
        cf.evaluate(pl.DataFrame(d), cf.miscalibration_area("y", quantiles={0.5: "q", 0.9: "q2"}, crossing="invalid"))
