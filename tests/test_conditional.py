"""Conditional coverage (gap, grouped inference, worst slab) against numpy oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom, binomtest

import conformal_frames as cf
import oracle
import oracle_sets as osets
from conformal_frames.metrics.conditional import benjamini_hochberg, holm, min_slab_mean
from helpers import assert_close, group_dict, random_intervals, to_pandas

SEEDS = [0, 1, 2]


def _interval_data(seed):
    d = random_intervals(seed)
    rng = np.random.default_rng(100 + seed)
    d["outer"] = rng.choice(["u", "v"], size=len(d["y"]))
    return d


def _gap_oracle(covered, groups, target):
    covs, sizes, labels = [], [], []
    for label, idx in group_dict(groups).items():
        covs.append(covered[idx].mean())
        sizes.append(len(idx))
        labels.append(label)
    covs, sizes = np.array(covs), np.array(sizes)
    gaps = np.abs(covs - target)
    worst = int(np.argmin(covs))  # first = smallest label among ties
    return {
        "gap": gaps.mean(),
        "weighted": (gaps * sizes).sum() / sizes.sum(),
        "worst_coverage": covs[worst],
        "worst_label": labels[worst],
        "worst_n": sizes[worst],
        "groups": len(covs),
    }


@pytest.mark.parametrize("seed", SEEDS)
def test_coverage_gap_intervals_match_oracle(constructor, seed):
    d = _interval_data(seed)
    metrics = [
        cf.coverage_gap("y", "lo", "hi", groups="g", confidence_level=0.8),
        cf.coverage_gap("y", "lo", "hi", groups="g", confidence_level=0.8, weighted=True).alias("wgap"),
    ]
    out = to_pandas(cf.evaluate(constructor(d), *metrics, by="outer"))
    c = oracle.covered(d["y"], d["lo"], d["hi"])
    assert list(out["outer"]) == ["u", "v"]
    for row, (key, idx) in zip(out.itertuples(index=False), group_dict(d["outer"]).items()):
        e = _gap_oracle(c[idx], d["g"][idx], 0.8)
        assert_close(
            [
                row.coverage_gap,
                row.wgap,
                row.coverage_gap_worst_coverage,
                row.coverage_gap_worst_n,
                row.coverage_gap_groups,
            ],
            [e["gap"], e["weighted"], e["worst_coverage"], e["worst_n"], e["groups"]],
            what=f"{constructor.id} {key}",
        )
        assert row.coverage_gap_worst_g == e["worst_label"]
        assert row.wgap_worst_g == e["worst_label"]


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_coverage_gap_sets_two_group_columns(constructor, seed):
    d = osets.random_sets(seed, strings=True)
    data = osets.frame_dict(d, list_column=False)
    rng = np.random.default_rng(seed)
    data["h"] = rng.choice(["p", "q"], size=len(d["g"]))
    sets = [f"m{j}" for j in range(4)]
    out = to_pandas(
        cf.evaluate(
            constructor(data),
            cf.coverage_gap("y", sets=sets, classes=d["classes"], groups=["g", "h"], confidence_level=0.7),
        )
    )
    c = osets.set_covered(d["yi"], d["m"])
    combo = np.array([f"{a}|{b}" for a, b in zip(d["g"], data["h"])])
    e = _gap_oracle(c, combo, 0.7)
    assert_close(
        out[["coverage_gap", "coverage_gap_worst_coverage", "coverage_gap_worst_n", "coverage_gap_groups"]].to_numpy(),
        [[e["gap"], e["worst_coverage"], e["worst_n"], e["groups"]]],
    )
    assert f"{out['coverage_gap_worst_g'][0]}|{out['coverage_gap_worst_h'][0]}" == e["worst_label"]


def test_coverage_gap_ties_pick_smallest_label(constructor):
    data = {
        "y": [0.0] * 6,
        "lo": [-1.0, 1.0, -1.0, 1.0, -1.0, -1.0],
        "hi": [1.0] * 6,
        "g": ["c", "c", "a", "a", "b", "b"],
    }
    out = to_pandas(cf.evaluate(constructor(data), cf.coverage_gap("y", "lo", "hi", groups="g", confidence_level=0.9)))
    assert out["coverage_gap_worst_g"][0] == "a"
    assert_close(out["coverage_gap"], [(0.4 + 0.4 + 0.1) / 3])


# ---------------------------------------------------------------------------
# grouped inference
# ---------------------------------------------------------------------------
def _lazy_unsupported(constructor):
    return constructor.lazy and constructor.id != "polars[lazy]"


def _test_oracle(k, n, target, ci, method, n_calibration=None):
    if n_calibration is None:
        p = binom.cdf(k, n, target)
    else:
        from scipy.special import betaln, comb

        a = math.ceil((n_calibration + 1) * target)
        b = n_calibration + 1 - a
        p = np.array(
            [
                sum(comb(nn, j) * np.exp(betaln(j + a, nn - j + b) - betaln(a, b)) for j in range(int(kk) + 1))
                for kk, nn in zip(k, n)
            ]
        )
    m = "wilson" if method == "wilson" else "exact"
    bounds = np.array(
        [binomtest(int(kk), int(nn)).proportion_ci(confidence_level=ci, method=m) for kk, nn in zip(k, n)]
    )
    return p, bounds[:, 0], bounds[:, 1]


@pytest.mark.parametrize(
    ("seed", "method", "n_calibration"),
    [(0, "wilson", None), (1, "clopper-pearson", None), (2, "wilson", 30), (0, "clopper-pearson", 30)],
)
def test_coverage_test_matches_oracle(constructor, seed, method, n_calibration):
    d = random_intervals(seed)
    metric = cf.coverage_test(
        "y",
        "lo",
        "hi",
        confidence_level=0.8,
        ci_level=0.9,
        method=method,
        n_calibration=n_calibration,
        correction="bh",
        significance=0.1,
    )
    frame = constructor(d)
    if _lazy_unsupported(constructor):
        with pytest.raises(
            NotImplementedError, match=f"coverage_test.*cannot stay lazy on the {constructor.id} backend"
        ):
            cf.evaluate(frame, metric, by="g")
        return
    out = to_pandas(cf.evaluate(frame, metric, by="g"))
    c = oracle.covered(d["y"], d["lo"], d["hi"])
    groups = group_dict(d["g"])
    k = np.array([c[i].sum() for i in groups.values()])
    n = np.array([len(i) for i in groups.values()], dtype=float)
    p, low, high = _test_oracle(k, n, 0.8, 0.9, method, n_calibration)
    rtol = 1e-12 if n_calibration is None else 1e-9  # the oracle sums Beta-function terms
    assert_close(out["coverage_test"], k / n)
    assert_close(out["coverage_test_pvalue"], p, rtol=rtol)
    assert_close(out["coverage_test_ci_low"], low, rtol=1e-10, atol=1e-14)
    assert_close(out["coverage_test_ci_high"], high, rtol=1e-10, atol=1e-14)
    assert_close(out["coverage_test_pvalue_holm"], osets.holm(p), rtol=rtol)
    assert_close(out["coverage_test_pvalue_bh"], osets.bh(p), rtol=rtol)
    assert out["coverage_test_flag"].dtype in (bool, "boolean")
    assert out["coverage_test_flag"].tolist() == (osets.bh(p) < 0.1).tolist()


def test_coverage_test_sets_and_scalar(eager_constructor):
    d = osets.random_sets(3)
    data = osets.frame_dict(d, list_column=False)
    res = cf.conformal(eager_constructor(data)).coverage_test(
        "y", sets=[f"m{j}" for j in range(4)], classes=d["classes"], confidence_level=0.9
    )
    c = osets.set_covered(d["yi"], d["m"])
    assert res.statistic == pytest.approx(c.mean(), rel=1e-12)
    assert res.pvalue == pytest.approx(binom.cdf(c.sum(), len(c), 0.9), rel=1e-12)


def test_holm_and_bh_against_loops():
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.random(rng.integers(1, 12)) ** 2
        p[rng.random(len(p)) < 0.2] = p[0]  # ties
        assert_close(holm(p), osets.holm(p))
        assert_close(benjamini_hochberg(p), osets.bh(p))
    assert_close(holm([0.01, np.nan, 0.04]), [0.02, np.nan, 0.04])


def test_under_covered_segment_is_flagged_and_only_it(constructor):
    from conformal_frames.demo import UNDER_COVERED, demo_data

    d = demo_data(n=4000, seed=0)
    keep = d["level"] == 0.9
    data = {k: v[keep] for k, v in d.items()}
    frame = constructor(data)
    metric = cf.coverage_test("y", "lo", "hi", confidence_level=0.9)
    if _lazy_unsupported(constructor):
        return
    out = to_pandas(cf.evaluate(frame, metric, by="segment"))
    assert out["coverage_test_flag"].dtype in (bool, "boolean")
    flagged = list(out.loc[out["coverage_test_flag"], "segment"])
    assert flagged == [UNDER_COVERED]


def test_n_calibration_too_small():
    with pytest.raises(ValueError, match="n_calibration=5 is too small"):
        cf.coverage_test("y", "lo", "hi", confidence_level=0.9, n_calibration=5)


# ---------------------------------------------------------------------------
# worst slab
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_min_slab_mean_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 35))
    x = np.round(rng.normal(size=(n, 2)), 1)  # ties
    x[: n // 4, 0] = 0.0
    c = (rng.random(n) < 0.7).astype(float)
    delta = float(rng.choice([0.05, 0.1, 0.3, 0.5, 1.0]))
    from conformal_frames.metrics.conditional import slab_directions

    v = slab_directions(4, 2, seed)
    need = max(1, math.ceil(delta * n - 1e-9))
    got = min_slab_mean((x @ v.T).T, c, need).min()
    assert got == osets.worst_slab(x, c, delta, 4, seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_worst_slab_grouped_matches_oracle(constructor, seed):
    rng = np.random.default_rng(seed)
    n = 60
    data = {
        "x1": np.round(rng.normal(size=n), 1),
        "x2": rng.normal(size=n),
        "y": rng.normal(size=n),
        "g": np.array(["a"] * 40 + ["b"] * 17 + ["one"] + ["two"] * 2),
    }
    data["lo"], data["hi"] = -np.abs(rng.normal(size=n)) * 1.5, np.abs(rng.normal(size=n)) * 1.5
    metric = cf.worst_slab_coverage("y", "lo", "hi", features=["x1", "x2"], delta=0.2, n_directions=7, seed=seed)
    frame = constructor(data)
    if _lazy_unsupported(constructor):
        with pytest.raises(NotImplementedError, match="worst_slab_coverage"):
            cf.evaluate(frame, metric, by="g")
        return
    out = to_pandas(cf.evaluate(frame, metric, by="g"))
    x = np.column_stack([data["x1"], data["x2"]])
    c = oracle.covered(data["y"], data["lo"], data["hi"])
    expected = [osets.worst_slab(x[i], c[i], 0.2, 7, seed) for i in group_dict(data["g"]).values()]
    assert_close(out["worst_slab_coverage"], expected, rtol=0, atol=0)


def _slab_per_direction(x, c, v, need, chunk_cells=2_000_000):
    """The straightforward minimum: min_slab_mean of every direction, on the blocks worst_slab projects."""
    step = max(1, chunk_cells // (len(c) + 1))
    return min(float(min_slab_mean((x @ v[s : s + step].T).T, c, need).min()) for s in range(0, len(v), step))


def _slab_case(rng, n, d, kind):
    x = rng.normal(size=(n, d))
    if kind == "ties":
        x = np.round(x * 3)
    elif kind == "heavy":
        x = rng.standard_cauchy((n, d))
    elif kind == "huge":
        x = x * 1e300
    c = (rng.random(n) < 0.9).astype(float)
    w = x @ rng.normal(size=d)
    hard = w > np.quantile(w, 0.8)
    c[hard] *= rng.random(int(hard.sum())) < 0.7
    return x, c


@pytest.mark.parametrize("kind", ["plain", "ties", "heavy", "huge"])
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("n", [40, 3000])
def test_worst_slab_search_equals_every_direction(n, d, kind):
    from conformal_frames.numerics.slabs import bucket_lower_bounds, slab_directions, worst_slab

    rng = np.random.default_rng(n + 10 * d + len(kind))
    x, c = _slab_case(rng, n, d, kind)
    v = slab_directions(60, d, n)
    for delta in (0.05, 0.3):
        need = math.ceil(delta * n - 1e-9)
        for cells in (2_000_000, 20 * (n + 1)):  # one block, blocks of 20 directions
            expected = _slab_per_direction(x, c, v, need, cells)
            assert worst_slab(x, c, v, need, chunk_cells=cells) == expected
            assert worst_slab(x, c, v, need, chunk_cells=cells, search_rows=0) == expected  # bounds at any n
        if n >= 16:  # the bounds are below every direction's minimum
            bounds = bucket_lower_bounds(x @ v.T, c, need, n // 8)
            assert (bounds <= min_slab_mean((x @ v.T).T, c, need)).all()


@pytest.mark.parametrize("seed", range(4))
def test_worst_slab_one_feature_directions_solved_once(seed):
    """One feature: positive and negative multiples, ties, products that tie distinct values."""
    from conformal_frames.numerics.slabs import slab_directions, worst_slab

    rng = np.random.default_rng(seed)
    n = 2000
    x = np.round(rng.normal(size=(n, 1)), 2)
    x[:50, 0] = rng.uniform(1e-320, 1e-318, 50)  # subnormal: tiny directions tie them at 0
    c = (rng.random(n) < 0.85).astype(float)
    c[x[:, 0] > 1.2] = 0.0
    v = slab_directions(300, 1, seed)
    v[::5] *= -3.0
    v[1::7] = 1e-12 * np.sign(v[1::7])
    if seed % 2:
        v[0] = 1e-12  # the first direction ties the subnormal values: another stands for x
    for delta in (0.01, 0.1, 0.5):
        need = math.ceil(delta * n - 1e-9)
        for cells in (2_000_000, 50 * (n + 1)):
            assert worst_slab(x, c, v, need, chunk_cells=cells) == _slab_per_direction(x, c, v, need, cells)


def test_worst_slab_non_finite_rows_fall_back():
    from conformal_frames.numerics.slabs import slab_directions, worst_slab

    rng = np.random.default_rng(0)
    x, c = rng.normal(size=(500, 2)), (rng.random(500) < 0.9).astype(float)
    x[3, 0] = np.nan
    v = slab_directions(20, 2, 0)
    assert worst_slab(x, c, v, 50) == _slab_per_direction(x, c, v, 50)


def test_worst_slab_finds_planted_region():
    import polars as pl

    rng = np.random.default_rng(3)
    n = 3000
    x = rng.uniform(size=(n, 3))
    covered = ~((x[:, 0] > 0.85) & (rng.random(n) < 0.8))
    df = pl.DataFrame(
        {
            "x0": x[:, 0],
            "x1": x[:, 1],
            "x2": x[:, 2],
            "y": np.zeros(n),
            "lo": np.where(covered, -1.0, 1.0),
            "hi": np.ones(n),
        }
    )
    value = df.conformal.worst_slab_coverage("y", "lo", "hi", features=["x0", "x1", "x2"], delta=0.1, n_directions=200)
    assert value < 0.5 < (covered.mean())


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"groups": []}, ValueError, r"groups must be a list of distinct column names \(at least 1\), got \[\]"),
        ({"groups": ["g", "g"]}, ValueError, r"groups must be a list of distinct column names \('g' repeated\)"),
        ({"groups": "g", "confidence_level": 1.0}, ValueError, "confidence_level must be"),
        ({"groups": "g", "sets": ["a"], "classes": [0]}, ValueError, "not both"),
    ],
)
def test_gap_bad_parameters(kwargs, error, match):
    kwargs = {"confidence_level": 0.9, **kwargs}
    with pytest.raises(error, match=match):
        cf.coverage_gap("y", "lo", "hi", **kwargs)


def test_bad_parameters_misc():
    with pytest.raises(ValueError, match="pass lo= and hi="):
        cf.coverage_test("y", confidence_level=0.9)
    with pytest.raises(ValueError, match="method must be"):
        cf.coverage_test("y", "lo", "hi", confidence_level=0.9, method="exact")
    with pytest.raises(ValueError, match="delta must be"):
        cf.worst_slab_coverage("y", "lo", "hi", features=["x"], delta=0.0)
    with pytest.raises(ValueError, match="features must be"):
        cf.worst_slab_coverage("y", "lo", "hi", features=[])


def test_groups_column_checks(constructor):
    data = {"y": [0.0, 1.0], "lo": [0.0, 0.0], "hi": [1.0, 1.0], "g": ["a", "b"]}
    with pytest.raises(ValueError, match="column 'nope' not found"):
        cf.evaluate(constructor(data), cf.coverage_gap("y", "lo", "hi", groups="nope", confidence_level=0.9))
    with pytest.raises(ValueError, match="both a group key"):
        cf.evaluate(constructor(data), cf.coverage_gap("y", "lo", "hi", groups="g", confidence_level=0.9), by="g")


def test_empty_frame_gives_null():
    import polars as pl

    frame = pl.DataFrame(
        {"y": [], "lo": [], "hi": [], "g": []},
        schema={"y": pl.Float64, "lo": pl.Float64, "hi": pl.Float64, "g": pl.String},
    )
    out = to_pandas(
        cf.evaluate(
            frame,
            cf.coverage_gap("y", "lo", "hi", groups="g", confidence_level=0.9),
            cf.coverage_test("y", "lo", "hi", confidence_level=0.9),
        )
    )
    assert np.isnan(out["coverage_gap"][0]) and np.isnan(out["coverage_test_pvalue"][0]) and int(out["n"][0]) == 0


# ---------------------------------------------------------------------------
# target level from a by= column (levels stacked in long format)
# ---------------------------------------------------------------------------
def _stacked(n=900, seed=0):
    from conformal_frames.demo import demo_data

    d = demo_data(n=n, seed=seed)
    return d


def test_level_column_target_matches_per_level_calls(constructor):
    d = _stacked()
    frame = constructor(d)
    if _lazy_unsupported(constructor):
        return
    metrics = [
        cf.coverage_test("y", "lo", "hi", confidence_level="level", correction="none"),
        cf.coverage_gap("y", "lo", "hi", groups="segment", confidence_level="level", weighted=True),
    ]
    out = to_pandas(cf.evaluate(frame, *metrics, by="level"))
    c = oracle.covered(d["y"], d["lo"], d["hi"])
    for row, (lvl, idx) in zip(out.itertuples(index=False), group_dict(d["level"]).items()):
        assert row.level == lvl
        assert row.coverage_test_pvalue == pytest.approx(binom.cdf(c[idx].sum(), len(idx), lvl), rel=1e-12)
        e = _gap_oracle(c[idx], d["segment"][idx], lvl)
        assert row.coverage_gap == pytest.approx(e["weighted"], rel=1e-12)
        assert row.coverage_gap_worst_segment == e["worst_label"] == "island"


def test_level_column_must_be_a_by_key(constructor):
    d = _stacked(n=50)
    with pytest.raises(ValueError, match="must also be a by= column"):
        cf.evaluate(constructor(d), cf.coverage_gap("y", "lo", "hi", groups="segment", confidence_level="level"))
    with pytest.raises(ValueError, match="column 'nope' not found"):
        cf.evaluate(constructor(d), cf.coverage_test("y", "lo", "hi", confidence_level="nope"), by="level")


def test_level_column_out_of_range(eager_constructor):
    data = {"y": [0.0, 1.0], "lo": [0.0, 0.0], "hi": [1.0, 1.0], "level": [90.0, 90.0]}
    with pytest.raises(ValueError, match=r"confidence_level column 'level' has values outside \(0, 1\)"):
        cf.evaluate(eager_constructor(data), cf.coverage_test("y", "lo", "hi", confidence_level="level"), by="level")


def test_polars_lazy_mixes_labels_and_scipy_outputs():
    import polars as pl

    d = _stacked(n=300)
    metrics = [
        cf.coverage_gap("y", "lo", "hi", groups="segment", confidence_level="level"),
        cf.coverage_test("y", "lo", "hi", confidence_level="level", method="clopper-pearson"),
    ]
    lazy = cf.evaluate(pl.LazyFrame(d), *metrics, by="level")
    assert isinstance(lazy, pl.LazyFrame)
    got = lazy.collect()
    eager = cf.evaluate(pl.DataFrame(d), *metrics, by="level")
    assert got.schema["coverage_gap_worst_segment"] == pl.String
    assert got.drop("n_invalid").equals(eager)
