"""Benchmarks: conformal-frames vs hand-written polars vs the numpy baseline.

Not part of the test run.  Needs polars, pandas and (for the baseline rows)
the ``mapie`` package: ``pip install -e . polars pandas mapie``.

    python bench/bench_metrics.py            # 1e6 rows, 1,000 segments
    python bench/bench_metrics.py --quick    # 1e5 rows (smoke run)
    python bench/bench_metrics.py --spark    # also the PySpark rows (local[2])

Every ratio is measured in the same process run: the best of ``--repeat``
runs of each side.  Each target of issue 13 is printed with its measured
ratio and ``met`` / ``missed``; the end prints a markdown table
(docs/performance.md).  Scores are continuous (no ties) unless ``--ties``.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

import conformal_frames as cf

Row = tuple[str, float, float, str, str]


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def make_data(n: int, n_segments: int, seed: int = 0, *, ties: bool = False) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 10, n)
    sigma = 0.3 + 0.2 * x
    y = np.sin(x) + x / 2 + sigma * rng.standard_normal(n)
    half = 1.645 * sigma * rng.uniform(0.8, 1.2, n)
    mu = np.sin(x) + x / 2
    score = rng.beta(2, 2, n)
    if ties:
        score = np.round(score, 4)
    label = (rng.random(n) < score).astype(np.int64)
    logits = rng.standard_normal((n, 3))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y3 = (rng.random(n)[:, None] > np.cumsum(probs, axis=1)).sum(axis=1).astype(np.int64)
    return pl.DataFrame(
        {
            "seg": rng.integers(0, n_segments, n).astype(np.int64),
            "y": y,
            "lo": mu - half,
            "hi": mu + half,
            "x": x,
            "score": score,
            "label": label,
            "y3": np.minimum(y3, 2),
            "p0": probs[:, 0],
            "p1": probs[:, 1],
            "p2": probs[:, 2],
        }
    )


# --------------------------------------------------------------------------
# hand-written polars doing the same computations
# --------------------------------------------------------------------------
def sorts_data(n: int, *, n_segments: int = 0, seed: int = 0) -> pl.DataFrame:
    """The frame of the sort-based benches: a Beta(2, 2) score and its label, an interval around y.

    ``n_segments > 0`` adds a key column ``seg`` (drawn last: the other columns stay the same).
    """
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 2, n)
    df = pl.DataFrame(
        {
            "score": s,
            "label": (rng.random(n) < s).astype(np.int64),
            "y": rng.standard_normal(n),
            "lo": -1.645 + 0.1 * rng.standard_normal(n),
        }
    ).with_columns(hi=pl.col("lo") + 3.29 + 0.5 * pl.col("score"))
    return df.with_columns(seg=rng.integers(0, n_segments, n)) if n_segments else df


def sort_metrics() -> dict[str, Any]:
    """The sort-based metrics of issue 23's items 3 and 4, by name."""
    return {
        "ks_test": cf.ks_test("label", "score"),
        "kuiper_test": cf.kuiper_test("label", "score"),
        "auroc": cf.auroc("label", "score"),
        "ssc_score": cf.ssc_score("y", "lo", "hi", n_bins=3),
        "ece (quantile bins)": cf.ece("label", "score", n_bins=10, strategy="quantile"),
    }


def polars_coverage_width(df: pl.DataFrame, by: str | None) -> pl.DataFrame:
    exprs = [
        ((pl.col("lo") <= pl.col("y")) & (pl.col("y") <= pl.col("hi"))).mean().alias("coverage"),
        (pl.col("hi") - pl.col("lo")).mean().alias("width"),
    ]
    return (df.group_by(by).agg(exprs).sort(by)) if by else df.select(exprs)


def polars_coverage(df: pl.DataFrame) -> pl.DataFrame:
    return df.select(((pl.col("lo") <= pl.col("y")) & (pl.col("y") <= pl.col("hi"))).mean().alias("coverage"))


