"""Regression tests of the six defects the second differential fuzz found (issue 42).

One test per defect, on every backend where it applies, from the issue's
reproductions; numpy (or exact rational) oracles for the silently wrong numbers.
"""

from __future__ import annotations

import io
import math
from fractions import Fraction
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pytest
from scipy import stats

import conformal_frames as cf
from helpers import assert_close, to_pandas

# -- 1. a skill score exposes its metrics' counts= ---------------------------------
SKILL = {"y": [1.0, 2.0, 3.0], "f": [1.5, 2.0, 2.0], "b": [0.0, 0.0, 0.0], "k": [1, 2, 3]}


def _counted(c: str) -> cf.Metric:
    return cf.mae("y", c, counts="k")


def test_skill_score_counts_take_part_in_the_one_counts_rule(constructor: Any) -> None:
    frame = constructor(SKILL)
    y, f, b, k = (np.array(SKILL[c], dtype=float) for c in ("y", "f", "b", "k"))
    mae_f, mae_b = np.sum(k * abs(y - f)) / k.sum(), np.sum(k * abs(y - b)) / k.sum()
    # valid: every metric counted by the same column
    out = to_pandas(cf.evaluate(frame, cf.skill_score(_counted("f"), _counted("b")), _counted("f")))
    assert_close(out["mae_skill"], [1.0 - mae_f / mae_b])
    assert_close(out["mae"], [mae_f])
    assert list(out["n"]) == [6]
    # an uncounted metric next to a counted skill score, or inside it: the one-counts-column error
    for metrics in (
        [cf.skill_score(_counted("f"), _counted("b")), cf.mae("y", "f")],
        [cf.skill_score(_counted("f"), cf.mae("y", "b"))],
        [cf.mae("y", "f"), cf.skill_score(cf.mae("y", "f"), cf.mae("y", "b")), _counted("b")],
    ):
        with pytest.raises(ValueError, match="same counts="):
            cf.evaluate(frame, *metrics)
    # uncounted throughout: the unweighted numbers
    out = to_pandas(cf.evaluate(frame, cf.skill_score(cf.mae("y", "f"), cf.mae("y", "b")), cf.mae("y", "f")))
    assert_close(out["mae"], [np.mean(abs(y - f))])
    assert list(out["n"]) == [3]


def test_counts_columns_of_composite_metrics() -> None:
    assert cf.skill_score(_counted("f"), _counted("b")).counts_columns() == {"k"}
    assert cf.skill_score(_counted("f"), cf.mae("y", "b")).counts_columns() == {"k", None}
    assert cf.bootstrap(cf.mae("y", "f"), n_resamples=10).counts_columns() == {None}
    assert cf.mae("y", "f").counts_columns() == {None}


# -- 2. Diebold-Mariano with horizon >= the rows of a group -------------------------
def _dm_exact(y: np.ndarray, f1: np.ndarray, f2: np.ndarray, h: int) -> tuple[float, float]:
    """DM with the long-run variance in exact rational arithmetic (0 is 0), gamma_0 when it is not positive."""
    d = [Fraction(float(a)) - Fraction(float(b)) for a, b in zip((y - f1) ** 2, (y - f2) ** 2)]
    n = len(d)
    mean = sum(d, Fraction(0)) / n
    c = [x - mean for x in d]
    gamma = [sum((c[t] * c[t - k] for t in range(k, n)), Fraction(0)) / n for k in range(min(h, n))]
    v = gamma[0] + 2 * sum(gamma[1:], Fraction(0))
    if v <= 0:
        v = gamma[0]
    stat = float(mean) / math.sqrt(float(v) / n)
    return stat, float(2 * stats.norm.sf(abs(stat)))


def test_diebold_mariano_horizon_at_least_the_rows(constructor: Any) -> None:
    data = {
        "t": [0, 1, 2, 3],
        "y": [0.2, -0.5, -0.4, -2.4],
        "f1": [1.1, 0.1, -0.6, -2.0],
        "f2": [0.4, -0.9, 0.3, -2.6],
    }
    arrays = {k: np.array(v, dtype=float) for k, v in data.items()}
    for h in (4, 5):
        out = to_pandas(
            cf.evaluate(
                constructor(data), cf.diebold_mariano_test("y", "f1", "f2", order_by="t", horizon=h, small_sample=None)
            )
        )
        stat, p = _dm_exact(arrays["y"], arrays["f1"], arrays["f2"], h)
        assert_close(out["diebold_mariano_test"], [stat], rtol=1e-10)
        assert_close(out["diebold_mariano_test_pvalue"], [p], rtol=1e-10)
    assert_close([stat], [0.7402925], rtol=1e-6)


