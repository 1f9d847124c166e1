"""Typed errors: ``cf.InvalidRowsError`` and ``cf.BackendLimitError``, caught by type on every backend."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import conformal_frames as cf
from conformal_frames.engine import plan as engine_plan
from conformal_frames.metrics import intervals

BAD_INTERVALS = {"y": [1.0, None, 3.0, 4.0, 1.0], "lo": [0.0, 0.0, 5.0, 0.0, 0.0], "hi": [2.0, 2.0, 4.0, 5.0, 2.0]}
LO_GT_HI = "column 'lo' is greater than column 'hi' in 1 row"
Y_MISSING = "column 'y' has missing (null/NaN) or infinite values in 1 row"


def test_typed_errors_are_exported() -> None:
    assert {"InvalidRowsError", "BackendLimitError", "ColumnNotFoundError"} <= set(cf.__all__)
    assert issubclass(cf.InvalidRowsError, ValueError)
    assert issubclass(cf.ColumnNotFoundError, ValueError)
    assert issubclass(cf.BackendLimitError, NotImplementedError)


def test_invalid_rows_error_counts_every_cause(constructor: Any) -> None:
    frame = constructor(BAD_INTERVALS)
    with pytest.raises(cf.InvalidRowsError) as info:
        cf.evaluate(frame, cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), invalid="raise")
    assert str(info.value) == LO_GT_HI  # the first failing check, as before
    assert info.value.counts == {LO_GT_HI: 1, Y_MISSING: 1}
    assert info.value.example is None


def test_invalid_rows_error_is_still_a_value_error(constructor: Any) -> None:
    with pytest.raises(ValueError, match="greater than column 'hi' in 1 row"):
        cf.evaluate(constructor(BAD_INTERVALS), cf.coverage("y", "lo", "hi"), invalid="raise")


def test_invalid_rows_error_names_the_smallest_offending_value(constructor: Any) -> None:
    frame = constructor({"y": [1.0, 2.0, 3.0], "lo": [0.0] * 3, "hi": [2.0] * 3, "w": [1.0, -3.0, -2.0]})
    with pytest.raises(cf.InvalidRowsError) as info:
        cf.evaluate(frame, cf.coverage("y", "lo", "hi", weights="w"), invalid="raise")
    assert info.value.example == -3
    assert str(info.value) == "column 'w' (weights=) has negative values in 2 rows, e.g. -3"
    assert info.value.counts == {"column 'w' (weights=) has negative values in 2 rows": 2}


@pytest.mark.parametrize("call", ["summarize", "cumulative_differences", "corp_reliability"])
def test_every_path_raises_the_typed_error(constructor: Any, call: str) -> None:
    frame = constructor({"y": [0, 1, 7, 9], "s": [0.1, 0.2, 0.3, 0.4]})
    runs = {
        "summarize": lambda: cf.summarize(frame, cf.brier("y", "s"), invalid="raise"),
        "cumulative_differences": lambda: cf.cumulative_differences(frame, "y", "s", invalid="raise"),
        "corp_reliability": lambda: cf.corp_reliability(frame, "y", "s", invalid="raise"),
    }
    with pytest.raises(cf.InvalidRowsError) as info:
        runs[call]()
    assert info.value.counts == {"column 'y' has labels other than 0 and 1 in 2 rows": 2}


def test_invalid_rows_error_pickles_with_its_counts() -> None:
    err = cf.InvalidRowsError("bad in 2 rows, e.g. 7", counts={"bad in 2 rows": 2}, example=7)
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.counts, back.example) == (str(err), err.counts, err.example)


def test_eager_pandas_with_a_bad_row_runs_the_query_once(monkeypatch: pytest.MonkeyPatch) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("polars")
    calls: list[str] = []
    finish = engine_plan.Compiled.finish

    def counted(self: Any, *, eager: bool, collect_options: Any = None) -> Any:
        calls.append(str(self.table.implementation))
        return finish(self, eager=eager, collect_options=collect_options)

    monkeypatch.setattr(engine_plan.Compiled, "finish", counted)
    with pytest.raises(cf.InvalidRowsError, match=LO_GT_HI):
        cf.evaluate(pd.DataFrame(BAD_INTERVALS), cf.coverage("y", "lo", "hi"))
    assert len(calls) == 1


def test_missing_column_is_a_column_not_found_error(constructor: Any) -> None:
    with pytest.raises(cf.ColumnNotFoundError, match="column 'nope' not found; available columns"):
        cf.evaluate(constructor(BAD_INTERVALS), cf.coverage("nope", "lo", "hi"))


def _lazy_non_polars(constructor: Any) -> None:
    if not constructor.lazy or constructor.id == "polars[lazy]":
        pytest.skip("a lazy backend other than polars")


def test_numpy_step_on_a_lazy_backend_is_a_backend_limit(constructor: Any) -> None:
    _lazy_non_polars(constructor)
    frame = constructor({"y": [1.0, 2.0], "lo": [0.0, 0.0], "hi": [2.0, 1.0]})
    with pytest.raises(cf.BackendLimitError, match="coverage_test.*cannot stay lazy.*collect") as info:
        cf.evaluate(frame, cf.coverage_test("y", "lo", "hi", confidence_level=0.9))
    assert info.value.backend == constructor.id
    assert constructor.id in str(info.value)


def test_a_backend_not_implemented_error_becomes_a_backend_limit(
    constructor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unsupported(self: Any, q: Any) -> Any:
        raise NotImplementedError("this operation is not supported")

    monkeypatch.setattr(intervals.Coverage, "build", unsupported)
    frame = constructor({"y_limit": [1.0, 2.0], "lo": [0.0, 0.0], "hi": [2.0, 1.0]})  # a query no cache holds
    with pytest.raises(cf.BackendLimitError, match="coverage: the .* backend cannot run an operation") as info:
        cf.evaluate(frame, cf.coverage("y_limit", "lo", "hi"))
    assert "this operation is not supported" in str(info.value)
    assert info.value.backend in str(info.value)
    assert isinstance(info.value.__cause__, NotImplementedError)


def test_corp_on_a_lazy_backend_is_a_backend_limit(constructor: Any) -> None:
    _lazy_non_polars(constructor)
    frame = constructor({"y": [0, 1, 1], "s": [0.2, 0.4, 0.9]})
    with pytest.raises(cf.BackendLimitError) as info:
        cf.corp_reliability(frame, "y", "s")
    assert info.value.backend == constructor.id


def test_a_narwhals_backend_runtime_error_becomes_a_backend_limit() -> None:
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    # narwhals' Dask backend words this limit as a RuntimeError ("Objects are not co-aligned")
    frame = dd.from_pandas(
        pd.DataFrame({"cls": [0, 1, 2, 1], "p0": [0.5] * 4, "p1": [0.3] * 4, "p2": [0.2] * 4}), npartitions=2
    )
    metric = cf.efficiency_criteria("cls", ["p0", "p1", "p2"], classes=[0, 1, 2], confidence_level=0.8)
    with pytest.raises(cf.BackendLimitError, match="efficiency.*the dask backend cannot run") as info:
        cf.evaluate(frame, metric)
    assert info.value.backend == "dask"
    assert isinstance(info.value.__cause__, RuntimeError)


def test_an_error_of_our_own_code_is_not_a_backend_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Any, q: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(intervals.Coverage, "build", broken)
    frame = {"y_bug": [1.0, 2.0], "lo": [0.0, 0.0], "hi": [2.0, 1.0]}
    pl = pytest.importorskip("polars")
    with pytest.raises(RuntimeError, match="^a bug$"):
        cf.evaluate(pl.DataFrame(frame), cf.coverage("y_bug", "lo", "hi"))