def polars_ece(df: pl.DataFrame, by: str | None, num_bins: int = 10) -> pl.DataFrame:
    keys = [by] if by else []
    b = (pl.col("score") * num_bins).floor().clip(upper_bound=num_bins - 1).alias("bin")
    per_bin = df.group_by(*keys, b).agg(
        pl.len().alias("n"), pl.col("label").sum().alias("sy"), pl.col("score").sum().alias("ss")
    )
    out = per_bin.group_by(keys or pl.lit(0)).agg(
        ((pl.col("sy") - pl.col("ss")).abs().sum() / pl.col("n").sum()).alias("ece")
    )
    return out.sort(keys) if keys else out


def polars_ks(df: pl.DataFrame, by: str | None) -> pl.DataFrame:
    keys = [by] if by else []
    per_score = df.group_by(*keys, "score").agg(
        (pl.col("label") - pl.col("score")).sum().alias("d"),
        (pl.col("score") * (1 - pl.col("score"))).sum().alias("v"),
        pl.len().alias("n"),
    )
    cum = pl.col("d").cum_sum()
    per_score = per_score.with_columns(
        (cum.over(keys, order_by="score") if keys else cum.over(order_by="score")).alias("c")
    )
    agg = [pl.col("c").abs().max().alias("m"), pl.col("v").sum().alias("v"), pl.col("n").sum().alias("n")]
    out = per_score.group_by(keys).agg(agg) if keys else per_score.select(agg)
    out = out.with_columns((pl.col("m") / pl.col("v").sqrt()).alias("ks"))
    return out.sort(keys) if keys else out


# --------------------------------------------------------------------------
# the numpy baseline (mapie), grouped with pandas groupby.apply
# --------------------------------------------------------------------------
def mapie_functions() -> dict[str, Callable[..., Any]] | None:
    try:
        from mapie.metrics.calibration import expected_calibration_error, kolmogorov_smirnov_statistic
        from mapie.metrics.regression import regression_coverage_score, regression_mean_width_score
    except ImportError:
        return None

    def cov_width(g: Any) -> tuple[float, float]:
        intervals = np.stack([g["lo"].to_numpy(), g["hi"].to_numpy()], axis=1)[:, :, None]
        return (
            float(regression_coverage_score(g["y"].to_numpy(), intervals)[0]),
            float(regression_mean_width_score(intervals)[0]),
        )

    def ece(g: Any) -> float:
        return float(expected_calibration_error(g["label"].to_numpy(), g["score"].to_numpy(), num_bins=10))

    def ks(g: Any) -> float:
        return float(kolmogorov_smirnov_statistic(g["label"].to_numpy(), g["score"].to_numpy()))

    return {"cov_width": cov_width, "ece": ece, "ks": ks}


