"""The ETL query of the 0.3 trial on PySpark ``local[2]`` against DuckDB (issue 38 item 9).

Not part of the test run.  One ``evaluate`` of 23 single-pass metrics by three keys (360 groups) on a
1e6-row Parquet file, read by Spark and by DuckDB; polars lazy on the same file for scale.

    python bench/etl_spark.py                 # 1e6 rows, best of 3
    python bench/etl_spark.py --rows 200000   # a quicker run

The trial's list of 23 metrics was not recorded; these are the 23 single-pass (cell) metrics an ETL
job over intervals, quantiles, point forecasts, a Gaussian forecast and probabilities would run.  Spark
runs at its default log level (WARN), as a user's session does; everything the JVM and Python write to
stderr during the Spark calls is captured and its line count printed (the trial saw a 240-line trace).
Each Spark call is a first call on a new ``DataFrame`` (nothing kept by ``engine/_plan_cache.py``).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

import conformal_frames as cf

QUANTILES = {0.05: "q05", 0.25: "q25", 0.5: "q50", 0.75: "q75", 0.95: "q95"}
KEYS = ["region", "product", "month"]  # 6 x 10 x 6 = 360 groups


def make_data(n: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 10, n)
    sigma = 0.3 + 0.2 * x
    mu = np.sin(x) + x / 2 + 5.0
    y = mu + sigma * rng.standard_normal(n)
    z = {0.05: -1.645, 0.25: -0.674, 0.5: 0.0, 0.75: 0.674, 0.95: 1.645}
    score = rng.beta(2, 2, n)
    logits = rng.standard_normal((n, 3))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y3 = (rng.random(n)[:, None] > np.cumsum(probs, axis=1)).sum(axis=1)
    cols: dict[str, Any] = {
        "region": rng.integers(0, 6, n).astype(np.int64),
        "product": rng.integers(0, 10, n).astype(np.int64),
        "month": rng.integers(1, 7, n).astype(np.int64),
        "y": y,
        "yhat": mu,
        "sd": sigma,
        "lo": mu - 1.645 * sigma,
        "hi": mu + 1.645 * sigma,
    }
    cols |= {name: mu + z[q] * sigma for q, name in QUANTILES.items()}
    cols |= {"label": (rng.random(n) < score).astype(np.int64), "score": score}
    cols |= {"y3": np.minimum(y3, 2).astype(np.int64), "p0": probs[:, 0], "p1": probs[:, 1], "p2": probs[:, 2]}
    return pl.DataFrame(cols)


def etl_metrics() -> list[Any]:
    """The 23 single-pass metrics of the ETL job."""
    probs = ["p0", "p1", "p2"]
    return [
        cf.coverage("y", "lo", "hi"),
        cf.width("lo", "hi"),
        cf.winkler("y", "lo", "hi", confidence_level=0.9),
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
        cf.quantile_coverage("y", quantiles=QUANTILES, per_level=False),
        cf.interval_coverage("y", intervals={0.5: ("q25", "q75"), 0.9: ("q05", "q95")}),
        cf.mae("y", "yhat"),
        cf.mse("y", "yhat"),
        cf.rmse("y", "yhat"),
        cf.bias("y", "yhat"),
        cf.mape("y", "yhat"),
        cf.smape("y", "yhat"),
        cf.pinball_loss("y", quantiles=QUANTILES),
        cf.wis("y", quantiles=QUANTILES),
        cf.crps("y", mean="yhat", std="sd"),
        cf.log_score("y", mean="yhat", std="sd"),
        cf.ece("label", "score", n_bins=10),
        cf.mce("label", "score", n_bins=10),
        cf.brier("label", "score"),
        cf.log_loss("label", "score"),
        cf.spiegelhalter_test("label", "score"),
        cf.confidence_ece("y3", probs, classes=[0, 1, 2]),
        cf.classwise_ece("y3", probs, classes=[0, 1, 2]),
    ]


class CaptureStderr:
    """Everything written to file descriptor 2 (Python and the JVM alike) while inside."""

    def __enter__(self) -> CaptureStderr:
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile(mode="w+b")
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode(errors="replace")
        self._file.close()


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )


def spark_variants(confs: list[str]) -> dict[str, dict[str, str]]:
    """The session's defaults, then one variant per ``--conf key=value`` (set around its calls only)."""
    variants: dict[str, dict[str, str]] = {"spark": {}}
    for conf in confs:  # "key=value" or "key=value,key2=value2" (one variant)
        pairs = dict(pair.partition("=")[::2] for pair in conf.split(","))
        variants["spark " + ",".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in pairs.items())] = pairs
    return variants


