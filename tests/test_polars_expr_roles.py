"""``cfx`` factories take expressions wherever ``cf.<name>`` does (issue 39, expression roles in cfx).

The compiled expression binds a role's input to the expression itself: an
elementwise expression gives ``cf.evaluate(frame.with_columns(expr.alias(...)), ...)``
exactly.  Every compiled metric of the catalogue is crossed with its column
roles given as expressions over renamed columns (so a read of the original
column would fail), in ``select`` and ``group_by``; real expressions
(arithmetic, a Boolean comparison, narwhals and polars) in every context.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
import conformal_frames.polars as cfx
from conformal_frames._roles import as_role
from conformal_frames.engine.native import compile_polars
from test_polars_expr import ALL, COMPILED, FRAME, POLICIES, _assert_same, _expected, _wide

KEYS = ("g", "t")
#: fields whose strings are no columns (a choice may be spelt like a column: crossing="score")
NOT_ROLES = {"name", "crossing", "strategy", "alternative", "small_sample"}
#: every column of the catalogue's frame but the keys, renamed: a role reads it through an expression
RENAMED = FRAME.rename({c: f"{c}_src" for c in FRAME.columns if c not in KEYS})


def _role(column: str, kind: str) -> Any:
    lib: Any = pl if kind == "pl" else nw
    return as_role(lib.col(f"{column}_src").alias(column))


def _with_roles(value: Any, kind: str) -> Any:
    """``value`` (a metric, its fields) with every column of the frame given as an expression."""
    if isinstance(value, str):
        return _role(value, kind) if value in FRAME.columns and value not in KEYS else value
    if isinstance(value, tuple):
        return tuple(_with_roles(v, kind) for v in value)
    if isinstance(value, list):
        return [_with_roles(v, kind) for v in value]
    if isinstance(value, dict):
        return {k: _with_roles(v, kind) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: _with_roles(getattr(value, f.name), kind)
            for f in dataclasses.fields(value)
            if f.init and f.name not in NOT_ROLES
        }
        return dataclasses.replace(value, **{k: v for k, v in fields.items() if v is not getattr(value, k)})
    return value


@pytest.mark.parametrize("name", COMPILED)
def test_every_compiled_metric_takes_expression_roles(name: str) -> None:
    kind = "pl" if COMPILED.index(name) % 2 else "nw"  # half polars, half narwhals expressions
    metric = _with_roles(ALL[name](), kind)
    assert metric != ALL[name](), f"{name}: no role was replaced"
    out = metric.output_name
    compiled = compile_polars([metric], invalid="null")
    got = _wide(RENAMED.select(compiled.expr), out, compiled.outputs)
    _assert_same(got, _expected(name, "null", None), compiled.outputs, f"{name} select")
    compiled = compile_polars([metric], invalid="drop")
    got = _wide(RENAMED.lazy().group_by("g").agg(compiled.expr).sort("g").collect(), out, compiled.outputs)
    _assert_same(got, _expected(name, "drop", "g"), compiled.outputs, f"{name} group_by")


def _frame(seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n = 40
    y = rng.normal(size=n).round(1)
    return pl.DataFrame(
        {
            "g": rng.integers(0, 4, n),
            "t": np.arange(n),
            "y": y,
            "lo": (y - 1.5 + rng.normal(size=n)).round(1),
            "hi": (y + 1.5 + rng.normal(size=n)).round(1),
            "p": rng.random(n).round(1),
            "w": 1.0 + np.arange(n) % 3,
        }
    ).with_columns(pl.when(pl.col("t") == 7).then(None).otherwise(pl.col("y")).alias("y"))


#: (cfx call with expressions, the same metric on the materialised columns, the columns)
CASES = {
    "coverage_pl": (
        lambda: cfx.coverage(pl.col("y") * 2, "lo", pl.col("hi") + 1, weights=pl.col("w").sqrt()),
        lambda: cf.coverage("e_y", "lo", "e_hi", weights="e_w"),
        {"e_y": pl.col("y") * 2, "e_hi": pl.col("hi") + 1, "e_w": pl.col("w").sqrt()},
    ),
    "width_nw": (
        lambda: cfx.width(nw.col("lo") - 0.5, nw.col("hi").abs()),
        lambda: cf.width("e_lo", "e_hi"),
        {"e_lo": pl.col("lo") - 0.5, "e_hi": pl.col("hi").abs()},
    ),
    "brier_boolean": (
        lambda: cfx.brier(pl.col("y") > 0, nw.col("p")),
        lambda: cf.brier("e_y", "p"),
        {"e_y": pl.col("y") > 0},
    ),
    "ks_test_nw": (
        lambda: cfx.ks_test(nw.col("y") > 0, nw.col("p") ** 2),
        lambda: cf.ks_test("e_y", "e_p"),
        {"e_y": pl.col("y") > 0, "e_p": pl.col("p") ** 2},
    ),
    "ssc_pl": (
        lambda: cfx.ssc(pl.col("y") / 2, pl.col("lo") / 2, "hi", n_bins=2),
        lambda: cf.ssc("e_y", "e_lo", "hi", n_bins=2),
        {"e_y": pl.col("y") / 2, "e_lo": pl.col("lo") / 2},
    ),
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_expressions_equal_evaluate_on_the_added_columns(case: str, policy: str) -> None:
    make, plain, added = CASES[case]
    frame = _frame()
    wide = frame.with_columns(**added)
    expr = make() if policy == "null" else _with_policy(make, policy)
    metric = plain()
    out = metric.output_name
    outputs = tuple(
        c for c in cf.evaluate(wide, metric, invalid="null").columns if c not in ("n", "n_invalid", "n_dropped")
    )
    # select, group_by (eager, lazy, streaming), over and rolling
    _assert_same(_wide(frame.select(expr), out, outputs), cf.evaluate(wide, metric, invalid=policy), outputs, "select")
    expected = cf.evaluate(wide, metric, by="g", invalid=policy).sort("g")
    _assert_same(_wide(frame.group_by("g").agg(expr).sort("g"), out, outputs), expected, outputs, "group_by")
    lazy = frame.lazy().group_by("g").agg(expr).sort("g").collect(engine="streaming")
    _assert_same(_wide(lazy, out, outputs), expected, outputs, "streaming")
    over = frame.select("g", expr.over("g")).unique("g").sort("g")
    _assert_same(_wide(over, out, outputs), expected, outputs, "over")
    windows = pl.concat(
        [wide.filter((pl.col("t") > t - 6) & (pl.col("t") <= t)).with_columns(win=pl.lit(t)) for t in range(40)]
    )
    rolling = frame.rolling("t", period="6i").agg(expr).sort("t")
    expected = cf.evaluate(windows, metric, by="win", invalid=policy).sort("win")
    _assert_same(_wide(rolling, out, outputs), expected, outputs, "rolling")


def _with_policy(make: Any, policy: str) -> pl.Expr:
    """The case's cfx call with ``invalid=policy`` (the lambdas call with the default)."""
    original = cfx.__dict__.copy()
    try:
        for fname, fn in original.items():
            if callable(fn) and fname in cfx.__all__ and fname not in ("check", "metrics", "to_expr"):
                setattr(cfx, fname, lambda *a, _fn=fn, **k: _fn(*a, invalid=policy, **k))
        return make()  # type: ignore[no-any-return]
    finally:
        for fname in cfx.__all__:
            setattr(cfx, fname, original[fname])


