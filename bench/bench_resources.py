"""Time and peak memory of the long computations (issue 23, items 1, 2, 7, 8).

Each case runs in a subprocess of its own; its peak resident memory is the
child's ``ru_maxrss`` (``os.wait4``), its time the computation alone (data
generation excluded).  Prints every target with its figure, ratio and
met/missed.

    python bench/bench_resources.py            # bootstrap 1e6 x 5 segments, worst slab 1e6 x 2 features
    python bench/bench_resources.py --rows 100000   # a quicker look
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _data(n: int, n_segments: int):
    sys.path.insert(0, str(HERE))
    from bench_metrics import make_data

    return make_data(n, n_segments, seed=1)


def child(case: str, n: int) -> None:
    import conformal_frames as cf

    if case == "bootstrap":
        df = _data(n, 5)
        t0 = time.perf_counter()
        out = cf.evaluate(df, cf.bootstrap(cf.ece("label", "score")), by="seg")
        elapsed = time.perf_counter() - t0
        value = out["ece_ci_high"].to_list()
    elif case == "worst_slab":
        df = _data(n, 1)
        t0 = time.perf_counter()
        value = df.conformal.worst_slab_coverage("y", "lo", "hi", features=["x", "score"])
        elapsed = time.perf_counter() - t0
    else:  # pragma: no cover - a typo on the command line
        raise SystemExit(f"unknown case {case}")
    print(json.dumps({"seconds": elapsed, "value": value}))


def run(case: str, n: int) -> tuple[float, float]:
    """``(seconds, peak GB)`` of one case in a subprocess (its CPU seconds printed too)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", case, "--rows", str(n)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{case} failed ({proc.returncode})")
    result = json.loads(out.strip().splitlines()[-1])
    print(f"# {case}: {result['seconds']:.1f} s wall, {usage.ru_utime + usage.ru_stime:.1f} s CPU (process)")
    return float(result["seconds"]), usage.ru_maxrss / 1e6  # KiB on Linux -> GB


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--child", default=None)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rows)
        return
    n = args.rows
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"# bench_resources: {n:,} rows, load average {load} at start")
    rows = []
    seconds, peak = run("bootstrap", n)
    rows.append(
        (f"bootstrap(ece) at its defaults (1,000 resamples), {n:,} rows x 5 segments: time", seconds, 45.0, "s")
    )
    rows.append((f"bootstrap(ece) at its defaults, {n:,} rows x 5 segments: peak memory", peak, 3.0, "GB"))
    seconds, peak = run("worst_slab", n)
    rows.append((f"worst_slab_coverage at its defaults, {n:,} rows, 2 features: time", seconds, 8.0, "s"))
    rows.append((f"worst_slab_coverage at its defaults, {n:,} rows, 2 features: peak memory", peak, None, "GB"))
    print("| target | figure | target | ratio | |")
    print("|---|---:|---:|---:|---|")
    for what, figure, target, unit in rows:
        if target is None:
            print(f"| {what} | {figure:.2f} {unit} | - | - | (reported) |")
            continue
        ratio = figure / target
        print(
            f"| {what} | {figure:.2f} {unit} | {target:g} {unit} | {ratio:.2f}x | {'met' if ratio <= 1 else 'missed'} |"
        )


if __name__ == "__main__":
    main()
