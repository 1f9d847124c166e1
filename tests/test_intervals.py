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


@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", SEEDS)
def test_grouped_metrics_match_oracle(constructor, seed):
    d = random_intervals(seed)
    out = to_pandas(cf.evaluate(constructor(d), *_metrics(), by="g"))
    groups = group_dict(d["g"])
    assert list(out["g"]) == sorted(groups)
    expected = np.array([_expected_row(d, idx) for idx in groups.values()])
    assert_close(out[COLUMNS].to_numpy(), expected, rtol=1e-12, atol=1e-15, what=constructor.id)


@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", SEEDS)
def test_ungrouped_metrics_match_oracle(constructor, seed):
    d = random_intervals(seed)
    out = to_pandas(cf.evaluate(constructor(d), *_metrics()))
    assert len(out) == 1
    expected = np.array([_expected_row(d, np.arange(len(d["y"])))])
    assert_close(out[COLUMNS].to_numpy(), expected, rtol=1e-12, atol=1e-15)


@pytest.mark.spark_cases(seed=0)  # every num_bins
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


def _chained_ties(seed: int) -> dict[str, np.ndarray]:
    """Few distinct widths, some only 1e-12 apart (chains of near ties across
    the bin cuts), an all-tied group and groups of 1 and 2 rows."""
    rng = np.random.default_rng(seed)
    n = 120
    base = rng.integers(0, 5, n) * 0.5 + 1.0
    w = base + rng.integers(0, 3, n) * 1e-12  # near ties chain within a width
    lo = rng.normal(size=n)
    y = lo + rng.uniform(-0.5, 3.0, n)
    g = rng.choice(np.array(["a", "b"]), size=n)
    g[:20], w[:20] = "tied", 2.0
    g[20], g[21:23] = "one", "two"
    return {"y": y, "lo": lo, "hi": lo + w, "g": g}


@pytest.mark.parametrize("num_bins", [1, 2, 3, 5])
def test_ssc_chained_ties_match_oracle_in_any_row_order(constructor, num_bins):
    d = _chained_ties(num_bins)
    perm = np.random.default_rng(num_bins).permutation(len(d["y"]))
    for data in (d, {k: v[perm] for k, v in d.items()}):
        out = to_pandas(cf.conformal(constructor(data)).ssc("y", "lo", "hi", n_bins=num_bins, by="g"))
        expected = [
            (key, b, cov, n)
            for key, idx in group_dict(data["g"]).items()
            for b, cov, n in oracle.ssc(data["y"][idx], data["lo"][idx], data["hi"][idx], num_bins)
        ]
        assert [(k, int(b)) for k, b in zip(out["g"], out["bin"])] == [(k, b) for k, b, _, _ in expected]
        assert_close(out["ssc"], [e[2] for e in expected], rtol=1e-12, atol=1e-15)
        assert_close(out["n"], [e[3] for e in expected])


def test_ssc_is_independent_of_row_order(constructor):
    d = random_intervals(5)
    perm = np.random.default_rng(9).permutation(len(d["y"]))
    shuffled = {k: v[perm] for k, v in d.items()}
    a = to_pandas(cf.conformal(constructor(d)).ssc("y", "lo", "hi", n_bins=4, by="g"))
    b = to_pandas(cf.conformal(constructor(shuffled)).ssc("y", "lo", "hi", n_bins=4, by="g"))
    assert_close(a["ssc"], b["ssc"])


def test_ssc_constant_widths_give_one_stratum(constructor):
    # issue 15 finding 1: tied widths are never split by the coverage
    # indicator; constant widths give one stratum with the marginal coverage
    d = {"y": np.array([0.0, 5.0, 0.0, 5.0, 0.0, 0.0]), "lo": np.full(6, -1.0), "hi": np.full(6, 1.0)}
    out = to_pandas(cf.conformal(constructor(d)).ssc("y", "lo", "hi", n_bins=3))
    assert list(out["bin"]) == [0]
    assert_close(out["ssc"], [4 / 6])
    assert_close(out["n"], [6])


def test_ssc_issue_snippet_is_the_marginal_coverage(constructor):
    y = np.random.default_rng(0).normal(size=3000)
    d = {"y": y, "lo": np.full(3000, -1.645), "hi": np.full(3000, 1.645)}
    marginal = float(np.mean(np.abs(y) <= 1.645))
    frame = constructor(d)
    out = to_pandas(cf.conformal(frame).ssc("y", "lo", "hi"))
    assert list(out["bin"]) == [0]
    assert list(out["n"]) == [3000]
    assert_close(out["ssc"], [marginal])
    score = to_pandas(cf.evaluate(constructor(d), cf.ssc_score("y", "lo", "hi"), cf.coverage("y", "lo", "hi")))
    assert_close(score["ssc_score"], [marginal])
    assert_close(score["coverage"], [marginal])


