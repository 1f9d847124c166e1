"""``conformal_frames.polars``: every metric that compiles to a polars expression equals ``cf.evaluate``.

Every metric of the catalogue (``tests/test_output_contract.py``'s ``CALLS`` and the
weighted calls of ``tests/test_summary_format.py``, so a new metric is crossed here
as soon as it is catalogued) x every polars context (``select``, ``with_columns``,
``group_by().agg`` eager and lazy, the streaming engine, ``over``,
``group_by_dynamic``, ``rolling``) x both policies, on frames with ties, groups of
1, 2 and 3 rows and invalid rows, against ``cf.evaluate`` on the same rows (1e-12).
A metric that cannot be an expression raises ``NotAnExpressionError`` naming
``cf.evaluate``.
"""

from __future__ import annotations

import functools
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
import conformal_frames.polars as cfx
from conformal_frames.engine import Metric
from conformal_frames.engine.native import NotAnExpressionError, compile_polars, to_polars
from conformal_frames.namespace import METRIC_FACTORIES
from test_summary_format import ALL as CATALOGUE

#: the catalogue, plus forms the catalogue does not call (quantile bins: a second grouping of the cells)
ALL = {
    **CATALOGUE,
    "ece_quantile": lambda: cf.ece("label", "score", n_bins=3, strategy="quantile").alias("ece_quantile"),
    "mce_quantile": lambda: cf.mce("label", "score", n_bins=2, strategy="quantile").alias("mce_quantile"),
}

#: group sizes: groups of 1, 2 and 3 rows and larger ones
SIZES = (1, 2, 3, 4, 6, 8)
N = sum(SIZES)
POLICIES = ("null", "drop")


