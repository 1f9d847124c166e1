"""Sample weights (``weights=``) on the forecast family.

pinball_loss (and per level), wis (quantiles and intervals, with its
components), quantile_coverage, interval_coverage, crps (Gaussian, ensemble as
a list column and as member columns, plain and fair, quantiles),
pit_histogram and score_decomposition.  Properties (see test_weights.py):

* an integer weight ``k`` gives the result of the row repeated ``k`` times
  (every estimate; Wilson bounds, bands and ``n_eff`` use Kish's effective
  sample size, which repetition changes, and ``n`` counts rows);
* a row of weight 0 gives the result without the row;
* constant weights give the unweighted result (intervals and bands too).

One grouped evaluate call per backend of the ``constructor`` fixture carries
every metric that runs lazily there; the seed loops run on polars eager and
lazy only.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy.special import ndtri
from scipy.stats import norm

import conformal_frames as cf
from conformal_frames.inputs.levels import level_name
from helpers import assert_close, compare, run, side_by_side, to_pandas

Q = {0.1: "q1", 0.25: "q2", 0.5: "q5", 0.75: "q7", 0.9: "q9"}
INTERVALS = {0.5: ("q2", "q7"), 0.8: ("q1", "q9")}
MEMBERS = ["e1", "e2", "e3", "e4"]
#: outputs that are row counts or inference at Kish's n_eff: not invariant under repetition
NOT_REPEATED = ("_ci_low", "_ci_high", "_n_eff", "_n", "_band_low", "_band_high")
#: the group's row count of a per-level metric (every weight counts; bins count rows of positive weight)
GROUP_N = ("pinball_loss_n", "quantile_coverage_n", "interval_coverage_n")
POLARS = [pytest.param(pl.DataFrame, id="polars"), pytest.param(lambda d: pl.DataFrame(d).lazy(), id="polars[lazy]")]


def make_data(seed: int, n: int = 48) -> dict[str, Any]:
    """Quantile, interval, Gaussian and ensemble forecasts; integer weights 0..3; groups."""
    rng = np.random.default_rng(seed)
    center = np.round(rng.normal(size=n), 1)
    spread = np.round(rng.gamma(2.0, 0.5, size=n), 1)
    steps = np.sort(np.round(rng.gamma(2.0, 0.3, size=(n, 4)), 1), axis=1)
    q5 = center
    members = np.round(center[:, None] + rng.normal(size=(n, 4)) * spread[:, None], 1)  # tied members
    w = rng.integers(0, 4, size=n)
    g = rng.choice(["a", "b", "c"], size=n)
    for key in ("a", "b", "c"):  # every group keeps a positive weight
        w[np.flatnonzero(g == key)[:1]] = 2
    data = {
        "y": np.round(center + rng.normal(size=n) * 1.2, 1),  # ties with quantiles and members
        "q1": q5 - steps[:, 2] - steps[:, 3],
        "q2": q5 - steps[:, 2],
        "q5": q5,
        "q7": q5 + steps[:, 1],
        "q9": q5 + steps[:, 1] + steps[:, 0],
        "mu": center,
        "sd": spread + 0.1,
        **{m: members[:, i] for i, m in enumerate(MEMBERS)},
        "ens": [list(r) for r in members],
        "yb": (rng.random(n) < 0.5).astype(np.int64),
        "s": np.round(rng.random(n), 1),
        "w": w,
        "g": g,
    }
    return data


def forecast_metrics(weights: str | None, *, randomized: bool = True) -> list[cf.Metric]:
    """Every weighted forecast metric that runs lazily on every backend (one query).

    ``randomized``: include the ensemble PIT histogram (one randomized PIT value
    per forecast: a weight ``k`` is not ``k`` repeated draws).
    """
    w = {"weights": weights} if weights is not None else {}
    metrics = [
        cf.pinball_loss("y", quantiles=Q, per_level=True, **w),
        cf.pinball_loss("y", quantiles=Q, **w).alias("pinball_mean"),
        cf.wis("y", quantiles=Q, **w),
        cf.wis("y", intervals=INTERVALS, median="q5", **w).alias("wis_i"),
        cf.quantile_coverage("y", quantiles=Q, ci_level=0.9, **w),
        cf.interval_coverage("y", intervals=INTERVALS, **w),
        cf.crps("y", mean="mu", std="sd", **w).alias("crps_gauss"),
        cf.crps("y", samples="ens", **w).alias("crps_list"),
        cf.crps("y", samples=MEMBERS, estimator="fair", **w).alias("crps_fair"),
        cf.quantile_crps("y", quantiles=Q, **w).alias("crps_q"),
        cf.pit_histogram("y", mean="mu", std="sd", n_bins=4, **w).alias("pit_gauss"),
    ]
    if randomized:
        metrics.append(cf.pit_histogram("y", samples=MEMBERS, n_bins=3, seed=1, **w).alias("pit_ens"))
    return metrics


def per_group_metrics(weights: str | None) -> list[cf.Metric]:
    """The per-group numpy steps (eager frames and polars lazy only)."""
    w = {"weights": weights} if weights is not None else {}
    return [
        cf.score_decomposition("yb", "s", **w),
        cf.score_decomposition("yb", "s", scoring_rule="log", **w).alias("sd_log"),
    ]


def rows(data: dict[str, Any], index: np.ndarray) -> dict[str, Any]:
    """The rows ``index`` (repeated or selected) of every column, the list column too."""
    return {c: [v[i] for i in index] if c == "ens" else np.asarray(v)[index] for c, v in data.items()}


def repeated(data: dict[str, Any]) -> dict[str, Any]:
    return rows(data, np.repeat(np.arange(len(data["w"])), np.asarray(data["w"])))


# ---------------------------------------------------------------------------
# numpy oracles (one group)
# ---------------------------------------------------------------------------
def wilson(k: float, n: float, level: float) -> tuple[float, float]:
    z = float(ndtri(0.5 + level / 2))
    center = (k + z * z / 2) / (n + z * z)
    half = z / (n + z * z) * np.sqrt(k * (n - k) / n + z * z / 4)
    return max(center - half, 0.0), min(center + half, 1.0)


def pinball(y: np.ndarray, q: np.ndarray, tau: float) -> np.ndarray:
    return np.maximum(tau * (y - q), (tau - 1.0) * (y - q))


def wis_rows(d: dict[str, np.ndarray]) -> np.ndarray:
    """Bracher et al. (2021): (1/2 |y - m| + sum_k alpha_k / 2 IS_alpha_k) / (K + 1/2)."""
    y = d["y"]
    total = 0.5 * np.abs(y - d["q5"])
    for level, (lo, hi) in INTERVALS.items():
        alpha = 1.0 - level
        low, up = d[lo], d[hi]
        interval_score = (up - low) + 2 / alpha * (np.maximum(low - y, 0) + np.maximum(y - up, 0))
        total = total + alpha / 2 * interval_score
    return total / (len(INTERVALS) + 0.5)


def crps_gauss(y: np.ndarray, mu: np.ndarray, sd: np.ndarray) -> np.ndarray:
    z = (y - mu) / sd
    return sd * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))


def crps_ensemble(y: np.ndarray, x: np.ndarray, *, fair: bool = False) -> np.ndarray:
    """E|X - y| - (1/2) E|X - X'| over the members (pairs i != j for ``fair``)."""
    m = x.shape[1]
    first = np.mean(np.abs(x - y[:, None]), axis=1)
    pairs = np.sum(np.abs(x[:, :, None] - x[:, None, :]), axis=(1, 2))
    return first - pairs / (2 * (m * (m - 1) if fair else m * m))


