"""Expressions as roles: a role that names a column also takes an expression, on every backend.

A narwhals expression (``nw.col("y") * 2``) works on every backend, a polars
expression (``pl.col("y") * 2``) on polars frames; either equals the metric of
the materialised column (1e-12), names its text in messages and summaries,
and never changes the caller's frame.
"""

from __future__ import annotations

from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest
from tests.helpers import assert_close, random_intervals, to_pandas

import conformal_frames as cf
from conformal_frames._roles import ExprColumn, as_role, output_name
from conformal_frames.errors import ExpressionBackendError, InvalidRowsError


def _data(seed: int = 0, n: int = 120) -> dict[str, Any]:
    """Interval, calibration, quantile, Gaussian, ensemble and set columns, with their derived twins."""
    d = random_intervals(seed, n=n, n_groups=3)
    rng = np.random.default_rng(seed + 1)
    n = len(d["y"])
    p = np.round(rng.uniform(size=n), 2)  # tied scores
    d |= {
        "p": p,
        "b": (rng.uniform(size=n) < p).astype(np.int64),
        "w": np.round(rng.uniform(0.5, 2.0, size=n), 1),
        "c": rng.integers(1, 4, size=n).astype(np.int64),
        "mu": d["y"] + np.round(rng.normal(size=n), 1),
        "sd": np.round(rng.uniform(0.5, 2.0, size=n), 1),
        "lab": rng.integers(0, 3, size=n).astype(np.int64),
    }
    for j in range(3):
        d[f"s{j}"] = np.round(rng.uniform(size=n), 2)
    d["q10"], d["q50"], d["q90"] = d["mu"] - 1.3 * d["sd"], d["mu"], d["mu"] + 1.3 * d["sd"]
    # the derived columns the expressions compute (same IEEE operations)
    d |= {
        "y2": d["y"] * 2,
        "lo_m": d["lo"] - 0.5,
        "hi_p": d["hi"] + 0.5,
        "p_h": d["p"] * 0.5,
        "w2": d["w"] * 2,
        "c1": d["c"] + 1,
        "q10m": d["q10"] - 0.1,
        "mu1": d["mu"] + 1,
        "sd2": d["sd"] * 2,
        "s0h": d["s0"] * 0.5,
        "lab1": d["lab"] + 1,
        **{f"in{j}": d[f"s{j}"] > 0.3 for j in range(3)},
    }
    return d


E = nw.col
#: (metric with expression roles, the same metric on the materialised columns)
CASES: dict[str, tuple[Any, Any]] = {
    "y_lo_hi": (cf.coverage(E("y") * 2, E("lo") - 0.5, E("hi") + 0.5), cf.coverage("y2", "lo_m", "hi_p")),
    "width_weights": (
        cf.width("lo", E("hi") + 0.5, weights=E("w") * 2),
        cf.width("lo", "hi_p", weights="w2"),
    ),
    "counts": (cf.coverage("y", "lo", "hi", counts=E("c") + 1), cf.coverage("y", "lo", "hi", counts="c1")),
    "winkler": (
        cf.winkler(E("y") * 2, "lo", "hi", confidence_level=0.9),
        cf.winkler("y2", "lo", "hi", confidence_level=0.9),
    ),
    "score": (cf.ece("b", E("p") * 0.5, weights=E("w") * 2), cf.ece("b", "p_h", weights="w2")),
    "sorted_score": (cf.ks_test(E("b"), E("p") * 0.5), cf.ks_test("b", "p_h")),
    "auroc": (cf.auroc("b", E("p") * 0.5), cf.auroc("b", "p_h")),
    "quantiles": (
        cf.pinball_loss("y", quantiles={0.1: E("q10") - 0.1, 0.5: "q50", 0.9: "q90"}),
        cf.pinball_loss("y", quantiles={0.1: "q10m", 0.5: "q50", 0.9: "q90"}),
    ),
    "intervals": (
        cf.interval_coverage("y", intervals={0.8: (E("lo") - 0.5, E("hi") + 0.5)}),
        cf.interval_coverage("y", intervals={0.8: ("lo_m", "hi_p")}),
    ),
    "gaussian": (cf.crps(E("y") * 2, mean=E("mu") + 1, std=E("sd") * 2), cf.crps("y2", mean="mu1", std="sd2")),
    "members": (cf.crps("y", samples=[E("s0") * 0.5, "s1", "s2"]), cf.crps("y", samples=["s0h", "s1", "s2"])),
    "sets": (
        cf.set_coverage("lab", [E(f"s{j}") > 0.3 for j in range(3)], classes=[0, 1, 2]),
        cf.set_coverage("lab", ["in0", "in1", "in2"], classes=[0, 1, 2]),
    ),
    "point": (cf.mae(E("y") * 2, "mu"), cf.mae("y2", "mu")),
    # the worst group's label column is named by the expression's output name: coverage_gap_worst_lab1
    "groups": (
        cf.coverage_gap("y", "lo", "hi", groups=(E("lab") + 1).alias("lab1"), confidence_level=0.9),
        cf.coverage_gap("y", "lo", "hi", groups="lab1", confidence_level=0.9),
    ),
}


