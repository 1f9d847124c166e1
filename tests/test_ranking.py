"""AUROC, AUARC and the excess risk of the target coverage (ranking.py).

Oracles: scikit-learn's ``roc_auc_score``, the numpy baseline (MAPIE's
``mapie.metrics.uncertainty``) where it is defined without ambiguity (no
ties for AUARC), and direct computations written here from the definitions
(pairwise comparisons for AUROC; the mean over every order of the tied rows
for AUARC, by brute force over permutations for small frames).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import conformal_frames as cf
from helpers import assert_close, group_dict, to_pandas

sklearn_metrics = pytest.importorskip("sklearn.metrics")


# ---------------------------------------------------------------------------
# direct computations
# ---------------------------------------------------------------------------
def auroc_pairs(c: np.ndarray, s: np.ndarray) -> float:
    """P(s_correct > s_incorrect) + 1/2 P(tie), over all pairs."""
    pos, neg = s[c == 1], s[c == 0]
    if len(pos) == 0 or len(neg) == 0:
        return math.nan
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def auarc_stable(c: np.ndarray, s: np.ndarray) -> float:
    """The baseline's definition: stable sort by decreasing confidence."""
    order = np.argsort(-s, kind="stable")
    acc = np.cumsum(c[order]) / np.arange(1, len(c) + 1)
    return float(acc.mean())


def auarc_expected(c: np.ndarray, s: np.ndarray) -> float:
    """Mean of the stable-sort AUARC over the orders of tied rows, block by block.

    For each tie block (K0 rows before, C0 of them correct, m rows, accuracy p)
    the expected accuracy at position K0 + j is (C0 + j p) / (K0 + j): the
    expected number of correct rows among j drawn without replacement is j p.
    """
    values = np.unique(s)[::-1]
    total, k0, c0 = 0.0, 0, 0.0
    for v in values:
        block = c[s == v]
        m, p = len(block), block.mean()
        for j in range(1, m + 1):
            total += (c0 + j * p) / (k0 + j)
        k0 += m
        c0 += block.sum()
    return total / len(c)


def random_ranking(seed: int, n: int = 200, ties: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    if ties:
        s = np.round(s, 1)
    c = (rng.random(n) < 0.3 + 0.5 * s).astype(float)
    groups = rng.choice(["g0", "g1", "g2"], size=n - 3, p=[0.5, 0.3, 0.2])
    g = np.concatenate([groups, ["one", "two", "two"]])
    return {"c": c, "s": s, "g": g}


# ---------------------------------------------------------------------------
# the direct computations are right
# ---------------------------------------------------------------------------
def test_expected_auarc_is_the_mean_over_orders_of_ties() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(1, 7))
        c = rng.integers(0, 2, size=n).astype(float)
        s = rng.integers(0, 3, size=n).astype(float)
        brute = np.mean([auarc_stable(c[list(p)], s[list(p)]) for p in itertools.permutations(range(n))])
        assert auarc_expected(c, s) == pytest.approx(brute, rel=1e-12)


def test_pairwise_auroc_is_sklearn() -> None:
    d = random_ranking(1)
    assert auroc_pairs(d["c"], d["s"]) == pytest.approx(sklearn_metrics.roc_auc_score(d["c"], d["s"]), rel=1e-12)


# ---------------------------------------------------------------------------
# every backend
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("ties", [True, False])
def test_auroc_auarc_grouped_every_backend(constructor, ties: bool) -> None:
    d = random_ranking(7, ties=ties)
    out = to_pandas(cf.evaluate(constructor(d), cf.auroc("c", "s"), cf.auarc("c", "s"), by="g"))
    groups = group_dict(d["g"])
    assert list(out["g"]) == list(groups)
    exp_roc, exp_arc, exp_skl = [], [], []
    for idx in groups.values():
        c, s = d["c"][idx], d["s"][idx]
        exp_roc.append(auroc_pairs(c, s))
        exp_arc.append(auarc_expected(c, s))
        both = len(np.unique(c)) == 2
        exp_skl.append(sklearn_metrics.roc_auc_score(c, s) if both else math.nan)
    assert_close(out["auroc"], exp_roc, what="auroc vs pairs")
    assert_close(out["auroc"], exp_skl, what="auroc vs sklearn")
    assert_close(out["auarc"], exp_arc, what="auarc vs expectation over tie orders")
    assert list(out["n"]) == [len(i) for i in groups.values()]


def test_ungrouped_every_backend_matches_baseline(constructor) -> None:
    uncertainty = pytest.importorskip("mapie.metrics.uncertainty")
    d = random_ranking(11, n=300, ties=False)
    out = to_pandas(cf.evaluate(constructor(d), cf.auroc("c", "s"), cf.auarc("c", "s")))
    assert_close(out["auroc"], [uncertainty.auroc(d["c"], d["s"])], what="auroc vs baseline")
    assert_close(out["auarc"], [uncertainty.auarc(d["c"], d["s"])], what="auarc vs baseline (no ties)")