def crps_quantiles(y: np.ndarray, d: dict[str, np.ndarray]) -> np.ndarray:
    t = np.array(sorted(Q))
    share = np.diff(np.concatenate([[0.0], (t[1:] + t[:-1]) / 2, [1.0]]))  # each level's share of (0, 1)
    return sum(2.0 * w * pinball(y, d[Q[tau]], tau) for tau, w in zip(t, share))


# ---------------------------------------------------------------------------
# every backend: one grouped query
# ---------------------------------------------------------------------------
#: on Spark (interpreted plans: minutes per wide query) the metrics whose weighted code
#: path another one of the call already takes are left out (the seed loops run them all)
NOT_ON_SPARK = ("pinball_mean", "wis_i", "crps_list")


def _on(constructor: Any, metrics: list[cf.Metric]) -> list[cf.Metric]:
    if getattr(constructor, "id", "") == "pyspark":
        return [m for m in metrics if m.output_name not in NOT_ON_SPARK]
    return metrics


def test_forecast_weights_every_backend(constructor: Any) -> None:
    """Repetition (polars, unweighted, on the repeated rows), polars agreement, numpy oracles."""
    data = make_data(0)
    weighted = run(constructor, data, _on(constructor, forecast_metrics("w")))
    expanded = run(pl.DataFrame, repeated(data), _on(constructor, forecast_metrics(None, randomized=False)))
    assert compare(weighted, expanded, skip=NOT_REPEATED, what=constructor.id) >= 30
    # every output (Wilson bounds, bands, n_eff, bin counts) agrees with polars
    assert (
        compare(weighted, run(pl.DataFrame, data, _on(constructor, forecast_metrics("w"))), what=constructor.id) >= 65
    )
    check_oracles(weighted, data)