@pytest.mark.spark_cases(horizon="column")
@pytest.mark.parametrize("horizon", [4, "column"])
def test_diebold_mariano_short_groups_random(constructor: Any, horizon: int | str) -> None:
    rng = np.random.default_rng(42)
    sizes = [2, 3, 4, 4, 4, 4, 4, 4, 3, 4]
    g = np.repeat([f"s{i}" for i in range(len(sizes))], sizes)
    t = np.concatenate([np.arange(m) for m in sizes])
    n = len(g)
    y, f1, f2 = (np.round(rng.normal(size=n), 1) for _ in range(3))
    data = {"g": g, "t": t, "y": y, "f1": f1, "f2": f2, "h": np.full(n, 4)}
    h_arg = "h" if horizon == "column" else horizon
    test = cf.diebold_mariano_test("y", "f1", "f2", order_by="t", horizon=h_arg, small_sample=None)
    out = to_pandas(cf.evaluate(constructor(data), test, by="g"))
    for i, key in enumerate(out["g"]):
        rows = g == key
        stat, p = _dm_exact(y[rows], f1[rows], f2[rows], 4)
        assert_close(out["diebold_mariano_test"].iloc[[i]], [stat], rtol=1e-9, what=key)
        assert_close(out["diebold_mariano_test_pvalue"].iloc[[i]], [p], rtol=1e-9, atol=1e-15, what=key)


# -- 3. Arrow dictionary keys on pandas[pyarrow] --------------------------------------
def _through_parquet(frame: Any) -> Any:
    """A polars frame written to Parquet and read back by pandas with Arrow dtypes (dictionary keys)."""
    import pandas as pd

    buf = io.BytesIO()
    frame.write_parquet(buf)
    buf.seek(0)
    return pd.read_parquet(buf, dtype_backend="pyarrow")


def test_arrow_dictionary_keys_through_naive_scale_and_finalize() -> None:
    pl = pytest.importorskip("polars")
    pytest.importorskip("pyarrow")
    data = {
        "g": ["a", "b", "a", "b", "a", "b"],
        "t": [0, 0, 1, 1, 2, 2],
        "y": [1.0, 2.0, 3.0, 4.0, 2.0, 7.0],
        "lo": [0.0, 1.0, 4.0, 3.0, 1.0, 5.0],
        "hi": [2.0, 3.0, 5.0, 5.0, 3.0, 6.0],
    }
    rows = pl.DataFrame(data).with_columns(pl.col("g").cast(pl.Categorical))
    cov = cf.coverage("y", "lo", "hi")
    summary = _through_parquet(cf.summarize(rows, cov, by="g"))
    assert str(summary["g"].dtype).startswith("dictionary")
    expected = to_pandas(cf.evaluate(rows, cov, by="g"))
    got = to_pandas(cf.finalize(summary, cov, by="g"))
    assert got["g"].astype(str).tolist() == ["a", "b"]
    assert_close(got["coverage"], expected["coverage"])
    merged = to_pandas(cf.finalize(cf.merge_summaries(summary, by="g"), cov, by="g"))
    assert_close(merged["coverage"], expected["coverage"])
    scaled = to_pandas(cf.naive_scale(_through_parquet(rows), "y", order_by="t", by="g"))
    reference = to_pandas(cf.naive_scale(rows, "y", order_by="t", by="g"))
    assert scaled["g"].astype(str).tolist() == ["a", "b"]
    assert_close(scaled["naive_mae"], reference["naive_mae"])
    assert_close(scaled["naive_mae"], [1.5, 2.5])


