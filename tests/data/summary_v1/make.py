"""Writes the version-1 summary fixtures (run once, at commit 8ab0d67, the last 0.3 code).

``python tests/data/summary_v1/make.py`` with conformal-frames 0.3 on the path wrote:

- ``summary.parquet``: ``cf.summarize`` of every mergeable metric of the output
  contract's catalogue (plus weighted ones) by ``["g", "day"]`` with
  ``invalid="null"`` (group ``c`` holds an invalid row);
- ``drop.parquet``: the same for a few metrics with ``invalid="drop"``;
- ``counts.parquet``: metrics with ``counts=`` (``invalid="null"``);
- ``expected.json``: what 0.3's ``cf.finalize`` gave for each metric, by ``g`` and
  over all rows (``tests/test_summary_format.py`` checks them against this release).

Kept for the record: it needs the 0.3 code, which wrote version 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1]))

import conformal_frames as cf  # noqa: E402
from test_output_contract import CALLS, DATA  # noqa: E402

WEIGHTED = {
    "coverage_w": lambda: cf.coverage("y", "lo", "hi", weights="w").alias("coverage_w"),
    "brier_w": lambda: cf.brier("label", "score", weights="w").alias("brier_w"),
    "ks_test_w": lambda: cf.ks_test("label", "score", weights="w").alias("ks_test_w"),
    "mae_w": lambda: cf.mae("y", "mu", weights="w").alias("mae_w"),
    "wis_w": lambda: cf.wis("y", quantiles={0.1: "q10", 0.5: "q50", 0.9: "q90"}, weights="w").alias("wis_w"),
}
DROP = ["coverage", "width", "ks_test", "brier", "wis", "set_coverage"]
#: metrics with counts= (frequency counts ``k``; group ``c`` holds an invalid row)
COUNTED = {
    "mae_k": lambda: cf.mae("y", "mu", counts="k").alias("mae_k"),
    "coverage_k": lambda: cf.coverage("y", "lo", "hi", counts="k").alias("coverage_k"),
    "ks_test_k": lambda: cf.ks_test("label", "score", counts="k").alias("ks_test_k"),
}


def frame() -> pl.DataFrame:
    n = len(DATA["g"])
    return pl.DataFrame(DATA, strict=False).with_columns(
        day=pl.Series(np.arange(n) % 3, dtype=pl.Int64),
        w=pl.Series(1.0 + (np.arange(n) % 4) / 2),
        k=pl.Series(np.arange(n) % 3, dtype=pl.Int64),
    )


def mergeable(df: pl.DataFrame) -> dict[str, Any]:
    out = {}
    for name, call in {**CALLS, **WEIGHTED}.items():
        try:
            cf.summarize(df.head(2), call(), by="g", invalid="null")
        except (ValueError, TypeError, NotImplementedError):
            continue
        out[name] = call
    return out


def results(stats: pl.DataFrame, calls: dict[str, Any]) -> dict[str, Any]:
    expected = {}
    for name, call in calls.items():
        by_g = cf.finalize(stats, call(), by="g")
        total = cf.finalize(stats, call())
        expected[name] = {"by_g": by_g.to_dicts(), "all": total.to_dicts()}
    return expected


def main() -> None:
    df = frame()
    calls = mergeable(df)
    stats = cf.summarize(df, *[c() for c in calls.values()], by=["g", "day"], invalid="null")
    stats.write_parquet(HERE / "summary.parquet")
    drop_calls = {k: calls[k] for k in DROP}
    dropped = cf.summarize(df, *[c() for c in drop_calls.values()], by=["g", "day"], invalid="drop")
    dropped.write_parquet(HERE / "drop.parquet")
    counted = cf.summarize(df, *[c() for c in COUNTED.values()], by=["g", "day"], invalid="null")
    counted.write_parquet(HERE / "counts.parquet")
    expected = {
        "null": results(stats, calls),
        "drop": results(dropped, drop_calls),
        "counts": results(counted, COUNTED),
    }
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, default=str) + "\n")
    print(len(calls), "metrics:", ", ".join(calls))


if __name__ == "__main__":
    main()
