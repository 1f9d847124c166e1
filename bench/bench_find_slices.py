"""cf.find_slices: time, planted-slice recovery and null false discoveries; prints the figures.

    python bench/bench_find_slices.py                 # timings at 1e5 and 1e6 rows + the simulations
    python bench/bench_find_slices.py --rows 100000   # one size
    python bench/bench_find_slices.py --runs 200      # the simulations' runs (default 200)

Timings: 5 features (3 categorical with 4, 3 and 5 values, 2 numeric in 4
quantile bins), ``max_order=2``: 1 + 5 + 10 = 16 grouped evaluations of
``coverage_test``, on pandas, polars (eager and lazy) and DuckDB (best of 3).

Simulations (polars, 3000 rows, 3 features, 37 slices): with coverage exactly
0.9 everywhere, the fraction of runs with any significant slice (Holm and
BH at 5%, and with no correction); with a planted two-feature slice of
coverage 0.75, the fraction of runs where it ranks first and is significant.
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import duckdb
import numpy as np
import polars as pl
from scipy.stats import norm

import conformal_frames as cf

warnings.simplefilter("ignore")
Z90 = norm.ppf(0.95)


def data(n: int, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    half = np.full(n, Z90)
    region = rng.choice(["EU", "US", "APAC", "LATAM"], n)
    age = rng.uniform(18, 80, n)
    half[(region == "EU") & (age >= 64.5)] = norm.ppf(0.5 + 0.8 / 2)
    return {
        "y": rng.normal(size=n),
        "lo": -half,
        "hi": half,
        "region": region,
        "device": rng.choice(["mobile", "desktop", "tablet"], n),
        "plan": rng.choice(["a", "b", "c", "d", "e"], n),
        "age": age,
        "income": rng.lognormal(10, 1, n),
    }


FEATURES = ["region", "device", "plan", "age", "income"]


def timings(rows: list[int]) -> None:
    metric = cf.coverage_test("y", "lo", "hi", confidence_level=0.9)
    print("| rows | pandas | polars | polars lazy | duckdb | slices |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in rows:
        d = data(n)
        df = pl.DataFrame(d)
        frames = {
            "pandas": df.to_pandas(),
            "polars": df,
            "polars lazy": df.lazy(),
            "duckdb": duckdb.from_arrow(df.to_arrow()),
        }
        cells, count = [], 0
        for frame in frames.values():
            best = np.inf
            for _ in range(3):
                t = time.perf_counter()
                out = cf.find_slices(frame, metric, features=FEATURES)
                out = out.collect() if isinstance(out, pl.LazyFrame) else out
                count = len(out)
                best = min(best, time.perf_counter() - t)
            cells.append(f"{best:.2f} s")
        print(f"| {n:.0e} | {' | '.join(cells)} | {count} |")


def _sim(seed: int, planted: bool) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n = 3000
    region = rng.choice(["EU", "US", "APAC"], n)
    age = rng.integers(18, 80, n).astype(float)
    half = np.full(n, Z90)
    if planted:
        half[(region == "EU") & (age >= np.quantile(age, 0.75))] = norm.ppf(0.5 + 0.75 / 2)
    frame = pl.DataFrame(
        {
            "y": rng.normal(size=n),
            "lo": -half,
            "hi": half,
            "region": region,
            "device": rng.choice(["mobile", "desktop"], n),
            "age": age,
        }
    )
    return frame


def simulations(runs: int) -> None:
    metric = cf.coverage_test("y", "lo", "hi", confidence_level=0.9)
    features = ["region", "device", "age"]
    any_holm = any_bh = any_raw = found = first = 0
    for seed in range(runs):
        null = cf.find_slices(_sim(seed, planted=False), metric, features=features)
        any_holm += bool(null["significant"].any())
        any_raw += bool((null["pvalue"] < 0.05).any())
        bh = cf.find_slices(_sim(seed, planted=False), metric, features=features, correction="bh")
        any_bh += bool(bh["significant"].any())
        planted = cf.find_slices(_sim(10_000 + seed, planted=True), metric, features=features)
        top = planted.row(0, named=True)
        is_planted = top["order"] == 2 and top["region"] == "EU" and str(top["age"]).startswith(">=")
        first += is_planted and top["significant"]
        hit = planted.filter((pl.col("order") == 2) & (pl.col("region") == "EU") & pl.col("age").str.starts_with(">="))
        found += bool(hit["significant"].any())
    print(f"null data, {runs} runs of {len(null)} slices: runs with a significant slice")
    print(f"  holm {any_holm / runs:.3f}   bh {any_bh / runs:.3f}   no correction {any_raw / runs:.3f}")
    print(f"planted slice (coverage 0.75 on ~8% of 3000 rows), {runs} runs:")
    print(f"  significant {found / runs:.3f}   ranked first and significant {first / runs:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, action="append")
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    timings(args.rows or [100_000, 1_000_000])
    if args.runs:
        simulations(args.runs)


if __name__ == "__main__":
    main()
