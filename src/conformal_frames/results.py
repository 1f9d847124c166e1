"""Result objects of statistical tests (scipy.stats conventions)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TestResult:
    """Result of a calibration or coverage test.

    Attributes
    ----------
    statistic : float
        The test statistic.
    pvalue : float
        The p-value of the test.
    extra : dict
        Other outputs of the test (e.g. the two-sided p-value), by column name.
    """

    statistic: float
    pvalue: float
    extra: dict[str, float] = field(default_factory=dict, repr=False)

    __test__ = False  # not a pytest test class

    def __iter__(self):  # allows ``stat, p = result`` like scipy
        return iter((self.statistic, self.pvalue))
