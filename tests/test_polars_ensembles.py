"""``conformal_frames.polars``: the ensemble CRPS and the ensemble/quantile PIT compile (``list.eval`` forms).

Each form x every polars context (``select``, ``with_columns``, ``group_by`` eager,
lazy and streaming, ``over``, ``group_by_dynamic``, ``rolling``) x both policies
equals ``cf.evaluate`` on the same rows (1e-12), on a frame with ties (inside an
ensemble, between forecasts), groups of 1, 2 and 3 rows and bad rows (a null,
NaN or missing member, an empty ensemble, a missing y, member weights of
another length), as ``tests/test_polars_expr.py`` does for the catalogue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
import conformal_frames.polars as cfx
from conformal_frames.engine.native_ensembles import HASH_P, mod_p

SIZES = (1, 2, 3, 4, 6)
N = sum(SIZES)
Q = {0.1: "q10", 0.5: "q50", 0.9: "q90"}
COLS = ("a", "b", "c")
WCOLS = ("wa", "wb", "wc")


def _frame(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.normal(size=N).round(1)
    lengths = rng.integers(1, 5, N)
    ens = [list(rng.normal(size=k).round(0) * 0.5) for k in lengths]  # ties inside an ensemble
    mw = [list(rng.integers(0, 3, k).astype(float) + (np.arange(k) == 0)) for k in lengths]
    cols: dict[str, Any] = {
        "g": np.repeat([f"g{i}" for i in range(len(SIZES))], SIZES),
        "t": np.arange(N),
        "y": y,
        "ens": ens,
        "mw": mw,
        "w": 1.0 + (np.arange(N) % 3) / 2,
        "k": (np.arange(N) % 3).astype(float),
        **{c: (y + rng.normal(size=N)).round(0) * 0.5 for c in COLS},
        **{c: rng.integers(0, 3, N).astype(float) + 0.5 for c in WCOLS},
    }
    mu = (y + rng.normal(size=N) * 0.3).round(1)
    for name, z in {"q10": -1.28, "q50": 0.0, "q90": 1.28}.items():
        cols[name] = (mu + z).round(1)
    cols["ens"][2] = [0.5, 0.5, 0.5]
    cols["y"][2] = 0.5  # every member equal to y: CRPS 0
    cols["ens"][4] = [cols["y"][4]] * 2 + [cols["y"][4] + 1.0]
    frame = pl.DataFrame(cols, schema_overrides={"ens": pl.List(pl.Float64), "mw": pl.List(pl.Float64)})
    if seed == 0:  # bad rows in three groups (and the group of one row)
        frame = frame.with_columns(
            y=pl.when(pl.col("t") == 0).then(None).otherwise(pl.col("y")),
            ens=pl.when(pl.col("t") == 5)
            .then(pl.lit([1.0, None], pl.List(pl.Float64)))
            .when(pl.col("t") == 9)
            .then(pl.lit([], pl.List(pl.Float64)))
            .when(pl.col("t") == 14)
            .then(pl.lit([0.0, float("nan")], pl.List(pl.Float64)))
            .otherwise(pl.col("ens")),
            mw=pl.when(pl.col("t") == 7).then(pl.lit([1.0] * 9, pl.List(pl.Float64))).otherwise(pl.col("mw")),
            b=pl.when(pl.col("t") == 12).then(None).otherwise(pl.col("b")),
            q50=pl.when(pl.col("t") == 13).then(float("nan")).otherwise(pl.col("q50")),
        )
    return frame


CASES: dict[str, Callable[[], Any]] = {
    "crps_list": lambda: cf.crps("y", samples="ens"),
    "crps_cols_fair_w": lambda: cf.crps("y", samples=["a", "b", "c"], estimator="fair", weights="w"),
    "crps_list_mw": lambda: cf.crps("y", samples="ens", member_weights="mw", counts="k"),
    "pit_test_list": lambda: cf.pit_test("y", samples="ens", seed=3),
    "pit_test_cols_mw": lambda: cf.pit_test("y", samples=list(COLS), member_weights=list(WCOLS)),
    "pit_histogram_list_w": lambda: cf.pit_histogram("y", samples="ens", n_bins=4, weights="w"),
    "pit_histogram_quantiles": lambda: cf.pit_histogram("y", quantiles=Q, n_bins=5, weights="k", seed=7),
}

#: crossed with the contexts above in test_other_seeds_grouped_lazy only (the test time is tight)
MORE: dict[str, Callable[[], Any]] = {
    "pit_test_quantiles": lambda: cf.pit_test("y", quantiles=Q, crossing="invalid"),
    "crps_cols_mw": lambda: cf.crps("y", samples=list(COLS), member_weights=list(WCOLS)),
}

FRAME = _frame(0)
WINDOWS = pl.concat(
    [FRAME.filter((pl.col("t") > t - 4) & (pl.col("t") <= t)).with_columns(win=pl.lit(t)) for t in range(N)]
)


def _same(got: pl.DataFrame, expected: pl.DataFrame, what: str) -> None:
    assert got.height == expected.height, what
    for c in expected.columns:
        if c in ("g", "t", "window", "win", "n", "n_dropped", "n_invalid"):
            continue
        a, b = got[c].cast(pl.Float64).to_numpy(), expected[c].cast(pl.Float64).to_numpy()
        assert np.array_equal(np.isnan(a), np.isnan(b)), f"{what}: {c} null where evaluate is not: {a} vs {b}"
        ok = ~np.isnan(b)
        assert np.all(np.abs(a[ok] - b[ok]) <= 1e-12 * np.maximum(1.0, np.abs(b[ok]))), f"{what}: {c}: {a} vs {b}"


def _wide(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    return frame.unnest(name) if isinstance(frame.schema[name], pl.Struct) else frame


@pytest.mark.parametrize("policy", ["null", "drop"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_context_equals_evaluate(case: str, policy: str) -> None:
    metric = CASES[case]()
    name = metric.output_name
    expr = cfx.to_expr(metric, invalid=policy)
    whole = cf.evaluate(FRAME, metric, invalid=policy)
    _same(_wide(FRAME.select(expr), name), whole, "select")
    _same(_wide(FRAME.with_columns(expr).head(1).select(name), name), whole, "with_columns")
    grouped = cf.evaluate(FRAME, metric, by="g", invalid=policy)
    _same(_wide(FRAME.group_by("g").agg(expr).sort("g"), name), grouped, "group_by")
    for engine in ("in-memory", "streaming"):
        lazy = FRAME.lazy().group_by("g").agg(expr).sort("g").collect(engine=engine)  # type: ignore[call-overload]
        _same(_wide(lazy, name), grouped, f"lazy group_by ({engine})")
    _same(_wide(FRAME.select("g", expr.over("g")).unique("g").sort("g"), name), grouped, "over")
    dynamic = FRAME.group_by_dynamic("t", every="5i", period="5i").agg(expr).sort("t")
    by_window = cf.evaluate(FRAME.with_columns(window=pl.col("t") // 5), metric, by="window", invalid=policy)
    _same(_wide(dynamic, name), by_window, "group_by_dynamic")
    rolling = FRAME.rolling("t", period="4i").agg(expr).sort("t")
    _same(_wide(rolling, name), cf.evaluate(WINDOWS, metric, by="win", invalid=policy), "rolling")


def test_another_seed_grouped_lazy() -> None:
    frame = _frame(1)
    for case, make in {**CASES, **MORE}.items():
        metric = make()
        got = frame.lazy().group_by("g").agg(cfx.to_expr(metric)).sort("g").collect()
        expected = cf.evaluate(frame, metric, by="g", invalid="null")
        _same(_wide(got, metric.output_name), expected, case)


def test_ensemble_crps_against_numpy() -> None:
    """The sorted-members form is the pair sum ``mean|x - y| - (1/2) mean|x - x'|`` (fair: ``m (m - 1)`` pairs)."""
    rng = np.random.default_rng(5)
    ens = [rng.normal(size=k).round(1) for k in (1, 2, 5, 7)]
    y = rng.normal(size=4).round(1)
    frame = pl.DataFrame({"y": y, "ens": [list(e) for e in ens]})
    for estimator in ("plain", "fair"):
        rows = [(e, t) for e, t in zip(ens, y) if estimator == "plain" or len(e) > 1]
        expected = np.mean(
            [
                np.abs(e - t).mean()
                - np.abs(e[:, None] - e[None, :]).sum() / (2 * len(e) * (len(e) - (estimator == "fair")))
                for e, t in rows
            ]
        )
        kept = frame.filter(pl.col("ens").list.len() > (estimator == "fair"))
        got = kept.select(cfx.crps("y", samples="ens", estimator=estimator)).item()  # type: ignore[arg-type]
        assert got == pytest.approx(expected, rel=1e-12)