class Recorder:
    """Collects ``(what, ours, other, ratio, target)`` rows and prints each as it comes."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def __call__(self, what: str, ours: float, other: float, target: str, kind: str = "slower-at-most") -> None:
        ratio = ours / other
        if not target:
            met, shown = "", f"{ratio:.2f}x the time"
        elif kind == "slower-at-most":
            limit = float(target.split("x")[0].lstrip("<= "))
            met = "met" if ratio <= limit else "missed"
            shown = f"{ratio:.2f}x the time"
        else:  # faster-at-least
            limit = float(target.split("x")[0].lstrip(">= "))
            met = "met" if 1 / ratio >= limit else "missed"
            shown = f"{1 / ratio:.2f}x faster"
        self.rows.append((what, ours, other, shown, f"{target}: {met}" if target else "(reported)"))
        print(
            f"{what:<70} ours {ours * 1e3:9.1f} ms  other {other * 1e3:9.1f} ms  {shown:>16}  {target} {met}",
            flush=True,
        )


def grouped_rows(rec: Recorder, df: pl.DataFrame, pdf: Any, baseline: Any, r: int) -> None:
    cov_width = [cf.coverage("y", "lo", "hi"), cf.width("lo", "hi")]
    t_cw = best_of(lambda: cf.evaluate(df, *cov_width, by="seg"), r)
    rec(
        "grouped coverage+width vs hand-written polars",
        t_cw,
        best_of(lambda: polars_coverage_width(df, "seg"), r),
        "<= 1.3x",
    )
    t_ece = best_of(lambda: cf.evaluate(df, cf.ece("label", "score", n_bins=10), by="seg"), r)
    rec(
        "grouped ECE (10 uniform bins) vs hand-written polars",
        t_ece,
        best_of(lambda: polars_ece(df, "seg"), r),
        "<= 1.3x",
    )
    t_ks = best_of(lambda: cf.evaluate(df, cf.ks_test("label", "score"), by="seg"), r)
    rec("grouped KS vs hand-written polars", t_ks, best_of(lambda: polars_ks(df, "seg"), r), "<= 1.3x")
    t_sort = best_of(lambda: df.lazy().select("seg", "score").sort("seg", "score").collect(), r)
    rec("grouped KS vs one polars sort by (group, score)", t_ks, t_sort, "<= 1.5x")
    t_ku = best_of(lambda: cf.evaluate(df, cf.kuiper_test("label", "score"), by="seg"), r)
    rec("grouped Kuiper vs one polars sort by (group, score)", t_ku, t_sort, "<= 1.5x")
    if baseline is not None:
        grouped = pdf.groupby("seg")
        apply = lambda fn: grouped.apply(fn, include_groups=False)  # noqa: E731
        rec(
            "grouped coverage+width vs pandas groupby.apply(mapie)",
            t_cw,
            best_of(lambda: apply(baseline["cov_width"]), 1),
            ">= 10x",
            "faster-at-least",
        )
        rec(
            "grouped ECE vs pandas groupby.apply(mapie)",
            t_ece,
            best_of(lambda: apply(baseline["ece"]), 1),
            ">= 10x",
            "faster-at-least",
        )
        rec(
            "grouped KS vs pandas groupby.apply(mapie)",
            t_ks,
            best_of(lambda: apply(baseline["ks"]), 1),
            ">= 10x",
            "faster-at-least",
        )


def ungrouped_rows(rec: Recorder, df: pl.DataFrame, r: int) -> None:
    """Every metric ungrouped vs the baseline's numpy function on the same arrays."""
    from mapie.metrics import calibration as mc
    from mapie.metrics import regression as mr
    from sklearn.metrics import roc_auc_score

    y, lo, hi = (df[c].to_numpy() for c in ("y", "lo", "hi"))
    lab, sc = df["label"].to_numpy(), df["score"].to_numpy()
    y3, probs = df["y3"].to_numpy(), df.select("p0", "p1", "p2").to_numpy()
    iv = np.stack([lo, hi], axis=1)[:, :, None]
    ns = df.conformal
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any], str, str]] = [
        (
            "coverage",
            lambda: ns.coverage("y", "lo", "hi"),
            lambda: mr.regression_coverage_score(y, iv),
            "<= 1x",
            "slower-at-most",
        ),
        ("width", lambda: ns.width("lo", "hi"), lambda: mr.regression_mean_width_score(iv), "<= 1x", "slower-at-most"),
        (
            "SSC score (3 bins)",
            lambda: ns.ssc_score("y", "lo", "hi", n_bins=3),
            lambda: mr.regression_ssc_score(y, iv, num_bins=3),
            "<= 1x",
            "slower-at-most",
        ),
        (
            "ECE (10 uniform bins)",
            lambda: ns.ece("label", "score", n_bins=10),
            lambda: mc.expected_calibration_error(lab, sc, num_bins=10),
            ">= 2x",
            "faster-at-least",
        ),
        (
            "ECE (10 quantile bins)",
            lambda: ns.ece("label", "score", n_bins=10, strategy="quantile"),
            lambda: mc.expected_calibration_error(lab, sc, num_bins=10, split_strategy="quantile"),
            ">= 2x",
            "faster-at-least",
        ),
        (
            "top-label ECE (3 classes)",
            lambda: ns.top_label_ece("y3", ["p0", "p1", "p2"], classes=[0, 1, 2], n_bins=10),
            lambda: mc.top_label_ece(y3, probs, num_bins=10),
            "<= 1x",
            "slower-at-most",
        ),
        (
            "KS test",
            lambda: ns.ks_test("label", "score"),
            lambda: mc.kolmogorov_smirnov_statistic(lab, sc),
            ">= 2x",
            "faster-at-least",
        ),
        (
            "Kuiper test",
            lambda: ns.kuiper_test("label", "score"),
            lambda: mc.kuiper_statistic(lab, sc),
            "<= 1x",
            "slower-at-most",
        ),
        (
            "Spiegelhalter test",
            lambda: ns.spiegelhalter_test("label", "score"),
            lambda: mc.spiegelhalter_statistic(lab, sc),
            "<= 1x",
            "slower-at-most",
        ),
        (
            "AUROC (vs scikit-learn)",
            lambda: ns.auroc("label", "score"),
            lambda: roc_auc_score(lab, sc),
            "<= 1x",
            "slower-at-most",
        ),
    ]
    for what, ours, theirs, target, kind in cases:
        rec(f"ungrouped {what} vs the baseline (numpy)", best_of(ours, r), best_of(theirs, r), target, kind)
    w = hi - lo
    rec(
        "ungrouped SSC score vs one np.argsort of the widths",
        best_of(cases[2][1], r),
        best_of(lambda: np.argsort(w), r),
        "<= 3x",
    )


