"""The summary format: declared state names (version 2), the version-1 reader, one build per call.

- every mergeable metric's state columns are pinned in ``tests/data/summary_state_v2.json``:
  renaming a statistic (a structural key in ``inputs/`` or a family) fails here, and is
  a format change that needs a version bump and a reader for the old names.  After a
  deliberate change: ``CF_UPDATE_GOLDEN=1 python -m pytest tests/test_summary_format.py``;
- summaries written by 0.3 (version 1, ``tests/data/summary_v1/``) finalize to the
  numbers 0.3 gave, on every backend;
- ``summarize`` and ``finalize`` build each metric once.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
from conformal_frames.engine import Metric
from helpers import assert_close, to_pandas
from test_output_contract import CALLS, DATA

HERE = Path(__file__).parent / "data"
GOLDEN = HERE / "summary_state_v2.json"
V1 = HERE / "summary_v1"
W = {
    "coverage_w": lambda: cf.coverage("y", "lo", "hi", weights="w").alias("coverage_w"),
    "brier_w": lambda: cf.brier("label", "score", weights="w").alias("brier_w"),
    "ks_test_w": lambda: cf.ks_test("label", "score", weights="w").alias("ks_test_w"),
    "mae_w": lambda: cf.mae("y", "mu", weights="w").alias("mae_w"),
    "wis_w": lambda: cf.wis("y", quantiles={0.1: "q10", 0.5: "q50", 0.9: "q90"}, weights="w").alias("wis_w"),
    "mae_k": lambda: cf.mae("y", "mu", counts="k").alias("mae_k"),
    # several outputs (issue 41): the joint covered row and the box volume
    "coverage_joint": lambda: cf.coverage(["y", "mu"], ["lo", "q10"], ["hi", "q90"]).alias("coverage_joint"),
    "width_joint": lambda: cf.width(["lo", "q10"], ["hi", "q90"]).alias("width_joint"),
    # issue 41, items 3 and 4: the multiclass forms of log_loss and brier
    "log_loss_classes": lambda: cf.log_loss("label3", ["r0", "r1", "r2"], classes=[0, 1, 2]).alias("log_loss_classes"),
    "brier_classes": lambda: cf.brier("label3", ["r0", "r1", "r2"], classes=[0, 1, 2]).alias("brier_classes"),
    "energy_score_fair_w": lambda: cf.energy_score(
        ["y", "mu"], [["lo", "hi"], ["q10", "q90"]], estimator="fair", weights="w"
    ).alias("energy_score_fair_w"),
    "energy_score_member_weights": lambda: cf.energy_score(
        ["y", "mu"], [["lo", "hi"], ["q10", "q90"]], member_weights=["sd", "score"]
    ).alias("energy_score_member_weights"),
    "variogram_score_p1": lambda: cf.variogram_score(
        ["y", "mu"], [["lo", "hi"], ["q10", "q90"]], p=1.0, pair_weights=[[0, 1], [0.5, 0]]
    ).alias("variogram_score_p1"),
}
ALL = {**CALLS, **W}


def _frame() -> pl.DataFrame:
    n = len(DATA["g"])
    return pl.DataFrame(DATA, strict=False).with_columns(
        day=pl.Series(np.arange(n) % 3, dtype=pl.Int64),
        w=pl.Series(1.0 + (np.arange(n) % 4) / 2),
        k=pl.Series(np.arange(n) % 3, dtype=pl.Int64),
    )


def _schema() -> dict[str, Any]:
    return dict(nw.from_native(_frame()).collect_schema())


def _states() -> dict[str, list[str]]:
    """Every mergeable metric's state columns, by the definition."""
    schema = _schema()
    out = {}
    for name, call in ALL.items():
        spec = call().definition(schema, ["g"])
        if spec.mergeable:
            out[name] = list(spec.states)
    return out


