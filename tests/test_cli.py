"""``conformal-frames report FILE`` and ``conformal-frames demo``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conformal_frames import cli

pl = pytest.importorskip("polars", reason="the CLI reads files with polars")


def _frame(n: int = 40_000, seed: int = 3):
    """Two keys (10 regions x 5 models); region r3 with model m2 under-covered."""
    rng = np.random.default_rng(seed)
    region = rng.integers(0, 10, n)
    model = rng.integers(0, 5, n)
    x = rng.normal(size=n)
    sigma = 0.5 + 0.3 * model + 0.2 * np.abs(x)
    y = x + sigma * rng.standard_normal(n)
    half = np.where((region == 3) & (model == 2), 0.6, 1.0) * 1.6449 * sigma
    return pl.DataFrame(
        {
            "region": np.array([f"r{i}" for i in range(10)])[region],
            "model": np.array([f"m{i}" for i in range(5)])[model],
            "y": y,
            "lo": x - half,
            "hi": x + half,
        }
    )


@pytest.fixture(scope="module")
def parquet(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "preds.parquet"
    _frame().write_parquet(path)
    return path


ARGS = ["--y", "y", "--lo", "lo", "--hi", "hi", "--by", "region", "model", "--confidence-level", "0.9"]


def test_report_parquet_text_and_outputs(parquet: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib ([plot] extra)")
    out = tmp_path / "out"
    code = cli.main(["report", str(parquet), *ARGS, "--out", str(out), "--progress"])
    captured = capsys.readouterr()
    assert code == cli.EXIT_OK
    assert captured.out.startswith("conformal-frames report: 40,000 rows, 50 groups by region, model")
    assert "significantly under-covered: 1 of 50 tested groups" in captured.out
    assert "  - region=r3, model=m2: coverage" in captured.out
    assert "[conformal-frames] computing metrics per group: done in" in captured.err
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "coverage_by_segment.png",
        "metrics.csv",
        "report.html",
        "report.json",
        "ssc.png",
        "width_distribution.png",
    ]
    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 3
    data = json.loads((out / "report.json").read_text())
    assert len(data["tables"]["intervals"]) == 50


def test_report_matches_the_library(parquet: Path, capsys) -> None:
    import conformal_frames as cf

    assert cli.main(["report", str(parquet), *ARGS, "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)["tables"]["intervals"]
    ref = cf.evaluate(pl.read_parquet(parquet), cf.coverage("y", "lo", "hi"), by=["region", "model"])
    assert [r["coverage"] for r in got] == pytest.approx(ref["coverage"].to_list(), rel=1e-12)
    assert [r["n"] for r in got] == ref["n"].to_list()
    assert [r["under_covered"] for r in got].count(True) == 1


def test_csv_input_and_csv_output(tmp_path: Path, capsys) -> None:
    path = tmp_path / "preds.csv"
    _frame(3000).write_csv(path)
    assert (
        cli.main(
            ["report", str(path), "--y", "y", "--lo", "lo", "--hi", "hi", "--by", "region,model", "--format", "csv"]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "region,model,family,metric,value"
    assert lines[1].startswith("r0,m0,intervals,coverage,")


def test_level_column(tmp_path: Path, capsys) -> None:
    frames = [_frame(2000).with_columns(level=pl.lit(lv)) for lv in (0.8, 0.9)]
    path = tmp_path / "levels.parquet"
    pl.concat(frames).write_parquet(path)
    code = cli.main(
        [
            "report",
            str(path),
            "--y",
            "y",
            "--lo",
            "lo",
            "--hi",
            "hi",
            "--by",
            "model",
            "--confidence-level",
            "level",
            "--no-plots",
        ]
    )
    assert code == 0
    assert "10 groups by model, level" in capsys.readouterr().out


def test_missing_column_names_it_and_lists_the_available_ones(parquet: Path, capsys) -> None:
    code = cli.main(["report", str(parquet), "--y", "y", "--lo", "lo", "--hi", "upper"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE
    assert "column 'upper' (--hi) not found; available columns: 'region', 'model', 'y', 'lo', 'hi'" in err
    code = cli.main(["report", str(parquet), "--y", "y", "--lo", "lo", "--hi", "hi", "--by", "segment"])
    assert code == cli.EXIT_USAGE
    assert "column 'segment' (--by) not found" in capsys.readouterr().err


def test_exit_codes(parquet: Path, tmp_path: Path, capsys) -> None:
    assert cli.main(["report", str(tmp_path / "nope.parquet"), "--y", "y"]) == cli.EXIT_INPUT
    assert "input file not found" in capsys.readouterr().err
    bad = tmp_path / "data.xlsx"
    bad.write_text("x")
    assert cli.main(["report", str(bad)]) == cli.EXIT_INPUT
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"not parquet at all")
    assert cli.main(["report", str(garbage), "--y", "y", "--lo", "lo", "--hi", "hi"]) == cli.EXIT_INPUT
    assert cli.main(["report", str(parquet), "--y", "y"]) == cli.EXIT_USAGE
    assert "--y alone is not enough: give --lo and --hi (intervals)" in capsys.readouterr().err
    assert cli.main(["report", str(parquet), "--y", "y", "--lo", "lo"]) == cli.EXIT_USAGE
    assert "interval metrics need --y, --lo and --hi; missing --hi" in capsys.readouterr().err
    assert cli.main(["report", str(parquet), *ARGS, "--fail-on-under-coverage", "-q"]) == cli.EXIT_UNDER_COVERED
    assert cli.main(["report", str(parquet), "--confidence-level", "90"]) == cli.EXIT_USAGE
    capsys.readouterr()
    # invalid rows: the report is printed, the exit code says the data are flawed
    flawed = tmp_path / "flawed.parquet"
    _frame(500).with_columns(hi=pl.when(pl.int_range(pl.len()) == 7).then(None).otherwise(pl.col("hi"))).write_parquet(
        flawed
    )
    assert (
        cli.main(["report", str(flawed), "--y", "y", "--lo", "lo", "--hi", "hi", "--by", "model"])
        == cli.EXIT_INVALID_ROWS
    )
    captured = capsys.readouterr()
    assert "conformal-frames: error: 1 row with invalid values" in captured.err
    assert "conformal-frames report" in captured.out


def test_help_is_complete(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["report", "--help"])
    text = capsys.readouterr().out
    for flag in (
        "--y",
        "--lo",
        "--hi",
        "--score",
        "--score-y",
        "--sets",
        "--by",
        "--confidence-level",
        "--significance",
        "--invalid",
        "--null-values",
        "--decimal-comma",
        "--max-rows",
        "--max-segments",
        "--correction",
        "--out",
        "--format",
        "--no-plots",
        "--progress",
        "--quiet",
        "--fail-on-under-coverage",
        "--input-format",
        "--separator",
        "--classes",
        "--memory",
    ):
        assert flag in text, flag
    assert "exit codes:" in text and "5  --fail-on-under-coverage" in text and "6  --fail-on-under-coverage" in text
    for old in ("--label", "--set ", "--level-col", "--alpha", "--num-bins", "--ssc-bins"):
        assert old not in text


def test_demo_uses_the_report(capsys) -> None:
    assert cli.main(["demo", "--rows", "3000", "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("conformal-frames report: 9,000 rows, 15 groups by segment, level")
    assert "segment=island" in out and "hsic" in out


def test_console_script_runs(parquet: Path) -> None:
    """The installed entry point (a real process, as a user runs it)."""
    exe = shutil.which("conformal-frames") or str(Path(sys.executable).parent / "conformal-frames")
    if not Path(exe).exists():
        pytest.skip("the conformal-frames console script is not installed (pip install -e .)")
    res = subprocess.run([exe, "report", str(parquet), *ARGS, "-q", "--format", "json"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["summary"]["groups"] == 50


CHROMIUM = next(
    (p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome")) if p), None
)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium)")
def test_html_report_opens_in_headless_chromium(parquet: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib ([plot] extra)")
    out = tmp_path / "out"
    assert cli.main(["report", str(parquet), *ARGS, "--out", str(out), "-q"]) == 0
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    res = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", (out / "report.html").as_uri()], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    assert "<table>" in dom and "<th>coverage</th>" in dom
    assert dom.count("data:image/png;base64,") == 3
    assert '<tr class="cf-flag">' in dom
    assert "conformal-frames report: 40,000 rows" in dom


def test_calibration_columns(tmp_path: Path, capsys) -> None:
    import conformal_frames as cf

    if not hasattr(cf, "ece"):
        pytest.skip("the calibration family is not in this version")
    rng = np.random.default_rng(5)
    score = rng.uniform(0, 1, 4000)
    path = tmp_path / "scores.parquet"
    pl.DataFrame(
        {"campaign": rng.choice(["a", "b"], 4000), "p": score, "clicked": (rng.uniform(0, 1, 4000) < score).astype(int)}
    ).write_parquet(path)
    assert (
        cli.main(["report", str(path), "--y", "clicked", "--score", "p", "--by", "campaign", "--format", "json"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["families"] == ["calibration"]
    rows = data["tables"]["calibration"]
    assert [r["campaign"] for r in rows] == ["a", "b"]
    assert all(0 <= r["ece"] < 0.1 for r in rows)
    assert {r["bin"] for r in data["tables"]["reliability"]} == set(range(10))


def test_memory_modes(parquet: Path, capsys) -> None:
    assert cli._bounded("bounded", 0) and not cli._bounded("exact", 10**15)
    assert cli._bounded("auto", 10**15) and not cli._bounded("auto", 1000)
    assert cli.main(["report", str(parquet), *ARGS, "--memory", "bounded", "--format", "json", "--progress"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert "ssc" not in data["tables"] and "widths" in data["tables"]
    assert "bounded memory" in captured.err


def test_prediction_sets(tmp_path: Path, capsys) -> None:
    import conformal_frames as cf

    if not hasattr(cf, "set_coverage"):
        pytest.skip("the prediction-set family is not in this version")
    path = tmp_path / "sets.parquet"
    pl.DataFrame({"g": ["a", "a", "b", "b"], "y": [0, 1, 2, 2], "s": [[0], [0, 2], [2], [1]]}).write_parquet(path)
    assert (
        cli.main(
            ["report", str(path), "--y", "y", "--sets", "s", "--classes", "0,1,2", "--by", "g", "--format", "json"]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)["tables"]["sets"]
    assert [r["set_coverage"] for r in rows] == [0.5, 0.5]
    assert [r["set_size"] for r in rows] == [1.5, 1.0]


def test_a_ci_bound_one_ulp_past_its_estimate_does_not_crash_the_plots(tmp_path: Path, capsys) -> None:
    """Wilson at coverage 1.0 with n=65 (ci_high = 0.9999999999999999 in 0.1): --out writes every file."""
    pytest.importorskip("matplotlib", reason="plots need matplotlib ([plot] extra)")
    rng = np.random.default_rng(2)
    y = rng.normal(size=565)
    frame = pl.DataFrame(
        {"seg": ["small"] * 65 + ["big"] * 500, "y": y, "lo": np.r_[np.full(65, -9.0), np.full(500, -1.645)]}
    ).with_columns(hi=-pl.col("lo"))
    path = tmp_path / "vip.parquet"
    frame.write_parquet(path)
    out = tmp_path / "out"
    args = ["report", str(path), "--y", "y", "--lo", "lo", "--hi", "hi", "--by", "seg", "--confidence-level", "0.9"]
    assert cli.main([*args, "--out", str(out), "-q"]) == cli.EXIT_OK
    assert (out / "coverage_by_segment.png").stat().st_size > 0
    assert (out / "report.html").read_text().count("data:image/png;base64,") == 3
    capsys.readouterr()


def test_out_that_cannot_be_written_is_one_line_and_exit_3(parquet: Path, tmp_path: Path, capsys) -> None:
    existing = tmp_path / "reg.csv"
    existing.write_text("x\n")
    assert cli.main(["report", str(parquet), *ARGS, "--out", str(existing), "-q"]) == cli.EXIT_IO
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith("conformal-frames: error: --out ")
    assert "is an existing file" in captured.err
    assert captured.out == ""  # refused before the report is printed
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code = cli.main(["report", str(parquet), *ARGS, "--out", str(locked / "sub"), "-q"])
        err = capsys.readouterr().err
        if os.geteuid() != 0:  # root writes anywhere
            assert code == cli.EXIT_IO
            assert err.count("\n") == 1 and "cannot be created" in err
        assert "Traceback" not in err
    finally:
        locked.chmod(0o700)
    assert cli.main(["report", str(parquet), *ARGS, "--out", "/proc/forbidden", "-q"]) == cli.EXIT_IO
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("conformal-frames: error: --out '/proc/forbidden'")


def test_usage_errors_are_one_line(parquet: Path, capsys) -> None:
    for argv, words in (
        (["report", str(parquet), *ARGS, "--nope"], "unrecognized arguments: --nope"),
        (["report", str(parquet), "--label", "y"], "--label is called --y (or --score-y) since 0.2"),
        (["report", str(parquet), "--y", "y", "--set", "s"], "--set is called --sets since 0.2"),
        (["report", str(parquet), "--level-col", "level"], "--level-col is called --confidence-level COLUMN since 0.2"),
        (["report", str(parquet), "--alpha", "0.1"], "--alpha is called --significance since 0.2"),
        (["report", str(parquet), *ARGS, "--confidence-level", "90"], "strictly between 0 and 1"),
        (
            ["report", str(parquet), "--y", "y", "--lo", "lo", "--hi", "hi", "--fail-on-under-coverage"],
            "needs a target",
        ),
    ):
        assert cli.main(argv) == cli.EXIT_USAGE, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("conformal-frames: error: "), err
        assert words in err, err


def test_confidence_level_names_a_column(tmp_path: Path, capsys) -> None:
    frames = [_frame(2000).with_columns(level=pl.lit(lv)) for lv in (0.8, 0.9)]
    path = tmp_path / "levels.parquet"
    pl.concat(frames).write_parquet(path)
    argv = ["report", str(path), "--y", "y", "--lo", "lo", "--hi", "hi", "--confidence-level", "lvl"]
    assert cli.main(argv) == cli.EXIT_USAGE
    assert "column 'lvl' (--confidence-level) not found" in capsys.readouterr().err


def test_csv_null_tokens_and_decimal_comma(tmp_path: Path, capsys) -> None:
    path = tmp_path / "r.csv"
    path.write_text('g;y;lo;hi\na;"1,5";"0,5";"2,5"\na;NA;"0,0";"1,0"\nb;"3,0";"2,0";"2,5"\n')
    argv = ["report", str(path), "--separator", ";", "--y", "y", "--lo", "lo", "--hi", "hi", "--by", "g"]
    assert cli.main([*argv, "--format", "json"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--null-values NA" in err and "--decimal-comma" in err
    code = cli.main([*argv, "--null-values", "NA", "--decimal-comma", "--format", "json"])
    captured = capsys.readouterr()
    assert code == cli.EXIT_INVALID_ROWS  # the NA is a missing y: group a cannot be evaluated
    data = json.loads(captured.out)
    assert [r["coverage"] for r in data["tables"]["intervals"]] == [None, 0.0]
    assert captured.err.startswith("conformal-frames: error: 1 row with invalid values")
    assert "g=a" in captured.err and captured.err.count("\n") == 1


@pytest.fixture(scope="module")
def demo90_nan(tmp_path_factory) -> Path:
    """The demo data at level 0.9 with y null in one row of the under-covered segment."""
    from conformal_frames.demo import UNDER_COVERED, demo_data

    df = pl.DataFrame(demo_data(seed=1)).filter(pl.col("level") == 0.9).drop("level").with_row_index("i")
    first = df.filter(pl.col("segment") == UNDER_COVERED)["i"][0]
    df = df.with_columns(y=pl.when(pl.col("i") == first).then(None).otherwise(pl.col("y"))).drop("i")
    path = tmp_path_factory.mktemp("demo") / "demo90_nan.parquet"
    df.write_parquet(path)
    return path


DEMO90 = ["--y", "y", "--lo", "lo", "--hi", "hi", "--by", "segment", "--confidence-level", "0.9"]


def test_one_invalid_row_never_hides_the_under_covered_segment(demo90_nan: Path, capsys) -> None:
    code = cli.main(["report", str(demo90_nan), *DEMO90, "--fail-on-under-coverage", "--no-plots"])
    captured = capsys.readouterr()
    assert code == cli.EXIT_UNTESTED
    assert "NOT TESTED: 1 group could not be tested (rows with invalid values):" in captured.out
    assert "  - segment=island: n=" in captured.out and "1 invalid row" in captured.out
    assert "significantly under-covered: 0 of 4 tested groups" in captured.out
    assert "rows of untested groups or with invalid values excluded" in captured.out
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("conformal-frames: error: 1 group could not be tested (segment=island: 1 row")
    assert "--fail-on-under-coverage cannot pass" in captured.err
    # without --fail-on-under-coverage: the report is produced, exit 4 names the group
    assert cli.main(["report", str(demo90_nan), *DEMO90, "--format", "json"]) == cli.EXIT_INVALID_ROWS
    captured = capsys.readouterr()
    summary = json.loads(captured.out)["summary"]
    assert [g["group"] for g in summary["untested"]] == [{"segment": "island"}]
    assert summary["untested"][0]["n_invalid"] == 1
    assert "1 group with null metrics: segment=island" in captured.err


def test_invalid_policy_options(demo90_nan: Path, capsys) -> None:
    """--invalid drop tests the segment on its valid rows (exit 5); raise stops with the cause (exit 4)."""
    code = cli.main(["report", str(demo90_nan), *DEMO90, "--fail-on-under-coverage", "--invalid", "drop", "-q"])
    captured = capsys.readouterr()
    assert code == cli.EXIT_UNDER_COVERED
    assert "significantly under-covered: 1 of 5 tested groups" in captured.out
    assert "  - segment=island: coverage" in captured.out
    assert "note: 1 row with invalid values dropped" in captured.out
    code = cli.main(["report", str(demo90_nan), *DEMO90, "--invalid", "raise", "--no-plots"])
    captured = capsys.readouterr()
    assert code == cli.EXIT_INVALID_ROWS and captured.out == ""
    assert captured.err == "conformal-frames: error: column 'y' has missing (null/NaN) or infinite values in 1 row\n"


def test_invalid_rows_message_names_the_real_cause(tmp_path: Path, capsys) -> None:
    """Labels outside {0, 1}, scores outside [0, 1], labels outside --classes: the Python API's words."""
    path = tmp_path / "reg.parquet"
    pl.DataFrame({"g": ["a", "a", "b"], "y": [0.0, 2.5, 1.0], "s": [0.2, 1.5, 0.9]}).write_parquet(path)
    assert cli.main(["report", str(path), "--y", "y", "--score", "s", "--by", "g", "-q"]) == cli.EXIT_INVALID_ROWS
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("conformal-frames: error: 1 row with invalid values (")
    assert "column 'y' has labels other than 0 and 1 in 1 row" in err
    assert "column 's'" in err and "outside [0, 1]" in err and "lo > hi" not in err
    sets = tmp_path / "sets.parquet"
    pl.DataFrame({"g": ["a", "b"], "y": [0, 3], "s": [[0], [1, 2]]}).write_parquet(sets)
    argv = ["report", str(sets), "--y", "y", "--sets", "s", "--classes", "0,1,2", "--by", "g", "-q"]
    assert cli.main(argv) == cli.EXIT_INVALID_ROWS
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "column 'y'" in err and "lo > hi" not in err