def test_the_hash_is_one_definition() -> None:
    """``mod_p`` gives the exact residue in narwhals and polars alike (the draws of both paths)."""
    x = pl.Series("x", [0.0, HASH_P - 1.0, HASH_P, 2.0**52 + 3.0, HASH_P * (HASH_P - 1.0) + 5.0])
    got = pl.select(mod_p(pl.lit(x), pl.when)).to_series().to_list()
    assert got == [float(int(v) % int(HASH_P)) for v in x]


def test_long_table_and_evaluate_routing() -> None:
    """The ensemble PIT histogram's long table is ``.conformal``'s; ``evaluate`` on a polars frame runs the
    compiled member-column and quantile forms (measured at parity or faster), list columns keep its query."""
    from conformal_frames.engine import _polars_native

    frame = _frame(1)
    metric = cf.pit_histogram("y", samples="ens", n_bins=3, seed=2)
    got = frame.group_by("g").agg(cfx.long_table(metric)).sort("g").explode(metric.output_name)
    expected = frame.conformal.pit_histogram("y", samples="ens", n_bins=3, seed=2, by="g")
    assert got.unnest(metric.output_name).equals(expected)
    for compiled in (cf.crps("y", samples=list(COLS)), CASES["pit_test_cols_mw"](), MORE["pit_test_quantiles"]()):
        assert _polars_native._prepare((compiled,), "null") is not None, compiled
        lazy = cf.evaluate(frame.lazy(), compiled, by="g").collect()  # the compiled path
        _same(lazy, cf.evaluate(frame, compiled, by="g"), "evaluate lazy")  # eager 16 rows: the narwhals path
    lazy = cf.evaluate(frame.lazy(), CASES["crps_list"](), by="g").collect()  # a list input: the narwhals path
    _same(lazy, cf.evaluate(frame, CASES["crps_list"](), by="g"), "evaluate lazy")