def test_an_aggregation_inside_the_expression_is_the_groups() -> None:
    """In ``group_by().agg`` the expression runs per group: as evaluate with the expression ``.over(key)``."""
    frame = _frame().filter(pl.col("y").is_not_null())
    centred = pl.col("y") - pl.col("y").mean()
    got = frame.group_by("g").agg(cfx.coverage(centred, "lo", "hi")).sort("g").unnest("coverage")
    expected = cf.evaluate(frame, cf.coverage(centred.over("g"), "lo", "hi"), by="g").sort("g")
    _assert_same(got, expected, ("coverage", "coverage_ci_low", "coverage_ci_high"), "centred")


def test_memoized_on_the_expression_not_only_its_text() -> None:
    frame = _frame().filter(pl.col("y").is_not_null())
    first = cfx.coverage(pl.col("y") * 2, "lo", "hi")
    assert cfx.coverage(pl.col("y") * 2, "lo", "hi") is first  # the same expression: the memo
    # two Python functions print the same text (python_udf): told apart by their serialized form
    twice = cfx.mae(pl.col("y").map_batches(lambda s: s * 2), "hi")
    thrice = cfx.mae(pl.col("y").map_batches(lambda s: s * 3), "hi")
    assert frame.select(twice).item() == pytest.approx(frame.select(cfx.mae(pl.col("y") * 2, "hi")).item())
    assert frame.select(thrice).item() == pytest.approx(frame.select(cfx.mae(pl.col("y") * 3, "hi")).item())


def test_check_resolves_expressions_and_names_them() -> None:
    frame = _frame()
    metric = cf.coverage(pl.col("y") * 2, "lo", "hi")
    with pytest.raises(cf.InvalidRowsError) as theirs:
        cf.evaluate(frame, metric, by=nw.col("g") % 2, invalid="raise")
    with pytest.raises(cf.InvalidRowsError) as mine:
        cfx.check(frame, metric, by=nw.col("g") % 2)
    assert str(mine.value) == str(theirs.value)
    assert 'col("y")' in str(mine.value)
    cfx.check(frame, cf.coverage(pl.col("y").fill_null(0.0) * 2, "lo", "hi"))


def test_reserved_input_names_stay_refused() -> None:
    """A column named like an internal one is refused as an input; an expression reading it is no input name."""
    df = pl.DataFrame({"__cf_r1": [0.0, 1.0, 1.0], "__cf_e_pl_x": [0.0, 1.0, 1.0], "p": [0.1, 0.8, 0.4]})
    for column in ("__cf_r1", "__cf_e_pl_x"):
        with pytest.raises(ValueError, match="names starting with '__cf'"):
            df.select(cfx.brier(column, "p"))
        got = df.select(cfx.brier(pl.col(column) * 1, "p")).item()
        assert got == pytest.approx((0.01 + 0.04 + 0.36) / 3, rel=1e-12)
