"""How many shuffles (exchanges) each metric adds to a PySpark plan.

Planning only (nothing is executed): a small frame, one ``evaluate`` per
metric grouped by one key, and the ``Exchange`` nodes of Spark's physical
plan counted.  Run: ``python bench/spark_plans.py`` (needs pyspark and Java).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import polars as pl

import conformal_frames as cf


def frame(n: int = 200, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    score = rng.uniform(size=n)
    probs = rng.dirichlet([1.0, 1.0, 1.0], n)
    return pl.DataFrame(
        {
            "seg": rng.integers(0, 5, n),
            "t": np.arange(n),
            "y": y,
            "lo": y - rng.uniform(0.5, 1.5, n),
            "hi": y + rng.uniform(-0.2, 1.5, n),
            "x": rng.normal(size=n),
            "label": (rng.uniform(size=n) < score).astype(np.int64),
            "score": score,
            "other": rng.uniform(size=n),
            "w": rng.uniform(0.5, 2.0, n),
            "y3": rng.integers(0, 3, n),
            "p0": probs[:, 0],
            "p1": probs[:, 1],
            "p2": probs[:, 2],
            "q10": y - 1.3,
            "q50": y + 0.1,
            "q90": y + 1.3,
            "mu": y + 0.2,
            "sd": np.full(n, 1.0),
        }
    )


SINGLE_PASS = [
    cf.coverage("y", "lo", "hi"),
    cf.width("lo", "hi"),
    cf.winkler("y", "lo", "hi", confidence_level=0.9),
    cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
    cf.ece("label", "score"),
    cf.mce("label", "score"),
    cf.brier("label", "score"),
    cf.spiegelhalter_test("label", "score"),
]


def metrics() -> dict[str, list[Any]]:
    quantiles = {0.1: "q10", 0.5: "q50", 0.9: "q90"}
    one: dict[str, list[Any]] = {m.output_name: [m] for m in SINGLE_PASS}
    one["coverage, weights="] = [cf.coverage("y", "lo", "hi", weights="w")]
    one["ece, strategy='quantile'"] = [cf.ece("label", "score", strategy="quantile")]
    one.update(
        {
            m.output_name: [m]
            for m in [
                cf.ssc_score("y", "lo", "hi"),
                cf.ks_test("label", "score"),
                cf.kuiper_test("label", "score"),
                cf.auroc("label", "score"),
                cf.reliability("label", "score"),
                cf.top_label_ece("y3", ["p0", "p1", "p2"]),
                cf.coverage_test("y", "lo", "hi", confidence_level=0.9),
                cf.pinball_loss("y", quantiles=quantiles),
                cf.wis("y", quantiles=quantiles),
                cf.crps("y", mean="mu", std="sd"),
                cf.pit_test("y", mean="mu", std="sd"),
                cf.kupiec_test("y", "lo", "hi", confidence_level=0.9),
                cf.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by="t"),
                cf.diebold_mariano_test("label", "score", "other", order_by="t", small_sample=None),
            ]
        }
    )
    one["evaluate(8 single-pass)"] = SINGLE_PASS
    one["evaluate(8 + ssc_score + ks_test)"] = [
        *SINGLE_PASS,
        cf.ssc_score("y", "lo", "hi"),
        cf.ks_test("label", "score"),
    ]
    return one


def main() -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    sdf = spark.createDataFrame(frame().to_pandas())
    # a stage ends at each exchange: the query runs in (exchanges + 1) stages
    print("| metric(s), by one key | exchanges (shuffles) in the physical plan | stages |")
    print("|---|---:|---:|")
    for name, ms in metrics().items():
        try:
            out = cf.evaluate(sdf, *ms, by="seg", invalid="null")
            plan = out._jdf.queryExecution().executedPlan().toString()
            exchanges = plan.count("Exchange ")
            print(f"| {name} | {exchanges} | {exchanges + 1} |", flush=True)
        except Exception as exc:  # a metric that cannot stay lazy on Spark says so
            print(f"| {name} | not lazy on Spark: {type(exc).__name__} | - |", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
