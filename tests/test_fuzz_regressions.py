"""Regression tests of the defects the differential fuzz found (issue 25).

One test per defect, on every backend where it applies, from the issue's
minimal reproductions.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas

_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)


# -- 1. Gaussian CRPS far in the tail ------------------------------------------
@pytest.mark.spark_cases(y=1e7, sd=1.0)
@pytest.mark.parametrize(("y", "sd"), [(1e7, 1.0), (2.0, 1e-8), (-3e12, 0.5), (1e300, 1e-300)])
def test_gaussian_crps_far_tail(constructor: Any, y: float, sd: float) -> None:
    frame = constructor({"y": [y], "mu": [0.0], "sd": [sd]})
    out = to_pandas(cf.evaluate(frame, cf.crps("y", mean="mu", std="sd")))
    # Phi_c(|z|) and phi(z) are 0 in double precision: CRPS = |y - mu| - sd / sqrt(pi)
    assert_close(out["crps"], [abs(y) - sd * _INV_SQRT_PI])
