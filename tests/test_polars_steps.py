"""``conformal_frames.polars``: metrics with a numpy step, compiled to one polars UDF per expression.

The parity over every context and both policies is ``tests/test_polars_expr.py``'s (these
metrics compile, so it crosses them); here: what the UDF adds (two UDFs in one query are
not merged, outputs that read other groups stay out, seeds, weights, thread safety) and
that ``cf.evaluate`` keeps its own path for them.
"""

from __future__ import annotations

import polars as pl
import pytest

import conformal_frames as cf
import conformal_frames.polars as cfx
from conformal_frames.engine import _native_steps, _polars_native
from test_polars_expr import FRAME, _assert_same

STEPPED = {
    "smooth_ece": lambda: cf.smooth_ece("label", "score"),
    "score_decomposition": lambda: cf.score_decomposition("label", "score"),
    "hsic": lambda: cf.hsic("y", "lo", "hi"),
    "worst_slab_coverage": lambda: cf.worst_slab_coverage("y", "lo", "hi", features=["x1", "x2"], delta=0.3),
    "adversarial_group_calibration": lambda: cf.adversarial_group_calibration(
        "y", mean="mu", std="sd", n_group_sizes=2, n_trials=2, n_draws=2
    ),
    "coverage_test": lambda: cf.coverage_test("y", "lo", "hi", confidence_level=0.9),
}


def _fields(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    return frame.unnest(name) if isinstance(frame.schema[name], pl.Struct) else frame


def test_two_udfs_on_the_same_rows_are_not_merged() -> None:
    """polars prints both as ``python_udf()`` over the same rows: each keeps its own function."""
    smooth, decomposition = cfx.smooth_ece("label", "score"), cfx.score_decomposition("label", "score", name="d")
    expected = cf.evaluate(
        FRAME,
        cf.smooth_ece("label", "score"),
        cf.score_decomposition("label", "score").alias("d"),
        by="g",
        invalid="null",
    )
    for lazy in (False, True):
        query = FRAME.lazy() if lazy else FRAME
        got = query.group_by("g").agg(smooth, decomposition, smooth.alias("again")).sort("g")
        got = _fields(got.collect() if isinstance(got, pl.LazyFrame) else got, "d")
        _assert_same(got, expected, ("smooth_ece", "d", "d_miscalibration"), f"group_by lazy={lazy}")
        _assert_same(got.rename({"smooth_ece": "x", "again": "smooth_ece"}), expected, ("smooth_ece",), "again")
    fused = FRAME.group_by("g").agg(cfx.metrics(cf.smooth_ece("label", "score"), cf.hsic("y", "lo", "hi"))).sort("g")
    both = cf.evaluate(FRAME, cf.smooth_ece("label", "score"), cf.hsic("y", "lo", "hi"), by="g", invalid="null")
    _assert_same(fused.unnest("metrics"), both, ("smooth_ece", "hsic"), "cfx.metrics")
    # with a sort-based table and a sum in one struct
    mixed = [cf.ks_test("label", "score"), cf.smooth_ece("label", "score"), cf.coverage("y", "lo", "hi")]
    got = FRAME.lazy().group_by("g").agg(cfx.metrics(*mixed, invalid="drop")).sort("g").collect().unnest("metrics")
    expected = cf.evaluate(FRAME, *mixed, by="g", invalid="drop")
    _assert_same(got, expected, ("ks_test_pvalue", "smooth_ece", "coverage_ci_low"), "mixed")
    one = FRAME.lazy().select(smooth, decomposition).collect()
    _assert_same(
        _fields(one, "d"),
        cf.evaluate(FRAME, cf.score_decomposition("label", "score").alias("d"), invalid="null"),
        ("d",),
        "select",
    )


def test_coverage_test_leaves_out_what_reads_other_groups() -> None:
    """Holm / BH p-values (and the flag they decide) adjust over every group: not a field."""
    got = FRAME.group_by("g").agg(cfx.coverage_test("y", "lo", "hi", confidence_level=0.9)).sort("g")
    fields = got.unnest("coverage_test").columns[1:]
    assert fields == ["coverage_test", "coverage_test_ci_low", "coverage_test_ci_high", "coverage_test_pvalue"]
    # correction="none": the flag reads the group's own p-value, a field equal to evaluate's
    metric = cf.coverage_test("y", "lo", "hi", confidence_level=0.9, correction="none", method="clopper-pearson")
    got = FRAME.group_by("g").agg(cfx.to_expr(metric)).sort("g").unnest("coverage_test")
    expected = cf.evaluate(FRAME, metric, by="g", invalid="null")
    assert got.schema["coverage_test_flag"] == pl.Boolean
    assert got["coverage_test_flag"].to_list() == expected["coverage_test_flag"].to_list()
    _assert_same(got, expected, ("coverage_test_pvalue", "coverage_test_ci_low", "coverage_test_ci_high"), "cp")


@pytest.mark.parametrize("policy", ["null", "drop"])
def test_adjusted_over_the_aggregated_groups_is_evaluates(policy: str) -> None:
    metric = cf.coverage_test("y", "lo", "hi", confidence_level=0.9)
    per_group = FRAME.lazy().group_by("g").agg(cfx.to_expr(metric, invalid=policy)).sort("g").unnest("coverage_test")  # type: ignore[arg-type]
    got = per_group.with_columns(
        cfx.adjusted("coverage_test_pvalue").alias("coverage_test_pvalue_holm"),
        cfx.adjusted(pl.col("coverage_test_pvalue"), "bh").alias("coverage_test_pvalue_bh"),
    ).collect()
    expected = cf.evaluate(FRAME, metric, by="g", invalid=policy)
    assert got["coverage_test_pvalue"].null_count() > 0 or policy == "drop"  # a null p-value is left out
    _assert_same(got, expected, ("coverage_test_pvalue_holm", "coverage_test_pvalue_bh"), policy)
    flag = got.select((pl.col("coverage_test_pvalue_holm") < 0.05).alias("flag"))["flag"]
    assert flag.to_list() == expected["coverage_test_flag"].to_list()
    with pytest.raises(ValueError, match="'holm' or 'bh'"):
        cfx.adjusted("p", "bonferroni")  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["null", "drop"])
