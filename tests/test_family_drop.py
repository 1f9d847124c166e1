"""Issue 38 item 1: ``invalid="drop"`` drops a row only from the metrics whose inputs are bad.

One call mixing an interval metric (coverage), a point metric (mae), a
probabilistic one (Gaussian crps) and a sort-based one (ks_test), with bad
rows in each family: every metric equals its one-metric call, and the counts
(``n``, ``n_dropped``, ``n_dropped_<metric>``) equal a numpy count of the bad
rows of each family.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas

NAN = math.nan
# groups: a (1 row, lo > hi: coverage drops it all), b (2 rows, a negative sd), c (8 rows, a bad row
# of every family, a missing y that every family but ks_test reads), d (3 rows, mae drops them all)
DATA: dict[str, list[Any]] = {
    "g": ["a", "b", "b", *["c"] * 8, "d", "d", "d"],
    "y": [1.0, 2.0, 0.5, 1.0, NAN, 3.0, 0.2, 1.5, 2.5, 0.7, 1.1, 0.3, 0.9, 2.2],
    "lo": [2.0, 0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 1.0, 0.0, 0.5, 0.0, 0.0, 0.5, 0.0],
    "hi": [1.0, 3.0, 1.0, 2.0, 2.0, 3.0, 1.0, 2.0, 2.0, 1.0, 2.0, 1.0, 1.0, 3.0],
    "p": [1.1, 1.9, 0.4, NAN, 1.0, 2.5, 0.3, 1.2, NAN, 0.6, 1.0, NAN, NAN, NAN],
    "mu": [1.0, 2.1, 0.6, 1.2, 1.0, 2.8, 0.1, 1.4, 2.4, 0.8, 1.0, 0.2, 1.0, 2.0],
    "sd": [1.0, -0.5, 0.5, 1.0, 1.0, 0.7, 0.3, -1.0, 0.9, 0.4, 0.6, 1.0, 1.0, 1.0],
    "label": [1, 0, 1, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 1],
    "score": [0.8, 0.3, 0.6, 0.9, 0.2, 1.4, 0.1, 0.7, 0.5, 0.4, 0.6, 0.3, 0.8, 0.2],
}


def _metrics() -> list[cf.Metric]:
    return [
        cf.coverage("y", "lo", "hi"),
        cf.mae("y", "p"),
        cf.crps("y", mean="mu", std="sd"),
        cf.ks_test("label", "score"),
    ]


def _bad() -> dict[str, np.ndarray]:
    """Each family's bad rows, from the definitions (numpy)."""
    d = {k: np.asarray(v, dtype=float) for k, v in DATA.items() if k != "g"}
    y = np.isnan(d["y"])
    return {
        "coverage": y | (d["lo"] > d["hi"]),
        "mae": y | np.isnan(d["p"]),
        "crps": y | (d["sd"] < 0),
        "ks_test": (d["score"] < 0) | (d["score"] > 1),
    }


OUTPUTS = {
    "coverage": ["coverage", "coverage_ci_low", "coverage_ci_high"],
    "mae": ["mae"],
    "crps": ["crps"],
    "ks_test": ["ks_test", "ks_test_pvalue"],
}


def _expected_counts(keys: list[str], families: list[str]) -> pd.DataFrame:
    bad = {k: v for k, v in _bad().items() if k in families}
    frame = pd.DataFrame({"g": DATA["g"], **{f"n_dropped_{k}": v.astype(int) for k, v in bad.items()}})
    anyone = np.any(np.stack(list(bad.values())), axis=0)
    frame["n"], frame["n_dropped"] = (~anyone).astype(int), anyone.astype(int)
    if not keys:
        return frame.drop(columns="g").sum().to_frame().T
    return frame.groupby("g", sort=True).sum().reset_index()