def _noisy_split_conformal(seed: int, n: int = 600) -> dict[str, np.ndarray]:
    """Split-conformal intervals ``pred -/+ q``: widths equal up to rounding noise."""
    rng = np.random.default_rng(seed)
    pred = rng.normal(size=n) * 150.0
    q = 1.6449
    g = rng.choice(np.array(["a", "b", "c"]), size=n)
    return {"y": pred + rng.normal(size=n), "lo": pred - q, "hi": pred + q, "g": g}


def test_ssc_noisy_constant_widths_are_tied(constructor):
    d = _noisy_split_conformal(4)
    widths = d["hi"] - d["lo"]
    assert len(np.unique(widths)) > 3  # the noise is real: several distinct doubles
    out = to_pandas(cf.conformal(constructor(d)).ssc("y", "lo", "hi", n_bins=3, by="g"))
    groups = group_dict(d["g"])
    assert list(out["g"]) == sorted(groups)
    assert list(out["bin"]) == [0, 0, 0]
    assert list(out["n"]) == [len(i) for i in groups.values()]
    marginal = [float(np.mean(np.abs(d["y"][i] - (d["lo"][i] + d["hi"][i]) / 2) <= 1.6449)) for i in groups.values()]
    assert_close(out["ssc"], marginal)


def test_ssc_tie_group_goes_to_the_bin_of_its_first_position(constructor):
    # n = 9, 3 bins: runs [0, 3), [3, 6), [6, 9).  Widths 1 (one row), 2
    # (seven rows, positions 1..7: starts in run 0) and 3 (position 8: run 2)
    w = np.array([2.0, 1.0, 2.0, 2.0, 3.0, 2.0, 2.0, 2.0, 2.0])
    y = np.array([0.0, 0.0, 9.0, 0.0, 0.0, 9.0, 0.0, 0.0, 9.0])  # misses among the tied rows
    d = {"y": y, "lo": -w / 2, "hi": w / 2}
    out = to_pandas(cf.conformal(constructor(d)).ssc("y", "lo", "hi", n_bins=3))
    assert list(out["bin"]) == [0, 2]
    assert list(out["n"]) == [8, 1]
    assert_close(out["ssc"], [5 / 8, 1.0])
    wide = to_pandas(cf.evaluate(constructor(d), cf.ssc("y", "lo", "hi", n_bins=3)))
    assert wide["ssc_bin1"].isna().all() and list(wide["ssc_bin1_n"]) == [0]


def test_ssc_fewer_distinct_widths_than_bins(constructor):
    w = np.repeat([1.0, 4.0], [5, 7])
    y = np.where(np.arange(12) % 3 == 0, 5.0, 0.0)
    d = {"y": y, "lo": -w / 2, "hi": w / 2}
    out = to_pandas(cf.conformal(constructor(d)).ssc("y", "lo", "hi", n_bins=4))
    # runs of 3: widths 1.0 start at position 0 (bin 0), widths 4.0 at position 5 (bin 1)
    assert list(out["bin"]) == [0, 1]
    assert list(out["n"]) == [5, 7]
    assert_close(out["ssc"], [3 / 5, 5 / 7])  # misses: rows 0, 3 (width 1) and 6, 9 (width 4)


def test_ssc_strata_do_not_depend_on_the_outcome(constructor):
    # flipping which tied rows are covered changes coverages, never the strata
    d = random_intervals(3)
    flipped = dict(d)
    flipped["y"] = np.where(np.arange(len(d["y"])) % 2 == 0, d["lo"] - 100.0, d["y"])
    a = to_pandas(cf.conformal(constructor(d)).ssc("y", "lo", "hi", n_bins=4, by="g"))
    b = to_pandas(cf.conformal(constructor(flipped)).ssc("y", "lo", "hi", n_bins=4, by="g"))
    assert list(zip(a["g"], a["bin"], a["n"])) == list(zip(b["g"], b["bin"], b["n"]))


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


@pytest.mark.spark_cases(seed=0)
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


