"""Streaming: evaluate a Parquet dataset larger than memory with polars.

    python bench/bench_streaming.py --rows 100_000_000    # writes bench/data/ once

Writes the dataset in chunks (never whole in memory; ``bench/data/`` is not in
git), then runs each evaluation in a fresh subprocess and reports wall time and
the subprocess's peak RSS (``ru_maxrss``):

1. ``evaluate(coverage, width, winkler, ece, spiegelhalter_test, by=[region, model])``
   collected with ``engine="streaming"``;
2. ``ks_test`` with the same ``by=``, streaming;
3. ``ks_test`` and ``kuiper_test`` with the same ``by=`` in bounded memory:
   each Parquet file (2e6 rows) is summarized (:func:`conformal_frames.summarize`),
   every 4 summaries are merged into the running state (:func:`conformal_frames.merge_summaries`),
   and the state finalized at the end; ``state_rows`` is the size of that
   state (one row per group and distinct score).

``--cases chunked`` runs only the third; ``--check`` compares it with
``evaluate`` on the whole dataset (small datasets only).
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


CHUNKED = r"""
import glob, json, resource, sys, time
import polars as pl
import conformal_frames as cf
files = sorted(glob.glob(sys.argv[1] + "/*.parquet"))
metrics = [cf.ks_test("label", "score"), cf.kuiper_test("label", "score")]
keys = ["region", "model"]
t0 = time.perf_counter()
state, pending = None, []
for i, path in enumerate(files):
    pending.append(cf.summarize(pl.read_parquet(path, columns=[*keys, "label", "score"]), *metrics, by=keys))
    if len(pending) == 4 or i == len(files) - 1:  # merge every 4 chunks (8e6 rows)
        state = cf.merge_summaries(pl.concat([s for s in (state, *pending) if s is not None]), by=keys)
        pending = []
out = cf.finalize(state, *metrics, by=keys)
elapsed = time.perf_counter() - t0
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
result = {"which": "chunked", "seconds": elapsed, "peak_rss_mb": peak_mb, "groups": out.height,
          "rows": int(out["n"].sum()), "state_rows": state.height, "state_mb": state.estimated_size() / 1e6}
if sys.argv[2] == "check":
    whole = cf.evaluate(pl.scan_parquet(sys.argv[1] + "/*.parquet"), *metrics, by=keys).collect()
    cols = ["ks_test", "ks_test_pvalue", "kuiper_test", "kuiper_test_pvalue"]
    result["max_abs_diff"] = max(float((out[c] - whole[c]).abs().max()) for c in cols)
print(json.dumps(result))
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
    parser.add_argument("--cases", default="five,ks,chunked", help="comma-separated: five, ks, chunked")
    parser.add_argument("--check", action="store_true", help="chunked: compare with evaluate on the whole data")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    write_dataset(args.rows)
    print(
        f"dataset: {args.rows:,} rows in {DATA} (written in {time.perf_counter() - t0:.0f} s; "
        f"{sum(p.stat().st_size for p in DATA.glob('*.parquet')) / 1e9:.2f} GB)",
        flush=True,
    )
    for which in args.cases.split(","):
        script, arg = (CHUNKED, "check" if args.check else "") if which == "chunked" else (EVALUATE, which)
        res = subprocess.run([sys.executable, "-c", script, str(DATA), arg], capture_output=True, text=True)
        if res.returncode != 0:
            print(f"{which}: FAILED\n{res.stderr[-3000:]}")
            continue
        print(json.loads(res.stdout.strip().splitlines()[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