def check_oracles(out: pd.DataFrame, data: dict[str, Any]) -> None:
    """The weighted means of the numpy scores, Wilson at Kish's n_eff, the PIT band at n_eff."""
    for i, key in enumerate(out["g"]):
        m = np.asarray(data["g"]) == key
        d = {c: np.asarray(v, dtype=float)[m] for c, v in data.items() if c not in ("g", "ens")}
        w, y = d["w"], d["y"]
        n_eff = np.sum(w) ** 2 / np.sum(w**2)
        avg = functools.partial(np.average, weights=w)
        for tau, c in Q.items():
            at = level_name(tau)
            assert_close(out[f"pinball_loss_level{at}"][i], avg(pinball(y, d[c], tau)), what=f"pinball {tau}")
            cov = avg(y <= d[c])
            assert_close(out[f"quantile_coverage_level{at}"][i], cov, what="quantile coverage")
            low, high = wilson(cov * n_eff, n_eff, 0.9)
            assert_close(out[f"quantile_coverage_level{at}_ci_low"][i], low, what="quantile coverage low")
            assert_close(out[f"quantile_coverage_level{at}_ci_high"][i], high, what="quantile coverage high")
        assert_close(out["quantile_coverage_n_eff"][i], n_eff, what="n_eff")
        for level, (lo, hi) in INTERVALS.items():
            k = level_name(level)
            cov = avg((d[lo] <= y) & (y <= d[hi]))
            assert_close(out[f"interval_coverage_level{k}"][i], cov, what="interval coverage")
            low, high = wilson(cov * n_eff, n_eff, 0.95)
            assert_close(out[f"interval_coverage_level{k}_ci_low"][i], low, what="interval coverage low")
            assert_close(out[f"interval_coverage_level{k}_ci_high"][i], high, what="interval coverage high")
            assert_close(out[f"interval_coverage_level{k}_width"][i], avg(d[hi] - d[lo]), what="width")
            miss = np.maximum(d[lo] - y, 0) + np.maximum(y - d[hi], 0)
            winkler = avg(d[hi] - d[lo] + 2 / (1 - level) * miss)
            assert_close(out[f"interval_coverage_level{k}_winkler"][i], winkler, what="winkler")
        assert_close(out["wis"][i], avg(wis_rows(d)), what="wis")
        if "wis_i" in out:
            assert_close(out["wis_i"][i], avg(wis_rows(d)), what="wis (intervals)")
        x = np.column_stack([d[c] for c in MEMBERS])
        assert_close(out["crps_gauss"][i], avg(crps_gauss(y, d["mu"], d["sd"])), what="crps gauss")
        if "crps_list" in out:
            assert_close(out["crps_list"][i], avg(crps_ensemble(y, x)), what="crps list")
        assert_close(out["crps_fair"][i], avg(crps_ensemble(y, x, fair=True)), what="crps fair")
        assert_close(out["crps_q"][i], avg(crps_quantiles(y, d)), what="crps quantiles")
        pit = norm.cdf((y - d["mu"]) / d["sd"])
        bins = np.minimum(np.floor(pit * 4), 3)
        for b in range(4):
            assert_close(out[f"pit_gauss_bin{b}"][i], avg(bins == b), what="pit frequency")
            assert out[f"pit_gauss_bin{b}_n"][i] == np.sum((bins == b) & (w > 0))
        half = float(ndtri(0.975)) * np.sqrt(0.25 * 0.75 / n_eff)
        assert_close(
            [out["pit_gauss_band_low"][i], out["pit_gauss_band_high"][i]],
            [max(0.25 - half, 0.0), min(0.25 + half, 1.0)],
        )  # clipped to [0, 1]


