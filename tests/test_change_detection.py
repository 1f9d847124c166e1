"""coverage_sequence(change_detection=True): the mixture of CUSUM e-detectors against a numpy recursion,
every backend and summaries == rows, and small seeded simulations of its average-run-length guarantee and of
its delay after a drop (the large ones: bench/bench_monitoring.py)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import conformal_frames as cf
from helpers import to_pandas

LEVEL = 0.9
ODDS = (1.25, 1.5, 2.0, 3.0, 5.0, 10.0)


def numpy_detector(k: np.ndarray, n: np.ndarray, p0: float, miss_alternative: str) -> np.ndarray:
    """The detector per period: sum_q w_q D_t(q), D_t = max(D_{t-1}, 1) e_t, e_t the period's likelihood ratio."""
    factors = {"greater": ODDS, "less": tuple(1 / r for r in ODDS)}.get(
        miss_alternative, ODDS + tuple(1 / r for r in ODDS)
    )
    odds = p0 / (1 - p0)
    total = np.zeros(len(k))
    for r in factors:
        q = odds * r / (1 + odds * r)
        d = 0.0
        for i, (ki, ni) in enumerate(zip(k, n)):
            e = (q / p0) ** ki * ((1 - q) / (1 - p0)) ** (ni - ki)
            d = max(d, 1.0) * e
            total[i] += d / len(factors)
    return total


def oracle(df: pd.DataFrame, keys: list[str], alternative: str, correction: Any, sig: float = 0.05) -> pd.DataFrame:
    miss_alt = {"less": "greater", "greater": "less"}.get(alternative, "two-sided")
    frame = df.assign(__m=((df["y"] < df["lo"]) | (df["y"] > df["hi"])).astype(float))
    groups = list(frame.groupby(keys, sort=True)) if keys else [((), frame)]
    threshold = (len(groups) if correction == "bonferroni" else 1) / sig
    parts = []
    for key, g in groups:
        days = g.groupby("day")["__m"].agg(["sum", "size"]).sort_index()
        det = numpy_detector(days["sum"].to_numpy(), days["size"].to_numpy(), 1 - LEVEL, miss_alt)
        crossed = days.index[det >= threshold]
        part = pd.DataFrame({"day": days.index, "e_detector": det})
        for kk, kv in zip(keys, key if isinstance(key, tuple) else (key,)):
            part[kk] = kv
        part["alarm_period"] = crossed[0] if len(crossed) else None
        parts.append(part)
    return pd.concat(parts).sort_values([*keys, "day"]).reset_index(drop=True)


