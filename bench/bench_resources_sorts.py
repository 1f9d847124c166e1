"""Issue 23, items 4, 5, 6: import time, per-call cost, sort-based metrics on every core.

Not part of the test run.  Prints each target with its measured ratio and
met / missed, then a markdown table for docs/performance.md.

    python bench/bench_resources_sorts.py            # 5e6 rows for the thread rows
    python bench/bench_resources_sorts.py --rows 1000000

Thread counts are set per subprocess (``POLARS_MAX_THREADS`` is read when
polars is imported).  Import time is measured with bytecode caches written
(an installed package has them), best of 5 fresh interpreters.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS: list[tuple[str, str, str, str]] = []


def record(target: str, measured: str, ok: bool | None, note: str = "") -> None:
    verdict = "-" if ok is None else "met" if ok else "missed"
    ROWS.append((target, measured, verdict, note))
    print(f"{target}: {measured} -> {verdict} {note}", flush=True)


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def import_time() -> None:
    env = _env(PYTHONPYCACHEPREFIX=tempfile.mkdtemp(prefix="cf_pyc_"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = "import time; t = time.perf_counter(); import conformal_frames; print(time.perf_counter() - t)"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)  # writes bytecode
    best = min(
        float(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout)
        for _ in range(5)
    )
    record("6. import conformal_frames <= 0.6 s", f"{best:.3f} s", best <= 0.6)


SMALL = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
import conformal_frames as cf
from bench_metrics import make_data, polars_coverage, single_pass_metrics
def best(fn, r):
    out = []
    for _ in range(r):
        gc.collect(); t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
    return min(out)
small = make_data(1000, 3, seed=2)
pdf = small.to_pandas()
sp = single_pass_metrics()
cov = cf.coverage("y", "lo", "hi")
print(json.dumps({
    "ours": best(lambda: small.conformal.coverage("y", "lo", "hi"), 200),
    "hand": best(lambda: polars_coverage(small), 200),
    "cov": best(lambda: cf.evaluate(small, cov), 200),
    "eight": best(lambda: cf.evaluate(small, *sp), 200),
    "pandas": best(lambda: cf.evaluate(pdf, cov, cf.ssc("y", "lo", "hi"), by="seg"), 50),
}))
"""


def per_call() -> None:
    for threads in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", SMALL, str(HERE)],
            env=_env(POLARS_MAX_THREADS=threads),
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        t = json.loads(out.strip().splitlines()[-1])
        above = (t["ours"] - t["hand"]) * 1e3
        record(
            f"5. coverage on 1,000 rows, {threads} polars thread(s): <= 0.5 ms above hand-written polars",
            f"{t['ours'] * 1e3:.2f} ms vs {t['hand'] * 1e3:.2f} ms (+{above:.2f} ms)",
            above <= 0.5,
        )
        ratio = t["eight"] / t["cov"]
        record(
            f"5. evaluate(8 single-pass) vs coverage, 1,000 rows, {threads} thread(s): <= 3x",
            f"{ratio:.2f}x ({t['eight'] * 1e3:.2f} / {t['cov'] * 1e3:.2f} ms)",
            ratio <= 3,
        )
        if threads == "1":
            record("5. pandas coverage+ssc, 1,000 rows by 3 groups (was 13.0 ms)", f"{t['pandas'] * 1e3:.2f} ms", None)


SORTS = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
import polars as pl
import conformal_frames as cf
from bench_metrics import sort_metrics, sorts_data
n = int(sys.argv[2])
df = sorts_data(n)
def best(fn, r=3):
    out = []
    for _ in range(r):
        gc.collect(); t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
    return min(out)
metrics = sort_metrics()
out = {"sort": best(lambda: df.select(pl.col("score").sort()))}
for name, m in metrics.items():
    out[name] = best(lambda m=m: cf.evaluate(df, m))
print(json.dumps(out))
"""


def sorts(n: int) -> None:
    runs = {}
    for threads in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", SORTS, str(HERE), str(n)],
            env=_env(POLARS_MAX_THREADS=threads),
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        runs[threads] = json.loads(out.strip().splitlines()[-1])
    one, two = runs["1"], runs["2"]
    for name in [k for k in one if k != "sort"]:
        scale = two[name] / one[name]
        record(
            f"4. ungrouped {name}, {n:,} rows: 2 threads <= 0.7x 1 thread",
            f"{scale:.2f}x ({two[name]:.3f} / {one[name]:.3f} s)",
            scale <= 0.7,
        )
        vs_sort = two[name] / two["sort"]
        record(
            f"4. ungrouped {name}, {n:,} rows, 2 threads: <= 2.5x one polars sort",
            f"{vs_sort:.2f}x (sort {two['sort']:.3f} s)",
            vs_sort <= 2.5,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--skip-sorts", action="store_true")
    args = parser.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    import_time()
    per_call()
    if not args.skip_sorts:
        sorts(args.rows)
    print("\n| target | measured | verdict | note |\n|---|---|---|---|")
    for row in ROWS:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
