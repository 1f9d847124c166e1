"""Null group keys: the rows of a null (or NaN) key form one group, the key null, sorted last.

Its metrics are computed like any other group's (as pandas ``groupby(dropna=False)``
and polars ``group_by`` do), eager and lazy, on every backend; ``invalid="drop"``
drops the rows of a null key (and their group).  Checked against the same rows
under a non-null key (``"zz"``, which sorts last as well).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas

N = 18


def _data(key: Any) -> dict[str, list[Any]]:
    rng = np.random.default_rng(3)
    y = np.round(rng.normal(size=N), 2)
    lo = np.round(y - rng.gamma(2.0, 0.5, size=N) + 0.3, 2)
    hi = np.round(lo + rng.gamma(2.0, 0.6, size=N), 2)
    label = (rng.random(N) < 0.5).astype(np.int64)
    label[[0, 1, 6, 7, 12, 13]] = [0, 1, 0, 1, 0, 1]  # both labels in every group
    score = np.round(rng.random(N), 2)
    g = ["a", "a", "a", "a", "a", "a", "b", "b", "b", "b", "b", "b", key, key, key, key, key, key]
    e = {f"e{i}": list(np.round(y + rng.normal(size=N), 2)) for i in range(3)}
    q = {"q1": list(np.round(y - 0.8, 2)), "q5": list(np.round(y + rng.normal(size=N) * 0.3, 2))}
    return {"y": list(y), "lo": list(lo), "hi": list(hi), "label": list(label), "score": list(score), "g": g, **e, **q}


METRICS: dict[str, Callable[[], cf.Metric]] = {
    "coverage": lambda: cf.coverage("y", "lo", "hi"),
    "ssc": lambda: cf.ssc("y", "lo", "hi", n_bins=2),
    "ks_test": lambda: cf.ks_test("label", "score"),
    "auroc": lambda: cf.auroc("label", "score"),
    "ece": lambda: cf.ece("label", "score", n_bins=3),
    "pinball_loss": lambda: cf.pinball_loss("y", quantiles={0.1: "q1", 0.5: "q5"}),
    "crps_samples": lambda: cf.crps("y", samples=["e0", "e1", "e2"]),
    "bootstrap": lambda: cf.bootstrap(cf.coverage("y", "lo", "hi"), n_resamples=20, seed=1),
}


def _values(result: Any) -> dict[str, Any]:
    out = to_pandas(result)
    assert len(out) == 3
    return {c: out[c].to_numpy() for c in out.columns if c != "g"}


@pytest.mark.spark_cases([{"name": "ece"}, {"name": "bootstrap"}])
@pytest.mark.parametrize("name", list(METRICS))
def test_null_key_group_is_computed(constructor: Any, name: str) -> None:
    metric = METRICS[name]
    got = to_pandas(cf.evaluate(constructor(_data(None)), metric(), by="g"))
    want = to_pandas(cf.evaluate(constructor(_data("zz")), metric(), by="g"))
    assert list(got["g"][:2]) == ["a", "b"]
    assert got["g"].isna().iloc[2]  # the null key, sorted last
    assert list(got["n"]) == [6, 6, 6]
    for c in want.columns:
        if c in ("g",):
            continue
        assert_close(got[c], want[c], what=f"{name}: {c}")
    assert np.isfinite(
        np.asarray(got[[c for c in got.columns if c not in ("g", "n", "n_invalid")]].iloc[2], float)
    ).any()


@pytest.mark.spark_cases([{"name": "ece"}])
@pytest.mark.parametrize("name", ["coverage", "ece", "ks_test"])
def test_drop_drops_the_null_key_group(constructor: Any, name: str) -> None:
    got = to_pandas(cf.evaluate(constructor(_data(None)), METRICS[name](), by="g", invalid="drop"))
    want = to_pandas(cf.evaluate(constructor(_data("zz")), METRICS[name](), by="g", invalid="drop"))
    assert list(got["g"]) == ["a", "b"]
    for c in got.columns:
        if c != "g":
            assert_close(got[c], want[c][:2], what=f"{name}: {c}")


@pytest.mark.spark_cases([{"policy": "null"}])
@pytest.mark.parametrize("policy", ["null", "raise"])
def test_null_policy_keeps_the_group(constructor: Any, policy: str) -> None:
    got = to_pandas(cf.evaluate(constructor(_data(None)), cf.coverage("y", "lo", "hi"), by="g", invalid=policy))
    want = to_pandas(cf.evaluate(constructor(_data("zz")), cf.coverage("y", "lo", "hi"), by="g", invalid=policy))
    assert got["g"].isna().iloc[2]
    assert_close(got["coverage"], want["coverage"])


def test_nan_float_key_is_a_null_key() -> None:
    pl = pytest.importorskip("polars")
    data = _data(None)
    data["g"] = [1.0] * 6 + [2.0] * 6 + [None, float("nan")] * 3
    got = cf.evaluate(pl.DataFrame(data), cf.coverage("y", "lo", "hi"), by="g")
    data["g"] = [1.0] * 6 + [2.0] * 6 + [9.0] * 6
    want = cf.evaluate(pl.DataFrame(data), cf.coverage("y", "lo", "hi"), by="g")
    assert got["g"].to_list()[:2] == [1.0, 2.0]
    assert got["g"][2] is None
    assert_close(got["coverage"], want["coverage"])
    assert got["n"].to_list() == [6, 6, 6]


@pytest.mark.spark_cases([])
def test_summarize_finalize_null_key(constructor: Any) -> None:
    metric = cf.ece("label", "score", n_bins=3)
    got = cf.finalize(cf.summarize(constructor(_data(None)), metric, by="g"), metric, by="g")
    want = cf.finalize(cf.summarize(constructor(_data("zz")), metric, by="g"), metric, by="g")
    g, w = to_pandas(got), to_pandas(want)
    assert g["g"].isna().iloc[2]
    assert_close(g["ece"], w["ece"])