def _frame(constructor: Any, data: dict[str, Any]) -> Any:
    return constructor(data)


@pytest.mark.parametrize("case", list(CASES))
def test_an_expression_role_equals_its_materialised_column(constructor: Any, case: str) -> None:
    if getattr(constructor, "id", "") == "pyspark":
        pytest.skip("PySpark: test_every_role_kind_on_spark_in_one_query")
    data = _data(3)
    with_expr, materialised = CASES[case]
    got = to_pandas(cf.evaluate(constructor(data), with_expr, by="g"))
    want = to_pandas(cf.evaluate(constructor(data), materialised, by="g"))
    assert list(got.columns) == list(want.columns)
    for c in want.columns:
        if c == "g":
            assert list(got[c]) == list(want[c])
        else:
            assert_close(got[c], want[c], what=f"{case}: {c}")


def test_every_role_kind_on_spark_in_one_query(constructor: Any) -> None:
    """One Spark query of several role kinds and a ``by=`` expression, against pandas on the materialised columns."""
    if getattr(constructor, "id", "") != "pyspark":
        pytest.skip("the PySpark twin of test_an_expression_role_equals_its_materialised_column")
    data = _data(3, n=60)
    chosen = ["y_lo_hi", "width_weights", "score", "quantiles", "sets", "groups"]
    exprs = [CASES[k][0].alias(k) for k in chosen]
    plain = [CASES[k][1].alias(k) for k in chosen]
    got = to_pandas(cf.evaluate(constructor(data), *exprs, by=E("g").str.to_uppercase(), invalid="null"))
    want = to_pandas(cf.evaluate(pd.DataFrame(data), *plain, by="g", invalid="null"))
    assert list(got["g"]) == [g.upper() for g in want["g"]]
    for c in want.columns:
        if c != "g":
            assert_close(got[c], want[c], what=c)


def test_polars_expressions_on_polars_frames(eager_or_lazy_polars: Any) -> None:
    data = _data(5)
    frame = eager_or_lazy_polars(data)
    got = to_pandas(
        cf.evaluate(
            frame, cf.coverage(pl.col("y") * 2, "lo", pl.col("hi") + 0.5), cf.ece("b", pl.col("p") * 0.5), by="g"
        )
    )
    want = to_pandas(cf.evaluate(frame, cf.coverage("y2", "lo", "hi_p"), cf.ece("b", "p_h"), by="g"))
    for c in want.columns[1:]:
        assert_close(got[c], want[c], what=c)
    gap = cf.coverage_gap("y", "lo", "hi", groups=[pl.col("lab") + 1, "g"], confidence_level=0.9)
    got = to_pandas(cf.evaluate(frame, gap))
    assert [c for c in got.columns if "_worst_" in c] == [
        "coverage_gap_worst_coverage",
        *[f"coverage_gap_worst_{c}" for c in ("lab", "g")],
        "coverage_gap_worst_n",
    ]


@pytest.fixture(params=["polars", "polars[lazy]"])
def eager_or_lazy_polars(request: pytest.FixtureRequest) -> Any:
    return (lambda d: pl.DataFrame(d)) if request.param == "polars" else (lambda d: pl.DataFrame(d).lazy())


def test_a_polars_expression_on_another_backend_is_refused_naming_it(constructor: Any) -> None:
    frame = constructor(_data(1, n=20))
    if nw.from_native(frame).implementation.is_polars():
        pytest.skip("polars evaluates polars expressions")
    with pytest.raises(ExpressionBackendError, match=r"polars expression.*this frame is [a-z]+") as info:
        cf.evaluate(frame, cf.coverage(pl.col("y") * 2, "lo", "hi"))
    assert 'col("y")' in str(info.value)
    assert info.value.backend == cf.engine.backend_name(nw.from_native(frame))


