"""Eager pandas input run by polars: the same frame as the pandas path, or the pandas path itself.

Every case evaluates the same call twice, by polars (``_pandas_polars``) and
by the pandas path, and checks the column names, dtypes, index and values
(1e-12 relative), or the same error message; and whether polars ran it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import conformal_frames as cf
from conformal_frames import engine
from conformal_frames.engine import _pandas_polars

pd = pytest.importorskip("pandas")
pytest.importorskip("polars")

RTOL = 1e-12


def _data(n: int = 240, seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    lo = np.round(rng.normal(size=n), 2)
    score = np.round(rng.uniform(size=n), 2)
    p = rng.uniform(size=(n, 3))
    return pd.DataFrame(
        {
            "g": rng.choice(["a", "B", "c"], size=n),
            "gi": rng.integers(0, 4, n),
            "gf": rng.integers(0, 3, n) * 0.5,
            "gb": rng.uniform(size=n) < 0.5,
            "y": np.round(rng.normal(size=n), 2),
            "lo": lo,
            "hi": lo + np.round(rng.gamma(2.0, size=n), 1),
            "label": (rng.uniform(size=n) < score).astype(np.int64),
            "score": score,
            "cls": rng.integers(0, 3, n),
            "in0": p[:, 0] > 0.3,
            "in1": p[:, 1] > 0.3,
            "in2": p[:, 2] > 0.3,
            "w": rng.uniform(0.5, 2.0, n),
            "t": np.arange(n, dtype=np.float64),
        }
    )


SETS: dict[str, Any] = {"sets": ["in0", "in1", "in2"], "classes": [0, 1, 2]}
METRICS: dict[str, list[engine.Metric]] = {
    "intervals": [
        cf.coverage("y", "lo", "hi"),
        cf.width("lo", "hi"),
        cf.winkler("y", "lo", "hi", confidence_level=0.9),
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
    ],
    "ssc": [cf.ssc_score("y", "lo", "hi")],
    "hsic": [cf.hsic("y", "lo", "hi")],
    "coverage_test": [cf.coverage_test("y", "lo", "hi", confidence_level=0.9, method="clopper-pearson")],
    "sets": [cf.set_coverage("cls", **SETS), cf.set_size(**SETS)],
    "calibration": [cf.ece("label", "score"), cf.mce("label", "score"), cf.brier("label", "score")],
    "tests": [cf.ks_test("label", "score"), cf.spiegelhalter_test("label", "score")],
    "weights": [cf.coverage("y", "lo", "hi", weights="w"), cf.ece("label", "score", weights="w")],
    "quantiles": [cf.quantile_coverage("y", quantiles={0.1: "lo", 0.9: "hi"})],
    "ordered": [cf.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by="t")],
}


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "result", fn()
    except Exception as exc:  # the error is part of the result
        return type(exc).__name__, str(exc)


def _assert_same(fast: Any, slow: Any) -> None:
    assert type(fast) is type(slow)
    if isinstance(fast, pd.DataFrame):
        pd.testing.assert_frame_equal(fast, slow, check_exact=False, rtol=RTOL, atol=0.0)
    elif dataclasses.is_dataclass(fast):
        _assert_same(pd.DataFrame([dataclasses.asdict(fast)]), pd.DataFrame([dataclasses.asdict(slow)]))
    elif isinstance(fast, float):
        np.testing.assert_allclose(fast, slow, rtol=RTOL, atol=0.0)
    else:
        assert fast == slow


def _both(monkeypatch: pytest.MonkeyPatch, fn: Callable[[], Any]) -> bool:
    """Run ``fn`` by polars and by the pandas path, check they agree; whether polars ran it.

    An error is always the pandas path's (polars may have run first, e.g. for
    an invalid row under ``invalid="raise"``).
    """
    ran: list[bool] = []
    back = _pandas_polars.back

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = back(*args, **kwargs)
        ran.append(out is not None)
        return out

    monkeypatch.setattr(_pandas_polars, "back", spy)
    kind, fast = _outcome(fn)
    monkeypatch.setattr(_pandas_polars, "ENABLED", False)
    slow_kind, slow = _outcome(fn)
    monkeypatch.setattr(_pandas_polars, "ENABLED", True)
    assert kind == slow_kind, (fast, slow)
    if kind == "result":
        _assert_same(fast, slow)
        return any(ran)
    assert fast == slow
    return False


@pytest.mark.parametrize("by", [None, "g", "gi", "gf", "gb", ["g", "gi"]])
@pytest.mark.parametrize("name", list(METRICS))
def test_same_frame_as_pandas(monkeypatch: pytest.MonkeyPatch, name: str, by: Any) -> None:
    pdf = _data()
    before = pdf.copy()
    assert _both(monkeypatch, lambda: cf.evaluate(pdf, *METRICS[name], by=by))
    assert _both(monkeypatch, lambda: engine.evaluate_one(pdf, METRICS[name][0], by=by))
    pd.testing.assert_frame_equal(pdf, before)  # never the caller's frame


@pytest.mark.parametrize("invalid", [None, "null", "drop"])
@pytest.mark.parametrize("name", list(METRICS))
def test_invalid_rows(monkeypatch: pytest.MonkeyPatch, name: str, invalid: Any) -> None:
    pdf = _data()
    pdf.loc[3, "y"] = np.nan
    pdf.loc[5, "score"] = np.nan
    pdf.loc[7, "lo"] = 99.0  # lo > hi
    pdf.loc[9, "label"] = 3
    pdf.loc[pdf["g"] == "c", "w"] = np.nan  # a group whose rows are all invalid
    ran = _both(monkeypatch, lambda: cf.evaluate(pdf, *METRICS[name], by="g", invalid=invalid))
    assert ran or invalid is None  # the messages of "raise" come from the pandas path
    _both(monkeypatch, lambda: engine.evaluate_one(pdf, METRICS[name][0], invalid=invalid))


def _keys(pdf: Any) -> dict[str, tuple[Any, bool]]:
    """Key columns of several dtypes: (column, whether polars runs it)."""
    g = pdf["g"]
    with_none = g.astype(object).where(pdf.index != 4, None)
    days = pd.Timestamp("2024-01-01") + pd.to_timedelta(pdf["gi"], unit="D")
    strings = int(pd.__version__.split(".")[0]) >= 3  # string keys are checked on pandas 3
    return {
        "str": (g.astype("str"), strings),
        "string": (g.astype("string"), strings),
        "string[pyarrow]": (g.astype("string[pyarrow]"), strings),
        "int32": (pdf["gi"].astype(np.int32), True),
        "uint8": (pdf["gi"].astype(np.uint8), True),
        "float32": (pdf["gf"].astype(np.float32), True),
        "object": (g.astype(object), False),
        "category": (pd.Categorical(g, categories=["c", "a", "B", "unused"]), False),
        "datetime": (days, True),
        "datetime[s]": (days.astype("datetime64[s]"), False),
        "datetime tz": (days.dt.tz_localize("Europe/Paris"), False),
        "Int64": (pdf["gi"].astype("Int64"), False),
        "boolean": (pdf["gb"].astype("boolean"), False),
        "int64[pyarrow]": (pdf["gi"].astype("int64[pyarrow]"), False),
        "NaN": (pdf["gf"].where(pdf.index != 4, np.nan), False),
        "None": (with_none.astype("str"), False),
    }


@pytest.mark.parametrize("invalid", [None, "null", "drop"])
@pytest.mark.parametrize("dtype", list(_keys(_data(8))))
def test_key_dtypes(monkeypatch: pytest.MonkeyPatch, dtype: str, invalid: Any) -> None:
    pdf = _data()
    key, fast = _keys(pdf)[dtype]
    pdf["k"] = key
    metrics = [*METRICS["intervals"], *METRICS["coverage_test"]]
    ran = _both(monkeypatch, lambda: cf.evaluate(pdf, *metrics, by="k", invalid=invalid))
    assert ran == fast


def _inputs(pdf: Any) -> dict[str, tuple[list[engine.Metric], bool]]:
    """Metric inputs of several dtypes: (metrics, whether polars runs them)."""
    pdf["y32"] = pdf["y"].astype(np.float32)
    pdf["time"] = pd.Timestamp("2024-01-01") + pd.to_timedelta(pdf["t"], unit="h")
    pdf["lo_i"] = pdf["cls"] - pdf["label"]
    pdf["hi_i"] = pdf["cls"] + 1
    pdf["label_b"] = pdf["label"] == 1
    pdf["label_i"] = pdf["label"].astype("Int64")
    pdf["score_f"] = pdf["score"].astype("Float64")
    pdf["score_pa"] = pdf["score"].astype("double[pyarrow]")
    pdf["ystr"] = pdf["cls"].map({0: "u", 1: "v", 2: "w"}).astype(object)
    pdf["set_list"] = [[c for c, m in zip("uvw", row) if m] for row in pdf[["in0", "in1", "in2"]].to_numpy()]
    return {
        "float32": ([cf.coverage("y32", "lo", "hi")], True),
        "bool": ([cf.ece("label_b", "score")], True),
        "int": ([cf.coverage("cls", "lo_i", "hi_i")], True),
        "object strings": ([cf.set_coverage("ystr", sets=SETS["sets"], classes=["u", "v", "w"])], True),
        "nullable": ([cf.ece("label_i", "score_f")], False),
        "pyarrow": ([cf.brier("label", "score_pa")], False),
        "list column": ([cf.set_coverage("ystr", sets="set_list")], False),
        "datetime order": ([cf.longest_miss_run("y", "lo", "hi", order_by="time")], True),
    }


@pytest.mark.parametrize("by", [None, "g"])
@pytest.mark.parametrize("case", list(_inputs(_data(8))))
def test_input_dtypes(monkeypatch: pytest.MonkeyPatch, case: str, by: Any) -> None:
    pdf = _data()
    metrics, fast = _inputs(pdf)[case]
    assert _both(monkeypatch, lambda: cf.evaluate(pdf, *metrics, by=by)) == fast
    assert _both(monkeypatch, lambda: engine.evaluate_one(pdf, metrics[0], by=by)) == fast


@pytest.mark.parametrize("by", [None, "g"])
def test_long_tables_and_results(monkeypatch: pytest.MonkeyPatch, by: Any) -> None:
    pdf = _data().iloc[::-2]  # not a RangeIndex
    for metric in [
        cf.reliability("label", "score"),
        cf.ssc("y", "lo", "hi"),
        cf.spiegelhalter_test("label", "score"),
        cf.coverage("y", "lo", "hi"),
    ]:
        assert _both(monkeypatch, lambda m=metric: pdf.conformal.evaluate(m, by=by))
        assert _both(monkeypatch, lambda m=metric: engine.evaluate_one(pdf, m, by=by))


def test_errors_are_the_pandas_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    pdf = _data()
    assert not _both(monkeypatch, lambda: cf.evaluate(pdf, cf.coverage("y", "low", "hi")))
    assert not _both(monkeypatch, lambda: cf.evaluate(pdf, cf.coverage("g", "lo", "hi")))
    assert not _both(monkeypatch, lambda: cf.evaluate(pdf, cf.coverage("y", "lo", "hi"), by="n"))
    pdf.loc[2, "gf"] = np.nan
    # a NaN key is a null key: its rows form their own group, the same on both paths
    _both(monkeypatch, lambda: cf.evaluate(pdf, cf.coverage("y", "lo", "hi"), by="gf"))
    out = cf.evaluate(pdf, cf.coverage("y", "lo", "hi"), by="gf")
    assert out["gf"].isna().iloc[-1] and out["n"].iloc[-1] == 1


def test_without_polars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pandas_polars, "_polars_installed", lambda: False)
    assert not _both(monkeypatch, lambda: cf.evaluate(_data(), *METRICS["intervals"], by="g"))


def test_small_and_empty_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    pdf = _data()
    for frame in (pdf.head(1), pdf.head(0)):
        _both(monkeypatch, lambda f=frame: cf.evaluate(f, *METRICS["intervals"], by="g", invalid="null"))
        _both(monkeypatch, lambda f=frame: cf.evaluate(f, *METRICS["calibration"], invalid="null"))


def test_unhashable_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    from conformal_frames.metrics.intervals import Coverage

    @dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
    class Tagged(Coverage):
        tags: list[str] = dataclasses.field(default_factory=list)
        __hash__ = None  # type: ignore[assignment]

    metric = Tagged(y="y", lo="lo", hi="hi", tags=["x"])
    assert _both(monkeypatch, lambda: cf.evaluate(_data(), metric, by="g"))
