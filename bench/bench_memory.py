"""Peak memory of grouped KS and SSC above the frame (issue 39, item 4).

Target: at 1e7 rows, 1,000 groups, lazy, the peak resident memory above the
frame at most 1.5x the frame's size (0.3's ``evaluate``: 2.4x).

The frames and metric calls are ``bench_polars_expr.py``'s grouped ones
(``frame(n, 1000)``, ``ks_test("label", "score")``, ``ssc("y", "lo", "hi",
n_bins=3)``), restricted to the columns the metric reads (``g`` and its
inputs): the frame the ratio divides by is the data the metric needs, not the
bench's eight columns.  The parent writes each frame to a parquet file
once; every measurement runs in a subprocess of its own, which reads the file (decoded onto the heap, not memory-mapped;
no generation garbage left in the allocator), warms the call up on 1,000
rows (lazy imports out of the figure), reads its resident memory (the
baseline), resets the kernel's high-water mark (``/proc/self/clear_refs``)
and runs the query.  The figure is ``(VmHWM - baseline) / frame``, with the
frame's size both as ``estimated_size()`` and as the RSS its reading added.
The process's whole-life peak (``ru_maxrss`` through ``os.wait4``) is
printed too: it includes reading the file.

    python bench/bench_memory.py                   # 1e7 rows (~2 GB of RAM, a few minutes)
    python bench/bench_memory.py --rows 1000000    # a quicker look
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
COLUMNS = {"KS": ["g", "label", "score"], "SSC (3 bins)": ["g", "y", "lo", "hi"]}
PATHS = (
    "evaluate",
    "cfx group_by().agg",
    "evaluate, 0.3's narwhals query",
    "hand: one sort per group",
    "hand: sorted structs per group",
)
#: the column a group's rows are sorted by in the hand-written floors (KS: the score; SSC: the width)
ORDER = {"KS": "score", "SSC (3 bins)": "width"}


def _status_gb(key: str) -> float:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith(key + ":"))
    return int(line.split()[1]) / 1e6  # kB -> GB


def _query(what: str, path: str, lf: Any) -> Any:
    """The collected result of one grouped case, as ``bench_polars_expr.grouped`` runs it."""
    sys.path.insert(0, str(HERE))
    from bench_polars_expr import narwhals_path

    import conformal_frames as cf
    import conformal_frames.polars as cfx

    metric = cf.ks_test("label", "score") if what == "KS" else cf.ssc("y", "lo", "hi", n_bins=3)
    if path == "evaluate":
        return cf.evaluate(lf, metric, by="g").collect()
    if path == "cfx group_by().agg":
        return lf.group_by("g").agg(cfx.to_expr(metric)).collect()
    import polars as pl

    order = pl.col("score") if what == "KS" else (pl.col("hi") - pl.col("lo")).alias("width")
    if path == "hand: one sort per group":
        return lf.group_by("g").agg(order.sort()).collect()
    if path == "hand: sorted structs per group":
        inputs = [c for c in COLUMNS[what][1:] if c != "score"]
        return lf.group_by("g").agg(pl.struct(order, *inputs).sort_by(order)).collect()
    return narwhals_path(lambda: cf.evaluate(lf, metric, by="g").collect())


def child(what: str, path: str, file: str) -> None:
    import polars as pl

    gc.collect()
    before = _status_gb("VmRSS")
    df = pl.read_parquet(file)
    gc.collect()
    after = _status_gb("VmRSS")
    _query(what, path, df.head(1000).lazy())  # imports, memoized expressions
    gc.collect()
    base = _status_gb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    out = _query(what, path, df.lazy())
    peak = _status_gb("VmHWM")
    info = {"frame_rss": after - before, "frame": df.estimated_size() / 1e9, "base": base, "peak": peak}
    print(json.dumps({**info, "groups": out.height}))


def run(what: str, path: str, file: str) -> dict[str, float]:
    """One measurement in a subprocess of its own: the child's figures and its lifetime peak (GB)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", what, "--path", path, "--file", file],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{what} / {path} failed")
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    result["lifetime"] = usage.ru_maxrss / 1e6
    return result


def measure(rows: int, *, wide: bool, target: float = 1.5) -> None:
    """Print, per metric and path, the peak above the frame over the frame's size, with met/missed.

    ``wide``: the frame is the bench's eight columns (as 0.3's measure, a wider frame than the metric reads).
    """
    sys.path.insert(0, str(HERE))
    from bench_polars_expr import frame

    print(f"\n{'The bench frame, 8 columns' if wide else 'The columns the metric reads'}:\n")
    print(
        f"| grouped, {rows:.0e} rows, 1,000 groups, lazy | frame (estimated / RSS) | peak above the frame | ratio |",
        end="",
    )
    print(f" target <= {target}x |\n|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        full = frame(rows, 1000)
        files = {}
        for what, columns in COLUMNS.items():
            files[what] = str(Path(tmp) / f"{what[:3]}.parquet")
            (full if wide else full.select(columns)).write_parquet(files[what])
        del full
        for what in COLUMNS:
            for path in PATHS:
                r = run(what, path, files[what])
                above = r["peak"] - r["base"]
                ratio = above / r["frame"]
                verdict = "met" if ratio <= target else "missed"
                if path != PATHS[0] and path != PATHS[1]:
                    verdict = "informative"
                print(
                    f"| {what}, {path} | {r['frame']:.3f} / {r['frame_rss']:.3f} GB | {above:.3f} GB | "
                    f"{ratio:.2f}x | {verdict} (process peak {r['lifetime']:.2f} GB) |",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--child")
    parser.add_argument("--path")
    parser.add_argument("--file")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.path, args.file)
        return
    import polars as pl

    import conformal_frames as cf

    print(f"polars {pl.__version__}, conformal-frames {cf.__version__}")
    measure(args.rows, wide=False)
    measure(args.rows, wide=True)


if __name__ == "__main__":
    main()