# -- 4. zero counts or weights: invalid rows are input rows, on both paths -------------
NAN = math.nan
ZERO_GROUPS = {
    "counts all 0": {"y": [1.0, 2.0], "k": [0, 0], "w": [1.0, 1.0]},
    "invalid row, other counts 0": {"y": [NAN, 2.0, 3.0], "k": [1, 0, 0], "w": [1.0, 1.0, 1.0]},
    "weights 0, counts 1 and 5": {"y": [1.0, 2.0], "k": [1, 5], "w": [0.0, 0.0]},
    "weights 0 and an invalid row": {"y": [NAN, 2.0], "k": [1, 5], "w": [0.0, 0.0]},
    "positive weight only on an invalid row": {"y": [NAN, 2.0, 3.0], "k": [1, 2, 1], "w": [1.0, 0.0, 0.0]},
    "NaN weight, other weight 0": {"y": [1.0, 2.0], "k": [1, 1], "w": [NAN, 0.0]},
    "negative weight, other weight 0": {"y": [1.0, 2.0], "k": [1, 1], "w": [-1.0, 0.0]},
}
#: (n, n_invalid) under "null" and (n, n_dropped) under "drop" of group "a", per case and weighting
ZERO_EXPECTED = {
    ("counts all 0", "counts"): ((0, 2), (0, 2)),
    ("weights 0, counts 1 and 5", "both"): ((6, 2), (0, 2)),
    ("positive weight only on an invalid row", "weights"): ((3, 1), (0, 3)),
}


#: the cases each weighting runs on: a case's own column (counts or weights), and both columns on every case
OWN = {case: "counts" if "counts" in case else "weights" for case in ZERO_GROUPS}
KIND_CASES = {kind: [c for c in ZERO_GROUPS if kind in ("both", OWN[c])] for kind in ("counts", "weights", "both")}
OPTIONS = {"counts": {"counts": "k"}, "weights": {"weights": "w"}, "both": {"counts": "k", "weights": "w"}}


def _rows(cases: list[str]) -> tuple[dict[str, list[Any]], list[bool]]:
    """The cases side by side: per case a group "<case>|a" (its rows) and "<case>|z" (one plain row);
    and the rows of the first day (each case's first row, as one call per case split them)."""
    out: dict[str, list[Any]] = {"g": [], "f": [], "y": [], "k": [], "w": []}
    first: list[bool] = []
    for case in cases:
        c = ZERO_GROUPS[case]
        m = len(c["y"])
        out["g"] += [f"{case}|a"] * m + [f"{case}|z"]
        out["f"] += [0.5] * m + [1.0]
        out["y"] += [*c["y"], 1.0]
        out["k"] += [*c["k"], 1]
        out["w"] += [*c["w"], 1.0]
        first += [True] + [False] * m
    return out, first


#: each weighting's cases in one frame (a case per group pair); Spark runs the kinds its one case ran before
#: (counts and both), now over all their cases, in the same number of queries
@pytest.mark.spark_cases([{"kind": "counts"}, {"kind": "both"}])
@pytest.mark.parametrize("kind", list(KIND_CASES))
def test_zero_total_group_bookkeeping_equal_on_both_paths(constructor: Any, kind: str) -> None:
    cases = KIND_CASES[kind]
    data, first = _rows(cases)
    frame = constructor(data)
    days = [constructor({c: [x for x, f in zip(v, first) if f == day] for c, v in data.items()}) for day in (1, 0)]
    metric = cf.mae("y", "f", **OPTIONS[kind])
    for i, invalid in enumerate(("null", "drop")):
        rows = to_pandas(cf.evaluate(frame, metric, by="g", invalid=invalid))
        summary = cf.summarize(frame, metric, by="g", invalid=invalid)
        once = to_pandas(cf.finalize(summary, metric, by="g"))
        parts = [cf.summarize(d, metric, by="g", invalid=invalid) for d in days]
        both = nw.to_native(nw.concat([nw.from_native(p) for p in parts], how="vertical"))
        merged = to_pandas(cf.finalize(cf.merge_summaries(both, by="g"), metric, by="g"))
        count = "n_invalid" if invalid == "null" else "n_dropped"
        what = f"{kind}, {invalid}"
        assert sorted(rows["g"]) == sorted(f"{case}|{g}" for case in cases for g in "az"), what
        for other in (once, merged):
            assert list(other.columns) == list(rows.columns), what
            assert other["g"].tolist() == rows["g"].tolist(), what
            for col in ("n", count):
                assert other[col].tolist() == rows[col].tolist(), f"{what}: {col}"
            assert_close(other["mae"], rows["mae"], what=what)
        for case in cases:
            if (case, kind) in ZERO_EXPECTED:
                a = rows.index[rows["g"] == f"{case}|a"][0]
                assert (rows["n"][a], rows[count][a]) == ZERO_EXPECTED[(case, kind)][i], f"{case}, {what}"


