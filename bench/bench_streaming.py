"""Streaming: evaluate a Parquet dataset larger than memory with polars.

    python bench/bench_streaming.py --rows 100_000_000    # writes bench/data/ once

Writes the dataset in chunks (never whole in memory; ``bench/data/`` is not in
git), then runs each evaluation in a fresh subprocess and reports wall time and
the subprocess's peak RSS (``ru_maxrss``):

1. ``evaluate(coverage, width, winkler, ece, spiegelhalter_test, by=[region, model])``
   collected with ``engine="streaming"``;
2. ``ks_test`` with the same ``by=``, streaming.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "streaming"

EVALUATE = r"""
import json, resource, sys, time
import polars as pl
import conformal_frames as cf
lf = pl.scan_parquet(sys.argv[1] + "/*.parquet")
which = sys.argv[2]
if which == "five":
    metrics = [cf.coverage("y", "lo", "hi"), cf.width("lo", "hi"),
               cf.winkler("y", "lo", "hi", confidence_level=0.9),
               cf.ece("label", "score", n_bins=15), cf.spiegelhalter_test("label", "score")]
else:
    metrics = [cf.ks_test("label", "score")]
t0 = time.perf_counter()
out = cf.evaluate(lf, *metrics, by=["region", "model"]).collect(engine="streaming")
elapsed = time.perf_counter() - t0
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"which": which, "seconds": elapsed, "peak_rss_mb": peak_mb, "groups": out.height,
                  "rows": int(out["n"].sum())}))
"""


def write_dataset(rows: int, chunk: int = 2_000_000, seed: int = 0) -> None:
    import polars as pl

    DATA.mkdir(parents=True, exist_ok=True)
    done = DATA / f"_complete_{rows}"
    if done.exists():
        return
    for old in DATA.glob("*"):
        old.unlink()
    rng = np.random.default_rng(seed)
    regions = np.array(["north", "south", "east", "west", "island"])
    for i, start in enumerate(range(0, rows, chunk)):
        n = min(chunk, rows - start)
        x = rng.uniform(0, 10, n)
        sigma = 0.3 + 0.2 * x
        mu = np.sin(x) + x / 2
        half = 1.645 * sigma
        score = np.round(rng.beta(2, 2, n), 4)
        pl.DataFrame(
            {
                "region": regions[rng.integers(0, len(regions), n)],
                "model": rng.integers(0, 20, n).astype(np.int32),
                "y": mu + sigma * rng.standard_normal(n),
                "lo": mu - half,
                "hi": mu + half,
                "score": score,
                "label": (rng.random(n) < score).astype(np.int8),
            }
        ).write_parquet(DATA / f"part-{i:05d}.parquet")
    done.touch()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000_000)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    write_dataset(args.rows)
    print(
        f"dataset: {args.rows:,} rows in {DATA} (written in {time.perf_counter() - t0:.0f} s; "
        f"{sum(p.stat().st_size for p in DATA.glob('*.parquet')) / 1e9:.2f} GB)",
        flush=True,
    )
    for which in ("five", "ks"):
        res = subprocess.run([sys.executable, "-c", EVALUATE, str(DATA), which], capture_output=True, text=True)
        if res.returncode != 0:
            print(f"{which}: FAILED\n{res.stderr[-3000:]}")
            continue
        print(json.loads(res.stdout.strip().splitlines()[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