def test_pinball_equals_scikit_learn_per_level(constructor: Any) -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(11)
    n = 40
    y = rng.normal(size=n)
    q1 = y + rng.normal(size=n) - 1.0
    data = {"y": y, "q1": q1, "q9": q1 + rng.gamma(2.0, 1.0, size=n), "w": rng.gamma(1.0, 1.0, size=n)}
    data["g"] = np.where(np.arange(n) < 25, "a", "b")
    data["w"][:3] = 0.0
    qs = {0.1: "q1", 0.9: "q9"}
    out = run(constructor, data, [cf.pinball_loss("y", quantiles=qs, per_level=True, weights="w")])
    for tau, c in qs.items():
        expected = [
            metrics.mean_pinball_loss(y[m], data[c][m], alpha=tau, sample_weight=data["w"][m])
            for m in (data["g"] == "a", data["g"] == "b")
        ]
        assert_close(out[f"pinball_loss_level{level_name(tau)}"], expected, what=f"level {tau}")


# ---------------------------------------------------------------------------
# the seed loops: polars eager and lazy only (covered above on every backend)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("make", POLARS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_forecast_weight_properties_over_seeds(make: Any, seed: int) -> None:
    data = make_data(10 + seed, n=64)
    kept = rows(data, np.flatnonzero(np.asarray(data["w"]) > 0))
    flat = {**data, "w": np.full(len(data["w"]), 2.5)}
    # the rows as given, of positive weight, and at constant weights: one grouped call ("1 a", "2 a", "3 a", ...)
    weighted, dropped, constant = side_by_side(make, [data, kept, flat], forecast_metrics("w") + per_group_metrics("w"))
    expanded = run(make, repeated(data), forecast_metrics(None, randomized=False) + per_group_metrics(None))
    assert compare(weighted, expanded, skip=NOT_REPEATED, what=f"repetition, seed {seed}") >= 45
    check_oracles(weighted, data)
    # weight 0 == the row dropped: every output, the randomized PIT too
    assert compare(weighted, dropped, skip=GROUP_N, what=f"zero weights, seed {seed}") >= 80
    # constant weights == unweighted: every output, Wilson bounds and bands too; n_eff = n
    plain = run(make, flat, forecast_metrics(None) + per_group_metrics(None))
    assert not [c for c in plain.columns if c.endswith("_n_eff")]
    assert compare(constant, plain, what=f"constant weights, seed {seed}") >= 75
    for c in [c for c in constant.columns if c.endswith("_n_eff")]:
        assert_close(constant[c], constant["n"], what=c)


@pytest.mark.parametrize("seed", [4, 5])
def test_forecast_repetition_ungrouped(seed: int) -> None:
    data = make_data(20 + seed)
    weighted = to_pandas(cf.evaluate(pl.DataFrame(data), *forecast_metrics("w", randomized=False)))
    expanded = to_pandas(cf.evaluate(pl.DataFrame(repeated(data)), *forecast_metrics(None, randomized=False)))
    weighted["g"] = expanded["g"] = 0
    assert compare(weighted, expanded, skip=NOT_REPEATED, what=f"ungrouped, seed {seed}") >= 40


def test_score_decomposition_weighted_oracle(eager_constructor: Any) -> None:
    """Weighted means, the weighted base rate and scikit-learn's weighted isotonic regression."""
    from sklearn.isotonic import IsotonicRegression

    data = make_data(6)
    out = run(eager_constructor, data, [cf.score_decomposition("yb", "s", weights="w")])
    for i, key in enumerate(out["g"]):
        m = (np.asarray(data["g"]) == key) & (np.asarray(data["w"]) > 0)
        y, s, w = (np.asarray(data[c], dtype=float)[m] for c in ("yb", "s", "w"))
        fitted = IsotonicRegression().fit(s, y, sample_weight=w).predict(s)
        base = np.average(y, weights=w)
        score = np.average((s - y) ** 2, weights=w)
        recal = np.average((fitted - y) ** 2, weights=w)
        unc = np.average((base - y) ** 2, weights=w)
        assert_close(out["score_decomposition"][i], score)
        assert_close(out["score_decomposition_miscalibration"][i], score - recal, atol=1e-12)
        assert_close(out["score_decomposition_discrimination"][i], unc - recal, atol=1e-12)
        assert_close(out["score_decomposition_uncertainty"][i], unc)


