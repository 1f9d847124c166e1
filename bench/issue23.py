"""Every target of issue 23 (bounded time and memory) from one run.

Runs each item's measurement (in subprocesses where a figure needs a fresh
process: peak memory, thread counts, import time, the Spark JVM), then
prints one table: item, target, figure, ratio to the target, met / missed.
Not part of the test run.

    python bench/issue23.py                        # items 1-9, about 10 minutes on 2 cores
    python bench/issue23.py --suite                # item 10 too: the README's test command, timed
    python bench/issue23.py --write docs/performance.md   # the table into the page, between its markers
    python bench/issue23.py --quick                # small sizes: a smoke run, figures not comparable

The measurements are those of ``bench_resources.py`` (items 1, 2),
``bench_memory_sorts.py`` (3), ``bench_resources_sorts.py`` (4, 5, 6) and
``bench_metrics.py --spark-only`` (9); this script only runs them together.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

BEGIN = "<!-- bench/issue23.py: begin -->"
END = "<!-- bench/issue23.py: end -->"


@dataclass
class Row:
    item: str
    what: str
    target: str
    figure: str
    #: figure / target where the target is a bound; None for a reported figure or a check
    ratio: float | None
    verdict: str


ROWS: list[Row] = []


def bound(item: str, what: str, figure: float, limit: float, unit: str, detail: str = "") -> None:
    """A figure against an upper bound (``figure <= limit``)."""
    ratio = figure / limit
    shown = f"{figure:.2f} {unit}" + (f" ({detail})" if detail else "")
    _add(Row(item, what, f"<= {limit:g} {unit}", shown, ratio, "met" if ratio <= 1 else "missed"))


def _add(row: Row) -> None:
    ROWS.append(row)
    ratio = "" if row.ratio is None else f" ({row.ratio:.2f}x the bound)"
    print(f"[{row.item}] {row.what}: {row.figure}{ratio} -> {row.verdict}", flush=True)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


# ---------------------------------------------------------------------------
# the items
# ---------------------------------------------------------------------------
def items_1_2(n: int) -> None:
    import bench_resources

    seconds, peak = bench_resources.run("bootstrap", n)
    what = f"bootstrap(ece) at its defaults, {n:,} rows x 5 segments"
    bound("1", f"{what}: time", seconds, 45.0, "s")
    bound("1", f"{what}: peak memory", peak, 3.0, "GB")
    seconds, _ = bench_resources.run("worst_slab", n)
    bound("2", f"worst_slab_coverage at its defaults, {n:,} rows, 2 features", seconds, 8.0, "s")


def item_3(n: int) -> None:
    import bench_memory_sorts

    for grouped in (True, False):
        for case in bench_memory_sorts.CASES:
            extra, frame = bench_memory_sorts.run(case, n, grouped)
            label = f"{'grouped (5 segments)' if grouped else 'ungrouped'} {case}, {n:,} rows: peak above the frame"
            bound("3", label, extra / frame, 1.0, "x the frame", f"{extra:.2f} GB, frame {frame:.2f} GB")


def items_4_5_6(n: int) -> None:
    import bench_resources_sorts as brs

    brs.ROWS.clear()
    brs.import_time()
    brs.per_call()
    brs.sorts(n)
    for target, measured, verdict, _note in brs.ROWS:
        item, _, what = target.partition(". ")
        what, _, limit = what.rpartition(": ") if ": <=" in what else (what, "", "")
        if not limit and " <= " in what:
            what, _, rest = what.partition(" <= ")
            limit = "<= " + rest
        ROWS.append(Row(item, what, limit or "-", measured, _ratio_of(measured, limit), _verdict(verdict)))


def _ratio_of(measured: str, limit: str) -> float | None:
    """figure / bound for the rows of bench_resources_sorts (``0.83x (...)``, ``+2.2 ms``, ``0.31 s``)."""
    bound_m = re.search(r"<= ([\d.]+)", limit)
    if not bound_m:
        return None
    b = float(bound_m.group(1))
    above = re.search(r"\(\+([\d.]+) ms\)", measured)
    first = re.match(r"([\d.]+)", measured)
    value = float(above.group(1)) if above else float(first.group(1)) if first else None
    return None if value is None else value / b


def _verdict(v: str) -> str:
    return "reported" if v == "-" else v


def item_7() -> None:
    """Progress on stderr: a bootstrap and a worst slab with ``progress=True`` (no terminal)."""
    code = (
        "import conformal_frames as cf\n"
        "from bench_metrics import make_data\n"
        "df = make_data(20_000, 3, seed=1)\n"
        "cf.evaluate(df, cf.bootstrap(cf.ece('label', 'score'), n_resamples=200), by='seg', progress=True)\n"
        "df.conformal.worst_slab_coverage('y', 'lo', 'hi', features=['x', 'score'], progress=True)\n"
    )
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env["PYTHONPATH"]])
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    lines = [x for x in re.split(r"[\r\n]", proc.stderr) if x.strip()]
    shown = f"{len(lines)} progress updates on stderr" + (f", last: {lines[-1].strip()[:60]!r}" if lines else "")
    _add(Row("7", "progress= on bootstrap and worst slab", "a bar on stderr", shown, None, _met(bool(lines))))


def item_8() -> None:
    """``summarize`` warns when its cells approach the rows, and ``score_decimals=`` keeps it small."""
    import warnings

    from bench_metrics import make_data

    import conformal_frames as cf

    df = make_data(50_000, 3, seed=1)
    metrics = [cf.ks_test("label", "score")]
    with warnings.catch_warnings(record=True) as raw:
        warnings.simplefilter("always")
        big = cf.summarize(df, *metrics, by="seg")
    with warnings.catch_warnings(record=True) as rounded_w:
        warnings.simplefilter("always")
        small = cf.summarize(df, *metrics, by="seg", score_decimals=3)
    warned = any("score_decimals" in str(w.message) for w in raw)
    quiet = not any("score_decimals" in str(w.message) for w in rounded_w)
    shown = (
        f"raw scores: {len(big):,} summary rows for 50,000 ({'warned' if warned else 'no warning'}); "
        f"score_decimals=3: {len(small):,} ({'no warning' if quiet else 'warned'})"
    )
    _add(
        Row("8", "summarize of raw probabilities", "a warning naming the way out", shown, None, _met(warned and quiet))
    )


def _met(ok: bool) -> str:
    return "met" if ok else "missed"


def item_9(rows: int) -> None:
    """PySpark, in a subprocess of its own (its JVM): ``bench_metrics.py --spark-only``."""
    args = [sys.executable, str(HERE / "bench_metrics.py"), "--spark-only", "--spark-rows", str(rows)]
    proc = subprocess.run(args, env=_env(), capture_output=True, text=True, check=True)
    found = False
    for line in proc.stdout.splitlines():
        # the repeated call (the figure), then a first call on a frame (no kept result)
        if ("hand-written groupBy" in line or "first evaluate on a frame" in line) and line.startswith("|"):
            what, ours, other, _shown, _target = (c.strip() for c in line.strip("|").split("|"))
            ratio = float(ours) / float(other)
            detail = f"{float(ours):.0f} / {float(other):.0f} ms"
            bound("9", what, ratio, 2.0, "x the hand-written query", detail)
            found = True
    if found:
        return
    _add(Row("9", "PySpark evaluate vs groupBy().agg()", "<= 2x", "no figure (see the script's output)", None, "-"))


def item_10(run: bool) -> None:
    what = "the whole test suite (the README's command), wall time"
    if not run:
        _add(Row("10", what, "<= 600 s", "not run here (pass --suite)", None, "-"))
        return
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=_env())
    seconds = time.perf_counter() - t
    tail = "" if proc.returncode == 0 else f"; pytest exit status {proc.returncode}"
    bound("10", what, seconds, 600.0, "s", f"{os.cpu_count()} cores{tail}")


# ---------------------------------------------------------------------------
# the table and the page
# ---------------------------------------------------------------------------
def table(started: str, load: float, args: argparse.Namespace) -> str:
    import narwhals
    import polars

    command = "python bench/issue23.py" + (" --suite" if args.suite else "") + (" --quick" if args.quick else "")
    head = (
        f"`{command}`, {started} on {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"polars {polars.__version__}, narwhals {narwhals.__version__}; load average {load:.2f} at the start. "
        "Ratio: the figure over its bound (at most 1 is met)."
    )
    lines = [head, "", "| item | what | target | figure | ratio | verdict |", "|---|---|---|---|---:|---|"]
    for r in sorted(ROWS, key=lambda r: int(r.item)):  # stable: each item's rows in their order
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}"
        lines.append(f"| {r.item} | {r.what} | {r.target} | {r.figure} | {ratio} | {r.verdict} |")
    return "\n".join(lines)


def write(page: Path, text: str) -> None:
    """Replace the block between the page's markers with ``text``."""
    content = page.read_text()
    if BEGIN not in content or END not in content:
        raise SystemExit(f"{page} has no {BEGIN} ... {END} block")
    before, rest = content.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    page.write_text(f"{before}{BEGIN}\n{text}\n{END}{after}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", action="store_true", help="item 10: run the test suite (about 13 minutes)")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--write", type=Path, help="a page to write the table into (between its markers)")
    args = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    scale = 10 if args.quick else 1
    items_1_2(1_000_000 // scale)
    item_3(10_000_000 // scale)
    items_4_5_6(5_000_000 // scale)
    item_7()
    item_8()
    item_9(200_000 // scale)
    item_10(args.suite)
    text = table(started, load, args)
    print("\n" + text)
    if args.write:
        write(args.write, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