# ---------------------------------------------------------------------------
# issue 15 finding 3: every confidence interval contains its estimate
# ---------------------------------------------------------------------------
def _all_proportions(max_n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    n = np.concatenate([np.full(m + 1, m) for m in range(1, max_n + 1)]).astype(float)
    k = np.concatenate([np.arange(m + 1) for m in range(1, max_n + 1)]).astype(float)
    return k, n


_SCIPY_WILSON: dict[float, tuple[np.ndarray, np.ndarray]] = {}


def _scipy_wilson(level: float) -> tuple[np.ndarray, np.ndarray]:
    if level not in _SCIPY_WILSON:
        k, n = _all_proportions()
        try:  # the function binomtest(k, n).proportion_ci(method="wilson") calls, without the p-value binomtest computes first (~60x faster)
            from scipy.stats._binomtest import _binom_wilson_conf_int

            cis = [_binom_wilson_conf_int(int(a), int(b), level, "two-sided", False) for a, b in zip(k, n)]
        except (ImportError, TypeError):  # a scipy that moved it: the public route
            from scipy.stats import binomtest

            public = [
                binomtest(int(a), int(b)).proportion_ci(confidence_level=level, method="wilson") for a, b in zip(k, n)
            ]
            cis = [(c.low, c.high) for c in public]
        _SCIPY_WILSON[level] = (np.array([c[0] for c in cis]), np.array([c[1] for c in cis]))
    return _SCIPY_WILSON[level]


@pytest.mark.spark_cases(level=0.9)
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_wilson_interval_contains_its_estimate(constructor, level):
    # every n <= 200 and every k in 0..n, evaluated by each backend's engine
    import narwhals.stable.v2 as nw

    from conformal_frames.engine import Query
    from conformal_frames.numerics.stats import wilson_interval

    k, n = _all_proportions()
    frame = nw.from_native(constructor({"k": k, "n": n}))
    q = Query(schema=frame.collect_schema(), keys=[])
    low, high = wilson_interval(q, "k", "n", level)
    out = q.with_values(frame).select("k", "n", low.alias("low"), high.alias("high"))
    got = to_pandas(out.to_native()).sort_values(["n", "k"]).reset_index(drop=True)
    est = got["k"].to_numpy() / got["n"].to_numpy()
    assert (got["low"].to_numpy() <= est).all() and (est <= got["high"].to_numpy()).all()
    assert ((got["low"] >= 0.0) & (got["high"] <= 1.0)).all()
    ref_low, ref_high = _scipy_wilson(level)
    assert_close(got["low"], ref_low, rtol=0.0, atol=1e-12)
    assert_close(got["high"], ref_high, rtol=0.0, atol=1e-12)


def test_issue_wilson_snippet_n65_coverage_one(constructor):
    d = {"y": np.zeros(65), "lo": np.full(65, -1.0), "hi": np.ones(65)}
    out = to_pandas(cf.evaluate(constructor(d), cf.coverage("y", "lo", "hi")))
    assert out["coverage"][0] == 1.0
    assert out["coverage_ci_high"][0] == 1.0
    assert out["coverage_ci_low"][0] <= 1.0


def test_coverage_and_test_intervals_contain_the_estimate_at_0_and_1(constructor):
    # coverage 0 and 1 in groups of every size 1..200 (the issue's 400 cases)
    sizes = np.arange(1, 201)
    g = np.concatenate([np.full(2 * m, m) for m in sizes])
    miss = np.concatenate([np.r_[np.zeros(m), np.ones(m)] for m in sizes])  # two halves per size
    key = np.char.add(g.astype(str), np.where(miss == 1, "-miss", "-hit"))
    d = {"g": key, "y": miss * 5.0, "lo": np.full(len(g), -1.0), "hi": np.ones(len(g))}
    metrics = [cf.coverage("y", "lo", "hi")]
    if not constructor.lazy or constructor.id == "polars[lazy]":  # p-values: a numpy step
        metrics += [
            cf.coverage_test("y", "lo", "hi", confidence_level=0.9).alias("wilson"),
            cf.coverage_test("y", "lo", "hi", confidence_level=0.9, method="clopper-pearson").alias("exact"),
        ]
    out = to_pandas(cf.evaluate(constructor(d), *metrics, by="g"))
    assert len(out) == 400
    for name in [m.output_name for m in metrics]:
        est, low, high = out[name], out[f"{name}_ci_low"], out[f"{name}_ci_high"]
        assert ((low <= est) & (est <= high)).all(), name
        assert set(est) == {0.0, 1.0}
