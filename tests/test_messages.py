"""Messages that name the fix (issue 24): each with a regression test, on every backend where it applies."""

from __future__ import annotations

from typing import Any

import pytest

import conformal_frames as cf

SWAPPED = {"y": [1.0, 2.0, 3.0, 4.0], "upper": [2.0, 3.0, 4.0, 5.0], "lower": [0.0, 1.0, 2.0, 6.0]}


@pytest.mark.spark_cases()
def test_swapped_bounds_name_the_roles(constructor: Any) -> None:
    """``lo > hi`` in most rows: "are lo and hi swapped?" with the columns given as lo and hi."""
    with pytest.raises(cf.InvalidRowsError) as info:
        cf.evaluate(constructor(SWAPPED), cf.coverage("y", "upper", "lower"), invalid="raise")
    text = str(info.value)
    assert text == (
        "column 'upper' is greater than column 'lower' in 3 of 4 rows: are lo and hi swapped? (lo='upper', hi='lower')"
    )
    assert info.value.counts == {text: 3}


def test_swapped_bounds_of_forecast_intervals() -> None:
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame(SWAPPED)
    with pytest.raises(cf.InvalidRowsError, match=r"in 3 of 4 rows: are lo and hi swapped\?"):
        frame.conformal.interval_coverage("y", intervals={0.9: ("upper", "lower")}, crossing="invalid")
    # crossing="score" (default): lo > hi is two quantiles crossing, scored as given and counted
    with pytest.warns(UserWarning, match=r"interval_coverage: crossing quantiles in 3 rows"):
        frame.conformal.interval_coverage("y", intervals={0.9: ("upper", "lower")})


def test_a_few_crossed_bounds_are_ordinary_invalid_rows() -> None:
    """One row of four with ``lo > hi``: bad data, not swapped roles (the message is unchanged)."""
    pd = pytest.importorskip("pandas")
    with pytest.raises(cf.InvalidRowsError) as info:
        pd.DataFrame(SWAPPED).conformal.coverage("y", "lower", "upper")
    assert str(info.value) == "column 'lower' is greater than column 'upper' in 1 row"


def test_swapped_bounds_in_the_report_causes() -> None:
    pl = pytest.importorskip("polars")
    rep = pl.DataFrame(SWAPPED).lazy().conformal.report(y="y", lo="upper", hi="lower")
    assert any("are lo and hi swapped?" in c for c in rep.summary["invalid_causes"])


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (
            lambda df: cf.ece("y", "p", n_bin=5),
            "ece() got an unexpected keyword argument 'n_bin'; did you mean 'n_bins'?",
        ),
        (lambda df: df.conformal.ece("y", "p", n_bin=5), "did you mean 'n_bins'?"),
        (lambda df: df.conformal.coverage("y", "lo", "hi", byy="g"), "did you mean 'by'?"),
        (lambda df: cf.evaluate(df, cf.brier("y", "p"), invalidd="drop"), "did you mean 'invalid'?"),
        (lambda df: cf.summarize(df, cf.brier("y", "p"), bye="g"), "did you mean 'by'?"),
        (
            lambda df: df.conformal.report(y="y", lo="lo", hi="hi", confidence_levl=0.9),
            "did you mean 'confidence_level'?",
        ),
        (
            lambda df: cf.coverage_test("y", "lo", "hi", confidence_level=0.9, signficance=0.1),
            "did you mean 'significance'?",
        ),
        (lambda df: cf.ece("y", "p", zzz=1), "its keywords are 'y', 'score', 'n_bins'"),
        (lambda df: cf.coverage("y", "lo", "hi", ci=0.9), "it is called 'ci_level' since 0.2"),  # renamed: unchanged
    ],
)
def test_misspelt_keyword_did_you_mean(call: Any, words: str) -> None:
    pl = pytest.importorskip("polars")
    df = pl.DataFrame(
        {"y": [0, 1, 1, 0], "p": [0.1, 0.8, 0.6, 0.3], "lo": [0.0] * 4, "hi": [1.0] * 4, "g": list("aabb")}
    )
    with pytest.raises(TypeError) as info:
        call(df)
    assert words in str(info.value)


def test_checked_functions_keep_their_identity() -> None:
    """The keyword check wraps each public function once, in ``cf`` and in its own module."""
    import inspect

    from conformal_frames.metrics import calibration

    assert cf.ece is calibration.ece and cf.ece.__name__ == "ece"
    assert list(inspect.signature(cf.ece).parameters)[:3] == ["y", "score", "n_bins"]


@pytest.fixture
def summary(constructor: Any) -> tuple[Any, Any]:
    data = {"d": [1, 1, 2, 2, 2, 3], "y": [0, 1, 1, 0, 1, 0], "p": [0.1, 0.8, 0.6, 0.3, 0.7, 0.2]}
    frame = constructor(data)
    return frame, cf.summarize(frame, cf.ece("y", "p", n_bins=10), cf.brier("y", "p"), by="d")


@pytest.mark.spark_cases()
def test_finalize_and_rolling_without_metrics_are_errors(summary: tuple[Any, Any]) -> None:
    _, stats = summary
    with pytest.raises(ValueError, match=r"finalize\(\) needs at least one metric, e\.g\. cf\.finalize\(stats, "):
        cf.finalize(stats)
    with pytest.raises(ValueError, match=r"rolling\(\) needs at least one metric"):
        cf.rolling(stats, index="d", window=2)


@pytest.mark.spark_cases()
def test_parameters_the_summary_does_not_hold_are_named(summary: tuple[Any, Any]) -> None:
    _, stats = summary
    with pytest.raises(ValueError) as info:
        cf.finalize(stats, cf.ece("y", "p", n_bins=20))
    text = str(info.value)
    assert "no statistics of ece(y='y', score='p', n_bins=20, strategy='uniform') (20 missing)" in text
    assert "the summary holds ece(y='y', score='p', n_bins=10, strategy='uniform'), brier(y='y', score='p')" in text
    assert "cf_sum_" not in text  # no hashed column names
    out = cf.finalize(stats, cf.ece("y", "p", n_bins=10))  # the summarized parameters finalize
    assert "ece" in (out.columns if hasattr(out, "columns") else out.collect_schema().names())


@pytest.mark.spark_cases()
def test_summarize_bootstrap_names_the_bootstrap(summary: tuple[Any, Any]) -> None:
    frame, _ = summary
    with pytest.raises(ValueError, match=r"do not merge exactly: bootstrap\(ece\): resamples the rows of a group"):
        cf.summarize(frame, cf.bootstrap(cf.ece("y", "p"), n_resamples=10), by="d")
