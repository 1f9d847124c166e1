"""``confidence_level=`` as a column (a by= key): per-group targets against numpy oracles."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

import conformal_frames as cf
import oracle
import oracle_sets as osets
from helpers import assert_close, to_pandas

LEVELS = (0.7, 0.8, 0.9)
CRITERIA = ["S", "N", "U", "F", "M", "E", "OU", "OF", "OM", "OE", "credibility", "empty"]


def _data(seed: int) -> dict[str, np.ndarray]:
    """Intervals and p-values (tenths: many p-values equal 1 - level exactly), stacked levels."""
    d = osets.random_pvalues(seed, n=90, k=3)
    rng = np.random.default_rng(seed)
    n = len(d["yi"])
    y = rng.normal(size=n)
    lo = y - rng.uniform(-0.5, 1.5, size=n)
    data = {
        "lv": rng.choice(LEVELS, size=n),
        "g": rng.choice(["a", "b"], size=n),
        "y": y,
        "lo": lo,
        "hi": lo + rng.uniform(0.0, 2.0, size=n),
        "label": d["yi"],
        **{f"p{j}": d["p"][:, j] for j in range(3)},
    }
    return data


def _eps(level: float) -> float:
    """The decimal complement, written out for the oracle."""
    return float(Decimal("1") - Decimal(str(level)))


@pytest.mark.parametrize("seed", [0, 1])
def test_level_column_matches_oracle(constructor, seed):
    d = _data(seed)
    metrics = [
        cf.winkler("y", "lo", "hi", confidence_level="lv"),
        cf.cwc("y", "lo", "hi", eta=3.0, confidence_level="lv"),
        cf.efficiency_criteria("label", ["p0", "p1", "p2"], classes=[0, 1, 2], confidence_level="lv"),
    ]
    out = to_pandas(cf.evaluate(constructor(d), *metrics, by=["lv", "g"]))
    keys = sorted({(lv, g) for lv, g in zip(d["lv"], d["g"])})
    assert list(zip(out["lv"], out["g"])) == keys
    p = np.column_stack([d["p0"], d["p1"], d["p2"]])
    for row, (lv, g) in enumerate(keys):
        i = (d["lv"] == lv) & (d["g"] == g)
        y, lo, hi = d["y"][i], d["lo"][i], d["hi"][i]
        assert_close(out["winkler"][row], oracle.winkler(y, lo, hi, lv), what=f"winkler {lv} {g}")
        assert_close(out["cwc"][row], oracle.cwc(y, lo, hi, 3.0, lv), what=f"cwc {lv} {g}")
        expected = osets.criteria(p[i], _eps(lv), d["label"][i])
        got = [out[f"efficiency_criteria_{c}"][row] for c in CRITERIA]
        assert_close(got, [expected[c] for c in CRITERIA], atol=1e-15, what=f"criteria {lv} {g}")


def test_level_column_equals_each_float_level(eager_constructor):
    """Per group, the column gives exactly the numbers of the float level."""
    d = _data(2)
    frame = eager_constructor(d)
    out = to_pandas(
        cf.evaluate(
            frame,
            cf.winkler("y", "lo", "hi", confidence_level="lv"),
            cf.efficiency_criteria(None, ["p0", "p1", "p2"], confidence_level="lv"),
            by="lv",
        )
    )
    for row, lv in enumerate(LEVELS):
        sub = {k: v[d["lv"] == lv] for k, v in d.items()}
        one = to_pandas(
            cf.evaluate(
                eager_constructor(sub),
                cf.winkler("y", "lo", "hi", confidence_level=lv),
                cf.efficiency_criteria(None, ["p0", "p1", "p2"], confidence_level=lv),
            )
        )
        assert_close(out["winkler"][row], one["winkler"][0], what=f"winkler {lv}")  # sums in another order
        for col in ["efficiency_criteria_N", "efficiency_criteria_M", "efficiency_criteria_empty"]:
            assert out[col][row] == one[col][0], (col, lv)  # counts: exact


def test_level_column_must_be_a_by_key_and_valid(eager_constructor):
    d = _data(0)
    with pytest.raises(ValueError, match=r"confidence_level='lv' names a column: it must also be a by= column"):
        cf.evaluate(eager_constructor(d), cf.winkler("y", "lo", "hi", confidence_level="lv"))
    with pytest.raises(ValueError, match="column 'nope' not found"):
        cf.evaluate(eager_constructor(d), cf.cwc("y", "lo", "hi", eta=1.0, confidence_level="nope"), by="g")
    bad = {**d, "lv": np.where(d["lv"] == 0.9, 1.0, d["lv"])}
    n_bad = int((d["lv"] == 0.9).sum())
    with pytest.raises(ValueError, match=rf"confidence_level column 'lv' has values outside \(0, 1\) in {n_bad} rows"):
        cf.evaluate(eager_constructor(bad), cf.efficiency_criteria(None, ["p0", "p1"], confidence_level="lv"), by="lv")


def test_level_column_lazy_invalid_group_is_null(lazy_constructor):
    d = _data(0)
    bad = {**d, "lv": np.where(d["lv"] == 0.9, 1.0, d["lv"])}
    out = to_pandas(cf.evaluate(lazy_constructor(bad), cf.winkler("y", "lo", "hi", confidence_level="lv"), by="lv"))
    assert list(out["lv"]) == [0.7, 0.8, 1.0]
    assert out["winkler"].isna().tolist() == [False, False, True]
    assert out["n_invalid"].tolist() == [0, 0, int((d["lv"] == 0.9).sum())]


def test_excess_risk_level_column_matches_oracle():
    pytest.importorskip("sklearn")
    import pandas as pd
    from sklearn.ensemble import HistGradientBoostingClassifier

    from test_ranking import ert_direct

    rng = np.random.default_rng(4)
    n = 160
    x = rng.normal(size=n)
    y = rng.normal(size=n)
    half = np.where(x > 0, 0.6, 2.0)
    lv = np.repeat([0.8, 0.9], n // 2)
    frame = pd.DataFrame({"x": x, "y": y, "lo": -half, "hi": half, "lv": lv})
    out = cf.excess_risk_target_coverage(
        frame, "y", "lo", "hi", features=["x"], confidence_level="lv", by="lv", n_splits=4, seed=3
    )
    cover = ((-half <= y) & (y <= half)).astype(float)
    for row, level in enumerate([0.8, 0.9]):
        i = lv == level
        expected = ert_direct(x[i][:, None], cover[i], level, HistGradientBoostingClassifier(random_state=3), 4, 3)
        assert out["excess_risk_target_coverage"][row] == pytest.approx(expected, rel=1e-12)
