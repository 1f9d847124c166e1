"""Kupiec, Christoffersen and the longest miss run against the textbook formulas.

The oracle evaluates the likelihoods of Kupiec (1995) and Christoffersen
(1998) in their product form with 60-digit decimals (no cancellation), on the
rows sorted by time; the frames get the rows shuffled.
"""

from __future__ import annotations

import itertools
from decimal import Decimal, getcontext
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy.stats import chi2

import conformal_frames as cf
from helpers import assert_close, to_pandas

getcontext().prec = 60


def _ln_likelihood(pairs: list[tuple[int, Fraction]]) -> Decimal:
    """``ln prod prob^k`` with ``0^0 = 1``."""
    total = Decimal(0)
    for k, prob in pairs:
        if k:
            total += k * (Decimal(prob.numerator) / Decimal(prob.denominator)).ln()
    return total


def kupiec_oracle(miss: list[int], p: Fraction) -> float:
    n, k = len(miss), sum(miss)
    phat = Fraction(k, n)
    null = _ln_likelihood([(n - k, 1 - p), (k, p)])
    alt = _ln_likelihood([(n - k, 1 - phat), (k, phat)])
    return float(-2 * (null - alt))


def christoffersen_oracle(miss: list[int]) -> float:
    pairs = list(itertools.pairwise(miss))
    n = {(i, j): sum(1 for a, b in pairs if (a, b) == (i, j)) for i in (0, 1) for j in (0, 1)}
    if not pairs:
        return float("nan")
    from0, from1 = n[0, 0] + n[0, 1], n[1, 0] + n[1, 1]
    pi = Fraction(n[0, 1] + n[1, 1], len(pairs))
    pi01 = Fraction(n[0, 1], from0) if from0 else Fraction(0)
    pi11 = Fraction(n[1, 1], from1) if from1 else Fraction(0)
    null = _ln_likelihood([(n[0, 0] + n[1, 0], 1 - pi), (n[0, 1] + n[1, 1], pi)])
    alt = _ln_likelihood([(n[0, 0], 1 - pi01), (n[0, 1], pi01), (n[1, 0], 1 - pi11), (n[1, 1], pi11)])
    return float(-2 * (null - alt))


def longest_run_oracle(miss: list[int]) -> int:
    best = run = 0
    for m in miss:
        run = run + 1 if m else 0
        best = max(best, run)
    return best


def _sequences(seed: int) -> dict[str, list[int]]:
    rng = np.random.default_rng(seed)
    clustered = (np.convolve(rng.random(80) < 0.08, np.ones(4), mode="same") > 0).astype(int)
    return {
        "random": (rng.random(120) < 0.12).astype(int).tolist(),
        "clustered": clustered.tolist(),
        "none": [0] * 15,  # no miss
        "spread": [1, 0, 0, 1, 0, 0, 0, 1, 0, 0],  # no two consecutive misses
        "all": [1] * 6,  # only misses
        "single": [1],  # no transition
    }


def _frame_data(sequences: dict[str, list[int]], seed: int) -> dict[str, Any]:
    rows = []
    for g, miss in sequences.items():
        for t, m in enumerate(miss):
            rows.append((g, 10 * t + 3, 5.0 if m else 0.5))  # interval [0, 1]
    order = np.random.default_rng(seed + 100).permutation(len(rows))
    rows = [rows[i] for i in order]  # shuffled
    return {
        "g": [r[0] for r in rows],
        "t": np.array([r[1] for r in rows], dtype=np.int64),
        "y": np.array([r[2] for r in rows]),
        "lo": np.zeros(len(rows)),
        "hi": np.ones(len(rows)),
    }


def _expected(sequences: dict[str, list[int]], level: float) -> pd.DataFrame:
    p = Fraction(Decimal(1) - Decimal(repr(level)))
    rows = []
    for g in sorted(sequences):
        miss = sequences[g]
        uc, ind = kupiec_oracle(miss, p), christoffersen_oracle(miss)
        rows.append(
            {
                "g": g,
                "kupiec": uc,
                "kupiec_p": chi2.sf(uc, 1),
                "ind": ind,
                "ind_p": chi2.sf(ind, 1),
                "cc": uc + ind,
                "cc_p": chi2.sf(uc + ind, 2),
                "run": longest_run_oracle(miss),
                "n": len(miss),
            }
        )
    return pd.DataFrame(rows)


def _metrics(level: float = 0.9) -> list[cf.Metric]:
    return [
        cf.kupiec_test("y", "lo", "hi", confidence_level=level),
        cf.christoffersen_test("y", "lo", "hi", confidence_level=level, order_by="t"),
        cf.longest_miss_run("y", "lo", "hi", order_by="t"),
    ]


def _check(out: Any, expected: pd.DataFrame) -> None:
    got = to_pandas(out)
    assert got["g"].tolist() == expected["g"].tolist()
    assert_close(got["kupiec_test"], expected["kupiec"], what="LR_uc")
    assert_close(got["kupiec_test_pvalue"], expected["kupiec_p"], what="LR_uc p-value")
    assert_close(got["christoffersen_test"], expected["ind"], atol=1e-13, what="LR_ind")
    assert_close(got["christoffersen_test_pvalue"], expected["ind_p"], what="LR_ind p-value")
    assert_close(got["christoffersen_test_statistic_cc"], expected["cc"], what="LR_cc")
    assert_close(got["christoffersen_test_pvalue_cc"], expected["cc_p"], what="LR_cc p-value")
    assert_close(got["longest_miss_run"], expected["run"], what="longest run")
    assert got["n"].tolist() == expected["n"].tolist()


