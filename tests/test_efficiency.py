"""Vovk's criteria against a direct numpy implementation, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import conformal_frames as cf
import oracle_sets as osets
from helpers import assert_close, group_dict, to_pandas

SEEDS = [0, 1, 2]
ALL = ["S", "N", "U", "F", "M", "E", "OU", "OF", "OM", "OE", "credibility", "empty"]
PRIOR = ["S", "N", "U", "F", "M", "E", "credibility", "empty"]


def _frame_dict(d, strings=False):
    k = d["p"].shape[1]
    classes = [f"c{j}" for j in range(k)] if strings else list(range(k))
    data = {f"p{j}": d["p"][:, j] for j in range(k)}
    data["y"] = [classes[i] for i in d["yi"]] if strings else d["yi"]
    data["g"] = d["g"]
    return data, classes


@pytest.mark.spark_cases([{"strings": False, "seed": 0}, {"strings": True, "seed": 1}])
@pytest.mark.parametrize(("seed", "level", "eps"), [(0, 0.8, 0.2), (1, 0.5, 0.5), (2, 0.65, 0.35)])
@pytest.mark.parametrize("strings", [False, True], ids=["int", "str"])
def test_criteria_match_oracle(constructor, seed, level, eps, strings):
    d = osets.random_pvalues(seed)
    data, classes = _frame_dict(d, strings)
    cols = [f"p{j}" for j in range(len(classes))]
    frame = constructor(data)
    out = to_pandas(cf.conformal(frame).efficiency_criteria("y", cols, classes=classes, confidence_level=level, by="g"))
    groups = group_dict(d["g"])
    assert list(out["g"]) == sorted(groups)
    assert list(out.columns) == ["g", *ALL, "n", *(["n_invalid"] if constructor.lazy else [])]
    expected = [[osets.criteria(d["p"][i], eps, d["yi"][i])[c] for c in ALL] for i in groups.values()]
    assert_close(out[ALL].to_numpy(), expected, rtol=1e-12, atol=1e-15, what=constructor.id)


@pytest.mark.parametrize("seed", SEEDS)
def test_prior_criteria_without_labels(constructor, seed):
    d = osets.random_pvalues(seed, k=3)
    data = {f"p{j}": d["p"][:, j] for j in range(3)}
    out = to_pandas(
        cf.evaluate(constructor(data), cf.efficiency_criteria(None, ["p0", "p1", "p2"], confidence_level=0.7))
    )
    expected = osets.criteria(d["p"], 0.3)
    assert_close(
        out[[f"efficiency_criteria_{c}" for c in PRIOR]].to_numpy(),
        [[expected[c] for c in PRIOR]],
        rtol=1e-12,
        atol=1e-15,
    )
    assert not any(f"efficiency_criteria_{c}" in out.columns for c in ("OU", "OF", "OM", "OE"))


def test_label_conditional_is_by_label(constructor):
    d = osets.random_pvalues(4)
    data, classes = _frame_dict(d)
    out = to_pandas(
        cf.conformal(constructor(data)).efficiency_criteria(
            "y", [f"p{j}" for j in range(4)], classes=classes, confidence_level=0.75, by="y"
        )
    )
    groups = group_dict(d["yi"])
    assert list(out["y"]) == sorted(groups)
    expected = [[osets.criteria(d["p"][i], 0.25, d["yi"][i])[c] for c in ALL] for i in groups.values()]
    assert_close(out[ALL].to_numpy(), expected, rtol=1e-12, atol=1e-15)


def test_ties_for_u_and_ou(constructor):
    # largest value twice -> U equals it; OU over false labels with ties
    data = {"y": [0, 1, 2], "p0": [0.7, 0.7, 0.2], "p1": [0.7, 0.1, 0.2], "p2": [0.1, 0.7, 0.2]}
    out = to_pandas(
        cf.evaluate(
            constructor(data), cf.efficiency_criteria("y", ["p0", "p1", "p2"], classes=[0, 1, 2], confidence_level=0.85)
        )
    )
    assert_close(out["efficiency_criteria_U"], [(0.7 + 0.7 + 0.2) / 3])
    assert_close(out["efficiency_criteria_OU"], [(0.7 + 0.7 + 0.2) / 3])
    assert_close(out["efficiency_criteria_F"], [(0.8 + 0.8 + 0.4) / 3])
    assert_close(out["efficiency_criteria_OE"], [(1 + 2 + 2) / 3])


def test_pvalues_outside_unit_interval(constructor):
    data = {"y": [0, 1], "p0": [0.5, 1.2], "p1": [-0.1, 0.3]}
    metric = cf.efficiency_criteria("y", ["p0", "p1"], classes=[0, 1], confidence_level=0.9)
    if constructor.lazy:
        out = to_pandas(cf.evaluate(constructor(data), metric))
        assert int(out["n_invalid"][0]) == 2 and np.isnan(out["efficiency_criteria_S"][0])
    else:
        with pytest.raises(ValueError, match=r"p-value column 'p0' has values outside \[0, 1\] in 1 row"):
            cf.evaluate(constructor(data), metric)


def test_label_not_among_classes(eager_constructor):
    data = {"y": [0, 5], "p0": [0.5, 0.2], "p1": [0.1, 0.3]}
    with pytest.raises(ValueError, match=r"label column 'y' has labels not among classes \[0, 1\] in 1 row, e.g. 5$"):
        cf.evaluate(
            eager_constructor(data), cf.efficiency_criteria("y", ["p0", "p1"], classes=[0, 1], confidence_level=0.9)
        )


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("y", ["p0", "p1"]), {"classes": [0, 1], "confidence_level": 0.0}, ValueError, "confidence_level must be"),
        (("y", ["p0", "p1"]), {"classes": [0, 1], "confidence_level": 1.0}, ValueError, "confidence_level must be"),
        (
            ("y", ["p0", "p1"]),
            {"classes": [0, 1, 2], "confidence_level": 0.9},
            ValueError,
            "mismatched classes and p-value columns",
        ),
        (("y", ["p0", "p1"]), {"confidence_level": 0.9}, ValueError, "classes= is required"),
        (
            ("y", ["p0"]),
            {"classes": [0], "confidence_level": 0.9},
            ValueError,
            r"pvalues must be a list of distinct column names \(at least 2\), got \['p0'\]",
        ),
        (
            ("y", "p0"),
            {"classes": [0], "confidence_level": 0.9},
            TypeError,
            "pvalues must be a list of distinct column names, got 'p0'",
        ),
    ],
)
def test_bad_parameters(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        cf.efficiency_criteria(*args, **kwargs)


def test_non_numeric_pvalues(constructor):
    with pytest.raises(TypeError, match="column 'p0' must be numeric"):
        cf.evaluate(
            constructor({"p0": ["a", "b"], "p1": [0.1, 0.2]}),
            cf.efficiency_criteria(None, ["p0", "p1"], confidence_level=0.9),
        )
