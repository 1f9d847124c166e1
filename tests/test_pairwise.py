"""Comparisons on common forecasts: relative_skill(compare=), pairwise_comparison; numpy oracles of scoringutils."""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy.stats import wilcoxon

import conformal_frames as cf
from conformal_frames.errors import BackendLimitError
from conformal_frames.numerics.paired import holm, permutation_pvalue
from helpers import assert_close, to_pandas

MODELS = ["a", "b", "c", "base"]


def long_data(seed: int, *, missing: bool = True) -> dict[str, Any]:
    """Two horizons, forecasts ``id`` per horizon; some models miss some forecasts (one only makes one)."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list[Any]] = {"h": [], "id": [], "m": [], "y": [], "f": []}
    for h in (1, 2):
        y = np.round(rng.normal(size=8), 1)
        for k, m in enumerate(MODELS):
            for i, v in enumerate(y):
                if missing and ((m == "b" and i % 3 == 0) or (m == "c" and h == 2 and i > 0)):
                    continue
                rows["h"].append(h)
                rows["id"].append(i)
                rows["m"].append(m)
                rows["y"].append(float(v))
                rows["f"].append(float(np.round(v + rng.normal() * (k + 1), 1)))
    return rows


def oracle(data: dict[str, Any], baseline: str | None = None) -> dict[tuple[Any, ...], dict[str, Any]]:
    """scoringutils' pairwise comparison from its definition, per (h, model, other); the forecast score |y - f|."""
    score: dict[tuple[Any, Any, Any], float] = {}
    for h, i, m, y, f in zip(data["h"], data["id"], data["m"], data["y"], data["f"]):
        score[(h, m, i)] = abs(y - f)
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for h in sorted(set(data["h"])):
        models = sorted({m for (g, m, _) in score if g == h})
        ids = {m: {i for (g, mm, i) in score if g == h and mm == m} for m in models}
        ratio: dict[tuple[str, str], float] = {}
        for m, o in itertools.permutations(models, 2):
            both = sorted(ids[m] & ids[o])
            x = np.array([score[(h, m, i)] for i in both])
            z = np.array([score[(h, o, i)] for i in both])
            if both:
                ratio[(m, o)] = x.sum() / z.sum() if x.sum() > 0 and z.sum() > 0 else np.nan
            out[(h, m, o)] = {"ratio": ratio.get((m, o), np.nan), "n": len(both), "x": x, "z": z}
        theta = {}
        for m in models:
            against = [o for o in models if o != baseline and (o == m or (m, o) in ratio)]
            theta[m] = np.exp(np.mean([0.0 if o == m else np.log(ratio[(m, o)]) for o in against]))
        if any(np.isnan(r) for r in ratio.values()):  # a mean score of 0: no ratio, no relative skill
            theta = dict.fromkeys(theta, np.nan)
        for m in models:
            out[(h, m, m)] = {"ratio": 1.0, "n": len(ids[m]), "x": None, "z": None}
            for o in models:
                out[(h, m, o)]["theta"] = theta[m]
                out[(h, m, o)]["scaled"] = theta[m] / theta[baseline] if baseline in theta else np.nan
            dropped = [i for i in ids[m] if any(i not in ids[o] for o in models if o != m)]
            out[(h, m, m)]["n_dropped"] = len(dropped)
    return out


def _rows(out: Any) -> list[dict[str, Any]]:
    return to_pandas(out).to_dict("records")


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("baseline", [None, "base"])
def test_relative_skill_common_matches_the_oracle(constructor: Any, seed: int, baseline: str | None) -> None:
    data = long_data(seed)
    expected = oracle(data, baseline)
    out = cf.relative_skill(constructor(data), cf.mae("y", "f"), model="m", baseline=baseline, by="h")
    rows = _rows(out)
    assert [(r["h"], r["m"]) for r in rows] == sorted({(h, m) for h, m in zip(data["h"], data["m"])})
    for r in rows:
        e = expected[(r["h"], r["m"], r["m"])]
        assert_close(r["relative_skill"], e["theta"], what=f"theta {r['h']} {r['m']}")
        assert r["n_dropped"] == e["n_dropped"]
        if baseline is not None:
            assert_close(r["scaled_relative_skill"], e["scaled"], what="scaled")
    # the mean score and n stay those of all the model's rows
    c2 = next(r for r in rows if r["h"] == 2 and r["m"] == "c")
    assert c2["n"] == 1 and c2["n_dropped"] == 1  # b did not make forecast 0


