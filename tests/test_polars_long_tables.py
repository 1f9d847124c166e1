"""``cfx.long_table``: a long-table metric as a list of structs per group equals ``df.conformal.<metric>``.

Every long-table metric of the catalogue that compiles (reliability, SSC and
set SSC bins, per-level coverage and pinball, the PIT histogram, ENCE bins,
the calibration curve, the efficiency criteria), both policies, grouped
(eager, lazy, streaming) and ungrouped: ``explode().struct.unnest()`` gives the
namespace's long frame (columns, order, dtypes, values at 1e-12).  Also: a string
``path=`` column (a table's grouping key keeps its dtype).
"""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import conformal_frames as cf
import conformal_frames.polars as cfx
from conformal_frames.engine import _native_steps
from conformal_frames.engine.execute import evaluate_one
from conformal_frames.engine.native import record
from test_polars_expr import ALL, COMPILED, FRAME, POLICIES

LONG = [n for n in COMPILED if ALL[n]().long and not _native_steps.has_steps(record([ALL[n]()], caller="test"))]


def _same(got: pl.DataFrame, expected: pl.DataFrame) -> None:
    assert_frame_equal(got, expected, rel_tol=1e-12, abs_tol=1e-12)


def test_the_long_tables_compile() -> None:
    assert {"reliability", "ssc", "quantile_coverage", "interval_coverage", "set_ssc"} <= set(LONG)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", LONG)
def test_exploded_list_of_structs_is_the_long_table(name: str, policy: str) -> None:
    metric = ALL[name]()
    out = metric.output_name
    expr = cfx.long_table(metric, invalid=policy)  # type: ignore[arg-type]
    expected = evaluate_one(FRAME, metric, by="g", invalid=policy)
    eager = FRAME.group_by("g").agg(expr).sort("g")
    _same(eager.explode(out).unnest(out), expected)
    if policy == "drop":  # the lazy engines once (the expression is the same)
        lazy = FRAME.lazy().group_by("g").agg(expr).sort("g").collect(engine="streaming")
        _same(lazy.explode(out).unnest(out), expected)
    whole = FRAME.filter(pl.col("g") != "g0") if policy == "null" else FRAME  # g0's bad row nulls everything
    _same(whole.select(expr).explode(out).unnest(out), evaluate_one(whole, metric, invalid=policy))


def test_a_list_of_structs_by_level_and_refusals() -> None:
    df = pl.DataFrame({"y": [0.0, 1.0, 1.0, 1.0], "s": [0.2, 0.4, 0.7, 0.9], "g": ["a", "a", "b", "b"]})
    expr = cfx.long_table(cf.reliability("y", "s", n_bins=2), name="rel")
    assert expr is cfx.long_table(cf.reliability("y", "s", n_bins=2), name="rel")  # memoized
    dtype = df.select(expr).schema["rel"]
    assert isinstance(dtype, pl.List)
    assert [f.name for f in dtype.inner.fields] == [  # type: ignore[attr-defined]
        "bin",
        "mean_score",
        "frequency",
        "frequency_ci_low",
        "frequency_ci_high",
        "n",
    ]
    over = df.with_columns(expr.over("g"))["rel"].list.len().to_list()
    assert over == [1, 1, 1, 1]  # each group fills one of the two bins
    with pytest.raises(TypeError, match="has no long table"):
        cfx.long_table(cf.coverage("y", "s", "s"))
    quantile = cf.reliability("y", "s", n_bins=2, strategy="quantile")  # rank bins (native_window_tables)
    got = df.select(cfx.long_table(quantile)).explode("reliability").unnest("reliability")
    _same(got, evaluate_one(df, quantile))


@pytest.mark.parametrize("policy", POLICIES)
def test_a_string_path_column_keeps_its_dtype(policy: str) -> None:
    """A column read only as a table's grouping key (path=) is not cast to Float64: string paths work."""
    df = FRAME.with_columns(series="s" + pl.col("k").cast(pl.String))
    metric = cf.path_coverage("y", "lo", "hi", path=["series", "day"])
    got = df.group_by("g").agg(cfx.to_expr(metric, invalid=policy)).sort("g").unnest("path_coverage")  # type: ignore[arg-type]
    expected = cf.evaluate(df, metric, by="g", invalid=policy)
    _same(got, expected.select(got.columns))


#: table forms the catalogue does not call, newly expressions (filtered, several keys, per-cell minimum,
#: the worst group's labels in their own dtype)
FORMS = {
    "ssc_w": lambda: cf.ssc("y", "lo", "hi", n_bins=2, weights="w"),
    "ssc_score_w": lambda: cf.ssc_score("y", "lo", "hi", weights="w"),
    "reliability_w": lambda: cf.reliability("label", "score", n_bins=3, weights="w"),
    "top_label_weighted": lambda: cf.top_label_ece("label3", ["p0", "p1", "p2"], n_bins=3, weighted=True),
    "top_label_w": lambda: cf.top_label_ece("label3", ["p0", "p1", "p2"], n_bins=3, weights="w"),
    "path_two_columns": lambda: cf.path_coverage("y", "lo", "hi", path=["label3", "day"]),
    "gap_strings": lambda: cf.coverage_gap("y", "lo", "hi", groups=["gs", "day"], confidence_level=0.9),
    "gap_weights": lambda: cf.coverage_gap("y", "lo", "hi", groups="gs", confidence_level=0.9, weights="w"),
}
#: a string group column (coverage_gap's worst group's label keeps its dtype)
WITH_STRINGS = FRAME.with_columns(gs=pl.format("s{}", pl.col("label3")))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("form", sorted(FORMS))
def test_other_table_forms_equal_evaluate(form: str, policy: str) -> None:
    metric = FORMS[form]()
    expr = cfx.to_expr(metric, invalid=policy)  # type: ignore[arg-type]
    got = WITH_STRINGS.lazy().group_by("g").agg(expr).sort("g").collect()
    got = got.unnest(metric.output_name) if isinstance(got.schema[metric.output_name], pl.Struct) else got
    expected = cf.evaluate(WITH_STRINGS, metric, by="g", invalid=policy)
    _same(got, expected.select(got.columns))


def test_evaluate_keeps_its_query_for_the_tables_of_the_new_rules() -> None:
    """Measured slower as expressions (docs/polars.md): evaluate's polars path declines them, not SSC."""
    from conformal_frames.engine import _polars_native

    for name in ("reliability", "top_label_ece", "pit_test", "path_coverage", "longest_miss_run"):
        assert _polars_native._prepare((ALL[name](),), "null") is None, name
    assert _polars_native._prepare((ALL["ssc"](),), "null") is not None