def test_baseline_docstring_numbers(eager_constructor) -> None:
    frame = eager_constructor({"c": [1, 1, 0, 0], "s": [0.9, 0.8, 0.2, 0.1]})
    assert cf.conformal(frame).auroc("c", "s") == 1.0
    frame = eager_constructor({"c": [0, 0, 1, 1], "s": [0.1, 0.2, 0.8, 0.9]})
    assert cf.conformal(frame).auarc("c", "s") == pytest.approx(0.7916666666666666, rel=1e-15)


def test_row_order_and_ties_do_not_matter(eager_constructor) -> None:
    d = random_ranking(5, n=120)
    perm = np.random.default_rng(0).permutation(120)
    shuffled = {k: v[perm] for k, v in d.items()}
    a = to_pandas(cf.evaluate(eager_constructor(d), cf.auroc("c", "s"), cf.auarc("c", "s"), by="g"))
    b = to_pandas(cf.evaluate(eager_constructor(shuffled), cf.auroc("c", "s"), cf.auarc("c", "s"), by="g"))
    cols = ["auroc", "auarc"]
    assert_close(
        a[cols].to_numpy(dtype=float, na_value=np.nan), b[cols].to_numpy(dtype=float, na_value=np.nan), rtol=1e-13
    )


def test_single_class_groups_are_null(constructor) -> None:
    d = {"c": [1.0, 1.0, 0.0, 1.0], "s": [0.2, 0.3, 0.5, 0.5], "g": ["all", "all", "mix", "mix"]}
    out = to_pandas(cf.evaluate(constructor(d), cf.auroc("c", "s"), cf.auarc("c", "s"), by="g"))
    assert pd.isna(out["auroc"][0])  # only correct rows: AUROC undefined
    assert out["auarc"][0] == 1.0
    assert out["auroc"][1] == 0.5  # tie
    assert out["auarc"][1] == 0.5


def test_boolean_correctness_and_unbounded_confidence(eager_constructor) -> None:
    d = {"c": [True, False, True, False], "s": [10.0, -3.0, 1e300, -1e300]}
    assert cf.conformal(eager_constructor(d)).auroc("c", "s") == 1.0


def test_invalid_inputs(constructor) -> None:
    d = {"c": [1.0, 2.0, 0.0], "s": [0.1, 0.2, float("nan")]}
    frame = constructor(d)
    if constructor.lazy:
        out = to_pandas(cf.evaluate(frame, cf.auroc("c", "s"), cf.auarc("c", "s")))
        assert pd.isna(out["auroc"][0]) and pd.isna(out["auarc"][0])
        assert out["n_invalid"][0] == 2
    else:
        with pytest.raises(ValueError, match="column 'c' has labels other than 0 and 1 in 1 row"):
            cf.evaluate(frame, cf.auroc("c", "s"))
        with pytest.raises(ValueError, match="column 's' has missing .* in 1 row"):
            cf.evaluate(constructor({"c": [1.0, 0.0, 0.0], "s": d["s"]}), cf.auarc("c", "s"))
    with pytest.raises(TypeError, match="score must be a column name"):
        cf.auroc("c", 3)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# excess risk of the target coverage
# ---------------------------------------------------------------------------
def ert_direct(x: np.ndarray, cover: np.ndarray, level: float, model, n_splits: int, seed: int) -> float:
    """covmetrics' ERT with its default L1 miscoverage loss, written out."""
    from sklearn.base import clone
    from sklearn.model_selection import KFold

    vals = []
    for train, test in KFold(n_splits=n_splits, shuffle=True, random_state=seed).split(x):
        m = clone(model).fit(x[train], cover[train])
        pred = m.predict_proba(x[test])[:, 1]
        c = cover[test]
        loss_pred = np.where(pred < level, c - level, np.where(pred > level, level - c, 0.0))
        vals.append(0.0 - loss_pred.mean())  # the constant predictor has loss 0
    return float(np.mean(vals))


def _ert_data(seed: int, n: int = 240) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.random(n)
    y = rng.normal(size=n)
    half = np.where(x1 > 0, 0.6, 2.0)  # under-covered where x1 > 0
    g = rng.choice(["a", "b"], size=n)
    return {"x1": x1, "x2": x2, "y": y, "lo": -half, "hi": half, "g": g}