def test_relative_skill_review_example() -> None:
    long = pl.DataFrame({"id": [1, 2, 1, 2, 1], "model": list("aabbc"), "y": [0.0] * 5, "f": [1.0, 3, 2, 2, 1]})
    common = cf.relative_skill(long, cf.mae("y", "f"), model="model")
    assert_close(common["relative_skill"], [1.0, 2 ** (1 / 3), 0.5 ** (1 / 3)])
    with pytest.warns(UserWarning, match=r"forecast sets differ \(2 forecasts of a, b .*\[.id.\]"):
        old = cf.relative_skill(long, cf.mae("y", "f"), model="model", compare="all")
    assert_close(old["relative_skill"], [2 / 4 ** (1 / 3), 2 / 4 ** (1 / 3), 1 / 4 ** (1 / 3)])
    assert "n_dropped" not in old.columns


@pytest.mark.parametrize("seed", [3, 4])
def test_common_equals_all_on_the_same_forecasts(seed: int) -> None:
    df = pl.DataFrame(long_data(seed, missing=False))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the sets are the same
        old = cf.relative_skill(df, cf.mae("y", "f"), model="m", baseline="base", by="h", compare="all")
    new = cf.relative_skill(df, cf.mae("y", "f"), model="m", baseline="base", by="h")
    for c in ("relative_skill", "scaled_relative_skill", "mae", "n"):
        assert_close(new[c], old[c], what=c)
    assert new["n_dropped"].to_list() == [0] * len(new)


def test_forecast_unit_of_several_rows() -> None:
    # two rows per forecast (k): the forecast's score is the metric on its rows; pairs by id alone
    df = pl.DataFrame(
        {
            "id": [1, 1, 2, 2, 1, 1],
            "k": [0, 1, 0, 1, 0, 1],
            "m": ["a", "a", "a", "a", "b", "b"],
            "y": [0.0] * 6,
            "f": [1.0, 3.0, 5.0, 5.0, 4.0, 4.0],
        }
    )
    out = cf.relative_skill(df, cf.mae("y", "f"), model="m", forecast_unit="id")
    theta_a = np.sqrt(2.0 / 4.0)  # a vs b on forecast 1: mean(1, 3) / mean(4, 4)
    assert_close(out["relative_skill"], [theta_a, 1 / theta_a])
    assert out["n_dropped"].to_list() == [1, 0]
    pair = cf.pairwise_comparison(df, cf.mae("y", "f"), model="m", forecast_unit="id", test=None)
    assert pair.filter(pl.col("m") == "a", pl.col("compare_against") == "b")["n"].item() == 1
    with pytest.raises(ValueError, match="needs the columns that identify a forecast"):
        cf.relative_skill(df.drop("id", "k"), cf.mae("y", "f"), model="m")
    with pytest.raises(ValueError, match="forecast_unit= names"):
        cf.relative_skill(df, cf.mae("y", "f"), model="m", forecast_unit="m")
    with pytest.raises(cf.ColumnNotFoundError):
        cf.relative_skill(df, cf.mae("y", "f"), model="m", forecast_unit="nope")
    with pytest.raises(ValueError, match="compare"):
        cf.relative_skill(df, cf.mae("y", "f"), model="m", compare="some")  # type: ignore[arg-type]


def _check_table(rows: list[dict[str, Any]], expected: dict[tuple[Any, ...], dict[str, Any]], baseline: Any) -> None:
    assert len(rows) == len(expected)
    for r in rows:
        e = expected[(r["h"], r["m"], r["compare_against"])]
        assert_close(r["mean_scores_ratio"], e["ratio"], what="ratio")
        assert r["n"] == e["n"]
        assert_close(r["relative_skill"], e["theta"], what="theta")
        if baseline is not None:
            assert_close(r["scaled_relative_skill"], e["scaled"], what="scaled")