# -- 5. coverage_test_flag of a group without a p-value is null on every backend ------
@pytest.mark.spark_cases(invalid="null")
@pytest.mark.parametrize("invalid", ["null", "drop"])
def test_coverage_test_flag_null_without_pvalue(constructor: Any, invalid: str) -> None:
    data = {
        "g": ["a", "a", "b", "b", "b", "c", "c"],
        "y": [NAN, NAN, 3.0, 4.0, 5.0, 1.0, 2.0],
        "lo": [0.0] * 7,
        "hi": [1.5, 1.5, 9.0, 9.0, 9.0, 0.5, 0.5],
    }
    metric = cf.coverage_test("y", "lo", "hi", confidence_level=0.9, correction="none")
    try:
        out = to_pandas(cf.evaluate(constructor(data), metric, by="g", invalid=invalid))
    except cf.BackendLimitError:
        pytest.skip("coverage_test is eager-only on this backend (scipy on the per-group table)")
    flags = out["coverage_test_flag"].tolist()
    assert out["coverage_test_flag"].dtype in (bool, "boolean", object)
    assert flags[0] is None or flags[0] is pd_na()  # no rows to test: no flag
    assert [bool(f) for f in flags[1:]] == [False, True]
    assert math.isnan(float(out["coverage_test_pvalue"].iloc[0]))


def pd_na() -> Any:
    import pandas as pd

    return pd.NA


# -- 6. finalize of a summary without rows, list-column set metrics ---------------------
SET_ROWS = {"g": ["a", "b", "a"], "y": [0, 1, 1], "s": [[0], [0, 1], []]}


def _set_metrics() -> list[cf.Metric]:
    c = [0, 1]
    return [
        cf.set_coverage("y", "s", classes=c),
        cf.set_size("s", classes=c),
        cf.empty_rate("s", classes=c),
        cf.singleton_rate("s", classes=c),
        cf.set_ssc("y", "s", classes=c),
        cf.set_ssc_score("y", "s", classes=c),
    ]


@pytest.mark.spark_cases(by=None)
@pytest.mark.parametrize("by", [None, "g"])
def test_finalize_empty_summary_of_list_column_sets(constructor: Any, by: str | None) -> None:
    frame = constructor(SET_ROWS)
    for metric in _set_metrics():
        summary = nw.to_native(nw.from_native(cf.summarize(frame, metric, by="g")).head(0))
        got = to_pandas(cf.finalize(summary, metric, by=by))
        full = to_pandas(cf.evaluate(frame, metric, by=by))
        assert list(got.columns) == list(full.columns), metric.output_name
        assert len(got) == (0 if by else 1), metric.output_name
        if by is None:
            assert got["n"].tolist() == [0], metric.output_name


# -- found while widening the fuzz: an input named like an internal row; a dotted key ---
def test_finalize_empty_summary_input_named_like_an_internal_row(constructor: Any) -> None:
    data = {"g": ["a"], "y": [1.0], "lo": [0.0], "__cf_r0": [2.0]}
    metrics = [cf.coverage("y", "lo", "__cf_r0"), cf.width("lo", "__cf_r0")]
    summary = nw.to_native(nw.from_native(cf.summarize(constructor(data), *metrics, by="g", invalid="null")).head(0))
    got = to_pandas(cf.finalize(summary, *metrics, by="g"))  # was a RecursionError
    assert list(got.columns) == ["g", "coverage", "coverage_ci_low", "coverage_ci_high", "width", "n", "n_invalid"]
    assert len(got) == 0


def test_merge_summaries_dotted_key(constructor: Any) -> None:
    if getattr(constructor, "module", "") == "pyspark":  # Spark reads `a.b` as a struct field everywhere
        pytest.skip("a dotted column name is a struct field access on Spark (every function, not merging)")
    data = {"a.b": ["x", "y", "x"], "label": [1.0, 0.0, 1.0], "score": [0.5, 0.2, 0.9]}
    metric = cf.brier("label", "score")
    parts = [cf.summarize(constructor(data), metric, by="a.b") for _ in range(2)]
    both = nw.to_native(nw.concat([nw.from_native(p) for p in parts], how="vertical"))
    got = to_pandas(cf.finalize(cf.merge_summaries(both, by="a.b"), metric, by="a.b"))  # DuckDB: Binder Error
    assert got["a.b"].tolist() == ["x", "y"]
    assert_close(got["brier"], [(0.25 + 0.01) / 2, 0.04])
    assert got["n"].tolist() == [4, 2]
