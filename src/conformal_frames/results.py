"""Result objects of statistical tests (scipy.stats conventions).

A direct, eager, ungrouped call of a test (``df.conformal.ks_test("y", "s")``)
returns one frozen result object with named fields; every result unpacks as
``statistic, pvalue = result``, like scipy's.  Grouped, lazy or ``evaluate``
calls return frames whose columns carry the same names: the statistic under
the output name (``ks_test``), the other fields as ``<name>_<field>``
(``ks_test_pvalue``) and the row count as ``n``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ChristoffersenTestResult",
    "CoverageTestResult",
    "DieboldMarianoTestResult",
    "KSTestResult",
    "KuiperTestResult",
    "KupiecTestResult",
    "PITTestResult",
    "SpiegelhalterTestResult",
    "TestResult",
]


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


@dataclass(frozen=True)
class TestResult:
    """Base class of the test results: a statistic and a p-value.

    Attributes
    ----------
    statistic : float
        The test statistic.
    pvalue : float
        The p-value of the test.
    """

    statistic: float
    pvalue: float

    __test__ = False  # not a pytest test class

    def __iter__(self) -> Iterator[float]:
        """``statistic, pvalue = result``, like scipy's results."""
        return iter((self.statistic, self.pvalue))

    @classmethod
    def from_row(cls, row: Mapping[str, Any], name: str) -> TestResult:
        """The result from one output row ``{column: value}`` of the test named ``name``.

        ``statistic`` is the column ``name``, ``n`` the column ``n`` and every
        other field ``f`` the column ``<name>_<f>``; nulls become NaN.
        """
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            column = name if f.name == "statistic" else "n" if f.name == "n" else f"{name}_{f.name}"
            values[f.name] = _convert(f.name, row[column])
        return cls(**values)


def _convert(field: str, value: Any) -> Any:
    if field == "n":
        return 0 if value is None else int(value)
    if field == "flag":
        try:
            return bool(value) if value is not None else False
        except TypeError:  # pandas' NA (no test): not flagged
            return False
    return _float(value)


@dataclass(frozen=True)
class KSTestResult(TestResult):
    """Result of :func:`~conformal_frames.ks_test`.

    Attributes
    ----------
    statistic : float
        ``G = max_k |C_k| / sigma``.
    pvalue : float
        ``P(sup |B| > G)`` for a standard Brownian motion ``B`` (asymptotic).
    n : int
        Number of rows.
    """

    n: int


@dataclass(frozen=True)
class KuiperTestResult(TestResult):
    """Result of :func:`~conformal_frames.kuiper_test`.

    Attributes
    ----------
    statistic : float
        ``H = (max_k C_k - min_k C_k) / sigma``.
    pvalue : float
        ``P(range of B > H)`` for a standard Brownian motion ``B`` (asymptotic).
    n : int
        Number of rows.
    """

    n: int


@dataclass(frozen=True)
class SpiegelhalterTestResult(TestResult):
    """Result of :func:`~conformal_frames.spiegelhalter_test`.

    Attributes
    ----------
    statistic : float
        Spiegelhalter's ``Z``.
    pvalue : float
        The p-value of the test's ``alternative``: two-sided ``2 (1 - Phi(|Z|))``
        by default.
    n : int
        Number of rows.
    """

    n: int


@dataclass(frozen=True)
class CoverageTestResult(TestResult):
    """Result of :func:`~conformal_frames.coverage_test`.

    Attributes
    ----------
    statistic : float
        The empirical coverage ``k / n``.
    pvalue : float
        The p-value of the test's ``alternative``: by default (``"less"``) the
        one-sided p-value of ``H0: coverage >= confidence_level``.
    pvalue_adjusted : float
        The p-value adjusted by ``correction=`` (for one group: ``pvalue``).
    ci_low, ci_high : float
        Binomial confidence interval of the coverage at ``ci_level``.
    flag : bool
        ``pvalue_adjusted < significance`` (False when the p-value is NaN).
    n : int
        Number of rows.
    """

    pvalue_adjusted: float
    ci_low: float
    ci_high: float
    flag: bool
    n: int


@dataclass(frozen=True)
class DieboldMarianoTestResult(TestResult):
    """Result of :func:`~conformal_frames.diebold_mariano_test`.

    Attributes
    ----------
    statistic : float
        ``DM = dbar / sqrt(V / n)`` (times the Harvey-Leybourne-Newbold
        factor with ``small_sample="hln"``); positive when the first
        forecast has the larger mean loss.
    pvalue : float
        Two-sided p-value: Student-t with ``n - 1`` degrees of freedom
        (``small_sample="hln"``), or ``2 (1 - Phi(|DM|))`` (``None``).
    n : int
        Number of rows.
    """

    n: int


@dataclass(frozen=True)
class PITTestResult(TestResult):
    """Result of :func:`~conformal_frames.pit_test`.

    Attributes
    ----------
    statistic : float
        Kolmogorov-Smirnov distance ``D = sup_u |F_n(u) - u|`` of the PIT values.
    pvalue : float
        Asymptotic p-value ``P(K > sqrt(n) D)``, ``K`` Kolmogorov's distribution.
    n : int
        Number of rows.
    """

    n: int


@dataclass(frozen=True)
class KupiecTestResult(TestResult):
    """Result of :func:`~conformal_frames.kupiec_test`.

    Attributes
    ----------
    statistic : float
        Kupiec's likelihood ratio ``LR_uc`` of the miss rate.
    pvalue : float
        ``P(chi2_1 > LR_uc)``.
    n : int
        Number of rows.
    """

    n: int


@dataclass(frozen=True)
class ChristoffersenTestResult(TestResult):
    """Result of :func:`~conformal_frames.christoffersen_test`.

    Attributes
    ----------
    statistic : float
        ``LR_ind``, the likelihood ratio of independent misses.
    pvalue : float
        ``P(chi2_1 > LR_ind)``.
    statistic_cc : float
        ``LR_cc = LR_uc + LR_ind`` (conditional coverage).
    pvalue_cc : float
        ``P(chi2_2 > LR_cc) = exp(-LR_cc / 2)``.
    n : int
        Number of rows.
    pi_01 : float
        ``n_01 / (n_00 + n_01)``: the rate of a miss after a non-miss (NaN without one).
    pi_11 : float
        ``n_11 / (n_10 + n_11)``: the rate of a miss after a miss (NaN without one).
    """

    statistic_cc: float
    pvalue_cc: float
    n: int
    pi_01: float = float("nan")
    pi_11: float = float("nan")
