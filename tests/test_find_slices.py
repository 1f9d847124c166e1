"""cf.find_slices: the slices where a test metric fails (issue 40, item 4).

Planted-slice recovery, the false discoveries on null data, a numpy oracle of
every per-slice number (bins, counts, p-values, Holm, the parent rule, the
ranking), min_size, ties, nulls, every backend and the bad-input messages.
"""

from __future__ import annotations

import itertools
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl
import pytest
from scipy.stats import binom, norm

import conformal_frames as cf
from conformal_frames.errors import ColumnNotFoundError
from helpers import assert_close, to_pandas

Z90 = norm.ppf(0.95)  # the half-width of a central 90% interval of N(0, 1): coverage exactly 0.9


def _frame(seed: int, n: int, *, planted: float | None = None, nulls: bool = False) -> dict[str, Any]:
    """Intervals of coverage 0.9 (``planted``: that coverage where region=EU and age >= its 3rd quartile)."""
    rng = np.random.default_rng(seed)
    region = rng.choice(["EU", "US", "APAC"], n).astype(object)
    device = rng.choice(["mobile", "desktop"], n)
    age = rng.integers(18, 80, n).astype(float)  # integers: tied values
    half = np.full(n, Z90)
    if planted is not None:
        inside = (region == "EU") & (age >= np.quantile(age, 0.75))
        half[inside] = norm.ppf(0.5 + planted / 2)
    if nulls:
        region[rng.uniform(size=n) < 0.1] = None
    return {
        "y": rng.normal(size=n),
        "lo": -half,
        "hi": half,
        "region": list(region),
        "device": list(device),
        "age": age,
    }


def _test(level: float = 0.9) -> Any:
    return cf.coverage_test("y", "lo", "hi", confidence_level=level)


# ---------------------------------------------------------------------------
# what it finds
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_planted_two_feature_slice_ranks_first(seed: int) -> None:
    data = _frame(seed, 6000, planted=0.75)
    out = cf.find_slices(pl.DataFrame(data), _test(), features=["region", "device", "age"])
    top = out.row(0, named=True)
    edge = np.quantile(data["age"], 0.75)
    assert top["slice"] == f"region=EU & age >= {edge:.4g}"
    assert (top["order"], top["region"], top["device"]) == (2, "EU", None)
    assert top["significant"] and not top["explained_by_parent"]
    assert top["effect"] < -0.1
    # its refinements by device are explained by it (same coverage, fewer rows)
    children = out.filter(pl.col("slice").str.starts_with("region=EU & age >= ") & (pl.col("order") == 3))
    assert children.is_empty()  # max_order=2
    deeper = cf.find_slices(pl.DataFrame(data), _test(), features=["region", "device", "age"], max_order=3)
    third = deeper.filter((pl.col("order") == 3) & pl.col("slice").str.contains(f"age >= {edge:.4g}"))
    third = third.filter(pl.col("region") == "EU")
    assert third.height == 2 and third["explained_by_parent"].all()


def test_null_data_gives_few_false_discoveries() -> None:
    """Coverage exactly on target: runs with any significant slice stay near the 5% family-wise rate.

    20 seeded runs of 37 slices each; Holm at 5% allows about 1 such run (the
    bench runs 200: bench/bench_find_slices.py).  Without any correction
    most runs have a "significant" slice.
    """
    runs, uncorrected = 0, 0
    for seed in range(20):
        frame = pl.DataFrame(_frame(100 + seed, 1500))
        out = cf.find_slices(frame, _test(), features=["region", "device", "age"])
        runs += bool(out["significant"].any())
        uncorrected += bool((out["pvalue"] < 0.05).any())
    assert runs <= 3
    assert uncorrected >= 10


# ---------------------------------------------------------------------------
# the numbers: a numpy oracle
# ---------------------------------------------------------------------------
def _holm(p: np.ndarray) -> np.ndarray:
    order = np.argsort(p, kind="stable")
    m = len(p)
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


