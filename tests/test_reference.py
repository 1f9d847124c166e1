"""Worked numbers of the numpy baseline (reference/003) where our definition agrees.

The baseline's ``(n, 2, n_levels)`` arrays become rows in long format with a
``level`` column, evaluated with ``by="level"``.
"""

from __future__ import annotations

import numpy as np
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas


def _long(y, intervals):
    """Baseline (n, 2, L) intervals -> long columns with a level index."""
    intervals = np.asarray(intervals, dtype=float)
    n, _, n_levels = intervals.shape
    return {
        "level": np.repeat(np.arange(n_levels), n).astype(float),
        "y": np.tile(np.asarray(y, dtype=float), n_levels),
        "lo": intervals[:, 0, :].T.ravel(),
        "hi": intervals[:, 1, :].T.ravel(),
    }


def test_mean_width_example(constructor):
    intervals = [
        [[4, 6, 8], [6, 9, 11]],
        [[9, 10, 11], [10, 12, 14]],
        [[8.5, 9.5, 10], [12.5, 12, 13]],
        [[7, 8, 9], [8.5, 9.5, 10]],
        [[5, 6, 7], [6.5, 8, 9]],
    ]
    data = _long(np.zeros(5), intervals)
    out = to_pandas(cf.evaluate(constructor(data), cf.width("lo", "hi"), by="level"))
    assert_close(out["width"], [2.0, 2.2, 2.4], rtol=1e-15)


def test_ssc_example(constructor):
    data = {"y": [5.0, 7.5, 9.5], "lo": [4.0, 6.0, 9.0], "hi": [6.0, 9.0, 10.0]}
    out = to_pandas(cf.conformal(constructor(data)).ssc("y", "lo", "hi", n_bins=2))
    assert_close(out["ssc"], [1.0, 1.0])


def test_ssc_score_example(constructor):
    intervals = [[[4, 4], [6, 7.5]], [[6.0, 8], [9.0, 10]], [[9, 9], [10.0, 10.0]]]
    data = _long([5, 7.5, 9.5], intervals)
    out = to_pandas(cf.evaluate(constructor(data), cf.ssc_score("y", "lo", "hi", n_bins=2), by="level"))
    assert_close(out["ssc_score"], [1.0, 0.5])


def test_hsic_example(eager_constructor):
    intervals = [[[9, 9], [10.0, 10.0]], [[8.5, 9], [12.5, 12]], [[10.5, 10.5], [12.0, 12]]]
    data = _long([9.5, 10.5, 12.5], intervals)
    out = to_pandas(cf.evaluate(eager_constructor(data), cf.hsic("y", "lo", "hi"), by="level"))
    # the baseline prints 8 decimals
    assert_close(out["hsic"], [0.31787614, 0.2962914], rtol=0, atol=5e-9)


def test_cwc_example(constructor):
    data = {
        "y": [5, 7.5, 9.5, 10.5, 12.5],
        "lo": [4, 6, 9, 8.5, 10.5],
        "hi": [6, 9, 10, 12.5, 12],
    }
    out = to_pandas(cf.evaluate(constructor(data), cf.cwc("y", "lo", "hi", eta=0.01, confidence_level=0.9)))
    assert round(float(out["cwc"][0]), 2) == 0.69
    # and the exact value of the formula: coverage 0.8, mean width 2.3, range 7.5
    assert out["cwc"][0] == pytest.approx((1 - 2.3 / 7.5) * np.exp(-0.01 * (0.8 - 0.9) ** 2), rel=1e-14)