def test_ert_matches_direct_computation(eager_constructor) -> None:
    from sklearn.linear_model import LogisticRegression

    d = _ert_data(0)
    model = LogisticRegression()
    got = cf.excess_risk_target_coverage(
        eager_constructor(d), "y", "lo", "hi", features=["x1", "x2"], confidence_level=0.8, model=model, n_splits=4
    )
    cover = ((d["lo"] <= d["y"]) & (d["y"] <= d["hi"])).astype(float)
    x = np.column_stack([d["x1"], d["x2"]])
    assert got == pytest.approx(ert_direct(x, cover, 0.8, model, 4, 42), rel=1e-12)
    assert got > 0.05  # coverage clearly depends on x1


def test_ert_grouped(eager_constructor) -> None:
    from sklearn.linear_model import LogisticRegression

    d = _ert_data(1)
    d["g"] = d["g"].astype(object)
    d["g"][:3] = "tiny"  # fewer rows than folds: null
    out = to_pandas(
        cf.excess_risk_target_coverage(
            eager_constructor(d),
            "y",
            "lo",
            "hi",
            features=["x1"],
            confidence_level=0.8,
            by="g",
            model=LogisticRegression(),
        )
    )
    cover = ((d["lo"] <= d["y"]) & (d["y"] <= d["hi"])).astype(float)
    exp = []
    for key, idx in group_dict(d["g"]).items():
        exp.append(
            math.nan if key == "tiny" else ert_direct(d["x1"][idx, None], cover[idx], 0.8, LogisticRegression(), 5, 42)
        )
    assert list(out["g"]) == ["a", "b", "tiny"]
    assert list(out["n"]) == [len(i) for i in group_dict(d["g"]).values()]
    assert_close(out["excess_risk_target_coverage"], exp, rtol=1e-12)


def test_ert_default_model() -> None:
    import polars as pl
    from sklearn.ensemble import HistGradientBoostingClassifier

    d = _ert_data(1, n=80)
    got = cf.excess_risk_target_coverage(pl.DataFrame(d), "y", "lo", "hi", features=["x1"], confidence_level=0.8)
    cover = ((d["lo"] <= d["y"]) & (d["y"] <= d["hi"])).astype(float)
    assert got == pytest.approx(
        ert_direct(d["x1"][:, None], cover, 0.8, HistGradientBoostingClassifier(random_state=42), 5, 42), rel=1e-12
    )


def test_ert_sets_and_docstring_number() -> None:
    import pandas as pd
    from sklearn.dummy import DummyClassifier

    y = np.arange(12.0)
    covered = np.arange(12) % 2 == 0
    df = pd.DataFrame({"x": y, "y": [0] * 12, "c0": covered, "c1": ~covered})
    got = cf.excess_risk_target_coverage(
        df,
        "y",
        sets=["c0", "c1"],
        classes=[0, 1],
        features=["x"],
        confidence_level=0.5,
        model=DummyClassifier(strategy="prior"),
        n_splits=2,
    )
    assert got == pytest.approx(-0.16666666666666666, rel=1e-12)  # the baseline's docstring example


def test_ert_lazy_and_bad_parameters(constructor) -> None:
    d = _ert_data(2, n=30)
    frame = constructor(d)
    if constructor.lazy:
        with pytest.raises(NotImplementedError, match="eager-only.*collect it first"):
            cf.excess_risk_target_coverage(frame, "y", "lo", "hi", features=["x1"], confidence_level=0.9)
        return
    with pytest.raises(ValueError, match="n_splits must be an integer >= 2, got 1"):
        cf.excess_risk_target_coverage(frame, "y", "lo", "hi", features=["x1"], confidence_level=0.9, n_splits=1)
    with pytest.raises(ValueError, match="confidence_level must be .* got 1.5"):
        cf.excess_risk_target_coverage(frame, "y", "lo", "hi", features=["x1"], confidence_level=1.5)
    with pytest.raises(TypeError, match="features must be a non-empty list"):
        cf.excess_risk_target_coverage(frame, "y", "lo", "hi", features="x1", confidence_level=0.9)
    with pytest.raises(ValueError, match="column 'nope' not found"):
        cf.excess_risk_target_coverage(frame, "y", "lo", "hi", features=["nope"], confidence_level=0.9)
    with pytest.raises(ValueError, match="needs at least n_splits=5 rows, got 3"):
        small = constructor({k: v[:3] for k, v in d.items()})
        cf.excess_risk_target_coverage(small, "y", "lo", "hi", features=["x1"], confidence_level=0.9)
    bad = dict(d)
    bad["x1"] = d["x1"].copy()
    bad["x1"][0] = np.inf
    with pytest.raises(ValueError, match="column 'x1' has missing .* in 1 row"):
        cf.excess_risk_target_coverage(constructor(bad), "y", "lo", "hi", features=["x1"], confidence_level=0.9)
