"""Peak memory of the sort-based metrics above the frame (issue 23, item 3).

Each case runs in a subprocess of its own.  The child builds the frame,
reads its resident memory (the baseline), then evaluates the metric; the
parent reads the child's peak (``ru_maxrss``).  The figure is
``(peak - baseline) / frame size``, target at most 1x.

    python bench/bench_memory_sorts.py                 # 1e7 rows, 5 segments
    python bench/bench_memory_sorts.py --rows 1000000  # a quicker look
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = ("ks_test", "kuiper_test", "auroc", "ssc_score", "ece_quantile")


def _rss_gb() -> float:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1e6  # kB -> GB


def child(case: str, n: int, grouped: bool) -> None:
    import numpy as np
    import polars as pl

    import conformal_frames as cf

    rng = np.random.default_rng(0)
    s = rng.beta(2, 2, n)
    lo = -1.645 + 0.1 * rng.standard_normal(n)
    df = pl.DataFrame(
        {
            "seg": rng.integers(0, 5, n),
            "score": s,
            "label": (rng.random(n) < s).astype(np.int64),
            "y": rng.standard_normal(n),
            "lo": lo,
            "hi": lo + 3.29 + 0.5 * s,
        }
    )
    del s, lo
    metric = {
        "ks_test": cf.ks_test("label", "score"),
        "kuiper_test": cf.kuiper_test("label", "score"),
        "auroc": cf.auroc("label", "score"),
        "ssc_score": cf.ssc_score("y", "lo", "hi", n_bins=3),
        "ece_quantile": cf.ece("label", "score", n_bins=10, strategy="quantile"),
    }[case]
    cf.evaluate(df.head(1000), metric, by="seg" if grouped else None)  # lazy imports out of the figure
    base = _rss_gb()
    cf.evaluate(df, metric, by="seg" if grouped else None)
    print(json.dumps({"base": base, "frame": df.estimated_size() / 1e9}))


def run(case: str, n: int, grouped: bool) -> tuple[float, float]:
    """``(peak - baseline, frame size)`` in GB for one case in a subprocess."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent / "src"), env.get("PYTHONPATH", "")])
    args = [sys.executable, __file__, "--child", case, "--rows", str(n), *(["--grouped"] if grouped else [])]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, env=env, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{case} failed")
    result = json.loads(out.strip().splitlines()[-1])
    return usage.ru_maxrss / 1e6 - result["base"], result["frame"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--child")
    parser.add_argument("--grouped", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rows, args.grouped)
        return
    print(f"| metric, {args.rows:,} rows | above the frame | ratio | target <= 1x |\n|---|---|---|---|")
    for grouped in (True, False):
        for case in CASES:
            extra, frame = run(case, args.rows, grouped)
            label = f"{'grouped (5 segments)' if grouped else 'ungrouped'} {case}"
            ratio = extra / frame
            verdict = "met" if ratio <= 1 else "missed"
            print(f"| {label} | {extra:.2f} GB (frame {frame:.2f} GB) | {ratio:.2f}x | {verdict} |", flush=True)


if __name__ == "__main__":
    main()