def _oracle(data: dict[str, Any], features: list[str], min_size: int, level: float) -> list[dict[str, Any]]:
    """Every slice of up to two conditions, computed from the rows in numpy."""
    covered = (np.asarray(data["lo"]) <= data["y"]) & (np.asarray(data["y"]) <= data["hi"])
    values, labels = {}, {}
    for f in features:
        col = np.asarray(data[f], dtype=object)
        if f == "age":
            x = np.asarray(data[f], dtype=float)
            edges = np.unique(np.quantile(x[~np.isnan(x)], [0.25, 0.5, 0.75]))
            code = np.array([None if np.isnan(v) else int((v >= edges).sum()) for v in x], dtype=object)
            names = [f"< {edges[0]:.4g}"] + [f"[{a:.4g}, {b:.4g})" for a, b in itertools.pairwise(edges)]
            labels[f] = {c: names[c] if c < len(edges) else f">= {edges[-1]:.4g}" for c in range(len(edges) + 1)}
            values[f] = code
        else:
            values[f] = col
            labels[f] = {v: str(v) for v in set(col) if v is not None}
    rows = []
    for k in range(3):
        for combo in itertools.combinations(features, k):
            keys = list(zip(*(values[f] for f in combo), strict=True)) if combo else [()] * len(covered)
            for key in sorted(set(keys), key=repr):
                mask = np.array([kk == key for kk in keys])
                n, hits = int(mask.sum()), int(covered[mask].sum())
                conds = dict(zip(combo, key, strict=True))
                text = [
                    f"{f} is null" if v is None else (f"{f}={labels[f][v]}" if f != "age" else f"{f} {labels[f][v]}")
                    for f, v in conds.items()
                ]
                text = [t.replace("age [", "age in [") for t in text]
                rows.append({"order": k, "conds": conds, "slice": " & ".join(text) or "(all rows)", "n": n, "k": hits})
    kept = [r for r in rows if r["n"] >= min_size]
    p = np.array([binom.cdf(r["k"], r["n"], level) for r in kept])
    for r, pv, pa in zip(kept, p, _holm(p), strict=True):
        r |= {"coverage": r["k"] / r["n"], "pvalue": pv, "pvalue_adjusted": pa, "effect": r["k"] / r["n"] - level}
    by_conds = {(r["order"], tuple(sorted(r["conds"].items(), key=str))): r for r in kept}
    for r in kept:
        r["explained_by_parent"] = False
        for drop in r["conds"] if r["pvalue_adjusted"] < 0.05 else ():
            rest = {f: v for f, v in r["conds"].items() if f != drop}
            parent = by_conds.get((r["order"] - 1, tuple(sorted(rest.items(), key=str))))
            if parent and parent["pvalue_adjusted"] < 0.05 and binom.cdf(r["k"], r["n"], parent["coverage"]) >= 0.05:
                r["explained_by_parent"] = True
    return sorted(kept, key=lambda r: (r["pvalue_adjusted"], r["effect"], -r["n"], r["slice"]))


@pytest.mark.parametrize(("seed", "min_size"), [(3, 30), (4, 80), (5, 1)])
def test_every_per_slice_number_matches_numpy(seed: int, min_size: int) -> None:
    data = _frame(seed, 900, planted=0.7, nulls=True)
    data["age"][:7] = np.nan
    data["age"] = [None if np.isnan(v) else v for v in data["age"]]
    out = to_pandas(cf.find_slices(pl.DataFrame(data), _test(), features=["region", "age"], min_size=min_size))
    oracle_data = {**data, "age": np.array([np.nan if v is None else v for v in data["age"]])}
    expected = _oracle(oracle_data, ["region", "age"], min_size, 0.9)
    assert list(out["slice"]) == [r["slice"] for r in expected]
    assert list(out["rank"]) == list(range(1, len(expected) + 1))
    assert list(out["order"]) == [r["order"] for r in expected]
    assert list(out["n"]) == [r["n"] for r in expected]
    assert out["n"].min() >= min_size
    assert_close(out["share"], [r["n"] / 900 for r in expected], what="share")
    for column in ("coverage", "pvalue", "pvalue_adjusted", "effect"):
        source = "coverage_test" if column == "coverage" else column
        assert_close(out[source], [r[column] for r in expected], rtol=1e-9, what=column)
    assert list(out["explained_by_parent"]) == [r["explained_by_parent"] for r in expected]
    assert list(out["significant"]) == [r["pvalue_adjusted"] < 0.05 for r in expected]


