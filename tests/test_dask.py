"""Dask: what narwhals can run lazily agrees with polars; the rest says so.

Dask is not in the ``constructor`` fixture: narwhals' Dask backend has no
ordered window functions (``over(order_by=...)``) and no per-group numpy steps,
so the metrics needing them raise a clear NotImplementedError naming Dask and
the way out.  This file pins which metric runs and which raises.
"""

from __future__ import annotations

import numpy as np
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas

dd = pytest.importorskip("dask.dataframe", reason="dask is not installed")


def _data(seed: int = 0, n: int = 300) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    lo = np.round(rng.normal(size=n), 2)
    score = np.round(rng.uniform(size=n), 2)
    p = np.round(rng.uniform(size=(n, 3)), 2)
    return {
        "g": rng.choice(["a", "b", "c"], size=n),
        "y": np.round(rng.normal(size=n), 2),
        "lo": lo,
        "hi": lo + np.round(rng.gamma(2.0, size=n), 1),
        "label": (rng.uniform(size=n) < score).astype(np.int64),
        "score": score,
        "cls": rng.integers(0, 3, n),
        "in0": p[:, 0] > 0.3,
        "in1": p[:, 1] > 0.3,
        "in2": p[:, 2] > 0.3,
        "p0": p[:, 0],
        "p1": p[:, 1],
        "p2": p[:, 2],
    }


SETS = dict(sets=["in0", "in1", "in2"], classes=[0, 1, 2])
RUNS_ON_DASK = {
    "coverage": cf.coverage("y", "lo", "hi"),
    "width": cf.width("lo", "hi"),
    "winkler": cf.winkler("y", "lo", "hi", confidence_level=0.9),
    "cwc": cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
    "set_coverage": cf.set_coverage("cls", **SETS),
    "set_size": cf.set_size(**SETS),
    "ece": cf.ece("label", "score", n_bins=5),
    "brier": cf.brier("label", "score"),
    "spiegelhalter": cf.spiegelhalter_test("label", "score"),
}
RAISES_ON_DASK = {
    # when/then/otherwise inside max_horizontal: "Objects are not co-aligned"
    "efficiency": cf.efficiency_criteria("cls", ["p0", "p1", "p2"], classes=[0, 1, 2], confidence_level=0.8),
    "ssc_score": cf.ssc_score("y", "lo", "hi"),
    "hsic": cf.hsic("y", "lo", "hi"),
    "ks": cf.ks_test("label", "score"),
    "kuiper": cf.kuiper_test("label", "score"),
    "ece_quantile": cf.ece("label", "score", n_bins=5, strategy="quantile"),
}


def _dask(d: dict[str, np.ndarray]):
    import pandas as pd

    return dd.from_pandas(pd.DataFrame(d), npartitions=2)


@pytest.mark.parametrize("name", list(RUNS_ON_DASK))
def test_metric_runs_on_dask_and_agrees_with_polars(name):
    import polars as pl

    d = _data()
    metric = RUNS_ON_DASK[name]
    ours = to_pandas(cf.evaluate(_dask(d), metric, by="g"))
    ref = to_pandas(cf.evaluate(pl.DataFrame(d), metric, by="g"))
    assert list(ours["g"]) == list(ref["g"]) == ["a", "b", "c"]
    cols = [c for c in ref.columns if c != "g"]
    assert_close(ours[cols].to_numpy(), ref[cols].to_numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", list(RAISES_ON_DASK))
def test_metric_that_dask_cannot_run_says_so(name):
    with pytest.raises(NotImplementedError, match=r"(?is)dask.*(collect|polars)"):
        cf.evaluate(_dask(_data()), RAISES_ON_DASK[name], by="g")