def with_conf(spark: Any, conf: dict[str, str], fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        saved = {key: spark.conf.get(key, None) for key in conf}
        for key, value in conf.items():
            spark.conf.set(key, value)
        try:
            return fn()
        finally:
            for key, value in saved.items():
                spark.conf.unset(key) if value is None else spark.conf.set(key, value)

    return run


def _swapped(name: str, value: Any, fn: Callable[[], Any]) -> Any:
    """``fn()`` with ``engine/_spark_build.py``'s ``name`` set to ``value``, put back after."""
    from conformal_frames.engine import _spark_build

    saved = getattr(_spark_build, name)
    setattr(_spark_build, name, value)
    try:
        return fn()
    finally:
        setattr(_spark_build, name, saved)


def fresh_columns(fn: Callable[[], Any]) -> Any:
    """``fn()`` with PySpark's ``lit``/``col`` made anew at every call while building (as before the memo)."""
    return _swapped("_KEPT_CALLS", frozenset(), fn)


def plain_build(fn: Callable[[], Any], keep: Callable[[tuple[Any, str, Any]], bool] = lambda patch: False) -> Any:
    """``fn()`` without the building thread's patches of ``engine/_spark_build.py`` (those ``keep`` keeps)."""
    from conformal_frames.engine import _spark_build

    patches = _spark_build._thread_patches
    return _swapped("_thread_patches", lambda: [p for p in patches() if keep(p)], fn)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--conf", action="append", default=[], help="also time Spark with key=value[,key=value]")
    parser.add_argument(
        "--fresh-columns", action="store_true", help="also time Spark with every lit/col made anew (before 0.4's memo)"
    )
    parser.add_argument(
        "--plain-build",
        action="store_true",
        help="also time Spark without the building thread's patches (narwhals' division, py4j lists and lookups,"
        " identity renames), and with all of them but the division",
    )
    args = parser.parse_args(argv)
    import duckdb

    metrics = etl_metrics()
    path = Path(tempfile.mkdtemp()) / "etl.parquet"
    make_data(args.rows).write_parquet(path)
    print(f"{len(metrics)} metrics, {args.rows:,} rows, 360 groups; Python {sys.version.split()[0]}", flush=True)
    with CaptureStderr() as start:
        spark = spark_session()
    con = duckdb.connect()

    builds: dict[str, list[float]] = {}  # the time of building the query (cf.evaluate), before Spark runs it

    def on_spark(name: str = "spark") -> Any:
        t0 = time.perf_counter()
        query = cf.evaluate(spark.read.parquet(str(path)), *metrics, by=KEYS)
        builds.setdefault(name, []).append(time.perf_counter() - t0)
        return query.toPandas()

    runs = {"duckdb": lambda: cf.evaluate(con.read_parquet(str(path)), *metrics, by=KEYS).df()}
    for name, conf in spark_variants(args.conf).items():
        runs[name] = with_conf(spark, conf, functools.partial(on_spark, name))
    if args.fresh_columns:
        runs["spark fresh lit/col"] = functools.partial(
            fresh_columns, functools.partial(on_spark, "spark fresh lit/col")
        )
    if args.plain_build:
        runs["spark plain build"] = functools.partial(plain_build, functools.partial(on_spark, "spark plain build"))
        runs["spark narwhals division"] = functools.partial(
            plain_build,
            functools.partial(on_spark, "spark narwhals division"),
            keep=lambda patch: patch[1] != "true_divide",
        )
    runs["polars"] = lambda: cf.evaluate(pl.scan_parquet(path), *metrics, by=KEYS).collect()
    with CaptureStderr() as err:
        first = timed(on_spark)
    times: dict[str, list[float]] = {name: [] for name in runs}
    loads: list[float] = []
    builds.clear()
    for _ in range(args.repeat):  # alternate the runs: the machine is shared
        for name, fn in runs.items():
            cf.engine._plan_cache.clear()
            times[name].append(timed(fn))
        loads.append(os.getloadavg()[0])
    print(f"stderr at session start: {len(start.text.splitlines())} lines", flush=True)
    print(f"stderr of the first Spark call: {len(err.text.splitlines())} lines ({first:.1f} s)", flush=True)
    for line in err.text.splitlines()[:12]:
        print("    " + line[:160])
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        ratio = f" = {med[name] / med['duckdb']:.1f}x DuckDB" if name.startswith("spark") else ""
        print(f"{name:>24}: median {med[name]:.2f} s of {', '.join(f'{x:.2f}' for x in t)}{ratio}", flush=True)
    for name, b in builds.items():
        print(
            f"{'build of ' + name:>24}: median {statistics.median(b):.2f} s (cf.evaluate, before Spark runs the query)"
        )
    print(f"load average (1 min) after each round: {', '.join(f'{x:.1f}' for x in loads)}")
    print("target: Spark <= 4x DuckDB", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