def overhead_rows(rec: Recorder, n_segments: int, r: int) -> None:
    small = make_data(1_000, n_segments, seed=2)
    ours = best_of(lambda: small.conformal.coverage("y", "lo", "hi"), max(r, 20))
    rec(
        "coverage on 1,000 rows vs the hand-written polars expression",
        ours,
        best_of(lambda: polars_coverage(small), max(r, 20)),
        "<= 10x",
    )


def single_pass_metrics() -> list[Any]:
    """The 8 single-pass metrics of the issue's one-pass target."""
    return [
        cf.coverage("y", "lo", "hi"),
        cf.width("lo", "hi"),
        cf.winkler("y", "lo", "hi", confidence_level=0.9),
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
        cf.ece("label", "score", n_bins=10),
        cf.mce("label", "score", n_bins=10),
        cf.brier("label", "score"),
        cf.spiegelhalter_test("label", "score"),
    ]


def one_pass_rows(rec: Recorder, df: pl.DataFrame, pdf: Any, r: int) -> None:
    single_pass = single_pass_metrics()
    sorts = [cf.ssc_score("y", "lo", "hi", n_bins=3), cf.ks_test("label", "score")]
    t_cov = best_of(lambda: cf.evaluate(df, cf.coverage("y", "lo", "hi"), by="seg"), r)
    t8 = best_of(lambda: cf.evaluate(df, *single_pass, by="seg"), r)
    rec("one pass: evaluate(8 single-pass metrics) vs coverage alone (grouped)", t8, t_cov, "<= 3x")
    t10 = best_of(lambda: cf.evaluate(df, *single_pass, *sorts, by="seg"), r)
    t_sorts = sum(best_of(lambda m=m: cf.evaluate(df, m, by="seg"), r) for m in sorts)
    rec("one pass: evaluate(8 + ssc_score + ks) vs evaluate(8) + ssc_score + ks alone", t10, t8 + t_sorts, "<= 1x")
    cw = [cf.coverage("y", "lo", "hi"), cf.width("lo", "hi")]
    rec(
        "pandas input vs polars input (grouped coverage+width)",
        best_of(lambda: cf.evaluate(pdf, *cw, by="seg"), r),
        best_of(lambda: cf.evaluate(df, *cw, by="seg"), r),
        "<= 1.5x",
    )
    rec(
        "pandas input vs polars input (grouped 8 single-pass metrics)",
        best_of(lambda: cf.evaluate(pdf, *single_pass, by="seg"), r),
        t8,
        "<= 1.5x",
    )