def test_seeds_weights_and_counts_equal_evaluate(policy: str) -> None:
    metrics = [
        cf.worst_slab_coverage("y", "lo", "hi", features=["x1"], delta=0.4, n_directions=3, seed=7),
        cf.adversarial_group_calibration("y", mean="mu", std="sd", n_group_sizes=2, n_trials=3, n_draws=2, seed=5),
        cf.score_decomposition("label", "score", weights="w", scoring_rule="log"),
        cf.score_decomposition("label", "score", counts="k").alias("counted"),
        cf.coverage_test("y", "lo", "hi", confidence_level=0.8, weights="w", alternative="two-sided"),
    ]
    for metric in metrics:
        expr = cfx.to_expr(metric, invalid=policy)  # type: ignore[arg-type]
        got = _fields(FRAME.lazy().group_by("g").agg(expr).sort("g").collect(), metric.output_name)
        expected = cf.evaluate(FRAME, metric, by="g", invalid=policy)
        outputs = tuple(c for c in got.columns if c != "g")
        _assert_same(got, expected, outputs, f"{metric.output_name} {policy}")


def test_many_groups_share_step_state_safely() -> None:
    """Every output of score_decomposition / adversarial groups comes from one memo per evaluation; polars
    may call the UDF from several threads (the steps run under a lock)."""
    frame = pl.concat([FRAME.with_columns(pl.col("g") + f"_{i}") for i in range(8)])
    metric = cf.score_decomposition("label", "score")
    got = frame.group_by("g").agg(cfx.to_expr(metric)).sort("g").unnest("score_decomposition")
    expected = cf.evaluate(frame, metric, by="g", invalid="null")
    _assert_same(got, expected, tuple(c for c in got.columns if c != "g"), "48 groups")


@pytest.mark.parametrize("name", sorted(STEPPED))
def test_evaluate_keeps_its_own_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cf.evaluate`` never runs the UDF (measured slower grouped: it vectorizes its steps over the groups)."""
    metric = STEPPED[name]()
    assert _polars_native._prepare((metric,), "null") is None

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("evaluate compiled a numpy step to a polars UDF")

    monkeypatch.setattr(_native_steps, "compile_steps", refuse)
    monkeypatch.setattr(_polars_native, "MIN_EAGER_ROWS", 0)
    cf.evaluate(FRAME.lazy(), metric, by="g").collect()