# ---------------------------------------------------------------------------
# long tables, bad input, unweighted unchanged
# ---------------------------------------------------------------------------
def test_long_tables_carry_n_eff() -> None:
    data = make_data(7)
    frame = pl.DataFrame({k: v for k, v in data.items() if k != "ens"})
    qc = frame.conformal.quantile_coverage("y", quantiles=Q, weights="w", by="g")
    assert qc.columns == [
        "g",
        "quantile_level",
        "coverage",
        "coverage_ci_low",
        "coverage_ci_high",
        "deviation",
        "n_eff",
        "n_crossing",
        "n",
    ]
    ic = frame.conformal.interval_coverage("y", intervals=INTERVALS, weights="w")
    assert ic.columns[-3:] == ["n_eff", "n_crossing", "n"]
    w = np.asarray(data["w"], dtype=float)
    assert_close(ic["n_eff"], [np.sum(w) ** 2 / np.sum(w**2)] * 2)
    pit = frame.conformal.pit_histogram("y", mean="mu", std="sd", n_bins=4, weights="w", by="g")
    assert pit.columns[-2:] == ["n_eff", "n"]
    assert_close(pit.group_by("g").agg(pl.col("frequency").sum())["frequency"], [1.0, 1.0, 1.0])
    plain = frame.conformal.quantile_coverage("y", quantiles=Q, by="g")
    assert "n_eff" not in plain.columns


def test_long_form_quantiles_weighted() -> None:
    """One row per (forecast, level) with the forecast's weight: equal to the wide form."""
    data = make_data(8)
    wide = pl.DataFrame({k: v for k, v in data.items() if k != "ens"})
    long = pl.concat(
        [wide.select("g", "y", "w", pl.col(c).alias("q"), pl.lit(tau).alias("tau")) for tau, c in Q.items()]
    )
    a = long.conformal.pinball_loss("y", quantiles="q", quantile_level="tau", weights="w", by="g")
    b = wide.conformal.pinball_loss("y", quantiles=Q, weights="w", by="g")
    assert_close(a["pinball_loss"], b["pinball_loss"])
    c = long.conformal.quantile_coverage("y", quantiles="q", quantile_level="tau", weights="w", by=["g", "tau"])
    d = wide.conformal.quantile_coverage("y", quantiles=Q, weights="w", by="g").sort("g", "quantile_level")
    assert_close(c.sort("g", "tau")["coverage"], d["coverage"])
    assert_close(c.sort("g", "tau")["coverage_ci_low"], d["coverage_ci_low"])


@pytest.mark.parametrize("metric", forecast_metrics("w") + per_group_metrics("w"), ids=lambda m: m.output_name)
def test_bad_weights_in_every_forecast_metric(metric: cf.Metric) -> None:
    data = make_data(9, n=12)
    bad = {**data, "w": np.where(np.arange(12) == 3, -1.0, 1.0)}
    with pytest.raises(ValueError, match=r"^column 'w' \(weights=\) has negative values in 1 row, e.g. -1$"):
        cf.evaluate(pl.DataFrame(bad), metric, by="g")
    nulls = {**data, "w": [None if i in (2, 5) else 1.0 for i in range(12)]}
    with pytest.raises(ValueError, match=r"^column 'w' has missing \(null/NaN\) or infinite values in 2 rows"):
        cf.evaluate(pd.DataFrame(nulls), metric, by="g")
    zero = {**data, "w": np.where(np.asarray(data["g"]) == "a", 0.0, 1.0)}
    rows_a = int(np.sum(np.asarray(data["g"]) == "a"))
    with pytest.raises(ValueError, match=rf"is zero on every row of a group, in {rows_a} rows"):
        cf.evaluate(pl.DataFrame(zero), metric, by="g")


def test_unweighted_forecast_query_unchanged() -> None:
    """``weights=None`` registers no weight row (the 0.2 query)."""
    from conformal_frames.engine import Query

    schema = nw.from_native(pl.DataFrame(make_data(0)).lazy()).collect_schema()
    for metric in forecast_metrics(None) + per_group_metrics(None):
        q = Query(schema=schema, keys=[])
        metric.build(q)
        assert not any("weight" in str(k) for k in q.rows), metric.output_name
        assert "weights" in inspect.signature(type(metric)).parameters
