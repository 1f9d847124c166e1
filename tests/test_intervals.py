"""Interval metrics against the numpy oracle, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import conformal_frames as cf
import oracle
from helpers import assert_close, group_dict, random_intervals, to_pandas

SEEDS = [0, 1, 2]


def _metrics():
    return [
        cf.coverage("y", "lo", "hi", ci_level=0.9),
        cf.width("lo", "hi"),
        cf.ssc_score("y", "lo", "hi", n_bins=3),
        cf.winkler("y", "lo", "hi", confidence_level=0.9),
        cf.cwc("y", "lo", "hi", eta=0.5, confidence_level=0.9),
    ]


def _expected_row(d, idx):
    y, lo, hi = d["y"][idx], d["lo"][idx], d["hi"][idx]
    k = oracle.covered(y, lo, hi).sum()
    ci = oracle.wilson(k, len(idx), 0.9)
    return [
        oracle.coverage(y, lo, hi),
        ci[0],
        ci[1],
        oracle.width(lo, hi),
        oracle.ssc_score(y, lo, hi, 3),
        oracle.winkler(y, lo, hi, 0.9),
        oracle.cwc(y, lo, hi, 0.5, 0.9),
        len(idx),
    ]


COLUMNS = ["coverage", "coverage_ci_low", "coverage_ci_high", "width", "ssc_score", "winkler", "cwc", "n"]


@pytest.mark.parametrize("seed", SEEDS)
def test_grouped_metrics_match_oracle(constructor, seed):
    d = random_intervals(seed)
    out = to_pandas(cf.evaluate(constructor(d), *_metrics(), by="g"))
    groups = group_dict(d["g"])
    assert list(out["g"]) == sorted(groups)
    expected = np.array([_expected_row(d, idx) for idx in groups.values()])
    assert_close(out[COLUMNS].to_numpy(), expected, rtol=1e-12, atol=1e-15, what=constructor.id)


@pytest.mark.parametrize("seed", SEEDS)
def test_ungrouped_metrics_match_oracle(constructor, seed):
    d = random_intervals(seed)
    out = to_pandas(cf.evaluate(constructor(d), *_metrics()))
    assert len(out) == 1
    expected = np.array([_expected_row(d, np.arange(len(d["y"])))])
    assert_close(out[COLUMNS].to_numpy(), expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("num_bins", [1, 2, 3, 4])
def test_ssc_long_matches_oracle(constructor, seed, num_bins):
    d = random_intervals(seed)
    out = to_pandas(cf.conformal(constructor(d)).ssc("y", "lo", "hi", n_bins=num_bins, by="g"))
    expected = []
    for key, idx in group_dict(d["g"]).items():
        for b, cov, n in oracle.ssc(d["y"][idx], d["lo"][idx], d["hi"][idx], num_bins):
            expected.append((key, b, cov, n))
    assert list(out.columns) == ["g", "bin", "ssc", "n"]
    assert [(k, int(b)) for k, b in zip(out["g"], out["bin"])] == [(k, b) for k, b, _, _ in expected]
    assert_close(out["ssc"], [e[2] for e in expected])
    assert_close(out["n"], [e[3] for e in expected])


def test_ssc_is_independent_of_row_order(constructor):
    d = random_intervals(5)
    perm = np.random.default_rng(9).permutation(len(d["y"]))
    shuffled = {k: v[perm] for k, v in d.items()}
    a = to_pandas(cf.conformal(constructor(d)).ssc("y", "lo", "hi", n_bins=4, by="g"))
    b = to_pandas(cf.conformal(constructor(shuffled)).ssc("y", "lo", "hi", n_bins=4, by="g"))
    assert_close(a["ssc"], b["ssc"])


def test_ssc_constant_widths_ties_broken_by_coverage(constructor):
    # all widths equal: bins follow the (width, covered) order, so the
    # uncovered rows fill the first bin whatever the row order
    d = {"y": np.array([0.0, 5.0, 0.0, 5.0, 0.0, 0.0]), "lo": np.full(6, -1.0), "hi": np.full(6, 1.0)}
    out = to_pandas(cf.conformal(constructor(d)).ssc("y", "lo", "hi", n_bins=3))
    assert_close(out["ssc"], [0.0, 1.0, 1.0])
    assert_close(out["n"], [2, 2, 2])


@pytest.mark.parametrize("seed", SEEDS)
def test_hsic_matches_definition(constructor, seed):
    d = random_intervals(seed, n=150)
    frame = constructor(d)
    if constructor.lazy and constructor.id != "polars[lazy]":
        with pytest.raises(NotImplementedError, match="collect"):
            cf.evaluate(frame, cf.hsic("y", "lo", "hi", kernel_sizes=(2.0, 0.5)), by="g")
        return
    out = to_pandas(cf.evaluate(frame, cf.hsic("y", "lo", "hi", kernel_sizes=(2.0, 0.5)), by="g"))
    expected = [oracle.hsic(d["y"][i], d["lo"][i], d["hi"][i], (2.0, 0.5)) for i in group_dict(d["g"]).values()]
    assert_close(out["hsic"], expected, rtol=1e-9, atol=1e-15)


def test_hsic_5000_rows_against_direct_definition():
    import polars as pl

    rng = np.random.default_rng(11)
    n = 5000
    lo = rng.normal(size=n)
    hi = lo + rng.gamma(1.5, 1.0, size=n)
    y = rng.normal(size=n) * 1.2
    expected = oracle.hsic(y, lo, hi)
    got = pl.DataFrame({"y": y, "lo": lo, "hi": hi}).conformal.hsic("y", "lo", "hi")
    assert got == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_backends_agree(constructor, seed):
    """Every backend gives the polars-eager numbers to 1e-12 relative."""
    import polars as pl

    d = random_intervals(seed)
    metrics = [*_metrics(), cf.ssc("y", "lo", "hi", n_bins=2)]
    reference = to_pandas(cf.evaluate(pl.DataFrame(d), *metrics, by="g"))
    out = to_pandas(cf.evaluate(constructor(d), *metrics, by="g"))
    cols = [c for c in reference.columns if c != "g"]
    assert list(out["g"]) == list(reference["g"])
    assert_close(out[cols].to_numpy(), reference[cols].to_numpy(), rtol=1e-12)