def slab_row(rec: Recorder, r: int) -> None:
    d = make_data(100_000, 1, seed=3)
    for features in (["x"], ["x", "score"], ["x", "score", "p0", "p1", "p2"]):
        t = best_of(lambda f=features: d.conformal.worst_slab_coverage("y", "lo", "hi", features=f), 1)
        rec(f"worst_slab_coverage at its defaults, 1e5 rows, {len(features)} feature(s) vs 5 s", t, 5.0, "<= 1x")


def scaling_rows(rec: Recorder, n_segments: int, r: int, sizes: list[int], ties: bool) -> list[tuple[int, float]]:
    metrics = [
        cf.coverage("y", "lo", "hi"),
        cf.width("lo", "hi"),
        cf.ssc_score("y", "lo", "hi"),
        cf.ece("label", "score"),
        cf.ks_test("label", "score"),
    ]
    scaling: list[tuple[int, float]] = []
    for size in sizes:
        d = make_data(size, n_segments, seed=1, ties=ties)
        t = best_of(lambda d=d: cf.evaluate(d, *metrics, by="seg"), 1 if size >= 10_000_000 else r)
        scaling.append((size, t))
        print(f"scaling: n={size:>10,}  {t:8.3f} s  ({t / size * 1e9:6.1f} ns/row)", flush=True)
        del d
    if len(scaling) >= 2:
        (n1, t1), (n2, t2) = scaling[-2], scaling[-1]
        # the time columns show ns per row for this comparison
        rec(f"per-row cost at {n2:,} rows vs at {n1:,} rows (ns per row)", t2 / n2 * 1e6, t1 / n1 * 1e6, "<= 1.3x")
    return scaling


