"""Which metric runs lazily on which backend: prints the markdown table.

    python bench/backend_matrix.py            # pandas, polars, DuckDB, Dask, PySpark if installed

Each cell: ``lazy`` (stays a lazy query of that backend), ``eager`` (eager
frames only), ``polars-lazy`` (lazy on polars through map_batches, eager
elsewhere) or the error class when the backend cannot run it (the message
names the backend and the way out).
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from typing import Any

import numpy as np
import polars as pl

import conformal_frames as cf

warnings.simplefilter("ignore")


def data(n: int = 200, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    lo = np.round(rng.normal(size=n), 2)
    score = np.round(rng.uniform(size=n), 2)
    p = np.round(rng.uniform(size=(n, 3)), 2)
    return {
        "g": rng.choice(["a", "b"], size=n),
        "y": np.round(rng.normal(size=n), 2),
        "lo": lo,
        "hi": lo + np.round(rng.gamma(2.0, size=n), 1),
        "label": (rng.uniform(size=n) < score).astype(np.int64),
        "score": score,
        "cls": rng.integers(0, 3, n),
        "in0": p[:, 0] > 0.3,
        "in1": p[:, 1] > 0.3,
        "in2": p[:, 2] > 0.3,
        "p0": p[:, 0],
        "p1": p[:, 1],
        "p2": p[:, 2],
        "x1": rng.normal(size=n),
        "x2": rng.normal(size=n),
    }


SETS = dict(sets=["in0", "in1", "in2"], classes=[0, 1, 2])
METRICS = {
    "coverage, width, winkler, cwc": [
        cf.coverage("y", "lo", "hi"),
        cf.width("lo", "hi"),
        cf.winkler("y", "lo", "hi", confidence_level=0.9),
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
    ],
    "ssc, ssc_score": [cf.ssc_score("y", "lo", "hi")],
    "hsic": [cf.hsic("y", "lo", "hi")],
    "set_coverage, set_size, singleton/empty rate": [cf.set_coverage("cls", **SETS), cf.set_size(**SETS)],
    "set_ssc, set_ssc_score": [cf.set_ssc_score("cls", **SETS)],
    "efficiency_criteria": [cf.efficiency_criteria("cls", ["p0", "p1", "p2"], classes=[0, 1, 2], confidence_level=0.8)],
    "coverage_gap": [cf.coverage_gap("y", "lo", "hi", groups="cls", confidence_level=0.9)],
    "coverage_test (Wilson, exact binomial)": [cf.coverage_test("y", "lo", "hi", confidence_level=0.9)],
    "worst_slab_coverage": [cf.worst_slab_coverage("y", "lo", "hi", features=["x1", "x2"], n_directions=20)],
    "ece, mce, brier (uniform bins)": [cf.ece("label", "score"), cf.mce("label", "score"), cf.brier("label", "score")],
    "ece (quantile bins)": [cf.ece("label", "score", strategy="quantile")],
    "top_label_ece, classwise_ece": [
        cf.top_label_ece("cls", ["p0", "p1", "p2"], classes=[0, 1, 2]),
        cf.classwise_ece("cls", ["p0", "p1", "p2"], classes=[0, 1, 2]),
    ],
    "ks_test, kuiper_test": [cf.ks_test("label", "score"), cf.kuiper_test("label", "score")],
    "spiegelhalter_test": [cf.spiegelhalter_test("label", "score")],
    "auroc, auarc": [cf.auroc("label", "score"), cf.auarc("label", "score")],
}


def backends() -> dict[str, Any]:
    d = data()
    out: dict[str, Any] = {"polars (eager)": pl.DataFrame(d), "polars (lazy)": pl.DataFrame(d).lazy()}
    out["pandas"] = pl.DataFrame(d).to_pandas()
    if importlib.util.find_spec("duckdb"):
        import duckdb

        out["DuckDB"] = duckdb.connect().from_arrow(pl.DataFrame(d).to_arrow())
    if importlib.util.find_spec("dask"):
        import dask.dataframe as dd

        out["Dask"] = dd.from_pandas(pl.DataFrame(d).to_pandas(), npartitions=2)
    if importlib.util.find_spec("pyspark"):
        sys.path.insert(0, "tests")
        from conftest import spark_session

        spark = spark_session()
        spark.sparkContext.setLogLevel("OFF")  # codegen fallbacks are logged, results unaffected
        out["PySpark"] = spark.createDataFrame(pl.DataFrame(d).to_arrow())
    return out


def cell(frame: Any, metrics: list[Any]) -> str:
    import narwhals.stable.v2 as nw

    try:
        result = cf.evaluate(frame, *metrics, by="g")
    except NotImplementedError:
        return "collect first"
    except Exception as exc:  # a failure is shown, never hidden
        return f"FAILS: {type(exc).__name__}"
    native = nw.from_native(result)
    if isinstance(native, nw.LazyFrame):
        native.collect()
        return "lazy"
    return "eager"


def main() -> int:
    frames = backends()
    print("| metrics | " + " | ".join(frames) + " |")
    print("|---|" + "---|" * len(frames))
    for name, metrics in METRICS.items():
        print(f"| {name} | " + " | ".join(cell(f, metrics) for f in frames.values()) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
