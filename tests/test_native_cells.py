"""The ordered cells of a compiled table in less memory (``engine/native_cells``), with the same numbers.

SSC's compiled expression carries no column of ones (its running count is the
row's position), carries the covered flag as a Boolean, and stores neither its
per-group scalars (``n``, ``scale``) nor its once-read ``prev`` beside every
cell.  The numbers are those of ``evaluate``'s narwhals query bit for bit
(integer-valued running sums), on ties, near-ties within SSC's tolerance,
groups of 1-3 rows and bad rows, both policies; weighted SSC (Float64 running
sums of weights) keeps its columns as they are.
"""

from __future__ import annotations

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import conformal_frames as cf
import conformal_frames.polars as cfx
from conformal_frames.engine import _polars_native, native_cells


def _frame(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n = 300
    y = rng.normal(size=n)
    width = np.round(rng.uniform(0.5, 2.0, n), 1)  # ties
    width[:20] = 1.0 + rng.integers(0, 3, 20) * 1e-12  # near-ties within the tolerance
    lo = y - width / 2 + rng.normal(size=n) * 0.3
    g = np.array([f"g{i % 7}" for i in range(n)])
    g[-6:] = ["s1", "s2", "s2", "s3", "s3", "s3"]  # groups of 1-3 rows
    df = pl.DataFrame({"g": g, "y": y, "lo": lo, "hi": lo + width, "w": rng.uniform(0.0, 2.0, n)})
    bad = pl.int_range(pl.len()) == 5  # a missing y in g5
    return df.with_columns(pl.when(bad).then(None).otherwise(pl.col("y")).alias("y"))


@pytest.mark.parametrize("policy", ["null", "drop"])
@pytest.mark.parametrize("weighted", [False, True])
def test_ssc_equals_the_narwhals_query_bit_for_bit(
    policy: str, weighted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_polars_native, "MAX_METRICS", 0)  # evaluate's own query, not the expression
    for seed in (0, 1):
        df = _frame(seed)
        metric = cf.ssc("y", "lo", "hi", n_bins=3, weights="w" if weighted else None)
        expected = cf.evaluate(df, metric, by="g", invalid=policy)  # type: ignore[arg-type]
        expected = expected.drop("n", "n_dropped", "n_invalid", strict=False).sort("g")
        got = df.lazy().group_by("g").agg(cfx.to_expr(metric, invalid=policy)).unnest("ssc").sort("g").collect()  # type: ignore[arg-type]
        exact = not weighted  # weights: the same running sums, compared at the suite's tolerance
        assert_frame_equal(got, expected, check_exact=exact, rel_tol=1e-12, abs_tol=0.0)


def test_ssc_cells_are_stored_lean() -> None:
    text = str(cfx.to_expr(cf.ssc("y", "lo", "hi", n_bins=3)))
    sort = text[: text.index(".sort_by(")]
    assert "dyn float: 1" not in sort  # no column of ones through the sort
    assert 'fill_null([false]).alias("__cf_r1")' in sort  # the covered flag as a Boolean
    assert "int_range" in text
    for scratch in ("n", "scale", "prev"):  # computed where read, never a stored field of every cell
        assert f"field_by_name(__cf_t0_{scratch})" not in text
    assert "field_by_name(__cf_t0_cnt)" in text  # read often and not a scalar: stored


def test_ks_cells_leave_out_the_unread_order() -> None:
    """KS reads only the running sums of its cells: a cell is one field, not the score beside it."""
    text = str(cfx.ks_test("y", "s"))
    cells = text[text.index(".implode().list.eval(") :]
    assert cells.startswith(".implode().list.eval(as_struct(element().struct.field_by_name(__cf_r")
    assert "field_by_name(__cf_order)().shift" in cells  # still the cells' boundaries


def test_recipes_and_deferred() -> None:
    step = [("a", nw.col("b").sum()), ("b", nw.col("b") + 1.0), ("c", nw.col("x").shift(1))]
    names = {"a": ["b"], "b": ["b"], "c": ["x"]}
    kept = native_cells.recipes({}, step, {"a", "b", "c"}, lambda e: names[_name(e, step)])
    assert set(kept) == {"c"}  # a and b read b, which the step writes again
    bind = {"c": pl.element().shift(1), "x": pl.element(), "s": pl.element().sum()}
    recipes = {"c": nw.col("x").shift(1), "s": nw.col("x").sum()}
    later = native_cells.deferred(recipes, ["c", "s", "x"], {"c": 2, "s": 5, "x": 3}, bind, lambda e: ["x"])
    assert later == ["s"]  # a scalar read often is computed again; c (read twice, not a scalar) is stored
    assert native_cells.deferred(recipes, ["c", "s"], {"c": 1}, bind, lambda e: ["x"]) == []  # x is not stored


def _name(e: nw.Expr, step: list[tuple[str, nw.Expr]]) -> str:
    return next(n for n, x in step if x is e)
