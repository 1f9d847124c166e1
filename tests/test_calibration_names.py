"""Calibration names that match the field (issue 38, item 7).

``confidence_ece`` against the published definitions of torchmetrics'
``MulticlassCalibrationError(norm="l1")`` and netcal's ``ECE``, written in
numpy here (neither library is installed: both need torch); ``set_ssc_score``
over non-empty sets with the empty sets' share and the coverage beside it.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import conformal_frames as cf
import oracle_sets as osets
from helpers import assert_close, group_dict, to_pandas

SEEDS = [0, 1, 2]


def _multiclass(seed: int, n: int = 240, k: int = 4, *, with_ones: bool = False) -> dict[str, np.ndarray]:
    """Probabilities of ``k`` classes (ties of the arg-max, tied confidences), labels, skewed groups, sizes 1 and 2."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * rng.uniform(0.5, 3.0, size=(n, 1))
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    # tied confidences and arg-max ties, off the bin edges m/10 and m/15 (edges: see the test of edges)
    p[: n // 4] = np.round(p[: n // 4], 2) + 0.005
    p[0, :2] = p[0, :2].max()  # an exact arg-max tie: the first column wins
    if with_ones:
        p[5:9] = np.eye(k)[[0, 1, 1, 2]]  # confidences exactly 1
    else:
        p = np.minimum(p, 0.999)
    c = np.where(rng.random(n) < p.max(axis=1) * 0.9, p.argmax(axis=1), rng.integers(0, k, size=n))
    if with_ones:
        c[5] = 3  # a certain prediction that is wrong
    g = np.concatenate([rng.choice(["g0", "g1", "g2"], size=n - 3, p=[0.6, 0.3, 0.1]), ["one", "two", "two"]])
    return {"c": c, "g": g, **{f"p{j}": p[:, j] for j in range(k)}}


def _confidences(d: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    p = np.column_stack([d[f"p{j}"] for j in range(4)])
    return p.max(axis=1), (p.argmax(axis=1) == d["c"]).astype(float)


def torchmetrics_l1(conf: np.ndarray, acc: np.ndarray, n_bins: int) -> float:
    """torchmetrics' ``_binning_bucketize`` + ``_ce_compute(norm="l1")``: slots ``[m/M, (m+1)/M)`` and a slot for 1."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    idx = np.searchsorted(edges, conf, side="right") - 1  # torch.bucketize(right=True) - 1
    count = np.bincount(idx, minlength=n_bins + 1).astype(float)
    with np.errstate(invalid="ignore"):
        conf_bin = np.nan_to_num(np.bincount(idx, conf, n_bins + 1) / count)
        acc_bin = np.nan_to_num(np.bincount(idx, acc, n_bins + 1) / count)
    return float(np.sum(np.abs(acc_bin - conf_bin) * count / count.sum()))


def netcal_ece(conf: np.ndarray, acc: np.ndarray, n_bins: int) -> float:
    """netcal's ECE of the confidences: equal-width bins as ``scipy.stats.binned_statistic`` (the last one closed)."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    idx = np.clip(np.searchsorted(edges, conf, side="right") - 1, 0, n_bins - 1)
    total = 0.0
    for m in range(n_bins):
        sel = idx == m
        if sel.any():
            total += sel.sum() / len(conf) * abs(acc[sel].mean() - conf[sel].mean())
    return total


PROBS = [f"p{j}" for j in range(4)]


@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_bins", [10, 15])
def test_confidence_ece_equals_torchmetrics_and_netcal(constructor, seed, n_bins):
    d = _multiclass(seed)
    out = to_pandas(cf.evaluate(constructor(d), cf.confidence_ece("c", PROBS, n_bins=n_bins), by="g"))
    conf, acc = _confidences(d)
    groups = group_dict(d["g"])
    assert list(out["g"]) == sorted(groups)
    torch_like = [torchmetrics_l1(conf[i], acc[i], n_bins) for i in groups.values()]
    netcal_like = [netcal_ece(conf[i], acc[i], n_bins) for i in groups.values()]
    assert_close(out["confidence_ece"], torch_like, rtol=1e-12, atol=1e-15, what=constructor.id)
    assert_close(out["confidence_ece"], netcal_like, rtol=1e-12, atol=1e-15, what=constructor.id)
    whole = to_pandas(cf.evaluate(constructor(d), cf.confidence_ece("c", PROBS, n_bins=n_bins)))
    assert_close(whole["confidence_ece"], [netcal_ece(conf, acc, n_bins)], rtol=1e-12)


def test_confidence_of_one_is_in_the_last_bin(eager_constructor):
    d = _multiclass(3, with_ones=True)
    conf, acc = _confidences(d)
    got = cf.conformal(eager_constructor(d)).confidence_ece("c", PROBS, n_bins=10)
    assert got == pytest.approx(netcal_ece(conf, acc, 10), rel=1e-12)
    # torchmetrics' own slot for 1.0 (docs/differences.md) differs when the last bin's other rows
    # err the other way: 0.95 correct (+0.05) and 1.0 wrong (-1): |0.05 - 1| here, 0.05 + 1 there
    small = {"c": np.array([0, 1, 0]), "p0": np.array([0.95, 1.0, 0.4]), "p1": np.array([0.05, 0.0, 0.6])}
    conf, acc = np.array([0.95, 1.0, 0.6]), np.array([1.0, 0.0, 0.0])
    got = cf.conformal(eager_constructor(small)).confidence_ece("c", ["p0", "p1"], n_bins=10)
    assert got == pytest.approx(netcal_ece(conf, acc, 10), rel=1e-12)
    assert got == pytest.approx((0.95 + 0.6) / 3, rel=1e-12)
    assert torchmetrics_l1(conf, acc, 10) == pytest.approx((1.05 + 0.6) / 3, rel=1e-12)


def test_confidence_on_a_bin_edge_starts_its_bin(eager_constructor):
    # 0.3 and 0.7 as written start bins 3 and 7 (as in ece; torchmetrics' float32 edges agree with
    # float32 scores); numpy's linspace edge 3 * 0.1 = 0.30000000000000004 would put 0.3 in bin 2
    d = {"c": np.array([0, 1, 0, 1]), "p0": np.array([0.3, 0.3, 0.7, 0.25]), "p1": np.array([0.2, 0.1, 0.3, 0.75])}
    got = cf.conformal(eager_constructor(d)).confidence_ece("c", ["p0", "p1"], n_bins=10)
    # bins: 3 -> {0.3 correct, 0.3 wrong}; 7 -> {0.7 correct, 0.75 correct}
    assert got == pytest.approx((abs(1 - 0.6) + abs(2 - 1.45)) / 4, rel=1e-12)


def test_confidence_ece_is_ece_of_correctness_and_differs_from_top_label(eager_constructor):
    d = _multiclass(4)
    conf, acc = _confidences(d)
    frame = eager_constructor({**d, "max_prob": conf, "correct": acc})
    ns = cf.conformal(frame)
    got = ns.confidence_ece("c", PROBS, n_bins=10)
    assert got == pytest.approx(ns.ece("correct", "max_prob", n_bins=10), rel=1e-12)
    assert abs(got - ns.top_label_ece("c", PROBS, n_bins=10)) > 1e-3


def test_confidence_ece_string_classes_weights_and_quantile_bins(eager_constructor):
    d = _multiclass(5)
    labels = np.array(["w", "x", "y", "z"], dtype=object)[d["c"]]
    conf, acc = _confidences(d)
    w = np.random.default_rng(0).integers(0, 4, size=len(conf)).astype(float)
    frame = eager_constructor({**d, "label": labels, "w": w, "max_prob": conf, "correct": acc})
    ns = cf.conformal(frame)
    named = ns.confidence_ece("label", PROBS, classes=["w", "x", "y", "z"], n_bins=8)
    assert named == pytest.approx(netcal_ece(conf, acc, 8), rel=1e-12)
    for kw in ({"weights": "w"}, {"counts": "w"}, {"strategy": "quantile"}):
        assert ns.confidence_ece("c", PROBS, n_bins=8, **kw) == pytest.approx(
            ns.ece("correct", "max_prob", n_bins=8, **kw), rel=1e-12
        )


def test_confidence_ece_merges_through_summaries():
    d = _multiclass(6)
    d["day"] = np.arange(len(d["c"])) % 3
    frame = pl.DataFrame(d)
    metric = cf.confidence_ece("c", PROBS, n_bins=10)
    stats = cf.summarize(frame, metric, by=["day", "g"])
    merged = to_pandas(cf.finalize(stats, metric, by="g")).sort_values("g")
    direct = to_pandas(cf.evaluate(frame, metric, by="g")).sort_values("g")
    assert_close(merged["confidence_ece"], direct["confidence_ece"], rtol=1e-12, atol=1e-15)


def test_confidence_ece_bad_input():
    frame = pl.DataFrame({"c": [0, 5], "p0": [0.2, 0.7], "p1": [0.8, 0.3]})
    with pytest.raises(ValueError, match="not among classes"):
        frame.conformal.confidence_ece("c", ["p0", "p1"])
    with pytest.raises(ValueError, match="mismatched classes"):
        cf.confidence_ece("c", ["p0", "p1"], classes=[0, 1, 2])


# ---------------------------------------------------------------------------
# set_ssc_score over non-empty sets
# ---------------------------------------------------------------------------
@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize(("seed", "num_bins"), [(0, None), (1, 2), (2, 3)])
@pytest.mark.parametrize("list_column", [False, True], ids=["membership", "list"])
def test_set_ssc_score_non_empty_and_strict(constructor, seed, num_bins, list_column):
    d = osets.random_sets(seed)
    frame = constructor(osets.frame_dict(d, list_column=list_column))
    sets = "s" if list_column else [f"m{j}" for j in range(4)]
    metrics = [
        cf.set_ssc_score("y", sets, classes=d["classes"], n_bins=num_bins),
        cf.set_ssc_score("y", sets, classes=d["classes"], n_bins=num_bins, include_empty=True).alias("strict"),
    ]
    out = to_pandas(cf.evaluate(frame, *metrics, by="g"))
    expected = []
    for idx in group_dict(d["g"]).values():
        yi, m = d["yi"][idx], d["m"][idx]
        expected.append(
            [
                osets.set_ssc_score(yi, m, num_bins),
                osets.size_rate(m, 0),
                osets.set_coverage(yi, m),
                osets.set_ssc_score(yi, m, num_bins, include_empty=True),
            ]
        )
    cols = ["set_ssc_score", "set_ssc_score_empty_rate", "set_ssc_score_coverage", "strict"]
    assert_close(out[cols].to_numpy(), np.array(expected), rtol=1e-12, atol=1e-15, what=constructor.id)
    # the data has empty sets: with a stratum per size, the strict score is 0 where a group has one
    g0 = out.set_index("g").loc["g0"]
    assert (g0["strict"] == 0.0) == (num_bins is None)
    assert g0["set_ssc_score"] > 0.0 and g0["set_ssc_score_empty_rate"] > 0.0


def test_set_ssc_score_only_empty_sets_is_null(eager_constructor):
    frame = eager_constructor({"y": [0, 1], "m0": [False, False], "m1": [False, False]})
    out = to_pandas(cf.evaluate(frame, cf.set_ssc_score("y", ["m0", "m1"], classes=[0, 1])))
    assert np.isnan(out["set_ssc_score"].iloc[0])
    assert out[["set_ssc_score_empty_rate", "set_ssc_score_coverage"]].iloc[0].tolist() == [1.0, 0.0]


def test_set_ssc_score_without_classes_drops_the_size_zero_stratum(eager_constructor):
    d = osets.random_sets(4)
    data = osets.frame_dict(d, list_column=True)
    frame = eager_constructor(data)
    got = cf.conformal(frame).set_ssc_score("y", "s")
    sizes = d["m"].sum(axis=1)
    cov = osets.set_covered(d["yi"], d["m"])
    strata = [cov[sizes == s].mean() for s in (1, 2) if (sizes == s).any()]
    if (sizes >= 3).any():
        strata.append(cov[sizes >= 3].mean())
    assert got == pytest.approx(min(strata), rel=1e-12)