def test_by_an_expression_names_the_key_by_its_output_name(constructor: Any) -> None:
    if getattr(constructor, "id", "") == "pyspark":
        pytest.skip("PySpark: test_every_role_kind_on_spark_in_one_query")
    data = _data(2)
    data["gu"] = np.array([g.upper() for g in data["g"]])
    frame = constructor(data)
    got = to_pandas(cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by=E("g").str.to_uppercase()))
    want = to_pandas(cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by="gu"))
    assert got.columns[0] == "g"
    assert list(got["g"]) == list(want["gu"])
    assert_close(got["coverage"], want["coverage"])
    aliased = to_pandas(cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by=[E("g").str.to_uppercase().alias("seg")]))
    assert list(aliased["seg"]) == list(want["gu"])  # (DuckDB names are case-insensitive: not "G")


def test_the_namespace_takes_expressions() -> None:
    data = _data(4)
    df = pl.DataFrame(data)
    assert df.conformal.coverage(pl.col("y") * 2, "lo", "hi") == pytest.approx(
        df.conformal.coverage("y2", "lo", "hi"), rel=1e-12
    )
    pdf = pd.DataFrame(data)
    assert pdf.conformal.coverage(E("y") * 2, "lo", "hi") == pytest.approx(
        pdf.conformal.coverage("y2", "lo", "hi"), rel=1e-12
    )
    grouped = pdf.conformal.coverage(E("y") * 2, "lo", "hi", by="g")
    assert_close(grouped["coverage"], pdf.conformal.coverage("y2", "lo", "hi", by="g")["coverage"])


def test_messages_name_the_expression_and_count_its_bad_rows() -> None:
    data = _data(6, n=40)
    data["y"] = data["y"].copy()
    data["y"][[0, 5, 9]] = np.nan
    df = pd.DataFrame(data)
    before = df.copy()
    with pytest.raises(InvalidRowsError, match=r"column \(col\(y\)\.__mul__\(2\)\) has missing .* in 3 rows"):
        cf.evaluate(df, cf.coverage(E("y") * 2, "lo", "hi"))
    pd.testing.assert_frame_equal(df, before)  # the caller's frame is not modified
    # lo > hi through expressions: both named
    with pytest.raises(InvalidRowsError, match=r"column \(col\(hi\)\.__add__\(100\)\) is greater than column 'hi'"):
        cf.evaluate(pl.DataFrame(data).drop_nulls(), cf.width(E("hi") + 100, "hi"), invalid="raise")
    out = to_pandas(cf.evaluate(pl.DataFrame(data).lazy(), cf.coverage(pl.col("y") * 2, "lo", "hi")))
    assert int(out["n_invalid"].iloc[0]) == 3
    dropped = to_pandas(cf.evaluate(df, cf.coverage(E("y") * 2, "lo", "hi"), invalid="drop"))
    assert int(dropped["n_dropped"].iloc[0]) == 3 and int(dropped["n"].iloc[0]) == 37
    with pytest.raises(TypeError, match=r"column \(col\(p\)\.__gt__\(0\.5\)\) must be numeric"):
        cf.evaluate(df, cf.coverage(E("p") > 0.5, "lo", "hi"))


def test_two_polars_functions_of_one_text_are_refused() -> None:
    df = pl.DataFrame(_data(1, n=10))
    twice = cf.coverage(pl.col("y").map_batches(lambda s: s * 2), "lo", "hi")
    thrice = cf.width(pl.col("y").map_batches(lambda s: s * 3), "hi")
    with pytest.raises(ValueError, match="two different polars expressions print the same text"):
        cf.evaluate(df, twice, thrice)
    # the same function object twice is one expression
    assert cf.evaluate(df, twice, twice.alias("again"))["coverage"].item() is not None


def test_a_polars_key_on_another_backend_is_refused() -> None:
    with pytest.raises(ExpressionBackendError, match=r"group key \(by=\).*this frame is pandas"):
        cf.evaluate(pd.DataFrame(_data(1, n=10)), cf.coverage("y", "lo", "hi"), by=pl.col("g").str.to_uppercase())
    assert issubclass(ExpressionBackendError, TypeError)


