"""Bootstrap intervals, paired comparisons and the Diebold-Mariano test.

Oracles: a numpy re-implementation of the replicate counts (same arithmetic,
written independently of the narwhals code), the weighted metric recomputed
in numpy under those counts, numpy's percentile, and a textbook numpy
Diebold-Mariano statistic.
"""

from __future__ import annotations

import math
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import conformal_frames as cf
from conformal_frames.engine import Query
from conformal_frames.engine.plan import _rows_frame
from conformal_frames.numerics.resample import (
    poisson_counts,
    poisson_thresholds,
    replicate_constants,
    replicate_hash_rows,
    replicate_terms,
    replicate_weight_rows,
)
from helpers import assert_close, to_pandas

SPARK_ONCE = "covered by the [pyspark] case of the grouped test"


def _not_spark(constructor: Any) -> None:
    if getattr(constructor, "module", "") == "pyspark":
        pytest.skip(SPARK_ONCE)


# ---------------------------------------------------------------------------
# numpy twin of the replicate counts (conformal_frames.numerics.resample)
# ---------------------------------------------------------------------------
P = 2147483647.0
A, A2 = 48271.0, 69621.0
M = [65537.0, 65539.0, 65543.0, 65551.0, 65557.0, 65563.0, 65579.0, 65581.0]


def _mod(x: np.ndarray) -> np.ndarray:
    return x - np.floor(x / P) * P


def _square(h: np.ndarray) -> np.ndarray:
    a = np.floor(h / 65536.0)
    b = h - a * 65536.0
    return _mod(2.0 * a * a + 131072.0 * a * b + b * b)


def _rotate(h: np.ndarray) -> np.ndarray:
    hi = np.floor(h / 65536.0)
    return _mod((h - hi * 65536.0) * 32768.0 + hi)


