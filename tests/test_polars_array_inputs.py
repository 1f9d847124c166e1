"""``conformal_frames.polars``: one input, one behaviour (issue 39 item 1).

A polars ``Array`` column of ensemble members (or of member weights) compiles as
``cf.evaluate`` reads it (cast to a ``List`` of Float64 where the expression reads
the role): the compiled CRPS and PIT of an ``Array`` column equal ``cf.evaluate``
on the same frame (1e-12) in ``select`` and a lazy ``group_by``, both policies,
with bad rows (a missing member, a NaN member, a missing ensemble, a missing y).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
import conformal_frames.polars as cfx

K = 3
SIZES = (1, 2, 3, 6)


def _frame() -> pl.DataFrame:
    rng = np.random.default_rng(11)
    n = sum(SIZES)
    ens = (rng.normal(size=(n, K)).round(0) * 0.5).tolist()  # ties inside an ensemble
    ens[3] = [1.0, None, 0.0]
    ens[5] = [0.0, float("nan"), 1.0]
    mw = (rng.integers(0, 3, (n, K)) + np.eye(K)[np.arange(n) % K]).astype(float).tolist()
    y = rng.normal(size=n).round(1)
    return pl.DataFrame(
        {
            "g": np.repeat([f"g{i}" for i in range(len(SIZES))], SIZES),
            "y": [None if i == 8 else v for i, v in enumerate(y)],
            "m": [None if i == 10 else e for i, e in enumerate(ens)],
            "mw": mw,
        },
        schema_overrides={"m": pl.Array(pl.Float64, K), "mw": pl.Array(pl.Float64, K)},
    )


CASES: dict[str, Callable[[], Any]] = {
    "crps": lambda: cf.crps("y", samples="m"),
    "crps_fair": lambda: cf.crps("y", samples="m", estimator="fair"),
    "crps_mw": lambda: cf.crps("y", samples="m", member_weights="mw"),
    "pit_test": lambda: cf.pit_test("y", samples="m", seed=3),
    "pit_histogram_mw": lambda: cf.pit_histogram("y", samples="m", member_weights="mw", n_bins=3),
}

FRAME = _frame()


def _same(got: pl.DataFrame, expected: pl.DataFrame, what: str) -> None:
    assert got.height == expected.height, what
    for c in expected.columns:
        if c in ("g", "n", "n_dropped", "n_invalid"):
            continue
        a, b = got[c].cast(pl.Float64).to_numpy(), expected[c].cast(pl.Float64).to_numpy()
        assert np.array_equal(np.isnan(a), np.isnan(b)), f"{what}: {c}: {a} vs {b}"
        ok = ~np.isnan(b)
        assert np.all(np.abs(a[ok] - b[ok]) <= 1e-12 * np.maximum(1.0, np.abs(b[ok]))), f"{what}: {c}: {a} vs {b}"


def _wide(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    return frame.unnest(name) if isinstance(frame.schema[name], pl.Struct) else frame


@pytest.mark.parametrize("case", sorted(CASES))
def test_array_members_equal_evaluate(case: str) -> None:
    metric = CASES[case]()
    name = metric.output_name
    lists = FRAME.with_columns(pl.col("m", "mw").cast(pl.List(pl.Float64)))
    for policy in ("null", "drop"):
        expr = cfx.to_expr(metric, invalid=policy)
        whole = cf.evaluate(FRAME, metric, invalid=policy)
        _same(whole, cf.evaluate(lists, metric, invalid=policy), f"{policy}: evaluate Array vs List")
        _same(_wide(FRAME.select(expr), name), whole, f"{policy}: select")
        grouped = cf.evaluate(FRAME, metric, by="g", invalid=policy)
        lazy = FRAME.lazy().group_by("g").agg(expr).sort("g").collect()
        _same(_wide(lazy, name), grouped, f"{policy}: lazy group_by")


def test_array_members_evaluate_keeps_its_query() -> None:
    """``cf.evaluate`` of a list or ``Array`` column of members keeps its narwhals query (as before)."""
    from conformal_frames.engine import _polars_native

    assert _polars_native._prepare((CASES["crps"](),), "null") is None
    got = cf.evaluate(FRAME.lazy(), CASES["crps"](), by="g", invalid="null").collect()
    _same(got, cf.evaluate(FRAME, CASES["crps"](), by="g", invalid="null"), "evaluate lazy")


def test_members_that_are_not_numbers_are_null_members_in_an_expression() -> None:
    """A documented difference (docs/differences.md): evaluate and cfx.check raise, the expression reads nulls."""
    frame = pl.DataFrame({"y": [0.1, 0.5], "m": [["a", "b"], ["0.2", "x"]]})
    metric = cf.crps("y", samples="m")
    with pytest.raises(TypeError, match="samples column 'm' must hold numbers, found String members"):
        cf.evaluate(frame, metric)
    with pytest.raises(TypeError, match="samples column 'm' must hold numbers, found String members"):
        cfx.check(frame, metric)
    assert frame.select(cfx.crps("y", samples="m")).item() is None  # every row has a null member: no score