def test_sequential_tests_match_textbook_on_every_backend(constructor: Any) -> None:
    sequences = _sequences(0)
    out = cf.evaluate(constructor(_frame_data(sequences, 0)), *_metrics(), by="g")
    if constructor.lazy:
        assert not isinstance(out, (pd.DataFrame, pl.DataFrame))  # lazy stays lazy
    _check(out, _expected(sequences, 0.9))


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("lazy", [False, True])
def test_sequential_tests_over_seeds(seed: int, lazy: bool) -> None:
    # covered by test_sequential_tests_match_textbook_on_every_backend[pyspark] etc.
    sequences = _sequences(seed)
    frame = pl.DataFrame(_frame_data(sequences, seed))
    level = 0.95 if seed % 2 else 0.9
    out = cf.evaluate(frame.lazy() if lazy else frame, *_metrics(level), by="g")
    _check(out, _expected(sequences, level))


def test_degenerate_cases_are_documented_values() -> None:
    out = cf.evaluate(pl.DataFrame(_frame_data(_sequences(0), 0)), *_metrics(), by="g")
    rows = {r["g"]: r for r in out.to_dicts()}
    assert rows["none"]["christoffersen_test"] == 0.0 and rows["none"]["christoffersen_test_pvalue"] == 1.0
    assert rows["all"]["christoffersen_test"] == 0.0
    assert rows["single"]["christoffersen_test"] is None  # no transition
    assert rows["none"]["longest_miss_run"] == 0.0
    # no miss: LR_uc = -2 n ln(1 - p)
    assert rows["none"]["kupiec_test"] == pytest.approx(-2 * 15 * np.log(0.9), rel=1e-14)
    assert rows["spread"]["christoffersen_test"] > 0.0  # finite with n_11 = 0


def test_direct_calls_return_result_objects() -> None:
    sequences = {"random": _sequences(5)["random"]}
    frame = pd.DataFrame(_frame_data(sequences, 5)).drop(columns="g")
    expected = _expected(sequences, 0.9).iloc[0]
    res = frame.conformal.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by="t")
    assert isinstance(res, cf.ChristoffersenTestResult)
    stat, p = res
    assert_close([stat, p, res.statistic_cc, res.pvalue_cc], expected[["ind", "ind_p", "cc", "cc_p"]].to_numpy(float))
    assert res.n == len(sequences["random"])
    kup = frame.conformal.kupiec_test("y", "lo", "hi", confidence_level=0.9)
    assert isinstance(kup, cf.KupiecTestResult)
    assert_close([kup.statistic, kup.pvalue], expected[["kupiec", "kupiec_p"]].to_numpy(float))
    assert frame.conformal.longest_miss_run("y", "lo", "hi", order_by="t") == float(expected["run"])


def test_level_column_and_order_by_datetime() -> None:
    sequences = _sequences(7)
    data = _frame_data(sequences, 7)
    frame = pl.DataFrame(data).with_columns(
        level=pl.lit(0.9), t=pl.datetime(2026, 1, 1) + pl.duration(minutes=pl.col("t"))
    )
    out = cf.evaluate(
        frame,
        cf.kupiec_test("y", "lo", "hi", confidence_level="level"),
        cf.christoffersen_test("y", "lo", "hi", confidence_level="level", order_by="t"),
        cf.longest_miss_run("y", "lo", "hi", order_by="t"),
        by=["g", "level"],
    )
    _check(out.drop("level"), _expected(sequences, 0.9))


def test_repeated_or_missing_order_values_are_invalid() -> None:
    frame = pl.DataFrame(
        {"g": ["a", "a", "a", "b"], "t": [1, 2, 2, 2], "y": [0.0] * 4, "lo": [0.0] * 4, "hi": [1.0] * 4}
    )
    test = cf.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by="t")
    with pytest.raises(ValueError, match="order_by column 't' has values repeated within a group in 2 rows"):
        cf.evaluate(frame, test, by="g")
    out = cf.evaluate(frame, test, by="g", invalid="null")
    assert out["christoffersen_test"].to_list() == [None, None]  # b has one row: no transition
    assert out["n_invalid"].to_list() == [2, 0]
    with pytest.raises(ValueError, match="order_by column 't' has missing values in 1 row"):
        cf.evaluate(frame.with_columns(t=pl.Series([1, None, 3, 4])), test, by="g")
    with pytest.raises(TypeError, match="order_by must be a column name"):
        cf.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by=3)  # type: ignore[arg-type]


def test_kupiec_merges_christoffersen_is_refused() -> None:
    sequences = _sequences(8)
    data = _frame_data(sequences, 8)
    data["day"] = data["t"] // 200
    frame = pl.DataFrame(data)
    kupiec = cf.kupiec_test("y", "lo", "hi", confidence_level=0.9)
    stats = cf.summarize(frame, kupiec, by=["day", "g"])
    got = cf.finalize(stats, kupiec, by="g")
    assert_close(got["kupiec_test"], cf.evaluate(frame, kupiec, by="g")["kupiec_test"])
    with pytest.raises(ValueError, match="christoffersen_test: ranks or orders the rows.*alternative: kupiec_test"):
        cf.summarize(frame, _metrics()[1], by=["day", "g"])
    with pytest.raises(ValueError, match="longest_miss_run: .*alternative: kupiec_test"):
        cf.summarize(frame, _metrics()[2], by=["day", "g"])