def test_min_size_leaves_small_slices_out_of_the_family() -> None:
    frame = pl.DataFrame(_frame(6, 600, planted=0.7))
    everything = cf.find_slices(frame, _test(), features=["region", "age"], min_size=1)
    sizes = sorted(everything["n"].to_list())
    cut = sizes[len(sizes) // 2]
    some = cf.find_slices(frame, _test(), features=["region", "age"], min_size=cut)
    assert set(some["slice"]) == set(everything.filter(pl.col("n") >= cut)["slice"])
    # fewer hypotheses: Holm's adjusted p-values of the slices kept are no larger
    both = some.join(everything, on="slice", suffix="_all")
    assert (both["pvalue_adjusted"] <= both["pvalue_adjusted_all"] + 1e-15).all()
    assert_close(both["pvalue"], both["pvalue_all"], what="raw p-values do not depend on min_size")


def test_corrections_bonferroni_bh_and_none() -> None:
    from scipy.stats import false_discovery_control

    frame = pl.DataFrame(_frame(7, 800, planted=0.75))
    holm = cf.find_slices(frame, _test(), features=["region", "device"]).sort("slice")
    bonf = cf.find_slices(frame, _test(), features=["region", "device"], correction="bonferroni").sort("slice")
    bh = cf.find_slices(frame, _test(), features=["region", "device"], correction="bh").sort("slice")
    raw = cf.find_slices(frame, _test(), features=["region", "device"], correction="none").sort("slice")
    assert_close(raw["pvalue_adjusted"], raw["pvalue"], what="none")
    p = holm["pvalue"].to_numpy()
    assert_close(bonf["pvalue_adjusted"], np.minimum(1, p * len(p)), what="bonferroni")
    assert_close(bh["pvalue_adjusted"], false_discovery_control(p, method="bh"), what="bh")
    assert_close(holm["pvalue_adjusted"], _holm(p), what="holm")


# ---------------------------------------------------------------------------
# bins and nulls
# ---------------------------------------------------------------------------
def test_numeric_bins_with_ties_merge_edges() -> None:
    """Half the rows at 0: the quartile edges 0, 0, 1 merge into two edges, three bins."""
    rng = np.random.default_rng(8)
    x = np.concatenate([np.zeros(300), rng.integers(1, 4, 300)]).astype(float)
    edges = np.unique(np.quantile(x, [0.25, 0.5, 0.75]))
    data = {"y": rng.normal(size=600), "lo": np.full(600, -Z90), "hi": np.full(600, Z90), "x": x}
    out = cf.find_slices(pl.DataFrame(data), _test(), features=["x"], min_size=1)
    bins = out.filter(pl.col("order") == 1).sort("slice")
    expected = {f"< {edges[0]:.4g}", f">= {edges[-1]:.4g}"} | {
        f"[{a:.4g}, {b:.4g})" for a, b in itertools.pairwise(edges)
    }
    assert set(bins["x"]) == {e for e in expected if (x < edges[0]).any() or not e.startswith("<")}
    # each row in exactly one bin, a value on an edge in the bin above it
    assert bins["n"].sum() == 600
    upper = bins.filter(pl.col("x") == f">= {edges[-1]:.4g}")["n"].item()
    assert upper == int((x >= edges[-1]).sum())


def test_a_missing_category_is_its_own_slice() -> None:
    data = _frame(9, 1200, nulls=True)
    out = cf.find_slices(pl.DataFrame(data), _test(), features=["region", "device"], min_size=1)
    missing = out.filter(pl.col("slice") == "region is null")
    assert missing.height == 1
    assert missing["region"].item() == "null"
    assert missing["n"].item() == sum(v is None for v in data["region"])
    assert out.filter(pl.col("order") == 1)["n"].sum() == 2 * 1200  # two features, every row in one slice of each


def test_one_bin_is_the_rows_with_a_value() -> None:
    data = _frame(14, 300)
    data["age"][:5] = np.nan
    frame = pl.DataFrame(data).with_columns(pl.col("age").fill_nan(None))
    out = cf.find_slices(frame, _test(), features=["age"], n_bins=1, min_size=1)
    assert sorted(out["slice"]) == ["(all rows)", "age is not null", "age is null"]
    assert out.filter(pl.col("slice") == "age is not null")["n"].item() == 295


# ---------------------------------------------------------------------------
# other tests, every backend
# ---------------------------------------------------------------------------
def test_spiegelhalter_slices_match_numpy() -> None:
    rng = np.random.default_rng(10)
    n = 1500
    group = rng.choice(["a", "b", "c"], n)
    score = rng.uniform(0.05, 0.95, n)
    truth = np.where(group == "a", 0.5 + (score - 0.5) * 0.3, score)  # group a over-confident
    label = (rng.uniform(size=n) < truth).astype(int)
    out = cf.find_slices(
        pl.DataFrame({"y": label, "s": score, "g": group}), cf.spiegelhalter_test("y", "s"), features=["g"]
    )
    assert out.row(0, named=True)["slice"] == "g=a"
    assert not out.filter(pl.col("slice").is_in(["g=b", "g=c"]))["explained_by_parent"].any()  # not significant
    for row in out.iter_rows(named=True):
        mask = np.ones(n, bool) if row["order"] == 0 else group == row["g"]
        s, y = score[mask], label[mask]
        z = np.sum((y - s) * (1 - 2 * s)) / np.sqrt(np.sum((1 - 2 * s) ** 2 * s * (1 - s)))
        assert_close([row["spiegelhalter_test"], row["effect"]], [z, z], rtol=1e-9)
        assert_close([row["pvalue"]], [2 * norm.sf(abs(z))], rtol=1e-9)


def test_set_coverage_slices_match_numpy() -> None:
    """coverage_test with prediction sets: a list column, one class under-covered."""
    rng = np.random.default_rng(15)
    n = 1200
    label = rng.integers(0, 3, n)
    hit = rng.uniform(size=n) < np.where(label == 2, 0.7, 0.9)
    sets = [[int(c)] if h else [int((c + 1) % 3)] for c, h in zip(label, hit, strict=True)]
    source = rng.choice(["web", "app"], n)
    # the class as a string: an integer feature would be cut into quantile bins
    frame = pl.DataFrame({"label": label, "sets": sets, "cls": label.astype(str), "source": source})
    metric = cf.coverage_test("label", sets="sets", confidence_level=0.9)
    out = cf.find_slices(frame, metric, features=["cls", "source"])
    assert out.row(0, named=True)["slice"] == "cls=2"
    for row in out.iter_rows(named=True):
        mask = np.ones(n, bool)
        for f, values in (("cls", label.astype(str)), ("source", source)):
            if row[f] is not None:
                mask &= values == row[f]
        k, m = int(hit[mask].sum()), int(mask.sum())
        assert row["n"] == m
        assert_close([row["coverage_test"], row["pvalue"]], [k / m, binom.cdf(k, m, 0.9)], rtol=1e-9)


def test_weighted_slices_are_the_weighted_test_on_their_rows() -> None:
    """With weights=, each slice's numbers are coverage_test's on the slice's rows (weighted, Kish's n)."""
    data = _frame(16, 900, planted=0.7)
    data["w"] = np.random.default_rng(16).uniform(0.5, 2.0, 900)
    frame = pl.DataFrame(data)
    metric = cf.coverage_test("y", "lo", "hi", confidence_level=0.9, weights="w")
    out = cf.find_slices(frame, metric, features=["region", "device"], min_size=1)
    for row in out.iter_rows(named=True):
        rows = frame
        for f in ("region", "device"):
            if row[f] is not None:
                rows = rows.filter(pl.col(f) == row[f])
        alone = cf.evaluate(rows.with_columns(k=pl.lit(0)), metric, by="k").row(0, named=True)
        assert_close([row["coverage_test"], row["pvalue"]], [alone["coverage_test"], alone["coverage_test_pvalue"]])
    assert out.row(0, named=True)["slice"].startswith("region=EU")


def test_every_backend_gives_the_same_table(constructor: Any) -> None:
    data = _frame(11, 600, planted=0.7, nulls=True)
    metrics = [_test(), cf.kupiec_test("y", "lo", "hi", confidence_level=0.9)]
    if constructor.id == "pyspark":  # Spark: coverage_test only (its summarize-then-finalize path)
        metrics = metrics[:1]
    expected = [cf.find_slices(pl.DataFrame(data), m, features=["region", "age"]) for m in metrics]
    for m, want in zip(metrics, expected, strict=True):
        result = cf.find_slices(constructor(data), m, features=["region", "age"])
        native = nw.from_native(result)
        assert isinstance(native, nw.LazyFrame) == constructor.lazy
        got = to_pandas(result)
        want_pd = want.to_pandas()
        assert list(got.columns) == list(want_pd.columns)
        assert list(got["slice"]) == list(want_pd["slice"])
        for c in ("n", m.output_name, "pvalue", "pvalue_adjusted", "effect"):
            assert_close(got[c], want_pd[c], what=c)
        assert list(got["explained_by_parent"]) == list(want_pd["explained_by_parent"])


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
def test_bad_input_is_named() -> None:
    frame = pl.DataFrame(_frame(12, 50))
    with pytest.raises(ColumnNotFoundError, match=r"feature 'regoin' \(features=\) not found.*did you mean 'region'"):
        cf.find_slices(frame, _test(), features=["regoin"])
    with pytest.raises(TypeError, match=r"needs a test metric.*coverage \(Coverage\) is a score"):
        cf.find_slices(frame, cf.coverage("y", "lo", "hi"), features=["region"])
    with pytest.raises(TypeError, match="metric must be a metric object"):
        cf.find_slices(frame, "coverage_test", features=["region"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="confidence_level must be a number here"):
        cf.find_slices(frame.with_columns(level=0.9), _test("level"), features=["region"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="correction must be one of"):
        cf.find_slices(frame, _test(), features=["region"], correction="fdr")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="feature 'n' .* has the name of a column of find_slices' result"):
        cf.find_slices(frame.with_columns(n=pl.lit("a")), _test(), features=["n"])
    with pytest.raises(ValueError, match="max_order must be a positive integer"):
        cf.find_slices(frame, _test(), features=["region"], max_order=0)
    with pytest.raises(TypeError, match="features must be a list of distinct column names"):
        cf.find_slices(frame, _test(), features="region")


def test_invalid_rows_follow_evaluates_policy() -> None:
    from conformal_frames.errors import InvalidRowsError

    data = _frame(17, 200)
    data["y"][:3] = np.nan
    frame = pl.DataFrame(data).with_columns(pl.col("y").fill_nan(None))
    with pytest.raises(InvalidRowsError, match="column 'y' has missing .* in 3 rows"):
        cf.find_slices(frame, _test(), features=["region"], min_size=1)
    dropped = cf.find_slices(frame, _test(), features=["region"], min_size=1, invalid="drop")
    assert dropped.filter(pl.col("order") == 0)["n"].item() == 197
    nulled = cf.find_slices(frame.lazy(), _test(), features=["region"], min_size=1).collect()
    bad_regions = np.asarray(data["region"], dtype=object)[:3]
    spoiled = {f"region={r}": int((bad_regions == r).sum()) for r in bad_regions} | {"(all rows)": 3}
    # every slice is listed: the spoiled ones after the ranked ones, untested, with their invalid rows
    assert set(nulled["slice"]) == set(dropped["slice"])
    tested = nulled.filter(pl.col("rank").is_not_null())
    assert set(tested["slice"]) == set(dropped["slice"]) - set(spoiled)
    assert tested["rank"].to_list() == list(range(1, len(tested) + 1)) and (tested["n_invalid"] == 0).all()
    untested = nulled.filter(pl.col("rank").is_null())
    assert nulled["slice"].to_list()[len(tested) :] == untested["slice"].to_list()
    assert dict(zip(untested["slice"], untested["n_invalid"], strict=True)) == spoiled
    for c in ("coverage_test", "pvalue", "pvalue_adjusted", "significant", "effect", "explained_by_parent"):
        assert untested[c].null_count() == len(untested), c
    assert (dropped["n_invalid"] == 0).all()


def test_untested_slices_on_pandas_and_duckdb() -> None:
    import duckdb
    import pandas as pd

    data = _frame(18, 200)
    data["y"][:2] = np.nan
    df = pd.DataFrame(data)
    expected = cf.find_slices(pl.DataFrame(data).with_columns(pl.col("y").fill_nan(None)).lazy(), _test(),
                              features=["region"], min_size=1).collect()  # fmt: skip
    eager = cf.find_slices(df, _test(), features=["region"], min_size=1, invalid="null")
    assert eager["rank"].dtype == "Int64" and eager["significant"].dtype == "boolean"  # no null turned into False
    lazy = to_pandas(cf.find_slices(duckdb.from_df(df), _test(), features=["region"], min_size=1))
    for got in (eager, lazy):
        assert got["slice"].tolist() == expected["slice"].to_list()
        assert got["n_invalid"].tolist() == expected["n_invalid"].to_list()
        assert got["rank"].isna().tolist() == expected["rank"].is_null().to_list()
        assert got["significant"].isna().tolist() == expected["significant"].is_null().to_list()


def test_the_callers_frame_is_unchanged() -> None:
    import pandas as pd

    df = pd.DataFrame(_frame(13, 200))
    before = df.copy()
    cf.find_slices(df, _test(), features=["region", "age"])
    pd.testing.assert_frame_equal(df, before)
