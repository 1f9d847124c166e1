"""The CLI on par with report(): a flag per option, every role named, errors in CLI words (issue 24)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest

import conformal_frames as cf
from conformal_frames import cli

pl = pytest.importorskip("polars", reason="the CLI reads files with polars")


@pytest.fixture(scope="module")
def parquet(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    n = 400
    x = rng.normal(size=n)
    frame = pl.DataFrame(
        {
            "g": rng.choice(["a", "b"], n),
            "y": x + rng.normal(size=n),
            "lo80": x - 1.28,
            "hi80": x + 1.28,
            "lo90": x - 1.64,
            "hi90": x + 1.64,
            "q10": x - 1.28,
            "q50": x,
            "q90": x + 1.28,
        }
    )
    path = tmp_path_factory.mktemp("parity") / "f.parquet"
    frame.write_parquet(path)
    return path


def _flags() -> set[str]:
    report = next(a for a in cli.build_parser()._subparsers._group_actions[0].choices.items() if a[0] == "report")[1]
    return {s for action in report._actions for s in action.option_strings}


def test_every_report_option_has_a_flag() -> None:
    options = [p for p in inspect.signature(cf.report).parameters if p != "frame"]
    assert sorted(cli.REPORT_OPTIONS) == sorted(options), "a report() option without a CLI flag, or a stale entry"
    flags = _flags()
    assert not [f for f in cli.REPORT_OPTIONS.values() if f not in flags]


def test_hsic_n_calibration_ci_level(parquet: Path, capsys) -> None:
    argv = ["report", str(parquet), "--y", "y", "--lo", "lo90", "--hi", "hi90", "--by", "g", "-q", "--format", "json"]
    assert cli.main([*argv, "--confidence-level", "0.9", "--hsic", "--n-calibration", "200", "--ci-level", "0.8"]) == 0
    rows = json.loads(capsys.readouterr().out)["tables"]["intervals"]
    frame = pl.read_parquet(parquet)
    rep = cf.report(
        frame, y="y", lo="lo90", hi="hi90", by="g", confidence_level=0.9, hsic=True, n_calibration=200, ci_level=0.8
    )
    for column in ("hsic", "coverage_ci_low", "pvalue"):
        assert [r[column] for r in rows] == pytest.approx(rep.table[column].to_list(), rel=1e-12), column
    assert cli.main([*argv, "--hsic", "--memory", "bounded"]) == cli.EXIT_USAGE
    assert "--hsic needs all rows of each group" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (
            ["--y", "y"],
            "--y alone is not enough: give --lo and --hi (intervals), --score (calibration), "
            "--sets (prediction sets), --quantiles, --intervals or --mean and --std (forecasts)",
        ),
        ([], "nothing to report: give --y with --lo and --hi"),
        (["--y", "y", "--intervals", "0.8=lo80:hi80,0.8=lo90:hi90"], "argument --intervals: level 0.8 is given twice"),
        (["--y", "y", "--intervals", "1.5=lo80:hi80"], "level 1.5 in '1.5=lo80:hi80' is not strictly between 0 and 1"),
        (["--y", "y", "--intervals", "0.8=lo80:lo80"], "argument --intervals: column 'lo80' is given twice"),
        (["--y", "y", "--quantiles", "0.1=q10,0.9=q10"], "argument --quantiles: column 'q10' is given twice"),
        (["--y", "y", "--lo", "lo80", "--hi", "hi80", "--confidence-level", "g", "--by", "g"], "--by"),
    ],
)
def test_errors_in_cli_words(parquet: Path, capsys, extra: list[str], words: str) -> None:
    assert cli.main(["report", str(parquet), *extra, "-q", "--no-plots"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
    for python in ("intervals=", "quantiles=", "{", "confidence_level=", "y="):
        assert python not in err, err


def test_note_without_confidence_level(parquet: Path, capsys) -> None:
    assert cli.main(["report", str(parquet), "--y", "y", "--lo", "lo90", "--hi", "hi90", "-q", "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert "conformal-frames: note: no --confidence-level: the report leaves out the Winkler score and the " in err
    assert "coverage tests" in err and "under- and over-covered" in err
    assert (
        cli.main(
            [
                "report",
                str(parquet),
                "--y",
                "y",
                "--lo",
                "lo90",
                "--hi",
                "hi90",
                "--confidence-level",
                "0.9",
                "-q",
                "--no-plots",
            ]
        )
        == 0
    )
    assert "note" not in capsys.readouterr().err