def test_every_mergeable_metric_keeps_its_state_names() -> None:
    states = _states()
    if os.environ.get("CF_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(states, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(GOLDEN.read_text())
    assert sorted(states) == sorted(pinned), "the mergeable metrics changed"
    for name, columns in states.items():
        assert columns == pinned[name], f"{name}: its summary state columns changed (a format change)"


def test_summary_columns_are_the_declared_names_without_hashes() -> None:
    frame = _frame()
    metrics = [ALL[n]() for n in _states() if n != "mae_k"]
    stats = cf.summarize(frame, *metrics, by=["g", "day"], invalid="null")
    assert set(stats["cf_version"].to_list()) == {cf.summaries.SCHEMA_VERSION} == {2}
    state_columns = [c for c in stats.columns if c.startswith(("cf_sum", "cf_min", "cf_max"))]
    declared = {s for m in metrics for s in m.definition(_schema(), ["g", "day"]).states}
    assert set(state_columns) == declared
    for c in state_columns:
        assert re.match(r"cf_(sum|min|max)__[A-Za-z%~(]", c), c
        assert not re.search(r"_[0-9a-f]{10}$", c), c  # no hash
        assert "." not in c, c  # Spark reads a dot as a struct field
    assert "cf_sum__covered[y,lo,hi]" in state_columns
    cells = stats.filter(pl.col("cf_cell").is_not_null())["cf_cell"].unique().sort().to_list()
    # pit_test's cells (the Gaussian PIT), KS/Kuiper's, AUROC's
    # ... and ence / uce's (issue 41: the cells of the predicted std)
    assert cells == ["gauss_pit[gauss_z[y,mu,sd]]", "score[score]", "std[sd]", "value[score]"]


def _expected(policy: str) -> dict[str, Any]:
    return json.loads((V1 / "expected.json").read_text())[policy]


def _finalized(stats: Any, metric: Metric, by: str | None) -> Any:
    return to_pandas(cf.finalize(stats, metric, by=by))


#: metrics whose defaults changed since 0.3 (issue 38): the call that gives 0.3's numbers
AS_IN_0_3 = {
    "set_ssc_score": lambda: cf.set_ssc_score("label3", ["m0", "m1", "m2"], classes=[0, 1, 2], include_empty=True),
    "spiegelhalter_test": lambda: cf.spiegelhalter_test("label", "score", alternative="greater"),
}
#: outputs 0.3 had and this release names otherwise (the two-sided p-value is now the p-value)
RENAMED = {"spiegelhalter_test_pvalue_two_sided"}


def _check(actual: Any, records: list[dict[str, Any]], name: str) -> None:
    expected = {c: [r[c] for r in records] for c in records[0] if c not in RENAMED}
    if name in AS_IN_0_3:  # new outputs beside 0.3's
        actual = actual[[c for c in actual.columns if c in expected]]
    assert list(actual.columns) == list(expected), name
    for c, values in expected.items():
        if c == "g":
            assert actual[c].astype(str).tolist() == values, name
        else:
            assert_close(actual[c], [np.nan if v is None else v for v in values], what=f"{name}.{c}")


V1_FILES = {"null": "summary.parquet", "drop": "drop.parquet", "counts": "counts.parquet"}
W1 = {
    "coverage_k": lambda: cf.coverage("y", "lo", "hi", counts="k").alias("coverage_k"),
    "ks_test_k": lambda: cf.ks_test("label", "score", counts="k").alias("ks_test_k"),
}


@pytest.mark.parametrize("policy", sorted(V1_FILES))
def test_version_1_summaries_finalize_to_the_numbers_of_0_3(policy: str) -> None:
    stats = pl.read_parquet(V1 / V1_FILES[policy])
    assert set(stats["cf_version"].to_list()) == {1}
    for name, expected in _expected(policy).items():
        metric = {**ALL, **W1, **AS_IN_0_3}[name]()
        _check(_finalized(stats, metric, "g"), expected["by_g"], name)
        _check(_finalized(stats, metric, None), expected["all"], name)


#: one metric of each kind of state on the other backends: sums, min/max, cells, lists of levels
V1_ON_BACKENDS = ["coverage", "cwc", "ks_test_w", "wis", "set_ssc", "spiegelhalter_test"]


def test_version_1_summaries_finalize_on_every_backend(constructor: Any) -> None:
    # groups a and b: on pandas a NaN statistic of the invalid group c reads as a missing
    # one (n_invalid 2 there, 1 elsewhere; its metrics are null on every backend)
    stats = pl.read_parquet(V1 / "summary.parquet").filter(pl.col("g") != "c")
    native = constructor(stats.to_dict(as_series=False))
    expected = _expected("null")
    for name in V1_ON_BACKENDS:
        out = cf.finalize(native, {**ALL, **AS_IN_0_3}[name](), by="g")
        frame = nw.from_native(out)
        frame = frame.collect() if isinstance(frame, nw.LazyFrame) else frame
        _check(to_pandas(frame.to_native()), expected[name]["by_g"][:2], name)


def test_version_1_summaries_merge_and_stay_version_1() -> None:
    stats = pl.read_parquet(V1 / "summary.parquet")
    merged = cf.merge_summaries(stats, by="g")
    assert set(merged["cf_version"].to_list()) == {1}
    _check(_finalized(merged, ALL["coverage"](), "g"), _expected("null")["coverage"]["by_g"], "coverage")


def test_mixed_versions_are_refused() -> None:
    old = pl.read_parquet(V1 / "summary.parquet")
    new = cf.summarize(_frame(), cf.coverage("y", "lo", "hi"), by=["g", "day"], invalid="null")
    with pytest.raises(ValueError, match="mixes schema versions 1 and 2"):
        cf.finalize(pl.concat([old, new], how="diagonal"), cf.coverage("y", "lo", "hi"))


def test_summarize_and_finalize_build_each_metric_once(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = _frame().filter(pl.col("g") != "c")  # no invalid rows
    names = ["coverage", "ks_test", "cwc", "ece", "wis", "set_ssc", "brier_w"]
    builds: dict[str, int] = {}
    for name in names:
        cls = type(ALL[name]())
        original = cls.build

        def counted(self: Metric, q: Any, _original: Any = original) -> Any:
            builds[self.output_name] = builds.get(self.output_name, 0) + 1
            return _original(self, q)

        monkeypatch.setattr(cls, "build", counted)
    metrics = [ALL[n]() for n in names]
    stats = cf.summarize(frame, *metrics, by=["g", "day"], score_decimals=2)
    assert builds and set(builds.values()) == {1}, builds
    builds.clear()
    cf.finalize(stats, *metrics, by="g")
    assert set(builds.values()) == {1}, builds
    builds.clear()
    with pytest.raises(ValueError, match="do not merge exactly"):
        cf.summarize(frame, cf.coverage("y", "lo", "hi"), cf.ssc("y", "lo", "hi"), by="g")
    assert builds == {"coverage": 1}, builds
