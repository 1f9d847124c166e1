"""``alternative=`` of the tests (issue 38, item 4): scipy's three readings, checked against scipy.

``spiegelhalter_test`` is two-sided by default (``"greater"`` is the
reference's one-sided test); ``coverage_test`` keeps ``"less"`` (under-coverage)
and gains ``"greater"`` (over-coverage) and ``"two-sided"``; the report flags
over-covered groups beside under-covered ones.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import betabinom, binom, binomtest, norm

import conformal_frames as cf
import oracle
import oracle_calibration as ocal
import oracle_sets as osets
from conformal_frames.metrics.conditional import coverage_pvalues
from helpers import assert_close, group_dict, random_intervals, to_pandas

ALTERNATIVES = ["less", "greater", "two-sided"]


def _lazy_unsupported(constructor):
    return constructor.lazy and constructor.id != "polars[lazy]"


# ---------------------------------------------------------------------------
# coverage_test's p-values
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_binomial_pvalues_equal_scipy_binomtest(alternative):
    rng = np.random.default_rng(0)
    n = rng.integers(1, 300, size=400).astype(float)
    n[:4] = [1, 1, 2, 2]
    k = np.floor(rng.random(400) * (n + 1))
    k[:4] = [0, 1, 0, 2]
    t = rng.choice([0.5, 0.8, 0.9, 0.95, 0.99, 0.37], size=400)
    got = coverage_pvalues(k, n, t, alternative=alternative)
    want = [binomtest(int(a), int(b), c, alternative=alternative).pvalue for a, b, c in zip(k, n, t)]
    assert_close(got, want, rtol=1e-12)


def _betabinom_two_sided(k: int, n: int, a: float, b: float) -> float:
    """The definition: the probability of the counts no more likely than ``k`` (scipy's tolerance)."""
    pmf = betabinom.pmf(np.arange(n + 1), n, a, b)
    return float(min(1.0, pmf[pmf <= pmf[k] * (1 + 1e-7)].sum()))


def test_beta_binomial_pvalues_against_definition():
    rng = np.random.default_rng(1)
    m, t = 40, 0.9
    a, b = np.ceil((m + 1) * t - 1e-9), m + 1 - np.ceil((m + 1) * t - 1e-9)
    n = rng.integers(1, 120, size=60).astype(float)
    k = np.floor(rng.random(60) * (n + 1))
    tt = np.full(60, t)
    assert_close(coverage_pvalues(k, n, tt, m, alternative="greater"), betabinom.sf(k - 1, n, a, b), rtol=1e-12)
    want = [_betabinom_two_sided(int(x), int(y), a, b) for x, y in zip(k, n)]
    assert_close(coverage_pvalues(k, n, tt, m, alternative="two-sided"), want, rtol=1e-9)


def test_weighted_pvalues_at_integer_counts_are_binomial_tails():
    k, n, t = np.array([0.0, 3, 17, 20]), np.array([20.0, 20, 20, 20]), np.full(4, 0.8)
    less = coverage_pvalues(k, n, t, continuous=True, alternative="less")
    greater = coverage_pvalues(k, n, t, continuous=True, alternative="greater")
    assert_close(less, binom.cdf(k, n, t), rtol=1e-12)
    assert_close(greater, binom.sf(k - 1, n, t), rtol=1e-12)
    two = coverage_pvalues(k, n, t, continuous=True, alternative="two-sided")
    assert_close(two, np.minimum(1.0, 2 * np.minimum(less, greater)), rtol=1e-15)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_coverage_test_alternative_on_every_backend(constructor, alternative):
    d = random_intervals(4)
    metric = cf.coverage_test("y", "lo", "hi", confidence_level=0.8, alternative=alternative, significance=0.1)
    frame = constructor(d)
    if _lazy_unsupported(constructor):
        return  # scipy on the aggregated table: polars lazy only (tests/test_conditional.py)
    out = to_pandas(cf.evaluate(frame, metric, by="g")).sort_values("g")
    c = oracle.covered(d["y"], d["lo"], d["hi"])
    groups = dict(sorted(group_dict(d["g"]).items()))
    k = [int(c[i].sum()) for i in groups.values()]
    n = [len(i) for i in groups.values()]
    p = np.array([binomtest(a, b, 0.8, alternative=alternative).pvalue for a, b in zip(k, n)])
    assert_close(out["coverage_test_pvalue"], p, rtol=1e-12)
    assert_close(out["coverage_test_pvalue_holm"], osets.holm(p), rtol=1e-12)
    assert out["coverage_test_flag"].tolist() == (osets.holm(p) < 0.1).tolist()


def test_two_sided_flags_over_and_under_coverage(eager_constructor):
    seg = np.repeat(["low", "ok", "high"], 200)
    covered = np.concatenate([np.arange(200) < 140, np.arange(200) < 160, np.arange(200) < 199])
    data = {"seg": seg, "y": np.zeros(600), "lo": np.where(covered, -1.0, 1.0), "hi": np.full(600, 2.0)}
    frame = eager_constructor(data)
    flags = {}
    for alternative in ALTERNATIVES:
        out = to_pandas(
            cf.conformal(frame).coverage_test("y", "lo", "hi", confidence_level=0.8, alternative=alternative, by="seg")
        )
        flags[alternative] = set(out.loc[out["coverage_test_flag"], "seg"])
    assert flags == {"less": {"low"}, "greater": {"high"}, "two-sided": {"low", "high"}}


def test_coverage_test_default_and_bad_alternative():
    assert cf.coverage_test("y", "lo", "hi", confidence_level=0.9).alternative == "less"
    with pytest.raises(ValueError, match="alternative"):
        cf.coverage_test("y", "lo", "hi", confidence_level=0.9, alternative="two_sided")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Spiegelhalter
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("alternative", [None, *ALTERNATIVES])
def test_spiegelhalter_alternatives_on_every_backend(constructor, alternative):
    rng = np.random.default_rng(7)
    n = 300
    s = np.round(rng.random(n), 3)
    g = np.where(np.arange(n) < 100, "over", np.where(np.arange(n) < 200, "under", "fine"))
    # over-confident scores (labels closer to 1/2 than the scores say): Z > 0;
    # under-confident (labels more extreme): Z < 0
    p_true = np.where(g == "over", 0.5 + (s - 0.5) * 0.3, np.where(g == "under", np.clip(0.5 + (s - 0.5) * 2, 0, 1), s))
    y = (rng.random(n) < p_true).astype(float)
    extra = {} if alternative is None else {"alternative": alternative}
    out = to_pandas(
        cf.evaluate(constructor({"g": g, "y": y, "s": s}), cf.spiegelhalter_test("y", "s", **extra), by="g")
    )
    out = out.set_index("g")
    for key in ("over", "under", "fine"):
        i = g == key
        z, p = ocal.spiegelhalter(y[i], s[i], alternative or "two-sided")
        assert_close([out.loc[key, "spiegelhalter_test"], out.loc[key, "spiegelhalter_test_pvalue"]], [z, p])
    assert out.loc["over", "spiegelhalter_test"] > 2 and out.loc["under", "spiegelhalter_test"] < -2


def test_spiegelhalter_strongly_negative_z_reads_small_by_default(eager_constructor):
    # the trial's case: z = -3.19 read p = 0.999 one-sided; two-sided it is 0.0014
    rng = np.random.default_rng(3)
    s = rng.random(2000)
    y = (rng.random(2000) < np.clip(0.5 + (s - 0.5) * 1.6, 0, 1)).astype(float)
    res = cf.conformal(eager_constructor({"y": y, "s": s})).spiegelhalter_test("y", "s")
    assert res.statistic < -3
    assert res.pvalue == pytest.approx(2 * norm.sf(abs(res.statistic)), rel=1e-12)
    assert res.pvalue < 0.01
    greater = cf.conformal(eager_constructor({"y": y, "s": s})).spiegelhalter_test("y", "s", alternative="greater")
    assert greater.pvalue > 0.99
    assert not hasattr(res, "pvalue_two_sided")


# ---------------------------------------------------------------------------
# the report and the CLI
# ---------------------------------------------------------------------------
def _over_under_frame() -> pd.DataFrame:
    seg = np.repeat(["low", "ok", "high"], 300)
    covered = np.concatenate([np.arange(300) < 230, np.arange(300) < 272, np.arange(300) < 300])
    return pd.DataFrame({"seg": seg, "y": np.zeros(900), "lo": np.where(covered, -1.0, 1.0), "hi": np.full(900, 2.0)})


def test_report_flags_over_covered_groups(constructor):
    frame = constructor({c: v.to_numpy() for c, v in _over_under_frame().items()})
    rep = cf.report(frame, y="y", lo="lo", hi="hi", confidence_level=0.9, by="seg")
    s = rep.summary
    assert [g["group"] for g in s["under_covered"]] == [{"seg": "low"}]
    assert [g["group"] for g in s["over_covered"]] == [{"seg": "high"}]
    t = to_pandas(rep.frame("intervals")).set_index("seg")
    assert t["over_covered"].to_dict() == {"high": True, "low": False, "ok": False}
    p = binom.sf(np.array([229, 271, 299]), 300, 0.9)  # P(K >= k), then Holm over the three groups
    assert_close(t.loc[["low", "ok", "high"], "pvalue_over_adjusted"], osets.holm(p), rtol=1e-12)
    assert to_pandas(rep.over_covered)["seg"].tolist() == ["high"]
    text = str(rep)
    assert "significantly over-covered (intervals too wide): 1 of 3 tested groups" in text
    assert "  - seg=high: coverage 1.0000 > target 0.9" in text
    assert "Significantly over-covered (intervals too wide):" in rep.to_html()


def test_cli_prints_over_covered_groups(tmp_path, capsys):
    from conformal_frames import cli

    path = tmp_path / "d.csv"
    _over_under_frame().to_csv(path, index=False)
    args = ["report", str(path), "--y", "y", "--lo", "lo", "--hi", "hi", "--by", "seg", "--confidence-level", "0.9"]
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    assert "significantly over-covered (intervals too wide): 1 of 3 tested groups" in text
    assert "  - seg=high: coverage 1.0000 > target 0.9" in text


def test_coverage_plot_marks_over_covered_segments():
    pytest.importorskip("matplotlib")
    from conformal_frames import plots

    rep = cf.report(_over_under_frame(), y="y", lo="lo", hi="hi", confidence_level=0.9, by="seg")
    ax = plots.coverage_by_segment(rep.frame("intervals"), by="seg")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "significantly below target" in legend and "significantly above target (too wide)" in legend
