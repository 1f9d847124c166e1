"""The output contract: counts are integers, per-level columns are named by the level.

- every output that counts rows (``n``, ``<name>_n``, ``<name>_bin<k>_n``, a
  long table's ``n``) and ``coverage_gap_groups`` is an integer column on every
  backend, null where the group is invalid (pandas: ``int64``, or the nullable
  ``Int64`` when a group is null);
- per-level wide columns are ``<name>_level<level_name(level)>...``: the 0.9
  columns keep their names whatever other levels are present;
- the wide ``reliability`` has ``reliability_bin<k>`` (the observed frequency),
  like ``ssc_bin<k>``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pytest

import conformal_frames as cf
from conformal_frames.engine import evaluate_one
from conformal_frames.inputs.levels import level_name
from conformal_frames.namespace import METRIC_FACTORIES
from helpers import assert_close, to_pandas

RNG = np.random.default_rng(0)
N = 30  # groups a, b of 12 rows; group c of 6 rows, its first row invalid for every metric
Y = RNG.normal(size=N)
MU = Y + RNG.normal(size=N) * 0.3
DATA: dict[str, Any] = {
    "g": ["a"] * 12 + ["b"] * 12 + ["c"] * 6,
    "t": list(range(N)),
    "y": Y,
    "lo": Y - 1.0 + RNG.normal(size=N) * 0.5,
    "hi": Y + 1.0 + RNG.normal(size=N) * 0.5,
    "mu": MU,
    "sd": np.ones(N),
    "label": (RNG.random(N) < 0.5).astype(float),
    "score": RNG.random(N),
    "other": RNG.random(N),
    "label3": RNG.integers(0, 3, N),
    "p0": RNG.random(N),
    "p1": RNG.random(N),
    "p2": RNG.random(N),
    "m0": RNG.random(N) < 0.6,
    "m1": RNG.random(N) < 0.6,
    "m2": RNG.random(N) < 0.6,
    "x1": RNG.normal(size=N),
    "x2": RNG.normal(size=N),
    "q05": MU - 1.64,
    "q10": MU - 1.28,
    "q50": MU,
    "q90": MU + 1.28,
    "q95": MU + 1.64,
}
_R = RNG.dirichlet(np.ones(3), N)  # class probabilities summing to 1 (rps)
DATA |= {f"r{k}": _R[:, k] for k in range(3)}
BAD = 24  # the invalid row of group c: NaN in every float column, a label outside the classes
for column, values in DATA.items():
    if isinstance(values, np.ndarray) and values.dtype == float:
        DATA[column] = np.where(np.arange(N) == BAD, np.nan, values)
DATA["label3"] = np.where(np.arange(N) == BAD, 7, DATA["label3"])

M, P, C = ["m0", "m1", "m2"], ["p0", "p1", "p2"], [0, 1, 2]
Q = {0.1: "q10", 0.5: "q50", 0.9: "q90"}
CALLS: dict[str, Callable[[], cf.Metric]] = {
    "auarc": lambda: cf.auarc("label", "score"),
    "auroc": lambda: cf.auroc("label", "score"),
    "brier": lambda: cf.brier("label", "score"),
    "christoffersen_test": lambda: cf.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by="t"),
    "classwise_ece": lambda: cf.classwise_ece("label3", P, classes=C, n_bins=3),
    "coverage": lambda: cf.coverage("y", "lo", "hi"),
    "coverage_gap": lambda: cf.coverage_gap("y", "lo", "hi", groups="label3", confidence_level=0.9),
    "coverage_test": lambda: cf.coverage_test("y", "lo", "hi", confidence_level=0.9),
    "crps": lambda: cf.crps("y", mean="mu", std="sd"),
    "cwc": lambda: cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
    "diebold_mariano_test": lambda: cf.diebold_mariano_test("y", "score", "other", order_by="t", small_sample=None),
    "ece": lambda: cf.ece("label", "score", n_bins=3),
    "efficiency_criteria": lambda: cf.efficiency_criteria("label3", P, classes=C, confidence_level=0.75),
    "empty_rate": lambda: cf.empty_rate(M, classes=C),
    "hsic": lambda: cf.hsic("y", "lo", "hi"),
    "interval_coverage": lambda: cf.interval_coverage("y", intervals={0.8: ("q10", "q90"), 0.9: ("q05", "q95")}),
    "ks_test": lambda: cf.ks_test("label", "score"),
    "kuiper_test": lambda: cf.kuiper_test("label", "score"),
    "kupiec_test": lambda: cf.kupiec_test("y", "lo", "hi", confidence_level=0.9),
    "longest_miss_run": lambda: cf.longest_miss_run("y", "lo", "hi", order_by="t"),
    "mce": lambda: cf.mce("label", "score", n_bins=3),
    "pinball_loss": lambda: cf.pinball_loss("y", quantiles=Q, per_level=True),
    "pit_histogram": lambda: cf.pit_histogram("y", mean="mu", std="sd", n_bins=3),
    "pit_test": lambda: cf.pit_test("y", mean="mu", std="sd"),
    "quantile_coverage": lambda: cf.quantile_coverage("y", quantiles=Q),
    "quantile_crps": lambda: cf.quantile_crps("y", quantiles=Q),
    "reliability": lambda: cf.reliability("label", "score", n_bins=3),
    "score_decomposition": lambda: cf.score_decomposition("label", "score"),
    "set_coverage": lambda: cf.set_coverage("label3", M, classes=C),
    "set_size": lambda: cf.set_size(M, classes=C),
    "set_ssc": lambda: cf.set_ssc("label3", M, classes=C),
    "set_ssc_score": lambda: cf.set_ssc_score("label3", M, classes=C),
    "singleton_rate": lambda: cf.singleton_rate(M, classes=C),
    "smooth_ece": lambda: cf.smooth_ece("label", "score"),
    "spiegelhalter_test": lambda: cf.spiegelhalter_test("label", "score"),
    "ssc": lambda: cf.ssc("y", "lo", "hi", n_bins=2),
    "ssc_score": lambda: cf.ssc_score("y", "lo", "hi", n_bins=2),
    "top_label_ece": lambda: cf.top_label_ece("label3", P, classes=C, n_bins=3),
    "confidence_ece": lambda: cf.confidence_ece("label3", P, classes=C, n_bins=3),
    "width": lambda: cf.width("lo", "hi"),
    "winkler": lambda: cf.winkler("y", "lo", "hi", confidence_level=0.9),
    "wis": lambda: cf.wis("y", quantiles=Q),
    "bias": lambda: cf.bias("y", "mu"),
    "mae": lambda: cf.mae("y", "mu"),
    "mape": lambda: cf.mape("y", "mu"),
    "mase": lambda: cf.mase("y", "mu", scale="sd"),
    "mse": lambda: cf.mse("y", "mu"),
    "rmse": lambda: cf.rmse("y", "mu"),
    "rmsse": lambda: cf.rmsse("y", "mu", scale="sd"),
    "scaled_crps": lambda: cf.scaled_crps("y", quantiles=Q),
    "scaled_pinball": lambda: cf.scaled_pinball("y", quantiles=Q, scale="sd"),
    "smape": lambda: cf.smape("y", "mu"),
    "log_loss": lambda: cf.log_loss("label", "score"),
    "log_score": lambda: cf.log_score("y", mean="mu", std="sd"),
    "path_coverage": lambda: cf.path_coverage("y", "lo", "hi", path="label3"),
    "worst_slab_coverage": lambda: cf.worst_slab_coverage("y", "lo", "hi", features=["x1", "x2"], n_directions=20),
    # issue 41, item 1: regression uncertainty calibration
    "sharpness": lambda: cf.sharpness("sd"),
    "ence": lambda: cf.ence("y", mean="mu", std="sd", n_bins=3),
    "ence_table": lambda: cf.ence_table("y", mean="mu", std="sd", n_bins=3),
    "uce": lambda: cf.uce("y", mean="mu", std="sd", n_bins=3),
    "mean_absolute_calibration_error": lambda: cf.mean_absolute_calibration_error("y", mean="mu", std="sd", n_levels=5),
    "root_mean_squared_calibration_error": lambda: cf.root_mean_squared_calibration_error(
        "y", mean="mu", std="sd", n_levels=5
    ),
    "miscalibration_area": lambda: cf.miscalibration_area("y", mean="mu", std="sd", n_levels=5),
    "uncertainty_calibration_curve": lambda: cf.uncertainty_calibration_curve("y", mean="mu", std="sd", n_levels=5),
    "adversarial_group_calibration": lambda: cf.adversarial_group_calibration(
        "y", mean="mu", std="sd", n_group_sizes=3, n_trials=2, n_draws=2
    ),
    # issue 41, items 3 and 4: multivariate and categorical scores
    "rps": lambda: cf.rps("label3", ["r0", "r1", "r2"], classes=C),
    "energy_score": lambda: cf.energy_score(["y", "mu"], [["lo", "hi"], ["q10", "q90"]]),
    "variogram_score": lambda: cf.variogram_score(["y", "mu"], [["lo", "hi"], ["q10", "q90"]], estimator="fair"),
}
#: integer outputs that do not end in ``_n``
OTHER_COUNTS = {"coverage_gap_groups", "path_coverage_n_paths", "path_coverage_n_single"}


def test_every_factory_is_in_the_catalogue() -> None:
    assert set(CALLS) == set(METRIC_FACTORIES)


def _is_count(column: str) -> bool:
    return column == "n" or column.endswith(("_n", "_n_crossing")) or column in OTHER_COUNTS


def _evaluate(constructor: Any, metric: cf.Metric) -> nw.DataFrame:
    try:
        out = cf.evaluate(constructor(DATA), metric, by="g", invalid="null")
    except NotImplementedError as exc:
        pytest.skip(f"{metric.output_name} on this backend: {exc}")
    frame = nw.from_native(out)
    return frame.collect() if isinstance(frame, nw.LazyFrame) else frame


#: on Spark, one metric per kind of count column (the others repeat the same query shapes)
SPARK_NAMES = [{"name": n} for n in ("interval_coverage", "ssc", "reliability", "coverage_gap", "pinball_loss")]


@pytest.mark.spark_cases(SPARK_NAMES)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_counts_are_integer_and_null_where_invalid(constructor: Any, name: str) -> None:
    metric = CALLS[name]()
    frame = _evaluate(constructor, metric)
    counts = [c for c in frame.columns if _is_count(c)]
    assert "n" in counts
    for c in counts:
        assert frame.schema[c].is_integer(), (c, frame.schema[c])
    values = to_pandas(frame.to_native())
    invalid = values["n_invalid"] > 0
    assert list(values["g"]) == ["a", "b", "c"]
    for c in counts:
        if c in ("n", "n_invalid"):
            assert values[c].notna().all()
        elif invalid.any():
            assert values.loc[invalid, c].isna().all(), c
            assert values.loc[~invalid, c].notna().all(), c


@pytest.mark.spark_cases(SPARK_NAMES)
@pytest.mark.parametrize("name", sorted(n for n in CALLS if CALLS[n]().long))
def test_long_tables_count_in_integers(constructor: Any, name: str) -> None:
    metric = CALLS[name]()
    try:
        out = evaluate_one(constructor(DATA), metric, by="g", invalid="null")
    except NotImplementedError as exc:
        pytest.skip(str(exc))
    frame = nw.from_native(out)
    frame = frame.collect() if isinstance(frame, nw.LazyFrame) else frame
    assert frame.schema["n"].is_integer(), frame.schema["n"]


def test_pandas_counts_are_int64_or_nullable_int64() -> None:
    import pandas as pd

    valid = {k: v[:BAD] for k, v in DATA.items()}
    metric = cf.ssc("y", "lo", "hi", n_bins=2)
    out = cf.evaluate(pd.DataFrame(valid), metric, by="g")
    assert out["ssc_bin0_n"].dtype == np.int64
    out = cf.evaluate(pd.DataFrame(DATA), metric, by="g", invalid="null")
    assert out["ssc_bin0_n"].dtype == pd.Int64Dtype()
    assert out["ssc_bin0_n"].isna().tolist() == [False, False, True]


# ---------------------------------------------------------------------------
# per-level columns: named by the level's value
# ---------------------------------------------------------------------------
def test_level_name_is_the_percentage_without_dots() -> None:
    assert [level_name(t) for t in (0.1, 0.5, 0.9, 0.95, 0.975, 0.025, 0.005, 1e-5)] == [
        "10",
        "50",
        "90",
        "95",
        "97_5",
        "2_5",
        "0_5",
        "0_001",
    ]
    levels = np.random.default_rng(1).random(20_000)
    names = {level_name(t) for t in levels}
    assert len(names) == len(set(levels.tolist()))
    assert all(c.isdigit() or c == "_" for name in names for c in name)
    with pytest.raises(ValueError, match=r"a level must be in \(0, 1\), got 1.5"):
        level_name(1.5)


def _wide(constructor: Any, *metrics: cf.Metric) -> Any:
    data = {k: v[:BAD] for k, v in DATA.items()}
    return to_pandas(cf.evaluate(constructor(data), *metrics, by="g"))


def test_a_level_keeps_its_columns_whatever_other_levels(constructor: Any) -> None:
    alone = _wide(
        constructor,
        cf.interval_coverage("y", intervals={0.9: ("q05", "q95")}),
        cf.quantile_coverage("y", quantiles={0.9: "q90"}),
        cf.pinball_loss("y", quantiles={0.9: "q90"}, per_level=True),
    )
    more = _wide(
        constructor,
        cf.interval_coverage("y", intervals={0.8: ("q10", "q90"), 0.9: ("q05", "q95")}),
        cf.quantile_coverage("y", quantiles={0.05: "q05", 0.5: "q50", 0.9: "q90"}),
        cf.pinball_loss("y", quantiles={0.1: "q10", 0.9: "q90"}, per_level=True),
    )
    level90 = [c for c in alone.columns if "level90" in c]
    assert level90 == [
        "interval_coverage_level90",
        "interval_coverage_level90_ci_low",
        "interval_coverage_level90_ci_high",
        "interval_coverage_level90_width",
        "interval_coverage_level90_winkler",
        "quantile_coverage_level90",
        "quantile_coverage_level90_ci_low",
        "quantile_coverage_level90_ci_high",
        "quantile_coverage_level90_deviation",
        "pinball_loss_level90",
    ]
    for c in level90:
        assert_close(more[c], alone[c], what=c)
    assert "quantile_coverage_level5_deviation" in more.columns and "pinball_loss_level10" in more.columns
    assert not any("." in c for c in more.columns)


def test_long_form_levels_are_the_groups_own(constructor: Any) -> None:
    rows = [(g, t, q) for g in ("a", "b") for t, q in ((0.1, "q10"), (0.9, "q90"))]
    data = {
        "g": [g for g, _, _ in rows for _ in range(12)],
        "tau": [t for _, t, _ in rows for _ in range(12)],
        "y": [v for g, _, _ in rows for v in DATA["y"][(0 if g == "a" else 12) : (12 if g == "a" else 24)]],
        "q": [v for g, _, c in rows for v in DATA[c][(0 if g == "a" else 12) : (12 if g == "a" else 24)]],
    }
    metric = cf.quantile_coverage("y", quantiles="q", quantile_level="tau")
    out = to_pandas(cf.evaluate(constructor(data), metric, by=["g", "tau"]))
    assert [c for c in out.columns if c.startswith("quantile_coverage_level")] == [
        "quantile_coverage_level",
        "quantile_coverage_level_ci_low",
        "quantile_coverage_level_ci_high",
        "quantile_coverage_level_deviation",
    ]
    wide = _wide(constructor, cf.quantile_coverage("y", quantiles={0.1: "q10", 0.9: "q90"}))
    assert_close(
        out["quantile_coverage_level"],
        wide[["quantile_coverage_level10", "quantile_coverage_level90"]].to_numpy().ravel(),
        what="coverage",
    )


# ---------------------------------------------------------------------------
# reliability: the bin's frequency is <name>_bin<m>, like ssc_bin<m>
# ---------------------------------------------------------------------------
def test_wide_reliability_bins_are_the_frequencies(constructor: Any) -> None:
    metric = cf.reliability("label", "score", n_bins=3)
    wide = _wide(constructor, metric, cf.ssc("y", "lo", "hi", n_bins=2))
    bins = [c for c in wide.columns if c.startswith("reliability_bin0")]
    assert bins == [
        "reliability_bin0_mean_score",
        "reliability_bin0",
        "reliability_bin0_ci_low",
        "reliability_bin0_ci_high",
        "reliability_bin0_n",
    ]
    assert "ssc_bin0" in wide.columns
    data = {k: v[:BAD] for k, v in DATA.items()}
    long = to_pandas(evaluate_one(constructor(data), metric, by="g"))
    for (g, m), row in long.set_index(["g", "bin"]).iterrows():
        at = wide.set_index("g").loc[g]
        assert_close(row["frequency"], at[f"reliability_bin{m}"], what="frequency")
        assert_close(row["frequency_ci_low"], at[f"reliability_bin{m}_ci_low"], what="ci_low")
        assert row["n"] == at[f"reliability_bin{m}_n"]


@pytest.mark.parametrize("fast", [True, False])
def test_pandas_paths_give_the_same_count_dtypes(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    # eager pandas runs on polars when it can (engine._pandas_polars); both paths return the same frame
    import pandas as pd

    from conformal_frames.engine import _pandas_polars

    monkeypatch.setattr(_pandas_polars, "ENABLED", fast)
    metrics = [CALLS[name]() for name in ("ssc", "interval_coverage", "reliability", "coverage_gap", "set_ssc")]
    out = cf.evaluate(pd.DataFrame(DATA), *metrics, by="g", invalid="null")
    counts = [c for c in out.columns if _is_count(c) and c not in ("n", "n_invalid")]
    assert len(counts) == 2 + 2 + 3 + 2 + 4  # interval_coverage: _n and _n_crossing
    assert {str(out[c].dtype) for c in counts} == {"Int64"}
    assert out.loc[2, counts].isna().all() and out.loc[:1, counts].notna().all(axis=None)
    assert out["n"].dtype == np.int64


FRAME_CALLS: dict[str, Callable[[Any], Any]] = {
    "naive_scale": lambda f: cf.naive_scale(f, "y", by="g", order_by="t"),
    "relative_skill": lambda f: cf.relative_skill(f, cf.mae("y", "mu"), model="label3", by="g"),
    "pairwise_comparison": lambda f: cf.pairwise_comparison(
        f, cf.mae("y", "mu"), model="label3", by="g", forecast_unit="t", test=None
    ),
    "corp_reliability": lambda f: cf.corp_reliability(f, "label", "score", n_resamples=5, by="g"),
    "cumulative_differences": lambda f: cf.cumulative_differences(f, "label", "score", by="g"),
    "excess_risk_target_coverage": lambda f: cf.excess_risk_target_coverage(
        f, "y", "lo", "hi", features=["x1", "x2"], confidence_level=0.9, by="g"
    ),
    "find_slices": lambda f: cf.find_slices(
        f, cf.coverage_test("y", "lo", "hi", confidence_level=0.9), features=["g"], min_size=1
    ),
}


def test_every_frame_function_is_in_the_catalogue() -> None:
    from conformal_frames.namespace import FRAME_FUNCTIONS

    assert set(FRAME_CALLS) == set(FRAME_FUNCTIONS) - {"report"}


@pytest.mark.parametrize("name", sorted(FRAME_CALLS))
def test_frame_functions_count_in_integers(constructor: Any, name: str) -> None:
    try:
        out = FRAME_CALLS[name](constructor({k: v[:BAD] for k, v in DATA.items()}))
    except NotImplementedError as exc:
        pytest.skip(str(exc))
    frame = nw.from_native(out)
    frame = frame.collect() if isinstance(frame, nw.LazyFrame) else frame
    assert frame.schema["n"].is_integer(), frame.schema["n"]