@pytest.mark.parametrize("baseline", [None, "base"])
def test_pairwise_ratios_on_every_backend(constructor: Any, baseline: str | None) -> None:
    data = long_data(5)
    out = cf.pairwise_comparison(constructor(data), cf.mae("y", "f"), model="m", by="h", baseline=baseline, test=None)
    _check_table(_rows(out), oracle(data, baseline), baseline)


def test_pairwise_wilcoxon_and_holm(eager_constructor: Any) -> None:
    data = long_data(6)
    expected = oracle(data)
    out = cf.pairwise_comparison(eager_constructor(data), cf.mae("y", "f"), model="m", by="h", test="wilcoxon")
    rows = _rows(out)
    _check_table(rows, expected, None)
    for h in (1, 2):
        pairs = [(m, o) for m, o in itertools.combinations(sorted(MODELS), 2) if expected[(h, m, o)]["n"]]
        raw = np.array([wilcoxon(expected[(h, m, o)]["x"] - expected[(h, m, o)]["z"]).pvalue for m, o in pairs])
        # Holm from its definition: the largest of min(1, (m - j + 1) p_(j)) over the p-values not above
        order = np.argsort(raw)
        stepped = np.minimum(1.0, (len(raw) - np.arange(len(raw))) * raw[order])
        adjusted = np.empty_like(raw)
        adjusted[order] = np.maximum.accumulate(stepped)
        for (m, o), p, adj in zip(pairs, raw, adjusted):
            for a, b in ((m, o), (o, m)):
                r = next(r for r in rows if (r["h"], r["m"], r["compare_against"]) == (h, a, b))
                assert_close([r["pvalue"], r["adjusted_pvalue"]], [p, adj], what=f"{h} {a} {b}")
    own = [r for r in rows if r["m"] == r["compare_against"]]
    assert all(r["pvalue"] == 1.0 and r["adjusted_pvalue"] == 1.0 for r in own)


def test_holm_matches_r_p_adjust() -> None:
    # R: p.adjust(c(0.01, 0.02, 0.03, 0.04, 0.05), "holm") = 0.05 0.08 0.09 0.09 0.09
    assert_close(holm(np.array([0.03, 0.01, 0.05, 0.02, 0.04])), [0.09, 0.05, 0.09, 0.08, 0.09])
    assert_close(holm(np.array([0.5, np.nan, 0.01])), [0.5, np.nan, 0.02])


@pytest.mark.parametrize("seed", [0, 1])
def test_permutation_pvalue_approaches_the_exact_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.gamma(2.0, size=10), rng.gamma(2.5, size=10)
    d = x - y
    signs = np.array(list(itertools.product([1.0, -1.0], repeat=10)))
    exact = np.mean(np.abs(signs @ d) >= abs(d.sum()) * (1 - 1e-12))  # every sign flip, equally likely
    p = permutation_pvalue(x, y, n_permutations=40_000, rng=np.random.default_rng(seed))
    assert abs(p - exact) < 4 * np.sqrt(exact * (1 - exact) / 40_000) + 1e-4
    assert permutation_pvalue(x, x, n_permutations=99, rng=np.random.default_rng(0)) == 1.0


def test_pairwise_permutation_is_seeded_and_the_same_on_every_backend(constructor: Any) -> None:
    data = long_data(7)
    frame = constructor(data)
    call = {"model": "m", "by": "h", "n_permutations": 199}
    if constructor.lazy and constructor.id != "polars[lazy]":
        with pytest.raises(BackendLimitError, match="test=None"):
            cf.pairwise_comparison(frame, cf.mae("y", "f"), **call)
        return
    out = to_pandas(cf.pairwise_comparison(frame, cf.mae("y", "f"), seed=3, **call))
    reference = to_pandas(cf.pairwise_comparison(pl.DataFrame(data), cf.mae("y", "f"), seed=3, **call))
    assert_close(out["pvalue"], reference["pvalue"], rtol=0.0)
    assert_close(out["adjusted_pvalue"], reference["adjusted_pvalue"], rtol=0.0)
    other = to_pandas(cf.pairwise_comparison(pl.DataFrame(data), cf.mae("y", "f"), seed=4, **call))
    assert not np.allclose(other["pvalue"], out["pvalue"])
    # mirrored pairs share their p-value; p-values are multiples of 1 / (n_permutations + 1)
    p = {(r.h, r.m, r.compare_against): r.pvalue for r in out.itertuples()}
    assert all(p[(h, m, o)] == p[(h, o, m)] for (h, m, o) in p if not np.isnan(p[(h, m, o)]))
    valid = out["pvalue"].dropna().to_numpy()
    assert np.allclose(valid * 200, np.round(valid * 200))


