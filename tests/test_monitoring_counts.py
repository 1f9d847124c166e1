"""coverage_sequence / coverage_alarms: frequency counts (``counts=``) equal the repeated rows, and the
period columns (``alarm_period``, ``first_excluded``) keep an integer (or the period's own) type with nulls."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import conformal_frames as cf
from conformal_frames.errors import InvalidRowsError
from helpers import to_pandas

LEVEL = 0.9


def _counted(seed: int, n: int = 150) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    seg = rng.choice(["a", "b"], n)
    day = rng.integers(1, 6, n)
    hi = np.where((seg == "a") & (day > 2), 0.5, 1.645)
    k = rng.integers(0, 4, n)  # zero counts too: such a row stands for no row
    y = rng.normal(size=n)
    m = ((y < -1.645) | (y > hi)).astype(int)
    return pd.DataFrame({"seg": seg, "day": day, "y": y, "lo": -1.645, "hi": hi, "k": k, "m": m,
                         "label": np.where(m == 1, "x", "z"), "set_x": False, "set_z": True})  # fmt: skip


def _repeated(df: pd.DataFrame) -> pd.DataFrame:
    return df.loc[df.index.repeat(df["k"])].reset_index(drop=True)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("change_detection", [False, True])
def test_counts_equal_the_repeated_rows(seed: int, change_detection: bool) -> None:
    df = _counted(seed)
    rep = _repeated(df)
    kw: dict[str, Any] = dict(confidence_level=LEVEL, order_by="day", by="seg", n_opt=50,
                              change_detection=change_detection)  # fmt: skip
    inputs: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        (("y", "lo", "hi"), {}),
        ((), {"miss": "m"}),
        (("label",), {"sets": ["set_x", "set_z"], "classes": ["x", "z"]}),
    ]
    for args, extra in inputs:
        expected = cf.coverage_sequence(rep, *args, **extra, **kw)
        got = cf.coverage_sequence(df, *args, **extra, counts="k", **kw)
        pd.testing.assert_frame_equal(got, expected, check_exact=False, rtol=1e-12)
        alarms = cf.coverage_alarms(df, *args, **extra, counts="k", **kw)
        pd.testing.assert_frame_equal(
            alarms, cf.coverage_alarms(rep, *args, **extra, **kw), check_exact=False, rtol=1e-12
        )


def test_a_summary_of_counted_coverage_serves_and_lazy_stays_lazy() -> None:
    df = _counted(2)
    kw: dict[str, Any] = dict(confidence_level=LEVEL, order_by="day", by="seg", n_opt=50, counts="k")
    expected = cf.coverage_sequence(df, "y", "lo", "hi", **kw)
    summary = cf.summarize(df, cf.coverage("y", "lo", "hi", counts="k"), by=["seg", "day"])
    pd.testing.assert_frame_equal(cf.coverage_sequence(summary, "y", "lo", "hi", **kw), expected)
    lazy = cf.coverage_sequence(pl.from_pandas(df).lazy(), "y", "lo", "hi", **kw)
    assert isinstance(lazy, pl.LazyFrame)
    got = to_pandas(lazy)
    np.testing.assert_allclose(got["e_value"], expected["e_value"], rtol=1e-12)
    assert got["n"].tolist() == expected["n"].tolist()


def test_bad_counts_are_named() -> None:
    df = _counted(3).assign(k=lambda d: d.k - 1)  # negative counts
    with pytest.raises(InvalidRowsError, match="k"):
        cf.coverage_sequence(df, "y", "lo", "hi", confidence_level=LEVEL, order_by="day", counts="k", invalid="raise")


def test_the_period_columns_keep_the_period_type_with_nulls(constructor: Any) -> None:
    # segment "a" never alarms (null), "b" does: the columns hold both
    data = {"s": ["a"] * 6 + ["b"] * 6, "day": [1, 1, 2, 2, 3, 3] * 2, "m": [0] * 6 + [1] * 6}
    kw: dict[str, Any] = dict(miss="m", confidence_level=LEVEL, order_by="day", by="s", n_opt=5, correction=None,
                              method="normal_mixture")  # fmt: skip
    seq = cf.coverage_sequence(constructor(data), **kw)
    alarms = cf.coverage_alarms(constructor(data), **kw)
    for out in (seq, alarms):
        got = to_pandas(out)
        for c in ("first_excluded", "alarm_period"):
            native = out.collect() if hasattr(out, "collect") else out
            if isinstance(native, pd.DataFrame):
                assert native[c].dtype == ("Int64" if native["day"].dtype == np.int64 else native["day"].dtype), native[
                    c
                ].dtype
            elif isinstance(native, pl.DataFrame):
                assert native.schema[c] == native.schema["day"]
            assert not pd.isna(got[c].iloc[-1]) and int(got[c].iloc[-1]) in (1, 2)
        assert pd.isna(got["alarm_period"].iloc[0]) and pd.isna(got["first_excluded"].iloc[0])


def test_pandas_dates_and_datetimes_as_periods() -> None:
    import datetime as dt

    base = pd.DataFrame({"s": ["a"] * 6 + ["b"] * 6, "d": [1, 1, 2, 2, 3, 3] * 2, "m": [0] * 6 + [1] * 6})
    kw: dict[str, Any] = dict(miss="m", confidence_level=LEVEL, order_by="day", by="s", n_opt=5, correction=None)
    stamps = base.assign(day=pd.Timestamp("2026-01-01") + pd.to_timedelta(base.d, unit="D"))
    out = cf.coverage_sequence(stamps, **kw)
    assert out["alarm_period"].dtype == stamps["day"].dtype and out["alarm_period"].isna().sum() == 3
    dates = base.assign(day=[dt.date(2026, 1, x) for x in base.d])
    out = cf.coverage_alarms(dates, **kw)
    assert out["alarm_period"].tolist() == [None, dt.date(2026, 1, 1)]