def spark_rows(rec: Recorder, n: int, n_segments: int, r: int) -> None:
    """PySpark local[2]: single-pass evaluate vs a hand-written groupBy().agg(); one evaluate vs separate calls."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "4g")
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    sdf = spark.createDataFrame(make_data(n, n_segments).to_arrow()).cache()
    sdf.count()
    single = single_pass_metrics()

    def ours() -> Any:
        return cf.evaluate(sdf, *single, by="seg").toPandas()

    def hand() -> Any:
        # the same sums per segment: coverage, width, Winkler and CWC penalties,
        # 10 bins of (label - score) and counts, Brier, Spiegelhalter's two sums
        y, lo, hi, s, lab = (F.col(c) for c in ("y", "lo", "hi", "score", "label"))
        covered = ((lo <= y) & (y <= hi)).cast("double")
        penalty = F.when(y < lo, lo - y).when(y > hi, y - hi).otherwise(0.0) * (2 / 0.1)
        b = F.least(F.floor(s * 10), F.lit(9.0))
        aggs = [F.count(F.lit(1)), F.sum(covered), F.sum(hi - lo), F.sum(hi - lo + penalty)]
        aggs += [F.sum(F.when(b == m, lab - s).otherwise(0.0)) for m in range(10)]
        aggs += [F.sum(F.when(b == m, 1.0).otherwise(0.0)) for m in range(10)]
        aggs += [F.sum((s - lab) ** 2), F.sum((lab - s) * (1 - 2 * s)), F.sum((1 - 2 * s) ** 2 * s * (1 - s))]
        return sdf.groupBy("seg").agg(*aggs).orderBy("seg").toPandas()

    for _ in range(2):  # a warm JVM for both (its JIT compiles the planner's code on first use)
        ours()
        hand()

    def first() -> Any:  # a call that finds no kept result: builds, and Spark optimizes the new query
        cf.engine._plan_cache.clear()
        return ours()

    t_ours = best_of(ours, r)
    t_hand = best_of(hand, r)
    t_first = best_of(first, r)
    # issue 23, item 9 (2e5 cached rows): a repeated call reuses the result built for the frame
    rec(f"PySpark {n:,} cached rows: evaluate(8 single-pass) vs hand-written groupBy().agg()", t_ours, t_hand, "<= 2x")
    rec(f"PySpark {n:,} cached rows: first evaluate on a frame vs hand-written", t_first, t_hand, "")
    cf.engine._plan_cache.clear()
    t_build = best_of(lambda: (cf.engine._plan_cache.clear(), cf.evaluate(sdf, *single, by="seg")), r)
    print(f"PySpark: building the evaluate query (no execution) {t_build * 1e3:.0f} ms", flush=True)
    t_sep = best_of(
        lambda: (cf.engine._plan_cache.clear(), [cf.evaluate(sdf, m, by="seg").toPandas() for m in single]), r
    )
    rec("PySpark: one first evaluate of 8 single-pass metrics vs 8 separate first calls", t_first, t_sep, "<= 1x")
    for m in [
        cf.coverage("y", "lo", "hi"),
        cf.ece("label", "score"),
        cf.ssc_score("y", "lo", "hi"),
        cf.ks_test("label", "score"),
        cf.reliability("label", "score"),
    ]:
        plan = cf.evaluate(sdf, m, by="seg")._jdf.queryExecution().executedPlan().toString()
        print(f"PySpark plan of {type(m).__name__}: {plan.count('Exchange')} exchanges (shuffles)", flush=True)


def print_table(rec: Recorder) -> None:
    """The recorded rows as a markdown table."""
    print("| comparison | ours (ms) | other (ms) | ratio | target |")
    print("|---|---:|---:|---:|---|")
    for what, ours, other, shown, target in rec.rows:
        print(f"| {what} | {ours * 1e3:.1f} | {other * 1e3:.1f} | {shown} | {target} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--segments", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1e5 rows, scaling up to 1e6")
    parser.add_argument("--ties", action="store_true", help="scores rounded to 4 decimals (ties)")
    parser.add_argument("--no-scaling", action="store_true")
    parser.add_argument("--spark", action="store_true", help="also the PySpark rows (local[2])")
    parser.add_argument("--spark-only", action="store_true", help="only the PySpark rows")
    parser.add_argument("--spark-rows", type=int, default=200_000, help="rows of the cached PySpark frame")
    args = parser.parse_args(argv)
    if args.spark_only:
        rec = Recorder()
        spark_rows(rec, args.spark_rows, args.segments, min(args.repeat, 3))
        print_table(rec)
        return 0
    n = 100_000 if args.quick else args.rows
    df = make_data(n, args.segments, ties=args.ties)
    pdf = df.to_pandas()
    baseline = mapie_functions()
    rec = Recorder()
    r = args.repeat

    grouped_rows(rec, df, pdf, baseline, r)
    if baseline is not None:
        ungrouped_rows(rec, df, r)
    overhead_rows(rec, args.segments, r)
    one_pass_rows(rec, df, pdf, r)
    slab_row(rec, r)
    t_hsic = best_of(lambda: df.conformal.hsic("y", "lo", "hi"), r)
    t_hsic_g = best_of(lambda: df.conformal.hsic("y", "lo", "hi", by="seg"), r)
    print(f"HSIC on {n:,} rows: {t_hsic:.3f} s ungrouped, {t_hsic_g:.3f} s grouped", flush=True)
    scaling: list[tuple[int, float]] = []
    if not args.no_scaling:
        sizes = [10_000, 100_000, 1_000_000] + ([] if args.quick else [10_000_000])
        scaling = scaling_rows(rec, args.segments, r, sizes, args.ties)
    if args.spark:
        spark_rows(rec, args.spark_rows, args.segments, min(r, 3))

    print()
    versions = f"polars {pl.__version__}, numpy {np.__version__}, narwhals {__import__('narwhals').__version__}"
    versions += f", pandas {__import__('pandas').__version__}"
    if baseline:
        versions += f", mapie {__import__('mapie').__version__}"
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {versions}")
    print(
        f"Data: {n:,} rows, {args.segments:,} segments, {'tied' if args.ties else 'continuous'} scores; best of {r} runs\n"
    )
    print_table(rec)
    print(f"\nHSIC: {t_hsic:.3f} s ungrouped, {t_hsic_g:.3f} s grouped ({n:,} rows)")
    if scaling:
        print("\n| n | time (s) | ns per row |\n|---:|---:|---:|")
        for size, t in scaling:
            print(f"| {size:,} | {t:.3f} | {t / size * 1e9:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
