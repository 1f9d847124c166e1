"""Quiet and helpful (issue 38, item 8).

One crossing warning per call at the caller's line; no numpy RuntimeWarning
from the plots or the CLI; ``naive_scale(season=)`` takes a column; a missing
scale column points at ``naive_scale``; a ``by=`` naming a pandas index says
``reset_index()``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import conformal_frames as cf
from conformal_frames.errors import ColumnNotFoundError
from helpers import assert_close, to_pandas

QS = {0.1: "q1", 0.5: "q5", 0.9: "q9"}


def _crossing_frame(n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    y = rng.normal(size=n)
    df = pd.DataFrame(
        {"y": y, "h": np.repeat([1, 2], n // 2), "q1": y - 1.0, "q5": y + 0.1 * rng.normal(size=n), "q9": y + 1.0}
    )
    df.loc[:5, "q1"] = df.loc[:5, "q5"] + 0.5  # 6 crossing rows
    return df


def _caught(fn: Any) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        fn()
    return [w for w in got if issubclass(w.category, UserWarning)]


# ---------------------------------------------------------------------------
# one crossing warning per call, at the caller's line
# ---------------------------------------------------------------------------
def test_evaluate_warns_once_at_the_callers_line():
    df = _crossing_frame()
    metrics = [cf.pinball_loss("y", quantiles=QS), cf.wis("y", quantiles=QS), cf.quantile_coverage("y", quantiles=QS)]
    got = _caught(lambda: cf.evaluate(df, *metrics, by="h"))
    assert len(got) == 1
    assert got[0].filename == __file__
    assert str(got[0].message).startswith("pinball_loss, wis, quantile_coverage: crossing quantiles in 6 rows")


def test_method_and_report_warn_once_at_the_callers_line():
    df = _crossing_frame()
    got = _caught(lambda: df.conformal.pinball_loss("y", quantiles=QS))
    assert len(got) == 1 and got[0].filename == __file__
    got = _caught(lambda: cf.report(df, y="y", quantiles=QS, by="h"))
    assert len(got) == 1 and got[0].filename == __file__
    lines = str(got[0].message).splitlines()
    # the metrics that score the crossings as given share a line; the PIT metrics (rearranged) have theirs
    assert any(line.startswith("quantile_crps, pinball_loss, wis, quantile_coverage: ") for line in lines)
    assert any(line.startswith("pit_test, pit_histogram: ") for line in lines)


def test_sorted_crossings_warn_once_too():
    df = _crossing_frame()
    metrics = [cf.pinball_loss("y", quantiles=QS, crossing="sort"), cf.wis("y", quantiles=QS, crossing="sort")]
    got = _caught(lambda: cf.evaluate(df, *metrics))
    assert len(got) == 1 and got[0].filename == __file__
    assert "rearranged in increasing order first" in str(got[0].message)


# ---------------------------------------------------------------------------
# no numpy RuntimeWarning from the plots or the CLI
# ---------------------------------------------------------------------------
def _with_null_group(n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    y = rng.normal(size=n)
    df = pd.DataFrame(
        {
            "y": y,
            "h": np.repeat([1, 2, 3, 4], n // 4),
            "q1": y - 1.3,
            "q5": y + 0.1 * rng.normal(size=n),
            "q9": y + 1.3,
            "lo": y - 1.5,
            "hi": y + 1.5,
        }
    )
    df.loc[df.h == 4, "y"] = np.nan  # a group whose every metric is null
    return df


def test_report_plots_of_a_null_group_raise_no_runtime_warning():
    pytest.importorskip("matplotlib")
    df = _with_null_group()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        rep = cf.report(df, y="y", quantiles=QS, lo="lo", hi="hi", by="h", invalid="null", confidence_level=0.8)
        assert "<img" in rep.to_html(plots=True)


def test_cli_with_a_null_group_prints_no_runtime_warning(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from conformal_frames import cli

    path = tmp_path / "d.csv"
    _with_null_group().to_csv(path, index=False)
    args = ["report", str(path), "--y", "y", "--lo", "lo", "--hi", "hi", "--quantiles", "0.1=q1,0.5=q5,0.9=q9"]
    args += ["--by", "h", "--confidence-level", "0.8", "--out", str(tmp_path / "out")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        cli.main(args)
    err = capsys.readouterr().err
    assert "RuntimeWarning" not in err and "All-NaN" not in err
    assert (tmp_path / "out" / "pit_histogram.png").exists()


# ---------------------------------------------------------------------------
# naive_scale(season=<column>)
# ---------------------------------------------------------------------------
def _panel(seed: int = 0) -> dict[str, Any]:
    """Monthly and quarterly series of several lengths (some too short for their season), rows shuffled."""
    rng = np.random.default_rng(seed)
    s, per, t, y = [], [], [], []
    for name, period, n in [("m1", 12, 30), ("q1", 4, 11), ("m2", 12, 12), ("q2", 4, 5), ("q3", 4, 1)]:
        s += [name] * n
        per += [period] * n
        t += list(range(n))
        y += list(np.round(np.cumsum(rng.normal(size=n)), 1))
    order = rng.permutation(len(t))
    return {c: [v[i] for i in order] for c, v in {"s": s, "per": per, "t": t, "y": y}.items()}


def _scale_oracle(d: dict[str, Any]) -> pd.DataFrame:
    s, per, t, y = (np.asarray(d[c]) for c in ("s", "per", "t", "y"))
    rows = []
    for name in sorted(set(s)):
        sel = s == name
        yy, m = y[sel][np.argsort(t[sel])], int(per[sel][0])
        diff = yy[m:] - yy[:-m] if len(yy) > m else np.array([])
        mae, mse = (np.mean(np.abs(diff)), np.mean(diff**2)) if len(diff) else (np.nan, np.nan)
        rows.append((name, mae, mse, int(sel.sum())))
    return pd.DataFrame(rows, columns=["s", "naive_mae", "naive_mse", "n"])


@pytest.mark.spark_cases(seed=0)
@pytest.mark.parametrize("seed", [0, 1])
def test_naive_scale_season_column_equals_one_call_per_season(constructor, seed):
    d = _panel(seed)
    out = to_pandas(cf.naive_scale(constructor(d), "y", by="s", order_by="t", season="per"))
    want = _scale_oracle(d)
    assert list(out["s"]) == list(want["s"])
    assert_close(out[["naive_mae", "naive_mse"]].to_numpy(), want[["naive_mae", "naive_mse"]].to_numpy(), rtol=1e-12)
    assert out["n"].tolist() == want["n"].tolist()
    # the same as an integer season per group of series
    frame = pd.DataFrame(d)
    for period in (4, 12):
        part = frame[frame["per"] == period]
        one = to_pandas(cf.naive_scale(part, "y", by="s", order_by="t", season=period))
        mine = out[out["s"].isin(one["s"])]
        assert_close(mine[["naive_mae", "naive_mse"]].to_numpy(), one[["naive_mae", "naive_mse"]].to_numpy())


def test_naive_scale_bad_season_column():
    d = pd.DataFrame(_panel(0))
    varying = d.assign(per=np.where(np.arange(len(d)) % 2 == 0, 4, 12))
    with pytest.raises(ValueError, match=r"column 'per' \(season=\) changes within a series"):
        cf.naive_scale(varying, "y", by="s", order_by="t", season="per")
    with pytest.raises(ValueError, match=r"column 'per' \(season=\) is not a positive integer"):
        cf.naive_scale(d.assign(per=d["per"] - 0.5), "y", by="s", order_by="t", season="per")
    with pytest.raises(ValueError, match=r"column 'per' \(season=\) is not a positive integer"):
        cf.naive_scale(d.assign(per=0), "y", by="s", order_by="t", season="per")
    with pytest.raises(ColumnNotFoundError, match="'period'"):
        cf.naive_scale(d, "y", by="s", order_by="t", season="period")
    lazy = cf.naive_scale(pd.DataFrame(d.assign(per=0)), "y", by="s", order_by="t", season="per", invalid="null")
    assert lazy["naive_mae"].isna().all() and (lazy["n_invalid"] > 0).all()


# ---------------------------------------------------------------------------
# errors that say what to do
# ---------------------------------------------------------------------------
def test_missing_scale_column_mentions_naive_scale(eager_constructor):
    frame = eager_constructor({"y": [1.0, 2.0], "f": [1.5, 2.5]})
    for metric in (cf.mase("y", "f", scale="naive_mae"), cf.rmsse("y", "f", scale="naive_mse")):
        with pytest.raises(ColumnNotFoundError, match=r"not found.*cf\.naive_scale\(train"):
            cf.evaluate(frame, metric)


def test_by_naming_a_pandas_index_says_reset_index():
    df = pd.DataFrame({"y": [1.0, 2, 3], "f": [1.5, 2, 2.5], "seg": ["a", "a", "b"]}).set_index("seg")
    calls = [
        lambda: df.conformal.mae("y", "f", by="seg"),
        lambda: cf.evaluate(df, cf.mae("y", "f"), by=["seg"]),
        lambda: cf.summarize(df, cf.mae("y", "f"), by="seg"),
        lambda: cf.report(df, y="y", point="f", by="seg"),
        lambda: cf.naive_scale(df.assign(t=[0, 1, 0]), "y", by="seg", order_by="t"),
    ]
    for call in calls:
        with pytest.raises(ColumnNotFoundError, match=r"'seg' \(by=\) is a level of the pandas index.*reset_index\(\)"):
            call()
    # a column of the same name wins over the index
    both = df.reset_index().set_index("seg", drop=False)
    assert to_pandas(both.conformal.mae("y", "f", by="seg"))["seg"].tolist() == ["a", "b"]