def test_an_expression_the_backend_cannot_evaluate_is_named(constructor: Any) -> None:
    """A missing column inside an expression, or an operation on the wrong dtype: our error, naming the role."""
    if getattr(constructor, "id", "") == "pyspark":
        pytest.skip("PySpark: the same path as the other lazy backends")
    data = _data(1, n=10)
    data["s"] = np.array(["a"] * 10)
    frame = constructor(data)
    with pytest.raises(
        cf.ColumnNotFoundError, match=r"the role \(col\(nope\)\.__mul__\(2\)\) cannot be evaluated on this [a-z]+ frame"
    ):
        cf.evaluate(frame, cf.coverage("y", E("nope") * 2, "hi"), cf.width("lo", "hi"))
    with pytest.raises((TypeError, cf.ColumnNotFoundError), match=r"\(col\(s\)\.__"):
        cf.evaluate(frame, cf.coverage(E("y") * 2, E("s") * 2, "hi"), invalid="null")
    with pytest.raises(cf.ColumnNotFoundError, match=r"the group key \(by=\) \(col\(nope\)"):
        cf.evaluate(frame, cf.coverage("y", "lo", "hi"), by=E("nope").abs())


def test_two_metrics_given_the_same_expression_share_its_rows() -> None:
    m1, m2 = cf.coverage(E("y") * 2, "lo", "hi"), cf.winkler(E("y") * 2, "lo", "hi", confidence_level=0.9)
    assert m1.y == m2.y and m1.y is not m2.y
    plan = cf.engine.Plan.of({m1.y: nw.Float64(), "lo": nw.Float64(), "hi": nw.Float64()}, [m1, m2], [])
    covered = [k for k in plan.query.rows if isinstance(k, tuple) and k[0] == "covered"]
    assert len(covered) == 1
    # a metric with an expression is hashable and compares by the expression's text
    assert hash(m1) == hash(cf.coverage(E("y") * 2, "lo", "hi")) and m1 == cf.coverage(E("y") * 2, "lo", "hi")
    # a bare column expression is the column itself
    assert cf.coverage(E("y"), pl.col("lo"), "hi") == cf.coverage("y", "lo", "hi")


def test_summaries_record_the_expression_and_finalize_with_it_again(constructor: Any) -> None:
    if getattr(constructor, "id", "") == "pyspark":
        pytest.skip("PySpark: summaries are covered by test_summary_format")
    data = _data(7)
    ms = [cf.coverage(E("y") * 2, "lo", "hi"), cf.ks_test("b", E("p") * 0.5, weights=E("w") * 2)]
    stats = cf.summarize(constructor(data), *ms, by="g")
    columns = list(to_pandas(stats).columns)
    assert "cf_sum__covered[~nw_col%28y%29%2E__mul__%282%29,lo,hi]" in columns
    got = to_pandas(cf.finalize(stats, *ms))
    want = to_pandas(
        cf.evaluate(constructor(data), cf.coverage("y2", "lo", "hi"), cf.ks_test("b", "p_h", weights="w2"))
    )
    for c in want.columns:
        assert_close(got[c], want[c], what=c)
    # another expression is not in the summary: the error names the metric with its expression
    with pytest.raises(ValueError, match=r"column \(col\(y\)\.__mul__\(3\)\) not found; available columns: \(col\(p\)"):
        cf.finalize(stats, cf.coverage(E("y") * 3, "lo", "hi"))


def test_plain_column_names_keep_their_declared_names() -> None:
    spec = cf.coverage("y", "lo", "hi").definition({c: nw.Float64() for c in ("y", "lo", "hi")})
    assert [s.state for s in spec.stats] == ["cf_sum__covered[y,lo,hi]"]
    # a column named like an expression's text is another key (the "~" never appears in a plain name)
    role = as_role(E("y") * 2)
    assert isinstance(role, ExprColumn)
    assert cf.engine.declared_name(("covered", role)) != cf.engine.declared_name(("covered", role.text))


def test_report_accepts_expression_roles() -> None:
    data = _data(8)
    df = pl.DataFrame(data)
    rep = cf.report(df, y=E("y") * 2, lo="lo", hi=pl.col("hi") + 0.5, by="g")
    ref = cf.report(df, y="y2", lo="lo", hi="hi_p", by="g")
    assert rep.columns["y"] == "col(y).__mul__(2)"
    got, want = rep.tables["intervals"], ref.tables["intervals"]
    for c in ("coverage", "width"):
        assert_close(nw.from_native(got).get_column(c).to_numpy(), nw.from_native(want).get_column(c).to_numpy())