def _data(seed: int) -> pl.DataFrame:
    """The catalogue's columns, rounded (ties), with invalid rows in three groups."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=N).round(1)
    y = (mu + rng.normal(size=N)).round(1)
    cols: dict[str, Any] = {
        "g": np.repeat([f"g{i}" for i in range(len(SIZES))], SIZES),
        "t": np.arange(N),
        "y": y,
        "lo": (y - 1.0 + rng.normal(size=N) * 0.5).round(1),
        "hi": (y + 1.0 + rng.normal(size=N) * 0.5).round(1),
        "mu": mu,
        "sd": rng.uniform(0.5, 1.5, N).round(1),
        "label": (rng.random(N) < 0.5).astype(float),
        "score": rng.random(N).round(1),
        "other": rng.random(N).round(1),
        "label3": rng.integers(0, 3, N),
        **{f"p{i}": rng.random(N).round(1) for i in range(3)},
        **{f"m{i}": rng.random(N) < 0.6 for i in range(3)},
        "x1": rng.normal(size=N),
        "x2": rng.normal(size=N),
        "w": 1.0 + (np.arange(N) % 4) / 2,
        "k": np.arange(N) % 3,
        "day": np.arange(N) % 3,
    }
    for name, z in {"q05": -1.64, "q10": -1.28, "q50": 0.0, "q90": 1.28, "q95": 1.64}.items():
        cols[name] = (mu + z).round(1)
    raw = rng.random((N, 3)) + 0.1  # class probabilities that sum to 1 (multiclass scores)
    cols |= {f"r{i}": (raw / raw.sum(axis=1, keepdims=True))[:, i] for i in range(3)}
    # invalid rows: the group of one row, a row of the group of 3, the last row
    for column in ("y", "score", "mu", "lo", "q50"):
        cols[column][0] = np.nan
    cols["lo"][4], cols["hi"][4] = 3.0, 1.0  # lo > hi
    cols["score"][5] = 1.5
    cols["label3"][N - 1] = 7
    cols["sd"][N - 1] = -1.0
    return pl.DataFrame(cols)


FRAME = _data(0)


def _compiles(name: str) -> bool:
    try:
        compile_polars([ALL[name]()])
    except NotAnExpressionError:
        return False
    return True


COMPILED = sorted(n for n in ALL if _compiles(n))
REFUSED = sorted(n for n in ALL if n not in COMPILED)


def _expr(name: str, policy: str) -> tuple[pl.Expr, tuple[str, ...]]:
    compiled = compile_polars([ALL[name]()], invalid=policy)  # type: ignore[arg-type]
    return compiled.expr, compiled.outputs


def _wide(frame: pl.DataFrame, name: str, outputs: tuple[str, ...]) -> pl.DataFrame:
    return frame.unnest(name) if len(outputs) > 1 else frame


@functools.cache
def _expected(name: str, policy: str, by: str | None, frame_id: str = "0") -> pl.DataFrame:
    frame = _FRAMES[frame_id]
    return cf.evaluate(frame, ALL[name](), by=by, invalid=policy)  # type: ignore[return-value]


_FRAMES: dict[str, pl.DataFrame] = {"0": FRAME}


def _assert_same(got: pl.DataFrame, expected: pl.DataFrame, outputs: tuple[str, ...], what: str) -> None:
    assert got.height == expected.height, what
    for c in outputs:
        a = got[c].cast(pl.Float64).to_numpy()
        b = expected[c].cast(pl.Float64).to_numpy()
        assert np.array_equal(np.isnan(a), np.isnan(b)), f"{what}: {c} null where evaluate is not: {a} vs {b}"
        ok = ~np.isnan(b)
        assert np.all(np.abs(a[ok] - b[ok]) <= 1e-12 * np.maximum(1.0, np.abs(b[ok]))), f"{what}: {c}: {a} vs {b}"


def _windows(frame: pl.DataFrame, period: int) -> pl.DataFrame:
    """The rows of each rolling window ``(t - period, t]``, tagged by its ``t`` (as ``rolling`` forms them)."""
    parts = [
        frame.filter((pl.col("t") > t - period) & (pl.col("t") <= t)).with_columns(win=pl.lit(t)) for t in range(N)
    ]
    return pl.concat(parts)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", COMPILED)
def test_every_context_equals_evaluate(name: str, policy: str) -> None:
    expr, outputs = _expr(name, policy)
    out = ALL[name]().output_name
    # select: one row, as evaluate without groups
    _assert_same(_wide(FRAME.select(expr), out, outputs), _expected(name, policy, None), outputs, "select")
    # with_columns: the frame's value on every row
    wide = _wide(FRAME.with_columns(expr).head(1).select(out), out, outputs)
    _assert_same(wide, _expected(name, policy, None), outputs, "with_columns")
    expected = _expected(name, policy, "g")
    # group_by, eager, lazy and the streaming engine
    eager = FRAME.group_by("g").agg(expr).sort("g")
    _assert_same(_wide(eager, out, outputs), expected, outputs, "group_by")
    for engine in ("in-memory", "streaming"):
        lazy = FRAME.lazy().group_by("g").agg(expr).sort("g").collect(engine=engine)  # type: ignore[call-overload]
        _assert_same(_wide(lazy, out, outputs), expected, outputs, f"lazy group_by ({engine})")
    # over: the group's value on each of its rows
    over = FRAME.select("g", expr.over("g")).unique("g").sort("g")
    _assert_same(_wide(over, out, outputs), expected, outputs, "over")
    # group_by_dynamic: windows of 5 consecutive t, as groups t // 5
    dynamic = FRAME.group_by_dynamic("t", every="5i", period="5i").agg(expr).sort("t")
    _FRAMES.setdefault("w", FRAME.with_columns(window=pl.col("t") // 5))
    expected_dynamic = _expected(name, policy, "window", "w")
    _assert_same(_wide(dynamic, out, outputs), expected_dynamic, outputs, "group_by_dynamic")
    # rolling: the windows (t - 4, t]
    rolling = FRAME.rolling("t", period="4i").agg(expr).sort("t")
    _FRAMES.setdefault("r", _windows(FRAME, 4))
    _assert_same(_wide(rolling, out, outputs), _expected(name, policy, "win", "r"), outputs, "rolling")


@pytest.mark.parametrize("seed", [1, 2])
def test_other_seeds_grouped_lazy(seed: int) -> None:
    frame = _data(seed)
    for name in COMPILED:
        for policy in POLICIES:
            expr, outputs = _expr(name, policy)
            got = frame.lazy().group_by("g").agg(expr).sort("g").collect()
            expected = cf.evaluate(frame, ALL[name](), by="g", invalid=policy)
            _assert_same(_wide(got, ALL[name]().output_name, outputs), expected, outputs, f"{name} seed {seed}")


@pytest.mark.parametrize("name", REFUSED)
def test_a_metric_that_is_no_expression_names_evaluate(name: str) -> None:
    with pytest.raises(NotAnExpressionError, match=r"cf\.evaluate"):
        cfx.to_expr(ALL[name]())


def test_every_factory_has_a_twin() -> None:
    assert set(METRIC_FACTORIES) <= set(dir(cfx))
    assert set(METRIC_FACTORIES) <= set(cfx.__all__)
    assert isinstance(cfx.crps("y", samples=["p0", "p1", "p2"]), pl.Expr)  # an ensemble compiles too


def test_factories_check_as_the_library_and_are_memoized() -> None:
    assert cfx.coverage("y", "lo", "hi") is cfx.coverage("y", "lo", "hi")
    with pytest.raises(ValueError, match="ci_level") as mine:
        cfx.coverage("y", "lo", "hi", ci_level=2.0)
    with pytest.raises(ValueError, match="ci_level") as theirs:
        cf.coverage("y", "lo", "hi", ci_level=2.0)
    assert str(mine.value) == str(theirs.value)
    with pytest.raises(ValueError, match="'null' or 'drop'.*check"):
        cfx.coverage("y", "lo", "hi", invalid="raise")  # type: ignore[arg-type]
    # unhashable arguments compile every call
    got = FRAME.select(cfx.pinball_loss("y", quantiles={0.1: "q10", 0.9: "q90"}))
    assert got.columns == ["pinball_loss"]


def test_outputs_names_alias_and_unnest() -> None:
    clean = FRAME.slice(6, 12)
    out = clean.select(cfx.coverage("y", "lo", "hi"), cfx.width("lo", "hi"))
    assert out.schema == pl.Schema(
        {
            "coverage": pl.Struct(
                {"coverage": pl.Float64, "coverage_ci_low": pl.Float64, "coverage_ci_high": pl.Float64}
            ),
            "width": pl.Float64,
        }
    )
    expected = cf.evaluate(clean, cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"))
    assert out.unnest("coverage").columns == [c for c in expected.columns if not c.startswith("n")]
    named = clean.select(cfx.coverage("y", "lo", "hi", name="cov"), cfx.width("lo", "hi").alias("w"))
    assert named.unnest("cov").columns == ["cov", "cov_ci_low", "cov_ci_high", "w"]
    counts = clean.select(cfx.pinball_loss("y", quantiles={0.1: "q10", 0.9: "q90"})).unnest("pinball_loss")
    expected = cf.evaluate(clean, cf.pinball_loss("y", quantiles={0.1: "q10", 0.9: "q90"}))
    assert counts.schema == pl.Schema({c: t for c, t in expected.schema.items() if c not in ("n", "n_invalid")})


def test_metrics_fuses_with_call_level_validity() -> None:
    metrics = [cf.coverage("y", "lo", "hi"), cf.brier("label", "score"), cf.width("lo", "hi")]
    for policy in POLICIES:
        got = FRAME.group_by("g").agg(cfx.metrics(*metrics, invalid=policy)).sort("g").unnest("metrics")
        expected = cf.evaluate(FRAME, *metrics, by="g", invalid=policy)
        names = tuple(c for c in expected.columns if c not in ("g", "n", "n_invalid") and not c.startswith("n_dropped"))
        assert got.columns[1:] == list(names)
        _assert_same(got, expected, names, f"metrics ({policy})")
    # a bad score nulls coverage too (evaluate's semantics); the lone expression does not
    row = FRAME.slice(5, 1)
    assert row.select(cfx.metrics(*metrics)).unnest("metrics")["coverage"].to_list() == [None]
    assert row.select(cfx.coverage("y", "lo", "hi")).unnest("coverage")["coverage"].to_list() == [1.0]
    single = FRAME.select(cfx.metrics(cf.width("lo", "hi"), name="m")).unnest("m")
    assert single.columns == ["width"]


@pytest.mark.parametrize("by", [None, "g"])
def test_check_raises_evaluates_message(by: str | None) -> None:
    metrics = [cf.coverage("y", "lo", "hi"), cf.brier("label", "score")]
    with pytest.raises(cf.InvalidRowsError) as theirs:
        cf.evaluate(FRAME, *metrics, by=by, invalid="raise")
    for frame in (FRAME, FRAME.lazy()):
        with pytest.raises(cf.InvalidRowsError) as mine:
            cfx.check(frame, *metrics, by=by)
        assert str(mine.value) == str(theirs.value)
        assert mine.value.counts == theirs.value.counts
    cfx.check(FRAME.slice(6, 4), *metrics, by=by)  # clean rows: no error


def test_boolean_and_integer_inputs_are_cast() -> None:
    frame = pl.DataFrame({"label": [True, False, True], "score": [0.5, 0.25, 1.0], "i": [1, 2, 3], "j": [1, 1, 4]})
    assert frame.select(cfx.brier("label", "score")).item() == pytest.approx((0.25 + 0.0625) / 3)
    assert frame.select(cfx.mae("i", "j")).item() == pytest.approx(2.0 / 3)


def test_narwhals_to_polars_pins_the_compliant_layer() -> None:
    """The one use of narwhals' internals (``engine.native.to_polars``) keeps its behaviour."""
    read: list[str] = []
    bound = {"s": pl.col("x").sum()}
    expr = nw.when(nw.col("s") > 0).then(nw.col("s") / nw.col("x").len()).otherwise(None)
    native = to_polars(expr, bound, read=read.append)
    assert isinstance(native, pl.Expr)
    assert read == ["s", "s"]
    frame = pl.DataFrame({"x": [1.0, 2.0, 3.0]})
    assert frame.select(native.alias("v")).item() == 2.0
    assert frame.select(to_polars(nw.col("x").abs().clip(upper_bound=2.0), {}).alias("v"))["v"].to_list() == [
        1.0,
        2.0,
        2.0,
    ]
    # the expression a narwhals frame would run, for every expression kind the engine writes
    lf = pl.LazyFrame({"a": [1.0, None, 3.0], "b": [True, False, True]})
    exprs = [
        nw.any_horizontal(nw.col("a").is_null(), ~nw.col("b"), ignore_nulls=True),
        nw.col("a").fill_null(0.0).cast(nw.Float64) ** 2,
        nw.sum_horizontal(nw.col("a"), nw.lit(1.0)),
        (nw.col("a") * 2).exp().log(),
    ]
    for e in exprs:
        expected = nw.from_native(lf).select(e.alias("v")).collect().to_native()
        assert lf.select(to_polars(e, {}).alias("v")).collect().equals(expected)