@pytest.mark.spark_cases(keys=["g"])
@pytest.mark.parametrize("keys", [[], ["g"]])
def test_each_family_drops_its_own_rows(constructor: Any, keys: list[str]) -> None:
    frame = constructor(DATA)
    by = keys or None
    spark = constructor.id == "pyspark"
    chosen = [_metrics()[0], _metrics()[3]] if spark else _metrics()  # Spark: two families, one query
    out = to_pandas(cf.evaluate(frame, *chosen, by=by, invalid="drop"))
    names = [f"n_dropped_{m.output_name}" for m in chosen]
    outputs = [c for m in chosen for c in OUTPUTS[m.output_name]]
    assert list(out.columns) == [*keys, *outputs, "n", "n_dropped", *names]
    expected = _expected_counts(keys, [m.output_name for m in chosen])
    for c in ["n", "n_dropped", *names]:
        assert out[c].tolist() == expected[c].tolist(), c
        assert str(out[c].dtype) in ("int64", "Int64", "int64[pyarrow]"), (c, out[c].dtype)
    # Spark: one query; the one-metric calls on polars (each is equal across backends, tested elsewhere)
    reference = pd.DataFrame(DATA) if spark else frame
    for m in chosen:
        alone = to_pandas(cf.evaluate(reference, m, by=by, invalid="drop"))
        if keys:
            assert out["g"].tolist() == alone["g"].tolist() == ["a", "b", "c", "d"]
        for c in alone.columns:
            if c not in (*keys, "n", "n_dropped"):
                assert_close(out[c], alone[c], what=c)
        bad = _bad()[m.output_name]
        assert (alone["n_dropped"] == expected[f"n_dropped_{m.output_name}"]).all()
        assert alone["n"].sum() == int((~bad).sum())
    if keys and not spark:  # a group whose rows one family drops: that family is null, the others are not
        null = out.set_index("g")[["coverage", "mae"]].isna()
        assert null.loc["a"].tolist() == [True, False] and null.loc["d"].tolist() == [False, True]


def test_metrics_of_one_validity_keep_the_call_level_columns(constructor: Any) -> None:
    """Same checks (coverage and winkler read y, lo, hi): the columns and numbers of a call with one plan."""
    if constructor.id == "pyspark":
        pytest.skip("one plan, as before: the Spark path is the one of every other evaluate test")
    frame = constructor(DATA)
    metrics = [cf.coverage("y", "lo", "hi"), cf.winkler("y", "lo", "hi", confidence_level=0.9)]
    out = to_pandas(cf.evaluate(frame, *metrics, by="g", invalid="drop"))
    assert list(out.columns) == ["g", "coverage", "coverage_ci_low", "coverage_ci_high", "winkler", "n", "n_dropped"]
    assert out["n_dropped"].tolist() == [1, 0, 2, 0]


def test_the_conformal_namespace_and_aliases(eager_constructor: Any) -> None:
    frame = eager_constructor(DATA)
    metrics = [cf.coverage("y", "lo", "hi").alias("cov"), cf.mae("y", "p").alias("err")]
    out = to_pandas(cf.conformal(frame).evaluate(*metrics, by="g", invalid="drop"))
    counts = ["n", "n_dropped", "n_dropped_cov", "n_dropped_err"]
    assert list(out.columns) == ["g", "cov", "cov_ci_low", "cov_ci_high", "err", *counts]
    assert_close(out["err"], to_pandas(cf.evaluate(frame, metrics[1], by="g", invalid="drop"))["err"])


@pytest.mark.parametrize("invalid", ["null", "raise"])
def test_other_policies_are_call_level(eager_constructor: Any, invalid: str) -> None:
    """``"null"`` nulls every metric of a group with an invalid row of any family; ``"raise"`` raises."""
    frame = eager_constructor(DATA)
    if invalid == "raise":
        with pytest.raises(ValueError, match=r"in \d+ rows?"):
            cf.evaluate(frame, *_metrics(), by="g", invalid="raise")
        return
    out = to_pandas(cf.evaluate(frame, *_metrics(), by="g", invalid="null"))
    assert list(out.columns)[-2:] == ["n", "n_invalid"]
    assert out["mae"].isna().tolist() == [True, True, True, True]