def test_functions_of_a_frame_take_expressions(constructor: Any) -> None:
    """cumulative_differences names its score column by the expression's output name."""
    if getattr(constructor, "id", "") == "pyspark":
        pytest.skip("PySpark: the frame functions read their roles as the metrics do")
    data = _data(9)
    got = to_pandas(cf.cumulative_differences(constructor(data), "b", E("p") * 0.5, weights=E("w") * 2, by="g"))
    want = to_pandas(cf.cumulative_differences(constructor(data), "b", "p_h", weights="w2", by="g"))
    assert list(got.columns) == ["g", "p", "n", "cumulative_difference"]
    assert_close(got["p"], want["p_h"])
    assert_close(got["cumulative_difference"], want["cumulative_difference"])


def test_corp_reliability_and_naive_scale_take_expressions() -> None:
    data = _data(10)
    data["t"] = np.arange(len(data["y"]))
    df = pl.DataFrame(data)
    got = df.conformal.corp_reliability("b", pl.col("p") * 0.5, n_resamples=5)
    want = df.conformal.corp_reliability("b", "p_h", n_resamples=5)
    assert_close(got["recalibrated"], want["recalibrated"])
    pdf = pd.DataFrame(data)
    got = cf.naive_scale(pdf, E("y") * 2, by="g", order_by=E("t") + 1)
    want = cf.naive_scale(pdf, "y2", by="g", order_by="t")
    assert_close(got["naive_mae"], want["naive_mae"])


def test_rows_an_expression_makes_invalid_are_counted(constructor: Any) -> None:
    """``y / z`` with ``z = 0`` in 3 rows: those rows are invalid (infinite, NaN or null, by backend), per group."""
    if getattr(constructor, "id", "") == "pyspark":
        pytest.skip("PySpark: test_every_role_kind_on_spark_in_one_query")
    data = _data(11, n=60)
    z = np.ones(len(data["y"]))
    bad = [0, 7, len(z) - 1]  # the last row is group "two"
    z[bad] = 0.0
    data["z"] = z
    out = to_pandas(cf.evaluate(constructor(data), cf.coverage(E("y") / E("z"), "lo", "hi"), by="g", invalid="null"))
    expected = pd.Series(data["g"][bad]).value_counts()
    counted = out.set_index("g")["n_invalid"]
    assert int(counted.sum()) == 3
    for g, k in expected.items():
        assert int(counted[g]) == k
        assert np.isnan(out.set_index("g").loc[g, "coverage"])


@pytest.mark.parametrize("factory", [cf.brier, cf.log_loss])
def test_binary_score_expression_is_the_binary_form(factory: Any) -> None:
    """A score expression is the binary form of a metric that also has a multiclass form."""
    df = pl.DataFrame({"y": [0.0, 1.0, 1.0, 0.0], "p": [0.2, 0.7, 0.4, 0.1]})
    expected = cf.evaluate(df, factory("y", "p"))
    for score in (nw.col("p") * 1, pl.col("p") * 1):
        got = cf.evaluate(df, factory("y", score))
        assert got.row(0) == pytest.approx(expected.row(0), rel=1e-12)


def test_an_expression_output_name_is_read_without_a_frame_as_the_frame_names_it() -> None:
    """``output_name`` (coverage_gap's label columns) agrees with the frame; unknown ones keep the internal name."""
    frame = nw.from_native(pl.DataFrame({"a": [1.0], "b": [2.0]}))
    known = [
        E("a").alias("x"),
        E("a").name.suffix("_s"),
        E("a").name.prefix("p_").name.keep(),
        (E("a") + E("b")).name.to_uppercase(),
        E("b").abs().cast(nw.Float32),
    ]
    for e in known:
        assert output_name(as_role(e)) == frame.select(e).columns[0], repr(e)
    assert output_name(as_role(pl.col("a").alias("x"))) == "x"
    for e in (nw.lit(1.0) * E("b"), E("a").name.map(str.upper)):  # not known without a frame
        role = as_role(e)
        assert output_name(role) == str(role)
    gap = cf.coverage_gap("y", "lo", "hi", groups=[E("g").str.to_uppercase(), "g"], confidence_level=0.9)
    data = {"y": [1.0, 2.0], "lo": [0.0, 0.0], "hi": [1.5, 1.5], "g": ["a", "b"]}
    names = cf.evaluate(pl.DataFrame(data), gap).columns  # two labels named g: the expression keeps its internal name
    assert f"coverage_gap_worst_{gap.groups[0]}" in names
    assert "coverage_gap_worst_g" in names
