"""Benchmarks: conformal-frames vs hand-written polars vs the numpy baseline.

Not part of the test run.  Needs polars, pandas and (for the baseline rows)
the ``mapie`` package: ``pip install -e . polars pandas mapie``.

    python bench/bench_metrics.py            # 1e6 rows, 1,000 segments
    python bench/bench_metrics.py --quick    # 1e5 rows (smoke run)

Every ratio is measured in the same process run: the best of ``--repeat``
runs of each side.  Prints a markdown table (docs/performance.md).
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


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def make_data(n: int, n_segments: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 10, n)
    sigma = 0.3 + 0.2 * x
    y = np.sin(x) + x / 2 + sigma * rng.standard_normal(n)
    half = 1.645 * sigma * rng.uniform(0.8, 1.2, n)
    mu = np.sin(x) + x / 2
    score = np.round(rng.beta(2, 2, n), 4)  # ties
    label = (rng.random(n) < score).astype(np.int64)
    return pl.DataFrame(
        {
            "seg": rng.integers(0, n_segments, n).astype(np.int64),
            "y": y,
            "lo": mu - half,
            "hi": mu + half,
            "score": score,
            "label": label,
        }
    )


# --------------------------------------------------------------------------
# hand-written polars doing the same computations
# --------------------------------------------------------------------------
def polars_coverage_width(df: pl.DataFrame, by: str | None) -> pl.DataFrame:
    exprs = [
        ((pl.col("lo") <= pl.col("y")) & (pl.col("y") <= pl.col("hi"))).mean().alias("coverage"),
        (pl.col("hi") - pl.col("lo")).mean().alias("width"),
    ]
    return (df.group_by(by).agg(exprs).sort(by)) if by else df.select(exprs)


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
        from mapie.metrics.regression import (
            regression_coverage_score,
            regression_mean_width_score,
            regression_ssc_score,
        )
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

    def ssc(g: Any) -> float:
        intervals = np.stack([g["lo"].to_numpy(), g["hi"].to_numpy()], axis=1)[:, :, None]
        return float(regression_ssc_score(g["y"].to_numpy(), intervals, num_bins=3)[0])

    return {"cov_width": cov_width, "ece": ece, "ks": ks, "ssc": ssc}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--segments", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1e5 rows, scaling up to 1e6")
    parser.add_argument("--no-scaling", action="store_true")
    args = parser.parse_args(argv)
    n = 100_000 if args.quick else args.rows
    df = make_data(n, args.segments)
    pdf = df.to_pandas()
    baseline = mapie_functions()
    rows: list[tuple[str, float, float, str, str]] = []

    def record(what: str, ours: float, other: float, target: str, kind: str) -> None:
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
            shown = f"{1 / ratio:.1f}x faster"
        rows.append((what, ours, other, shown, f"{target}: {met}" if target else "(reported)"))
        print(
            f"{what:<58} ours {ours * 1e3:9.1f} ms  other {other * 1e3:9.1f} ms  {shown:>16}  {target} {met}",
            flush=True,
        )

    r = args.repeat
    has_calibration = hasattr(cf, "ece") and hasattr(cf, "ks_test")

    # grouped, polars input vs hand-written polars
    record(
        "grouped coverage+width vs hand-written polars",
        best_of(lambda: cf.evaluate(df, cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), by="seg"), r),
        best_of(lambda: polars_coverage_width(df, "seg"), r),
        "<= 1.3x",
        "slower-at-most",
    )
    if has_calibration:
        record(
            "grouped ECE (10 uniform bins) vs hand-written polars",
            best_of(lambda: cf.evaluate(df, cf.ece("label", "score", n_bins=10), by="seg"), r),
            best_of(lambda: polars_ece(df, "seg"), r),
            "<= 1.3x",
            "slower-at-most",
        )
        record(
            "grouped KS vs hand-written polars",
            best_of(lambda: cf.evaluate(df, cf.ks_test("label", "score"), by="seg"), r),
            best_of(lambda: polars_ks(df, "seg"), r),
            "<= 1.3x",
            "slower-at-most",
        )

    # grouped vs pandas groupby.apply of the baseline
    if baseline is not None:
        grouped = pdf.groupby("seg")
        apply = lambda fn: grouped.apply(fn, include_groups=False)  # noqa: E731
        record(
            "grouped coverage+width vs pandas groupby.apply(mapie)",
            best_of(lambda: cf.evaluate(df, cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), by="seg"), r),
            best_of(lambda: apply(baseline["cov_width"]), 1),
            ">= 10x",
            "faster-at-least",
        )
        if has_calibration:
            record(
                "grouped ECE vs pandas groupby.apply(mapie)",
                best_of(lambda: cf.evaluate(df, cf.ece("label", "score", n_bins=10), by="seg"), r),
                best_of(lambda: apply(baseline["ece"]), 1),
                ">= 10x",
                "faster-at-least",
            )
            record(
                "grouped KS vs pandas groupby.apply(mapie)",
                best_of(lambda: cf.evaluate(df, cf.ks_test("label", "score"), by="seg"), r),
                best_of(lambda: apply(baseline["ks"]), 1),
                ">= 10x",
                "faster-at-least",
            )

        # ungrouped vs the baseline on numpy arrays
        from mapie.metrics.regression import (
            regression_coverage_score,
            regression_mean_width_score,
            regression_ssc_score,
        )

        y, lo, hi = (df[c].to_numpy() for c in ("y", "lo", "hi"))
        intervals = np.stack([lo, hi], axis=1)[:, :, None]
        record(
            "ungrouped coverage vs mapie (numpy)",
            best_of(lambda: df.conformal.coverage("y", "lo", "hi"), r),
            best_of(lambda: regression_coverage_score(y, intervals), r),
            "<= 1.5x",
            "slower-at-most",
        )
        record(
            "ungrouped width vs mapie (numpy)",
            best_of(lambda: df.conformal.width("lo", "hi"), r),
            best_of(lambda: regression_mean_width_score(intervals), r),
            "<= 1.5x",
            "slower-at-most",
        )
        record(
            "ungrouped SSC score (3 bins) vs mapie (numpy)",
            best_of(lambda: df.conformal.ssc_score("y", "lo", "hi", n_bins=3), r),
            best_of(lambda: regression_ssc_score(y, intervals, num_bins=3), r),
            ">= 2x",
            "faster-at-least",
        )
        if has_calibration:
            from mapie.metrics.calibration import expected_calibration_error, kolmogorov_smirnov_statistic

            lab, sc = df["label"].to_numpy(), df["score"].to_numpy()
            record(
                "ungrouped ECE vs mapie (numpy)",
                best_of(lambda: df.conformal.ece("label", "score", n_bins=10), r),
                best_of(lambda: expected_calibration_error(lab, sc, num_bins=10), r),
                ">= 2x",
                "faster-at-least",
            )
            record(
                "ungrouped KS vs mapie (numpy)",
                best_of(lambda: df.conformal.ks_test("label", "score"), r),
                best_of(lambda: kolmogorov_smirnov_statistic(lab, sc), r),
                ">= 2x",
                "faster-at-least",
            )

    # pandas input vs polars input, same call
    record(
        "pandas input vs polars input (grouped coverage+width)",
        best_of(lambda: cf.evaluate(pdf, cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), by="seg"), r),
        best_of(lambda: cf.evaluate(df, cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), by="seg"), r),
        "",
        "slower-at-most",
    )

    # one pass: 8 metrics vs one coverage (single-pass metrics, then with the
    # two that need ordered windows: ssc_score and ks)
    single_pass = [
        cf.coverage("y", "lo", "hi"),
        cf.width("lo", "hi"),
        cf.winkler("y", "lo", "hi", confidence_level=0.9),
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
    ]
    if has_calibration:
        single_pass += [
            cf.ece("label", "score", n_bins=10),
            cf.mce("label", "score", n_bins=10),
            cf.brier("label", "score"),
            cf.spiegelhalter_test("label", "score"),
        ]
        with_windows = [*single_pass[:6], cf.ssc_score("y", "lo", "hi", n_bins=3), cf.ks_test("label", "score")]
    else:
        with_windows = []
    t_cov = best_of(lambda: cf.evaluate(df, cf.coverage("y", "lo", "hi"), by="seg"), r)
    record(
        f"one pass: evaluate({len(single_pass)} single-pass metrics) vs coverage alone (grouped)",
        best_of(lambda: cf.evaluate(df, *single_pass, by="seg"), r),
        t_cov,
        "<= 3x",
        "slower-at-most",
    )
    if with_windows:
        record(
            "one pass: evaluate(8 metrics incl. ssc_score, ks) vs coverage alone (grouped)",
            best_of(lambda: cf.evaluate(df, *with_windows, by="seg"), r),
            t_cov,
            "<= 3x",
            "slower-at-most",
        )

    # HSIC
    t_hsic = best_of(lambda: df.conformal.hsic("y", "lo", "hi"), r)
    print(f"HSIC ungrouped on {n:,} rows: {t_hsic:.3f} s", flush=True)
    t_hsic_g = best_of(lambda: df.conformal.hsic("y", "lo", "hi", by="seg"), r)
    print(f"HSIC grouped ({args.segments} segments) on {n:,} rows: {t_hsic_g:.3f} s", flush=True)

    scaling: list[tuple[int, float]] = []
    if not args.no_scaling:
        sizes = [10_000, 100_000, 1_000_000] + ([] if args.quick else [10_000_000])
        metrics = [cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"), cf.ssc_score("y", "lo", "hi")]
        if has_calibration:
            metrics += [cf.ece("label", "score"), cf.ks_test("label", "score")]
        for size in sizes:
            d = make_data(size, args.segments, seed=1)
            t = best_of(lambda d=d: cf.evaluate(d, *metrics, by="seg"), 1 if size >= 10_000_000 else r)
            scaling.append((size, t))
            print(f"scaling: n={size:>10,}  {t:8.3f} s  ({t / size * 1e9:6.1f} ns/row)", flush=True)
            del d

    print()
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"polars {pl.__version__}, numpy {np.__version__}, narwhals {__import__('narwhals').__version__}"
        + (f", mapie {__import__('mapie').__version__}" if baseline else "")
    )
    print(f"Data: {n:,} rows, {args.segments:,} segments; best of {r} runs\n")
    print("| comparison | ours (ms) | other (ms) | ratio | target |")
    print("|---|---:|---:|---:|---|")
    for what, ours, other, shown, target in rows:
        print(f"| {what} | {ours * 1e3:.1f} | {other * 1e3:.1f} | {shown} | {target} |")
    print(f"\nHSIC: {t_hsic:.3f} s ungrouped, {t_hsic_g:.3f} s grouped ({n:,} rows)")
    if scaling:
        print("\n| n | time (s) | ns per row |\n|---:|---:|---:|")
        for size, t in scaling:
            print(f"| {size:,} | {t:.3f} | {t / size * 1e9:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