def test_cfx_metrics_drop_per_family() -> None:
    """``cfx.metrics(..., invalid="drop")`` has evaluate's semantics: each metric on its own valid rows."""
    pl = pytest.importorskip("polars")
    import conformal_frames.polars as cfx

    frame = pl.DataFrame(DATA, strict=False)
    metrics = _metrics()
    got = frame.group_by("g").agg(cfx.metrics(*metrics, invalid="drop")).unnest("metrics").sort("g")
    expected = cf.evaluate(frame, *metrics, by="g", invalid="drop")
    outputs = ["coverage", "coverage_ci_low", "coverage_ci_high", "mae", "crps", "ks_test", "ks_test_pvalue"]
    assert got.columns == ["g", *outputs]
    for c in outputs:
        assert_close(got[c].to_numpy(), expected[c].to_numpy(), what=c)


def test_a_summary_drops_a_row_from_all_its_metrics() -> None:
    """Pinned: a summary has one ``n`` per row and one column per statistic, shared by its metrics, so
    ``summarize(..., invalid="drop")`` keeps the call-level rule; summarize each family apart for evaluate's."""
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame(DATA, strict=False)
    metrics = [cf.coverage("y", "lo", "hi"), cf.mae("y", "p")]
    got = cf.finalize(cf.summarize(frame, *metrics, by="g", invalid="drop"), *metrics, by="g")
    bad = _bad()
    kept = frame.filter(pl.Series(~(bad["coverage"] | bad["mae"])))
    call_level = cf.evaluate(kept, *metrics, by="g", invalid="drop")  # the groups with rows left
    assert got.columns == ["g", "coverage", "coverage_ci_low", "coverage_ci_high", "mae", "n", "n_dropped"]
    per_family = cf.evaluate(frame, *metrics, by="g", invalid="drop")
    assert got["n"].to_list() == per_family["n"].to_list() == [0, 2, 4, 0]
    assert got["n_dropped"].to_list() == per_family["n_dropped"].to_list() == [1, 0, 4, 3]
    both = got.join(call_level.select("g", "mae"), on="g", suffix="_rows_left")
    assert_close(both["mae"].to_numpy(), both["mae_rows_left"].to_numpy(), what="mae")
    for metric in metrics:  # one family per summary: evaluate's numbers
        alone = cf.finalize(cf.summarize(frame, metric, by="g", invalid="drop"), metric, by="g")
        assert_close(alone[metric.output_name].to_numpy(), per_family[metric.output_name].to_numpy())


def test_the_call_is_checked_as_one() -> None:
    """Two outputs of one name, or a count named like an output, raise as a call of one plan would."""
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame(DATA, strict=False)
    with pytest.raises(ValueError, match="two outputs are named 'mae'"):
        cf.evaluate(frame, cf.mae("y", "p"), cf.width("lo", "hi").alias("mae"), invalid="drop")
    with pytest.raises(ValueError, match="'n_dropped_mae', the count of the rows mae drops"):
        cf.evaluate(frame, cf.mae("y", "p"), cf.width("lo", "hi").alias("n_dropped_mae"), invalid="drop")


def test_null_and_categorical_keys(constructor: Any) -> None:
    """A null key's rows leave every family (as under one plan); a categorical key joins the parts back."""
    if constructor.id == "pyspark":
        pytest.skip("the same joins as the main Spark case")
    data = {**DATA, "g": [None if g == "b" else g for g in DATA["g"]]}
    metrics = [cf.coverage("y", "lo", "hi"), cf.mae("y", "p")]
    frames = [constructor(data)]
    if constructor.id == "pandas":
        frames.append(pd.DataFrame(DATA).astype({"g": "category"}))
    for frame in frames:
        out = to_pandas(cf.evaluate(frame, *metrics, by="g", invalid="drop"))
        groups = ["a", "c", "d"] if frame is frames[0] else ["a", "b", "c", "d"]
        assert out["g"].astype(str).tolist() == groups
        for m in metrics:
            alone = to_pandas(cf.evaluate(frame, m, by="g", invalid="drop"))
            assert_close(out[m.output_name], alone[m.output_name], what=m.output_name)
            assert out[f"n_dropped_{m.output_name}"].tolist() == alone["n_dropped"].tolist()