def test_long_quantile_form_pairs_forecasts_not_rows() -> None:
    # one row per forecast and level: the level column is an input of the metric, so a forecast is its id
    rng = np.random.default_rng(1)
    rows = []
    for m, spread in (("a", 1.0), ("b", 1.5), ("c", 2.0)):
        for i in range(6 if m != "c" else 3):
            rows += [
                {"m": m, "id": i, "y": float(i), "level": lv, "q": i + spread * (2 * lv - 1) + rng.normal()}
                for lv in (0.1, 0.5, 0.9)
            ]
    long = pl.DataFrame(rows)
    metric = cf.pinball_loss("y", quantiles="q", quantile_level="level")
    per = cf.evaluate(long, metric, by=["m", "id"])
    s = {(m, i): v for m, i, v in per.select("m", "id", "pinball_loss").rows()}
    ratio = {
        (x, z): sum(s[(x, i)] for i in range(n)) / sum(s[(z, i)] for i in range(n))
        for x, z, n in [("a", "b", 6), ("a", "c", 3), ("b", "c", 3)]
    }
    theta_a = np.exp(np.mean([0.0, np.log(ratio[("a", "b")]), np.log(ratio[("a", "c")])]))
    out = cf.relative_skill(long, metric, model="m")
    assert_close(out["relative_skill"][0], theta_a)
    assert out["n_dropped"].to_list() == [3, 3, 0] and out["n"].to_list() == [18, 18, 9]
    table = cf.pairwise_comparison(long, metric, model="m", test=None)
    got = {(x, z): r for x, z, r in table.select("m", "compare_against", "mean_scores_ratio").rows()}
    for (x, z), r in ratio.items():
        assert_close([got[(x, z)], got[(z, x)]], [r, 1 / r])


def test_null_and_categorical_models(eager_constructor: Any) -> None:
    # a null model is a model of its own (as a null key is a group); an unordered categorical needs no order
    data = {"id": [1, 2, 1, 2, 1], "m": ["a", "a", "b", "b", None], "y": [0.0] * 5, "f": [1.0, 3, 2, 2, 1]}
    out = to_pandas(cf.relative_skill(eager_constructor(data), cf.mae("y", "f"), model="m"))
    skill = dict(zip(out["m"].astype(object).where(out["m"].notna(), "null"), out["relative_skill"].astype(float)))
    assert_close([skill["a"], skill["b"], skill["null"]], [1.0, 2 ** (1 / 3), 0.5 ** (1 / 3)])
    table = to_pandas(cf.pairwise_comparison(eager_constructor(data), cf.mae("y", "f"), model="m", n_permutations=9))
    assert len(table) == 9 and (table["n"] > 0).all()
    frame = pl.DataFrame(data).with_columns(pl.col("m").cast(pl.Categorical)).to_pandas()
    frame["m"] = frame["m"].astype("category")
    cat = cf.pairwise_comparison(frame, cf.mae("y", "f"), model="m", n_permutations=9)
    assert list(cat.index) == list(range(len(cat))) and len(cat) == 9


def test_permutation_memory_is_bounded_and_the_draws_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of sign draws give the p-value of one draw of every permutation (the same generator stream)."""
    from conformal_frames.numerics import paired

    rng = np.random.default_rng(3)
    x, y = rng.normal(size=41), rng.normal(size=41)
    whole = paired.permutation_pvalue(x, y, n_permutations=999, rng=np.random.default_rng(7))
    monkeypatch.setattr(paired, "CHUNK_CELLS", 41 * 13)  # 13 permutations per chunk
    chunked = paired.permutation_pvalue(x, y, n_permutations=999, rng=np.random.default_rng(7))
    assert chunked == whole
