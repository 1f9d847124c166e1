"""Several outputs (issue 41, item 2): ``y``, ``lo``, ``hi`` as lists of columns.

Joint coverage (every output inside its interval, MAPIE issue 437), its
Wilson interval, the coverage of each output, the mean box volume (product of
the widths) and the mean width of each output; coverage_test and
coverage_gap on the joint coverage.  Each against a numpy computation of the
definition, on every backend, grouped and not, with weights and counts, bad
input and merged summaries.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy.stats import binom

import conformal_frames as cf
from conformal_frames.errors import ColumnNotFoundError, InvalidRowsError
from helpers import assert_close, group_dict, random_intervals, to_pandas
from oracle import wilson

SEEDS = [0, 1, 2]
Y, LO, HI = ["y", "y1", "y2"], ["lo", "lo1", "lo2"], ["hi", "hi1", "hi2"]


def _data(seed: int, n: int = 120) -> dict[str, Any]:
    """Three outputs: ties in widths and values, some ``y`` on a bound, groups of 1 and 2 rows."""
    d = random_intervals(seed, n=n)
    rng = np.random.default_rng(100 + seed)
    for k in (1, 2):
        center = np.round(rng.normal(size=n), 1)
        w = np.round(rng.gamma(2.0, 0.6, size=n), 1)  # tied widths
        d[f"lo{k}"] = center - w / 2
        d[f"hi{k}"] = center + w / 2
        y = np.round(center + rng.normal(size=n) * 0.8, 1)
        on = rng.random(n) < 0.08
        y[on] = d[f"hi{k}"][on]  # on the upper bound: covered (both bounds inclusive)
        d[f"y{k}"] = y
    d["w"] = np.round(rng.uniform(0.0, 2.0, n), 1)
    d["k"] = rng.integers(0, 3, n).astype(np.int64)
    return d


def _oracle(d: dict[str, Any], idx: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float]:
    """The definitions in numpy for the rows ``idx``."""
    w = np.ones(len(idx)) if weights is None else weights[idx]
    inside = np.array([(d[lo][idx] <= d[y][idx]) & (d[y][idx] <= d[hi][idx]) for y, lo, hi in zip(Y, LO, HI)])
    widths = np.array([d[hi][idx] - d[lo][idx] for lo, hi in zip(LO, HI)])
    joint = inside.all(axis=0)
    out = {"coverage": np.sum(w * joint) / np.sum(w)}
    if weights is None:
        k, n = int(joint.sum()), len(idx)
        out["coverage_ci_low"], out["coverage_ci_high"] = wilson(k, n, 0.95)
    out |= {f"coverage_output{j}": np.sum(w * inside[j]) / np.sum(w) for j in range(3)}
    out["width"] = np.sum(w * np.prod(widths, axis=0)) / np.sum(w)
    out |= {f"width_output{j}": np.sum(w * widths[j]) / np.sum(w) for j in range(3)}
    return out


def _metrics(**kw: Any) -> list[cf.Metric]:
    return [cf.coverage(Y, LO, HI, **kw), cf.width(LO, HI, **kw)]


def _check(out: pd.DataFrame, expected: list[dict[str, float]], what: str) -> None:
    for c in expected[0]:
        assert_close(out[c], [e[c] for e in expected], rtol=1e-12, atol=1e-15, what=f"{what}: {c}")


# ---------------------------------------------------------------------------
# the definitions, every backend
# ---------------------------------------------------------------------------
@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", SEEDS)
def test_joint_coverage_and_volume_match_numpy(constructor: Any, seed: int) -> None:
    d = _data(seed)
    out = to_pandas(cf.evaluate(constructor(d), *_metrics(), by="g"))
    groups = group_dict(d["g"])
    assert list(out["g"]) == sorted(groups)
    assert [c for c in out.columns if c != "n_invalid"] == [  # lazy: n_invalid too
        "g",
        "coverage",
        "coverage_ci_low",
        "coverage_ci_high",
        "coverage_output0",
        "coverage_output1",
        "coverage_output2",
        "width",
        "width_output0",
        "width_output1",
        "width_output2",
        "n",
    ]
    assert out.loc[out["g"] == "one", "n"].item() == 1 and out.loc[out["g"] == "two", "n"].item() == 2
    _check(out, [_oracle(d, idx) for idx in groups.values()], constructor.id)
    whole = to_pandas(cf.evaluate(constructor(d), *_metrics()))
    _check(whole, [_oracle(d, np.arange(len(d["y"])))], f"{constructor.id}, ungrouped")
    # the joint coverage is below every output's coverage, and the single-output metric gives output j
    assert (out["coverage"] <= out[["coverage_output0", "coverage_output1", "coverage_output2"]].min(axis=1)).all()


def test_eager_call_returns_the_joint_coverage_and_one_output_lists_equal_the_column() -> None:
    d = _data(0)
    frame = pl.DataFrame(d)
    assert frame.conformal.coverage(Y, LO, HI) == pytest.approx(_oracle(d, np.arange(120))["coverage"], rel=1e-12)
    assert frame.conformal.width(LO, HI) == pytest.approx(_oracle(d, np.arange(120))["width"], rel=1e-12)
    one = cf.evaluate(frame, cf.coverage(["y"], ["lo"], ["hi"]), cf.width(["lo"], ["hi"]))
    plain = cf.evaluate(frame, cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"))
    assert one["coverage"].item() == plain["coverage"].item() == one["coverage_output0"].item()
    assert one["width"].item() == plain["width"].item() == one["width_output0"].item()
    single = to_pandas(cf.evaluate(frame, cf.coverage("y1", "lo1", "hi1"), by="g"))
    joint = to_pandas(cf.evaluate(frame, cf.coverage(Y, LO, HI), by="g"))
    assert_close(joint["coverage_output1"], single["coverage"], what="output 1 alone")


def test_joint_coverage_with_ties_on_the_bounds() -> None:
    """Both bounds inclusive in every output; a zero width counts in the volume."""
    frame = pd.DataFrame(
        {"a": [0.0, 1.0, 2.0, 1.0], "b": [5.0, 5.0, 4.0, 5.0], "la": [0.0] * 4, "ha": [1.0, 1.0, 1.0, 1.0]}
    ).assign(lb=[5.0, 4.0, 4.0, 5.0], hb=[5.0, 6.0, 6.0, 6.0])
    out = cf.evaluate(frame, cf.coverage(["a", "b"], ["la", "lb"], ["ha", "hb"]), cf.width(["la", "lb"], ["ha", "hb"]))
    # rows 0, 1, 3 have a inside [0, 1]; b inside in every row: joint 3 of 4
    assert out["coverage"].item() == 0.75 and out["coverage_output1"].item() == 1.0
    assert out["width"].item() == (0.0 + 2.0 + 2.0 + 1.0) / 4


@pytest.mark.parametrize("seed", SEEDS)
def test_weights_and_counts(seed: int) -> None:
    d = _data(seed)
    frame = pl.DataFrame(d)
    out = to_pandas(cf.evaluate(frame, *_metrics(weights="w"), by="g", invalid="null"))
    groups = group_dict(d["g"])
    expected = [_oracle(d, idx, d["w"]) for idx in groups.values()]
    ok = out["g"].map(lambda g: d["w"][groups[g]].sum() > 0).to_numpy()  # a group of zero weight is invalid
    for c in expected[0]:
        assert_close(out[c][ok], np.array([e[c] for e in expected])[ok], what=f"weighted {c}")
    assert "coverage_n_eff" in out.columns
    # counts: the repeated rows
    counted = to_pandas(cf.evaluate(frame, *_metrics(counts="k"), by="g", invalid="null"))
    rep = {c: np.repeat(np.asarray(v), d["k"]) for c, v in d.items()}
    repeated = to_pandas(cf.evaluate(pl.DataFrame(rep), *_metrics(), by="g"))
    merged = counted.merge(repeated, on="g", suffixes=("", "_rep"))
    assert len(merged) == len(repeated)
    for c in ["coverage", "coverage_ci_low", "coverage_ci_high", "coverage_output2", "width", "width_output0"]:
        assert_close(merged[c], merged[f"{c}_rep"], what=f"counts {c}")


# ---------------------------------------------------------------------------
# coverage_test and coverage_gap on the joint coverage
# ---------------------------------------------------------------------------
def test_coverage_test_and_gap_on_the_joint_coverage(constructor: Any) -> None:
    d = _data(1)
    test = cf.coverage_test(Y, LO, HI, confidence_level=0.8, correction="none")
    gap = cf.coverage_gap(Y, LO, HI, groups="g", confidence_level=0.8)
    if constructor.lazy and constructor.id != "polars[lazy]":  # p-values: a numpy step
        with pytest.raises(cf.BackendLimitError):
            cf.evaluate(constructor(d), test, by="g")
        out = to_pandas(cf.evaluate(constructor(d), gap))
    else:
        out = to_pandas(cf.evaluate(constructor(d), test, gap))
        grouped = to_pandas(cf.evaluate(constructor(d), test, by="g"))
        groups = group_dict(d["g"])
        exp = [_oracle(d, idx) for idx in groups.values()]
        k = np.array([e["coverage"] * len(idx) for e, idx in zip(exp, groups.values())]).round()
        n = np.array([len(idx) for idx in groups.values()])
        assert_close(grouped["coverage_test"], [e["coverage"] for e in exp], what="test statistic")
        assert_close(grouped["coverage_test_ci_low"], [e["coverage_ci_low"] for e in exp], what="ci")
        assert_close(grouped["coverage_test_pvalue"], binom.cdf(k, n, 0.8), what="p-value")
        assert_close(out["coverage_test"], [_oracle(d, np.arange(120))["coverage"]], what="ungrouped")
    per_group = np.array([_oracle(d, idx)["coverage"] for idx in group_dict(d["g"]).values()])
    assert_close(out["coverage_gap"], [np.mean(np.abs(per_group - 0.8))], what="coverage_gap")


def test_worst_slab_coverage_of_the_joint_coverage() -> None:
    """The same as the single-output metric on a precomputed joint indicator (``c`` in ``[1, 1]``)."""
    d = _data(0)
    d["x"] = np.round(np.random.default_rng(5).normal(size=120), 1)
    joint = np.all([(d[lo] <= d[y]) & (d[y] <= d[hi]) for y, lo, hi in zip(Y, LO, HI)], axis=0)
    frame = pl.DataFrame(d).with_columns(c=pl.Series(joint.astype(float)), one=pl.lit(1.0))
    kw: dict[str, Any] = {"features": ["x", "w"], "delta": 0.3, "seed": 0}
    a = frame.conformal.worst_slab_coverage(Y, LO, HI, **kw)
    assert a == frame.conformal.worst_slab_coverage("c", "one", "one", **kw)


def test_coverage_test_eager_result() -> None:
    d = _data(2)
    res = pd.DataFrame(d).conformal.coverage_test(Y, LO, HI, confidence_level=0.9)
    exp = _oracle(d, np.arange(120))
    assert res.statistic == pytest.approx(exp["coverage"], rel=1e-12)
    assert res.pvalue == pytest.approx(binom.cdf(round(exp["coverage"] * 120), 120, 0.9), rel=1e-12)


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
def test_lists_of_unequal_length_or_mixed_with_a_column_are_refused() -> None:
    with pytest.raises(ValueError, match=r"one column per output.*2 y, 1 lo, 2 hi"):
        cf.coverage(["y", "y1"], ["lo"], ["hi", "hi1"])
    with pytest.raises(TypeError, match=r"lo= is a single column"):
        cf.coverage(["y", "y1"], "lo", ["hi", "hi1"])
    with pytest.raises(ValueError, match=r"1 lo, 2 hi"):
        cf.width(["lo"], ["hi", "hi1"])
    with pytest.raises(ValueError, match=r"'y' repeated"):
        cf.coverage_test(["y", "y"], LO[:2], HI[:2], confidence_level=0.9)
    with pytest.raises(ValueError, match=r"non-empty list"):
        cf.coverage([], [], [])
    with pytest.raises(TypeError, match=r"y\[1\] must be a column name"):
        cf.coverage(["y", 3], LO[:2], HI[:2])
    with pytest.raises(ValueError, match=r"one column per output"):
        cf.metrics.intervals.Coverage(y=("y", "y1"), lo=("lo",), hi=("hi",))  # the class checks alike


@pytest.mark.parametrize(
    "call",
    [
        lambda: cf.winkler(Y, LO, HI, confidence_level=0.9),
        lambda: cf.cwc(Y, LO, HI, eta=1.0, confidence_level=0.9),
        lambda: cf.ssc(Y, LO, HI),
        lambda: cf.ssc_score(Y, LO, HI),
        lambda: cf.hsic(Y, LO, HI),
        lambda: cf.path_coverage(Y, LO, HI, path="g"),
    ],
)
def test_single_output_metrics_name_those_that_take_lists(call: Any) -> None:
    with pytest.raises(TypeError, match=r"takes one output.*taken by coverage, width, coverage_test"):
        call()


def test_a_missing_column_is_named() -> None:
    frame = pl.DataFrame(_data(0))
    with pytest.raises(ColumnNotFoundError, match="'y9'"):
        cf.evaluate(frame, cf.coverage(["y", "y9"], LO[:2], HI[:2]))


def test_nan_in_one_output_invalidates_the_row(constructor: Any) -> None:
    d = _data(0, n=30)
    d["y2"] = d["y2"].copy()
    d["y2"][d["g"] == "one"] = np.nan  # the group of one row: bad in two outputs, one invalid row
    d["y1"] = np.where(d["g"] == "one", np.inf, d["y1"])
    two = np.flatnonzero(d["g"] == "two")
    d["lo1"] = d["lo1"].copy()
    d["lo1"][two[0]] = d["hi1"][two[0]] + 1.0  # lo > hi in output 1
    if not constructor.lazy:
        with pytest.raises(InvalidRowsError) as info:
            cf.evaluate(constructor(d), *_metrics(), by="g")
        causes = {c.split(" in ")[0]: n for c, n in info.value.counts.items()}
        assert causes == {
            "column 'y1' has missing (null/NaN) or infinite values": 1,
            "column 'y2' has missing (null/NaN) or infinite values": 1,
            "column 'lo1' is greater than column 'hi1'": 1,
        }
    out = to_pandas(cf.evaluate(constructor(d), *_metrics(), by="g", invalid="null"))
    bad = out["g"].isin(["one", "two"])
    assert out.loc[bad, "n_invalid"].tolist() == [1, 1]
    assert out.loc[bad, ["coverage", "coverage_output0", "width", "width_output2"]].isna().all().all()
    assert out.loc[~bad, "coverage"].notna().all()
    dropped = to_pandas(cf.evaluate(constructor(d), *_metrics(), by="g", invalid="drop"))
    keep = np.ones(len(d["y"]), dtype=bool)
    keep[(d["g"] == "one")] = False
    keep[two[0]] = False
    groups = {g: idx[keep[idx]] for g, idx in group_dict(d["g"]).items()}
    assert list(dropped["g"]) == sorted(groups)  # the group "one" has no row left: n = 0, null metrics
    assert dropped.loc[dropped["g"] == "one", "n"].item() == 0
    kept = dropped[dropped["g"] != "one"].reset_index(drop=True)
    _check(kept, [_oracle(d, idx) for g, idx in groups.items() if g != "one"], f"{constructor.id}, drop")


# ---------------------------------------------------------------------------
# summaries: sums merge
# ---------------------------------------------------------------------------
def test_summaries_round_trip() -> None:
    d = _data(1)
    d["day"] = np.arange(len(d["y"])) % 3
    frame = pl.DataFrame(d)
    metrics = [*_metrics(), cf.coverage(Y, LO, HI, weights="w").alias("cov_w")]
    stats = cf.summarize(frame, *metrics, by=["g", "day"])
    for by in (["g"], []):
        merged = to_pandas(cf.finalize(stats, *metrics, by=by or None))
        direct = to_pandas(cf.evaluate(frame, *metrics, by=by or None))
        assert list(merged.columns) == list(direct.columns)
        for c in direct.columns:
            if c != "g":
                assert_close(merged[c], direct[c], what=f"summary {c}")


# ---------------------------------------------------------------------------
# the report: the joint-coverage table
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("lazy", [False, True])
def test_report_joint_coverage_table(lazy: bool) -> None:
    d = _data(0)
    frame = pl.DataFrame(d).lazy() if lazy else pl.DataFrame(d)
    rep = cf.report(frame, y=Y, lo=LO, hi=HI, by="g", confidence_level=0.6)
    assert list(rep.tables) == ["joint_coverage"]
    t = to_pandas(rep.frame("joint_coverage"))
    groups = group_dict(d["g"])
    _check(t, [_oracle(d, idx) for idx in groups.values()], "report")
    assert not any(c.startswith("coverage_output") and c.endswith("_ci_low") for c in t.columns)
    k = np.round(t["coverage"] * t["n"])
    assert_close(t["pvalue"], binom.cdf(k, t["n"], 0.6), what="report p-value")
    assert rep.columns == {"y": "y,y1,y2", "lo": "lo,lo1,lo2", "hi": "hi,hi1,hi2"}
    assert "Joint coverage per group" in str(rep)
    assert "joint_coverage" in rep.to_html(plots=False)
    under = to_pandas(rep.under_covered)
    assert set(under["g"]) == set(t.loc[t["under_covered"].fillna(False).astype(bool), "g"])
    pooled = rep.summary["pooled_coverage"][0]
    assert pooled["coverage"] == pytest.approx(_oracle(d, np.arange(120))["coverage"], rel=1e-12)
    if not lazy:  # the coverage figure draws the joint coverage
        pytest.importorskip("matplotlib")
        assert list(rep.figures()) == ["coverage_by_segment"]
    # no target: the joint coverage, its interval and the outputs' columns
    plain = to_pandas(cf.report(frame, y=Y, lo=LO, hi=HI).frame("joint_coverage"))
    _check(plain, [_oracle(d, np.arange(120))], "report, no target")


def test_report_lists_refuse_other_families_and_unequal_lengths() -> None:
    frame = pl.DataFrame(_data(0))
    with pytest.raises(ValueError, match=r"joint-coverage table alone; report score="):
        cf.report(frame, y=Y, lo=LO, hi=HI, score="w")
    with pytest.raises(ValueError, match=r"one column per output"):
        cf.report(frame, y=Y, lo=LO[:2], hi=HI)
    with pytest.raises(ValueError, match=r"column 'y9' \(y\[1\]=\) not found"):
        cf.report(frame, y=["y", "y9"], lo=LO[:2], hi=HI[:2])


def test_cli_takes_repeated_or_comma_separated_outputs(tmp_path: Any, capsys: Any) -> None:
    import json

    from conformal_frames import cli

    d = _data(0)
    path = tmp_path / "f.parquet"
    pl.DataFrame(d).write_parquet(path)
    argv = ["report", str(path), "--y", "y", "--y", "y1,y2", "--lo", "lo,lo1,lo2", "--hi", "hi", "--hi", "hi1,hi2"]
    assert cli.main([*argv, "--by", "g", "--confidence-level", "0.6", "-q", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["tables"]["joint_coverage"]
    assert_close([r["coverage"] for r in rows], [_oracle(d, idx)["coverage"] for idx in group_dict(d["g"]).values()])
    assert cli.main(["report", str(path), "--y", "y,y1", "--lo", "lo", "--hi", "hi,hi1", "-q"]) == 2
    assert "--lo is a single column" in capsys.readouterr().err