def _chunks(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.clip(np.abs(v), 2.0**-160, 2.0**160 * (1 - 2.0**-53))
    below = sum((a < 2.0 ** (32 * (t + 1))).astype(int) for t in range(-5, 0))
    above = sum((a >= 2.0 ** (32 * t)).astype(int) for t in range(1, 5))
    w = np.ldexp(a, 32 * (below - above))  # exact power-of-two scaling
    ip = np.floor(w)
    e = np.where(v == 0, 0.0, ip * 128.0 + (below + 6 * above) * 2.0 + (v < 0))
    f = np.where(v == 0, 0.0, (w - ip) * 2.0**52)
    return e, f


def _splitmix(x: int) -> int:
    m = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


def _duplicate_index(*columns: np.ndarray) -> np.ndarray:
    seen: dict[tuple[Any, ...], int] = {}
    out = []
    for row in zip(*columns):
        seen[row] = seen.get(row, 0) + 1
        out.append(seen[row])
    return np.array(out, dtype=float)


def twin_counts(values: list[np.ndarray], seed: int, n_resamples: int, index: np.ndarray | None) -> np.ndarray:
    """Replicate counts, shape (n_resamples, n): the documented algorithm in numpy."""
    total = np.zeros(len(values[0]))
    for v, m in zip(values, M):
        v = np.where(np.isfinite(v), v, 0.0)
        e, f = _chunks(v)
        total = total + _mod((_mod(_mod(e) * A + _mod(f)) + 1.0) * m)
    h = _mod(total)
    if index is not None:
        h = _mod(h * A + index)
    for c in (1013904223.0, 1664525.0):
        h = _rotate(_square(_mod(h * A2 + c)))
    base = _splitmix(seed & ((1 << 64) - 1))
    thresholds = stats.poisson.cdf(np.arange(12), 1.0) * P - 0.5
    out = []
    for b in range(n_resamples):
        k = float(_splitmix(base ^ (b * 0xD1B54A32D192ED03 & ((1 << 64) - 1))) % 2147483647)
        hb = _square(_mod(h + k))
        out.append((hb[:, None] > thresholds[None, :]).sum(axis=1).astype(float))
    return np.stack(out)


def _engine_counts(native: Any, columns: list[str], keys: list[str], **kw: Any) -> pd.DataFrame:
    """The engine's rows frame: group keys, hashed columns and the counts."""
    lf = nw.from_native(native).lazy()
    q = Query(schema=lf.collect_schema(), keys=keys)
    rows = replicate_weight_rows(q, columns, **kw)
    frame = _rows_frame(lf, q)
    hashed = [q.rows[("boot_value", c)].name for c in ([kw["block"]] if kw.get("block") else columns)]
    out = to_pandas(frame.select(*q.group, *hashed, *rows))
    out.columns = [
        *keys,
        *[f"v{i}" for i in range(len(hashed))],
        *[f"c{b}" for b in range(len(rows))],
    ]
    return out


def _awkward_values(n: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n) * 10.0 ** rng.integers(-60, 60, n)
    x[:10] = 0.0
    x[10] = -0.0
    x[11:21] = x[21:31]  # duplicated rows
    x[31], x[32], x[33], x[34] = 1e-300, -1e300, 5e-324, 2.0**53 + 2
    y = rng.integers(0, 2, n).astype(float)
    y[11:21] = y[21:31]
    g = rng.integers(0, 3, n)
    return {"x": x, "y": y, "g": g}


def test_counts_match_the_numpy_twin_bit_for_bit(constructor):
    data = _awkward_values(600, 3)
    out = _engine_counts(constructor(data), ["x", "y"], ["g"], seed=7, n_resamples=4)
    x, y, g = data["x"], data["y"], data["g"]
    x0 = np.where(x == 0.0, 0.0, x)
    expected = twin_counts([x0, y], 7, 4, _duplicate_index(g, x0, y))
    # duplicated rows may receive their numbers in any order: compare per distinct row
    exp = pd.DataFrame({"g": g, "v0": x0, "v1": y, **{f"c{b}": expected[b] for b in range(4)}})
    key = ["g", "v0", "v1"]
    got = out.sort_values(key + [f"c{b}" for b in range(4)]).reset_index(drop=True)
    exp = exp.sort_values(key + [f"c{b}" for b in range(4)]).reset_index(drop=True)
    assert (got["v0"].to_numpy() == exp["v0"].to_numpy()).all()
    for b in range(4):
        counts = got.groupby(key)[f"c{b}"].apply(sorted).to_list()
        assert counts == exp.groupby(key)[f"c{b}"].apply(sorted).to_list()


def test_numpy_counts_match_the_expression_counts_bit_for_bit():
    # the polars bootstrap computes the counts in numpy (a table of cells of h): the same numbers
    data = _awkward_values(2000, 5)
    lf = nw.from_native(pd.DataFrame(data)).lazy()
    q = Query(schema=lf.collect_schema(), keys=[])
    hashed = replicate_hash_rows(q, ["x", "y"])
    rows = replicate_weight_rows(q, ["x", "y"], seed=11, n_resamples=6)
    out = to_pandas(_rows_frame(lf, q).select(*hashed, *rows))
    values = [out[c].to_numpy() for c in hashed]
    for b, k in enumerate(replicate_constants(11, 6)):
        np.testing.assert_array_equal(poisson_counts(values, replicate_terms(k)), out[rows[b]].to_numpy())


def test_numpy_counts_at_the_thresholds():
    # h on both sides of every threshold (the cells a threshold falls into are searched)
    thresholds = np.array(poisson_thresholds())
    h = np.unique(np.concatenate([np.floor(thresholds) + d for d in range(-2, 3)] + [[0.0, P - 1.0]]))
    h = h[(h >= 0) & (h < P)]
    zeros = np.zeros_like(h)
    got = poisson_counts([h, zeros, zeros], (0.0, 0.0, 0.0))
    np.testing.assert_array_equal(got, (h[:, None] > thresholds[None, :]).sum(axis=1))


def test_counts_are_poisson_and_independent():
    n, b = 40000, 24
    # equally spaced scores, rounded (many duplicates), and labels: the hardest inputs for a weak hash
    s = np.round(np.arange(n) / n, 3)
    y = (np.arange(n) % 2).astype(float)
    out = _engine_counts(pd.DataFrame({"s": s, "y": y}), ["s", "y"], [], seed=0, n_resamples=b)
    counts = out[[f"c{i}" for i in range(b)]].to_numpy().T
    observed = np.bincount(counts.ravel().astype(int), minlength=13)
    probs = stats.poisson.pmf(np.arange(6), 1.0)
    binned = np.append(observed[:6], observed[6:].sum())
    expected = np.append(probs, 1 - probs.sum()) * counts.size
    assert stats.chisquare(binned, expected).pvalue > 1e-4
    corr = np.corrcoef(counts)
    assert np.abs(corr - np.eye(b)).max() < 6 / math.sqrt(n)  # between replicates
    order = np.lexsort((y, s))
    by_row = counts[:, order]
    assert abs(np.corrcoef(by_row[:, 1:].ravel(), by_row[:, :-1].ravel())[0, 1]) < 6 / math.sqrt(n * b)
    # the totals of a replicate vary like a sum of n independent Poisson(1)
    assert 0.5 < counts.sum(axis=1).var(ddof=1) / n < 1.7


def test_counts_depend_on_the_seed_and_blocks_share_them():
    rng = np.random.default_rng(0)
    n = 3000
    df = pd.DataFrame({"x": rng.normal(size=n), "day": rng.choice(["mon", "tue", "wed", "thu"], n)})
    a = _engine_counts(df, ["x"], [], seed=1, n_resamples=3)
    b = _engine_counts(df, ["x"], [], seed=2, n_resamples=3)
    assert (a["c0"] != b["c0"]).mean() > 0.4
    again = _engine_counts(df, ["x"], [], seed=1, n_resamples=3)
    pd.testing.assert_frame_equal(a, again)
    blocked = _engine_counts(df, ["x"], [], seed=1, n_resamples=50, block="day")
    blocked["day"] = df["day"]
    per_block = blocked.groupby("day")[[f"c{i}" for i in range(50)]].nunique()
    assert (per_block == 1).all().all()  # one count per block and replicate
    first = blocked.groupby("day")[[f"c{i}" for i in range(50)]].first().to_numpy()
    assert len({tuple(r) for r in first}) == 4  # the blocks differ


# ---------------------------------------------------------------------------
# Diebold-Mariano
# ---------------------------------------------------------------------------
def dm_numpy(y: np.ndarray, f1: np.ndarray, f2: np.ndarray, h: int, loss: str = "squared") -> tuple[float, float]:
    """Textbook DM (Diebold and Mariano 1995): uniform weights up to lag h - 1, normal p-value."""
    if loss == "squared":
        d = (y - f1) ** 2 - (y - f2) ** 2
    elif loss == "absolute":
        d = np.abs(y - f1) - np.abs(y - f2)
    else:
        d = -(y * np.log(f1) + (1 - y) * np.log(1 - f1)) + (y * np.log(f2) + (1 - y) * np.log(1 - f2))
    n = len(d)
    dc = d - d.mean()
    gamma = [np.sum(dc[k:] * dc[: n - k]) / n for k in range(h)]
    v = gamma[0] + 2 * sum(gamma[1:])
    if v <= 0:
        v = gamma[0]
    stat = d.mean() / math.sqrt(v / n)
    return stat, 2 * stats.norm.sf(abs(stat))


def _series(seed: int, n: int = 120, groups: int = 3) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    t = np.tile(np.arange(n), groups)
    g = np.repeat([f"s{i}" for i in range(groups)], n)
    e = rng.normal(size=n * groups)
    y = np.convolve(e, [1.0, 0.6, 0.3])[: n * groups]  # MA(2): serial dependence
    f1 = y + rng.normal(size=n * groups)
    f2 = y + 1.15 * rng.normal(size=n * groups) + 0.1
    perm = rng.permutation(n * groups)  # rows in no particular order
    return {"t": t[perm], "g": g[perm], "y": y[perm], "f1": f1[perm], "f2": f2[perm]}


def _oracle_by_group(data: dict[str, Any], h: int, loss: str = "squared") -> pd.DataFrame:
    df = pd.DataFrame(data).sort_values(["g", "t"])
    rows = []
    for g, part in df.groupby("g", sort=True):
        rows.append(
            (
                g,
                *dm_numpy(
                    part["y"].to_numpy(),
                    part["f1"].to_numpy(),
                    part["f2"].to_numpy(),
                    h,
                    loss,
                ),
            )
        )
    return pd.DataFrame(rows, columns=["g", "stat", "p"])


def test_diebold_mariano_matches_numpy_grouped(constructor):
    data = _series(0)
    test = cf.diebold_mariano_test("y", "f1", "f2", order_by="t", small_sample=None, horizon=3)
    out = to_pandas(cf.evaluate(constructor(data), test, by="g"))
    expected = _oracle_by_group(data, 3)
    assert out["g"].tolist() == expected["g"].tolist()
    assert_close(out["diebold_mariano_test"], expected["stat"], what="statistic")
    assert_close(out["diebold_mariano_test_pvalue"], expected["p"], rtol=1e-10, what="pvalue")
    assert out["n"].tolist() == [120, 120, 120]


@pytest.mark.parametrize("horizon", [1, 2, 5])
@pytest.mark.parametrize("loss", ["squared", "absolute", "log"])
def test_diebold_mariano_losses_and_horizons(constructor, horizon, loss):
    _not_spark(constructor)
    data = _series(horizon)
    if loss == "log":
        rng = np.random.default_rng(horizon)
        n = len(data["y"])
        data["y"] = (rng.random(n) < 0.4).astype(float)
        data["f1"] = np.clip(0.4 + 0.3 * (data["y"] - 0.4) + 0.2 * rng.random(n), 0.01, 0.99)
        data["f2"] = np.full(n, 0.4)
    test = cf.diebold_mariano_test("y", "f1", "f2", order_by="t", small_sample=None, loss=loss, horizon=horizon)
    out = to_pandas(cf.evaluate(constructor(data), test, by="g"))
    expected = _oracle_by_group(data, horizon, loss)
    assert_close(out["diebold_mariano_test"], expected["stat"], rtol=1e-10, what="statistic")
    assert_close(
        out["diebold_mariano_test_pvalue"],
        expected["p"],
        rtol=1e-9,
        atol=1e-15,
        what="pvalue",
    )


def test_diebold_mariano_direct_call_and_negative_variance(eager_constructor):
    # alternating differentials: gamma_1 < 0 makes V < 0 at horizon 2 -> gamma_0 is used
    t = np.arange(40)
    y = np.zeros(40)
    f1 = np.where(t % 2 == 0, 1.0, 0.2) + 0.01 * t
    f2 = np.full(40, 0.5)
    data = {"t": t[::-1], "y": y[::-1], "f1": f1[::-1], "f2": f2[::-1]}
    res = cf.conformal(eager_constructor(data)).diebold_mariano_test(
        "y", "f1", "f2", order_by="t", small_sample=None, horizon=2
    )
    assert isinstance(res, cf.DieboldMarianoTestResult)
    stat, p = res
    d = (y - f1) ** 2 - (y - f2) ** 2
    dc = d - d.mean()
    assert np.sum(dc[1:] * dc[:-1]) < 0 and dc @ dc + 2 * np.sum(dc[1:] * dc[:-1]) < 0
    assert_close([stat, p], dm_numpy(y, f1, f2, 2))
    assert_close([stat], [d.mean() / math.sqrt((dc @ dc / 40) / 40)])
    assert res.n == 40


def test_diebold_mariano_stays_lazy_and_checks_the_order(lazy_constructor):
    _not_spark(lazy_constructor)
    data = _series(1, n=30, groups=2)
    native = lazy_constructor(data)
    out = cf.evaluate(native, cf.diebold_mariano_test("y", "f1", "f2", order_by="t", small_sample=None), by="g")
    assert isinstance(nw.from_native(out), nw.LazyFrame)
    bad = dict(data)
    bad["t"] = np.where(bad["t"] == 3, 4, bad["t"])  # t = 4 twice in each group
    res = to_pandas(
        cf.evaluate(
            lazy_constructor(bad),
            cf.diebold_mariano_test("y", "f1", "f2", order_by="t", small_sample=None),
            by="g",
        )
    )
    assert res["diebold_mariano_test"].isna().all()
    assert res["n_invalid"].tolist() == [2, 2]


def test_diebold_mariano_bad_input(eager_constructor):
    data = _series(2, n=20, groups=1)
    bad = dict(data)
    bad["t"] = np.where(bad["t"] == 3, 4, bad["t"])
    with pytest.raises(
        ValueError,
        match=r"column 't' \(order_by=\) has repeated values within a group in 2 rows",
    ):
        cf.evaluate(
            eager_constructor(bad),
            cf.diebold_mariano_test("y", "f1", "f2", order_by="t", small_sample=None),
        )
    # the same time point in two groups is fine
    ok = {**data, "g": np.where(np.arange(20) % 2 == 0, "a", "b")}
    ok["t"] = np.arange(20) // 2
    out = to_pandas(
        cf.evaluate(
            eager_constructor(ok),
            cf.diebold_mariano_test("y", "f1", "f2", order_by="t", small_sample=None),
            by="g",
        )
    )
    assert out["n"].tolist() == [10, 10]
    with pytest.raises(ValueError, match="horizon"):
        cf.diebold_mariano_test("y", "f1", "f2", order_by="t", small_sample=None, horizon=0)
    with pytest.raises(ValueError, match="loss"):
        cf.diebold_mariano_test("y", "f1", "f2", order_by="t", small_sample=None, loss="hinge")
    with pytest.raises(TypeError, match="order_by"):
        cf.diebold_mariano_test("y", "f1", "f2", order_by=3)
    with pytest.raises(TypeError):
        cf.diebold_mariano_test("y", "f1", "f2")  # order_by is required


# ---------------------------------------------------------------------------
# bootstrap intervals: the weighted metric recomputed under the twin's counts
# ---------------------------------------------------------------------------
def oracle_counts(
    df: pd.DataFrame,
    columns: list[str],
    keys: list[str],
    seed: int,
    b: int,
    block: str | None = None,
):
    """The twin's counts for a pandas frame (hashed columns in sorted order, as the engine)."""
    if block is not None:
        v = df[block]
        values = [v.to_numpy(float) if v.dtype.kind in "biuf" else v.rank(method="dense").to_numpy(float)]
        return twin_counts(values, seed, b, None)
    values = [np.where(df[c].to_numpy(float) == 0, 0.0, df[c].to_numpy(float)) for c in sorted(columns)]
    index = _duplicate_index(*[df[k].to_numpy() for k in keys], *values)
    return twin_counts(values, seed, b, index)


def oracle_interval(replicates: np.ndarray, ci_level: float = 0.95) -> tuple[float, float]:
    kept = replicates[~np.isnan(replicates)]
    a = (1 - ci_level) / 2
    return tuple(np.percentile(kept, [100 * a, 100 * (1 - a)]))


def _coverage_data(seed: int, n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = np.round(rng.normal(size=n), 1)  # rounded: duplicated rows
    lo = np.round(y - 1.2 + rng.normal(scale=0.6, size=n), 1)
    g = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    w = rng.integers(1, 4, n).astype(float)
    return pd.DataFrame({"y": y, "lo": lo, "hi": lo + 2.0, "g": g, "w": w})


def coverage_oracle(df: pd.DataFrame, counts: np.ndarray, weights: np.ndarray | None = None) -> pd.DataFrame:
    covered = ((df["lo"] <= df["y"]) & (df["y"] <= df["hi"])).to_numpy(float)
    w = np.ones(len(df)) if weights is None else weights
    rows = []
    for g in sorted(df["g"].unique()):
        i = (df["g"] == g).to_numpy()
        point = np.sum(w[i] * covered[i]) / np.sum(w[i])
        cw = counts[:, i] * w[i]
        with np.errstate(invalid="ignore", divide="ignore"):
            reps = np.where(cw.sum(1) > 0, (cw * covered[i]).sum(1) / cw.sum(1), np.nan)
        rows.append((g, point, *oracle_interval(reps)))
    return pd.DataFrame(rows, columns=["g", "value", "low", "high"])


def test_bootstrap_matches_the_numpy_oracle_grouped(constructor):
    df = _coverage_data(0)
    metric = cf.bootstrap(cf.coverage("y", "lo", "hi"), n_resamples=40, seed=5)
    out = to_pandas(cf.evaluate(constructor(df.to_dict("list")), metric, by="g"))
    assert list(out.columns[:4]) == [
        "g",
        "coverage",
        "coverage_ci_low",
        "coverage_ci_high",
    ]
    expected = coverage_oracle(df, oracle_counts(df, ["y", "lo", "hi"], ["g"], 5, 40))
    assert out["g"].tolist() == expected["g"].tolist()
    assert_close(out["coverage"], expected["value"], what="coverage")
    assert_close(out["coverage_ci_low"], expected["low"], what="ci_low")
    assert_close(out["coverage_ci_high"], expected["high"], what="ci_high")
    assert (out["coverage_ci_low"] < out["coverage_ci_high"]).all()


@pytest.mark.parametrize("ci_level", [0.8, 0.95])
def test_bootstrap_with_weights_ungrouped(constructor, ci_level):
    _not_spark(constructor)
    df = _coverage_data(1, n=200).assign(g="all")
    metric = cf.bootstrap(
        cf.coverage("y", "lo", "hi", weights="w"),
        n_resamples=60,
        seed=2,
        ci_level=ci_level,
    )
    out = to_pandas(cf.evaluate(constructor(df.to_dict("list")), metric))
    counts = oracle_counts(df, ["y", "lo", "hi", "w"], [], 2, 60)
    covered = ((df["lo"] <= df["y"]) & (df["y"] <= df["hi"])).to_numpy(float)
    cw = counts * df["w"].to_numpy()
    low, high = oracle_interval((cw * covered).sum(1) / cw.sum(1), ci_level)
    assert_close(out[["coverage_ci_low", "coverage_ci_high"]].to_numpy()[0], [low, high])
    assert_close(out["coverage"], [np.average(covered, weights=df["w"])])


def test_bootstrap_difference_is_paired(constructor):
    _not_spark(constructor)
    rng = np.random.default_rng(4)
    n = 250
    y = rng.integers(0, 2, n).astype(float)
    pa = np.clip(0.5 + 0.35 * (y - 0.5) + rng.normal(scale=0.2, size=n), 0, 1)
    pb = np.clip(pa + rng.normal(scale=0.05, size=n), 0, 1)  # close to a: strongly paired
    df = pd.DataFrame({"y": y, "pa": pa, "pb": pb})
    diff = cf.bootstrap_difference(cf.brier("y", "pa"), cf.brier("y", "pb"), n_resamples=50, seed=3)
    out = to_pandas(cf.evaluate(constructor(df.to_dict("list")), diff))
    counts = oracle_counts(df, ["y", "pa", "pb"], [], 3, 50)
    ea, eb = (y - pa) ** 2, (y - pb) ** 2
    reps = (counts * ea).sum(1) / counts.sum(1) - (counts * eb).sum(1) / counts.sum(1)
    assert_close(out["brier_difference"], [ea.mean() - eb.mean()])
    assert_close(
        out[["brier_difference_ci_low", "brier_difference_ci_high"]].to_numpy()[0],
        oracle_interval(reps),
    )
    # paired: far narrower than the interval of either score alone
    single = to_pandas(
        cf.evaluate(
            constructor(df.to_dict("list")),
            cf.bootstrap(cf.brier("y", "pa"), n_resamples=50),
        )
    )
    width = out["brier_difference_ci_high"] - out["brier_difference_ci_low"]
    assert (width < 0.5 * (single["brier_ci_high"] - single["brier_ci_low"])).all()


def test_bootstrap_blocks(constructor):
    _not_spark(constructor)
    df = _coverage_data(2, n=240)
    df["day"] = np.repeat([f"d{i:02d}" for i in range(24)], 10)
    metric = cf.bootstrap(cf.coverage("y", "lo", "hi"), n_resamples=30, seed=9, block="day")
    out = to_pandas(cf.evaluate(constructor(df.to_dict("list")), metric, by="g"))
    expected = coverage_oracle(df, oracle_counts(df, [], ["g"], 9, 30, block="day"))
    assert_close(out["coverage_ci_low"], expected["low"])
    assert_close(out["coverage_ci_high"], expected["high"])


def test_bootstrap_is_deterministic_and_order_free(eager_constructor):
    df = _coverage_data(3)
    metric = cf.bootstrap(cf.coverage("y", "lo", "hi"), n_resamples=40, seed=11)
    first = to_pandas(cf.evaluate(eager_constructor(df.to_dict("list")), metric, by="g"))
    shuffled = df.sample(frac=1.0, random_state=1).reset_index(drop=True)
    again = to_pandas(cf.evaluate(eager_constructor(shuffled.to_dict("list")), metric, by="g"))
    assert_close(again.drop(columns="g").to_numpy(), first.drop(columns="g").to_numpy())
    other = to_pandas(
        cf.evaluate(
            eager_constructor(df.to_dict("list")),
            metric.__class__(**{**vars(metric), "seed": 12}),
            by="g",
        )
    )
    assert not np.allclose(other["coverage_ci_low"], first["coverage_ci_low"])


def test_bootstrap_width_shrinks_like_one_over_sqrt_n():
    # fixed seed, Brier score of a calibrated model at n and 4 n rows
    widths = []
    for n in (1500, 6000):
        rng = np.random.default_rng(n)
        p = rng.random(n)
        y = (rng.random(n) < p).astype(float)
        out = cf.evaluate(
            pd.DataFrame({"y": y, "p": p}),
            cf.bootstrap(cf.brier("y", "p"), n_resamples=400, seed=0),
        )
        widths.append(float(out["brier_ci_high"].iloc[0] - out["brier_ci_low"].iloc[0]))
    assert 1.7 < widths[0] / widths[1] < 2.3


def test_bootstrap_stays_lazy(lazy_constructor):
    _not_spark(lazy_constructor)
    df = _coverage_data(5, n=60)
    out = cf.evaluate(
        lazy_constructor(df.to_dict("list")),
        cf.bootstrap(cf.width("lo", "hi"), n_resamples=5),
        by="g",
    )
    assert isinstance(nw.from_native(out), nw.LazyFrame)
    assert to_pandas(out)["width_ci_low"].tolist() == [2.0, 2.0, 2.0]


def test_bootstrap_refuses_what_it_cannot_resample():
    df = _coverage_data(6, n=30)
    with pytest.raises(TypeError, match="score metrics; ks_test is a test"):
        cf.bootstrap(cf.ks_test("y", "lo"))
    with pytest.raises(TypeError, match="must be a score metric"):
        cf.bootstrap(cf.bootstrap(cf.width("lo", "hi")))
    with pytest.raises(TypeError, match="one score between two models"):
        cf.bootstrap_difference(cf.width("lo", "hi"), cf.coverage("y", "lo", "hi"))
    with pytest.raises(ValueError, match="n_resamples"):
        cf.bootstrap(cf.width("lo", "hi"), n_resamples=1)
    with pytest.raises(ValueError, match="ci_level"):
        cf.bootstrap(cf.width("lo", "hi"), ci_level=1.5)
    with pytest.raises(TypeError, match="seed"):
        cf.bootstrap(cf.width("lo", "hi"), seed=1.5)
    with pytest.raises(TypeError, match="score metrics; ssc is a table"):
        cf.bootstrap(cf.ssc("y", "lo", "hi"))
    with pytest.raises(ValueError, match="ssc_score needs a second aggregation level"):
        cf.evaluate(df, cf.bootstrap(cf.ssc_score("y", "lo", "hi")))
    with pytest.raises(TypeError, match="auarc has none"):
        cf.evaluate(df.assign(c=1, s=0.5), cf.bootstrap(cf.auarc("c", "s")))
    with pytest.raises(ValueError, match="'day' not found"):
        cf.evaluate(df, cf.bootstrap(cf.width("lo", "hi"), block="day"))


def test_bootstrap_invalid_rows(eager_constructor):
    df = _coverage_data(7, n=90)
    df.loc[3, "lo"] = np.nan
    metric = cf.bootstrap(cf.coverage("y", "lo", "hi"), n_resamples=20, seed=1)
    with pytest.raises(ValueError, match="column 'lo' has missing"):
        cf.evaluate(eager_constructor(df.to_dict("list")), metric)
    dropped = to_pandas(cf.evaluate(eager_constructor(df.to_dict("list")), metric, by="g", invalid="drop"))
    clean = df.drop(index=3).reset_index(drop=True)
    expected = coverage_oracle(clean, oracle_counts(clean, ["y", "lo", "hi"], ["g"], 1, 20))
    assert_close(dropped["coverage_ci_low"], expected["low"])
    assert dropped["n_dropped"].sum() == 1


def test_bootstrap_one_resampling_unit_has_no_interval(eager_constructor):
    # one row, or one block: every replicate repeats the point estimate, so a
    # percentile interval would be [value, value], a certainty the data cannot
    # give; the interval is null (the value stays)
    rng = np.random.default_rng(11)
    n = 40
    data = {
        "g": np.r_[np.zeros(n - 1, dtype=np.int64), [1]],
        "y": rng.normal(size=n),
        "lo": np.full(n, -1.0),
        "hi": np.full(n, 1.0),
        "one": np.full(n, 7, dtype=np.int64),
        "blk": np.arange(n) % 4,
    }
    frame = eager_constructor(data)
    cov = cf.coverage("y", "lo", "hi")
    rows = to_pandas(cf.evaluate(frame, cf.bootstrap(cov, n_resamples=50), by="g"))
    assert rows["coverage_ci_low"].isna().tolist() == [False, True]
    assert rows["coverage_ci_high"].isna().tolist() == [False, True]
    assert rows["coverage"].tolist()[1] == 1.0
    one = to_pandas(cf.evaluate(frame, cf.bootstrap(cov, n_resamples=50, block="one")))
    assert one[["coverage_ci_low", "coverage_ci_high"]].isna().all(axis=None)
    assert not one["coverage"].isna().any()
    diff = cf.bootstrap_difference(cov, cf.coverage("y", "lo", "lo"), n_resamples=50, block="one")
    cis = ["coverage_difference_ci_low", "coverage_difference_ci_high"]
    assert to_pandas(cf.evaluate(frame, diff))[cis].isna().all(axis=None)
    four = to_pandas(cf.evaluate(frame, cf.bootstrap(cov, n_resamples=50, block="blk")))
    assert four["coverage_ci_low"].iloc[0] < four["coverage_ci_high"].iloc[0]


def test_diebold_mariano_constant_differential_up_to_rounding_is_null(eager_constructor):
    # other = score + 0.1: d_t = (y - s)^2 - (y - s - 0.1)^2 = -0.03 - ... is constant,
    # but y - (y + 0.1) rounds differently per row, so d_t scatters by ~1e-16 and
    # gamma_0 ~ 1e-32 > 0: the statistic must be null (d constant), not ~1e15
    rng = np.random.default_rng(5)
    n = 50
    y = rng.normal(size=n) * 10.0
    data = {"t": np.arange(n), "y": y, "s": y + 0.1, "o": y + 0.2, "g": np.arange(n) % 2}
    d = (y - (y + 0.1)) ** 2 - (y - (y + 0.2)) ** 2
    assert 0.0 < d.std() < 1e-14 * abs(d.mean())
    for loss in ("squared", "absolute"):
        test = cf.diebold_mariano_test("y", "s", "o", order_by="t", small_sample=None, loss=loss)
        out = to_pandas(cf.evaluate(eager_constructor(data), test, by="g"))
        assert out["diebold_mariano_test"].isna().all(), loss
        assert out["diebold_mariano_test_pvalue"].isna().all(), loss
