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
CASES = ("ks_test", "kuiper_test", "auroc", "ssc_score", "ece (quantile bins)")


def _rss_gb() -> float:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1e6  # kB -> GB


def child(case: str, n: int, grouped: bool) -> None:
    sys.path.insert(0, str(HERE))
    from bench_metrics import sort_metrics, sorts_data

    import conformal_frames as cf

    df = sorts_data(n, n_segments=5)
    metric = sort_metrics()[case]
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
