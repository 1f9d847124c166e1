"""The ordered-window metrics (auarc, christoffersen_test, diebold_mariano_test) as polars expressions.

    python bench/bench_polars_windows.py            # 1e6 rows in 1,000 groups, lazy
    python bench/bench_polars_windows.py --quick    # 1e5 rows

Grouped, lazy: ``group_by("g").agg(cfx.<metric>)`` against ``cf.evaluate(lf,
<metric>, by="g")`` on the same LazyFrame (both collected), each timed once per
round, rounds interleaved, medians: ratios compare timings of one run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

import conformal_frames as cf
import conformal_frames.polars as cfx


def frame(n: int, groups: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    return pl.DataFrame(
        {
            "g": np.repeat(np.arange(groups), n // groups),
            "t": np.tile(np.arange(n // groups), groups),
            "y": y,
            "lo": y - 1.5 + rng.normal(size=n) * 0.3,
            "hi": y + 1.5 + rng.normal(size=n) * 0.3,
            "a": y + rng.normal(size=n) * 0.5,
            "b": y + rng.normal(size=n) * 0.6,
            "label": (rng.random(n) < 0.7).astype(float),
            "score": rng.random(n).round(3),
        }
    ).sample(fraction=1.0, shuffle=True, seed=seed)


METRICS = {
    "auarc": lambda: cf.auarc("label", "score"),
    "christoffersen_test": lambda: cf.christoffersen_test("y", "lo", "hi", confidence_level=0.9, order_by="t"),
    "diebold_mariano_test (hln)": lambda: cf.diebold_mariano_test("y", "a", "b", order_by="t"),
    "diebold_mariano_test (None, h=3)": lambda: cf.diebold_mariano_test(
        "y", "a", "b", order_by="t", horizon=3, small_sample=None
    ),
}


def timed(variants: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in variants}
    for fn in variants.values():
        fn()
    for _ in range(rounds):
        for k, fn in variants.items():
            start = time.perf_counter()
            fn()
            times[k].append((time.perf_counter() - start) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 100_000 if args.quick else 1_000_000
    lf = frame(n, 1_000).lazy()
    print(f"{n:,} rows, 1,000 groups, lazy; ms (median of 3 rounds)")
    for name, make in METRICS.items():
        metric = make()
        expr = cfx.to_expr(metric)
        variants = {
            "cfx": lambda expr=expr: lf.group_by("g").agg(expr).collect(),
            "evaluate": lambda metric=metric: cf.evaluate(lf, metric, by="g").collect(),
        }
        t = timed(variants, 3)
        print(f"{name:34s} cfx {t['cfx']:8.1f}  evaluate {t['evaluate']:8.1f}  ratio {t['evaluate'] / t['cfx']:.2f}x")


if __name__ == "__main__":
    main()