def _data(seed: int, n: int = 240, drop: float = 1.0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    seg = rng.choice(["s0", "s1", "s2"], n)
    day = rng.integers(1, 9, n)
    hi = np.where((seg == "s0") & (day > 4), 1.645 - drop, 1.645)
    return {"seg": seg, "day": day, "y": rng.normal(size=n), "lo": np.full(n, -1.645), "hi": hi}


def _check(out: Any, expected: pd.DataFrame) -> None:
    got = to_pandas(out).reset_index(drop=True)
    np.testing.assert_allclose(got["e_detector"].to_numpy(float), expected["e_detector"].to_numpy(float), rtol=1e-9)
    g = [None if pd.isna(x) else int(x) for x in got["alarm_period"]]
    assert g == [None if x is None or pd.isna(x) else int(x) for x in expected["alarm_period"]]


@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
@pytest.mark.parametrize("seed", [0, 1])
def test_against_the_numpy_recursion(alternative: str, seed: int) -> None:
    df = pd.DataFrame(_data(seed, drop=1.0 if alternative != "greater" else -1.0))
    kw: dict[str, Any] = dict(confidence_level=LEVEL, order_by="day", alternative=alternative, change_detection=True)
    for keys, correction in (([], None), (["seg"], "bonferroni"), (["seg"], None)):
        for method in ("beta_binomial", "normal_mixture"):
            out = cf.coverage_sequence(df, "y", "lo", "hi", by=keys or None, correction=correction, method=method, **kw)
            _check(out, oracle(df, keys, alternative, correction))
            plain = cf.coverage_sequence(df, "y", "lo", "hi", by=keys or None, correction=correction, method=method,
                                         confidence_level=LEVEL, order_by="day", alternative=alternative)  # fmt: skip
            pd.testing.assert_frame_equal(out.drop(columns=["e_detector", "alarm", "alarm_period"]),
                                          plain.drop(columns=["alarm", "alarm_period"]))  # fmt: skip


def test_the_drop_is_found_and_alarms_and_since_compose() -> None:
    df = pd.DataFrame(_data(3, n=600, drop=1.5))
    kw: dict[str, Any] = dict(confidence_level=LEVEL, order_by="day", by="seg", change_detection=True)
    out = cf.coverage_sequence(df, "y", "lo", "hi", **kw)
    assert out.loc[out.seg == "s0", "alarm"].any()
    alarms = cf.coverage_alarms(df, "y", "lo", "hi", **kw)
    last = out.groupby("seg").tail(1).reset_index(drop=True)
    assert alarms["alarm"].tolist() == (~last["alarm_period"].isna()).tolist()
    np.testing.assert_allclose(alarms["e_detector"], last["e_detector"])
    late = cf.coverage_sequence(df, "y", "lo", "hi", since=3, **kw)
    pd.testing.assert_frame_equal(late, cf.coverage_sequence(df[df.day >= 3], "y", "lo", "hi", **kw))


@pytest.mark.spark_cases(method="normal_mixture")
@pytest.mark.parametrize("method", ["normal_mixture"])
def test_every_backend_and_summaries_equal_rows(constructor: Any, method: str) -> None:
    data = _data(5)
    kw: dict[str, Any] = dict(confidence_level=LEVEL, order_by="day", by="seg", method=method, change_detection=True)
    expected = cf.coverage_sequence(pd.DataFrame(data), "y", "lo", "hi", **kw)
    native = constructor(data)
    summary = cf.summarize(native, cf.coverage("y", "lo", "hi"), by=["seg", "day"])
    for out in (
        cf.coverage_sequence(native, "y", "lo", "hi", **kw),
        cf.coverage_sequence(summary, "y", "lo", "hi", **kw),
    ):
        got = to_pandas(out)
        np.testing.assert_allclose(
            got["e_detector"].to_numpy(float), expected["e_detector"].to_numpy(float), rtol=1e-12
        )
        assert got["alarm"].astype(bool).tolist() == expected["alarm"].tolist()


def test_bad_input_is_named() -> None:
    df = pd.DataFrame(_data(6))
    kw: dict[str, Any] = dict(confidence_level=LEVEL, order_by="day")
    with pytest.raises(TypeError, match="change_detection"):
        cf.coverage_sequence(df, "y", "lo", "hi", change_detection="yes", **kw)
    with pytest.raises(ValueError, match="e-bh"):
        cf.coverage_alarms(df, "y", "lo", "hi", change_detection=True, correction="e-bh", **kw)


# ---------------------------------------------------------------------------
# the guarantee and the delay: small seeded simulations (runs = segments of one polars call)
# ---------------------------------------------------------------------------
RUNS, PER_DAY = 300, 20


def _runs(seed: int, days: int, rate_after: float = 0.1, change: int | None = None) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    day = np.tile(np.repeat(np.arange(days), PER_DAY), RUNS)
    run = np.repeat(np.arange(RUNS), days * PER_DAY)
    rate = np.where(day >= (days if change is None else change), rate_after, 0.1)
    return pl.DataFrame({"run": run, "day": day, "m": (rng.random(run.size) < rate).astype(np.int64)})


def _first_alarm(df: pl.DataFrame, **kw: Any) -> np.ndarray:
    out = cf.coverage_sequence(df, miss="m", confidence_level=LEVEL, order_by="day", by="run", correction=None, **kw)
    return out.group_by("run").agg(pl.col("alarm_period").first())["alarm_period"].to_numpy().astype(float)


def test_on_target_the_run_length_to_a_false_alarm_is_what_the_theory_says() -> None:
    # D_t - t is a supermartingale on target, so at a horizon H: E[min(tau, H)] >= P(tau <= H) / significance
    horizon, sig = 60, 0.05
    first = _first_alarm(_runs(31, horizon), change_detection=True, significance=sig)
    alarmed = ~np.isnan(first)
    censored = np.where(alarmed, first + 1, horizon)  # periods run (days 0..)
    p, mean = alarmed.mean(), censored.mean()
    assert p / sig <= mean  # about 6 <= 50
    assert 0.05 < p < 0.6  # an e-detector does alarm eventually: its guarantee is on the run length
    strict = _first_alarm(_runs(32, horizon), change_detection=True, significance=0.002)
    assert np.isnan(strict).mean() >= 1 - horizon * 0.002 - 2 * math.sqrt(0.12 * 0.88 / RUNS)


def test_after_a_drop_on_day_20_the_delay_is_close_to_the_since_delay() -> None:
    change, days = 20, 40
    df = _runs(33, days, rate_after=0.25, change=change)
    det = _first_alarm(df, change_detection=True, method="normal_mixture")
    since = _first_alarm(df, since=change)
    det_after = det[det >= change]
    assert np.isnan(since).sum() == 0 and len(det_after) >= 0.8 * RUNS
    ratio = (det_after - change + 1).mean() / (since - change + 1).mean()
    assert 0.5 <= ratio <= 1.5, ratio  # about 0.8: the detector needs no change point


def test_a_period_with_invalid_rows_nulls_the_detector_from_then_on() -> None:
    df = pd.DataFrame(_data(9, n=200))
    df.loc[(df.seg == "s0") & (df.day == 3), "y"] = np.nan
    out = cf.coverage_sequence(pl.from_pandas(df).lazy(), "y", "lo", "hi", confidence_level=LEVEL, order_by="day",
                               by="seg", change_detection=True).collect()  # fmt: skip
    s0 = out.filter(pl.col("seg") == "s0")
    assert s0.filter(pl.col("day") < 3)["e_detector"].null_count() == 0
    assert s0.filter(pl.col("day") >= 3)["e_detector"].null_count() == len(s0.filter(pl.col("day") >= 3))
    assert out.filter(pl.col("seg") != "s0")["e_detector"].null_count() == 0