def test_let_forms_agree() -> None:
    metric = cf.coverage("y", "lo", "hi")
    forms = [compile_polars([metric], let=let).expr for let in ("list", "inline")]
    a, b = (FRAME.group_by("g").agg(f).sort("g").unnest("coverage") for f in forms)
    assert a.equals(b)


def test_a_metric_object_is_required() -> None:
    with pytest.raises(TypeError, match="metric objects"):
        cfx.to_expr("coverage")  # type: ignore[arg-type]
    assert isinstance(ALL["coverage"](), Metric)


def test_the_stub_lists_every_factory_with_its_parameters() -> None:
    """Regenerate ``polars.pyi`` with ``python -m conformal_frames._stub`` (then ruff format) when this fails."""
    import ast
    import inspect

    from conformal_frames._stub import POLARS_STUB

    tree = ast.parse(POLARS_STUB.read_text())
    stub = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert set(stub) == {*METRIC_FACTORIES, "to_expr", "metrics", "check", "adjusted", "long_table"}, (
        "polars.pyi is stale"
    )
    for name, fn in stub.items():
        args = fn.args
        written = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
        runtime = [
            p.name
            for p in inspect.signature(getattr(cfx, name)).parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        assert written == runtime, f"polars.pyi is stale for {name}"


def test_integers_beyond_2_53_are_cast_and_check_flags_them() -> None:
    """A deliberate difference (docs/differences.md): the expression casts, cfx.check raises as evaluate."""
    frame = pl.DataFrame({"y": [2**60, 1], "yhat": [0, 1]}, schema={"y": pl.Int64, "yhat": pl.Int64})
    assert frame.select(cfx.mae("y", "yhat")).item() == pytest.approx(2.0**60 / 2)
    assert cf.evaluate(frame, cf.mae("y", "yhat"), invalid="null")["mae"].to_list() == [None]
    with pytest.raises(cf.InvalidRowsError, match="beyond 2\\^53"):
        cfx.check(frame, cf.mae("y", "yhat"))


def test_reserved_input_names_are_refused() -> None:
    """A column named like an internal one would be read wrongly: refused (expression roles: test_polars_expr_roles)."""
    df = pl.DataFrame({"__cf_r1": [0.0, 1.0, 1.0, 0.0], "__cf_r0": [0.1, 0.8, 0.3, 0.4]})
    with pytest.raises(ValueError, match=r"column '__cf_r\d' \(ece\): names starting with '__cf'"):
        df.select(cfx.ece("__cf_r1", "__cf_r0", n_bins=2))
    renamed = df.rename({"__cf_r1": "y", "__cf_r0": "p"})
    expected = renamed.select(cfx.ece("y", "p", n_bins=2)).item()
    assert cf.evaluate(df, cf.ece("__cf_r1", "__cf_r0", n_bins=2))["ece"][0] == pytest.approx(expected, rel=1e-12)
