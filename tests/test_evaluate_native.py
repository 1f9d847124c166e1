"""``evaluate`` on polars frames through the compiled polars expressions (engine/_polars_native).

Every catalogue entry (test_polars_expr's ALL: the output contract's calls,
weighted and counted forms, quantile bins) on polars eager and lazy, grouped
and ungrouped, under "null", "drop" and "raise": the new path's frame equals
the narwhals path's (columns, order, dtypes, values to 1e-12), errors are the
same, and the new path is taken where it must be and not where it must not.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import conformal_frames as cf
from conformal_frames.engine import _polars_native
from test_polars_expr import ALL, FRAME, REFUSED

#: the rows of FRAME without an invalid row (see test_polars_expr._data)
_REAL_RUN = _polars_native.run
CLEAN = FRAME.with_row_index("__i").filter(~pl.col("__i").is_in([0, 4, 5, FRAME.height - 1])).drop("__i")


def _run(monkeypatch: pytest.MonkeyPatch, native: bool, frame: Any, metric: Any, by: Any, policy: str) -> Any:
    taken: list[bool] = []
    real = _REAL_RUN

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs) if native else None
        taken.append(out is not None)
        return out

    monkeypatch.setattr(_polars_native, "run", spy)
    monkeypatch.setattr(_polars_native, "MIN_EAGER_ROWS", 0)  # the test's frames are small
    monkeypatch.setattr(_polars_native, "MAX_METRICS", 100)
    monkeypatch.setattr(_polars_native, "_SORTS_UNGROUPED", True)
    try:
        ms = metric if isinstance(metric, list) else [metric]
        result: Any = cf.evaluate(frame, *ms, by=by, invalid=policy)
        if isinstance(result, pl.LazyFrame):
            result = result.collect()
    except Exception as exc:
        result = exc
    return result, any(taken)


def _same(got: Any, expected: Any, what: str) -> None:
    if isinstance(expected, Exception):
        assert type(got) is type(expected), f"{what}: {got!r} vs {expected!r}"
        assert str(got) == str(expected), what
        return
    assert not isinstance(got, Exception), f"{what}: {got!r}"
    assert_frame_equal(got, expected, check_dtypes=True, rel_tol=1e-12, abs_tol=1e-12)


CASES = [
    (frame_id, lazy, by, policy)
    for frame_id in ("bad", "clean")
    for lazy in (False, True)
    for by in (None, "g")
    for policy in ("null", "drop", "raise")
]


@pytest.mark.parametrize("name", sorted(ALL))
def test_the_native_path_equals_the_narwhals_path(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    taken_any = False
    for frame_id, lazy, by, policy in CASES:
        frame: Any = FRAME if frame_id == "bad" else CLEAN
        frame = frame.lazy() if lazy else frame
        what = f"{name} {frame_id} lazy={lazy} by={by} {policy}"
        got, taken = _run(monkeypatch, True, frame, ALL[name](), by, policy)
        expected, _ = _run(monkeypatch, False, frame, ALL[name](), by, policy)
        _same(got, expected, what)
        taken_any |= taken
        if lazy and policy == "raise":
            assert not taken, f"{what}: lazy 'raise' keeps the narwhals path (checks when collected)"
    if name in REFUSED:
        assert not taken_any, f"{name} cannot compile: the narwhals path"
    else:
        assert name not in TAKEN or taken_any, f"{name}: the compiled path"


#: entries that must take the compiled path (Float64 / Boolean inputs, no positive-total rule)
TAKEN = {
    "coverage",
    "width",
    "winkler",
    "brier",
    "log_loss",
    "ece",
    "wis",
    "pinball_loss",
    "ks_test",
    "ssc",
    "auroc",
    "ece_quantile",
}


def test_integer_inputs_and_categorical_keys_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    metric = cf.coverage("y", "lo", "hi")
    frame = CLEAN.with_columns(pl.col("y").round().cast(pl.Int64))
    for f, by in ((frame, None), (CLEAN.with_columns(pl.col("g").cast(pl.Categorical)), "g")):
        got, taken = _run(monkeypatch, True, f, metric, by, "null")
        expected, _ = _run(monkeypatch, False, f, metric, by, "null")
        assert not taken
        _same(got, expected, "fallback")


def test_empty_frames_and_null_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    keyed = CLEAN.with_columns(pl.when(pl.col("t") % 5 == 0).then(None).otherwise(pl.col("g")).alias("g"))
    metrics = [cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), cf.brier("label", "score")]
    for frame in (CLEAN.head(0), keyed):
        for by in (None, "g", ["g", "k"]):
            for policy in ("null", "drop", "raise"):
                got, taken = _run(monkeypatch, True, frame, cf.coverage("y", "lo", "hi"), by, policy)
                expected, _ = _run(monkeypatch, False, frame, cf.coverage("y", "lo", "hi"), by, policy)
                assert taken
                _same(got, expected, f"{frame.height} rows by={by} {policy}")
        for by in (None, "g"):
            got, taken = _run(monkeypatch, True, frame, metrics, by, "null")
            expected, _ = _run(monkeypatch, False, frame, metrics, by, "null")
            assert taken
            _same(got, expected, f"fused {frame.height} rows by={by}")


def test_the_default_limits_keep_small_eager_and_fused_calls_on_the_narwhals_path() -> None:
    from conformal_frames.engine.execute import _collect_options as _opts
    from conformal_frames.engine.plan import to_lazy

    metric = cf.coverage("y", "lo", "hi")
    lf, _ = to_lazy(CLEAN)
    assert (
        _polars_native.run(CLEAN, lf, [metric], [], "null", eager=True, collect_options=_opts) is None
    )  # 20 rows, eager
    assert _polars_native.run(CLEAN.lazy(), lf, [metric], [], "null", eager=False, collect_options=_opts) is not None
    assert (
        _polars_native.run(
            CLEAN.lazy(), lf, [metric, cf.width("lo", "hi")], [], "null", eager=False, collect_options=_opts
        )
        is None
    )


def test_the_taken_names_are_in_the_catalogue() -> None:
    assert set(ALL) >= TAKEN


def test_columns_named_like_internal_columns_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = pl.LazyFrame({"__cf_r1": [1.0, 0.0, 1.0, 1.0, 0.0, 1.0], "__cf_r0": [0.9, 0.2, 0.4, 0.7, 0.6, 0.1]})
    metric = cf.ece("__cf_r1", "__cf_r0", n_bins=2)
    got, taken = _run(monkeypatch, True, frame, metric, None, "null")
    expected, _ = _run(monkeypatch, False, frame, metric, None, "null")
    assert not taken and got["ece"][0] == pytest.approx(0.25)
    _same(got, expected, "internal names")
